"""set_() on tensor subclass wrappers (Note [Wrapper Storage]): the wrapper's own storage and view-ness
after the call, as eager leaves them. Each program is a shrunk fuzz failure (seeds 20 and 21)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import subclassaot
from subclassaot.errors import UnsupportedError
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import assert_refused

T = torch.Tensor
Program = tuple[Callable[..., object], Callable[[], tuple[object, ...]]]


def pair(*shape: int, requires_grad: bool = False) -> T:
    return PairTensor.from_tensor(torch.randn(shape), requires_grad=requires_grad)


def _set_input_to_input() -> Program:
    def f(x0: T, x1: T) -> object:
        set_to(x1, x0)  # x1's wrapper now shares x0's wrapper storage
        return ()

    return f, lambda: (pair(), pair(2))


def _set_input_to_empty_view() -> Program:
    def f(x0: T, x1: T) -> object:
        set_to(x0, x1)
        return ()

    def make() -> tuple[object, ...]:
        b1 = pair(2, 4, 4)
        return (pair(), b1[0:0:1])

    return f, make


def _set_intermediate_to_input() -> Program:
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(x1)
        set_to(t0, x0)  # a fresh intermediate joins the input's wrapper storage
        return (t0,)

    def make() -> tuple[object, ...]:
        b0 = pair(3, 2)
        return (b0, b0)

    return f, make


def _self_set_of_view() -> Program:
    def f(x0: T) -> object:
        t1 = x0.select(0, -2).select(0, 1)
        set_to(t1, t1)  # still a view of x0 at the wrapper level; its inner tensors are no autograd views
        return (t1,)

    return f, lambda: (pair(3, 4),)


def _self_set_of_view_of_intermediate() -> Program:
    def f(x0: T) -> object:
        t1 = x0.mul(x0).unbind(0)[2]
        set_to(t1, t1)
        return (t1,)

    return f, lambda: (pair(3),)


def _set_view_to_its_transpose() -> Program:
    def f(x0: T) -> object:
        t0 = x0.view((12, -1))
        set_to(t0, t0.t())  # a no_grad view whose own set_ then moves its version: its grad_fn raises, as in eager
        return (t0,)

    return f, lambda: (pair(4, 3, 2, requires_grad=True),)


def _self_set_of_detached_view_of_offset_input() -> Program:
    def f(x0: T) -> object:
        t1 = x0.detach().view((1, 3))
        set_to(t1, t1)
        return (t1,)

    def make() -> tuple[object, ...]:
        with torch.enable_grad():
            return (pair(3, 3, requires_grad=True).unbind(1)[1],)  # a non-leaf input at storage offset 1

    return f, make


INFERENCE = {
    "set_input_to_input": _set_input_to_input,
    "set_input_to_empty_view": _set_input_to_empty_view,
    "set_intermediate_to_input": _set_intermediate_to_input,
    "self_set_of_view": _self_set_of_view,
    "self_set_of_view_of_intermediate": _self_set_of_view_of_intermediate,
    "set_view_to_its_transpose": _set_view_to_its_transpose,
}
TRAINING = {"self_set_of_detached_view_of_offset_input": _self_set_of_detached_view_of_offset_input}


@pytest.mark.parametrize("name", sorted(INFERENCE))
def test_wrapper_set_inference(name: str, compile_fn: CompileFn | None) -> None:
    f, make = INFERENCE[name]()
    with torch.no_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)


@pytest.mark.parametrize("name", sorted(TRAINING))
def test_wrapper_set_training(name: str, compile_fn: CompileFn | None) -> None:
    f, make = TRAINING[name]()
    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)


def test_wrapper_storage_is_shared_after_set() -> None:
    """The direct fact behind the oracle's aliasing check: x1's wrapper storage is x0's after the call."""
    import subclassaot

    f, make = _set_input_to_input()
    x0, x1 = make()
    assert isinstance(x0, torch.Tensor) and isinstance(x1, torch.Tensor)
    with torch.no_grad():
        subclassaot.compile(f)(x0, x1)
    assert x1.untyped_storage()._cdata == x0.untyped_storage()._cdata
    assert isinstance(x0, PairTensor) and isinstance(x1, PairTensor)
    assert x1.shape == x0.shape and x1.a.untyped_storage()._cdata == x0.a.untyped_storage()._cdata


