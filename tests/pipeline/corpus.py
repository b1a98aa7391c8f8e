"""Shared vocabulary of the pipeline corpus: a `Case` is one program, its inputs, and how to check it.

Input: programs written in the corpus modules. Output: pytest parameters, one per (case, backend).
Invariants: every case is correct against eager semantics (`pytest tests/pipeline --identity-compile` passes);
a case whose program eager rejects says so (`eager_raises=True`) and is checked with `assert_raises_like_eager`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

from tests.oracle import Call, CompileFn, assert_matches_eager, assert_raises_like_eager

__all__ = ["Case", "identity_compile", "inp", "params", "ported_as", "run_case", "set_to"]

MakeInputs = Callable[[], tuple[object, ...] | Call]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One corpus program. `inductor=True` also runs it on the inductor backend (keep that subset small)."""

    name: str
    fn: Callable[..., object]
    make_inputs: MakeInputs
    after_call: Callable[[object, tuple[object, ...]], object] | None = None
    inductor: bool = False
    eager_raises: bool = False
    check_grads: bool | None = None
    compile_kwargs: dict[str, object] = dataclasses.field(default_factory=dict)


def identity_compile(fn: Callable[..., object], **kwargs: object) -> Callable[..., object]:
    return fn


# Programs the pipeline does not yet run like eager ("corpus:name"), each with the gap in words. They stay in the corpus as strict
# xfails, so fixing a gap turns its test red until the entry here is removed (and --identity-compile drops them).
KNOWN_GAPS: dict[str, str] = {}


def params(cases: Sequence[Case], corpus: str) -> list[object]:
    """One pytest param per case on the eager backend, plus one on inductor for the cases that ask for it."""
    names = [c.name for c in cases]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"duplicate case names: {sorted(duplicates)}")

    def marks(c: Case) -> list[pytest.MarkDecorator]:
        gap = KNOWN_GAPS.get(f"{corpus}:{c.name}")
        return [pytest.mark.xfail(strict=True, reason=f"known gap: {gap}")] if gap else []

    out: list[object] = [pytest.param(c, "eager", id=c.name, marks=marks(c)) for c in cases]
    out += [pytest.param(c, "inductor", id=f"{c.name}-inductor", marks=marks(c)) for c in cases if c.inductor]
    return out


def backend_params(cases: Sequence[Case]) -> list[object]:
    """(case, backend) params: every case on the eager backend, and on inductor where the case asks for it."""
    out: list[object] = []
    for c in cases:
        out.append(pytest.param(c, "eager", id=c.name))
        if c.inductor:
            out.append(pytest.param(c, "inductor", id=f"{c.name}-inductor"))
    return out


def run_case(case: Case, backend: str, compile_fn: CompileFn | None) -> None:
    if case.eager_raises:
        assert_raises_like_eager(
            case.fn, case.make_inputs, backend=backend, compile_kwargs=case.compile_kwargs, compile_fn=compile_fn
        )
        return
    assert_matches_eager(
        case.fn,
        case.make_inputs,
        backend=backend,
        compile_kwargs=case.compile_kwargs,
        after_call=case.after_call,
        check_grads=case.check_grads,
        compile_fn=compile_fn,
    )


def set_to(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """`x.set_(y)`; torch's stubs only list the storage overloads of `set_`."""
    out: torch.Tensor = x.set_(y)  # type: ignore[call-overload]
    return out


def inp(t: torch.Tensor, two: bool, rg: bool = False) -> torch.Tensor:
    """`t` as an input (a leaf): itself, or a TwoTensor of it and its clone; with requires_grad `rg`."""
    out: torch.Tensor = TwoTensor(t, t.clone()) if two else t  # type: ignore[no-untyped-call]
    return out.requires_grad_(rg)


def ported_as(prefix: str) -> Callable[..., list[Case]]:
    """A part's `ported(name, fn, make, **kwargs)`: the program as written (`<prefix>_<name>`) and on TwoTensor
    inputs (`<prefix>_two_<name>`); `make(two)` builds the inputs either way."""

    def ported(
        name: str, fn: Callable[..., object], make: Callable[[bool], tuple[object, ...]], **kwargs: object
    ) -> list[Case]:
        return [
            Case(name=f"{prefix}_{name}", fn=fn, make_inputs=lambda: make(False), **kwargs),  # type: ignore[arg-type]
            Case(name=f"{prefix}_two_{name}", fn=fn, make_inputs=lambda: make(True), **kwargs),  # type: ignore[arg-type]
        ]

    return ported
