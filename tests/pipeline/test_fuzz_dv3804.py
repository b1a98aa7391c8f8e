"""Fuzz regressions about outputs that alias an input set_() (or `.data =`-assigned) to an empty tensor the program
computed, whose eager strides are the kernel's (Note [Inputs Set To Computed Tensors], Note [Fresh Subclass Output
Strides]); each program is a shrunk fuzz program or a variant of one (seed and index in the test's name)."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, check_no_grad, check_with_grad, leaf, nonleaf, pair

T = torch.Tensor


def _x() -> T:
    return torch.randn(4, 2, 1)


def _x_permuted() -> T:
    return torch.randn(1, 2, 4).permute(2, 1, 0)


# fuzz seed 47000 #3804: the output, a view of the empty product, is what x0.data was assigned: eager's (0, 2)
def test_seed47000_3804_view_assigned_to_data_keeps_kernel_strides(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0[:, :, 0:0:2]
        t1 = x0.mul(t0)
        t2 = t1.select(1, -1)
        x0.data = t2
        return (t2,)

    check_no_grad(f, lambda: (_x(),), compile_fn)
    check_with_grad(f, lambda: (_x(),), compile_fn)
    check_no_grad(f, lambda: (_x_permuted(),), compile_fn)
    check_no_grad(f, lambda: (leaf(4, 2, 1),), compile_fn)


# variant of fuzz seed 47000 #3804: set_() instead of `.data =`, returned with the input
def test_seed47000_3804_view_set_to_input_keeps_kernel_strides(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t2 = x0.mul(x0[:, :, 0:0:2]).select(1, -1)
        set_to(x0, t2)
        return (t2, x0)

    check_no_grad(f, lambda: (_x(),), compile_fn)
    check_with_grad(f, lambda: (_x_permuted(),), compile_fn)
    check_no_grad(f, lambda: (nonleaf(4, 2, 1),), compile_fn)


# variant of fuzz seed 47000 #3804 on a PairTensor: the wrapper and its inner tensors take the kernel's strides
def test_seed47000_3804_pair_view_set_keeps_kernel_strides(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t2 = x0.mul(x0[:, :, 0:0:2]).select(1, -1)
        set_to(x0, t2)
        return (t2,)

    def g(x0: T) -> object:
        t2 = x0.mul(x0[:, :, 0:0:2]).select(1, -1)
        x0.data = t2
        return (t2,)

    for h in (f, g):
        check_no_grad(h, lambda: (pair(4, 2, 1),), compile_fn)
        check_with_grad(h, lambda: (pair(4, 2, 1),), compile_fn)


# variant of fuzz seed 47000 #3804: a view of the intermediate that the input becomes, rebuilt by replaying the view
# on a PairTensor, and a view of the input itself (replayed on the real input)
def test_seed47000_3804_views_after_set_keep_kernel_strides(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t1 = x0.mul(x0[:, :, 0:0:2])
        x0.data = t1
        return (t1.select(1, -1),)

    def g(x0: T) -> object:
        t1 = x0.mul(x0[:, :, 0:0:2])
        set_to(x0, t1)
        return (x0.select(1, -1), t1)

    check_no_grad(f, lambda: (pair(4, 2, 1),), compile_fn)
    check_with_grad(f, lambda: (pair(4, 2, 1),), compile_fn)
    check_no_grad(g, lambda: (_x_permuted(),), compile_fn)
    check_with_grad(g, lambda: (pair(4, 2, 1),), compile_fn)


# variant of fuzz seed 47000 #3804: a view of the empty intermediate with a layout of its own, rebuilt from the
# fake strides, is refused (Note [Fresh Subclass Output Strides])
def test_seed47000_3804_own_layout_view_of_empty_target_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t1 = x0.mul(x0[:, :, 0:0:2])
        x0.data = t1
        return (t1.select(1, -1),)

    def g(x0: T) -> object:
        t1 = x0.mul(x0[:, :, 0:0:2])
        set_to(x0, t1)
        return (t1.select(1, -1),)

    match = r"of an empty tensor the program computed and set_\(\) input .*Note \[Fresh Subclass Output Strides\]"
    with torch.no_grad():
        assert_refused(f, lambda: (_x(),), compile_fn, match)
        assert_refused(g, lambda: (_x_permuted(),), compile_fn, match)
        assert_refused(g, lambda: (pair(4, 2, 1),), compile_fn, match)
    with torch.enable_grad():
        assert_refused(f, lambda: (leaf(4, 2, 1),), compile_fn, match)
