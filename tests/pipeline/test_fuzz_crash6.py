"""Fuzz regressions of helper crash6: epilogue copies into inputs whose elements overlap (fuzz seed 6000 #1630,
#6572, #6885), an output whose grad_fn raises in eager made from an intermediate (seed 7000 #4719), and a view of an
expanded subclass input checked on its layout before t_() (seed 7000 #9147)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def _plain_3x2() -> tuple[object, ...]:
    return (torch.randn((3, 2)),)


def _data_expand_after_write(x0: T) -> object:
    # seed 6000 #1630: the final value's copy_ into the input, now an expand(), raised
    t0 = x0.expand((2, -1, -1))
    x0.add_(3.0)
    x0.data = t0
    return ()


def _data_expand_then_write_view(x0: T) -> object:
    t0 = x0.expand((2, -1, -1))
    x0.add_(1.0)
    x0.data = t0
    t0[1, 1].mul_(2)
    return (t0,)


def _rows_expand_after_write(x0: T) -> object:
    t0 = x0[0].expand((4, -1))
    x0.mul_(2)
    x0.data = t0
    return (x0.sum(),)


def _set_expand_after_write(x0: T) -> object:
    t0 = x0.expand((2, -1, -1))
    x0.add_(3.0)
    set_to(x0, t0)
    return ()


@pytest.mark.parametrize(
    "f", [_data_expand_after_write, _data_expand_then_write_view, _rows_expand_after_write, _set_expand_after_write]
)
@pytest.mark.parametrize("grad", [False, True])
def test_written_input_ending_expanded_matches_eager(
    f: Callable[..., object], grad: bool, compile_fn: CompileFn | None
) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, _plain_3x2, compile_fn=compile_fn)


def _plain_nonleaf_3x2() -> tuple[object, ...]:
    return (nonleaf(3, 2),)


def _as_strided_expand_after_write(x0: T) -> object:
    x0.add_(3.0)
    x0.as_strided_((2, 3, 2), (0, 2, 1))
    return (x0 * 1,)


@pytest.mark.parametrize("f", [_set_expand_after_write, _as_strided_expand_after_write])
def test_written_nonleaf_ending_expanded_matches_eager(f: Callable[..., object], compile_fn: CompileFn | None) -> None:
    # training: the final value's copy_ (recorded by autograd) goes into the expanded layout once per location
    with torch.enable_grad():
        assert_matches_eager(f, _plain_nonleaf_3x2, compile_fn=compile_fn)


def _expanded_one() -> tuple[object, ...]:
    return (torch.randn((1,)).expand((3,)),)


def _write_select_after_resize(x0: T) -> object:
    # seed 6000 #6572: resize_() made the input one element after the select() was taken of its expand(); the
    # write went back through the expand() (as_strided_scatter into repeated elements raised)
    t0 = x0.select(0, -1)
    x0.resize_((1,))
    t0.zero_()
    return ()


def _write_select_after_resize_returned(x0: T) -> object:
    t0 = x0.select(0, 1)
    x0.resize_((1,))
    t0.add_(2.0)
    return (t0, x0)


@pytest.mark.parametrize("f", [_write_select_after_resize, _write_select_after_resize_returned])
@pytest.mark.parametrize("grad", [False, True])
def test_write_below_expand_resized_since_matches_eager(
    f: Callable[..., object], grad: bool, compile_fn: CompileFn | None
) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, _expanded_one, compile_fn=compile_fn)


def _expanded_pair_nonleaf() -> tuple[object, ...]:
    return (pair_nonleaf(3, 1, 1).expand((3, 2, 1)),)


def _empty_write(x0: T) -> object:
    # seed 6000 #6885: the epilogue's copy_ into the expanded input raised
    t0 = x0[:, 2:2:2]
    t0.zero_()
    return ()


def _column_write(x0: T) -> object:
    x0[:, 0:1].mul_(2)
    return ()


@pytest.mark.parametrize("f", [_empty_write, _column_write])
def test_write_into_expanded_subclass_nonleaf_refused(f: Callable[..., object], compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        assert_refused(
            f,
            _expanded_pair_nonleaf,
            compile_fn,
            r"args\[0\]: the program writes this tensor subclass input, which requires grad and whose elements "
            r"overlap \(expand\(\)\)",
        )


def _expanded_pair_row() -> tuple[object, ...]:
    return (pair_nonleaf(4).expand((2, -1)),)


def _select_after_t(x0: T) -> object:
    # seed 7000 #9147: the view chain was checked on the input's layout before t_(), where select(0, -4) raised
    x0.t_()
    return (x0.select(0, -4),)


def _select_after_t_first(x0: T) -> object:
    x0.t_()
    return (x0.select(0, 0), x0.select(1, 1))


@pytest.mark.parametrize("f", [_select_after_t, _select_after_t_first])
def test_view_after_inplace_view_of_expanded_subclass_matches_eager(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, _expanded_pair_row, compile_fn=compile_fn)


def _pair_and_expanded_pair() -> tuple[object, ...]:
    with torch.enable_grad():
        return (pair(), pair(4, 1, requires_grad=True).expand((1, 4, 2)))


def _no_grad_view_set_to_intermediate(x0: T, x1: T) -> object:
    # seed 7000 #4719 (shrunk): eager's output (a no_grad view of x1, set_() to an intermediate) has a grad_fn that
    # raises; the joint trace read it and raised
    t0 = x0.clone()
    with torch.no_grad():
        t1 = x1.view((4, 2))
        set_to(t1, t0)
    return (t1,)


def _no_grad_view_set_after_data(x0: T, x1: T) -> object:
    # seed 7000 #4719 as generated
    t0 = x0.clone()
    with torch.no_grad():
        t1 = x1.view((4, 2))
        t2 = x1.detach()
    x1.data = t2
    with torch.no_grad():
        set_to(t1, t0)
    return (t1,)


@pytest.mark.parametrize("f", [_no_grad_view_set_to_intermediate, _no_grad_view_set_after_data])
def test_no_grad_view_set_to_intermediate_matches_eager(f: Callable[..., object], compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, _pair_and_expanded_pair, compile_fn=compile_fn)
