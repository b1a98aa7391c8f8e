"""Calls under torch.inference_mode(): inference tensors have no version counter, so the runtime neither reads nor
sets one for them (eager has none either); results, input mutations and view-ness are eager's. (The parity oracle
reads version counters, so these compare by hand.)"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import cast

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import subclassaot
from subclassaot.errors import UnsupportedError
from subclassaot.tools.parity import Versions, write_outputs
from subclasses.pair import PairTensor
from tests.oracle import assert_call_matches_eager, assert_matches_eager, assert_raises_like_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import ENTRIES, SinFunction, TransposeSaved, real_subclass
from tests.pipeline.program_helpers import ViewAsAndRowOfOwnTensor as TwoViews  # (the fuzzer's TwoViews)

T = torch.Tensor


def mutate_and_views(x: T) -> tuple[T, T]:
    x.add_(1)
    return x.view(-1) * 2, x.t()


def plain_of(t: T) -> T:
    return t.a if isinstance(t, PairTensor) else t


@pytest.mark.parametrize(
    "make",
    [lambda: torch.randn(2, 2), lambda: PairTensor.from_tensor(torch.randn(2, 2))],
    ids=["plain", "pair"],
)
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_inference_tensors_match_eager(make: Callable[[], T], backend: str) -> None:
    compiled = subclassaot.compile(mutate_and_views, backend=backend)
    for _ in range(2):
        with torch.inference_mode():
            torch.manual_seed(0)
            x = make()
            torch.manual_seed(0)
            x_eager = make()
            ours, eager = compiled(x), mutate_and_views(x_eager)
            assert x.is_inference() and ours[0].is_inference()
            for a, b in zip(ours, eager, strict=True):
                assert type(a) is type(b) and a.shape == b.shape and a.stride() == b.stride()
                assert a._is_view() == b._is_view()
                torch.testing.assert_close(plain_of(a), plain_of(b))
            torch.testing.assert_close(plain_of(x), plain_of(x_eager))


def test_plain_tensor_called_under_inference_mode() -> None:
    compiled = subclassaot.compile(mutate_and_views, backend="eager")
    x, x_eager = torch.ones(2, 2), torch.ones(2, 2)
    with torch.inference_mode():
        ours, eager = compiled(x), mutate_and_views(x_eager)
    torch.testing.assert_close(ours, eager)
    assert x._version == x_eager._version and ours[1]._base is x


def _data_of_inference_tensor_assigned(x0: T) -> tuple[T, ...]:
    with torch.inference_mode():
        t0 = x0.mul(-1.0)
    t1 = x0.expand((2,))
    t0.data = t1
    return ()


def _data_of_inference_tensor_assigned_and_returned(x0: T) -> tuple[T, ...]:
    with torch.inference_mode():
        t0 = x0.mul(-1.0)
    t0.data = x0.expand((2,)) * 3
    return (t0, t0 + 1)


@pytest.mark.parametrize("fn", [_data_of_inference_tensor_assigned, _data_of_inference_tensor_assigned_and_returned])
def test_data_of_a_tensor_made_in_inference_mode_assigned_outside_matches_eager(fn: Callable[[T], object]) -> None:
    """`.data =` of an inference tensor outside inference_mode is legal in eager (it records nothing); the analysis
    changed the tensor's metadata outside inference_mode and crashed (fuzz seed 21000, program 360)."""
    from tests.oracle import assert_matches_eager

    with torch.no_grad():
        assert_matches_eager(fn, lambda: (torch.randn(()),))


def _data_of_inference_tensor_assigned_then_saved(x0: T) -> tuple[T, ...]:
    with torch.inference_mode():
        t0 = x0.mul(0.5)
    t0.data = x0
    t1 = SinFunction.apply(t0)  # type: ignore[no-untyped-call]  # Function.apply is untyped in torch
    return (t0, t1)


def _data_of_inference_tensor_assigned_then_read(x0: T) -> tuple[T, ...]:
    with torch.inference_mode():
        t0 = x0.mul(0.5)
    t0.data = x0
    return (t0.sin(),)


def _data_of_inference_tensor_assigned_then_written(x0: T) -> tuple[T, ...]:
    with torch.inference_mode():
        t0 = x0.mul(0.5)
    t0.data = x0
    t0.add_(1)
    return (t0,)


def _jagged_example() -> T:
    import subclasses.nested.tensor

    return subclasses.nested.tensor.example()


_COUNTERLESS_INPUTS: dict[str, Callable[[], T]] = {
    "plain": lambda: torch.randn(3, 4, requires_grad=True),
    "pair": lambda: PairTensor.from_tensor(torch.randn(3, 4)).requires_grad_(),
    "jagged": _jagged_example,
}


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("make", list(_COUNTERLESS_INPUTS.values()), ids=list(_COUNTERLESS_INPUTS))
@pytest.mark.parametrize(
    "fn", [_data_of_inference_tensor_assigned_then_saved, _data_of_inference_tensor_assigned_then_read]
)
def test_tensor_made_in_inference_mode_then_assigned_data_has_no_version_counter(
    fn: Callable[[T], object], make: Callable[[], T], grad: bool
) -> None:
    """`.data =` onto an inference tensor takes the new data's dispatch keys (`is_inference()` turns False) but keeps
    the absent version counter, so reading `._version` raises. Eager reads it nowhere here; the dispatch handling of
    a subclass read it and crashed (fuzz --subclass subclasses.nested.tensor:example, seed 123059, program 37)."""
    with torch.set_grad_enabled(grad):
        assert_matches_eager(fn, lambda: (make(),))


@pytest.mark.parametrize("make", list(_COUNTERLESS_INPUTS.values()), ids=list(_COUNTERLESS_INPUTS))
def test_tensor_made_in_inference_mode_then_assigned_data_written_raises_as_eager(make: Callable[[], T]) -> None:
    """Eager's in-place op on such a tensor raises (its counter cannot be bumped)."""
    with torch.no_grad():
        assert_raises_like_eager(_data_of_inference_tensor_assigned_then_written, lambda: (make(),))


def _leaf_written_with_grad_on_inside_inference_mode(x0: T) -> tuple[T, ...]:
    with torch.inference_mode():
        with torch.enable_grad():
            x0.mul_(x0)
    return ()


def test_leaf_written_with_grad_turned_on_inside_inference_mode_matches_eager() -> None:
    """Inside inference_mode autograd records nothing even with grad mode on, so eager writes a leaf that requires
    grad there without complaint; the epilogue's write back raised eager's leaf error (fuzz seed 22000, program
    820)."""
    from tests.oracle import assert_matches_eager

    assert_matches_eager(
        _leaf_written_with_grad_on_inside_inference_mode, lambda: (torch.randn(3, 2, requires_grad=True),)
    )


def _inference_view_made_to_require_grad(x0: T) -> tuple[T, ...]:
    with torch.inference_mode():
        t0 = x0.reshape((1, -1, 1))
    t0.requires_grad_()
    return ()


def test_view_taken_inside_inference_mode_made_to_require_grad_matches_eager() -> None:
    """Eager's view of a normal tensor taken inside inference_mode is a normal tensor and may require grad; the
    functionalized trace's was an inference tensor (crashed: fuzz seed 22000, program 31; refused since). Of a base
    that requires no grad, the run takes the view outside inference mode (Note [Grad Mode And Autograd Reads])."""
    with torch.no_grad():
        assert_matches_eager(_inference_view_made_to_require_grad, lambda: (torch.randn(()),))


# ---------------------------------------------------------------------------------------------------------------
# Held out: the cases of PyTorch's C++ InferenceMode tests (test/cpp/api/inference_mode.cpp), as programs that open
# an inference_mode block inside a compiled call: a functional op on a normal tensor gives an inference tensor, an
# in-place op on a normal tensor is counted but not recorded, a view of a normal tensor stays a normal tensor, an
# inference tensor cannot be saved for backward. Each matches eager, raises as eager does, or is refused by name.


def _held_functional(x: T) -> object:
    with torch.inference_mode():
        y = x * 2
    return (y.clone(),)


def _held_inplace(x: T) -> object:
    with torch.inference_mode():
        x.add_(1)
    return (x * 2,)


def _held_view_returned(x: T) -> object:
    with torch.inference_mode():
        v = x.view(-1)
    return (v,)


def _held_view_written_inside(x: T) -> object:
    with torch.inference_mode():
        v = x.view(-1)
        v.mul_(2)
    return (x * 1,)


def _held_inference_tensor_saved(x: T) -> object:
    with torch.inference_mode():
        y = x.sum()
    return (x * y,)


def _held_inputs(grad: bool) -> Callable[[], tuple[T]]:
    return lambda: (torch.randn(3, requires_grad=True).clone() if grad else torch.randn(3),)


# A known gap (runtime/steps.py: Version Counters As Eager's): outside inference_mode, eager's clone() and reductions (sum, max) of
# an inference tensor advance their normal result's version counter (1, max's indices 2) through the out= kernels they
# run; the compiled result is fresh (0). Counters are compared as "moved" there.
_INFERENCE_READ_VERSIONS: dict[Callable[..., object], Versions] = {_held_functional: "moved", _held_inplace: "counted"}


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("f", [_held_functional, _held_inplace], ids=["functional", "inplace"])
def test_held_out_inference_mode_blocks_match_eager(f: Callable[..., object], grad: bool) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, _held_inputs(grad), versions=_INFERENCE_READ_VERSIONS[f])


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("f", [_held_view_returned, _held_view_written_inside], ids=["returned", "written"])
def test_held_out_views_of_normal_tensors_inside_inference_mode(f: Callable[..., object], grad: bool) -> None:
    """Eager's view is a normal tensor sharing its base's version counter, with creation meta INFERENCE_MODE: once
    the output is written after the call, reading its grad_fn raises naming inference mode, as the compiled one's
    does (it was refused: the run's view was an inference tensor)."""
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, _held_inputs(grad))
        assert_matches_eager(f, _held_inputs(grad), after_call=write_outputs)


def test_held_out_inference_tensor_saved_for_backward_raises_as_eager() -> None:
    with torch.enable_grad():
        assert_raises_like_eager(_held_inference_tensor_saved, _held_inputs(True))
    with torch.no_grad():
        assert_matches_eager(_held_inference_tensor_saved, _held_inputs(False))


# ---------------------------------------------------------------------------------------------------------------
# Outputs computed inside an inference_mode block, in a call made outside one: eager's are inference tensors (and so
# are views of them, with no view relation, taken inside the block or after it); the runtime makes them so, one copy
# per storage, so that outputs sharing a storage still do. Found by the parity oracle once it compared
# `is_inference()` (fuzz seed 53000, program 1844, was the custom Function case below).


def _computed_inside(x: T) -> object:
    with torch.inference_mode():
        y = x.sin()
    return (y,)


def _views_and_repeats_inside(x: T) -> object:
    with torch.inference_mode():
        y = x.sin()
        row, tr = y[1], y.t()
    return row, tr, row, x * 2, y.cos()


def _viewed_after_and_input_written(x: T) -> object:
    with torch.inference_mode():
        y = x.sin()
    x.add_(1)
    return y.sum(), y.view(-1), x


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize(
    "f", [_computed_inside, _views_and_repeats_inside, _viewed_after_and_input_written], ids=["fresh", "views", "after"]
)
def test_outputs_computed_inside_inference_mode_are_inference_tensors(f: Callable[..., object], grad: bool) -> None:
    inputs = _held_inputs(grad and f is not _viewed_after_and_input_written)
    with torch.set_grad_enabled(grad):
        eager = f(*inputs())
        assert isinstance(eager, tuple) and eager[1 if f is _viewed_after_and_input_written else 0].is_inference()
        # (y.sum() of an inference tensor: see _INFERENCE_READ_VERSIONS)
        assert_matches_eager(f, inputs, versions="moved" if f is _viewed_after_and_input_written else "counted")
        # eager refuses an in-place op outside the block on such an output, and so does ours
        out = subclassaot.compile(f, backend="eager")(*inputs())
        assert isinstance(out, tuple)
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
            out[1 if f is _viewed_after_and_input_written else 0].add_(1)


def _view_after_then_grown_inside(x0: T) -> object:
    with torch.inference_mode():
        t0 = x0.mul(3.0)
    t1 = t0.unsqueeze(2)
    with torch.inference_mode():
        t0.resize_((21,))
        t0.fill_(0.5)
    return (t1.view((2, 8)),)


def _view_of_a_grown_one_taken_after(x0: T) -> object:
    with torch.inference_mode():
        t0 = x0.mul(3.0)
        t0.resize_((21,))
        t0.fill_(0.5)
    return (t0[:16].view((2, 8)), t0)


