"""In-place ops that read memory they write through another view of it, with symbolic sizes (Note [In-Place Ops As
Eager Runs Them], subclassaot/pipeline/rules/overlapping_reads.py): whether the views meet is decided at the compiled
call's sizes and guarded, so a later call whose sizes make them meet recompiles and is refused as a static one is,
where it ran the compiled entry before (a wrong result, or a result where eager's overlap check raises).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError
from tests.oracle import assert_call_matches_eager

T = torch.Tensor
OVERLAPPING_READ = "an in-place op reads part of the memory it writes through another view of it"


@torch.library.custom_op("overlapping_reads::add_from", mutates_args={"out"})
def add_from(out: T, src: T) -> None:
    for i in range(out.shape[0]):
        out[i] += src[i]


@add_from.register_fake
def _(out: T, src: T) -> None:
    return None


def last_four_add_from_first_four(x: T) -> object:
    n = x.shape[0]
    torch.ops.overlapping_reads.add_from(x[n - 4 :], x[:4])
    return x


def index_add_last_four(x: T) -> object:
    n = x.shape[0]
    x[n - 4 :].index_add_(0, torch.arange(4), x[:4])
    return x


def addmm_last_four(x: T) -> object:
    n = x.shape[0]
    x[n - 4 :].addmm_(x[:4], torch.eye(x.shape[1]))
    return x


def addcmul_last_four(x: T) -> object:
    n = x.shape[0]
    x[n - 4 :].addcmul_(x[:4], x[:4])
    return x


def _randn(*shape: int) -> Callable[[], tuple[T]]:
    return lambda: (torch.randn(shape),)


def _rows(n: int) -> Callable[[], tuple[T]]:
    return lambda: (torch.arange(n * 3.0).view(n, 3) + 1,)


def _refused_once_the_views_meet(fn: Callable[[T], object]) -> None:
    # Compiled at 8 rows, x[4:] and x[:4] lie apart; at 6 rows x[2:] meets x[:4]. Eager then reads rows the op has
    # written (the custom op, addmm_) or its overlap check raises (index_add_, addcmul_); the compiled entry ran on
    # as if they were apart (the reads of the functional graph see the values before the write).
    compiled = subclassaot.compile(fn, dynamic=True)
    assert_call_matches_eager(compiled, fn, _rows(8))
    assert_call_matches_eager(compiled, fn, _rows(10))  # still apart: the same entry
    assert compiled.compile_count == 1
    with pytest.raises(UnsupportedError, match=OVERLAPPING_READ):
        compiled(*_rows(6)())
    (reason,) = compiled.recompile_reasons
    assert "writes memory apart from another view it reads" in reason


def test_custom_op_views_apart_at_the_compiled_sizes_that_meet_at_a_later_call_are_refused() -> None:
    _refused_once_the_views_meet(last_four_add_from_first_four)


@pytest.mark.parametrize("fn", [index_add_last_four, addmm_last_four, addcmul_last_four])
def test_aten_views_apart_at_the_compiled_sizes_that_meet_at_a_later_call_are_refused(
    fn: Callable[[T], object],
) -> None:
    _refused_once_the_views_meet(fn)


def halves_of_rows(x: T) -> object:
    n = x.shape[0]
    x[n // 2 :].addmm_(x[: n // 2], torch.eye(x.shape[1]))
    return x


def left_columns_times_right(x: T) -> object:
    x[:, :2].mul_(x[:, 2:])
    return x


def left_columns_index_add(x: T) -> object:
    x[:, :2].index_add_(0, torch.arange(x.shape[0]), x[:, 2:])
    return x


@pytest.mark.parametrize("fn", [halves_of_rows, left_columns_times_right, left_columns_index_add])
def test_views_apart_at_every_size_compile_once(fn: Callable[[T], object]) -> None:
    # Rows apart in storage at every size; columns whose spans of storage interleave but that lie apart in each row.
    compiled = subclassaot.compile(fn, dynamic=True)
    for n in (8, 6, 10, 4):
        assert_call_matches_eager(compiled, fn, _randn(n, 4))
    assert compiled.compile_count == 1


def column_times_subdiagonal(x: T) -> object:
    # meets the column at one element, read and written at the same index at some sizes
    x.select(1, -1).mul_(x.diagonal(-1, 1, 0))
    return x


def test_views_meeting_at_the_same_index_match_eager_at_each_size() -> None:
    compiled = subclassaot.compile(column_times_subdiagonal, dynamic=True)
    for n in (4, 5, 6, 4):
        assert_call_matches_eager(compiled, column_times_subdiagonal, _randn(3, n))