def data_of_another_dtype(x: torch.Tensor) -> object:
    _, indices = x.max(0)
    indices.data = x
    return (indices,)


def test_data_assignment_of_another_dtype_to_a_subclass_refused() -> None:
    """Eager's wrapper takes the assigned tensor's dtype; the compiled output kept the traced one (fuzz seed 0,
    program 170: a PairTensor's max(dim) indices assigned its float values, DIVERGED)."""
    out = data_of_another_dtype(PairTensor.from_tensor(torch.randn(3)))
    assert isinstance(out, tuple) and out[0].dtype == torch.float32
    with pytest.raises(UnsupportedError, match="`.data =` of a PairTensor of dtype torch.int64"):
        subclassaot.compile(data_of_another_dtype)(PairTensor.from_tensor(torch.randn(3)))


def _set_of_a_view_then_split_under_no_grad(x0: T) -> tuple[T]:
    t0 = x0.transpose(0, 1)
    set_to(t0, x0)
    with torch.no_grad():
        set_to(t0, x0)
        _, t2 = t0.split_with_sizes([0, 3], 1)
    return (t2,)


def test_a_subclass_view_of_an_input_through_a_set_view_is_refused() -> None:
    """Eager's output is a wrapper view of the input (and requires grad through it); the chain (a view set_() to the
    input, then a multi-output view under no_grad) has no replay, and rebuilt from its inner tensors the output was
    no view and required no grad (fuzz --subclass subclasses.pair:example, seed 67000, program 9485: DIVERGED)."""

    def make() -> tuple[T]:
        return (pair(2, 3, requires_grad=True).clone(),)

    with torch.enable_grad():
        (eager,) = _set_of_a_view_then_split_under_no_grad(*make())
        assert eager._is_view() and eager.requires_grad
        rule = r"could not be a view of it \(Note \[Output Regeneration\]\)"
        with pytest.raises(UnsupportedError, match=rule):
            subclassaot.compile(_set_of_a_view_then_split_under_no_grad)(*make())


# ---------------------------------------------------------------------------------------------------------------------
# set_() of a nested subclass (a TwoTensor of TwoTensors): eager repeats the wrapper's set_ on each inner wrapper, which
# takes the source's inner wrapper's metadata and wrapper storage (and later in-place view ops relay it); the compiled
# call set the dense leaves and the outer wrapper only, so its inner wrappers kept their size, strides and storage
# (fuzz seed 121002 #4210, #4387, #7737, #1990, #9556: DIVERGED `args[#].a after the call: shape`). Now the inner
# wrappers take their first leaf's metadata and the wrapper storage they share in the run (Note [Wrapper Storage]).
# ---------------------------------------------------------------------------------------------------------------------


def nested(*shape: int) -> T:
    t = torch.randn(shape)
    return TwoTensor(TwoTensor(t, t * 2), TwoTensor(-t, t + 1))  # type: ignore[no-untyped-call]


def _nested_set_to_input_of_another_size(x0: T, x1: T) -> object:
    set_to(x1, x0)
    return (x1,)


def _nested_set_to_a_view_of_its_base(x0: T, x1: T) -> object:
    set_to(x0, x1)
    return (x1,)


def _nested_self_set_then_transposed(x0: T, x1: T) -> object:
    set_to(x0, x0)
    x0.t_()
    return (x1,)


def _nested_unsqueezed_then_self_set(x0: T, x1: T) -> object:
    x1.unsqueeze_(-1)
    set_to(x1, x1)
    return (x0,)


def _nested_intermediate_set_to_input(x0: T, x1: T) -> object:
    t = x1.clone()
    set_to(t, x0)  # eager's t.a is on x0.a's wrapper storage
    return (t,)


def _nested_view_of_input_set_to_input(x0: T, x1: T) -> object:
    t = x1.t()
    set_to(t, x0)
    return (t, x1)


