"""One compiled entry's guards and runner as one generated function: the per-call path of a plain positional call.

Input: the guards' fast check and its source (guards.Guards.check_source), the flat inputs it checks in one C call,
the entry's straight-line runner (straight_line.EntryRunner) and the flat indices of the tensor inputs. Output: a
function of the flat inputs returning the entry's result, or `MISS` where a guard fails (the caller tries the next
entry, then the full lookup); None where the two cannot be joined. Invariants: Note [Straight-Line Runners], "one
function per entry".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from typing import Final, cast

from subclassaot.runtime.straight_line import EntryRunner

EntryFn = Callable[[Sequence[object]], object]


class _Miss:
    """The result of an entry function whose guards fail (no entry's result is this object)."""

    def __repr__(self) -> str:
        return "MISS"


MISS: Final = _Miss()

# The fast check's returns: the success (the symbols' dict), and its failures, handed to the detailed check or to
# the Python state's slow path.
_SUCCESS = re.compile(r"^( *)return (\{.*\})$")
_PREFIX = "_g_"  # the guards' globals, renamed apart from the runner's
_FAILURES = (f"return {_PREFIX}_detail(L)", f"return {_PREFIX}_then(L, ")
_FAILURE_NAMES = ("_miss_detail", "_miss_then")
_WITH = f"    with {_PREFIX}_no_subclass_functions():"


def entry_function(
    check: Callable[..., object],
    check_source: str,
    one_call: Collection[int],
    runner: EntryRunner,
    tensor_indices: Sequence[int],
) -> EntryFn | None:
    """The guards' fast check (compiled from `check_source`) and then `runner`'s body, as one function (Note
    [Straight-Line Runners], "one function per entry"); None where they cannot be joined."""
    run, run_source = runner.run, runner.source
    if not check_source.startswith("def check(L):\n") or run_source is None:
        return None
    code, run_code = getattr(check, "__code__", None), getattr(run, "__code__", None)
    if code is None or run_code is None or run_code.co_filename != "<subclassaot runner>":
        return None
    if runner.checked is not None and set(tensor_indices) <= set(one_call):
        run_source = runner.checked  # every tensor input's dispatch keys checked: no transform, no dead wrapper
    check_globals, run_globals = cast(dict[str, object], check.__globals__), cast(dict[str, object], run.__globals__)
    # The function runs with the runner's own globals, which the runner's settling graph call rebinds once its
    # wrapper is needless (straight_line's `when_settled`); the guards' globals join them renamed (`_c3` -> `_g__c3`).
    check_names = [name for name in check_globals if name != "__builtins__" and name != "check"]
    locals_ = set(code.co_varnames) | set(run_code.co_varnames)
    if set(code.co_varnames) & set(run_code.co_varnames) - {"L", "symbols"} or locals_ & set(run_globals):
        return None
    if any(name in run_globals or name in locals_ for name in ("entry", *_FAILURE_NAMES)):
        return None
    check_lines = _renamed(check_source.rstrip("\n").split("\n")[1:], check_names)
    body = run_source.split("\n")[1:]
    reads_symbols = any(re.search(r"\bsymbols\b", line) for line in body)
    lines = _joined(check_lines, body, reads_symbols)
    if lines is None:
        return None
    run_globals.update({_PREFIX + name: check_globals[name] for name in check_names})
    run_globals.update(_failures(check_globals, run))
    exec(compile("def entry(L):\n" + "\n".join(lines) + "\n", "<subclassaot entry>", "exec"), run_globals)
    return cast(EntryFn, run_globals.pop("entry"))


def _renamed(lines: list[str], names: Sequence[str]) -> list[str]:
    """The guards' lines with their globals renamed apart from the runner's (`_c3` -> `_g__c3`): our own names only."""
    if not names:
        return lines
    pattern = re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")\b")
    return [pattern.sub(lambda m: _PREFIX + m.group(1), line) for line in lines]


def _joined(check: list[str], body: list[str], reads_symbols: bool) -> list[str] | None:
    """The check's lines with its success return replaced by the runner's body (`body`, its `def` line dropped), its
    failures handed to `_miss_detail` / `_miss_then`; None where the check has another shape."""
    successes = [k for k, line in enumerate(check) if _SUCCESS.match(line)]
    returns = [line.strip() for line in check if line.strip().startswith("return ")]
    if len(successes) != 1 or any(not r.startswith(_FAILURES) and not _SUCCESS.match(" " + r) for r in returns):
        return None
    out = [line.replace(_FAILURES[0], "return _miss_detail(L)") for line in check]
    out = [line.replace(_FAILURES[1], "return _miss_then(L, ") for line in out]
    at = successes[0]
    match = _SUCCESS.match(check[at])
    assert match is not None
    indent, symbols = match.group(1), match.group(2)
    if _WITH not in check:  # the success at the body's top level: the runner's body in its place
        if len(indent) != 4 or at != len(check) - 1:
            return None
        return [*out[:at], *([f"    symbols = {symbols}"] if reads_symbols else []), *body, *out[at + 1 :]]
    # Inside `with _no_subclass_functions(): while True:` (a failure `break`s out): the runner's body after it,
    # outside the context, where the loop ended by the success.
    start = out.index(_WITH)
    if out[-1] != "    return _miss_detail(L)" or at < start:
        return None
    out[at] = f"{indent}symbols = {symbols}"
    out.insert(at + 1, f"{indent}break")
    out.insert(start, "    symbols = None")
    return [*out[:-1], "    if symbols is None:", "        return _miss_detail(L)", *body]


def _failures(check_globals: dict[str, object], run: Callable[..., object]) -> dict[str, object]:
    """The failure paths: the detailed check (or the Python state's slow path), then the runner where it passes."""
    names: dict[str, object] = {}
    detail = cast(Callable[[Sequence[object]], object] | None, check_globals.get("_detail"))
    then = cast(Callable[[Sequence[object], int], object] | None, check_globals.get("_then"))
    if detail is not None:

        def miss_detail(values: Sequence[object]) -> object:
            bound = detail(values)
            return run(values, bound) if type(bound) is dict else MISS

        names["_miss_detail"] = miss_detail
    if then is not None:

        def miss_then(values: Sequence[object], failed: int) -> object:
            bound = then(values, failed)
            return run(values, bound) if type(bound) is dict else MISS

        names["_miss_then"] = miss_then
    return names