def _view_after_returned_beside_grown(x0: T) -> object:
    with torch.inference_mode():
        t0 = x0.mul(3.0)
    t1 = t0.unsqueeze(2)
    with torch.inference_mode():
        t0.resize_((21,))
        t0[16:].fill_(1.5)
    return (t1, t0[3:])


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize(
    "f",
    [_view_after_then_grown_inside, _view_of_a_grown_one_taken_after, _view_after_returned_beside_grown],
    ids=["view_before_growth", "view_after_growth", "both_returned"],
)
def test_views_of_an_inference_tensor_grown_inside_the_block_are_inference_tensors(
    f: Callable[..., object], grad: bool
) -> None:
    # resize_() grows the inference tensor's storage in place: eager's views of it, taken before or after, stay
    # inference tensors with no view relation (fuzz seed 117000 #7027: ours was a normal view)
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, lambda: (torch.randn(4, 4),), versions="counted")


def _function_with_grad_inside_inference_mode(x: T) -> object:
    with torch.inference_mode(), torch.set_grad_enabled(True):
        y = SinFunction.apply(x)  # type: ignore[no-untyped-call]
    return (y,)


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_custom_function_with_grad_inside_inference_mode_refused(grad: bool) -> None:
    """Autograd records a custom Function wherever grad mode is on, inside inference_mode too: eager's result is an
    inference tensor with the Function's grad_fn, which no compiled call can make. Refused, also in a call made
    under no_grad (whose analysis had ignored the Function, giving a result without history)."""
    with torch.set_grad_enabled(grad):
        eager = _function_with_grad_inside_inference_mode(torch.randn(3, requires_grad=True))
        assert isinstance(eager, tuple) and eager[0].is_inference() and eager[0].grad_fn is not None
        with pytest.raises(UnsupportedError, match="eager's is an inference tensor .* and it has autograd history"):
            subclassaot.compile(_function_with_grad_inside_inference_mode)(torch.randn(3, requires_grad=True))


def _factory_leaf_inside(x0: T) -> object:
    with torch.inference_mode():
        t0 = torch.ones((2,), requires_grad=True)
    return (t0,)


def _flagged_leaf_inside(x0: T) -> object:
    t = x0.sin()
    with torch.inference_mode():
        t1 = torch.ones((4, 1, 1)).requires_grad_()
    return (t1, t)


def _flag_set_on_a_clone_inside(x0: T) -> object:
    with torch.inference_mode():
        t1 = x0.clone()
        t1.requires_grad = True
    return (t1,)


def _leaf_inside_viewed_and_used_after(x0: T) -> object:
    with torch.inference_mode():
        t0 = torch.full((4,), 2.0, requires_grad=True)
        v = t0[1:]
    return (t0, v, t0[:2], t0 * x0)


@pytest.mark.parametrize("x_grad", [True, False], ids=["x_requires_grad", "x_plain"])
@pytest.mark.parametrize(
    "f",
    [_factory_leaf_inside, _flagged_leaf_inside, _flag_set_on_a_clone_inside, _leaf_inside_viewed_and_used_after],
    ids=["factory", "requires_grad_", "flag_attr", "viewed_and_used"],
)
def test_leaf_that_requires_grad_made_inside_inference_mode_matches_eager(
    f: Callable[..., object], x_grad: bool
) -> None:
    """A tensor made inside the block and given requires_grad there (a factory's requires_grad=True, requires_grad_(),
    `.requires_grad = True`) is an inference tensor that is an autograd leaf requiring grad: the caller's backward
    through a result computed from it after the call fills its `.grad`; its views are inference tensors that require
    no grad. The compiled call, made under no_grad, gives its rebuilt inference tensor the flag inside inference_mode
    (fuzz seed 121011, programs 450, 908, 3069, 3147 and nine more: refused as having a custom Function's history;
    refused before the flag was told from history, and without the flag once it was)."""
    with torch.no_grad():
        eager = f(torch.randn(4))
    assert isinstance(eager, tuple) and eager[0].is_inference() and eager[0].requires_grad and eager[0].is_leaf
    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(4).requires_grad_(x_grad),), versions="counted")


def _leaf_inside_viewed_after(x0: T) -> object:
    with torch.inference_mode():
        t0 = torch.ones((4,), requires_grad=True)
    return (t0, t0.reshape((2, 2, 1)))


@pytest.mark.parametrize("x_grad", [True, False], ids=["x_requires_grad", "x_plain"])
@pytest.mark.parametrize(
    "f",
    [_factory_leaf_inside, _flagged_leaf_inside, _flag_set_on_a_clone_inside, _leaf_inside_viewed_after],
    ids=["factory", "requires_grad_", "flag_attr", "viewed_after"],
)
def test_leaf_that_requires_grad_made_inside_inference_mode_with_grad_on_matches_eager(
    f: Callable[..., object], x_grad: bool
) -> None:
    """As above, in a call made with grad on: eager's output is the same inference leaf requiring grad, with no
    grad_fn (a view of it taken after the block is an inference tensor with no flag nor history); the compiled call
    holds the flag back and gives it to the rebuilt inference tensor inside inference_mode (fuzz seed 121011, programs
    450, 2904, 3069, 6616 and five more: refused as a new leaf whose histories the graph "would
    not record", none of which applied)."""
    with torch.enable_grad():
        eager = f(torch.randn(4))
        assert isinstance(eager, tuple) and eager[0].is_inference() and eager[0].requires_grad and eager[0].is_leaf
        assert_matches_eager(f, lambda: (torch.randn(4).requires_grad_(x_grad),), versions="counted")


def test_inference_leaf_computed_from_after_the_block_with_grad_on_refused_by_name() -> None:
    """An inference leaf made inside the block that the program computes from after it with grad on: eager's result
    has history ending in that leaf (with an input requiring grad, eager raises: the inference tensor would be saved).
    The compiled call, which gives an inference tensor the flag only once returned, refuses it naming the inference
    leaf (it named writes, views and no_grad blocks the program does not have)."""
    f = _leaf_inside_viewed_and_used_after
    with torch.enable_grad():
        eager = f(torch.randn(4))
        assert isinstance(eager, tuple) and eager[3].grad_fn is not None
        with pytest.raises(UnsupportedError, match="inside a torch.inference_mode.. block require grad .* and uses it"):
            subclassaot.compile(f)(torch.randn(4))
        assert_raises_like_eager(f, lambda: (torch.randn(4, requires_grad=True),))


def _input_set_onto_an_inference_result(x0: T, x1: T) -> object:
    with torch.inference_mode():
        t0 = x1.mul(0.5)
    x0.set_(t0)  # type: ignore[call-overload]
    return (t0,)


def test_inference_result_another_tensor_is_set_onto_refused() -> None:
    """Eager's input shares the inference tensor's storage after set_(); the runtime's inference output is over a
    copy of it (fuzz seed 54000, programs 336 and 581: DIVERGED). Refused by name."""

    def make() -> tuple[T, T]:
        return torch.randn(()), torch.randn((1,))

    with torch.no_grad():
        x0, x1 = make()
        out = _input_set_onto_an_inference_result(x0, x1)
        assert isinstance(out, tuple) and out[0].is_inference()
        assert x0.untyped_storage().data_ptr() == out[0].untyped_storage().data_ptr()
        with pytest.raises(UnsupportedError, match="inference tensor .* whose storage another tensor shares"):
            subclassaot.compile(_input_set_onto_an_inference_result)(*make())


def _result_set_onto_an_inference_result(x0: T) -> object:
    t0 = x0.clone()
    with torch.inference_mode():
        t1 = t0.mul(t0)
    t0.set_(t1)  # type: ignore[call-overload]
    return (t1, t0)


@pytest.mark.parametrize(
    "make",
    [lambda: (torch.randn((1,)),), lambda: (PairTensor.from_tensor(torch.randn((1,))),)],
    ids=["plain", "pair"],
)
def test_output_set_onto_an_inference_result_refused(make: Callable[[], tuple[T]]) -> None:
    """Eager's output made outside the block shares the inference output's storage after set_() (a subclass's: each
    leaf's, set_() applied to every inner tensor); the runtime's inference output is over a copy of it (fuzz seed
    122911, program 156: DIVERGED for PairTensor, whose outer tensors share no storage). Refused by name."""
    with torch.no_grad():
        t1, t0 = cast(tuple[T, T], _result_set_onto_an_inference_result(*make()))
        assert t1.is_inference() and not t0.is_inference()
        pairs = (
            [(t1.a, t0.a), (t1.b, t0.b)] if isinstance(t1, PairTensor) and isinstance(t0, PairTensor) else [(t1, t0)]
        )
        assert all(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() for a, b in pairs)
        with pytest.raises(UnsupportedError, match="inference tensor .* whose storage another tensor shares"):
            subclassaot.compile(_result_set_onto_an_inference_result)(*make())


def _data_of_an_input_assigned_an_inference_tensor(x0: T) -> object:
    with torch.inference_mode():
        t1 = x0[0].clone()
    x0.data = t1
    return ()


def _input_requiring_grad_set_inside_inference_mode(x0: T) -> object:
    t0 = x0.sin()
    t1 = t0.transpose(0, 0)
    with torch.inference_mode():
        x0.set_(t1)  # type: ignore[call-overload]
    return t0, x0


def test_data_of_an_input_assigned_an_inference_tensor_refused() -> None:
    """Eager's input becomes an inference tensor (fuzz seed 55000, program 3674: DIVERGED)."""
    with torch.no_grad():
        x = torch.randn(2, 3)
        _data_of_an_input_assigned_an_inference_tensor(x)
        assert x.is_inference()
        with pytest.raises(UnsupportedError, match="`.data =` an inference tensor"):
            subclassaot.compile(_data_of_an_input_assigned_an_inference_tensor)(torch.randn(2, 3))


def _leaf_resized_inside_inference_mode_after_a_view(x0: T) -> object:
    t0 = x0.unsqueeze(0)
    with torch.inference_mode():
        set_to(x0, t0)
    return (t0,)


def _leaf_set_inside_inference_mode_beside_its_view(x0: T, x1: T) -> object:
    with torch.inference_mode():
        set_to(x0, x1)
    return (x0,)


def _leaf_set_inside_inference_mode_beside_a_held_result(x0: T, x1: T, x2: T) -> object:
    with torch.inference_mode():
        set_to(x0, x1)
    return (x0,)


def _leaf_and_its_transpose() -> tuple[T, T]:
    b = torch.randn(3, 1, requires_grad=True)
    return (b, b.t())


def _leaf_beside_a_result_of_it() -> tuple[T, T, T]:
    b = torch.randn(3, 1, requires_grad=True)
    return (b, torch.randn(1, 3), b * 2)


@pytest.mark.parametrize(
    ("fn", "make"),
    [
        (_input_requiring_grad_set_inside_inference_mode, lambda: (torch.randn(2, 2, requires_grad=True),)),
        (_leaf_resized_inside_inference_mode_after_a_view, lambda: (torch.randn((), requires_grad=True),)),
        (_leaf_set_inside_inference_mode_beside_its_view, _leaf_and_its_transpose),
        (_leaf_set_inside_inference_mode_beside_a_held_result, _leaf_beside_a_result_of_it),
    ],
    ids=["read_before", "viewed_before", "caller_view", "caller_result"],
)
def test_set_inside_inference_mode_keeps_the_live_accumulator(
    fn: Callable[..., object], make: Callable[[], tuple[T, ...]]
) -> None:
    """Eager's set_() inside the block keeps the leaf's gradient accumulator (autograd's kernel, which renews it under
    no_grad, does not run), at the leaf's old size, wherever a node holds it: a node of the program (sin's, whose leaf
    then gets no gradient when sin's node raises), a view's made before and anew after, or the caller's (a transpose
    of the leaf passed beside it, a result of it held): eager's backward through the leaf fails its size check. The
    compiled call's set_() renewed it: refused by name before (fuzz seed 55000, program 5947; seed 118600, program
    7610), and the caller's cases DIVERGED (seed 121005, program 2539: ours' backward completed)."""
    with torch.enable_grad():
        assert_matches_eager(fn, make)
        assert_matches_eager(fn, make, after_call=write_outputs)


def _leaf_resized_under_no_grad_after_a_view(x0: T) -> object:
    t0 = x0.unsqueeze(0)
    with torch.no_grad():
        set_to(x0, t0)
    return (t0,)


