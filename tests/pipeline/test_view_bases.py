"""Which tensor an output view's `._base` is, and the view chains eager records: views of intermediates set_() onto
inputs, outputs set_() under grad, views sharing an intermediate, subclass views of inputs whose base changes (Note
[Outputs Over Another Storage], Note [Output Regeneration], Note [set_ Under Grad]).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
import torch

import subclassaot
from subclassaot.pipeline.rules.strides_and_offsets import eager_view_strides
from subclassaot.tools.parity import write_outputs
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import (
    assert_refused,
    check_no_grad,
    check_with_grad,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
    twice,
)
from tests.pipeline.program_helpers import check_no_grad as _no_grad_parity
from tests.pipeline.program_helpers import check_with_grad as _check
from tests.pipeline.program_helpers import leaf as _leaf

# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions about which tensor an output view's `._base` is (Note [Outputs Over Another Storage], Note
# [Output Regeneration]); each program is a shrunk fuzz program (seed and index in the test's comment).
# ---------------------------------------------------------------------------------------------------------------------

T = torch.Tensor


# ---------------------------------------------------------------------------------------------------------------
# A view set_() onto another storage keeps its `._base`


def _diagonal_of_intermediate_set_to_input(x0: T) -> object:
    # fuzz seed 3000 #3421
    t1 = x0.mul(x0).diagonal(1, 2, 0)
    set_to(t1, x0)
    return (t1,)


def _view_of_clone_set_to_aliased_input(x0: T, x1: T) -> object:
    # fuzz seed 3000 #9980
    t1 = x1.clone().unsqueeze(0)
    set_to(t1, x0)
    return (t1,)


def _one_scalar_twice() -> tuple[object, ...]:
    b = torch.randn(())
    return (b, b)


def _transposed_clone_set_to_input(x0: T) -> object:
    # fuzz seed 5000 #2753
    t1 = x0.clone().t()
    set_to(t1, x0)
    return t1, t1._base


@pytest.mark.parametrize(
    ("f", "make_inputs"),
    [
        (_diagonal_of_intermediate_set_to_input, lambda: (torch.randn(2, 2, 2),)),
        (_view_of_clone_set_to_aliased_input, _one_scalar_twice),
        (_transposed_clone_set_to_input, lambda: (torch.randn(3, 2),)),
    ],
    ids=["diagonal_of_intermediate", "clone_to_aliased_input", "transposed_clone"],
)
def test_view_set_onto_an_input_keeps_its_base(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    _no_grad_parity(f, make_inputs, compile_fn)


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


# fuzz seed 3000 #9510
def test_view_of_input_moved_off_by_set(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        set_to(x1, x0)
        t0 = x1.add(3.0)
        t1 = x1.unsqueeze(1)
        set_to(x1, t0)
        return (t1,)

    _no_grad_parity(f, lambda: (torch.randn(1, 4), torch.randn(2, 1)), compile_fn)


def _unbind_of_intermediate_set_to_input(x0: T) -> object:
    # fuzz seed 3000 #8754
    t0 = x0.add(3.0)
    set_to(t0, x0)
    return (t0.unbind(0)[2],)


def _view_of_intermediate_set_to_input(x0: T) -> object:
    # fuzz seed 5000 #2310
    t0 = x0.add(x0)
    set_to(t0, x0)
    return (t0.view((4, 1, 1)),)


@pytest.mark.parametrize(
    ("f", "size"),
    [(_unbind_of_intermediate_set_to_input, 3), (_view_of_intermediate_set_to_input, 4)],
    ids=["unbind", "view"],
)
def test_view_taken_of_intermediate_after_its_set_to_input(
    f: Callable[[T], object], size: int, compile_fn: CompileFn | None
) -> None:
    _no_grad_parity(f, lambda: (torch.randn(size),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Outputs viewing one intermediate share it


# fuzz seed 3000 #9902
def test_views_of_one_detach_share_it(compile_fn: CompileFn | None) -> None:
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


# fuzz seed 5000 #847
def test_view_of_a_returned_detach(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.select(0, -1)
        set_to(x0, t0)
        t1 = t0.detach()
        return t1, t1[1:2:2]

    _no_grad_parity(f, lambda: (torch.randn(4, 2),), compile_fn)


# fuzz seed 5000 #5126
def test_views_of_an_intermediate_assigned_to_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        t1 = t0.view((18,))
        t2 = t0.unbind(1)[2]
        x0.data = t0
        return t1, t2

    _no_grad_parity(f, lambda: (torch.randn(2, 3, 3),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Training


# fuzz seed 3000 #5331
def test_view_of_detach_written_with_grad_is_refused(compile_fn: CompileFn | None) -> None:
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
# Views in size-1 dims get eager strides (Note [In-Place Ops As Eager Runs Them])


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


# fuzz seed 5000 #283
def test_pair_size_1_slice_set_to_its_view_has_eager_strides(compile_fn: CompileFn | None) -> None:
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


# fuzz seed 5000 #6223
def test_transposed_expanded_subclass_input(compile_fn: CompileFn | None) -> None:
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


# fuzz seed 3000 #9510
def test_grad_view_of_input_moved_off_by_set_is_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        set_to(x1, x0)
        t0 = x1.add(3.0)
        t1 = x1.unsqueeze(1)
        set_to(x1, t0)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(1, 4, requires_grad=True), torch.randn(2, 1))

    with torch.enable_grad():
        assert_refused(
            f, make_inputs, compile_fn, r"out\[0\] is a view that requires grad of input 1, on another storage"
        )


# fuzz seed 3000 #8754
def test_grad_view_of_intermediate_set_under_grad_is_refused(compile_fn: CompileFn | None) -> None:
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


# Programs refused while such inputs ran as a contiguous clone (their tests were among the fuzz regressions): the
# clone now has the input's zero strides, so they match eager.


def _reshape_of_input(x0: T) -> object:
    # fuzz seed 24 #187
    return (x0.reshape((1, 4, -1)),)


def _set_to_input_under_no_grad(x0: T, x1: T) -> object:
    # fuzz seed 2000 #2573
    with torch.no_grad():
        set_to(x0, x1)
    return ()


def _reshape_copy_of_view(x0: T) -> object:
    # fuzz seed 2000 #9386
    t0 = x0.view(1, 3, 4)
    return (t0.reshape(4, 3),)


@pytest.mark.parametrize(
    ("f", "make_inputs"),
    [
        (_reshape_of_input, lambda: (pair(1, 4, 3, requires_grad=True).expand((2, 4, 3)),)),
        (_set_to_input_under_no_grad, lambda: (pair(2), pair_nonleaf(1, 4, 1).expand((1, 4, 3)))),
        (_reshape_copy_of_view, lambda: (pair(1, 2, 2, requires_grad=True).expand(3, 2, 2),)),
    ],
    ids=["reshape", "set_to_expanded_nonleaf", "reshape_copy"],
)
def test_expanded_subclass_input_in_training(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_contiguous_of_view_of_expanded_subclass_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        return (x0.unsqueeze(0).contiguous(),)

    def make_inputs() -> tuple[object, ...]:
        return (pair(1, 4, requires_grad=True).expand(3, 4),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (seed 12000): outputs' `._base` and requires_grad (helper base12).
#
# Newly supported programs get a parity test; refusals get a test naming the rule. With `--identity-compile` (eager
# against eager) every program here must pass the oracle (it is eager-legal).
# ---------------------------------------------------------------------------------------------------------------------


def _unbound_pair_view() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = pair(2, 3, 3, requires_grad=True)
        return (b0.unbind(1)[1],)


# ---------------------------------------------------------------------------------------------------------------
# Views of an intermediate subclass whose `.data` was assigned after (Note [Wrapper Storage])


def test_no_grad_view_of_root_whose_data_was_assigned(compile_fn: CompileFn | None) -> None:
    # fuzz seed 12000 #4677: the output was computed as a fresh view (`._base` of shape (3, 2), no grad)
    def f(x0: T) -> object:
        t0 = x0.add(0.5)
        t1 = t0.expand((2, 3))
        t0.data = x0
        with torch.no_grad():
            t2 = t1.t()
        return (t2,)

    _check(f, _unbound_pair_view, compile_fn)


def test_views_of_root_whose_data_was_assigned_inference(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.add(0.5)
        t1 = t0.expand((2, 3))
        t0.data = x0
        return (t1.t(), t1)

    with torch.no_grad():
        assert_matches_eager(f, _unbound_pair_view, compile_fn=compile_fn)


def test_views_of_root_before_and_after_its_data_was_assigned(compile_fn: CompileFn | None) -> None:
    # the first view replays from the root with its metadata before `.data =`, the second with it after
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.t()
        t0.data = x0
        t3 = t0.t()
        return (t1, t3.unsqueeze(0))

    _check(f, _unbound_pair_view, compile_fn)
    with torch.no_grad():
        assert_matches_eager(f, _unbound_pair_view, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# A subclass view of another output that the program set_() after taking the view


def test_view_of_output_set_after_the_view(compile_fn: CompileFn | None) -> None:
    # fuzz seed 12000 #5902: eager's out[1]._base is out[0]; the replayed view's `._base` was a detach of its own.
    # PairTensor: rebuilt as a view of out[0] set_() to its leaves (Note [Output Regeneration]) since the
    # chain is no longer taken as exact (an op on its `._base` after the view no step replays: seed 45000 #1194);
    # a plain tensor: refused
    def f(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.reshape((1, 1, 1))
        set_to(t0, t1)
        return (t0, t1)

    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            assert_matches_eager(f, lambda: (pair(),), compile_fn=compile_fn)
            assert_refused(
                f,
                lambda: (torch.randn(()),),
                compile_fn,
                r"out\[1\] is a view of another output that the program set_\(\)",
            )


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions: chains of views through an intermediate that in-place view ops changed before any view was taken
# from it share that one object (Note [Output Regeneration]); each program is a shrunk fuzz program (seed and
# index in the test's comment) or a variant of one.
# ---------------------------------------------------------------------------------------------------------------------


# fuzz seed 13000 #6810
def test_no_grad_view_of_a_transposed_view(compile_fn: CompileFn | None) -> None:
    # the returned t0 was replayed again after the no_grad view t1: its t_() advanced the input's counter a second
    # time, after t1 was made, so t1's grad_fn raised
    def f(x0: T) -> object:
        t0 = x0.expand(())
        t0.t_()
        with torch.no_grad():
            t1 = t0.unsqueeze(0)
        return (t0, t1)

    assert_matches_eager(f, lambda: (nonleaf(),), compile_fn=compile_fn)


def _changed_then_viewed(op: Callable[[T], object]) -> Callable[[T], object]:
    def f(x0: T) -> object:
        t0 = x0.view(x0.shape)
        op(t0)
        with torch.no_grad():
            t1 = t0.unsqueeze(0)
        return t0, t1, t0.select(0, 0)

    return f


_OPS: dict[str, Callable[[T], object]] = {
    "t_": lambda t: t.t_(),
    "transpose_": lambda t: t.transpose_(0, 1),
    "unsqueeze_": lambda t: t.unsqueeze_(0),
    "twice": lambda t: (t.t_(), t.unsqueeze_(1)),
}


@pytest.mark.parametrize("op", sorted(_OPS))
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_views_of_a_view_changed_in_place_first(op: str, kind: str, compile_fn: CompileFn | None) -> None:
    make = nonleaf if kind == "plain" else pair_nonleaf
    assert_matches_eager(_changed_then_viewed(_OPS[op]), lambda: (make(2, 3),), compile_fn=compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_views_of_a_view_changed_in_place_first_no_grad(kind: str, compile_fn: CompileFn | None) -> None:
    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, 3) if kind == "plain" else pair(2, 3),)

    with torch.no_grad():
        assert_matches_eager(_changed_then_viewed(_OPS["t_"]), make_inputs, compile_fn=compile_fn)


def test_view_taken_before_the_in_place_view_op_stays_apart(compile_fn: CompileFn | None) -> None:
    # a's chain passes through t0 as it was before t_(); the chains through t0 after it still share it
    def f(x0: T) -> object:
        t0 = x0.view(x0.shape)
        a = t0.select(0, 0)
        t0.t_()
        with torch.no_grad():
            t1 = t0.unsqueeze(0)
        return t0, t1, a

    assert_matches_eager(f, lambda: (nonleaf(2, 3),), compile_fn=compile_fn)
    assert_matches_eager(f, lambda: (pair_nonleaf(2, 3),), compile_fn=compile_fn)


def test_views_of_a_transposed_view_then_written(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.view(x0.shape)
        t0.t_()
        with torch.no_grad():
            t1 = t0.unsqueeze(0)
        t0.add_(1)
        return t0, t1

    assert_matches_eager(f, lambda: (nonleaf(2, 3),), compile_fn=compile_fn)


def test_views_of_a_detach_transposed_in_place_first(compile_fn: CompileFn | None) -> None:
    # eager's outputs share one `._base`, t0
    def f(x0: T) -> object:
        t0 = x0.detach()
        t0.t_()
        return t0.select(0, 0), t0.unsqueeze(0)

    assert_matches_eager(f, lambda: (nonleaf(2, 3),), compile_fn=compile_fn)


_BEFORE_AFTER: dict[str, tuple[Callable[[T], object], Callable[[T], object]]] = {
    "transpose_-unsqueeze_": (lambda t: t.transpose_(1, 1), lambda t: t.unsqueeze_(-1)),
    "t_-unsqueeze_": (lambda t: t.t_(), lambda t: t.unsqueeze_(0)),
    "t_-t_": (lambda t: t.t_(), lambda t: t.t_()),
    "unsqueeze_-squeeze_": (lambda t: t.unsqueeze_(0), lambda t: t.squeeze_(0)),
}


@pytest.mark.parametrize("ops", sorted(_BEFORE_AFTER))
@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("grad", [False, True])
def test_view_of_a_detach_changed_in_place_before_and_after(
    ops: str, kind: str, grad: bool, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 117400 #7585 (shrunk, the first variant): an in-place view op on the `._base` before the view is taken
    # and one after: eager's `._base` has both; the one after was skipped (counted from the chain's state)
    before, after = _BEFORE_AFTER[ops]

    def f(x0: T) -> object:
        t0 = x0.detach()
        before(t0)
        t1 = t0.expand((2, 1, 2)) if t0.dim() == 2 else t0.unsqueeze(0)
        after(t0)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(1) if kind == "pair" else torch.randn((1,))
        return (b0.reshape((1, 1)),)

    (check_with_grad if grad else check_no_grad)(f, make_inputs, compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions: a subclass input that is a view of another input, whose base the program set_() to a layout
# the view's ops do not apply to (Note [Backward Errors Are Deferred], Note [Backward Errors Are
# Deferred]); found from fuzz seed 47000 #3046.
# ---------------------------------------------------------------------------------------------------------------------


VIEWS: dict[str, Callable[[T], T]] = {
    "transpose": lambda b: b.transpose(1, 2),
    "select": lambda b: b.select(2, 3),
    "unsqueeze": lambda b: b.unsqueeze(3),
    "diagonal": lambda b: b.diagonal(0, 1, 2),
}


def _inputs(
    view: Callable[[T], T] = VIEWS["transpose"], shape: tuple[int, ...] = (2, 2), subclass: bool = True
) -> Callable[[], tuple[object, ...]]:
    """(a view of b, another tensor of `shape`, b), b a non-leaf (1, 3, 4) that requires grad."""

    def make_inputs() -> tuple[object, ...]:
        b0 = pair_nonleaf(1, 3, 4) if subclass else nonleaf(1, 3, 4)
        b1 = pair(*shape) if subclass else torch.randn(shape)
        return (view(b0), b1, b0)

    return make_inputs


def _write_view_then_set(x0: T, x1: T, x2: T) -> object:
    x0.mul_(3.0)
    set_to(x2, x1)
    return ()


# fuzz seed 47000 #3046, variants: other view ops and sizes set_() to (below: the plain counterpart, which eager
# rebuilds by as_strided(): no error).
@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("shape", [(2, 2), (4,), (), (2, 1, 2)])
def test_view_input_written_then_base_set_over_view_ops_and_sizes(
    view: str, shape: tuple[int, ...], compile_fn: CompileFn | None
) -> None:
    check_with_grad(_write_view_then_set, _inputs(VIEWS[view], shape), compile_fn)


def _view_returned(x0: T, x1: T, x2: T) -> object:
    x0.mul_(3.0)
    set_to(x2, x1)
    return (x0, x2)


def _base_and_view_written(x0: T, x1: T, x2: T) -> object:
    x2.add_(1.0)
    x0.mul_(2.0)
    set_to(x2, x1)
    return (x0,)


def _output_computed_before_set(x0: T, x1: T, x2: T) -> object:
    x0.mul_(3.0)
    t1 = x0.mul(2.0)  # saves no x0: its backward rebuilds no history
    set_to(x2, x1)
    return (t1,)


# fuzz seed 47000 #3046 (shrunk, the "program" case): x0's grad_fn, rebuilt from x2 after the set_(), raises
# IndexError in eager and after the compiled call alike; it crashed the compile (reading it for a tangent). Variants
# of it: the view returned, the write through the base and the view, the output computed before the set_()
@pytest.mark.parametrize(
    ("f", "view"),
    [
        (_write_view_then_set, "transpose"),
        (_view_returned, "transpose"),
        (_base_and_view_written, "select"),
        (_output_computed_before_set, "transpose"),
    ],
    ids=["program", "view_returned", "base_and_view_written", "output_computed_before_set"],
)
def test_view_input_written_then_base_set(
    f: Callable[[T, T, T], object], view: str, compile_fn: CompileFn | None
) -> None:
    check_with_grad(f, _inputs(VIEWS[view]), compile_fn)


@pytest.mark.parametrize("subclass", [True, False])
def test_view_input_written_then_base_set_no_grad_and_plain(subclass: bool, compile_fn: CompileFn | None) -> None:
    check_no_grad(_write_view_then_set, _inputs(subclass=subclass), compile_fn)
    check_with_grad(_write_view_then_set, _inputs(subclass=subclass), compile_fn)


# fuzz seed 47000 #3046 (unshrunk): t1's backward unpacks x0, saved by the mul, and rebuilds its history from x2 as
# set_() left it: eager's backward raises IndexError, which is not deferred (Note [Backward Errors Are Deferred]).
def test_view_input_written_then_base_set_backward_rebuilds_view_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        x0.mul_(3.0)
        t0 = x0.mul(0.5)
        t1 = x0.mul(t0)
        x1.mul(2.0)
        set_to(x2, x1)
        return (t1,)

    refused_with_grad(f, _inputs(), compile_fn, r"args\[0\] \(a view of args\[2\]\).*Backward Errors Are Deferred")


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-ups (seed 17000, PairTensor inputs): views of an intermediate that an input was set_() onto share one
# rebuilt root (Note [Output Regeneration]); a detach() of an intermediate that an in-place
# view op changed since shares its wrapper storage, wherever the detach() is in its chain (Note [Output
# Regeneration]).
# ---------------------------------------------------------------------------------------------------------------------

Make = Callable[[], tuple[object, ...]]


def _one(make: Callable[[], T]) -> Make:
    def make_inputs() -> tuple[object, ...]:
        return (make(),)

    return make_inputs


def _makers(*shape: int) -> list[Make]:
    """Plain and PairTensor inputs, none requiring grad."""
    return [_one(lambda: torch.randn(shape)), _one(lambda: pair(*shape))]


def _grad_makers(*shape: int) -> list[Make]:
    """Inputs that require grad: leaves and non-leaves, plain and PairTensor."""
    return [
        _one(lambda: leaf(*shape)),
        _one(lambda: nonleaf(*shape)),
        _one(lambda: pair(*shape, requires_grad=True)),
        _one(lambda: pair_nonleaf(*shape)),
    ]


def test_two_views_of_an_intermediate_an_input_was_set_onto_share_one_base(compile_fn: CompileFn | None) -> None:
    # fuzz seed 17000 #4540 (shrunk): t1 and t2 are eager views of the one intermediate t0, whose leaves x0 now
    # holds; each was rebuilt from a wrapper of its own, so t2._base was not t1._base
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        t1 = t0.unsqueeze(-1)
        t2 = t0.view((1, 1, 1))
        return (t1, t2)

    with torch.no_grad():
        assert_matches_eager(f, _one(pair), compile_fn=compile_fn)


def test_views_of_an_intermediate_an_input_was_set_onto(compile_fn: CompileFn | None) -> None:
    # variants of seed 17000 #4540: n-d, views of views, views taken before the set_(), the intermediate itself and a
    # detach() of it returned too, an in-place write or view op on it between the views, the input returned
    def transposed(x0: T) -> object:
        t0 = x0.mul(2.0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (t0.t(), t0[0])

    def view_of_view(x0: T) -> object:
        t0 = x0.mul(2.0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        t1 = t0.unsqueeze(-1)
        return (t1, t1.view(-1))

    def before_set(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.unsqueeze(-1)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (t1, t0.view(-1))

    def with_itself(x0: T) -> object:
        t0 = x0.mul(x0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (t0.unsqueeze(-1), t0.view(-1), t0)

    def with_detach(x0: T) -> object:
        t0 = x0.mul(2.0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (t0.unsqueeze(-1), t0.detach(), t0.view(-1))

    def with_input(x0: T) -> object:
        t0 = x0.mul(2.0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (t0.unsqueeze(-1), x0.view(-1), t0.view(-1))

    def written_between(x0: T) -> object:
        t0 = x0.mul(2.0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        t1 = t0.unsqueeze(-1)
        t0.mul_(2.0)
        return (t1, t0.view(-1))

    def changed_between(x0: T) -> object:
        t0 = x0.mul(2.0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        t1 = t0.unsqueeze(-1)
        t0.unsqueeze_(0)
        return (t1, t0.view(-1))

    for fn in (transposed, view_of_view, before_set, with_itself, with_detach, with_input, written_between):
        for make in _makers(2, 3):
            check_no_grad(fn, make, compile_fn)
            check_with_grad(fn, make, compile_fn)
        check_no_grad(fn, _one(lambda: pair_nonleaf(2, 3)), compile_fn)
    for fn in (view_of_view, before_set, with_itself, changed_between):
        for make in _makers():
            check_no_grad(fn, make, compile_fn)
            check_with_grad(fn, make, compile_fn)


def test_views_of_an_intermediate_set_onto_an_input_in_training(compile_fn: CompileFn | None) -> None:
    # seed 17000 #4540 with an input that requires grad, grad enabled: x0 is set_() to a tensor that requires grad
    # and the outputs share its storage; refused, as before, for plain and subclass inputs alike
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        x0.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return (t0.unsqueeze(-1), t0.view(-1))

    for make in (_one(lambda: nonleaf(2, 3)), _one(lambda: pair_nonleaf(2, 3)), _one(pair_nonleaf)):
        refused_with_grad(f, make, compile_fn, "set_\\(\\) to a new tensor that requires grad")
        check_no_grad(f, make, compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Views of an intermediate subclass holding an input's own inner tensor (an NJT's offsets after `nt * 2`): rebuilt
# around the input's leaf, one root per call (Note [Output Regeneration])


def _made_around_the_inputs_a(x0: PairTensor) -> PairTensor:
    return PairTensor(x0.a, x0.b * 2.0)


def _transposed(x0: PairTensor) -> object:
    return _made_around_the_inputs_a(x0).t()


def _two_views(x0: PairTensor) -> object:
    t0 = _made_around_the_inputs_a(x0)
    return (t0.t(), t0.unsqueeze(0))


def _view_then_written(x0: PairTensor) -> object:
    t0 = _made_around_the_inputs_a(x0)
    t1 = t0.t()
    t0.mul_(2.0)
    return t1


def _view_beside_its_leaves(x0: PairTensor) -> object:
    t0 = _made_around_the_inputs_a(x0)
    return (t0.t(), t0.a, x0.a.view(-1))


def _input_written_after(x0: PairTensor) -> object:
    t0 = _made_around_the_inputs_a(x0)
    x0.a.add_(1.0)
    return t0.t()


def _input_transposed_in_place_after(x0: PairTensor) -> object:
    t0 = _made_around_the_inputs_a(x0)
    x0.a.t_()
    return t0.t()


def _around_a_plain_input(x0: T) -> object:
    return PairTensor(x0, x0 * 2.0).t()


_ROOTS_OVER_INPUT_LEAVES = {
    "transposed": (_transposed, True),
    "two_views": (_two_views, True),
    "view_then_written": (_view_then_written, True),
    "view_beside_its_leaves": (_view_beside_its_leaves, True),
    "input_written_after": (_input_written_after, False),  # (an input requiring grad: written by .add_ of its a)
    "input_transposed_in_place_after": (_input_transposed_in_place_after, False),
}


@pytest.mark.parametrize("name", sorted(_ROOTS_OVER_INPUT_LEAVES))
def test_views_of_an_intermediate_holding_an_inputs_inner_tensor(name: str, compile_fn: CompileFn | None) -> None:
    # were refused ("... an intermediate PairTensor ... with another layout", or "inner tensors are not views of that
    # tensor's"): the root's a is the input's, no intermediate base
    fn, with_grad_input = _ROOTS_OVER_INPUT_LEAVES[name]
    for make in (_one(lambda: pair(3, 4)), _one(lambda: pair_nonleaf(3, 4))):
        check_no_grad(fn, make, compile_fn)
    check_with_grad(fn, _one(lambda: pair(3, 4)), compile_fn)
    if with_grad_input:
        check_with_grad(fn, _one(lambda: pair(3, 4, requires_grad=True)), compile_fn)
        check_with_grad(fn, _one(lambda: pair_nonleaf(3, 4)), compile_fn)


def test_view_of_a_subclass_made_around_a_plain_input(compile_fn: CompileFn | None) -> None:
    for make in (_one(lambda: torch.randn(3, 4)), _one(lambda: leaf(3, 4)), _one(lambda: nonleaf(3, 4))):
        check_no_grad(_around_a_plain_input, make, compile_fn)
        check_with_grad(_around_a_plain_input, make, compile_fn)


def test_view_of_a_leaf_made_around_an_inputs_inner_tensor_is_refused(compile_fn: CompileFn | None) -> None:
    # eager's `._base` is a new autograd leaf the program made: no root rebuilt around the input's a is one (a known
    # gap: with no input's leaf in it, such a wrapper comes back without requires_grad)
    def f(x0: PairTensor) -> object:
        return PairTensor(x0.a, x0.b * 2.0, requires_grad=True).t()

    for make in (_one(lambda: pair(3, 4)), _one(lambda: pair_nonleaf(3, 4))):
        refused_with_grad(
            f,
            make,
            compile_fn,
            r"out is a view of an intermediate PairTensor .* with another layout|builds one with requires_grad=True",
        )


def test_detach_of_an_intermediate_changed_in_place_after_shares_its_storage(compile_fn: CompileFn | None) -> None:
    # fuzz seed 17000 #7333 (shrunk): t2 = t1.detach() shares t1's wrapper storage in eager; t1.unsqueeze_() then
    # changed t1, so t2's chain could not replay from t1 and t2 came back with a wrapper storage of its own
    def f(x0: T) -> object:
        t0 = x0.expand((1,))
        t1 = t0.mul(x0)
        t2 = t1.detach()
        t1.unsqueeze_(0)
        return (t2, t1)

    with torch.no_grad():
        assert_matches_eager(f, _one(pair), compile_fn=compile_fn)


def _changed_since_programs() -> dict[str, Callable[..., object]]:
    # variants of seed 17000 #7333: t_/transpose_/squeeze_/as_strided_ on the intermediate after the detach, the
    # outputs in either order, a view of the detach, the detach written or changed itself, two detaches at two
    # layouts, the intermediate returned only through views (an intermediate root), the input returned too
    def t_(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.t_()
        return (t2, t1)

    def transpose_(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.transpose_(0, -1)
        return (t1, t2)

    def squeeze_(x0: T) -> object:
        t1 = x0.mul(2.0).unsqueeze(0).clone()
        t2 = t1.detach()
        t1.squeeze_()
        return (t2, t1)

    def as_strided_(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.as_strided_((1,), (1,))
        return (t2, t1)

    def view_of_detach(x0: T) -> object:
        t1 = x0.mul(2.0)
        t3 = t1.detach().view(-1)
        t1.unsqueeze_(0)
        return (t3, t1)

    def detach_written(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.unsqueeze_(0)
        t2.mul_(3.0)
        return (t2, t1)

    def detach_changed(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t2.t_()
        t1.unsqueeze_(0)
        return (t2, t1)

    def two_detaches(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.unsqueeze_(0)
        t3 = t1.detach()
        t1.t_()
        return (t2, t3, t1)

    def through_views(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.unsqueeze_(0)
        return (t2, t1.view(-1), t1[0])

    def with_input(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.t_()
        return (t2, t1, x0)

    fns = (t_, transpose_, squeeze_, as_strided_, view_of_detach, detach_written, detach_changed)
    return {fn.__name__: fn for fn in (*fns, two_detaches, through_views, with_input)}


_CHANGED_SINCE = [
    (name, shape)
    for name in _changed_since_programs()
    for shape in ((), (2, 3))
    if not (name in ("as_strided_", "two_detaches") and shape)  # (not eager-legal at 2-d)
]


@pytest.mark.parametrize(("name", "shape"), _CHANGED_SINCE)
def test_detach_of_an_intermediate_changed_in_place_since(
    compile_fn: CompileFn | None, name: str, shape: tuple[int, ...]
) -> None:
    _check_every_input_kind(_changed_since_programs()[name], shape, compile_fn)


def _check_every_input_kind(fn: Callable[..., object], shape: tuple[int, ...], compile_fn: CompileFn | None) -> None:
    """`fn` on each kind of input `_makers` and `_grad_makers` make at `shape`, under no_grad and with grad."""
    for make in (*_makers(*shape), *_grad_makers(*shape)):
        check_no_grad(fn, make, compile_fn)
        check_with_grad(fn, make, compile_fn)


def test_aliases_of_an_intermediate_changed_since_in_training(compile_fn: CompileFn | None) -> None:
    # beside seed 17000 #7333: a view_as() (a view, unlike detach()) of a subclass intermediate that requires grad,
    # with the intermediate returned too, is refused in training as before; without grad it matches eager
    def f(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.view_as(t1)
        t1.unsqueeze_(0)
        return (t2, t1)

    for make in (_one(lambda: pair(2, 3, requires_grad=True)), _one(pair_nonleaf)):
        refused_with_grad(f, make, compile_fn, "view of an intermediate tensor subclass that requires grad")
        check_no_grad(f, make, compile_fn)


def _mixed(requires_grad: bool = False) -> T:
    """A PairTensor whose `b` is laid out unlike the wrapper (transposed), so that its as_strided() does not give
    its inner tensors their own metadata."""
    return PairTensor(torch.randn(2, 3), torch.randn(3, 2).t(), requires_grad=requires_grad)


def _anywhere_in_the_chain_programs() -> dict[str, Callable[..., object]]:
    # beside seed 17000 #7333: the detach() comes after views of the intermediate (`t1.view(-1).detach()`), or twice
    def view_then_detach(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.view(-1).detach()
        t1.unsqueeze_(0)
        return (t2, t1)

    def t_then_detach(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.t().detach()
        t1.unsqueeze_(0)
        return (t2, t1)

    def detach_twice(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach().detach()
        t1.unsqueeze_(0)
        return (t2, t1)

    def changed_before_and_after(x0: T) -> object:
        t1 = x0.mul(2.0)
        t1.unsqueeze_(0)
        t2 = t1.detach()
        t1.squeeze_(0)
        return (t1.view(-1), t2)

    return {fn.__name__: fn for fn in (view_then_detach, t_then_detach, detach_twice, changed_before_and_after)}


@pytest.mark.parametrize("shape", [(), (2, 3)])
@pytest.mark.parametrize("name", list(_anywhere_in_the_chain_programs()))
def test_detach_anywhere_in_the_chain_of_an_intermediate_changed_since(
    compile_fn: CompileFn | None, name: str, shape: tuple[int, ...]
) -> None:
    _check_every_input_kind(_anywhere_in_the_chain_programs()[name], shape, compile_fn)


def test_detach_of_a_subclass_laid_out_unlike_its_inner_tensors(compile_fn: CompileFn | None) -> None:
    # seed 17000 #7333 with a PairTensor whose `b` is transposed: its as_strided() would give `b` the wrapper's
    # strides, so the detach is set_() to a wrapper of its own leaves instead; a view of it is refused
    def t_(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.t_()
        return (t2, t1)

    def t_then_detach(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.t().detach()
        t1.unsqueeze_(0)
        return (t1, t2)

    def detach_written(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t1.unsqueeze_(0)
        t2.mul_(3.0)
        return (t2, t1.squeeze(0))

    def detach_changed(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach()
        t2.t_()
        t1.unsqueeze_(0)
        return (t2, t1)

    def view_of_detach(x0: T) -> object:
        t1 = x0.mul(2.0)
        t2 = t1.detach().t()
        t1.t_()
        return (t1, t2)

    for fn in (t_, t_then_detach, detach_written, detach_changed):
        for make in (_one(_mixed), _one(lambda: _mixed(True))):
            check_no_grad(fn, make, compile_fn)
            check_with_grad(fn, make, compile_fn)
    rule = "a view of a detach\\(\\) of a PairTensor that an in-place view op"
    with torch.no_grad():
        assert_refused(view_of_detach, _one(_mixed), compile_fn, rule)
    refused_with_grad(view_of_detach, _one(lambda: _mixed(True)), compile_fn, rule)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (seed 40000): in-place view ops on an output's `._base`, and on wrapper inputs that are views of
# larger ones (helper inf40).
#
# Newly supported programs get a parity test; refusals get a test naming the rule. With `--identity-compile` (eager
# against eager) every program here must pass the oracle (it is eager-legal).
# ---------------------------------------------------------------------------------------------------------------------


_MAKERS: dict[str, Callable[[], tuple[object, ...]]] = {
    "plain": lambda: (torch.randn(4, 1),),
    "pair": lambda: (pair(4, 1),),
    "nonleaf": lambda: (nonleaf(4, 1),),
    "pair_nonleaf": lambda: (pair_nonleaf(4, 1),),
}


def _check_inf40(
    f: Callable[..., object],
    make_inputs: Callable[[], tuple[object, ...]],
    compile_fn: CompileFn | None,
    grad: bool,
) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# In-place view ops on an output's `._base` after the view (Note [Output Regeneration])


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("kind", sorted(_MAKERS))
def test_base_changed_in_place_after_the_view(kind: str, grad: bool, compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #4668 (plain, no_grad): eager's t1._base is t0, of shape (1, 4, 1) after the unsqueeze_; the
    # replayed one kept (4, 1)
    def f(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.view((-1, 1, 1))
        t0.unsqueeze_(0)
        return (t1,)

    _check_inf40(f, _MAKERS[kind], compile_fn, grad)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_two_views_of_a_base_changed_after(kind: str, grad: bool, compile_fn: CompileFn | None) -> None:
    # both outputs' `._base` is t0: one object, given the in-place view ops once
    def f(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.view((-1, 1, 1))
        t2 = t0.t()
        t0.unsqueeze_(0)
        t0.transpose_(0, 2)
        return (t1, t2)

    _check_inf40(f, _MAKERS[kind], compile_fn, grad)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("kind", ["nonleaf", "pair_nonleaf"])
def test_base_changed_after_then_input_written(kind: str, grad: bool, compile_fn: CompileFn | None) -> None:
    # the view is replayed before the epilogue writes the input; its `._base` changed after every output is built
    def f(x0: T) -> object:
        t0 = x0.detach()
        t1 = t0.unbind(1)[0]
        t2 = t0.view((-1, 1, 1))
        t0.unsqueeze_(0)
        x0.mul_(2)
        return (t1, t2, x0)

    _check_inf40(f, _MAKERS[kind], compile_fn, grad)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_view_chain_through_a_base_changed_after(kind: str, compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.data
        t1 = t0.view((-1, 1, 1))
        t2 = t1.squeeze(2)
        t0.as_strided_((2,), (1,), 1)
        return (t2,)

    _check_inf40(f, _MAKERS[kind], compile_fn, False)


# ---------------------------------------------------------------------------------------------------------------
# Inputs that are views of larger ones (Note [Wrapper Storage], Note [as_strided On Inputs])


def _empty_slice_of_pair(requires_grad: bool) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = PairTensor.from_tensor(torch.randn((1,)), requires_grad=requires_grad)
            return (b0[1:1:1],)

    return make


@pytest.mark.parametrize("requires_grad", [False, True])
def test_in_place_view_op_past_an_empty_wrapper_view(requires_grad: bool, compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #7513: the traced wrapper's own storage held no element; eager's is its base's (CRASHED:
    # setStorage out of bounds). Training: the input runs as a clone, which gets the same storage.
    def f(x0: T) -> object:
        t0 = x0.as_strided((), (), 0)
        with torch.no_grad():
            t0.unsqueeze_(0)
        return (t0,)

    _check_inf40(f, _empty_slice_of_pair(requires_grad), compile_fn, requires_grad)


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_as_strided_in_place_past_an_input_view(kind: str, requires_grad: bool, compile_fn: CompileFn | None) -> None:
    # as_strided_ of an input onto storage elements it does not hold: traced over its whole storage, as as_strided
    # (it crashed: setStorage out of bounds); the epilogue's as_strided_ is no resize_, which raises on a tensor
    # that requires grad
    def make() -> tuple[object, ...]:
        b = pair(4, requires_grad=requires_grad) if kind == "pair" else torch.randn(4, requires_grad=requires_grad)
        return (b[1:2],)

    def f(x0: T) -> object:
        x0.as_strided_((2,), (1,), 1)
        return (x0 + 1,)

    _check_inf40(f, make, compile_fn, False)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions of helper c4729: outputs viewed from a no_grad view that the program then changed in place.
#
# Fuzz seed 15000 #4729 (crashed): t2 viewed t1 under grad before `t1.t_()`, which left a 1-D t1's metadata as it was;
# the replay viewed the returned t1 after its t_(), which raises for a view made under no_grad. Now a view replays from
# an earlier output only where no in-place view op changed it since (view_chains._changed_since). Fuzz seed 45000
# #8651 (crashed): the output set_() after its view of an earlier no_grad output, whose version counter the program
# then advanced, is refused (a plain input already was, by Note [Views That Raise After A Bump]).
# ---------------------------------------------------------------------------------------------------------------------


def _transposed_after_view(x0: T) -> object:
    # seed 15000 #4729, shrunk
    t0 = x0.add(3.0)
    with torch.no_grad():
        t1 = t0.expand(x0.shape)
    t2 = t1.transpose(0, 0)
    with torch.no_grad():
        t1.t_()
    return (t2, t1)


def _transposed_after_view_all_grad(x0: T) -> object:
    t0 = x0.add(3.0)
    t1 = t0.expand(x0.shape)
    t2 = t1.transpose(0, -1)
    t1.t_()
    return (t2, t1)


def _viewed_then_set(x0: T) -> object:
    # seed 45000 #8651, shrunk
    with torch.no_grad():
        t0 = x0.view((32, 1))
    t1 = t0.view((1, 32))
    t2 = x0.view((4, 8))
    with torch.no_grad():
        set_to(t1, t2)
    return (t0, t1)


def _viewed_under_no_grad_then_set(x0: T) -> object:
    with torch.no_grad():
        t0 = x0.view((32, 1))
        t1 = t0.view((1, 32))
    t2 = x0.view((4, 8))
    with torch.no_grad():
        set_to(t1, t2)
    return (t0, t1)


def _inputs_c4729(make: Callable[..., T], *shape: int) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        if make is pair:
            return (pair(*shape, requires_grad=True),)
        return (make(*shape),)

    return make_inputs


@pytest.mark.parametrize("make", [pair, leaf], ids=["pair", "plain"])
@pytest.mark.parametrize("shape", [(4,), (4, 3)], ids=["1d", "2d"])
@pytest.mark.parametrize("fn", [_transposed_after_view, _transposed_after_view_all_grad])
def test_view_of_output_changed_in_place_after(
    fn: Callable[[T], object], shape: tuple[int, ...], make: Callable[..., T], compile_fn: CompileFn | None
) -> None:
    check_with_grad(fn, _inputs_c4729(make, *shape), compile_fn)
    check_no_grad(fn, _inputs_c4729(make, *shape), compile_fn)


def test_set_view_of_no_grad_output_refused(compile_fn: CompileFn | None) -> None:
    make_inputs = _inputs_c4729(pair, 2, 4, 4)
    refused_with_grad(_viewed_then_set, make_inputs, compile_fn, r"out\[0\] is a view made under no_grad")
    check_no_grad(_viewed_then_set, make_inputs, compile_fn)


def test_set_view_taken_under_no_grad(compile_fn: CompileFn | None) -> None:
    check_with_grad(_viewed_under_no_grad_then_set, _inputs_c4729(pair, 2, 4, 4), compile_fn)
    check_no_grad(_viewed_under_no_grad_then_set, _inputs_c4729(pair, 2, 4, 4), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz follow-up (seed 49000 #6570): a view (detach, view, select, ...) of a subclass input taken before an in-place
# view op on it (transpose_, t_, as_strided_) and a `.data =` / set_() of it: the `.data =` gives the wrapper back
# the metadata it had when the view was taken while its dense leaves stay transposed, and the output was replayed
# from the input after the epilogue, on the transposed leaves (Note [Wrapper Storage]). Also its
# variants: a view of a PairTensor input set_() while another input shares its storage, and a plain input that
# requires grad given `.data =` and an in-place view op with grad (Note [History Kept Through .data =]).
# ---------------------------------------------------------------------------------------------------------------------


_VIEWS: dict[str, Callable[[T], T]] = {
    "detach": lambda x: x.detach(),
    "alias": torch.ops.aten.alias.default,
    "view": lambda x: x.view(-1),  # raised: view() of the transposed leaves
    "select": lambda x: x[0],
    "detach_t": lambda x: x.detach().t(),
}

_META_OPS: dict[str, Callable[[T], object]] = {
    "transpose_": lambda x: x.transpose_(0, 1),
    "t_": lambda x: x.t_(),
    "as_strided_": lambda x: x.as_strided_((3, 2), (1, 3), 1),
    "unsqueeze_": lambda x: x.unsqueeze_(0),
}


def _assign(how: str, x: T, t: T) -> None:
    if how == "data":
        x.data = t
    elif how == "data_fresh":
        x.data = torch.zeros_like(t)
    else:
        x.set_(t)  # type: ignore[call-overload]  # torch's stubs list only the storage overloads of set_


def _program(view: str, meta: str, how: str, n: int) -> Callable[..., object]:
    """`t0 = view(x_1); t1 = x_0.sin(); meta(x_0); x_last.<assign>(t1); return (t0,)` over one object passed n times."""

    def f(*xs: T) -> object:
        t0 = _VIEWS[view](xs[1 % n])
        t1 = xs[0].sin()
        _META_OPS[meta](xs[0])
        _assign(how, xs[-1], t1)
        return (t0,)

    return f


def _times(make: Callable[[], T], n: int) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        x = make()
        return (x,) * n

    return make_inputs


def test_detach_before_transpose_and_data_assignment(compile_fn: CompileFn | None) -> None:
    # fuzz seed 49000 #6570 (shrunk): ours' output had stride (1, 3) and transposed values, eager's (3, 1)
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x1.detach()
        t1 = x1.sin()
        x0.transpose_(0, 1)
        x2.data = t1
        return (t0,)

    make_inputs = _times(lambda: pair(3, 3), 3)
    check_no_grad(f, make_inputs, compile_fn)
    check_with_grad(f, make_inputs, compile_fn)


@pytest.mark.parametrize("view", sorted(_VIEWS))
@pytest.mark.parametrize("n", [1, 3])
def test_views_before_meta_op_and_data_assignment(compile_fn: CompileFn | None, view: str, n: int) -> None:
    # variants of fuzz seed 49000 #6570: every view op, every in-place view op, `.data =` of the computed tensor;
    # a PairTensor and a plain tensor, passed once or three times, with and without grad
    for meta in sorted(_META_OPS):
        f = _program(view, meta, "data", n)
        for make in (lambda: pair(3, 3), lambda: torch.randn(3, 3)):
            check_no_grad(f, _times(make, n), compile_fn)
            check_with_grad(f, _times(make, n), compile_fn)


@pytest.mark.parametrize("how", ["data_fresh", "set_"])
def test_views_before_meta_op_and_storage_swap(compile_fn: CompileFn | None, how: str) -> None:
    # variants of fuzz seed 49000 #6570: `.data =` of a fresh tensor (the same failure) and set_()
    for view in ("detach", "view", "select"):
        for meta in ("transpose_", "as_strided_"):
            check_no_grad(_program(view, meta, how, 1), _times(lambda: pair(3, 3), 1), compile_fn)
            check_with_grad(_program(view, meta, how, 2), _times(lambda: pair(3, 3), 2), compile_fn)


def test_view_inputs_and_leaves_requiring_grad(compile_fn: CompileFn | None) -> None:
    # variants of fuzz seed 49000 #6570: the PairTensor input a view of a larger one, a leaf requiring grad (under
    # no_grad: with grad on, eager refuses the in-place view op), a non-leaf
    for view in ("detach", "select", "detach_t"):
        for meta in ("transpose_", "t_"):
            f = _program(view, meta, "data", 3)
            check_no_grad(f, _times(lambda: pair(4, 3)[1:], 3), compile_fn)
            check_with_grad(f, _times(lambda: pair(4, 3)[1:], 3), compile_fn)
            check_no_grad(f, _times(lambda: pair(3, 3, requires_grad=True), 3), compile_fn)
            check_no_grad(f, _times(lambda: pair_nonleaf(3, 3), 3), compile_fn)


def _aliased_pair() -> tuple[object, ...]:
    x = pair(3, 3)
    return (x, x.view(3, 3))


def _aliased_plain() -> tuple[object, ...]:
    x = torch.randn(3, 3)
    return (x, x.view(3, 3))


def _set_while_aliased(view: str, meta: str) -> Callable[..., object]:
    def f(x0: T, x1: T) -> object:
        t0 = _VIEWS[view](x1)
        t1 = x0.sin()
        x1.set_(t1)  # type: ignore[call-overload]  # torch's stubs list only the storage overloads of set_
        if meta == "squeeze_unsqueeze":
            x0.unsqueeze_(1)
            x0.squeeze_(1)
        elif meta == "t_":
            x0.t_()
        return (t0,)

    return f


@pytest.mark.parametrize("view", ["detach", "view", "select", "detach_t"])
def test_view_of_input_set_while_an_alias_keeps_its_storage(compile_fn: CompileFn | None, view: str) -> None:
    # variant of fuzz seed 49000 #6570 (found by a grid around it): `t0 = x1.detach(); x1.set_(x0.sin())` with x1 a
    # view of x0, two PairTensor objects on one storage: t0 was replayed from x1 after the epilogue, on its new
    # storage (another input still holding the old one hid the swap)
    for meta in ("none", "squeeze_unsqueeze", "t_"):
        for make in (_aliased_pair, _aliased_plain):
            check_no_grad(_set_while_aliased(view, meta), make, compile_fn)
            check_with_grad(_set_while_aliased(view, meta), make, compile_fn)


def _data_then_transpose(x: T) -> object:
    x.data = x.sin()
    x.transpose_(0, 1)
    return (x,)


def _transpose_then_data(x: T) -> object:
    x.transpose_(0, 1)
    x.data = x.sin()
    return (x,)


def _data_of_input_then_unsqueeze(x: T, y: T) -> object:
    x.data = y
    x.unsqueeze_(0)
    return (x.detach(),)


def test_inplace_view_op_with_grad_and_data_assignment(compile_fn: CompileFn | None) -> None:
    # variant of fuzz seed 49000 #6570 (found by a grid around it): a plain non-leaf that requires grad, given
    # `.data =` another storage and transpose_() with grad, returned: the epilogue's invisible `.data =` left it
    # without eager's TransposeBackward0 (a wrong gradient): refused; under no_grad, and for a PairTensor, parity
    one = lambda: (nonleaf(3, 3),)  # noqa: E731
    two = lambda: (nonleaf(3, 3), torch.randn(3, 3))  # noqa: E731
    match = r"cannot give it eager's history of that view op \(Note \[History Kept Through \.data =\]\)"
    for f, make in ((_data_then_transpose, one), (_transpose_then_data, one), (_data_of_input_then_unsqueeze, two)):
        refused_with_grad(f, make, compile_fn, match)
        check_no_grad(f, make, compile_fn)
    check_with_grad(_data_then_transpose, lambda: (pair_nonleaf(3, 3),), compile_fn)
    check_with_grad(_data_then_transpose, lambda: (torch.randn(3, 3),), compile_fn)

    def written_after(x: T, y: T) -> object:  # a write with grad after: Note [History Kept Through .data =]
        x.t_()
        x.data = y.sin()
        x.mul_(2)
        return (x,)

    check_with_grad(written_after, two, compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions: outputs set_() under grad whose `._base` is eager's (Note [set_ Under Grad]).
#
# The six programs once pinned as known `._base` divergences live on as parity tests in test_set_storage.py and
# test_set_storage.py; these are variants of them (other shapes, subclasses, several outputs on one base). With
# `--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
# ---------------------------------------------------------------------------------------------------------------------


def _check_holder(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# A view of an intermediate, then set_() under grad: eager's `._base` is the intermediate as it ends


def test_view_of_intermediate_written_then_set(compile_fn: CompileFn | None) -> None:
    # the base's values are the fill's, which only the graph knows
    def f(x: T, y: T) -> object:
        r = x * 2
        t = r.view(-1)
        r.fill_(1.5)
        set_to(t, y)
        return (t,)

    _check_holder(f, lambda: (_leaf(3, 2), _leaf(6)), compile_fn)


def test_view_of_intermediate_set_to_another_intermediate(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        r = x.exp()
        t = r[1]
        set_to(t, x.cos())
        return (t,)

    _check_holder(f, lambda: (_leaf(2, 3),), compile_fn)


def test_view_of_clone_set_to_itself(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #2259's shape: the output stays on the clone's storage, eager's `._base` the clone
    def f(x: T) -> object:
        c = x.clone()
        t = c.t()
        set_to(t, t)
        return (t,)

    _check_holder(f, lambda: (nonleaf(4, 2),), compile_fn)


def test_view_of_intermediate_set_then_base_unsqueezed(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        r = x * 3
        t = r.view(-1)
        set_to(t, y)
        r.unsqueeze_(0)
        return (t,)

    _check_holder(f, lambda: (_leaf(2, 3), _leaf(4)), compile_fn)


def test_set_view_beside_other_views_of_its_base(compile_fn: CompileFn | None) -> None:
    # eager's outputs share one `._base` object: so do ours
    def f(x: T, y: T) -> object:
        r = x * 3
        t = r.view(-1)
        u = r[0]
        set_to(t, y)
        return (u, t, r.t())

    _check_holder(f, lambda: (_leaf(2, 3), _leaf(4)), compile_fn)


def test_subclass_view_of_intermediate_set_under_grad(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        r = x * 2
        t = r.view(-1)
        set_to(t, y[1:])
        return (t,)

    with torch.enable_grad():
        assert_matches_eager(
            f, lambda: (pair(3, 2, requires_grad=True), pair(6, requires_grad=True)), compile_fn=compile_fn
        )


def test_subclass_view_chain_of_nonleaf_set_under_grad(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        r = x.sin()
        t = r.t().unsqueeze(0)
        set_to(t, y)
        return (t, y * 2)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(2, 4), pair_nonleaf(3)), compile_fn=compile_fn)


def test_subclass_set_view_beside_another_view_of_its_base(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        r = x * 3
        t = r.view(-1)
        set_to(t, y)
        return (t, r.t())

    _check_holder(f, lambda: (pair(2, 3, requires_grad=True), pair(4, requires_grad=True)), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# set_() under grad, then a view: eager's `._base` is the tensor set_(), on the storage the output lives on


def test_view_after_set_to_another_intermediate(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t0 = x * 2
        set_to(t0, x * 3)
        return (t0.t(),)

    _check_holder(f, lambda: (_leaf(2, 3),), compile_fn)


def test_view_after_set_to_a_view_of_an_input(compile_fn: CompileFn | None) -> None:
    # eager's `._base` has the input row's size, not the sum's
    def f(x: T) -> object:
        t0 = x.sum(0)
        set_to(t0, x[1])
        return (t0[1:],)

    _check_holder(f, lambda: (_leaf(4, 3),), compile_fn)


def test_subclass_view_chain_after_set_to_input(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t0 = x * 2
        set_to(t0, x)
        return (t0.t()[1:],)

    _check_holder(f, lambda: (pair(2, 3, requires_grad=True),), compile_fn)


def test_subclass_view_after_set_to_a_view_of_a_nonleaf(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t0 = x.sum(0)
        set_to(t0, x[1])
        return (t0[1:],)

    _check_holder(f, lambda: (pair_nonleaf(4, 3),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Computed with grad, then set_() onto an input under no_grad (Note [Outputs Over Another Storage])


def test_no_grad_set_onto_input_passedtwice(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #178: eager's t0 keeps AddBackward0 over x1's storage
    def f(x0: T, x1: T) -> object:
        t0 = x0.add(x1)
        with torch.no_grad():
            set_to(t0, x1)
        return (t0,)

    _check_holder(f, twice(_leaf), compile_fn)


def test_no_grad_set_onto_input_then_written(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0.sin()
        with torch.no_grad():
            set_to(t0, x1)
        t0.mul_(2.0)
        return (t0, x0 * 2)

    _check_holder(f, lambda: (_leaf(2, 3), torch.randn(2, 3)), compile_fn)


def test_no_grad_sets_of_two_outputs_onto_one_nonleaf(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0 * x1
        with torch.no_grad():
            set_to(t0, x1)
        t1 = x0.cos()
        with torch.no_grad():
            set_to(t1, x1)
        return (t0, t1, x1)

    _check_holder(f, lambda: (nonleaf(2, 3), nonleaf(2, 3)), compile_fn)


def test_no_grad_set_onto_input_of_another_size_refused(compile_fn: CompileFn | None) -> None:
    # eager's backward raises (MulBackward0 gets a gradient of the new size): the joint cannot trace that
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        with torch.no_grad():
            set_to(t0, x1)
        return (t0,)

    with torch.enable_grad():
        assert_refused(
            f, lambda: (_leaf(3), torch.randn(2, 2)), compile_fn, "set_\\(\\) this tensor under no_grad after computing"
        )


def test_no_grad_set_onto_part_of_input_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0 * 2
        with torch.no_grad():
            set_to(t0, x1[1])
        return (t0,)

    with torch.enable_grad():
        assert_refused(
            f, lambda: (_leaf(3), torch.randn(2, 3)), compile_fn, "set_\\(\\) this tensor under no_grad after computing"
        )


# ---------------------------------------------------------------------------------------------------------------
# A view taken with grad, then set_() under no_grad (Note [Outputs Over Another Storage])

_VIEW_SET_RULE = "a view the program took with grad and then set_\\(\\) under no_grad"


def test_view_of_intermediate_set_under_no_grad_onto_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #674 (shrunk): UnsqueezeBackward0 over MulBackward0 on x0's storage, `._base` t0; the backward
    # raises on the changed size in both
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.unsqueeze(-1)
        with torch.no_grad():
            set_to(t1, x0)
        return (t1,)

    _check_holder(f, lambda: (_leaf(),), compile_fn)


def test_view_set_under_no_grad_beside_its_base(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.unsqueeze(-1)
        with torch.no_grad():
            set_to(t1, x0)
        return (t1, t0)

    _check_holder(f, lambda: (_leaf(),), compile_fn)


def test_view_set_under_no_grad_of_the_same_size(compile_fn: CompileFn | None) -> None:
    # the backward runs: gradients through SelectBackward0 and MulBackward0
    def f(x: T, y: T) -> object:
        t0 = x * 2
        t1 = t0[0]
        with torch.no_grad():
            set_to(t1, y)
        return (t1,)

    _check_holder(f, lambda: (_leaf(2, 3), _leaf(3)), compile_fn)


def test_view_chain_of_nonleaf_set_under_no_grad(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        t0 = x.sin()
        t1 = t0.t()[1]
        with torch.no_grad():
            set_to(t1, y[1:])
        return (t1, y * 2)

    _check_holder(f, lambda: (nonleaf(2, 3), nonleaf(3)), compile_fn)


def test_two_views_one_set_under_no_grad_then_base_written(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        t0 = x * 2
        t1 = t0[0]
        t2 = t0[1]
        with torch.no_grad():
            set_to(t1, x.cos()[1])
        t0.mul_(3.0)
        return (t1, t2)

    _check_holder(f, lambda: (_leaf(2, 3), _leaf(3)), compile_fn)


def test_subclass_view_set_under_no_grad_refused(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        t0 = x * 2
        t1 = t0[0]
        with torch.no_grad():
            set_to(t1, y)
        return (t1,)

    with torch.enable_grad():
        assert_refused(f, lambda: (pair(2, 3, requires_grad=True), pair(3)), compile_fn, _VIEW_SET_RULE)


def test_view_set_under_no_grad_after_its_base_transposed_refused(compile_fn: CompileFn | None) -> None:
    # the chain no longer replays from the base as it ends
    def f(x: T, y: T) -> object:
        t0 = x * 2
        t1 = t0[0]
        t0.t_()
        with torch.no_grad():
            set_to(t1, y)
        return (t1,)

    with torch.enable_grad():
        assert_refused(f, lambda: (_leaf(2, 3), torch.randn(3)), compile_fn, _VIEW_SET_RULE)


def test_data_of_view_of_unreturned_intermediate_of_another_size(compile_fn: CompileFn | None) -> None:
    # like fuzz seed 2000 #3412: eager's t1 stays a view of the sum, on x0's first row
    def f(x0: T) -> object:
        t1 = x0.add(3.0)[1:3]
        t1.data = x0[0]
        return (t1,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(3, 4),), compile_fn=compile_fn)
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(3, 4),), compile_fn=compile_fn)


def test_data_of_view_chain_of_unreturned_intermediate(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t1 = x0.mul(2.0).t()[1:3]
        t1.data = x0
        return (t1, x0 + 1)

    _check_holder(f, lambda: (torch.randn(3, 4),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions: one hand-minimized program per distinct bug the fuzzer found (`python -m subclassaot fuzz`).
# Each program was a bug (once a strict xfail naming it); each now matches eager or is refused as eager's rule says.
# ---------------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# Helper "viewness": aliasing metadata of outputs (view-ness, `_base`, shared storage) and their autograd flags


def test_inplace_view_ops_under_mixed_grad_modes_refused(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 344 (WRONG GRADIENTS before): the no_grad t_() leaves eager's history alone, so the
    # later recorded t_() reads the gradient transposed; the epilogue's one as_strided_ did not.
    def f(x0: T) -> object:
        with torch.no_grad():
            x0.t_()
        x0.t_()
        return (x0,)

    with torch.enable_grad():
        assert_refused(f, lambda: (nonleaf(4, 4),), compile_fn, "both under no_grad and with grad enabled")


def test_subclass_view_of_intermediate_changed_after(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, programs 23 and 8543: the intermediate's unsqueeze_() after the views broke their chain; the
    # output came back as a wrapper of inner views instead of a wrapper-level view (Note [Output Regeneration]).
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        t1 = t0.select(0, 1)
        t2 = t1.reshape(())
        t0.unsqueeze_(-1)
        return (t2,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(1, 3).unbind(0)[0],), compile_fn=compile_fn)


def test_subclass_view_of_input_between_inplace_view_ops(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 2193: one object passed twice, viewed between two in-place view ops.
    def f(x0: T, x1: T) -> object:
        x1.unsqueeze_(0)
        t0 = x0.view(())
        x0.unsqueeze_(1)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair()
        return (b0, b0)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_view_set_to_input_that_then_changes(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 4195: the view is set_() to its input, whose layout a later transpose_() changes.
    def f(x0: T) -> object:
        t0 = x0.diagonal(0, 2, 0)
        set_to(t0, x0)
        t1 = x0.contiguous()
        t1.transpose_(1, 0)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(1, 3, 2),), compile_fn=compile_fn)


def test_subclass_view_after_set_to_itself(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 2871.
    def f(x0: T) -> object:
        set_to(x0, x0)
        t0 = x0.t()
        set_to(t0, x0)
        return (t0.t(),)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(2),), compile_fn=compile_fn)


def test_output_set_to_another_output_is_its_own_object(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, programs 4157 and 8627: t0 shares t1's storage after set_(); both came back as one object.
    def f(x0: T) -> object:
        t0 = x0.sin()
        t1 = t0.clone()
        set_to(t0, t1)
        return (t1, t0)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(2),), compile_fn=compile_fn)


def test_two_inputs_set_to_one_intermediate_share_it(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 1795: each input got a fresh storage of its own.
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x1.add(0.5)
        set_to(x2, t0)
        set_to(x0, t0.view((1, 1, 2)))
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn(4)
        return (b0, torch.randn(2), b0.reshape((1, 2, 2)))

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_of_intermediate_the_input_is_set_to(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 727: eager's `._base` is the intermediate, not the input now sharing its storage.
    def f(x0: T) -> object:
        t0 = x0.mul(-1.0)
        t1 = t0.t()
        set_to(x0, t0)
        return (t1,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(3),), compile_fn=compile_fn)


def test_data_assigned_to_itself_keeps_view_chains(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 7202: `t0.data = t0` counted as a storage swap; the no_grad view came back with a
    # grad_fn.
    def f(x0: T) -> object:
        t0 = x0.view((6, -1))
        with torch.no_grad():
            t1 = t0[:, 0:1:1]
        t0.data = t0
        return (t1,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(2, 3, 3, requires_grad=True),), compile_fn=compile_fn)


def test_view_of_storage_an_intermediate_left_refused(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 2342: the output views the clone's storage, which `.data =` moved t0 off; it came
    # back sharing the input's storage.
    def f(x0: T) -> object:
        t0 = x0.clone()
        t1 = t0.diagonal(1, 0, 1)
        t0.data = x0
        return (t1,)

    with torch.no_grad():
        assert_refused(f, lambda: (torch.randn(1, 2, 3),), compile_fn, "moved to another storage")


def _view_of_storage_left(view: str, root: bool) -> Callable[[T], object]:
    def f(x0: T) -> object:
        t0 = x0 * 2
        t1 = t0[1:] if view == "slice" else t0.view(torch.int32)
        t0.data = x0 * 3
        return (t1, t0) if root else (t1,)

    return f


@pytest.mark.parametrize(("view", "root"), [("slice", False), ("dtype", False), ("dtype", True)])
def test_view_of_storage_an_intermediate_left_for_another_intermediate(
    compile_fn: CompileFn | None, view: str, root: bool
) -> None:
    # Fuzz seed 121008, program 4587 (with the root's dtype kept): `.data =` moved t0 onto another intermediate's
    # storage; eager's t1 stays on the storage t0 left, with t0 (there) as its `._base`. Was refused ("moved to
    # another storage"); the graph returns t1 as its storage's base and t1 is rebuilt as a view of t0 set_() onto it.
    with torch.no_grad():
        assert_matches_eager(_view_of_storage_left(view, root), lambda: (torch.randn(3),), compile_fn=compile_fn)


def test_view_of_storage_an_output_left_refused(compile_fn: CompileFn | None) -> None:
    # As above with t0 returned too: refused (t1's `._base` would be that output), not replayed from t0 where it
    # ends (wrong values, sharing t0's storage)
    with torch.no_grad():
        f = _view_of_storage_left("slice", True)
        assert_refused(f, lambda: (torch.randn(3),), compile_fn, "whose `.data` the program assigned")


def test_view_of_storage_a_retyped_intermediate_left_refused(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 121008, program 4587: `.data =` gave t1 another dtype (the functional run keeps its own): refused.
    def f(x0: T) -> object:
        t1, t2 = x0.sort(0)
        t3 = t1.expand((2,))
        t1.data = t2
        return (t3,)

    with torch.no_grad():
        assert_refused(f, lambda: (torch.randn(2),), compile_fn, "moved to another storage")


def test_detach_of_subclass_with_assigned_data(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 6801: detach() shares the wrapper storage `.data =` gave t0, like a view (Note
    # [Wrapper Storage]).
    def f(x0: T) -> object:
        t0 = x0.sin()
        t0.data = x0
        return (t0.detach(),)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(1),), compile_fn=compile_fn)


def test_view_given_other_data_stays_a_view(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 3966: `t2.data = t1` keeps t2 a view of x0 (its `._base`), on x1's storage.
    def f(x0: T, x1: T) -> object:
        t1 = x1.transpose(0, 0)[1:1:1]
        t2 = x0.unsqueeze(-3)
        t2.data = t1
        return (t2,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(4, 1), torch.randn(1)), compile_fn=compile_fn)


def test_view_given_data_that_requires_grad_in_training(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 1447: the view of x0 came back as a view of x1, requiring grad.
    def f(x0: T, x1: T) -> object:
        t0 = x0.reshape((3, 2, 1))
        t0.data = x1
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(1, 3, 2), nonleaf(1, 4)), compile_fn=compile_fn)


def test_view_of_subclass_set_under_grad_refused(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 949: t1's history goes through t0.set_(t0), recorded by autograd.
    def f(x0: T) -> object:
        t0 = x0.reshape((1, 4, 4))
        set_to(t0, t0)
        return (t0.select(1, -3),)

    with torch.enable_grad():
        assert_refused(
            f,
            lambda: (pair_nonleaf(4, 4),),
            compile_fn,
            "is a view of a tensor the program set_\\(\\) with grad enabled",
        )


def test_subclass_view_of_intermediate_set_to_input(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 9090: eager's `._base` is t0, whose leaves set_() put on the input's storage.
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        set_to(t0, x0)
        return (t0.select(1, 0),)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(3).unsqueeze(-2),), compile_fn=compile_fn)


def test_subclass_view_of_intermediate_the_input_is_set_to(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 2729.
    def f(x0: T) -> object:
        t0 = x0.sum(0)
        set_to(x0, t0)
        return (t0.as_strided((), (), 1),)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(1, 3),), compile_fn=compile_fn)


def test_view_of_input_before_set_elsewhere(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 3285 (refused before): the view keeps the storage the input had; it is rebuilt from
    # the input before the epilogue swaps it.
    def f(x0: T) -> object:
        t0 = x0[3:3:1]
        set_to(x0, t0.mul(-1.0))
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(3),), compile_fn=compile_fn)


def test_subclass_view_of_input_before_set_elsewhere(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 5414 (refused before).
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t1 = x0.unsqueeze(0)
        set_to(x0, t0)
        return (t1,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(3, 1),), compile_fn=compile_fn)


def test_view_of_input_before_its_data_is_assigned(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 3017 (refused before).
    def f(x0: T, x1: T) -> object:
        t0 = x1.reshape(())
        x1.data = x0.mul(2.0)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(3), torch.randn(())), compile_fn=compile_fn)


def test_view_of_input_before_set_with_history_refused(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 1206: rebuilt before the epilogue's set_() under grad, the unbind() view's grad_fn
    # would raise (eager took it after the set_).
    def f(x0: T) -> object:
        t0 = x0.view((2, 1, 1))
        set_to(x0, t0.clone())
        return (t0.unbind(0)[0],)

    with torch.enable_grad():
        assert_refused(f, lambda: (nonleaf(2),), compile_fn, "with autograd history only where the input came")


def _input_and_tensor() -> tuple[object, ...]:
    with torch.enable_grad():
        return (torch.randn(4, requires_grad=True).clone(), torch.randn(1, 4, 3))


def _view_then_data_assigned(x0: T, x1: T) -> object:
    t0 = x0.expand((2, -1))
    x0.data = x1
    return (t0,)


def _view_then_set_under_no_grad(x0: T, x1: T) -> object:
    t0 = x0[1:]
    with torch.no_grad():
        set_to(x0, x1)
    return (t0, x0)


def _written_then_viewed_then_data_assigned(x0: T, x1: T) -> object:
    x0.mul_(2)
    t0 = x0[1:]
    x0.data = x1
    return (t0,)


def test_view_with_history_of_input_then_moved_by_data_assignment(compile_fn: CompileFn | None) -> None:
    """t0, taken with grad of x0 as it came (requiring grad), keeps the old storage and ExpandBackward0 over x0's
    grad_fn after `.data =` moves x0 (no counter bump): the replay before the epilogue gives it that history (fuzz seed
    121012 #6006, #9757: refused). A set_() bumps the counter (eager's view then stale), and a write before the view
    puts a node in eager's history that the epilogue gives only after: both stay refused."""
    with torch.enable_grad():
        assert_matches_eager(
            _view_then_data_assigned, _input_and_tensor, compile_fn=compile_fn, after_call=write_outputs
        )
    rule = "with autograd history only where the input came requiring grad"
    refused_with_grad(_view_then_set_under_no_grad, _input_and_tensor, compile_fn, rule)
    refused_with_grad(_written_then_viewed_then_data_assigned, _input_and_tensor, compile_fn, rule)


def _input_and_its_view() -> tuple[object, ...]:
    with torch.no_grad():
        b0 = torch.randn(4, 3, 2)
    b0.requires_grad_()
    with torch.enable_grad():
        b0 = b0.clone()
    return (b0, b0.select(1, 0))


def _view_of_an_input_view_moved_by_data(x0: T, x1: T) -> object:
    x1.data = x0.mul(3.0)
    return (x1.reshape((2, 3, 4)),)


def _view_of_an_input_view_taken_then_moved(x0: T, x1: T) -> object:
    t1 = x1[1]
    y = x0.mul(3.0)
    x1.data = y
    t1.data = y[2]
    return (t1,)


def _view_of_a_view_set_off_its_base(x0: T, x1: T) -> object:
    t1 = x1[1]
    set_to(t1, x0.mul(2.0))
    return (t1.view(-1),)


@pytest.mark.parametrize(
    "f",
    [_view_of_an_input_view_moved_by_data, _view_of_an_input_view_taken_then_moved, _view_of_a_view_set_off_its_base],
    ids=["viewed_after_data", "moved_with_its_input", "set_off_its_base"],
)
def test_view_requiring_grad_on_another_storage_than_its_base_without_grad(
    compile_fn: CompileFn | None, f: Callable[..., object]
) -> None:
    """In a call without grad, an output view requiring grad through its `._base` x0 (x1's base, which is no view of
    it in storage) has no history: rebuilt onto its base as a view that requires none is (fuzz seed 121012 #2184,
    #2971, #6942, #7520: refused as a view 'that requires grad of input 0, on another storage'; the set_() of a view
    taken of x1: DIVERGED, no grad and another `._base`)."""
    with torch.no_grad():
        assert_matches_eager(f, _input_and_its_view, compile_fn=compile_fn, after_call=write_outputs)


def test_detach_of_input_written_with_grad(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 3651: t0's CopyBackwards history came back missing; refused, then supported (Note
    # [Outputs Over Another Storage])
    def f(x0: T) -> object:
        t0 = x0.detach()
        t0.copy_(x0)
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(4, 2, 2),), compile_fn=compile_fn)


