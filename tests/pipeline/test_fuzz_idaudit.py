"""id() reuse in the swap record (Note [Storage Swaps By Rebinding]): the record names tensors by id(), and a tensor the
program drops must not hand what the record says about it to a later tensor that CPython puts at its address.

The programs drop the results of multi-output ops that are no views (sort, max), which no list of the run kept
alive: each test checks that the program passes the oracle, and (not with --identity-compile) that every id() the
record holds names a tensor the record keeps alive, and that no dropped result of a run shared its id() with a later
tensor of that run (in eager they do: the test checks that too, to show the programs do force the reuse)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch.overrides import _get_current_function_mode_stack

import subclassaot
import subclassaot.pipeline.functional_run
from subclassaot.pipeline.rules.storage_swaps import _DataMode
from subclassaot.pipeline.rules.swap_record import SwapRecord
from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, nonleaf, pair, pair_nonleaf

T = torch.Tensor
_N = 12  # dropped temporaries per program: enough that CPython gives a later tensor one of their addresses
_MANY = 40  # ... enough that one of those is an output that the analysis asks about (3 runs in 4 before the pins)


class _Ids:
    """The ids of the program's dropped and kept tensors per run: by the run's SwapRecord (its position in
    `records`), -1 for runs outside the swap modes (eager, and the pipeline's probes of eager's backward)."""

    def __init__(self, records: list[SwapRecord]) -> None:
        self.records = records
        self.runs: dict[int, tuple[list[int], list[int]]] = {}

    def _run(self) -> tuple[list[int], list[int]]:
        stack = _get_current_function_mode_stack()  # type: ignore[no-untyped-call]  # untyped in torch
        modes = [m for m in stack if isinstance(m, _DataMode)]
        at = next((k for k, r in enumerate(self.records) if modes and r is modes[-1].record), -1)
        return self.runs.setdefault(at, ([], []))

    def dropped(self, t: T) -> None:
        self._run()[0].append(id(t))

    def kept(self, t: T) -> None:
        self._run()[1].append(id(t))


@pytest.fixture
def records(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[SwapRecord]]:
    """Every SwapRecord the functional runs make, from the test's start."""
    made: list[SwapRecord] = []

    def make(**kwargs: Any) -> SwapRecord:
        made.append(SwapRecord(**kwargs))
        return made[-1]

    monkeypatch.setattr(subclassaot.pipeline.functional_run, "SwapRecord", make)
    yield made


def _unpinned(record: SwapRecord) -> list[tuple[str, int]]:
    """The id()s the record holds (set members, dict keys, the version-counter families) that name no tensor it
    keeps alive (the `._base` of one it keeps counts: a family root). Negative numbers are families of inputs."""
    alive = set(record.pinned)
    alive.update(id(t._base) for t in record.pinned.values() if isinstance(t, torch.Tensor) and t._base is not None)
    found: list[tuple[str, int]] = []
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.name == "pinned" or not isinstance(value, set | dict):
            continue
        numbers = [*value, *(value.values() if isinstance(value, dict) and f.name == "family" else ())]
        found.extend((f.name, k) for k in numbers if type(k) is int and k >= 0 and k not in alive)
    return found


def _check(
    f: Callable[..., object],
    make_inputs: Callable[[], tuple[object, ...]],
    compile_fn: CompileFn | None,
    records: list[SwapRecord],
    ids: _Ids,
    *,
    grad: bool,
    eager_reuse: bool = True,
) -> None:
    """The oracle; then `f` eager, which gives a dropped tensor's address to a later one (not checked where
    `eager_reuse` is False: a PairTensor's dropped results may stay alive through their inner tensors' histories);
    then compiled, whose every run keeps them apart."""
    # The programs note ids into `_Ids`, a Python side effect for the test's eyes only, which the Python-state guards
    # would refuse (Note [Python State Is Snapshotted, Not Recorded]): compiled without them.
    unguarded = compile_fn or functools.partial(subclassaot.compile, python_state_guards=False)
    (check_with_grad if grad else check_no_grad)(f, make_inputs, unguarded)
    records.clear()
    ids.runs.clear()
    with torch.set_grad_enabled(grad):
        f(*make_inputs())  # eager: the dropped tensors' addresses go to later ones
    dropped, kept = ids.runs[-1]
    reused = len(set(dropped)) < len(dropped) or set(dropped) & set(kept)
    assert reused or not eager_reuse, "the program forced no id() reuse in eager"
    if compile_fn is not None:
        return
    ids.runs.clear()
    with torch.set_grad_enabled(grad):
        subclassaot.compile(f, backend="eager", python_state_guards=False)(*make_inputs())
    ids.runs.pop(-1, None)
    assert records and ids.runs, "the program never ran under the swap modes"
    for record in records:
        assert not _unpinned(record)
    for dropped, kept in ids.runs.values():
        assert len(set(dropped)) == len(dropped) and not set(dropped) & set(kept), "a run reused a tensor's id()"


