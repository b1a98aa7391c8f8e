"""Outputs' aliasing and metadata, in training and inference: views of inputs and intermediates, no_grad views of
inputs that require grad, metadata mutations of inputs that outputs alias.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from subclassaot.tools.parity import write_outputs
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import assert_refused, nonleaf, pair, pair_nonleaf

# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions: one hand-minimized program per distinct bug the fuzzer found (`python -m subclassaot fuzz`).
# Each program was a bug (once a strict xfail naming it); each now matches eager or is refused as eager's rule says.
# ---------------------------------------------------------------------------------------------------------------------

T = torch.Tensor


# ---------------------------------------------------------------------------------------------------------------
# Training (grad mode on)


def test_no_grad_view_of_grad_input_returned(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        with torch.no_grad():
            y = x.view(2)
        return y

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_of_no_grad_view_is_a_view(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        with torch.no_grad():
            t = x.view(3)
        return t.unsqueeze(0)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(3, requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_backward_only_error_raised_at_compile_time(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        x.mul_(x)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_to_own_view_backward_does_not_raise(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        set_to(x, x.view(2))
        return x

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(2),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_to_grad_tensor(compile_fn: CompileFn | None) -> None:
    # Eager's x then requires grad with a set_ backward that raises (Note [Inputs Written In Training]).
    def f(x: T, y: T) -> object:
        set_to(x, y)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2), nonleaf(2))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_to_grad_intermediate_with_view_output_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 10, program 81: the view output would be regenerated from x, which does not require grad.
    def f(x: T, y: T) -> object:
        t = y.add(y)
        v = t.select(0, 0)
        set_to(x, t)
        return v

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(()), nonleaf(3))

    with torch.enable_grad():
        assert_refused(f, make_inputs, compile_fn, "args\\[0\\] does not require grad|set_\\(\\) to a new tensor")

        assert_refused(f, make_inputs, compile_fn, "out shares storage with args\\[0\\], which the program set_")


def test_metadata_mutation_then_data_mutation_grad_shape(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        x.unsqueeze_(0)
        x.mul_(2)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_nonleaf_grad_input_mutation(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        x.add_(1.0)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(2),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_mutated_plain_output_beside_subclass_output_tangents(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        x.add_(1.0)
        return (x, y)

    def make_inputs() -> tuple[object, ...]:
        return (nonleaf(2), pair(2, requires_grad=True))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_input_mutated_by_grad_value(compile_fn: CompileFn | None) -> None:
    # Eager's wrapper then requires grad: the Function returns its new value as a wrapper, copied in at the wrapper
    # level (Note [Inputs Written In Training]).
    def f(x: T, y: T) -> object:
        x.mul_(y)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (pair(2), torch.randn(2, requires_grad=True))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_metadata_op_on_view_of_aliased_nonleaf_grad_input(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        y.view(4).t_()
        return ()

    def make_inputs() -> tuple[object, ...]:
        b = nonleaf(4)
        return (b.detach(), b)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_identity_metadata_op_in_training_breaks_backward(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        x.transpose_(0, 0)
        return y * 2

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2), torch.randn(2, requires_grad=True))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_data_assign_on_unbind_view_of_grad_input(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        t = x.unbind(0)[0]
        t.data = y
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, 2, requires_grad=True), torch.randn(3))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Output aliasing and metadata (inference)


def test_metadata_mutation_of_input_view_output(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t = x.view(4)
        t.unsqueeze_(0)
        return t

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(4),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_view_of_intermediate_is_not_a_view(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        return x.sin().view(2)

    def make_inputs() -> tuple[object, ...]:
        return (pair(2),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_same_object_inputs_metadata_mutation(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        y.unsqueeze_(0)
        return x + 0

    def make_inputs() -> tuple[object, ...]:
        b = torch.randn(3)
        return (b, b)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_set_input_to_intermediate_returns_input_object(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t = x * 2
        set_to(x, t)
        return t

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(3),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_storage_swap_on_input_view_ignored(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        t = x.view(3)
        set_to(t, y)
        return t

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(3), torch.randn(2))

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_detach_output_and_its_view_base(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t = x.detach()
        return (t.t(), t)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, 2),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_intermediate_metadata_mutation_with_view_output(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t = x + 1
        t.unsqueeze_(0)
        return (t.view(4), t)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(4),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_empty_mutated_input_clone_strides(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        x.add_(1)
        return x.clone()

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, 2)[:, 0:0],)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_fresh_output_strides(compile_fn: CompileFn | None) -> None:
    # A size-1 dim: fake tensors give the result contiguous strides, eager keeps (1, 1) (Note [Strides The Kernels
    # Choose]).
    def f(x: T) -> object:
        return x + 1

    def make_inputs() -> tuple[object, ...]:
        return (pair(4, 1).t(),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_view_of_grad_input_under_no_grad(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        return x.view(4, 3)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(3, 4),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_view_output_after_input_resize(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t = x.view(12)
        x.resize_(1)
        return t

    def make_inputs() -> tuple[object, ...]:
        return (pair(3, 4),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_view_of_grad_input_mutated_under_no_grad(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t = x.view(2)
        x.add_(1)
        return t

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, requires_grad=True),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def _view_of_input_set_onto_a_view_of_an_intermediate(x: T) -> object:
    t0 = x.reshape((1,))
    t2 = x.add(t0).select(0, 0)
    set_to(t0, t2)  # t0 is a view of x set_() onto t2's storage: t2's base, not t0, is that storage's root
    return (t0, t2)


def test_view_of_input_set_onto_a_view_of_an_intermediate_keeps_its_base(compile_fn: CompileFn | None) -> None:
    # the output base was taken from the first view over the storage, t0 (shape ()), for t2 (eager: t1, shape (1,))
    for make in (lambda: (torch.randn(()),), lambda: (pair(),)):
        with torch.no_grad():
            assert_matches_eager(_view_of_input_set_onto_a_view_of_an_intermediate, make, compile_fn=compile_fn)


def _views_of_an_intermediate_and_of_its_detach(order: str, view: str) -> Callable[[T], object]:
    def f(x: T) -> object:
        t0 = x.clone()
        t1 = t0.transpose(0, 1) if view == "transpose" else t0.view(-1)
        t3 = t0.detach().expand((2, 3, 2))  # a view of the detach(), not of t0: its `._base` is the detach
        return (t3, t1) if order == "detach first" else (t1, t3)

    return f


@pytest.mark.parametrize("order", ["detach first", "detach last"])
@pytest.mark.parametrize("view", ["transpose", "view"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_views_of_an_intermediate_and_of_its_detach_keep_their_bases(
    order: str, view: str, kind: str, compile_fn: CompileFn | None
) -> None:
    # seed 117200 #4785: the storage's intermediate base was the detach() (the first view's root), so t1, a view of t0
    # with history, came back as a fresh tensor (not a view; `._base` lost)
    def make_inputs() -> tuple[object, ...]:
        b = torch.randn((), requires_grad=True) if kind == "plain" else pair(requires_grad=True)
        return (b.view((1, -1, 1)),)

    f = _views_of_an_intermediate_and_of_its_detach(order, view)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


def _view_of_a_detach_beside_a_view_of_its_source(source: str) -> Callable[[torch.Tensor], tuple[torch.Tensor, ...]]:
    def f(x0: torch.Tensor) -> tuple[torch.Tensor, ...]:
        t1 = x0.max(2)[1] if source == "max indices" else x0 * 2
        t2 = t1[2:2:2] if source == "max indices" else t1[1:]
        t4 = t2.detach().view((-1,))  # `._base` the detach(); t2's `._base` is t1
        return (t4, t2)

    return f


@pytest.mark.parametrize("source", ["max indices", "intermediate"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_a_view_of_a_detach_returned_first_leaves_its_sources_view_on_the_source(
    source: str, kind: str, compile_fn: CompileFn | None
) -> None:
    # seed 119000 #9669 (under no_grad, so no root requires grad): the storage's intermediate base was the detach()
    # (the first output's root), and t2 came back as a view of it where eager's `._base` is t1
    def make_inputs() -> tuple[object, ...]:
        return (torch.randn((2, 3, 3)) if kind == "plain" else pair(2, 3, 3),)

    f = _view_of_a_detach_beside_a_view_of_its_source(source)
    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