def test_data_of_view_of_unreturned_intermediate(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 2000, program 3412: eager's t1 stays a view of t0, which no output returns. Refused, then supported:
    # the graph returns t0 as an intermediate base (Note [Outputs Over Another Storage]), t1 replays its chain from
    # it and is then assigned (Replay.then_set; Note [Outputs Over Another Storage]).
    def f(x0: T) -> object:
        t1 = x0.add(3.0)[0:1:1]
        t1.data = x0
        return (t1,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(()).reshape((1, -1)),), compile_fn=compile_fn)


def _view_set_onto_its_base(x0: T) -> object:
    t0 = x0.sin()
    t1 = t0.select(2, 0)
    t2 = t1[:, 1:1:1]
    set_to(t2, t1)
    return (t2,)


def test_view_set_back_onto_its_roots_storage_keeps_the_root_as_base(compile_fn: CompileFn | None) -> None:
    """Seed 24000 #814 (shrunk; diverged: out[0]._base had shape (3, 2) where eager's is t0, (3, 2, 2)): t2, a view
    of t1 (itself a view of t0), set_() to t1 stays a view of t0, now on t0's storage. The analysis took the set_()
    view as the root of that storage and the graph returned t1 as the base (Note [Outputs Over Another Storage])."""

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (torch.randn((3, 2, 2)),)

    with torch.no_grad():
        assert_matches_eager(_view_set_onto_its_base, make_inputs, compile_fn=compile_fn)