def test_output_of_sort_takes_no_set_under_grad_of_a_dropped_one(
    compile_fn: CompileFn | None, records: list[SwapRecord]
) -> None:
    # SwapRecord.grad_set_ids (x.set_(x) under grad): a sort result set_() to itself and dropped, then views of new
    # sort results returned. Before the pins, a new result at a dropped one's address was taken for set_() under
    # grad: its view's backward raised "derivative for set_ is not implemented" where eager's ran (3 runs in 4).
    ids = _Ids(records)

    def f(x: T) -> object:
        outs = []
        for _ in range(_MANY):
            v, i = x.sort(0)
            v.set_(v)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
            ids.dropped(v)
            ids.dropped(i)
            del v, i
            w, i = x.sort(0)
            ids.kept(w)
            outs.append(w[1:])
        return outs

    _check(f, lambda: (nonleaf(4, 3),), compile_fn, records, ids, grad=True)


def test_outputs_of_sort_after_dropped_ones_set_under_grad(
    compile_fn: CompileFn | None, records: list[SwapRecord]
) -> None:
    # The same, the new results returned themselves, and a PairTensor input (grad_set_ids, wrapper_grad_sets).
    ids = _Ids(records)

    def f(x: T) -> object:
        outs = []
        for _ in range(_N):
            v, i = x.sort(0)
            v.set_(v)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
            ids.dropped(v)
            del i, v  # v last: the next tensor made takes its address
            w = x.sort(0)[0]
            ids.kept(w)
            outs.append(w)
        return outs

    _check(f, lambda: (nonleaf(4, 3),), compile_fn, records, ids, grad=True)
    _check(f, lambda: (pair_nonleaf(4, 3),), compile_fn, records, ids, grad=True, eager_reuse=False)


def test_views_of_max_after_dropped_ones_grown(compile_fn: CompileFn | None, records: list[SwapRecord]) -> None:
    # SwapRecord.grown_ids (resize_() beyond the storage): max results grown and dropped, then views of new ones.
    ids = _Ids(records)

    def f(x: T) -> object:
        outs = []
        for _ in range(_N):
            v, i = x.max(0)
            v.resize_(40)
            ids.dropped(v)
            del i, v  # v last: the next tensor made takes its address
            w = x.max(0)[0]
            ids.kept(w)
            outs.append(w[1:])
        return outs

    _check(f, lambda: (torch.randn(4, 3),), compile_fn, records, ids, grad=False)
    _check(f, lambda: (pair(4, 3),), compile_fn, records, ids, grad=False, eager_reuse=False)


def test_data_assigned_sort_results_after_dropped_reads(
    compile_fn: CompileFn | None, records: list[SwapRecord]
) -> None:
    # SwapRecord.grad_read / kept_accumulators / fresh_accumulators (Note [Accumulators Kept Through .data =]):
    # sort results read with grad and dropped, then new ones given other data by `.data =` and read again.
    ids = _Ids(records)

    def f(x: T, y: T) -> object:
        outs = []
        for _ in range(_N):
            v, i = x.sort(0)
            outs.append(v.mul(2).sum())
            ids.dropped(v)
            del i, v  # v last: the next tensor made takes its address
            w = x.sort(0)[0]
            ids.kept(w)
            w.data = y
            outs.append(w.mul(3))
        return outs

    _check(f, lambda: (nonleaf(4, 3), torch.randn(4, 3)), compile_fn, records, ids, grad=True)


def test_written_sort_results_dropped_under_no_grad_and_with_grad(
    compile_fn: CompileFn | None, records: list[SwapRecord]
) -> None:
    # The version-counter families (written_families, visible_families, visible_seq) of written sort results,
    # dropped, then new results written through views and returned; called with grad and without.
    ids = _Ids(records)

    def f(x: T) -> object:
        outs = []
        for _ in range(_N):
            v, i = x.sort(0)
            v[0].mul_(2)
            ids.dropped(v)
            del i, v  # v last: the next tensor made takes its address
            w = x.sort(0)[0]
            ids.kept(w)
            t = w[1:]
            with torch.no_grad():
                w.add_(1)
            outs.append(t)
        return outs

    _check(f, lambda: (nonleaf(4, 3),), compile_fn, records, ids, grad=True)
    _check(f, lambda: (torch.randn(4, 3),), compile_fn, records, ids, grad=False)
    _check(f, lambda: (pair_nonleaf(4, 3),), compile_fn, records, ids, grad=True, eager_reuse=False)
