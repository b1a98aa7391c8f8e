"""The checker's pipeline rules: small programs over the subclass, compiled, must be observably identical to eager.

Purpose: the base rules (checker_rules.py) check the protocol piece by piece; these check what a user sees when the
pieces meet the compiler: an input mutated in place (data, then metadata), an output that aliases an input, a
recompile when the subclass's ctx changes, and torch's own compile stack (`aot_eager`). Each program runs on fresh
instances from the factory; `subclassaot.parity.compare_with_eager` lists every difference (outputs, inputs after
the call, `_base` and storage sharing, version counters). A program eager itself rejects for this class SKIPs its
rule, naming the op. See Note [Checker Rule Registry] in checker.py for how rules are run.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from subclassaot.api import CompiledFunction
from subclassaot.api import compile as subclassaot_compile
from subclassaot.checker_rules import Factory, Rule, fail, skip
from subclassaot.parity import EagerRaised, compare_with_eager
from subclassaot.protocol import is_traceable_subclass

__all__ = ["PIPELINE_RULES"]

_MAX_DIFFS = 8  # differences quoted in a reason; the rest are counted


@dataclass(frozen=True, slots=True, kw_only=True)
class _Program:
    """One program a rule compiles: its source (quoted in reasons) and the function."""

    source: str
    fn: Callable[[torch.Tensor], object]


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def _fresh(factory: Factory) -> torch.Tensor:
    x = factory()
    if not is_traceable_subclass(x):
        skip(f"the factory gave a {type(x).__name__}, which has no flatten protocol (see rule 'protocol')")
    return x


def _pick_program(factory: Factory, candidates: tuple[_Program, ...], what: str) -> _Program:
    """The first candidate eager runs on a fresh instance; SKIP (naming each eager error) when none runs."""
    errors: list[str] = []
    for program in candidates:
        try:
            program.fn(_fresh(factory))
        except Exception as e:  # whatever eager raises, the program is not legal for this class
            errors.append(f"`{program.source}` raises {_first_line(e)}")
            continue
        return program
    skip(f"eager rejects every {what} program for this class: " + "; ".join(errors))


def _format_diffs(diffs: tuple[str, ...]) -> str:
    shown = "\n".join(f"  - {d}" for d in diffs[:_MAX_DIFFS])
    more = f"\n  ... and {len(diffs) - _MAX_DIFFS} more" if len(diffs) > _MAX_DIFFS else ""
    return shown + more


def _compare(
    compiled: Callable[..., object], program: _Program, make: Callable[[], torch.Tensor], how: str, fix: str
) -> None:
    """Compare `compiled` with eager on fresh inputs from `make`; FAIL listing the differences, or the crash."""
    try:
        diffs = compare_with_eager(compiled, program.fn, lambda: (make(),))
    except EagerRaised as e:
        skip(f"eager raises on `{program.source}` for this class: {_first_line(e.error)}")
    except Exception as e:  # the compiled call crashed: that is this rule's failure, whatever the type
        fail(
            f"`{program.source}` compiled with {how} raised {_first_line(e)}; expected the result eager gives. "
            "Fix: subclassaot.explain(f, x) shows which stage rejects the subclass"
        )
    if diffs:
        fail(f"`{program.source}` compiled with {how} differs from eager (expected no difference):\n"
             f"{_format_diffs(diffs)}\n{fix}")


def _pipeline_compile(fn: Callable[[torch.Tensor], object]) -> CompiledFunction[[torch.Tensor], object]:
    return subclassaot_compile(fn, backend="eager")


_HOW = 'subclassaot.compile(f, backend="eager")'


# -- input mutations -------------------------------------------------------------------------------------------
def _mul_then_add(x: torch.Tensor) -> object:
    x.mul_(2)
    return x + 1


def _add_then_mul(x: torch.Tensor) -> object:
    x.add_(1)
    return x * 2


def check_data_mutation(factory: Factory) -> None:
    """An input mutated in place (`x.mul_(2)`) and then read: the compiled call's output and x match eager.

    The pipeline traces a functional graph and copies the new values back into x's inner tensors afterwards; a
    subclass whose in-place op does not write into its inner tensors (it rebinds an attribute, or behaves
    differently on the FakeTensor / FunctionalTensor inner tensors of a trace) loses the mutation here.
    """
    candidates = (
        _Program(source="x.mul_(2); return x + 1", fn=_mul_then_add),
        _Program(source="x.add_(1); return x * 2", fn=_add_then_mul),
    )
    program = _pick_program(factory, candidates, "in-place")
    fix = (
        "Fix: an in-place op must write into the inner tensors (run the in-place op on each, or inner.copy_(new)), "
        "never rebind them (x.a = x.a * 2), and must do the same on the FakeTensor / FunctionalTensor inner "
        "tensors of a trace as on real ones"
    )
    _compare(_pipeline_compile(program.fn), program, lambda: _fresh(factory), _HOW, fix)


def _t_then_mul(x: torch.Tensor) -> object:
    x.t_()
    return x * 2


def _unsqueeze_then_mul(x: torch.Tensor) -> object:
    x.unsqueeze_(0)
    return x * 2


def check_metadata_mutation(factory: Factory) -> None:
    """An in-place view op on an input (`x.t_()` for a 2-d instance, else `x.unsqueeze_(0)`), then an output.

    The compiled call must leave x with eager's size, stride, inner tensors and ctx, and return eager's output:
    the pipeline replays the metadata change on the real input after the graph runs.
    """
    unsqueeze = _Program(source="x.unsqueeze_(0); return x * 2", fn=_unsqueeze_then_mul)
    two_d = _fresh(factory).dim() == 2
    candidates = (_Program(source="x.t_(); return x * 2", fn=_t_then_mul), unsqueeze) if two_d else (unsqueeze,)
    program = _pick_program(factory, candidates, "in-place view")
    _compare(_pipeline_compile(program.fn), program, lambda: _fresh(factory), _HOW)
