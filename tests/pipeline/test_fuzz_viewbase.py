"""Fuzz regressions about which tensor an output view's `._base` is (Note [Views Set Onto Another Storage], Note
[Views Sharing An Intermediate]); each program is a shrunk fuzz program (seed and index in the test's name)."""

from __future__ import annotations

import random

import torch

import subclassaot
from subclassaot.pipeline.rules.inplace_strides import eager_view_strides
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, pair, pair_nonleaf
from tests.pipeline.fuzz_helpers import check_no_grad as _no_grad_parity

T = torch.Tensor


# ---------------------------------------------------------------------------------------------------------------
# A view set_() onto another storage keeps its `._base`


def test_seed3000_3421_view_of_intermediate_set_to_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t1 = x0.mul(x0).diagonal(1, 2, 0)
        set_to(t1, x0)
        return (t1,)

    _no_grad_parity(f, lambda: (torch.randn(2, 2, 2),), compile_fn)


def test_seed3000_9980_view_of_clone_set_to_aliased_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t1 = x1.clone().unsqueeze(0)
        set_to(t1, x0)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        b = torch.randn(())
        return (b, b)

    _no_grad_parity(f, make_inputs, compile_fn)


def test_seed5000_2753_transposed_clone_set_to_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t1 = x0.clone().t()
        set_to(t1, x0)
        return t1, t1._base

    _no_grad_parity(f, lambda: (torch.randn(3, 2),), compile_fn)


def test_base_of_view_set_onto_input_has_eager_values() -> None:
    def f(x0: T) -> object:
        t1 = (x0 * 2).diagonal()
        set_to(t1, x0)
        return t1

    x = torch.randn(3, 3)
    with torch.no_grad():
        out = subclassaot.compile(f)(x)
    assert isinstance(out, torch.Tensor) and out._base is not None
    assert out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    torch.testing.assert_close(out._base, x * 2)