def _nested_set_then_viewed(x0: T, x1: T) -> object:
    set_to(x1, x0)
    return (x1.view(-1, 1), x1[0])  # views of x1 after: their inner wrappers on x0's inner wrapper storages


def _nested_set_to_a_computed_tensor(x0: T, x1: T) -> object:
    set_to(x1, x0 * 2)  # a wrapper storage the call made
    return (x1,)


def _nested_set_to_a_computed_tensor_returned(x0: T, x1: T) -> object:
    # fuzz seed 121008 #2081 (`t0 = x1.mul(x0); x1.set_(t0); return (t0,)`, x0 and x1 one nested TwoTensor):
    # eager's t0.a is on the wrapper storage x1.a took; ours on its own ("args[1].a and output[0].a: unrelated")
    t0 = x1.mul(x0)
    set_to(x1, t0)
    return (t0,)


def _nested_set_to_a_computed_tensor_viewed(x0: T, x1: T) -> object:
    t0 = x1 * 2
    before = t0[1:]  # a view taken before the set_() and one after: their inner wrappers on that storage too
    set_to(x1, t0)
    return (before, t0.view(-1, 1), x0)


def _two_views_of_nested() -> tuple[object, ...]:
    b0 = nested(2)
    return (b0.select(0, 0), b0.view((2, 1)).t())


def _one_nested_twice() -> tuple[object, ...]:
    b0 = nested()
    return (b0, b0)


NESTED_SETS: dict[str, Program] = {
    "set_to_input_of_another_size": (_nested_set_to_input_of_another_size, lambda: (nested(), nested(3))),
    "set_to_a_view_of_its_base": (_nested_set_to_a_view_of_its_base, _two_views_of_nested),
    "self_set_then_transposed": (_nested_self_set_then_transposed, lambda: (nested(4, 1), nested(2))),
    "unsqueezed_then_self_set": (_nested_unsqueezed_then_self_set, lambda: (nested(), nested())),
    "unsqueezed_then_self_set_one_input": (_nested_unsqueezed_then_self_set, _one_nested_twice),
    "intermediate_set_to_input": (_nested_intermediate_set_to_input, lambda: (nested(3), nested(3))),
    "view_of_input_set_to_input": (_nested_view_of_input_set_to_input, lambda: (nested(2, 3), nested(3, 2))),
    "set_then_viewed": (_nested_set_then_viewed, lambda: (nested(3), nested(2))),
    "set_to_a_computed_tensor": (_nested_set_to_a_computed_tensor, lambda: (nested(3), nested(2))),
    "set_to_a_computed_tensor_returned": (_nested_set_to_a_computed_tensor_returned, _one_nested_twice),
    "set_to_a_computed_tensor_viewed": (_nested_set_to_a_computed_tensor_viewed, lambda: (nested(3), nested(2))),
}


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("name", sorted(NESTED_SETS))
def test_nested_subclass_set_matches_eager(name: str, grad: bool, compile_fn: CompileFn | None) -> None:
    """The inner wrappers' size, strides and wrapper storages after the call (inputs and outputs) are eager's."""
    f, make = NESTED_SETS[name]
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make, compile_fn=compile_fn)


def _nested_set_to_a_plain_tensor(x0: T) -> object:
    set_to(x0, torch.randn(3))
    return (x0,)


def test_nested_subclass_set_to_a_plain_tensor_refused(compile_fn: CompileFn | None) -> None:
    # eager's inner wrappers end on the plain tensor's own storage, which the runtime gives no inner wrapper
    with torch.no_grad():
        assert_refused(
            _nested_set_to_a_plain_tensor,
            lambda: (nested(2),),
            compile_fn,
            r"set_\(\) this nested tensor subclass .*on a plain tensor's storage.*Note \[Wrapper Storage\]",
        )


def test_nested_subclass_set_to_itself_matches_eager(compile_fn: CompileFn | None) -> None:
    """A set_() that leaves the inner wrappers as they came."""

    def f(x0: T) -> object:
        set_to(x0, x0)
        return (x0 * 2,)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (nested(2, 3),), compile_fn=compile_fn)
