"""Tensor subclass inputs, intermediates and outputs: set_() and `.data =` between subclass inputs, in-place view
ops on subclass views, tangents and strides of subclass outputs, uniform writes through expands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import torch

import subclassaot
from tests.backends import RecordingBackend
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import assert_refused, nonleaf, pair, pair_nonleaf

# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions: one hand-minimized program per distinct bug the fuzzer found (`python -m subclassaot fuzz`).
# Each program was a bug (once a strict xfail naming it); each now matches eager or is refused as eager's rule says.
# ---------------------------------------------------------------------------------------------------------------------

T = torch.Tensor


# ---------------------------------------------------------------------------------------------------------------
# Fuzz seed 10 (second triage)


def test_nonleaf_subclass_view_input_keeps_its_layout(compile_fn: CompileFn | None) -> None:
    # Programs 21 and 285: a non-leaf wrapper runs as a clone, whose own (contiguous) layout was taken for a change.
    def f(x: T) -> object:
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(2, 2, 2).select(1, 0),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_data_write_keeps_wrapper_version(compile_fn: CompileFn | None) -> None:
    # Program 126: a write through `.data` of a requires-grad wrapper leaves the wrapper's version counter alone.
    def f(x: T, y: T) -> object:
        y.data.mul_(x)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (pair(4, 1).as_strided((), (), 0), pair(requires_grad=True))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_data_assign_then_inplace_view(compile_fn: CompileFn | None) -> None:
    # Program 98: `x.data = y` changes the wrapper's own metadata and storage; a t_() after it sees the new ones.
    def f(x: T, y: T) -> object:
        x.data = y
        x.t_()
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (pair(1), pair())

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_intermediate_data_assign_returned(compile_fn: CompileFn | None) -> None:
    # Program 166: the returned wrapper shares the input's storage while its inner tensors do not (Note [Wrapper Storage]).
    def f(x: T) -> object:
        t = x.add(-1.0)
        t.data = x
        return t.reshape(1, 1)

    def make_inputs() -> tuple[object, ...]:
        return (pair(),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_unbind_view_of_grad_input_then_written(compile_fn: CompileFn | None) -> None:
    # Programs 112 and 170: the view is rebuilt before the epilogue writes the input, as eager took it before.
    def f(x: T) -> object:
        t = x.unbind(2)[1]
        t.mul_(2.0)
        return t

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(4, 2, 2, requires_grad=True),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_same_subclass_object_twice_inplace_view(compile_fn: CompileFn | None) -> None:
    # Programs 153 and 391: one wrapper passed twice is one object: its unsqueeze_ is seen through both names
    # and applied once.
    def f(x: T, y: T) -> object:
        y.unsqueeze_(-1)
        return x.transpose(0, 0).unbind(0)[0], y

    def make_inputs() -> tuple[object, ...]:
        b = pair()
        return (b, b)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("nonleaf", [False, True])
def test_subclass_view_of_intermediate_in_training(compile_fn: CompileFn | None, nonleaf: bool) -> None:
    # Program 104: the view was rebuilt from the intermediate's inner tensors and had no autograd history (no
    # gradient at all); Note [Output Regeneration].
    def f(x: T) -> object:
        return (x * 2).view(-1)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(2, 3) if nonleaf else pair(2, 3, requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("grad", [False, True])
def test_subclass_intermediate_returned_with_its_views(compile_fn: CompileFn | None, grad: bool) -> None:
    # The intermediate itself and its views come from one wrapper (shared storage, one autograd history).
    def f(x: T) -> object:
        t = x * 2
        u = t.t()
        u.mul_(2)
        return t.view(-1), t, u.unbind(0)

    def make_inputs() -> tuple[object, ...]:
        return (pair(2, 3, requires_grad=True),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_views_of_one_subclass_intermediate_share_it(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t = x * 2
        return t.view(-1), t.t()

    def make_inputs() -> tuple[object, ...]:
        return (pair(2, 3),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_tangent_of_plain_output(compile_fn: CompileFn | None) -> None:
    # Program 464: the oracle's loss sums a PairTensor output with a plain one, so the plain output's gradient is a
    # PairTensor (Note [Tangent Retrace]).
    def f(x: T, y: T) -> object:
        return (y, x.add(3.0))

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(1, requires_grad=True), pair_nonleaf(4))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_tangent_of_plain_output_on_compiled_backend() -> None:
    # A backend other than eager runs plain kernels: the subclass tangent gets a retraced backward (Note [Tangent
    # Retrace]) and the gradients are eager's.
    def f(x: T, y: T) -> object:
        return y * 2, x.add(3.0)

    def grads(compile: bool) -> tuple[object, object]:
        torch.manual_seed(0)
        x, y = torch.randn(4, requires_grad=True), pair(4, requires_grad=True)
        fn = subclassaot.compile(f, backend=RecordingBackend()) if compile else f
        with torch.enable_grad():
            a, b = cast(tuple[T, T], fn(x, y))
            (a.sum() + b.sum()).backward()  # type: ignore[no-untyped-call]
        return x.grad, y.grad

    (gx, gy), (ex, ey) = grads(True), grads(False)
    assert type(gx) is type(ex) and type(gy) is type(ey)
    torch.testing.assert_close(gx, ex)
    torch.testing.assert_close(gy, ey)


def test_set_on_intermediate_view_then_viewed(compile_fn: CompileFn | None) -> None:
    # Program 445: the output's view chain passes through a tensor set_() changed; replaying it crashed.
    def f(x: T) -> object:
        t = x.transpose(1, 2)
        set_to(t, x)
        return t.expand(-1, 2, -1)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(3, 2, 3),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_beyond_input_set_to_intermediate_refused(compile_fn: CompileFn | None) -> None:
    # Program 105: x.set_(t[0]) and an output t[1:] that shares x's new storage beyond x's own element.
    def f(x: T) -> object:
        t = x.mul(x)
        v = t.select(0, -1)
        set_to(x, t.unbind(0)[0])
        return v.unsqueeze(-1)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2),)

    with torch.no_grad():
        assert_refused(f, make_inputs, compile_fn, "reaches elements of it that the input does not cover")


def test_view_taken_before_write_returned_twice(compile_fn: CompileFn | None) -> None:
    # Program 11: one object returned twice, a view rebuilt before the epilogue (seen as a copy per position).
    def f(x: T) -> object:
        t = x.select(0, 2)
        t.t_()
        return t, t

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(3),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("view", ["expand", "view", "t"])
def test_inplace_view_op_on_subclass_view_input_gradient(compile_fn: CompileFn | None, view: str) -> None:
    # Program 225: a wrong gradient. The epilogue replays transpose_ on the input (a view), then advanced its version
    # counter again, and autograd regenerated the view's grad_fn without the transpose.
    def f(x: T) -> object:
        x.transpose_(0, 1)
        return x

    def make_inputs() -> tuple[object, ...]:
        b = pair_nonleaf(4, 4)
        return ({"expand": b.expand(4, 4), "view": b.view(4, 4), "t": b.t()}[view],)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_to_itself_backward_raises(compile_fn: CompileFn | None) -> None:
    # Seed 11, program 173: eager's backward raises through the set_ node (Note [set_ Under Grad]).
    def f(x: T) -> object:
        set_to(x, x)
        return x

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(1, 2),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_as_strided_write_on_aliased_inputs(compile_fn: CompileFn | None) -> None:
    # Seed 11, program 224: the inputs are views of one synthetic base; the as_strided view is taken from it.
    def f(x: T, y: T) -> object:
        x.as_strided((), (), 1).fill_(-1.0)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b = torch.randn(1, 4, 3)
        return (b, b)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_inplace_view_op_on_expanded_input(compile_fn: CompileFn | None) -> None:
    # transpose_ moves no data: the refusal of writes through overlapping elements does not apply to it.
    def f(x: T) -> object:
        x.transpose_(0, 1)
        return x + 1

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(3, 1).expand(3, 2),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_view_of_no_grad_view_in_training(compile_fn: CompileFn | None) -> None:
    # Seed 11, program 216: the subclass form of the test above.
    def f(x: T) -> object:
        with torch.no_grad():
            t = x.view(1, 3, 2)
        return t.unsqueeze(2)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(2, 1, 3),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_nonleaf_strided_subclass_input_result_strides(compile_fn: CompileFn | None) -> None:
    # Seed 10, program 21: the input ran as a contiguous clone, so the strides of results (of a size-1 dim) differed.
    def f(x: T) -> object:
        t = x.view(1, 1, 2)
        t.transpose_(2, 1)
        return t.add(0.5)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(3, 4).diagonal(1, 1, 0),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_write_through_self_overlapping_strides_refused(compile_fn: CompileFn | None) -> None:
    # Seed 12, program 53 (wrong values): strides (2, 2) make elements meet; eager writes them once per index.
    def f(x: T) -> object:
        x.mul_(2.0)
        return x

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(3, 3).as_strided((3, 2), (2, 2), 1),)

    with torch.no_grad():
        assert_refused(f, make_inputs, compile_fn, "elements overlap in memory")


def test_data_assign_of_intermediate_to_same_input_twice(compile_fn: CompileFn | None) -> None:
    # Seed 12, program 258: the output shares the input's new storage; it is not the input object.
    def f(x: T, y: T) -> object:
        t = y.add(y)
        x.data = t
        return t

    def make_inputs() -> tuple[object, ...]:
        b = torch.randn(3)
        return (b, b)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_data_assign_on_no_grad_view_in_training(compile_fn: CompileFn | None) -> None:
    # Seed 12, program 245: `.data =` is hidden from autograd and from the version counter (a later op on
    # the no_grad view checked it).
    def f(x: T) -> object:
        with torch.no_grad():
            t = x.view(1, 1, -1)
        t.data = t
        return t.sum(2)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, 1, requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("program", ["y", "y_t", "x_times_y"])
def test_detached_alias_beside_grad_input_gradients(compile_fn: CompileFn | None, program: str) -> None:
    # Seed 12, program 186 and its neighbours (missing and doubled gradients): inputs (b.detach(), b); the
    # synthetic base comes from the member that requires grad, and the detached member stays detached in the trace.
    def f(x: T, y: T) -> object:
        if program == "y_t":
            y.t_()
        return x * y if program == "x_times_y" else y * 2

    def make_inputs() -> tuple[object, ...]:
        b = nonleaf(4)
        return (b.detach(), b)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_write_through_detached_alias_of_grad_leaf(compile_fn: CompileFn | None) -> None:
    # Seed 10, program 455: the write goes through the detached member, hidden from autograd as in eager.
    def f(x: T, y: T) -> object:
        x.add_(-1.0)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b = torch.randn(1, 2, 2, requires_grad=True)
        return (b.detach(), b)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_view_of_intermediate_returned_twice_in_training(compile_fn: CompileFn | None) -> None:
    # Seed 10, program 153: one object twice (the second position is not rebuilt from the wrapper again).
    def f(x: T, y: T) -> object:
        t = y.mul(x).diagonal(1, 0, 1)
        return t, t

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(1, 3, 2), pair(1))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("grad", [False, True])
def test_subclass_input_view_then_input_metadata_change(compile_fn: CompileFn | None, grad: bool) -> None:
    # A view of a subclass input taken before the input's t_(): rebuilt from the input before the epilogue
    # replays the t_() (it was a fresh wrapper, and in training had no autograd history).
    def f(x: T) -> object:
        v = x[0]
        x.t_()
        return v, x.unsqueeze(0)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(3, 2) if grad else pair(3, 2),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_data_assigned_output_with_history(compile_fn: CompileFn | None) -> None:
    # Seed 13, program 217 (refused before): eager's output keeps its grad_fn over the input's storage
    # (Note [History Kept Through .data =]).
    def f(x: T) -> object:
        t = x.mul(0.5)
        t.data = x
        return t

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, 3, requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_set_to_itself_backward_raises(compile_fn: CompileFn | None) -> None:
    # Seed 11, program 131: the wrapper-level set_ under grad is what autograd records.
    def f(x: T) -> object:
        t = x.transpose(1, 2)
        set_to(x, x)
        return t, x

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(1, 3, 4),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_view_then_inplace_view_op_through_alias(compile_fn: CompileFn | None) -> None:
    # Seed 11, program 187: t_() through another view advances the counter eager's grad_fn check reads (the
    # aliases are traced as one synthetic base: Note [Synthetic Bases]).
    def f(x: T, y: T) -> object:
        t = x.transpose(0, 0)
        y.expand(2, 2, 3).transpose_(2, 0)
        return t

    def make_inputs() -> tuple[object, ...]:
        b = nonleaf(2, 2, 3)
        return (b, b)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_same_tensor_twice_with_cancelling_inplace_view_ops(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 1, program 22: t_() twice on one object passed twice leaves no net change, but the second argument
    # sees the first t_() in between; the two stay one object (not untouched aliases traced apart).
    def f(x0: T, x1: T) -> object:
        x1.t_()
        t0 = x0.unbind(0)[1]
        x0.t_()
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((1, 3))
        return (b0, b0)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_of_input_after_its_metadata_change_then_inplace_view_op(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 21, program 894: the view is taken after t_() on the input, then changed by its own unsqueeze_();
    # it must be replayed after the epilogue's t_(), not before it (it used to come back with the input's old shape).
    def f(x0: T) -> object:
        x0.t_()
        t0 = x0.select(0, 0)
        t0.unsqueeze_(1)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():  # a view that requires grad
            return (nonleaf(3, 1, 3).diagonal(0, 0, 2),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Fuzz (fourth triage)


def test_subclass_result_strides_after_inplace_transpose(compile_fn: CompileFn | None) -> None:
    # The wrapper's strides follow its first inner tensor's real ones (Note [Strides The Kernels Choose]).
    def f(x0: T) -> object:
        x0.t_()
        t0 = x0.mul(-1.0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        return (pair(3, 1),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_output_sharing_input_set_to_it_in_training(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 21, program 755: the output (with its autograd history) is the intermediate the input was set_() to;
    # it used to come back as an alias of the input's new storage without a grad_fn, then was refused; supported
    # since fuzz seed 7000 #292 (Note [Outputs Over Another Storage]).
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(-1.0)
        set_to(x0, t0)
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(2, 4, 3), nonleaf()), compile_fn=compile_fn)


def test_subclass_output_set_under_grad(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 21, program 992: eager's output gets its history from set_ (backward raises); it used to come back
    # without one, then was refused; supported since fuzz seed 3000 #4064 (Note [set_ Under Grad]).
    def f(x0: T) -> object:
        t0 = x0.sin()
        set_to(t0, x0)
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(),), compile_fn=compile_fn)


def _fill_expanded(x0: T) -> object:
    t0 = x0.expand((3, -1, 2))
    t0.fill_(0.5)
    return (t0, x0)


def _zero_expanded_then_read(x0: T) -> object:
    t0 = x0.expand((3, -1, 2))
    t0.zero_()
    return (x0 * 2,)


def _zero_expanded_slice_of_clone(x0: T) -> object:
    y = x0.clone()
    t0 = y[0:1].expand(3, -1, -1)
    t0.zero_()
    return (y, t0)


def _fill_expanded_unsqueeze(x0: T) -> object:
    x0.unsqueeze(0).expand(2, -1, -1).fill_(1.0)
    return (x0.sin(),)


@pytest.mark.parametrize(
    "program", [_fill_expanded, _zero_expanded_then_read, _zero_expanded_slice_of_clone, _fill_expanded_unsqueeze]
)
@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("grad", [False, True])
def test_uniform_write_through_expand(
    program: Callable[[T], object], kind: str, grad: bool, compile_fn: CompileFn | None
) -> None:
    # Fuzz seed 20, program 258 (Note [In-Place Ops As Eager Runs Them]): fill_/zero_ through an expanded view were
    # refused; functionalizing them directly gives wrong values, so they run on the view with repeats narrowed away.
    def make_inputs() -> tuple[object, ...]:
        return (pair(4, 1) if kind == "pair" else torch.randn(4, 1),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(program, make_inputs, compile_fn=compile_fn)


def test_uniform_write_through_expand_recorded_by_autograd_raises_in_backward(compile_fn: CompileFn | None) -> None:
    # Eager's backward of a fill_ through an expand that autograd recorded raises; so does the compiled one (Note
    # [In-Place Ops As Eager Runs Them]).
    with torch.enable_grad():
        assert_matches_eager(_fill_expanded_unsqueeze, lambda: (nonleaf(4, 1),), compile_fn=compile_fn)


def test_subclass_resize_of_input_view_bumps_version(compile_fn: CompileFn | None) -> None:
    # A wrapper-level resize_ re-sets the view's metadata with a set_, which advances the input's version counter.
    def f(x0: T) -> object:
        t0 = x0.view((6, 4))
        t0.resize_((1, 4, 1))
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (pair(4, 2, 3),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_on_view_of_same_input_twice_backward_raises(compile_fn: CompileFn | None) -> None:
    # set_ under grad on a view rebases the input's history on it (Note [set_ Under Grad]).
    def f(x0: T, x1: T) -> object:
        t0 = x0.t()
        set_to(t0, x0)
        return (x1,)

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(4)
        return (b0, b0)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_unbind_view_before_input_set_in_training(compile_fn: CompileFn | None) -> None:
    # The input's wrapper-level set_ advances its version after the multi-output view was taken: eager's grad_fn
    # read raises, so the view is rebuilt before the epilogue replays the set_.
    def f(x0: T) -> object:
        t0 = x0.unbind(0)[2]
        set_to(x0, x0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(4, 3, 3),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_no_grad_view_then_sibling_set(compile_fn: CompileFn | None) -> None:
    # The set_ on another view of the input advances the counter eager's grad_fn check of the output reads.
    def f(x0: T) -> object:
        t0 = x0.view((3, 1))
        t1 = t0.reshape((3, 1, 1))
        t2 = x0.expand((3, 2))
        t3 = t1.contiguous()
        set_to(t2, t3)
        return (t3,)

    def make_inputs() -> tuple[object, ...]:
        return (pair(3, 1, requires_grad=True),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("view", ["select", "expand", "view_after"])
def test_subclass_input_view_data_assign_returned(compile_fn: CompileFn | None, view: str) -> None:
    # Eager's wrapper takes the assigned tensor's size and storage while its inner tensors keep theirs; a view taken
    # after it shares the assigned storage while its inner tensors view the other input's.
    def f(x0: T, x1: T) -> object:
        if view == "view_after":
            t0 = x1.view(12)
            t0.data = x0
            return (t0.unsqueeze(0),)
        t0 = x1.select(1, -2) if view == "select" else x0.expand((4, 1, 3))
        t0.data = x0
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        return {
            "select": (pair(), pair(4, 3)),
            "expand": (pair(4, 1, 1), pair()),
            "view_after": (pair(12), pair(3, 4)),
        }[view]

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_input_view_data_assign_from_its_input_then_viewed(compile_fn: CompileFn | None) -> None:
    # Seed 24, program 70: the assigned tensor is the view's own base, so a view taken afterwards is an ordinary
    # view of the input (not refused).
    def f(x0: T) -> object:
        t0 = x0.view((12,))
        t0.data = x0
        t1 = t0.unsqueeze(0)
        t0.add_(2.0)
        return (x0, x0, t1)

    def make_inputs() -> tuple[object, ...]:
        return (pair(3, 4, 1),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_made_after_the_write_from_a_view_made_before(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 21, program 173: t1 is made after the write from t0, a no_grad view made before it; eager's t1 is
    # fine (its version is the written one), so it is replayed after the epilogue, not before the write.
    def f(x0: T) -> object:
        t0 = x0.expand((3, 2))
        x0.fill_(0.5)
        t1 = t0.unbind(1)[0]
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (pair_nonleaf(2, 4, 4).as_strided((3, 2), (3, 2), 0),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_fresh_subclass_output_strides_in_training(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 21, program 706: Note [Strides The Kernels Choose] in the training runtime too.
    def f(x0: T, x1: T) -> object:
        x0.transpose_(0, 1)
        return (x1.add(x0.clone()),)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair(4, 3), nonleaf(1, 3, 1)), compile_fn=compile_fn)


def test_uniform_write_through_zero_stride_as_strided(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 22, program 899: the write-back of a narrow at the end of an as_strided chain scattered through the
    # zero stride (a crash in the graph); the write goes through one as_strided of the root instead.
    def f(x0: T) -> object:
        t0 = x0.as_strided((2, 3), (3, 0), 0)
        t0.zero_()
        return ()

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(2, 3, 3),), compile_fn=compile_fn)


def test_set_under_grad_output(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 22, program 167: a plain intermediate set_() under grad, returned: eager's has set_'s history, and
    # so does ours (Note [set_ Under Grad]; refused before). Backward raises on both sides.
    def f(x0: T, x1: T) -> object:
        t0 = x0.sin()
        set_to(t0, x1.t())
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((), requires_grad=True)
        return (b0, b0)

    with torch.enable_grad():
        compiled = assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        x = torch.randn((), requires_grad=True)
        out = cast(tuple[T, ...], compiled(x, x))[0]
        assert out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() and out._base is None
        with pytest.raises(RuntimeError, match="derivative for set_ is not implemented"):
            torch.autograd.backward(out)


def test_aliased_input_gaining_grad(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 22, program 718: x1 (a detach() of x0) gains grad by the write, recorded on it alone in eager, as the
    # epilogue's copy of its own new value records it (Note [Inputs Written In Training]; refused before).
    def f(x0: T, x1: T) -> object:
        x1.add_(x0)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((3, 2), requires_grad=True)
        return (b0, b0.detach())

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_view_input_set_to_intermediate_leaves_wrapper_family(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 22, program 832 (Note [Wrapper Storage]): x1's wrapper takes a storage of its own.
    def f(x0: T, x1: T) -> object:
        t0 = x1.sin()
        set_to(x1, t0)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = pair(2, 4)
        return (b0, b0[:, 0:0:1])

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_write_with_grad_to_view_after_set_refused(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 23, program 845 (Note [Stale View Functions]): t0 is a view of x1 set_() to all of x1; under
    # functionalization autograd's gradient of the copy_ followed only t0's old select() region (wrong gradients).
    def f(x0: T, x1: T) -> object:
        t0 = x1.select(0, 0)
        set_to(t0, x1)
        t0.copy_(x0)
        return (x0, t0)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(4).select(0, 0), torch.randn(2, 3, 1))

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "a view and then set_\\(\\) to another tensor")


def test_backward_error_leaves_unreached_input_grad(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 23, program 328 (Note [Backward Errors Are Deferred]): eager's backward raises (x0 saved, then
    # written) after x1 (returned as is) got its gradient; x1 was an input of our Function, held behind its raise.
    def f(x0: T, x1: T) -> object:
        x0.mul_(x0)
        return (x1, x0)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(), torch.randn((), requires_grad=True))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_backward_error_of_the_written_input_only(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 23, program 833: only the written input's backward fails (its set_() under grad); eager's backward
    # through t1 alone succeeds. Refused before; now the backward graph takes no tangent for x0's new value and
    # raises only when one is given (Note [Backward Errors Are Deferred]).
    def f(x0: T) -> object:
        t0 = x0.unsqueeze(1)
        t1 = x0.mul(-1.0)
        t0.add_(0.5)
        set_to(x0, x0)
        return (t1,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(3),), compile_fn=compile_fn)


def test_view_of_unbind_output_made_before_write(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 23, program 788: t1, a view of the output t0 (an unbind() view), was replayed from t0 after the
    # epilogue wrote x0, which raises for a multi-output view; the chain replays from x0 before the epilogue.
    def f(x0: T) -> object:
        t0 = x0.unbind(1)[0]
        t1 = t0[1:1:1]
        x0.mul_(x0)
        return (t0, t1)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (pair_nonleaf(1, 1),), compile_fn=compile_fn)


def test_backward_error_with_gradient_avoiding_it_refused(compile_fn: CompileFn | None) -> None:
    # Beside seed 23 #328 (Note [Backward Errors Are Deferred]): y's gradient does not run through the failing
    # MulBackward; eager accumulates it before raising, ours raised first.
    def f(x: T, y: T) -> object:
        x.mul_(x)
        return (x + y,)

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(3), torch.randn(3, requires_grad=True))

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "does not depend on the failing step")


def test_set_under_grad_of_view_of_input_without_grad(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 24, program 178: eager rebases x1 (the view's base) on the set_, so x1 requires grad after the call;
    # ours left it as it was (refused since; supported by Note [set_ Under Grad], fuzz seed 40000).
    def f(x0: T, x1: T) -> object:
        t0 = x1.transpose(0, 0)
        set_to(t0, x0)
        return ()

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(), torch.randn(1)), compile_fn=compile_fn)


def test_no_grad_view_of_intermediate_written_under_grad(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 25, program 327: eager's t1 has a grad_fn that raises (a no_grad view whose base was then written
    # with grad); ours came back a leaf, then was refused; now its counter is advanced (Note [Views That
    # Raise After A Bump]).
    def f(x0: T) -> object:
        t0 = x0.add(-1.0)
        with torch.no_grad():
            t1 = t0.t()
        t0.mul_(t1)
        return (t1,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(2),), compile_fn=compile_fn)


def test_no_grad_view_of_input_written_then_data_assigned(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 25, program 628: as above, t0 a no_grad view of the input, its `.data` then assigned.
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = x0.view((1, 1, 1))
        t1 = t0.clone()
        x0.fill_(2.0)
        t0.data = t1
        return (t0,)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(),), compile_fn=compile_fn)


def test_write_through_data_after_a_no_grad_view(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 23, program 783: a write through `.data` does not move the input's version counter, so the no_grad
    # view taken before it stays valid in eager; it was replayed before the epilogue's writes and then raised.
    def f(x0: T, x1: T) -> object:
        x1.copy_(x0)
        t0 = x1.expand((2, 3))
        t0.data.mul_(2.0)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((2, 3), requires_grad=True)
        return (b0, b0)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_of_wrapper_set_to_input_replays_the_set(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 23, program 721 (Note [Wrapper Storage]): the output is a view of a wrapper that was
    # set_() to an unchanged input; the set_ is a step of its replay, so the output stays a view of args[0].
    def f(x0: T, x1: T) -> object:
        t0 = x1.view(())
        set_to(t0, x0)
        return (t0.reshape(()),)

    def make_inputs() -> tuple[object, ...]:
        b0 = pair()
        return (b0, b0)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_of_earlier_output_resized_after(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 23, program 646: t1 views t0, which is resized (and returned) after; t1 replays from the input.
    def f(x0: T) -> object:
        t0 = x0.reshape((8, 4))
        t1 = t0.expand((1, 8, -1))
        t0.resize_((1,))
        return (t1, t0)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (pair(4, 4, 2),), compile_fn=compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_inplace_read_of_written_memory_refused(kind: str, compile_fn: CompileFn | None) -> None:
    # Fuzz seed 24, program 562 (Note [In-Place Ops As Eager Runs Them]): the broadcast operand views memory the op
    # writes; eager reads values its own element writes changed, the functional graph read the old ones (wrong values).
    def f(x0: T) -> object:
        t0 = x0[:, :, 0:2:2]
        x0.add_(t0)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (pair(4, 4, 2) if kind == "pair" else torch.randn(4, 4, 2),)

    with torch.no_grad():
        assert_refused(f, make_inputs, compile_fn, "reads part of the memory it writes")


def _set_view_to_intermediate(x0: T) -> object:
    t2 = x0.view(-1)
    set_to(t2, x0.mul(x0))
    return (t2,)


def _set_expanded_view_to_expanded_intermediate(x0: T) -> object:
    t1 = x0.mul(x0).expand((2, 2))
    t2 = x0.expand((-1, 3))
    set_to(t2, t1)
    return (t2,)


@pytest.mark.parametrize("program", [_set_view_to_intermediate, _set_expanded_view_to_expanded_intermediate])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_view_set_to_intermediate_returned(
    program: Callable[[T], object], kind: str, compile_fn: CompileFn | None
) -> None:
    # Fuzz seed 24, program 293 (WRONG VALUES before): the returned view was set_() to an intermediate; its storage's
    # root was taken through its old view chain (the input). It stays a view of the input's base, as in eager.
    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn(2, 1, 3)
        return ((pair(2, 1, 3) if kind == "pair" else b0).unbind(2)[0],)

    with torch.no_grad():
        assert_matches_eager(program, make_inputs, compile_fn=compile_fn)


def test_uniform_write_into_expanded_alias_member(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 25, program 121 (and seed 24, 798): a crash; the member is a view of the synthetic base, so the
    # narrowed write is an as_strided of the base (Note [In-Place Ops As Eager Runs Them]).
    def f(x0: T, x1: T) -> object:
        x1.zero_()
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((2, 1, 3))
        return (b0, b0.expand((-1, 3, -1)))

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_to_input_sharing_storage_requiring_grad_under_no_grad(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 25, program 468: a crash ("cannot resize variables that require grad") replaying the set_ as a resize_.
    def f(x0: T, x1: T) -> object:
        set_to(x1, x0)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(2, 3)
        return (b0, b0.diagonal(1, 1, 0))

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_after_set_then_input_metadata_change(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 1000, program 4394 (WRONG VALUES before): the view is of the storage set_() gave the input, so it
    # is not replayed before the epilogue (where the input still has its old storage).
    def f(x0: T, x1: T) -> object:
        set_to(x1, x0)
        t0 = x1.t()
        x1.unsqueeze_(-1)
        return (t0,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(()), torch.randn(())), compile_fn=compile_fn)


def test_data_assigned_from_input_later_set_elsewhere(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 1000, program 8525 (WRONG VALUES before): x1 takes x0's storage by `.data =`, then x0 is set_()
    # to a new tensor; the epilogue read x0 after swapping it instead of x0 as it came.
    def f(x0: T, x1: T) -> object:
        t0 = x0.unbind(0)[0]
        x1.data = t0
        t1 = x1.add(x0)
        set_to(x0, t1)
        return (x1,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(1, 1, 3), torch.randn(())), compile_fn=compile_fn)


def test_data_assigned_after_recorded_write_refused_in_training(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 1000, program 4451 (WRONG GRADIENTS before).
    def f(x0: T) -> object:
        x0.copy_(x0)
        t0 = x0.mul(x0)
        x0.data = t0
        return (x0,)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (nonleaf(2, 1, 2).diagonal(1, 0, 2),)

    with torch.enable_grad():
        # (a view written with grad, then assigned a tensor of another layout: refused by name)
        assert_refused(f, make_inputs, compile_fn, "a view with autograd history, a tensor of another size")


def _written_float8_then_read(x0: T) -> T:
    x0.copy_(x0)  # the written input is a Function output that gets no tangent here
    return x0.add(-1.0)


def test_untangented_float8_output_gets_its_class_zero() -> None:
    """Fuzz seed 77200 #156 (Float8Tensor inputs): the written input, a Function output no tangent reached, got a zero
    tangent of zeros in every inner tensor, a scale of 0 among them, and the gradient came out NaN; it gets its
    class's own zeros_like now, as eager's engine would give it."""
    from subclasses.fp8.tensor import example

    def make() -> tuple[object, ...]:
        leaf = example()
        leaf.requires_grad_()
        return (leaf.clone(),)

    with torch.enable_grad():
        assert_matches_eager(_written_float8_then_read, make)