def test_seed3000_9510_view_of_input_moved_off_by_set(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        set_to(x1, x0)
        t0 = x1.add(3.0)
        t1 = x1.unsqueeze(1)
        set_to(x1, t0)
        return (t1,)

    _no_grad_parity(f, lambda: (torch.randn(1, 4), torch.randn(2, 1)), compile_fn)


def test_seed3000_8754_view_of_intermediate_set_to_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.add(3.0)
        set_to(t0, x0)
        return (t0.unbind(0)[2],)

    _no_grad_parity(f, lambda: (torch.randn(3),), compile_fn)


def test_seed5000_2310_view_of_intermediate_set_to_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        set_to(t0, x0)
        return (t0.view((4, 1, 1)),)

    _no_grad_parity(f, lambda: (torch.randn(4),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Outputs viewing one intermediate share it


def test_seed3000_9902_views_of_one_detach(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.detach()
        return t0.view((1, 2, 1)), t0.t()

    _no_grad_parity(f, lambda: (torch.randn(2),), compile_fn)


def test_views_of_two_detaches_stay_apart(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        return x0.detach().view((1, 2)), x0.detach().view((2, 1))

    _no_grad_parity(f, lambda: (torch.randn(2),), compile_fn)


def test_views_of_one_detach_transposed_in_place_between(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.detach()
        a = t0.view(-1)
        t0.t_()
        return a, t0.unsqueeze(0)

    _no_grad_parity(f, lambda: (torch.randn(2, 3),), compile_fn)


def test_seed5000_847_view_of_a_returned_detach(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.select(0, -1)
        set_to(x0, t0)
        t1 = t0.detach()
        return t1, t1[1:2:2]

    _no_grad_parity(f, lambda: (torch.randn(4, 2),), compile_fn)


def test_seed5000_5126_views_of_an_intermediate_assigned_to_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        t1 = t0.view((18,))
        t2 = t0.unbind(1)[2]
        x0.data = t0
        return t1, t2

    _no_grad_parity(f, lambda: (torch.randn(2, 3, 3),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Training


def test_seed3000_5331_view_of_detach_written_with_grad_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = x0.detach()
        t0.copy_(x0)
        return (t0.diagonal(-1, 3, 2),)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (torch.randn(3, 2, 3, requires_grad=True).unsqueeze(-1),)

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, r"out\[0\] is a detach\(\) of an input .* requires grad")


# ---------------------------------------------------------------------------------------------------------------
# Views in size-1 dims get eager strides (Note [Eager's Layouts Under Functionalization])


def testeager_view_strides_matches_eager_view() -> None:
    rng = random.Random(0)
    checked = 0
    for _ in range(2000):
        nd = rng.randint(0, 4)
        shape = [rng.choice([0, 1, 1, 2, 3]) for _ in range(nd)]
        perm = list(range(nd))
        rng.shuffle(perm)
        x = torch.empty(shape).permute(perm)
        if nd and rng.random() < 0.3:
            x = torch.empty(300).as_strided(x.shape, [rng.choice([0, 1, 2, 3, 6]) for _ in range(nd)])
        numel = x.numel()
        for new in ([numel], [1, numel], [numel, 1], list(x.shape), [1, *x.shape], [*x.shape, 1]):
            try:
                want: list[int] | None = list(x.view(new).stride())
            except RuntimeError:
                want = None
            assert eager_view_strides(list(x.shape), list(x.stride()), new) == want, (x.shape, x.stride(), new)
            checked += 1
    assert checked > 10000


def test_seed5000_283_view_of_a_size_1_slice(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0[0:2:2]
        set_to(t0, t0.view((1, 3)))
        return (t0,)

    _no_grad_parity(f, lambda: (PairTensor.from_tensor(torch.randn(3, 3)),), compile_fn)


def test_plain_view_of_a_size_1_slice_has_eager_strides(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        return x0[0:2:2].view((1, 3)).view(3, 1), x0[1:2].view(1, 1, 3).clone()

    _no_grad_parity(f, lambda: (torch.randn(3, 3),), compile_fn)
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(3, 3, requires_grad=True),), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Inputs with zero strides run as an expanded clone in training


def test_seed5000_6223_transposed_expanded_subclass_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        return (x0.transpose(0, 1).add(2.0),)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = PairTensor.from_tensor(torch.randn(2, 1, 4), requires_grad=True)
            return (b0.as_strided((3, 2), (0, 3), 0),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_expanded_plain_input_elementwise_strides(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t = x0.transpose(0, 1)
        return t * t, x0.reshape(-1) + 1

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (torch.randn(1, 4, requires_grad=True).clone().expand(3, 4),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_seed3000_9510_grad_view_of_input_moved_off_by_set_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        set_to(x1, x0)
        t0 = x1.add(3.0)
        t1 = x1.unsqueeze(1)
        set_to(x1, t0)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(1, 4, requires_grad=True), torch.randn(2, 1))

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, r"out\[0\] is a view that requires grad of input 1, taken while")


def test_seed3000_8754_grad_view_of_intermediate_set_under_grad_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.add(3.0)
        set_to(t0, x0)
        return (t0.unbind(0)[2],)

    with torch.enable_grad():
        assert_refused(
            f,
            lambda: (torch.randn(3, requires_grad=True),),
            compile_fn,
            r"out\[0\] is a view of a tensor the program set_\(\) with grad enabled before taking the view",
        )


# Programs refused while such inputs ran as a contiguous clone (their tests were in test_fuzz_regressions.py): the
# clone now has the input's zero strides, so they match eager.


def test_seed24_187_reshape_of_expanded_subclass_input_in_training(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        return (x0.reshape((1, 4, -1)),)

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 4, 3, requires_grad=True).expand((2, 4, 3)),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_seed2000_2573_set_to_an_expanded_nonleaf_subclass_input_in_training(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            set_to(x0, x1)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (pair(2), pair_nonleaf(1, 4, 1).expand((1, 4, 3)))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_seed2000_9386_reshape_copy_of_expanded_subclass_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.view(1, 3, 4)
        return (t0.reshape(4, 3),)

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 2, 2, requires_grad=True).expand(3, 2, 2),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_contiguous_of_view_of_expanded_subclass_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        return (x0.unsqueeze(0).contiguous(),)

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 4, requires_grad=True).expand(3, 4),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
