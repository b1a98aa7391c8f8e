"""An in-place elementwise op that reads memory it writes at another index: exact where eager's CPU loop reads
every such location no later than it writes it (Note [In-Place Ops As Eager Runs Them]); refused
where eager reads a value the op already changed, or where the loop order is out of reach; raises where eager's
TensorIterator raises (partial overlap of dense tensors)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError
from tests.oracle import CompileFn, assert_matches_eager, assert_raises_like_eager
from tests.pipeline.program_helpers import assert_refused

T = torch.Tensor
OVERLAPPING_READ = r"reads part of the memory it writes .*\(Note \[In-Place Ops As Eager Runs Them\]\)"
Make = Callable[[], tuple[object, ...]]


def column_plus_row(x: T) -> object:  # location (2, 1) is read at index 1, written at index 2
    x[:, 1].add_(x[2])
    return x


def column_times_its_last(x: T) -> object:  # 3x3: (2, 1) read at every index, written at the last
    x[:, 1].mul_(x[2, 1])
    return x * 1


def column_addcmul(x: T) -> object:
    x[:, 0].addcmul_(x[-1], x[:, 2])
    return x.sum(0)


def diagonal_minus_last_row(x: T) -> object:
    out = x.clone()
    out.diagonal().sub_(out[-1])  # (n-1, n-1) read and written at the last index only
    return out


def _square(n: int = 3, *, grad: bool = False) -> Make:
    def make() -> tuple[object, ...]:
        x = torch.randn(n, n, requires_grad=grad)
        return ((x * 1) if grad else x,)

    return make


@pytest.mark.parametrize(
    ("f", "make_inputs"),
    [
        (column_plus_row, _square()),
        (column_plus_row, _square(40)),
        (column_plus_row, _square(3, grad=True)),
        (column_times_its_last, _square()),
        (column_addcmul, _square(4)),
        (diagonal_minus_last_row, _square(6)),
    ],
    ids=["add", "add_40", "add_grad", "mul_scalar_view", "addcmul", "diagonal_sub"],
)
def test_reads_before_their_write_match_eager(
    f: Callable[..., object], make_inputs: Make, compile_fn: CompileFn | None
) -> None:
    assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def row_plus_column(x: T) -> object:  # location (2, 1) is written at index 1, read (changed) at index 2
    x[2].add_(x[:, 1])
    return x


def block_plus_row(x: T) -> object:  # two-dimensional write: TensorIterator's dim order is not modelled
    x[:, :2].add_(x[2, :2])
    return x


@pytest.mark.parametrize(
    ("f", "make_inputs"),
    [
        (row_plus_column, _square()),
        (block_plus_row, _square()),
        (column_times_its_last, _square(5, grad=True)),  # (2, 1) written at index 2, read again at 3 and 4
    ],
    ids=["read_after", "2d", "scalar_read_after"],
)
def test_reads_out_of_loop_order_refused(
    f: Callable[..., object], make_inputs: Make, compile_fn: CompileFn | None
) -> None:
    assert_refused(f, make_inputs, compile_fn, OVERLAPPING_READ)


def dense_partial_overlap(x: T) -> object:  # both dense: eager's TensorIterator raises
    x[0:2].add_(x[1:3])
    return x


def test_dense_partial_overlap_raises_like_eager(compile_fn: CompileFn | None) -> None:
    assert_raises_like_eager(dense_partial_overlap, lambda: (torch.randn(4),), compile_fn=compile_fn)


def test_eager_reads_changed_values_where_refused() -> None:
    """The refusal is not too cautious: eager's result really differs from the old-values one there."""
    x = torch.arange(9.0).reshape(3, 3)
    functional = x[2] + x[:, 1]
    row_plus_column(x)
    assert not torch.equal(x[2], functional)
    y = torch.arange(25.0).reshape(5, 5) + 2
    scaled = y[:, 1] * y[2, 1]
    column_times_its_last(y)
    assert not torch.equal(y[:, 1], scaled)
    with pytest.raises(UnsupportedError, match=OVERLAPPING_READ):
        subclassaot.compile(row_plus_column)(torch.arange(9.0).reshape(3, 3))


def test_reads_before_their_write_through_dynamo() -> None:
    from subclassaot.tools.dynamo_backend import recording, subclassaot_backend

    def dynamo_compile(fn: Callable[..., object], **_: object) -> Callable[..., object]:
        compiled: Callable[..., object] = torch.compile(fn, backend=subclassaot_backend, options={"backend": "eager"})
        return compiled

    torch._dynamo.reset()
    try:
        with recording() as calls:
            assert_matches_eager(column_plus_row, _square(), compile_fn=dynamo_compile)
        assert calls, "the program did not run through subclassaot"
    finally:
        torch._dynamo.reset()