def _leaf_set_inside_inference_mode_in_its_size_after_a_view(x0: T) -> object:
    t0 = x0.unsqueeze(0)
    with torch.inference_mode():
        set_to(x0, x0.detach().t())
    return (t0,)


@pytest.mark.parametrize(
    "fn", [_leaf_resized_under_no_grad_after_a_view, _leaf_set_inside_inference_mode_in_its_size_after_a_view]
)
def test_set_of_a_leaf_viewed_with_grad_before_matches_eager(fn: Callable[[T], object]) -> None:
    """Beside the refusal above: under no_grad eager's set_() renews the accumulator, as the compiled call's does;
    inside inference_mode, where the leaf keeps its size, the kept and the renewed accumulator reduce alike."""

    def make() -> tuple[T]:
        return (torch.randn(2, 2, requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(fn, make)
        assert_matches_eager(fn, make, after_call=write_outputs)


def _set_inside_inference_mode_after_a_read(x0: T) -> object:
    t0 = x0.mul(2)
    t1 = x0.detach().add(1).t()
    with torch.inference_mode():
        set_to(x0, t1)
    return t0, x0.cos()


def _set_inside_inference_mode_before_any_read(x0: T) -> object:
    t1 = x0.detach().add(1)
    with torch.inference_mode():
        set_to(x0, t1)
    return x0.cos(), x0


_SET_INSIDE = [_set_inside_inference_mode_after_a_read, _set_inside_inference_mode_before_any_read]


@pytest.mark.parametrize("fn", _SET_INSIDE, ids=["read_before", "not_read"])
@pytest.mark.parametrize(
    ("kind", "training"), [("plain", True), ("plain", False), ("pair", False)], ids=["plain", "plain-nograd", "pair"]
)
@pytest.mark.parametrize("leaf", [False, True], ids=["non_leaf", "leaf"])
def test_set_inside_inference_mode_of_a_tensor_requiring_grad_matches_eager(
    fn: Callable[[T], object], kind: str, training: bool, leaf: bool
) -> None:
    """Inside the block set_() records nothing and bumps the counter, as under no_grad: on a non-leaf (eager's nodes
    saved it and raise, the compiled call's too), and on a leaf no op with grad read before, which has no gradient
    accumulator to keep (fuzz seed 117300, programs 1720 7549 7884 8850 9276 8860 9254: refused before). A PairTensor
    input requiring grad set_() in training is refused by the subclass rule: it is compared called under no_grad."""
    if leaf and training and fn is _set_inside_inference_mode_after_a_read:
        with pytest.raises(UnsupportedError, match="the program then uses it with grad"):
            subclassaot.compile(fn)(torch.randn(2, 3, requires_grad=True))
        return

    def make() -> tuple[T]:
        base = torch.randn(2, 3) if kind == "plain" else PairTensor.from_tensor(torch.randn(2, 3))
        base.requires_grad_()
        return (base if leaf else base.clone(),)

    with torch.enable_grad() if training else torch.no_grad():
        assert_matches_eager(fn, make)


@contextlib.contextmanager
def _inference_with_grad() -> Iterator[None]:
    with torch.inference_mode(), torch.enable_grad():
        yield


_W = torch.arange(6.0).view(2, 3)
_BLOCKS: dict[str, Callable[[], contextlib.AbstractContextManager[object]]] = {
    "no_grad": torch.no_grad,
    "inference": torch.inference_mode,
    "inference_grad": _inference_with_grad,
}


def _member_set_inside(block: str, read_after: bool) -> Callable[[T, T, T], object]:
    def f(x0: T, x1: T, x2: T) -> object:
        with _BLOCKS[block]():
            set_to(x1, x2)
        return (x0 * _W, x1 * _W[0]) if read_after else (x0 * _W, x1)

    return f


def _rows_of_one_base() -> tuple[T, T, T]:
    b = torch.randn(2, 3, requires_grad=True).clone()
    return (b, b[0], b[1])


@pytest.mark.parametrize("block", list(_BLOCKS))
def test_member_set_onto_its_group_inside_inference_mode_with_grad_matches_eager(block: str) -> None:
    """x1, a row of a base passed beside it, set_() onto the other row: inside inference_mode with grad enabled
    autograd records nothing, as under no_grad, so it compiles as the no_grad form does (refused before by the group
    rule, the set_() counted as one with grad; issue #27)."""
    with torch.enable_grad():
        assert_matches_eager(_member_set_inside(block, read_after=False), _rows_of_one_base)


@pytest.mark.parametrize("block", list(_BLOCKS))
def test_member_set_onto_its_group_inside_inference_mode_then_read_with_grad_refused(block: str) -> None:
    """... and read with grad after the set_(): refused as the no_grad form is (the set_() noted as relaying it,
    `SwapRecord.relaid_by_set`; lifted, `x1 * w` gave a wrong args[0].grad)."""
    with torch.enable_grad(), pytest.raises(UnsupportedError, match="shares storage with another input"):
        subclassaot.compile(_member_set_inside(block, read_after=True))(*_rows_of_one_base())


def _empty_sort_inside(x0: T) -> object:
    with torch.inference_mode():
        t0, t1 = x0.sort(1, descending=True)
    return (t0, t1)


def test_empty_inference_outputs_do_not_share_a_storage() -> None:
    """Empty storages all have data_ptr 0: the runtime's one-copy-per-storage had made the two outputs share one
    (fuzz seed 56000, program 9876: DIVERGED on aliasing). Copies are per storage object."""
    with torch.no_grad():
        assert_matches_eager(_empty_sort_inside, lambda: (torch.randn((4, 1, 1)).diagonal(1, 0, 1),))


def _data_of_a_view_of_an_inference_tensor(x0: T) -> object:
    with torch.inference_mode():
        t0 = x0.add(3.0)
    t1 = t0.reshape((1, -1))
    t1.data = x0
    return (t1,)


def test_data_of_a_view_of_an_inference_tensor_is_no_view() -> None:
    """A view of an inference tensor keeps no view relation, after `.data =` either: eager's output is no view and
    requires no grad; ours was a view of the input requiring grad (fuzz seed 56000, program 9165: DIVERGED). Now no
    view; refused by the rule for `.data =` of views, whose chain the runtime cannot replay."""
    x = torch.randn(4, requires_grad=True)
    with torch.no_grad():
        out = _data_of_a_view_of_an_inference_tensor(x)
        assert isinstance(out, tuple) and not out[0]._is_view() and not out[0].requires_grad
        with pytest.raises(UnsupportedError, match="the program assigned `.data` of this view"):
            subclassaot.compile(_data_of_a_view_of_an_inference_tensor)(torch.randn(4, requires_grad=True))


def _view_inside_with_grad_of_a_no_grad_view(x0: T) -> object:
    t0 = x0.reshape((4,))
    with torch.inference_mode(), torch.set_grad_enabled(True):
        t1 = t0.reshape((2, 2))  # autograd records nothing here, grad mode on or not
    return (t1,)


def test_view_taken_inside_inference_mode_with_grad_on_has_no_history() -> None:
    """Called under no_grad: the view taken inside inference_mode with grad turned on was replayed with grad and came
    back with a grad_fn (fuzz seed 59000, programs 2321 and 3259: DIVERGED). Views taken inside the block are
    recorded as taken without grad."""

    def make() -> tuple[T]:
        return (torch.randn((2, 2, 1), requires_grad=True).clone(),)

    with torch.no_grad():
        assert_matches_eager(_view_inside_with_grad_of_a_no_grad_view, make)


def _expand_written_inside_with_grad_beside_views(x0: T, x1: T) -> object:
    t0 = x0.expand((1, 3))
    x0.unsqueeze_(0)
    t1 = t0[:, 0:0:2]
    with torch.inference_mode(), torch.set_grad_enabled(True):
        t0.fill_(0.5)
    t2 = t1.diagonal(1, 0, 1)
    return (t2.expand((0,)), t0)


def _expand_written_inside_with_grad_then_used(x0: T) -> object:
    t0 = x0.expand((1, 3))
    with torch.inference_mode(), torch.set_grad_enabled(True):
        t0.fill_(0.5)
    return ((t0 * 2).sum(),)


@pytest.mark.parametrize(
    ("f", "grad"),
    [(_expand_written_inside_with_grad_beside_views, False), (_expand_written_inside_with_grad_then_used, True)],
    ids=["no_grad_views", "training"],
)
def test_overlapping_write_inside_inference_mode_with_grad_on_is_not_recorded(
    f: Callable[..., object], grad: bool
) -> None:
    """fill_() of an expanded view (whose elements share memory) inside inference_mode with grad turned on: autograd
    records no write there, so eager neither raises on the no_grad view nor in backward. Ours recorded one (fuzz
    seed 120200 #816, called under no_grad: CRASHED with autograd's "A view was created in no_grad mode" error;
    training: refused)."""

    def make() -> tuple[T, ...]:
        with torch.enable_grad():
            x0 = torch.randn((), requires_grad=True).clone().unsqueeze(-1)
            return (x0, torch.randn((4,), requires_grad=True).clone()) if not grad else (x0,)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make)  # (and the gradients, in training)


def _frozen_model_inside_inference_mode(x: T, model: torch.nn.Module) -> object:
    with torch.inference_mode():
        y = model(x)
    return y, x * 2


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_frozen_model_called_inside_an_inference_mode_block_matches_eager(grad: bool) -> None:
    """The everyday pattern: a model whose parameters require no grad, called inside an inference_mode block of the
    compiled function (its weight.t() views are taken outside inference mode in the run). With parameters that
    require grad the same program is refused by name (test_grad_mode_switches), a gap noted for the team."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)).requires_grad_(False)
    with torch.set_grad_enabled(grad):
        assert_matches_eager(_frozen_model_inside_inference_mode, lambda: (torch.randn(3, 8), model), calls=2)


def _inference_tensor_set_onto_outer(x0: torch.Tensor) -> tuple[torch.Tensor]:
    t0 = x0 * 3
    with torch.inference_mode():
        t1 = x0.sin()
        t1.set_(t0)  # type: ignore[call-overload]  # torch's stubs list the storage overloads only
    return (t1,)


def _view_of_inference_tensor_set_onto_outer(x0: torch.Tensor) -> tuple[torch.Tensor]:
    t0 = x0 * 3
    with torch.inference_mode():
        t1 = x0.sin()
        t1.set_(t0)  # type: ignore[call-overload]
    return (t1.view(-1),)


@pytest.mark.parametrize("fn", [_inference_tensor_set_onto_outer, _view_of_inference_tensor_set_onto_outer])
def test_inference_tensor_moved_onto_an_outer_storage_refused(fn: Callable[..., tuple[torch.Tensor]]) -> None:
    """An inference tensor set_() onto a tensor made outside the block stays an inference tensor over that storage in
    eager (views of it too); the compiled call made a plain tensor (fuzz seed 62000, program 1827: DIVERGED)."""
    x = torch.randn(3)
    with torch.no_grad():
        (eager,) = fn(x)
        assert eager.is_inference()
        with pytest.raises(UnsupportedError, match="inference tensor .* set_\\(\\) moved onto another storage"):
            subclassaot.compile(fn)(x)


_VIEWS_OF_A_CLONE: dict[str, Callable[[T], T]] = {
    "split": lambda t: t.split_with_sizes([0, 1, 0], 1)[2],  # a zero-size piece
    "narrow": lambda t: t.narrow(1, 0, 1),
    "select": lambda t: t.select(0, 0),
}


def _set_of_a_view_of_an_inference_clone(
    view: str, inside: bool, onto_input: bool, no_grad: bool
) -> Callable[..., object]:
    """A view of a clone made inside inference_mode (taken inside the block, or after it), set_() onto the input or
    onto a tensor made outside the block, inside a second inference_mode block (or under no_grad: eager raises)."""
    take = _VIEWS_OF_A_CLONE[view]

    def fn(x0: T, x1: T) -> tuple[T, T]:
        with torch.inference_mode():
            t0 = x1.clone()
            t1 = take(t0) if inside else t0
        t2 = t1 if inside else take(t0)
        target = x0 if onto_input else x0 * 3
        with torch.no_grad() if no_grad else torch.inference_mode():
            t2.set_(target)  # type: ignore[call-overload]  # torch's stubs list the storage overloads only
        return (t2, t0)

    return fn


def _input_and_a_view_of_it(pair: bool) -> Callable[[], tuple[T, T]]:
    def make() -> tuple[T, T]:
        b0 = torch.randn((4, 3, 1))
        x0 = PairTensor.from_tensor(b0) if pair else b0
        return (x0, x0.select(0, 1))

    return make


@pytest.mark.parametrize("pair", [False, True], ids=["plain", "pair"])
@pytest.mark.parametrize("onto_input", [True, False], ids=["onto_input", "onto_intermediate"])
@pytest.mark.parametrize("inside", [False, True], ids=["view_after_block", "view_inside_block"])
@pytest.mark.parametrize("view", sorted(_VIEWS_OF_A_CLONE))
def test_view_of_an_inference_tensor_moved_onto_an_outer_storage_refused(
    view: str, inside: bool, onto_input: bool, pair: bool
) -> None:
    """A view of an inference tensor is an inference tensor with no view relation (taken after the block too); set_()
    inside inference_mode onto a normal tensor keeps it one, over that tensor's storage. The compiled call returned
    a normal view of the clone (fuzz seed 123115, program 23: DIVERGED, a zero-size split piece set_() onto the
    input). Refused by name for plain tensors; a PairTensor's view is refused by the subclass view rules first."""
    fn = _set_of_a_view_of_an_inference_clone(view, inside, onto_input, no_grad=False)
    make = _input_and_a_view_of_it(pair)
    with torch.no_grad():
        x0, x1 = make()
        eager = cast(tuple[T, T], fn(x0, x1))[0]
        assert plain_of(eager).is_inference() and not plain_of(eager)._is_view()  # (a PairTensor's inner tensor)
        if onto_input:
            assert plain_of(eager).untyped_storage().data_ptr() == plain_of(x0).untyped_storage().data_ptr()
        match = "tensor subclass view" if pair else "inference tensor .* set_\\(\\) moved onto another storage"
        with pytest.raises(UnsupportedError, match=match):
            assert_matches_eager(fn, make)


@pytest.mark.parametrize(
    ("inside", "pair"),
    [(False, False), (True, False), (True, True)],
    ids=["view_after_block-plain", "view_inside_block-plain", "view_inside_block-pair"],
)
@pytest.mark.parametrize("view", sorted(_VIEWS_OF_A_CLONE))
def test_set_under_no_grad_of_a_view_of_an_inference_tensor_raises_like_eager(
    view: str, inside: bool, pair: bool
) -> None:
    """Outside inference_mode, set_() of a view of an inference tensor is an in-place update of an inference tensor,
    which eager rejects; so does the compiled call."""
    fn = _set_of_a_view_of_an_inference_clone(view, inside, onto_input=True, no_grad=True)
    with torch.no_grad():
        assert_raises_like_eager(fn, _input_and_a_view_of_it(pair))


_WRITES: dict[str, Callable[[T, T], object]] = {
    "add_": lambda v, x: v.add_(1),
    "copy_": lambda v, x: v.copy_(v * 2),
    "out=": lambda v, x: torch.add(v, 1, out=v),
    "t_": lambda v, x: v.t_(),
    "resize_": lambda v, x: v.resize_(0),
    "set_": lambda v, x: v.set_(x),  # type: ignore[call-overload]  # torch's stubs list the storage overloads only
}


def _write_after_the_block(view: str, write: str, grad: bool) -> Callable[..., object]:
    take, apply = _VIEWS_OF_A_CLONE[view], _WRITES[write]

    def fn(x0: T, x1: T) -> tuple[T]:
        with torch.inference_mode():
            t0 = x1.clone()
        t1 = take(t0)
        with torch.set_grad_enabled(grad):
            apply(t1, x0)
        return (t1,)

    return fn


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("write", sorted(_WRITES))
@pytest.mark.parametrize("view", sorted(_VIEWS_OF_A_CLONE))
def test_write_after_the_block_of_a_view_of_an_inference_tensor_raises_eagers_error(
    view: str, write: str, grad: bool
) -> None:
    """A view taken after the block of a tensor made inside inference_mode is an inference tensor with no version
    counter: an in-place op on it (data, layout or storage: t_, resize_, set_ too) outside the block raises in eager.
    The run's view is a normal tensor, and the compiled call returned normally; it raises eager's error now."""
    fn = _write_after_the_block(view, write, grad)
    with torch.no_grad():
        raised = assert_raises_like_eager(fn, _input_and_a_view_of_it(pair=False))
    assert type(raised) is RuntimeError and "Inplace update to inference tensor outside InferenceMode" in str(raised)


@pytest.mark.parametrize("write", sorted(_WRITES))
@pytest.mark.parametrize("view", sorted(_VIEWS_OF_A_CLONE))
def test_write_after_the_block_of_a_pair_view_of_an_inference_pair_refused(view: str, write: str) -> None:
    """A PairTensor view taken after the block of a PairTensor made inside it is a normal wrapper over inference inner
    tensors: its in-place ops under no_grad are legal in eager (the wrapper's dispatch writes each inner tensor, below
    the inference check). Refused by the subclass view rule (the compiled call cannot rebuild that wrapper)."""
    fn = _write_after_the_block(view, write, grad=False)
    make = _input_and_a_view_of_it(pair=True)
    with torch.no_grad():
        eager = cast(tuple[T], fn(*make()))[0]
        assert not eager.is_inference() and plain_of(eager).is_inference()
        with pytest.raises(UnsupportedError, match="tensor subclass view, taken after a torch.inference_mode"):
            assert_matches_eager(fn, make)


def _pair_view_inside(x0: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.inference_mode():
        t0 = x0.reshape((2, 1, -1))
    return (t0,)


def _view_after_of_a_pair_view_inside(x0: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.inference_mode():
        t0 = x0.reshape((1, 1))
    return (t0.expand((1, 2)),)


@pytest.mark.parametrize(
    ("fn", "make"),
    [
        (_pair_view_inside, lambda: PairTensor.from_tensor(torch.randn(1, 3, 2))),
        (_view_after_of_a_pair_view_inside, lambda: PairTensor.from_tensor(torch.randn(1), requires_grad=True)),
    ],
    ids=["view_inside", "view_after_of_a_view_inside"],
)
def test_subclass_view_taken_inside_inference_mode_of_an_outer_subclass_refused(
    fn: Callable[..., tuple[torch.Tensor]], make: Callable[[], torch.Tensor]
) -> None:
    """Eager's view of a PairTensor made outside, taken inside inference_mode, is a wrapper that is an inference
    tensor with no view relation, over normal views of the input's inner tensors; the compiled call copied the inner
    tensors as inference tensors, or returned a view of the input that requires grad (fuzz --subclass
    subclasses.pair:example, seed 63000, programs 533, 803, 299, 5735, 6534: DIVERGED)."""
    x = make()
    with torch.no_grad():
        fn(x)  # legal in eager
        with pytest.raises(UnsupportedError, match="subclass view taken inside a torch.inference_mode"):
            subclassaot.compile(fn)(x)


def _grad_use_of_a_view_of_an_inference_view(x0: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.inference_mode():
        t0 = x0.reshape((1, 4, 16))
    t1 = t0.select(1, 0)
    with torch.enable_grad():
        t2 = t1.mul(2.0)
    return (t2,)


def _function_applied_to_an_inference_view(x0: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.inference_mode():
        t0 = x0.reshape((3, -1, 2))
    return (SinFunction.apply(t0),)  # type: ignore[no-untyped-call]


def _resize_inside_inference_mode(x0: torch.Tensor) -> tuple[()]:
    with torch.inference_mode():
        x0.resize_(())
    return ()


@pytest.mark.parametrize(
    "make",
    [
        lambda: (PairTensor.from_tensor(torch.randn(()), requires_grad=True),),
        lambda: (PairTensor.from_tensor(torch.randn(()), requires_grad=True).clone(),),
    ],
    ids=["leaf", "non_leaf"],
)
def test_resize_inside_inference_mode_of_a_subclass_input_requiring_grad_matches_eager(
    make: Callable[[], tuple[torch.Tensor]],
) -> None:
    """resize_() of a tensor that requires grad is legal only inside inference_mode; the epilogue replayed it outside
    and raised (fuzz --subclass subclasses.pair:example, seed 64000, programs 446 and 8047: CRASHED)."""
    with torch.no_grad():
        assert_matches_eager(_resize_inside_inference_mode, make)


def _data_of_an_inference_pair(x0: torch.Tensor, x1: torch.Tensor) -> tuple[()]:
    with torch.inference_mode():
        t0, _ = x0.sort(0, descending=True)
    x1.data = t0
    return ()


def test_data_assignment_of_an_inference_subclass_refused() -> None:
    """`.data =` of a PairTensor made inside inference_mode makes eager's wrapper an inference tensor too (seed
    64000, program 2717): refused as for plain tensors."""
    x = PairTensor.from_tensor(torch.randn(3))
    y = PairTensor.from_tensor(torch.randn(3))
    with torch.no_grad():
        _data_of_an_inference_pair(x, y)  # legal in eager
        assert y.is_inference()
        with pytest.raises(UnsupportedError, match="`.data =` an inference tensor"):
            subclassaot.compile(_data_of_an_inference_pair)(x, PairTensor.from_tensor(torch.randn(3)))


def _pair_clone_inside_then_data_assigned(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.inference_mode():
        t0 = x0.clone()
    t0.data = x1
    return (t0,)


def test_inference_leaves_of_a_wrapper_that_is_no_inference_tensor_match_eager() -> None:
    """After `.data =` outside the block, eager's PairTensor is no inference tensor but its inner tensors, cloned
    inside the block, still are; the runtime rebuilt neither (fuzz --subclass subclasses.pair:example, seed 64000,
    program 8538: DIVERGED). OutputInfo.inference_leaves without OutputInfo.inference."""

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        x = PairTensor.from_tensor(torch.randn(()))
        return x, x

    with torch.no_grad():
        (eager,) = _pair_clone_inside_then_data_assigned(*make())
        assert not eager.is_inference() and eager.a.is_inference()  # type: ignore[attr-defined]
        assert_matches_eager(_pair_clone_inside_then_data_assigned, make)


def _indices_of_max_inside_then_detached(x0: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.inference_mode():
        _, t1 = x0.max(0, keepdim=True)
    return (t1.detach().transpose(0, 0),)


def test_a_subclass_made_by_its_dispatch_inside_the_block_keeps_inference_leaves() -> None:
    """max()'s indices PairTensor is made inside the block by the subclass's __torch_dispatch__ (out of the run's
    torch-function sight): eager's inner tensors, and their views after the block, are inference tensors, and the
    detach().transpose() output is a view (fuzz --subclass subclasses.pair:example, seed 67000, program 2513:
    DIVERGED)."""

    def make() -> tuple[torch.Tensor]:
        return (PairTensor.from_tensor(torch.randn(())),)

    with torch.no_grad():
        (eager,) = _indices_of_max_inside_then_detached(*make())
        assert eager.a.is_inference() and eager._is_view()  # type: ignore[attr-defined]
        assert_matches_eager(_indices_of_max_inside_then_detached, make)


def _inference_tensor_given_a_view_of_itself(x0: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.inference_mode():
        t0 = x0.add(2.0)
    t0.data = t0.t()  # the view, taken after the block, is an inference tensor in eager: t0 stays one
    return (t0,)


def _normal_tensor_given_a_view_of_an_inference_tensor(x0: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.inference_mode():
        t0 = x0.add(2.0)
    t2 = x0 * 3
    t2.data = t0.t()
    return (t2,)


def test_data_assignment_takes_the_inference_flag_of_the_new_data() -> None:
    """`.data =` takes the new data's dispatch keys: a view taken after the block of a tensor made inside it is an
    inference tensor in eager (not in the run), so t0 stayed one there and came back a normal tensor (fuzz --subclass
    subclasses.pair:example, seed 69000, program 529: DIVERGED); a normal tensor given such data is refused."""

    def make() -> tuple[torch.Tensor]:
        return (torch.randn(3, 3),)

    with torch.no_grad():
        assert _inference_tensor_given_a_view_of_itself(*make())[0].is_inference()
        assert_matches_eager(_inference_tensor_given_a_view_of_itself, make)
        assert _normal_tensor_given_a_view_of_an_inference_tensor(*make())[0].is_inference()
        with pytest.raises(UnsupportedError, match="`.data =` an inference tensor"):
            subclassaot.compile(_normal_tensor_given_a_view_of_an_inference_tensor)(*make())


def _input_set_onto_a_pair_made_inside(x0: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.inference_mode():
        t0 = x0.mul(0.5)
    set_to(x0, t0)
    return (t0,)


def _view_of_an_input_set_onto_a_pair_made_inside(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.inference_mode():
        t0 = x0.add(2.0)
    set_to(x1, t0)
    return (x1[3:4:2],)


def test_pair_leaves_made_inside_the_block_and_shared_by_a_set_input() -> None:
    """An inference PairTensor whose inner storages an input was set_() onto: eager's output shares them, the
    runtime's inference copies would not (refused, as for plain tensors); a view of that input after the set_() is no
    inference tensor in eager, its inner tensors neither (fuzz --subclass subclasses.pair:example, seed 71000,
    programs 256 and 3473: DIVERGED once the dispatch's inner tensors were recorded as made inside the block)."""
    with torch.no_grad():
        with pytest.raises(UnsupportedError, match="whose storage another tensor shares"):
            subclassaot.compile(_input_set_onto_a_pair_made_inside)(PairTensor.from_tensor(torch.randn(2, 3)))

        def make() -> tuple[torch.Tensor, torch.Tensor]:
            x = PairTensor.from_tensor(torch.randn(4))
            return x, x

        assert not _view_of_an_input_set_onto_a_pair_made_inside(*make())[0].a.is_inference()  # type: ignore[attr-defined]
        assert_matches_eager(_view_of_an_input_set_onto_a_pair_made_inside, make)


def _view_inside_saved_with_grad_after(x0: torch.Tensor) -> tuple[()]:
    t0 = x0.unsqueeze(0)
    t1 = x0.mul(3.0)
    with torch.inference_mode():
        t2 = t1.reshape(())
    t2.mul(t0)
    return ()


def _view_inside_written_after(x0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    t0 = x0.mul(2.0)
    with torch.inference_mode():
        t1 = t0.view(-1)
    with torch.no_grad():
        t0.add_(1.0)
    return (t1, t0)


def _view_inside_of_a_leaf_and_its_view_after(x0: torch.Tensor) -> tuple[torch.Tensor, ...]:
    with torch.inference_mode():
        a, b = x0.split_with_sizes([1, 2])
    return (a, b.unsqueeze(0), b.exp())


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize(
    ("fn", "size"),
    [
        (_grad_use_of_a_view_of_an_inference_view, (4, 4, 4)),
        (_function_applied_to_an_inference_view, (3, 4)),
        (_view_inside_saved_with_grad_after, ()),
        (_view_inside_written_after, (3,)),
        (_view_inside_of_a_leaf_and_its_view_after, (3,)),
    ],
    ids=["grad_use_after", "function_after", "saved_after", "written_after", "multi_output_of_a_leaf"],
)
def test_views_taken_inside_inference_mode_of_tensors_requiring_grad_match_eager(
    fn: Callable[..., tuple[torch.Tensor, ...]], size: tuple[int, ...], grad: bool
) -> None:
    """Eager's view, inside an inference_mode block, of a normal tensor that requires grad is a normal tensor over
    its base's version counter with creation meta INFERENCE_MODE: it requires grad with no history (a leaf of its
    own, whose gradient goes nowhere, as a view taken under no_grad), and once its storage is written after it was
    taken, reading its grad_fn raises naming inference mode. The run takes it again under no_grad with that creation
    meta; the runtime rebuilds a returned one inside inference_mode. Each was refused, the run's view being an
    inference tensor (fuzz seeds 63000 #2123, 76500 #446, 72000 #4757, 78000 #36 #83 #93 #173 #206 #265), or
    returned with the creation meta of no_grad (fuzz seed 77100 #97: DIVERGED)."""

    def make() -> tuple[torch.Tensor]:
        return (torch.randn(size, requires_grad=True),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(fn, make)
        assert_matches_eager(fn, make, after_call=write_outputs)
        # ... and where the view's base is no leaf
        assert_matches_eager(fn, lambda: (make()[0].clone(),), after_call=write_outputs)


def _view_after_of_an_inference_view_assigned(x0: T) -> tuple[T, ...]:
    t0 = x0.view((1, 4))
    with torch.inference_mode():
        t1 = t0.transpose(0, 1)
    t2 = t1.view((1, 2, 2))
    t0.data = t2
    return (t2,)


def _inference_view_assigned_to_its_base(x0: T) -> tuple[T, ...]:
    t0 = x0.view((1, 4))
    with torch.inference_mode():
        t1 = t0.transpose(0, 1)
    t0.data = t1
    return (t1,)


def _view_inside_of_an_inference_view_assigned(x0: T) -> tuple[T, ...]:
    t0 = x0.view((1, 4))
    with torch.inference_mode():
        t2 = t0.transpose(0, 1).view((1, 2, 2))
    t0.data = t2
    return (t2,)


def _view_under_no_grad_of_an_inference_view_assigned(x0: T) -> tuple[T, ...]:
    t0 = x0.view((1, 4))
    with torch.inference_mode():
        t1 = t0.transpose(0, 1)
    with torch.no_grad():
        t2 = t1.view((1, 2, 2))
    t0.data = t2
    return (t2, t1)


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize(
    "fn",
    [
        _view_after_of_an_inference_view_assigned,
        _inference_view_assigned_to_its_base,
        _view_inside_of_an_inference_view_assigned,
        _view_under_no_grad_of_an_inference_view_assigned,
    ],
    ids=["view_after", "assigned_to_base", "view_inside", "view_under_no_grad"],
)
def test_views_of_inference_views_rebuilt_after_data_assignment_keep_eager_creation_meta(
    fn: Callable[..., tuple[T, ...]], grad: bool
) -> None:
    """Autograd propagates creation meta INFERENCE_MODE from a view taken inside an inference_mode block to every view
    of it, whatever the grad mode then; after a `.data =` the runtime rebuilds such an output by other steps (an
    as_strided() under no_grad), which gave it creation meta NO_GRAD_MODE: once written, reading its grad_fn raised
    naming no_grad mode where eager's names inference mode (fuzz seed 80000 #1374: DIVERGED). The rebuilt view is
    given eager's creation meta. Plain tensors only: of a PairTensor eager itself raises (the view inside the block
    is an inference tensor whose version counter cannot be shared)."""

    def make() -> tuple[T]:
        return (torch.randn((4, 1, 1), requires_grad=True),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(fn, make, after_call=write_outputs)
        # ... and where the view's base is no leaf
        assert_matches_eager(fn, lambda: (make()[0].clone(),), after_call=write_outputs)


def _sum_and_its_slice_inside(x: T, y: T) -> object:
    t = x.mul(y)
    with torch.inference_mode():
        s = t.sum(0)
        part = s[:, 2:4:2]
    return s, part


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_wrapper_outputs_made_inside_inference_mode_share_their_wrapper_storage_like_eager(grad: bool) -> None:
    # found by the fuzzer (PairTensor inputs, seed 75800 #846): the view's wrapper shares its base's wrapper storage
    # in eager (return_and_correct_aliasing); rebuilt as inference tensors, each had one of its own
    def inputs() -> tuple[T, T]:
        b = PairTensor.from_tensor(torch.randn(3, 2, 4))
        return b, b

    with torch.set_grad_enabled(grad):
        assert_matches_eager(_sum_and_its_slice_inside, inputs)


def _data_assigned_inside(x0: T, x1: T) -> tuple[T, ...]:
    with torch.inference_mode():
        x0.data = x1
    return (x0 * 2, x0)


def _data_assigned_inside_then_written(x0: T, x1: T) -> tuple[T, ...]:
    with torch.inference_mode():
        x0.data = x1
    x0.add_(1.0)
    return (x0.view(-1), x1)


def _data_assigned_a_view_taken_inside(x0: T, x1: T) -> tuple[T, ...]:
    with torch.inference_mode():
        v = x1.view(-1)
        x0.data = v
    return (x0, v)


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize(
    "fn",
    [_data_assigned_inside, _data_assigned_inside_then_written, _data_assigned_a_view_taken_inside],
    ids=["assigned", "then_written", "a_view_taken_inside"],
)
def test_data_of_a_normal_tensor_assigned_inside_inference_mode_matches_eager(
    fn: Callable[..., tuple[T, ...]], grad: bool
) -> None:
    """`.data =` of a normal tensor inside the block leaves both normal tensors (the assigned one keeps its own
    version counter); the run's alias of the new data, made inside the block, failed to get a version counter and the
    program was refused as a view taken inside the block (fuzz seed 78500, programs 165 and 212)."""

    def make() -> tuple[T, T]:
        return torch.randn(3), torch.randn(3)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(fn, make)
        assert_matches_eager(fn, make, after_call=write_outputs)


def _input_given_an_inference_tensor_inside(x0: T, x1: T) -> tuple[T, ...]:
    with torch.inference_mode():
        x0.data = x1 * 2
    return (x0,)


def test_input_given_the_data_of_an_inference_tensor_inside_inference_mode_refused() -> None:
    """Inside the block as after it, `.data =` an inference tensor makes eager's input an inference tensor, which the
    compiled call does not make (it returned a normal input: DIVERGED, found while narrowing the refusal above)."""
    x0, x1 = torch.randn(3), torch.randn(3)
    _input_given_an_inference_tensor_inside(x0, x1)
    assert x0.is_inference()
    with torch.no_grad(), pytest.raises(UnsupportedError, match="`.data =` an inference tensor"):
        subclassaot.compile(_input_given_an_inference_tensor_inside)(torch.randn(3), torch.randn(3))


def _pair_viewed_inside(x0: T) -> tuple[T, ...]:
    with torch.inference_mode():
        t0 = x0.view(-1)
    return (t0 * 1,)


def test_view_of_a_subclass_inside_inference_mode_refused() -> None:
    """A PairTensor's view op inside the block makes its wrapper there, an inference tensor that cannot take its
    base's version counter: eager's view() raises, and the compiled call refuses by name (a plain tensor's view is
    taken again outside the block, above)."""
    with pytest.raises(RuntimeError, match="Cannot set version_counter for inference tensor"):
        _pair_viewed_inside(PairTensor.from_tensor(torch.randn(2, 3)))
    with pytest.raises(UnsupportedError, match="takes a view, inside a torch.inference_mode.* of a tensor subclass"):
        subclassaot.compile(_pair_viewed_inside)(PairTensor.from_tensor(torch.randn(2, 3)))


# ---------------------------------------------------------------------------------------------------------------------
# Version counters eager gives tensors around an inference_mode block, seen by a write after the call: a detach()
# taken after the block of an inference tensor is an inference tensor with a counter (writable outside the block; a
# view of it has none), and `.data =` of a normal tensor onto one made inside the block leaves a normal tensor with
# none (a write raises). Fuzz 79000 #277, #7365.


def _detached_after_the_block(x: torch.Tensor, y: torch.Tensor) -> object:
    with torch.inference_mode():
        t = y.mul(x)
    return (t.detach(),)


def _detached_after_the_block_and_viewed(x: torch.Tensor, y: torch.Tensor) -> object:
    with torch.inference_mode():
        t = y.mul(x)
    d = t.detach()
    return d, d.view(-1), d.detach()


def _normal_data_onto_an_inference_tensor(x: torch.Tensor, y: torch.Tensor) -> object:
    s = y.sin()
    with torch.inference_mode():
        t = y.sum(0)
    t.data = s
    return (t,)


@pytest.mark.parametrize(
    "fn",
    [
        _detached_after_the_block,
        _detached_after_the_block_and_viewed,
        _normal_data_onto_an_inference_tensor,
    ],
)
@pytest.mark.parametrize("grad", [True, False])
def test_version_counters_around_an_inference_block_match_eager(fn: Callable[..., object], grad: bool) -> None:
    def make() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(()), torch.randn(4)

    with torch.enable_grad() if grad else torch.no_grad():
        assert_matches_eager(fn, make, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# The rules above on the subclasses users have (torch's DTensor and jagged NestedTensor, torchao's Float8TrainingTensor),
# through both entries, where the class supports the program's ops. Found by running this file's programs on them:
# an output whose wrapper was made inside the block and given a normal tensor's `.data` after it keeps no version
# counter in eager (a write raises), and a detach() after the block of an inference wrapper, viewed after, stays its
# view's base; both were wrong for every wrapper subclass (PairTensor too).


def _transposed_inside(x: T) -> object:
    with torch.inference_mode():
        v = x.transpose(-1, -2)
    return (v * 2,)


def _data_onto_an_inference_wrapper(x: T) -> object:
    s = x.sin()
    with torch.inference_mode():
        t = x.cos()
    t.data = s
    return (t,)


def _one(kind: str, grad: str | None) -> Callable[[], tuple[T]]:
    return lambda: (real_subclass(kind, grad=grad),)  # type: ignore[arg-type]


def _two(kind: str, grad: str | None) -> Callable[[], tuple[T, T]]:
    return lambda: (real_subclass(kind, grad=grad), real_subclass(kind))  # type: ignore[arg-type]


def _pair(grad: str | None) -> Callable[[], tuple[T, ...]]:
    def make() -> tuple[T, ...]:
        x = PairTensor.from_tensor(torch.randn(4, 4), requires_grad=grad is not None)
        with torch.enable_grad():
            return (x if grad != "nonleaf" else x.clone(), PairTensor.from_tensor(torch.randn(4, 4)))

    return make


_REAL_INFERENCE_PROGRAMS: list[tuple[Callable[..., object], tuple[str, ...]]] = [
    (_held_functional, ("dtensor", "njt")),
    (_held_inplace, ("dtensor",)),
    (_computed_inside, ("dtensor", "njt")),
    (_detached_after_the_block, ("dtensor", "njt", "pair")),
    (_detached_after_the_block_and_viewed, ("dtensor", "pair")),
    (_pair_clone_inside_then_data_assigned, ("dtensor", "pair")),
    (_data_onto_an_inference_wrapper, ("dtensor", "pair")),
    (_normal_data_onto_an_inference_tensor, ("pair",)),
    (_data_assigned_inside, ("dtensor",)),
]


@pytest.mark.parametrize("entry", ["aot", "dynamo"])
@pytest.mark.parametrize("grad", ["leaf", "nonleaf", None])
@pytest.mark.parametrize(
    ("fn", "kind"),
    [(fn, kind) for fn, kinds in _REAL_INFERENCE_PROGRAMS for kind in kinds],
    ids=[f"{fn.__name__.strip('_')}-{kind}" for fn, kinds in _REAL_INFERENCE_PROGRAMS for kind in kinds],
)
def test_inference_blocks_on_real_subclasses_match_eager(
    fn: Callable[..., object], kind: str, grad: str | None, entry: str
) -> None:
    nargs = len(inspect.signature(fn).parameters)
    make = _pair(grad) if kind == "pair" else (_one if nargs == 1 else _two)(kind, grad)
    args = lambda: make()[:nargs]  # noqa: E731
    for grad_mode in (True, False):
        with torch.set_grad_enabled(grad_mode):
            assert_matches_eager(fn, args, compile_fn=ENTRIES[entry], after_call=write_outputs)


@pytest.mark.parametrize("entry", ["aot", "dynamo"])
@pytest.mark.parametrize("kind", ["dtensor", "njt"])
@pytest.mark.parametrize("fn", [_transposed_inside, _held_view_returned, _pair_viewed_inside])
def test_wrapper_views_inside_inference_mode_on_real_subclasses_raise_like_eager(
    fn: Callable[..., object], kind: str, entry: str
) -> None:
    """A wrapper subclass's view op inside the block makes its wrapper there, which cannot take its base's version
    counter: eager raises (as for PairTensor, above), and so does the compiled call."""
    with torch.no_grad():
        assert_raises_like_eager(fn, _one(kind, None), compile_fn=ENTRIES[entry])


@pytest.mark.parametrize(
    ("fn", "kind", "grad", "match", "entry"),
    [
        (_function_with_grad_inside_inference_mode, "dtensor", "leaf", "it has autograd history", "aot"),
        (_function_with_grad_inside_inference_mode, "dtensor", "leaf", "it has autograd history", "dynamo"),
        (_viewed_after_and_input_written, "dtensor", None, "taken after a torch.inference_mode\\(\\) block", "aot"),
        (_viewed_after_and_input_written, "dtensor", None, "taken after a torch.inference_mode\\(\\) block", "dynamo"),
        (_data_onto_an_inference_wrapper, "njt", None, "`.data =` of a NestedTensor with a ragged dim", "aot"),
    ],
    ids=["function_inside-aot", "function_inside-dynamo", "viewed_after-aot", "viewed_after-dynamo", "data_njt-aot"],
)
def test_inference_blocks_on_real_subclasses_refused(
    fn: Callable[..., object], kind: str, grad: str | None, match: str, entry: str
) -> None:
    """Refused by name as for PairTensor (above). (Dynamo runs a `.data =` itself, so the NJT case is the native
    entry's alone.)"""
    with torch.no_grad():
        fn(*_one(kind, grad)())  # legal in eager
        compile_fn = ENTRIES[entry]
        with pytest.raises(UnsupportedError, match=match):
            (subclassaot.compile(fn) if compile_fn is None else compile_fn(fn))(*_one(kind, grad)())


def _indices_inside_detached_after(x0: T) -> tuple[T, T]:
    with torch.inference_mode():
        _, t1 = x0.max(0)
    return t1, t1.detach()


def _detached_after_returned_first(x0: T) -> tuple[T, T, T]:
    with torch.inference_mode():
        t0, t1 = x0.max(0)
    return t1.detach(), t0, t1


@pytest.mark.parametrize("f", [_indices_inside_detached_after, _detached_after_returned_first])
@pytest.mark.parametrize(
    "make",
    [
        lambda: (torch.randn(()),),
        lambda: (PairTensor.from_tensor(torch.randn(())),),
        lambda: (PairTensor.from_tensor(torch.randn(3)),),
    ],
    ids=["plain", "pair_0d", "pair"],
)
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_alias_taken_after_the_block_of_an_inference_result_shares_its_storage(
    f: Callable[..., object], make: Callable[[], tuple[T]], grad: bool
) -> None:
    """A subclass result of the block and its detach() taken after it: eager's wrappers share a storage,
    the first an inference wrapper, the second a normal one over the same inference inner tensors. The runtime
    rebuilds the first inside inference_mode and gives the second those leaves in place; it ties their storages
    again (seed 2829, program 155, --subclass subclasses.pair:example: unrelated storages)."""
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make)


# fuzz seed 112000 #9698
def _view_of_an_inference_result_given_to_it_by_data(x0: T) -> tuple[T, ...]:
    with torch.inference_mode():
        t0 = TransposeSaved.apply(x0)  # type: ignore[no-untyped-call]  # Function.apply is untyped in torch
    t1 = t0.transpose(0, 0)
    t0.data = t1
    return (t1,)


_VIEWS_AFTER_THE_BLOCK: dict[str, Callable[[T], T]] = {
    "transpose": lambda t: t.transpose(0, 0),
    "view": lambda t: t.view(-1),
    "t": lambda t: t.t(),
    "slice": lambda t: t[:1],
}


def _view_after_the_block_then_source_given_its_data(view: str, returned: str) -> Callable[[T], tuple[T, ...]]:
    def f(x0: T) -> tuple[T, ...]:
        with torch.inference_mode():
            t0 = x0 * 3
        t1 = _VIEWS_AFTER_THE_BLOCK[view](t0)
        t0.data = t1
        return (t1,) if returned == "view" else (t1, t0)

    return f


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_view_of_an_inference_tensor_given_to_it_by_data(grad: bool) -> None:
    """Fuzz seed 112000 #9698 (shrunk; diverged: out[0] a view and no inference tensor, eager's an inference tensor
    and no view): t1, a view of the inference tensor t0 taken after the block, is an inference tensor in eager, with
    no view relation; the `.data =` of t0 after it does not reach it. Its source moved by a `.data =` counted as if the
    view had been taken after the move."""
    with torch.set_grad_enabled(grad):
        (eager,) = _view_of_an_inference_result_given_to_it_by_data(torch.randn((1,)))
        assert eager.is_inference() and not eager._is_view()
        assert_matches_eager(_view_of_an_inference_result_given_to_it_by_data, lambda: (torch.randn((1,)),))


@pytest.mark.parametrize("returned", ["view", "view_and_source"])
@pytest.mark.parametrize("view", sorted(_VIEWS_AFTER_THE_BLOCK))
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_view_of_an_inference_tensor_taken_before_its_data_is_assigned_matches_eager(
    view: str, returned: str, grad: bool
) -> None:
    # seed 112000 #9698 and variants: other views taken after the block, the source returned too
    f = _view_after_the_block_then_source_given_its_data(view, returned)
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, lambda: (torch.randn(2, 2),))


@pytest.mark.parametrize("view", sorted(_VIEWS_AFTER_THE_BLOCK))
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_pair_view_of_an_inference_pair_given_to_it_by_data_refused(view: str, grad: bool) -> None:
    """seed 112000 #9698 with a PairTensor: eager's view, taken after the block, is a normal wrapper with no view
    relation over inference inner tensors, which the runtime's replayed view is not (refused, as without the `.data =`:
    test_inference_blocks_on_real_subclasses_refused); the `.data =` made the run's source a normal tensor, and the
    output came back a view of it."""
    f = _view_after_the_block_then_source_given_its_data(view, "view")
    with torch.set_grad_enabled(grad):
        (eager,) = f(PairTensor.from_tensor(torch.randn(2, 2)))
        assert not eager._is_view() and eager.a.is_inference()  # type: ignore[attr-defined]
        with pytest.raises(UnsupportedError, match="which a `.data =` then gave the data of a normal tensor"):
            subclassaot.compile(f)(PairTensor.from_tensor(torch.randn(2, 2)))


def test_pair_view_of_an_inference_pair_given_to_it_by_data_returned_with_it_matches_eager() -> None:
    # the same, the source returned too: its view(-1) is rebuilt from its leaves, not replayed as a view
    f = _view_after_the_block_then_source_given_its_data("view", "view_and_source")
    with torch.no_grad():
        assert_matches_eager(f, lambda: (PairTensor.from_tensor(torch.randn(2, 2)),))


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz seed 116000 #793 (training, outputs written after the call: DIVERGED, eager's backward raised and ours did not):
# a reshape() inside inference_mode of an input that requires grad is, in eager, a view of it requiring grad with
# creation meta INFERENCE_MODE; mul() saves its split, and once the returned input is written, unpacking that saved view
# reads its grad_fn, which raises naming inference mode. The backward probe's static fakes took the reshape (a view op
# with no kernel of its own) below autograd: no view, no grad, nothing saved over the input's counter (Note [The Eager
# Record]). Of a PairTensor eager's view inside the block is an inference wrapper, which the fakes keep.

_COMPOSITE_VIEWS_INSIDE: dict[str, Callable[[T], T]] = {
    "reshape": lambda t: t.reshape((1, 1, 4)),
    "mT": lambda t: t.mT,
    "unflatten": lambda t: torch.unflatten(t, 1, (1, 4)),
}


def _composite_view_inside_split_and_saved(view: str) -> Callable[[T], tuple[T, T]]:
    def f(x0: T) -> tuple[T, T]:
        with torch.inference_mode():
            t0 = _COMPOSITE_VIEWS_INSIDE[view](x0)
        with torch.set_grad_enabled(False):
            t1, _ = t0.split_with_sizes([1, 0], 1)
        return (x0, x0.mul(t1))

    return f


_SAVED_VIEW_BASES: dict[str, Callable[[], tuple[T]]] = {
    "plain": lambda: (torch.randn((1, 4), requires_grad=True).clone(),),
    "pair": lambda: (PairTensor.from_tensor(torch.randn((1, 4)), requires_grad=True).clone(),),
}


# fuzz seed 116000 #793
@pytest.mark.parametrize("kind", sorted(_SAVED_VIEW_BASES))
@pytest.mark.parametrize("view", sorted(_COMPOSITE_VIEWS_INSIDE))
def test_composite_view_inside_saved_and_its_base_written_after(view: str, kind: str) -> None:
    f = _composite_view_inside_split_and_saved(view)
    with torch.enable_grad():
        assert_matches_eager(f, _SAVED_VIEW_BASES[kind])
        assert_matches_eager(f, _SAVED_VIEW_BASES[kind], after_call=write_outputs)


@pytest.mark.parametrize("view", sorted(_COMPOSITE_VIEWS_INSIDE))
def test_composite_view_inside_saved_raises_eagers_message_once_its_base_is_written(view: str) -> None:
    # the oracle compares the backward's error by type: its message, eager's own
    compiled = subclassaot.compile(_composite_view_inside_split_and_saved(view))
    with torch.enable_grad():
        x0, t3 = compiled(*_SAVED_VIEW_BASES["plain"]())
        with torch.no_grad():
            x0.add_(1.0)
        with pytest.raises(RuntimeError, match="A view was created in inference mode and its base"):
            t3.sum().backward()  # type: ignore[no-untyped-call]


_INPLACE_VIEW_OPS: dict[str, Callable[[T], object]] = {
    "t_": lambda x: x.t_(),
    "transpose_": lambda x: x.transpose_(0, 1),
    "unsqueeze_": lambda x: x.unsqueeze_(1),
}


def _inplace_view_op_inside(op: Callable[[T], object]) -> Callable[[T], object]:
    def f(x0: T) -> object:
        with torch.inference_mode():
            op(x0)
        t0 = x0.unbind(0)[0]
        return t0.mul(t0.sum()), x0.exp()

    return f


@pytest.mark.parametrize("op", sorted(_INPLACE_VIEW_OPS))
@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("base", ["leaf", "non_leaf"])
def test_inplace_view_op_inside_inference_mode_on_a_view_requiring_grad_matches_eager(
    op: str, kind: str, base: str
) -> None:
    """Inside the block an in-place view op records nothing and bumps the counter, as under no_grad; eager rebuilds
    the view's history by as_strided() at its next read after the block (fuzz seed 117300, programs 892 7348 656
    6060 and 20 more: refused before). Called under no_grad: a plain view input given another size in training is
    refused by the rule for sizes changed behind autograd (the test below covers training)."""

    def make() -> tuple[T]:
        b0 = torch.randn(2, 3) if kind == "plain" else PairTensor.from_tensor(torch.randn(2, 3))
        b0.requires_grad_()
        return ((b0 if base == "leaf" else b0.clone()).view(2, 3),)

    with torch.no_grad():
        assert_matches_eager(_inplace_view_op_inside(_INPLACE_VIEW_OPS[op]), make)


def _unsqueeze_inside_then_unbind(x0: T) -> object:
    with torch.inference_mode():
        x0.unsqueeze_(1)
    t0 = x0.unbind(1)[0]
    t1 = t0.expand((2, 3))
    return (t1.mul(t0),)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("requires_grad", [True, False])
def test_inplace_view_op_inside_inference_mode_in_training_matches_eager(kind: str, requires_grad: bool) -> None:
    """Fuzz seed 52200, program 1958 (DIVERGED then: ours's backward raised the no_grad-view error, eager's ran;
    refused since): x0, a view of a leaf, unsqueeze_()d inside inference_mode, read with grad after."""

    def make() -> tuple[T]:
        b0 = torch.randn(()) if kind == "plain" else PairTensor.from_tensor(torch.randn(()))
        return (b0.requires_grad_(requires_grad).view((-1, 1)),)

    with torch.enable_grad():
        assert_matches_eager(_unsqueeze_inside_then_unbind, make)


def _function_inside_after_a_sibling_write(function: type[torch.autograd.Function]) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        if not x0.requires_grad:
            x0.requires_grad_()
        x1.zero_()
        with torch.inference_mode(), torch.enable_grad():
            function.apply(x0)  # type: ignore[no-untyped-call]  # Function.apply is untyped in torch
        return ()

    return f


@pytest.mark.parametrize("function", [TransposeSaved, SinFunction], ids=["transpose_saved", "sin"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_function_inside_inference_mode_on_a_view_whose_base_was_written(
    function: type[torch.autograd.Function], kind: str, grad: bool
) -> None:
    """Fuzz seed 118200 #7689 (shrunk; crashed: torch's "new_fn INTERNAL ASSERT FAILED"): x0, a view of x1 given
    requires_grad_(), x1 written, then a custom Function applied to x0 inside inference_mode with grad on. The run's
    stand-in for x0 is a view of the synthetic base that requires grad, whose history autograd rebuilt there by its
    view function, which records nothing inside inference mode (Note [Stale View Functions]).
    (A subclass input in a call with grad is refused by the rule for storages shared by inputs gaining grad.)"""

    def make() -> tuple[T, T]:
        b0 = torch.randn(()) if kind == "plain" else PairTensor.from_tensor(torch.randn(()))
        return b0.view((1, 1)), b0

    f = _function_inside_after_a_sibling_write(function)
    if grad and kind == "pair":
        with pytest.raises(UnsupportedError, match="share storage and do not require grad"):
            subclassaot.compile(f)(*make())
        return
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make)


def _function_inside_after_a_self_set(returned: bool) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        x1.set_(x1)  # type: ignore[call-overload]  # the stubs list only storage overloads
        with torch.inference_mode(), torch.enable_grad():
            t0 = TransposeSaved.apply(x0)  # type: ignore[no-untyped-call]  # Function.apply is untyped in torch
        return (t0,) if returned else ()

    return f


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("returned", [False, True], ids=["unreturned", "returned"])
def test_function_inside_inference_mode_after_a_row_set_to_itself(kind: str, returned: bool) -> None:
    """Fuzz seed 118200 #5479 (shrunk; crashed: torch's "new_fn INTERNAL ASSERT FAILED"): x1, a row of leaf x0, set_()
    to itself under no_grad, then a custom Function applied to x0 inside inference_mode with grad on (Note [Stale View Functions]). Returned, its result is an inference tensor with history: refused by that rule."""

    def make() -> tuple[T, T]:
        b0 = torch.randn(4, 3) if kind == "plain" else PairTensor.from_tensor(torch.randn(4, 3))
        b0.requires_grad_()
        with torch.enable_grad():
            return b0, b0.unbind(0)[0]

    f = _function_inside_after_a_self_set(returned)
    if returned:
        with torch.no_grad(), pytest.raises(UnsupportedError, match="cannot make such an inference tensor"):
            subclassaot.compile(f)(*make())
        return
    with torch.no_grad():
        assert_matches_eager(f, make)


def _batch_norm_training(x: T, w: T, b: T, mean: T, var: T) -> object:
    return torch.native_batch_norm(x, w, b, mean, var, True, 0.1, 1e-5)


def _functional_batch_norm_training(x: T, w: T, b: T, mean: T, var: T) -> object:
    return torch.nn.functional.batch_norm(x, mean, var, w, b, training=True)


def _inference_stats(two: bool) -> Callable[[], tuple[T, ...]]:
    def make() -> tuple[T, ...]:
        torch.manual_seed(0)
        ts = [torch.randn(2, 3, 4), torch.randn(3), torch.randn(3)]
        with torch.inference_mode():
            ts += [torch.zeros(3), torch.ones(3)]
        return tuple(TwoTensor(t, t.clone()) for t in ts) if two else tuple(ts)  # type: ignore[no-untyped-call]  # untyped in torch

    return make


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("two", [False, True], ids=["plain", "two_tensor"])
@pytest.mark.parametrize("f", [_batch_norm_training, _functional_batch_norm_training], ids=["native", "functional"])
def test_batch_norm_writes_running_stats_made_inside_inference_mode(
    f: Callable[..., object], two: bool, backend: str
) -> None:
    """Outside inference_mode, batch norm in training writes running stats made inside it: its kernel writes them,
    and the op, neither in-place nor out=, advances no version counter, which is what raises on an inference tensor.
    The compiled call's copy back (and the graph's own, kept in the graph) raised that error (issue #27, hbn)."""
    assert_matches_eager(f, _inference_stats(two), backend=backend)


def _batch_norm_module(frozen: bool, whole: bool) -> torch.nn.Module:
    """BatchNorm2d in training whose running stats were made inside inference_mode (`whole`: the module itself,
    num_batches_tracked too)."""
    if whole:
        with torch.inference_mode():
            model = torch.nn.BatchNorm2d(3)
    else:
        model = torch.nn.BatchNorm2d(3)
        with torch.inference_mode():
            model.running_mean, model.running_var = torch.zeros(3), torch.ones(3)
    return model.requires_grad_(not frozen).train()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_batch_norm_module_with_running_stats_made_inside_inference_mode_matches_eager(backend: str) -> None:
    """The module path (by hand: the oracle's deepcopy of a module makes its inference buffers normal tensors)."""
    eager, model = _batch_norm_module(True, False), _batch_norm_module(True, False)
    compiled = subclassaot.compile(model, backend=backend)
    for _ in range(2):
        x = torch.randn(2, 3, 4, 4)
        torch.testing.assert_close(compiled(x), eager(x))
        for name, buffer in eager.named_buffers():
            ours = cast(T, getattr(model, name))
            assert ours.is_inference() == buffer.is_inference(), name
            torch.testing.assert_close(ours, buffer)
        assert model.num_batches_tracked._version == eager.num_batches_tracked._version


@pytest.mark.parametrize(
    ("frozen", "whole", "error"),
    [(False, False, "cannot be saved for backward"), (True, True, "Inplace update to inference tensor")],
    ids=["saved_for_backward", "num_batches_tracked_written"],
)
def test_batch_norm_module_with_inference_buffers_raises_eagers_error(frozen: bool, whole: bool, error: str) -> None:
    """Eager raises: its node saves the running stats where the weight requires grad; num_batches_tracked.add_(1)
    writes an inference tensor in place where the whole module was made inside inference_mode."""
    x = torch.randn(2, 3, 4, 4)
    with pytest.raises(RuntimeError, match=error):
        _batch_norm_module(frozen, whole)(x)
    with pytest.raises(RuntimeError, match=error):
        subclassaot.compile(_batch_norm_module(frozen, whole), backend="eager")(x)


def _written_in_place(x: T, mean: T) -> object:
    mean.add_(1)
    return x + 1


def _written_in_place_inside_inference_mode(x: T, mean: T) -> object:
    with torch.inference_mode():
        mean.add_(1)
    return x + 1


def _with_stats(two: bool) -> tuple[T, T]:
    with torch.inference_mode():
        mean = torch.zeros(3)
    return torch.randn(3), TwoTensor(mean, mean.clone()) if two else mean  # type: ignore[no-untyped-call]  # untyped in torch


def test_in_place_write_of_an_inference_input_raises_eagers_error() -> None:
    """The program's own in-place op on an inference input outside inference_mode raises in eager: the run raises
    eager's error (the epilogue's copy, which raised it before, now writes inference inputs inside inference_mode).
    Guarded: a normal tensor compiles anew and is written, an inference one raises again."""
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        _written_in_place(*_with_stats(False))
    compiled = subclassaot.compile(_written_in_place, backend="eager")
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        compiled(*_with_stats(False))
    x, mean = torch.randn(3), torch.zeros(3)
    compiled(x, mean)
    assert bool((mean == 1).all())
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        compiled(*_with_stats(False))


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize(
    ("f", "two"),
    [
        (_written_in_place_inside_inference_mode, False),
        (_written_in_place_inside_inference_mode, True),
        (_written_in_place, True),
    ],
    ids=["inside-plain", "inside-two_tensor", "outside-two_tensor"],
)
def test_in_place_write_of_an_inference_input_matches_eager(f: Callable[..., object], two: bool, backend: str) -> None:
    """Inside inference_mode it passes; so does a TwoTensor's outside it, whose inner in-place op runs below
    ADInplaceOrView (its wrapper is no inference tensor)."""
    assert_matches_eager(f, lambda: _with_stats(two), backend=backend)


def _subclass_input_written_with_grad(x: T, y: T) -> T:
    x.mul_(y)
    return x * 3


def _members_written_inside_the_block(a: T, b: T, y: T) -> T:
    with torch.inference_mode():
        a.mul_(2)
    return b + y


def _pair_leaves(inference: bool) -> Callable[[], tuple[T, T]]:
    def make() -> tuple[T, T]:
        with torch.inference_mode(inference):
            a, b = torch.randn(3), torch.randn(3)
        return TwoTensor(a, b), torch.randn(3, requires_grad=True)  # type: ignore[no-untyped-call]  # untyped in torch

    return make


def _aliased_members(inference: bool) -> Callable[[], tuple[T, T, T]]:
    def make() -> tuple[T, T, T]:
        with torch.inference_mode(inference):
            base = torch.randn(2, 3)
        return base[0], base[1], torch.randn(3, requires_grad=True)

    return make


@pytest.mark.parametrize(
    ("fn", "make"),
    [(_subclass_input_written_with_grad, _pair_leaves), (_members_written_inside_the_block, _aliased_members)],
    ids=["two_tensor-leaves", "aliased-members"],
)
def test_a_written_input_whose_inference_ness_changes_compiles_anew_and_matches_eager(
    fn: Callable[..., T], make: Callable[[bool], Callable[[], tuple[T, ...]]]
) -> None:
    """The epilogue's copy into a written input runs inside inference_mode as decided when compiled
    (RuntimePlan.inference_wrappers, .inference_bases: no per-call read), so the inference-ness that decides it is
    guarded: a call whose input's leaves (a TwoTensor's, its wrapper no inference tensor: its copy_ is recorded, as
    eager's write, fuzz-free) or alias group members change it compiles anew and matches eager, either way round."""
    compiled = subclassaot.compile(fn, backend="eager")
    for k, inference in enumerate([False, True, False, True]):
        assert_call_matches_eager(compiled, fn, make(inference))
        assert compiled.compile_count == min(k + 1, 2)


def _pair_written_inside_the_block(x: T, y: T) -> T:
    with torch.inference_mode():
        x.mul_(2)
    return x * y


def test_a_written_subclass_input_that_becomes_an_inference_tensor_compiles_anew_and_raises_like_eager() -> None:
    """Whether a written wrapper is itself an inference tensor is guarded (it decides its copy_): a TwoTensor made
    inside inference_mode over normal leaves, after a call on a normal one, compiles anew and raises eager's error (a
    node saves it); before, the entry ran on and returned a result where eager raises."""

    def make(inference: bool) -> Callable[[], tuple[T, T]]:
        def inputs() -> tuple[T, T]:
            a, b = torch.randn(3), torch.randn(3)
            with torch.inference_mode(inference):
                x = TwoTensor(a, b)  # type: ignore[no-untyped-call]  # untyped in torch
            return x, torch.randn(3, requires_grad=True)

        return inputs

    compiled = subclassaot.compile(_pair_written_inside_the_block, backend="eager")
    assert_call_matches_eager(compiled, _pair_written_inside_the_block, make(False))
    for side in (_pair_written_inside_the_block, compiled):
        with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
            side(*make(True)())
    x, _ = make(True)()
    assert compiled.entry_for(x, torch.randn(3, requires_grad=True)) is None  # the guard fails: it would compile


def _written_and_transposed(x: T) -> T:
    x.add_(1)
    x.t_()
    return x * 2


@pytest.mark.parametrize(
    "make", [lambda: torch.randn(2, 3), lambda: PairTensor.from_tensor(torch.randn(2, 3))], ids=["plain", "pair"]
)
def test_the_generic_runner_s_copy_into_a_written_input_reads_no_inference_ness_per_call(
    make: Callable[[], T], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a written leaf is an inference tensor decides its epilogue copy (Note [Input Updates]); the guards pin
    it, so the compile decides it (RuntimePlan.inference_leaves) and steps.copy_into reads nothing per call. A metadata
    change takes the generic runner; the results are eager's."""
    compiled = assert_matches_eager(_written_and_transposed, lambda: (make(),), calls=2)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is None  # (the generic runner)
    readers: list[str] = []
    is_inference = torch._C.TensorBase.is_inference

    def spy(self: T) -> bool:
        readers.append(inspect.stack()[1].function)
        return is_inference(self)

    monkeypatch.setattr(torch.Tensor, "is_inference", spy)
    x = make()
    compiled(x)
    assert "copy_into" not in readers, readers


def _fill_through_expand(
    region: Callable[[], contextlib.AbstractContextManager[object]], sizes: tuple[int, ...]
) -> Callable[[T], tuple[T, T]]:
    def f(x: T) -> tuple[T, T]:
        t = x.expand(sizes)
        with region():
            t.fill_(0.5)
        values, indices = t.max(0)
        return values, indices

    return f


@pytest.mark.parametrize("sizes", [(2, -1, 4), (2, 3, 4)], ids=["minus_one", "same"])
@pytest.mark.parametrize(
    "region", [torch.inference_mode, torch.no_grad, contextlib.nullcontext], ids=["inference", "no_grad", "grad"]
)
def test_fill_through_an_expand_to_the_same_size_writes_the_value_exactly(
    region: Callable[[], contextlib.AbstractContextManager[object]], sizes: tuple[int, ...]
) -> None:
    """Eager's fill_ through `x.expand(x.shape)` writes 0.5 itself into x: max's ties then go to index 0, and so does
    the gradient. Functionalization's write-back of an expand (`x + (0.5 - x)`) is 0.5 give or take an ulp, which broke
    ties elsewhere (torch_internals._expands_to_itself; fuzz seed 121004 program 744)."""

    def make() -> tuple[T]:
        with torch.enable_grad():
            return (torch.randn(2, 3, 4, requires_grad=True).clone(),)

    with torch.enable_grad():
        assert_matches_eager(_fill_through_expand(region, sizes), make)


def _copy_inside_inference_mode(op: str) -> Callable[[T], object]:
    def f(x0: T) -> object:
        with torch.inference_mode():
            t0 = x0.contiguous() if op == "contiguous" else x0.reshape((1, -1))
        return (t0,)

    return f


@pytest.mark.parametrize(("op", "grad"), [("contiguous", False), ("reshape", False), ("reshape", True)])
def test_copy_by_an_aliasing_op_inside_inference_mode_is_no_view(op: str, grad: bool) -> None:
    """contiguous() and reshape() of a tensor whose layout allows no view, inside inference_mode: the op reaches the
    swap mode undecomposed (autograd's keys are off) and copies; eager's result is no view. It was recorded as a view
    of its source, then refused as "a view of an intermediate moved to another storage" (fuzz seed 121008, programs
    7812 and 9431)."""

    def make() -> tuple[T]:
        with torch.enable_grad():
            return (torch.randn((3, 3, 3), requires_grad=grad).clone().unbind(1)[2],)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(_copy_inside_inference_mode(op), make)


def _write_inside(op: str) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        x0.mul_(1.0)  # a write with grad on that records nothing (x0 requires no grad): visible to autograd
        t0 = x1.exp()
        t0.requires_grad_()
        with torch.inference_mode():
            if op == "copy_":
                x0.copy_(t0)
            elif op == "add_":
                x0.add_(t0)
            else:
                x0.index_put_((torch.tensor([0]),), t0[0])
        return (t0 * 2, x0)

    return f


_WRITTEN_INPUTS: dict[str, Callable[[], T]] = {
    "base": lambda: torch.randn(2, 3),
    "view": lambda: torch.randn(3, 2).t(),
    "aliased_view": lambda: torch.randn(2, 3, requires_grad=True).detach(),
    "twotensor": lambda: TwoTensor(torch.randn(2, 3), torch.randn(2, 3)),  # type: ignore[no-untyped-call]  # untyped in torch
}


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("op", ["copy_", "add_", "index_put_"])
@pytest.mark.parametrize("where", list(_WRITTEN_INPUTS))
def test_write_inside_inference_mode_of_a_value_requiring_grad_records_no_history(
    where: str, op: str, grad: bool
) -> None:
    """A write inside inference_mode records no autograd history in eager, whatever the value's flag: the input
    written there with a new leaf's value comes back requiring no grad. The graph's run (the native path: Note
    [Training Without A Function]) gave the input update history through the leaf, which the epilogue's copy, made
    with grad where an earlier write was (one recording nothing), gave the input (fuzz seed 123790 #148: DIVERGED,
    then refused); an input eager leaves requiring no grad is now written without history."""

    def make() -> tuple[T, T]:
        return (_WRITTEN_INPUTS[where](), torch.randn(2, 3))

    with torch.set_grad_enabled(grad):
        if where == "twotensor" and grad:  # (the new leaf takes the native path: plain inputs only)
            with pytest.raises(UnsupportedError, match="requires_grad_"):
                assert_matches_eager(_write_inside(op), make)
            return
        assert_matches_eager(_write_inside(op), make)
        assert_matches_eager(_write_inside(op), make, after_call=write_outputs)


def _copy_into_an_aliased_view_inside(x0: T, x1: T, x2: T) -> object:
    t0 = torch.native_batch_norm(x0.clone().reshape(-1, 2), None, None, torch.zeros(2), x0[0], True, 0.1, 1e-05)[0]
    t0.requires_grad_()  # (the batch norm's write of x0[0], with grad on, records nothing)
    with torch.inference_mode():
        x2.copy_(t0)
    return (t0.view((4, 1, 2)), x1)


def test_copy_inside_inference_mode_into_a_view_of_aliased_inputs_records_no_history() -> None:
    """The same through a synthetic base (inputs aliasing one storage): the base's copy took the graph's history
    (fuzz seed 123790 #148, shrunk)."""

    def make() -> tuple[T, T, T]:
        b0 = torch.randn((4, 2))
        return (b0, b0, b0.t().transpose(1, 0))

    with torch.enable_grad():
        assert_matches_eager(_copy_into_an_aliased_view_inside, make)
        assert_matches_eager(_copy_into_an_aliased_view_inside, make, after_call=write_outputs)


def _view_of_leaf() -> tuple[object, ...]:
    return (torch.randn(3).requires_grad_().view(1, 3),)


def _self_set(x: T) -> object:
    return set_to(x, x)


def _transposed_back(x: T) -> object:
    return x.t_().t_()


@pytest.mark.parametrize("block", [torch.inference_mode, torch.no_grad], ids=["inference", "no_grad"])
@pytest.mark.parametrize("bump", [_self_set, _transposed_back], ids=["set_", "t_t_"])
def test_view_input_bumped_without_grad_then_read_takes_eager_rebuilt_edge(
    block: Callable[[], contextlib.AbstractContextManager[object]], bump: Callable[[T], object]
) -> None:
    # Eager: the bump (no node) makes the clone's read rebuild x's history from its base (AsStridedBackward0, whose
    # backward makes a fresh gradient); the compiled call's edge was the ViewBackward0 x came with, so the leaf's .grad
    # was a view of the caller's tangent (fuzz seed 121009, program 9607).
    def f(x: T) -> tuple[T]:
        with block():
            bump(x)
        return (x.clone(),)

    with torch.enable_grad():
        assert_matches_eager(f, _view_of_leaf)
        assert_matches_eager(f, _view_of_leaf, after_call=write_outputs)
        x = cast(T, _view_of_leaf()[0])
        (out,) = subclassaot.compile(f)(x)
        assert out.grad_fn is not None and out.grad_fn.next_functions[0][0] is x.grad_fn
        assert type(x.grad_fn).__name__ == "AsStridedBackward0"


def _two_tensor(a: T, b: T) -> T:
    return cast(T, TwoTensor(a, b))  # type: ignore[no-untyped-call]  # untyped in torch


_TWO_TENSOR_INPUTS: dict[str, Callable[[], T]] = {
    "two": lambda: _two_tensor(torch.randn(2, 2), torch.randn(2, 2)),
    "nested": lambda: _two_tensor(
        _two_tensor(torch.randn(()), torch.randn(())), _two_tensor(torch.randn(()), torch.randn(()))
    ),
    "nested_leaves": lambda: _two_tensor(
        _two_tensor(torch.randn(2, 2).requires_grad_(), torch.randn(2, 2).requires_grad_()),
        _two_tensor(torch.randn(2, 2).requires_grad_(), torch.randn(2, 2).requires_grad_()),
    ),
}


@pytest.mark.parametrize("kind", list(_TWO_TENSOR_INPUTS))
def test_two_views_function_inside_inference_mode_of_a_two_tensor_share_storage(kind: str) -> None:
    """Fuzz seed 121010, programs 9502 and 9673 (DIVERGED: out[0] and out[1], and their inner tensors, unrelated where
    eager's share storage). Inside inference_mode `y.view_as(y)` reaches the subclass's dispatch whole (no autograd
    decomposition there): its record held a tensor argument, so no chain replayed it and the output was rebuilt from
    its leaves, a wrapper of its own; it is replayed as view(y.shape). The inference copies then rebuilt the nested
    wrappers anew: those that shared a storage still do."""

    def f(x0: T) -> tuple[T, T]:
        with torch.inference_mode():
            t0, t1 = TwoViews.apply(x0)  # type: ignore[no-untyped-call]  # Function.apply is untyped in torch
        return (t1, t0)

    def make_inputs() -> tuple[T]:
        with torch.no_grad():
            return (_TWO_TENSOR_INPUTS[kind](),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs)


def _view_as_and_unsqueeze(y: T) -> tuple[T, T]:
    return y.view_as(y), y.unsqueeze(0)


def _expand_as_and_unsqueeze(y: T) -> tuple[T, T]:
    return y.expand_as(y.unsqueeze(0)), y.unsqueeze(0)


def _itself_and_unsqueeze(y: T) -> tuple[T, T]:
    return y, y.unsqueeze(0)


@pytest.mark.parametrize(
    ("views", "kind"),
    [(_view_as_and_unsqueeze, "two"), (_expand_as_and_unsqueeze, "two"), (_itself_and_unsqueeze, "nested")],
    ids=["view_as", "expand_as", "nested_itself"],
)
def test_views_of_a_two_tensor_computed_inside_inference_mode_share_storage(
    views: Callable[[T], tuple[T, T]], kind: str
) -> None:
    """The same without a custom Function, in a call with grad on: view_as() and expand_as() of a TwoTensor inside
    inference_mode (outputs unrelated before), and a nested TwoTensor's inner wrappers (unrelated before)."""

    def f(x0: T) -> tuple[T, T]:
        with torch.inference_mode():
            return views(x0 * 2)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (_TWO_TENSOR_INPUTS[kind](),))
