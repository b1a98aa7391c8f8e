"""Fuzz regressions of helper setcrash: crashes around set_(), `.data` and writes below tensors whose elements overlap
(fuzz seeds 9000, 10000, 11000). Each program is now either compiled with eager's results or refused, naming the
input and the rule."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import torch

from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair

T = torch.Tensor


def _overlapping_view() -> tuple[object, ...]:
    b0 = torch.randn((4, 2))
    return (b0.as_strided((2, 2), (0, 2), 2),)


def _diagonal_data_add(x0: T) -> object:
    t0 = x0.diagonal(0, 1, 0)
    t0.data.add_(2.0)
    return ()


def _diagonal_data_add_returned(x0: T) -> object:
    t0 = x0.diagonal(0, 1, 0)
    t0.data.add_(2.0)
    return (t0, x0 * 1)


@pytest.mark.parametrize("f", [_diagonal_data_add, _diagonal_data_add_returned], ids=["bare", "returned"])
def test_write_through_data_below_overlapping_input_7524(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # seed 11000 #7524, #9684: the diagonal of an input whose rows are one memory location has distinct elements;
    # a write through its `.data` was written back view by view, the last step scattering into the overlapping
    # input, which raised (Note [as_strided On Inputs] now follows the chain through `.data`)
    with torch.no_grad():
        assert_matches_eager(f, _overlapping_view, compile_fn=compile_fn)


def _aliased_nonleaf() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = torch.randn((4,), requires_grad=True).clone()
        return (b0, b0.view((2, 2)))


def _data_expand_set(x0: T, x1: T) -> object:
    x0.data = x1
    t0 = x0.expand((2, 2, 2))
    set_to(t0, x1)
    return ()


def _data_transpose_write(x0: T, x1: T) -> object:
    x0.data = x1
    t0 = x0.transpose(0, 1)
    t0.mul_(2)
    return ()


_STALE = r"args\[0\] and args\[1\]: the program changes the layout .*`\.data =`.*\(Note \[Stale View Functions\]"


@pytest.mark.parametrize("f", [_data_expand_set, _data_transpose_write], ids=["set_", "mul_"])
def test_data_assigned_view_of_synthetic_base_refused_9696(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # seed 10000 #9696: x0 and x1 share storage, so both are views of a synthetic base; `x0.data = x1` changed x0's
    # layout but not its view function, and autograd's rebase of t0 on set_() (or mul_()) replayed it: expand((2,
    # 2, 2)) of a (4,) tensor raised, where eager's as_strided() does not
    with torch.enable_grad():
        assert_refused(f, _aliased_nonleaf, compile_fn, _STALE)


def _separate_inputs() -> tuple[object, ...]:
    with torch.enable_grad():
        return (torch.randn((4,), requires_grad=True).clone(), torch.randn((2, 2)))


@pytest.mark.parametrize("f", [_data_expand_set, _data_transpose_write], ids=["set_", "mul_"])
def test_data_assigned_input_of_its_own_storage_still_supported(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # The same programs over inputs that share no storage: x0 is no view, nothing is replayed
    with torch.enable_grad():
        assert_matches_eager(f, _separate_inputs, compile_fn=compile_fn)


def _t_then_set_data_to_view(x0: T) -> object:
    t0 = x0.diagonal(-1, 2, 1)
    t1 = t0.transpose(0, 1)
    t0.t_()
    src = t0.data
    set_to(src, t1)
    return ()


def test_set_of_data_to_view_after_t_refused_3406(compile_fn: CompileFn | None) -> None:
    # seed 9000 #3406: t1 is a view of t0 taken with grad and used with grad (the set_() source) after t0.t_(); the
    # refusal was raised in the torch-function mode on `_backward_hooks.__set__`, which torch calls from C++ under
    # set_(), and came out as a SystemError. Setters are no use of a view; set_() itself, which never reaches the
    # torch-function mode, is checked in the dispatch mode
    with torch.enable_grad():
        assert_refused(
            _t_then_set_data_to_view,
            lambda: (nonleaf(1, 1, 3),),
            compile_fn,
            r"args\[0\]: a view taken with grad enabled is used with grad after .* by t_\(\) with grad enabled",
        )


def _set_to_unbound_element(x0: T) -> object:
    t0 = x0.mul(x0)
    t1 = t0.unbind(0)[2]
    set_to(x0, t1)
    t2 = t1.contiguous()
    return (t2,)


def _set_to_unbound_element_bare(x0: T) -> object:
    t0 = x0.mul(x0)
    set_to(x0, t0.unbind(0)[2])
    return ()


def test_set_to_element_of_intermediate_subclass_3608(compile_fn: CompileFn | None) -> None:
    # seed 9000 #3608 without the output: x0 set_() to the third element of an intermediate; the epilogue gave it a
    # fresh storage of 3 elements (offset 2 + 1). The fresh storage now has the intermediate's size, as eager's
    def make_inputs() -> tuple[object, ...]:
        return (pair(4),)

    with torch.no_grad():
        compiled = assert_matches_eager(_set_to_unbound_element_bare, make_inputs, compile_fn=compile_fn)
        got, want = make_inputs(), make_inputs()
        compiled(*got)
        _set_to_unbound_element_bare(cast(T, want[0]))
    for x, name in ((got[0], "compiled"), (want[0], "eager")):
        assert isinstance(x, PairTensor), name
        assert [t.untyped_storage().nbytes() for t in (x.a, x.b)] == [16, 16], name


def _set_to_slice_of_intermediate(x0: T) -> object:
    t0 = x0.mul(x0)
    t1 = t0[2:]
    set_to(x0, t1)
    return (t1.view(2),)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_view_of_intermediate_set_in_part_refused_3608(kind: str, compile_fn: CompileFn | None) -> None:
    # seed 9000 #3608: t2 (a view of t0, an intermediate x0 was set_() to in part) has eager's `._base` t0; ours
    # was rebuilt over x0's fresh storage, whose elements outside x0's were uninitialized memory in `t2._base`
    # (analyze._check_base_within)
    f = _set_to_unbound_element if kind == "pair" else _set_to_slice_of_intermediate

    def make_inputs() -> tuple[object, ...]:
        return (pair(4),) if kind == "pair" else (torch.randn(4),)

    with torch.no_grad():
        assert_refused(f, make_inputs, compile_fn, r"is a view of an intermediate that input 0 was set_\(\) to in part")


def _write_view_then_set_base(x0: T, x1: T, x2: T) -> object:
    x0.copy_(x1)
    set_to(x2, x0)
    return ()


def test_set_of_shared_input_after_grad_write_refused_756(compile_fn: CompileFn | None) -> None:
    # seed 9000 #756: x0 (a diagonal of x2) and x2 are views of one synthetic base; x0.copy_(x1) with x1 requiring
    # grad rebased the base, and x2.set_(x0), x2's history not yet regenerated, took x2 for a leaf that requires grad
    # (RuntimeError). The histories are read after each op with grad; the program is refused by the rule on inputs
    # that gain grad
    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 4, 2))
        return (b0.diagonal(-1, 1, 2), torch.randn((1,), requires_grad=True), b0)

    with torch.enable_grad():
        assert_refused(
            _write_view_then_set_base,
            make_inputs,
            compile_fn,
            r"args\[0\] does not require grad, shares storage with another input, and the program writes a value",
        )
