"""The analysis's fact of view inputs whose history eager rebuilds from their base (Note [Views That Raise After A
Bump], view inputs rebuilt from their base), against eager: per case (a leaf view or one with history, its base
flagged before or after the write or never, the write under no_grad or a set_() onto itself inside inference_mode,
reads before and after it), whether eager rebuilt the input's history at a read of the program (its read's edge is
AsStridedBackward0), at which read it first did, and whether it rebuilds it at a read after the program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline import grad_scope
from subclassaot.pipeline.rules import storage_swaps
from subclassaot.pipeline.rules.autograd_state import base_rebuild
from subclassaot.pipeline.rules.swap_record import SwapRecord
from tests.pipeline.corpus import set_to

T = torch.Tensor

# the program's reads of the view input with grad, by op: before the write, after it
READS = {"before": "sum", "after": "mul"}


def _inputs(kind: str) -> tuple[T, T]:
    """(x0, its `._base`): x0 a leaf view taken of a base requiring no grad; one with history from a base requiring
    grad; one with history through a view of its base made to require grad itself (the base requiring none)."""
    if kind == "leaf":
        b0 = torch.randn((2, 3))
        return b0.expand((2, 3)), b0
    if kind == "history":
        b0 = torch.randn((2, 3), requires_grad=True)
        return b0[:], b0
    b0 = torch.randn((3, 3))
    return b0[1:].requires_grad_()[:], b0


def _program(kind: str, flag: str, write: str, reads: tuple[str, ...]) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        if kind == "leaf":
            x0.requires_grad = True
        if flag == "before":
            x1.requires_grad = True
        out = [x0.sum(1)] if "before" in reads else []
        if write == "no_grad":
            with torch.no_grad():
                x1.add_(1.0)
        else:
            with torch.inference_mode():
                set_to(x0, x0)
        if flag == "after":
            x1.requires_grad = True
        if "after" in reads:
            out.append(x0.mul(2.0))
        return tuple(out)

    return f


def _eager(f: Callable[[T, T], object], kind: str, reads: tuple[str, ...]) -> tuple[list[str], bool]:
    """Eager's reads at which it first rebuilt x0's history (their output's edge to x0 is AsStridedBackward0, x0's
    earlier read's was not), and whether x0's history is rebuilt at a read after the program."""
    x0, x1 = _inputs(kind)
    out = f(x0, x1)
    assert isinstance(out, tuple)
    edges = [type(o.grad_fn.next_functions[0][0]).__name__ for o in out]
    rebuilt = [read for read, edge in zip(reads, edges, strict=True) if edge == "AsStridedBackward0"]
    return [READS[read] for read in rebuilt[:1]], type(x0.grad_fn).__name__ == "AsStridedBackward0"


def _analysis(f: Callable[[T, T], object], kind: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], bool, bool]:
    """The analysis run's fact of x0: the ops at which it noted a rebuild, whether x0 rebuilds at a read after the
    program, and whether a read before its first rebuild made its accumulator."""
    records: list[SwapRecord] = []
    noted: list[str] = []
    check = grad_scope.check_regenerated_view_input_reads

    def spy(record: SwapRecord, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: object) -> None:
        if not records:
            records.append(record)
        before = sum(len(v) for v in record.base_rebuilds.values())
        try:
            check(record, name, args, kwargs, out)
        finally:
            if record is records[0] and sum(len(v) for v in record.base_rebuilds.values()) > before:
                noted.append(name.split(".")[-1])

    monkeypatch.setattr(storage_swaps, "check_regenerated_view_input_reads", spy)
    try:
        subclassaot.compile(f)(*_inputs(kind))
    except UnsupportedError:
        pass  # (the fact is what this checks; the rules reading it refuse some of these)
    (record,) = records
    found = base_rebuild(record, record.run_inputs[0])
    assert found is not None
    return noted[:1], found.rebuilds, found.read_before


CASES = [
    (kind, flag, write, reads)
    for kind, flags in (("leaf", ("before", "after", "never")), ("history", ("never",)), ("through", ("never",)))
    for flag in flags
    for write in ("no_grad", "inference_set")
    for reads in (("before",), ("after",), ("before", "after"))
]


@pytest.mark.parametrize(
    ("kind", "flag", "write", "reads"), CASES, ids=["-".join(c[:3]) + "-" + "_then_".join(c[3]) for c in CASES]
)
def test_view_input_rebuilt_from_its_base_as_eager(
    kind: str, flag: str, write: str, reads: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    f = _program(kind, flag, write, reads)
    with torch.enable_grad():
        rebuilt_at, rebuilds_after = _eager(f, kind, reads)
        noted, rebuilds, read_before = _analysis(f, kind, monkeypatch)
    assert noted == rebuilt_at
    assert rebuilds == rebuilds_after
    # (a read that found the history it came with: for a leaf, its accumulator, which a rebuild leaves behind)
    assert read_before == ("before" in reads or not rebuilt_at)


@pytest.mark.parametrize("kind", ["leaf", "history"])
def test_view_input_unwritten_is_not_rebuilt(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No write moves its counter: eager keeps the history it came with (a leaf's, none), and the analysis has no
    fact for it."""

    def f(x0: T, x1: T) -> object:
        if kind == "leaf":
            x0.requires_grad = True
        x1.requires_grad = True
        return (x0.mul(2.0),)

    records: list[SwapRecord] = []
    check = grad_scope.check_regenerated_view_input_reads

    def spy(record: SwapRecord, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: object) -> None:
        records.append(record)
        check(record, name, args, kwargs, out)

    monkeypatch.setattr(storage_swaps, "check_regenerated_view_input_reads", spy)
    with torch.enable_grad():
        x0, x1 = _inputs(kind)
        f(x0, x1)
        assert type(x0.grad_fn).__name__ != "AsStridedBackward0"
        subclassaot.compile(f)(*_inputs(kind))
    assert records
    assert base_rebuild(records[0], records[0].run_inputs[0]) is None