def _set_to_root(x0: T) -> object:
    t0 = x0.sin()
    t2 = t0.select(2, 0)[:, 1:1:1]
    set_to(t2, t0)
    return (t2,)


def _set_to_view_returned_beside(x0: T) -> object:
    t0 = x0.sin()
    t1 = t0.select(2, 0)
    t2 = t1[:, 1:1:1]
    set_to(t2, t1)
    return (t2, t1)


def _set_to_other_view_then_viewed(x0: T) -> object:
    t0 = x0.sin()
    t2 = t0.select(2, 0)[:, 1:1:1]
    set_to(t2, t0.diagonal(0, 1, 2))
    return (t2.t(),)


def _data_assigned_view(x0: T) -> object:
    t0 = x0.sin()
    t1 = t0.select(2, 0)
    t2 = t1[:, 1:1:1]
    t2.data = t1
    return (t2,)


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize(
    "fn",
    [
        _view_set_onto_its_base,
        _set_to_root,
        _set_to_view_returned_beside,
        _set_to_other_view_then_viewed,
        _data_assigned_view,
    ],
)
def test_view_set_back_onto_its_roots_storage(
    compile_fn: CompileFn | None, grad: bool, fn: Callable[[T], object]
) -> None:
    # seed 24000 #814 and variants: set_() to the root, or to another view of it, the set view returned beside its
    # source or viewed again, `.data =` instead of set_() (refused before); with grad too (the input does not require it)
    with torch.set_grad_enabled(grad):
        assert_matches_eager(fn, lambda: (torch.randn((3, 2, 2)),), compile_fn=compile_fn)


