"""The Python writes a compiled entry makes after its graph returned: the program's assignments of plain values to the
state it reads (Note [State The Program Reads], "Writes").

Input: the writes a compile found, each a container bound by reference, how it is written, the key and the value.
Output: `replaying(run, writes)`, the runner that runs and then makes them; `write_lines`, the same writes as lines of
a generated function (runtime/straight_line.py `with_writes`).
Invariants: every value is immutable (an atom: None, a number, a string, a dtype, an enum, a tuple of them) and is
bound by reference, never written into source; the writes are made in the order the compile found them, and only
after the graph returned (a call that raises makes none); imports nothing from the analysis.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Runner = Callable[[Sequence[object], dict[str, int]], object]


class WriteHow(enum.Enum):
    SETITEM = "setitem"  # container[key] = value: a dict (a module's or an object's __dict__, globals) or a list
    SETATTR = "setattr"  # object.__setattr__(container, key, value): a slot of an object without a __dict__
    CELL = "cell"  # container.cell_contents = value: a closure cell (key unused)


@dataclass(frozen=True, slots=True, kw_only=True)
class PythonWrite:
    container: object  # bound by reference
    how: WriteHow
    key: object
    value: object  # immutable
    label: str  # the user-facing path of the value written ("self.config.problem_type")


def apply_writes(writes: Sequence[PythonWrite]) -> None:
    for w in writes:
        if w.how is WriteHow.SETITEM:
            w.container[w.key] = w.value  # type: ignore[index]  # (a dict or a list: WriteHow.SETITEM)
        elif w.how is WriteHow.SETATTR:
            object.__setattr__(w.container, str(w.key), w.value)
        else:
            w.container.cell_contents = w.value  # type: ignore[attr-defined]  # (a cell: WriteHow.CELL)


def replaying(run: Runner, writes: Sequence[PythonWrite]) -> Runner:
    """`run`, then the writes (only where it returned)."""
    frozen = tuple(writes)

    def run_and_write(values: Sequence[object], symbols: dict[str, int]) -> object:
        out = run(values, symbols)
        apply_writes(frozen)
        return out

    return run_and_write


def write_lines(writes: Sequence[PythonWrite], bind: Callable[[object], str]) -> list[str]:
    """The writes as statements (no indentation) over names `bind` binds to the containers, keys and values."""
    lines = []
    for w in writes:
        c, v = bind(w.container), bind(w.value)
        if w.how is WriteHow.SETITEM:
            lines.append(f"{c}[{bind(w.key)}] = {v}")
        elif w.how is WriteHow.SETATTR:
            lines.append(f"{bind(object.__setattr__)}({c}, {bind(str(w.key))}, {v})")
        else:
            lines.append(f"{c}.cell_contents = {v}")
    return lines