def test_view_set_back_onto_its_roots_storage_with_history(compile_fn: CompileFn | None) -> None:
    # seed 24000 #814 with an input that requires grad, t1 returned beside t2 (out[1]'s `._base` was itself)
    def f(x0: T) -> object:
        return _set_to_view_returned_beside(x0)

    _check(f, lambda: (_leaf(3, 2, 2),), compile_fn)


def test_subclass_view_set_back_onto_its_roots_storage(compile_fn: CompileFn | None) -> None:
    # seed 24000 #814 with a PairTensor input, under no_grad
    with torch.no_grad():
        assert_matches_eager(_view_set_onto_its_base, lambda: (pair(3, 2, 2),), compile_fn=compile_fn)


def view_of_a_view_moved_by_data_after(x0: torch.Tensor, x1: torch.Tensor) -> object:
    x1.add_(1)  # the other input over the storage is written
    t1 = x0[0]
    t2 = t1[1]
    t1.data = torch.zeros(3)  # t2's `._base` stays x0
    return (t2,)


def _detach_and_itself() -> tuple[torch.Tensor, torch.Tensor]:
    b0 = torch.randn((1, 4, 2))
    return b0.detach(), b0


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_view_of_an_input_sharing_storage_keeps_its_base_after_data_of_its_source(
    grad: bool, compile_fn: CompileFn | None
) -> None:
    """Two inputs over one storage: the output is a view of args[0] (through a view `.data =` moved since); the
    compiled one was a view of args[1], the input last seen over that storage (fuzz seed 53000, program 883:
    DIVERGED). The input the program took it from, through such moves, is its base."""
    with torch.set_grad_enabled(grad):
        assert_matches_eager(view_of_a_view_moved_by_data_after, _detach_and_itself, compile_fn=compile_fn)
