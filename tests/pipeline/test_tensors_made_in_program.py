"""Tensors the program makes itself (factory results, tensors made to require grad, custom Functions returning their
inputs, containers passed in) written, returned or differentiated; regressions found by the PyTorch-derived corpora
(tests/pipeline/corpus_pytorch2.py, tests/pipeline/corpus_pytorch5.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import subclassaot
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
)

# ---------------------------------------------------------------------------------------------------------------------
# Regressions found by the fifth PyTorch-derived corpus (tests/pipeline/corpus_pytorch5.py): tensors made by a
# factory inside the program and written through a view with grad (SwapRecord.forget_factory_detach), with
# their variants (factories, views, outputs, PairTensor sources, grad modes, called twice) and the detach() refusal
# that still holds next to them; nested PairTensors written with dynamic shapes, whose retraced backward crashed
# (Note [The Flatten Protocol]).
# ---------------------------------------------------------------------------------------------------------------------

T = torch.Tensor

FACTORIES: dict[str, Callable[[], T]] = {
    "zeros": lambda: torch.zeros(2, 2),
    "ones": lambda: torch.ones(2, 2),
    "full": lambda: torch.full((2, 2), 3.0),
    "arange": lambda: torch.arange(4.0).reshape(2, 2),
    "randn_filled": lambda: torch.randn(2, 2).fill_(0.5),
}


@pytest.mark.parametrize("factory", sorted(FACTORIES))
def test_factory_diagonal_copied_with_grad_returns_view(factory: str, compile_fn: CompileFn | None) -> None:
    # test_functionalization.py test_copy_ (corpus fz_copy_same_shape_train): refused as a detach() of an
    # intermediate written with grad, the factory's result being recorded as a detach()
    make = FACTORIES[factory]

    def f(x: T) -> object:
        tmp = make()
        y = tmp.diagonal()
        y.copy_(x)
        return y.add_(x), tmp

    check_with_grad(f, lambda: (leaf(2),), compile_fn)
    check_with_grad(f, lambda: (nonleaf(2),), compile_fn)
    check_no_grad(f, lambda: (leaf(2),), compile_fn)


def test_factory_view_written_with_grad_broadcast(compile_fn: CompileFn | None) -> None:
    # test_copy_ with a one-element source (corpus fz_copy_broadcast_train)
    def f(x: T) -> object:
        tmp = torch.zeros(2, 2)
        y = tmp.diagonal().copy_(x)
        return y.mul_(x), tmp.sum()

    check_with_grad(f, lambda: (leaf(1),), compile_fn)


def test_factory_slice_written_then_only_view_returned(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        tmp = torch.zeros(3, 2)
        v = tmp[1:]
        v.mul_(x)  # zeros times x: the history matters, not the values
        v.add_(x)
        return v

    check_with_grad(f, lambda: (leaf(2, 2),), compile_fn)
    check_with_grad(f, lambda: (nonleaf(2),), compile_fn)


def test_factory_view_written_with_pair_value(compile_fn: CompileFn | None) -> None:
    # the written value a PairTensor: the fresh tensor made from it (new_zeros) is a PairTensor, no factory
    def f(x: T) -> object:
        tmp = x.new_zeros(2, 2)
        y = tmp.diagonal()
        y.copy_(x)
        return y, tmp

    check_with_grad(f, lambda: (pair(2, requires_grad=True),), compile_fn)


def test_factory_view_written_called_twice(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        tmp = torch.ones(4)
        y = tmp.view(2, 2)[0]
        y.mul_(x)
        return y

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (leaf(2),), compile_fn=compile_fn, calls=3)


def test_detach_of_fresh_tensor_written_with_grad_still_refused(compile_fn: CompileFn | None) -> None:
    # next to the rule: an explicit detach() of a tensor the program made is still one (Note [Outputs Over Another
    # Storage])
    def f(x: T) -> object:
        tmp = x.new_zeros(2, 2).detach()
        y = tmp.diagonal()
        y.copy_(x)
        return y

    refused_with_grad(f, lambda: (leaf(2),), compile_fn, match=r"is a detach\(\) of an intermediate")


def two(*shape: int) -> T:
    t = torch.randn(shape)
    return TwoTensor(t, t.clone()).requires_grad_(True)  # type: ignore[no-untyped-call]


def like_programs(like: Callable[[T], T]) -> tuple[Callable[[T], object], ...]:
    def written(x: T) -> object:
        z = like(x)
        z.add_(x * 2)
        return z

    def scattered(x: T) -> object:
        z = like(x)
        return z.scatter_add_(0, torch.tensor([1, 0, 3, 2]), x * 3), z[1:]

    def view_written(x: T) -> object:
        z = like(x)
        z[:2].mul_(x[2:])
        return z.view(2, 2), x

    return written, scattered, view_written


@pytest.mark.parametrize("make", [two, lambda n: pair(n, requires_grad=True)], ids=["two", "pair"])
def test_zeros_like_of_subclass_written_with_grad(make: Callable[[int], T], compile_fn: CompileFn | None) -> None:
    # corpus ti_two_gather_scatter_train (test_torchinductor.py test_gather_scatter): `torch.zeros_like(x)` of a
    # subclass that requires grad, written with a value that requires grad and returned, was refused as a detach() of
    # an intermediate: make_variable's shallow copy of the result dispatched a detach() of the wrapper (and of its
    # inner tensors), recorded as the program's (SwapRecord.forget_factory_detach)
    for f in like_programs(torch.zeros_like):
        check_with_grad(f, lambda: (make(4),), compile_fn)


LIKE_FACTORIES: dict[str, Callable[[T], T]] = {
    "ones_like": torch.ones_like,
    "full_like": lambda x: torch.full_like(x, 2.0),
    "empty_like_filled": lambda x: torch.empty_like(x).fill_(0.5),
}


@pytest.mark.parametrize("factory", sorted(LIKE_FACTORIES))
def test_like_factory_of_subclass_written_with_grad(factory: str, compile_fn: CompileFn | None) -> None:
    # the other `*_like` factories (make_variable's shallow copy too)
    for f in like_programs(LIKE_FACTORIES[factory]):
        check_with_grad(f, lambda: (two(4),), compile_fn)


def test_detach_of_like_factory_written_with_grad_still_refused(compile_fn: CompileFn | None) -> None:
    # next to the rule above: the program's own detach() of a `*_like` factory's result is still one
    def f(x: T) -> object:
        z = torch.zeros_like(x).detach()
        z.add_(x * 2)
        return z

    refused_with_grad(f, lambda: (two(4),), compile_fn, match=r"is a detach\(\) of an intermediate")


# ---------------------------------------------------------------------------------------------------------------
# See Note [The Flatten Protocol]: a PairTensor of PairTensors, written, with dynamic shapes, whose
# backward is retraced (an output without tangent: the written input's new value) crashed in make_fx ("not
# tracked with proxy")


def _nested(requires_grad: bool) -> T:
    inner = PairTensor(torch.randn(3, 2), torch.randn(3, 2))
    outer = PairTensor(inner, PairTensor(torch.randn(3, 2), torch.randn(3, 2)), requires_grad=requires_grad)
    with torch.enable_grad():
        return outer.clone() if requires_grad else outer


def _nested_mul(x: T) -> object:
    x.mul_(2)
    return x + 1


def _nested_unsqueeze_mul(x: T) -> object:
    x.unsqueeze_(0)
    x.mul_(2)
    return x.squeeze(0) + 1


def _nested_mul_view_out(x: T) -> object:
    x.mul_(2)
    return x[0], x.sum()


NESTED_PROGRAMS = {"mul": _nested_mul, "unsqueeze_mul": _nested_unsqueeze_mul, "mul_view_out": _nested_mul_view_out}


@pytest.mark.parametrize("program", sorted(NESTED_PROGRAMS))
@pytest.mark.parametrize("dynamic", [True, False])
def test_nested_pair_written_with_grad(program: str, dynamic: bool, compile_fn: CompileFn | None) -> None:
    # corpus pair_nested_mul_write_train_dynamic / pair_nested_unsqueeze_write_train_dynamic (test_subclasses.py,
    # a TwoTensor of TwoTensors): the backward raised where eager's runs
    f = NESTED_PROGRAMS[program]
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (_nested(True),), compile_fn=compile_fn, compile_kwargs={"dynamic": dynamic})
    with torch.no_grad():
        assert_matches_eager(f, lambda: (_nested(True),), compile_fn=compile_fn, compile_kwargs={"dynamic": dynamic})
    assert_matches_eager(f, lambda: (_nested(False),), compile_fn=compile_fn, compile_kwargs={"dynamic": dynamic})


def test_flat_pair_written_with_grad_dynamic(compile_fn: CompileFn | None) -> None:
    # next to the rule: the same programs on a PairTensor of plain tensors, and on plain tensors
    for f in NESTED_PROGRAMS.values():
        with torch.enable_grad():
            assert_matches_eager(
                f, lambda: (pair_nonleaf(3, 2),), compile_fn=compile_fn, compile_kwargs={"dynamic": True}
            )
            assert_matches_eager(f, lambda: (nonleaf(3, 2),), compile_fn=compile_fn, compile_kwargs={"dynamic": True})


# ---------------------------------------------------------------------------------------------------------------
# See Note [Tangent Retrace]: with dynamic shapes on inductor, `compiled(x).sum().backward()` (an expanded
# tangent, strides 0) failed inductor's assert_size_stride; found next to the nested-PairTensor corpus cases


def _times_two(x: T) -> object:
    return x * 2


def _transposed_times_two(x: T) -> object:
    return (x * 2).t()


def _written_returned(x: T) -> object:
    x.mul_(2)
    return x.t()


TANGENT_PROGRAMS = {"times_two": _times_two, "transposed": _transposed_times_two, "written": _written_returned}
TANGENT_INPUTS: dict[str, Callable[[], T]] = {
    "plain": lambda: nonleaf(3, 2),
    "pair": lambda: pair_nonleaf(3, 2),
    "nested": lambda: _nested(True),
}


@pytest.mark.parametrize("kind", sorted(TANGENT_INPUTS))
@pytest.mark.parametrize("program", sorted(TANGENT_PROGRAMS))
def test_expanded_tangent_dynamic_inductor(program: str, kind: str, compile_fn: CompileFn | None) -> None:
    f, make = TANGENT_PROGRAMS[program], TANGENT_INPUTS[kind]
    do_compile = compile_fn if compile_fn is not None else subclassaot.compile
    compiled = do_compile(f, backend="inductor", dynamic=True)
    for shape_seed in (0, 1):  # called twice: the second call reuses the compiled backward
        grads = []
        for run in (f, compiled):
            torch.manual_seed(shape_seed)
            with torch.enable_grad():
                x = make()
                x.retain_grad()
                out = run(x)
                assert isinstance(out, torch.Tensor)
                out.sum().backward()  # type: ignore[no-untyped-call]
            assert x.grad is not None
            grads.append(x.grad)
        torch.testing.assert_close(grads[1], grads[0])


# ---------------------------------------------------------------------------------------------------------------------
# Regressions found by the second PyTorch-derived corpus (tests/pipeline/corpus_pytorch2.py), each from its shrunk
# program: refusals where the compiled program diverged from eager, and parity where the neighbouring program runs.
# ---------------------------------------------------------------------------------------------------------------------


def _ones_leaf_added(x: T) -> object:
    t = torch.ones(3, requires_grad=True)
    return x + t


def test_tensor_made_requiring_grad_without_grad_inputs_off_the_eager_backend_is_refused(
    compile_fn: CompileFn | None,
) -> None:
    # test_aotdispatch.py test_set__and_data_mutation_bad (inference): eager's output of a value computed from
    # `torch.ones(..., requires_grad=True)` requires grad and has a grad_fn (AddBackward0 to the new leaf); only the
    # eager backend's native path records that history (Note [Training Without A Function]): the default backend
    # refuses, naming the factory
    with torch.enable_grad():
        assert_refused(_ones_leaf_added, lambda: (torch.randn(3),), compile_fn, match=r"here torch\.ones\(")


def _zeros_like_beside(x: T) -> object:
    return torch.zeros_like(x, requires_grad=True), x * 2


def _view_and_leaf(x: T) -> object:
    t = torch.full(x.shape, 0.5, requires_grad=True)
    return t.view(-1), t


def _in_place_on_computed(x: T) -> object:
    u = torch.ones(x.shape, requires_grad=True) * 2
    u.add_(x)
    return u


def _made_under_no_grad(x: T) -> object:
    with torch.no_grad():
        t = torch.ones(x.shape, requires_grad=True)
    return x * t, t


# issue #27 (hfactory, session 59; was refused: "makes a tensor that requires grad itself"): a call with grad on, no
# input requiring grad, making its own leaf by a factory's requires_grad=True. Eager's is a new AccumulateGrad leaf, the
# results computed from it carry history to it, and its .grad fills where the caller holds it; on the eager backend the
# native path makes it (as the requires_grad_() form), called with grad on
_OWN_LEAF_PROGRAMS: dict[str, Callable[[T], object]] = {
    "zeros_like": lambda x: torch.zeros_like(x, requires_grad=True),
    "zeros_like_beside": _zeros_like_beside,
    "input_beside": lambda x: (torch.ones(x.shape, requires_grad=True), x),
    "added": lambda x: x + torch.ones(x.shape, requires_grad=True),
    "summed_product": lambda x: (torch.ones(x.shape, requires_grad=True) * x).sum(),
    "tensor": lambda x: torch.tensor([1.0, 2.0], requires_grad=True) * 3,
    "view": lambda x: torch.zeros(x.shape, requires_grad=True).view(-1),
    "view_and_leaf": _view_and_leaf,
    "clone": lambda x: torch.ones(x.shape, requires_grad=True).clone(),
    "in_place_on_computed": _in_place_on_computed,
    "made_under_no_grad": _made_under_no_grad,
    "unused": lambda x: (torch.ones(3, requires_grad=True), x * 2)[1],
    "detached": lambda x: x * torch.ones(x.shape, requires_grad=True).detach(),
}


@pytest.mark.parametrize("name", list(_OWN_LEAF_PROGRAMS))
def test_tensor_made_requiring_grad_without_grad_inputs(compile_fn: CompileFn | None, name: str) -> None:
    with torch.enable_grad():
        assert_matches_eager(_OWN_LEAF_PROGRAMS[name], lambda: (torch.randn(2, 3),), compile_fn=compile_fn)


@pytest.mark.parametrize("name", ["zeros_like", "zeros_like_beside", "input_beside", "unused", "detached"])
def test_tensor_made_requiring_grad_without_grad_inputs_inductor(compile_fn: CompileFn | None, name: str) -> None:
    # as above, off the eager backend: where the caller sees the new leaf by its flag alone (returned as itself) or not
    # at all, the factory's flag is held back as the requires_grad_() form's is and the output given it after the call
    with torch.enable_grad():
        assert_matches_eager(
            _OWN_LEAF_PROGRAMS[name], lambda: (torch.randn(2, 3),), backend="inductor", compile_fn=compile_fn
        )


def test_tensor_made_requiring_grad_returned_beside_grad_input_inductor(compile_fn: CompileFn | None) -> None:
    # the flag held back in a training compile too (the Function path): the leaf returned as itself beside a result
    # with history to an input that requires grad
    with torch.enable_grad():
        assert_matches_eager(_zeros_like_beside, lambda: (leaf(2, 3),), backend="inductor", compile_fn=compile_fn)


def test_tensor_made_requiring_grad_leaf_grad_through_returned_view(compile_fn: CompileFn | None) -> None:
    # eager's leaf, reached through the returned view's `._base`, gets its .grad from the backward through the view
    def f(x: T) -> object:
        return torch.ones(x.shape, requires_grad=True).t(), x

    do_compile = compile_fn if compile_fn is not None else subclassaot.compile
    grads = []
    for run in (f, do_compile(f, backend="eager")):
        with torch.enable_grad():
            view, _ = cast(tuple[T, T], run(torch.randn(2, 3)))
            (view * torch.arange(6.0).view(3, 2)).sum().backward()  # type: ignore[no-untyped-call]
        assert view._base is not None and view._base.is_leaf
        grads.append(view._base.grad)
    torch.testing.assert_close(grads[1], grads[0])


_GRAD_FACTORIES: dict[str, Callable[[T], object]] = {
    "zeros": lambda x: torch.zeros(x.shape, requires_grad=True),
    "ones_beside": lambda x: (torch.ones(2, 3, requires_grad=True), x + 1),
    "tensor": lambda x: torch.tensor([1.0, 2.0], requires_grad=True),
    "zeros_like": lambda x: torch.zeros_like(x, requires_grad=True),
}


@pytest.mark.parametrize("name", list(_GRAD_FACTORIES))
def test_tensor_made_requiring_grad_under_no_grad(compile_fn: CompileFn | None, name: str) -> None:
    # issue #27 (hwrong3, session 58; was a wrong result): under no_grad, `torch.zeros(..., requires_grad=True)` is
    # eager's new leaf, which requires grad; the compiled call's output required none. The run takes the factory as
    # the factory's result given requires_grad_(), whose rules give the output (or its `._base`) the flag
    with torch.no_grad():
        assert_matches_eager(_GRAD_FACTORIES[name], lambda: (torch.randn(2, 3),), compile_fn=compile_fn)


_LEAF_FACTORIES: dict[str, Callable[[T], T]] = {
    "zeros": lambda x: torch.zeros(x.shape, requires_grad=True),
    "ones": lambda x: torch.ones(x.shape, requires_grad=True),
    "randn": lambda x: torch.randn(x.shape, requires_grad=True),
    "full": lambda x: torch.full(x.shape, 0.5, requires_grad=True),
}
_LEAF_VIEWS: dict[str, Callable[[T], T]] = {
    "view": lambda t: t.view(-1),
    "t": lambda t: t.t(),
    "select": lambda t: t.select(0, 1),
}
_BESIDE: dict[str, Callable[[T, T], object]] = {
    "input": lambda v, x0: (v, x0),
    "computed": lambda v, x0: (v, x0 * 2),
    "nothing": lambda v, x0: v,
}


@pytest.mark.parametrize("beside", list(_BESIDE))
@pytest.mark.parametrize("view", list(_LEAF_VIEWS))
@pytest.mark.parametrize("factory", list(_LEAF_FACTORIES))
def test_view_of_tensor_made_requiring_grad_in_training(
    compile_fn: CompileFn | None, factory: str, view: str, beside: str
) -> None:
    # issue #27 (hwrong6, session 58; was a wrong result): with grad on, `torch.zeros(..., requires_grad=True)` is
    # eager's new leaf (an AccumulateGrad) and its view returned has history to it (ViewBackward0); the compiled call's
    # output required no grad, had no grad_fn, and an input returned beside it got another gradient. The factory now
    # runs as its result given requires_grad_() with grad on too: the eager backend's native path makes eager's leaf
    def f(x0: T, x1: T) -> object:
        return _BESIDE[beside](_LEAF_VIEWS[view](_LEAF_FACTORIES[factory](x1)), x0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (leaf(2, 3), leaf(2, 3)), compile_fn=compile_fn)


@pytest.mark.parametrize("view", list(_LEAF_VIEWS))
def test_view_of_tensor_made_requiring_grad_filled_under_no_grad_is_refused(
    compile_fn: CompileFn | None, view: str
) -> None:
    # issue #27 (hwrong6): as above, the leaf written under no_grad first (empty + fill_): was a wrong result as above;
    # the native path cannot record eager's graph over the no_grad write, and the refusal names the factory
    def f(x0: T, x1: T) -> object:
        t0 = torch.empty(x1.shape, requires_grad=True)
        with torch.no_grad():
            t0.fill_(0.5)
        return _LEAF_VIEWS[view](t0), x0

    with torch.enable_grad():
        assert_refused(
            f, lambda: (leaf(2, 3), leaf(2, 3)), compile_fn, match=r"torch\.empty\(\.\.\., requires_grad=True\)"
        )


def test_view_of_tensor_made_requiring_grad_off_the_eager_backend_is_refused(compile_fn: CompileFn | None) -> None:
    # issue #27 (hwrong6): only the eager backend's native path makes the new leaf (Note [Training Without A
    # Function]); the default backend's compile refuses, naming the factory, where it was a wrong result
    def f(x0: T, x1: T) -> object:
        return torch.zeros(x1.shape, requires_grad=True).view(-1), x0

    with torch.enable_grad():
        assert_refused(f, lambda: (leaf(2, 3), leaf(2, 3)), compile_fn, match=r"here torch\.zeros\(.*the eager backend")


def test_set_onto_tensor_made_requiring_grad_is_refused(compile_fn: CompileFn | None) -> None:
    def f(a: T) -> object:
        a_view = a.view(-1)
        tmp = torch.ones(3, 3, requires_grad=True)
        with torch.no_grad():
            set_to(a, tmp)
        a_view.mul_(2)
        return a + tmp

    with torch.enable_grad():
        assert_refused(f, lambda: (torch.randn(3, 3),), compile_fn, match=r"torch\.ones\(\.\.\., requires_grad=True\)")


def test_tensor_made_requiring_grad_runs_in_training_and_under_no_grad(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        t = torch.ones(3, requires_grad=True)
        return x * t

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(3),), compile_fn=compile_fn)
    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(3),), compile_fn=compile_fn)


class _TransposesSavedInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, a: T, b: T) -> tuple[T, T]:
        ctx.save_for_backward(b)
        return a.clone(), b.clone()

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, ga: T, gb: T) -> tuple[T, T]:
        (b,) = ctx.saved_tensors  # type: ignore[attr-defined]
        b.transpose_(1, 0)
        return ga.clone(), gb.clone()


def test_metadata_mutation_in_the_backward_matches_eager(compile_fn: CompileFn | None) -> None:
    # test_aotdispatch.py test_backward_mutation_metadata: the backward's transpose_ of the saved input was lost
    # (args[1] kept its strides after the backward); now replayed (Note [Custom Functions]).
    def f(a: T, b: T) -> object:
        a_, b_ = _TransposesSavedInBackward.apply(a, b)  # type: ignore[no-untyped-call]
        return a_ * b_

    def make_inputs() -> tuple[T, T]:
        return torch.randn(3, 3, requires_grad=True), torch.randn(3, 3)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


class _Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        return x

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        return g * 0.5


class _Flat(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        return x.view(-1)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        return g.view(2, 2)


def _identity(x: T) -> object:
    return _Identity.apply(x)  # type: ignore[no-untyped-call]


def _flat(x: T) -> object:
    return _Flat.apply(x)  # type: ignore[no-untyped-call]


def test_function_returning_its_pair_input_matches_eager(compile_fn: CompileFn | None) -> None:
    # test_aotdispatch.py test_input_output_aliase_custom_autograd_function on a PairTensor: eager's output is an
    # autograd view of the input wrapper; the compiled Function replays that view on the input (Note [Custom
    # Functions]; refused before, more variants in test_pair_function_alias.py).
    with torch.enable_grad():
        for fn in (_identity, _flat):
            assert_matches_eager(fn, lambda: (pair(2, 2, requires_grad=True),), compile_fn=compile_fn)
            assert_matches_eager(fn, lambda: (pair_nonleaf(2, 2),), compile_fn=compile_fn)


def test_function_returning_its_plain_input_or_pair_without_grad_runs(compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        for fn in (_identity, _flat):
            assert_matches_eager(fn, lambda: (torch.randn(2, 2, requires_grad=True),), compile_fn=compile_fn)
            assert_matches_eager(fn, lambda: (nonleaf(2, 2),), compile_fn=compile_fn)
            assert_matches_eager(fn, lambda: (pair(2, 2),), compile_fn=compile_fn)


def test_new_value_stored_into_an_input_dict_is_refused(compile_fn: CompileFn | None) -> None:
    # test_aotdispatch.py TestPythonKey test_nnc_passthrough: eager's `x["a"] = x["a"] * 2` changes the caller's
    # dict; the compiled program ran on a dict rebuilt from the leaves, so the caller's kept its old entry.
    def f(d: dict[str, T]) -> object:
        d["a"] = d["a"] * 2
        return d

    def g(d: dict[str, T]) -> object:
        d["c"] = d["a"] + 1
        return d["c"]

    def make_inputs() -> tuple[dict[str, T]]:
        return ({"a": torch.randn(3), "b": torch.randn(3)},)

    assert_refused(f, make_inputs, compile_fn, match=r"args\[0\]\['a'\]: the program stores a new value")
    assert_refused(g, make_inputs, compile_fn, match="adds, removes or replaces entries")


def test_input_dict_written_in_place_runs(compile_fn: CompileFn | None) -> None:
    def f(d: dict[str, T]) -> object:
        d["a"].mul_(2)
        return d["a"] + d["b"]

    assert_matches_eager(f, lambda: ({"a": torch.randn(3), "b": torch.randn(3)},), compile_fn=compile_fn)


def test_data_assigned_from_another_pair_runs_with_dynamic_shapes(compile_fn: CompileFn | None) -> None:
    # `x.data = y * 2` on PairTensors under dynamic=True: the assignment's size was y's own symbol, which tracing
    # then tied to x's, so the guards bound only x's and the epilogue raised NameError evaluating it.
    def f(x: T, y: T) -> object:
        x.data = y * 2
        return x + 1

    assert_matches_eager(f, lambda: (pair(3), pair(3)), compile_fn=compile_fn, compile_kwargs={"dynamic": True})
    with torch.enable_grad():
        assert_matches_eager(
            f, lambda: (pair(3, requires_grad=True), pair(3)), compile_fn=compile_fn, compile_kwargs={"dynamic": True}
        )


# ---------------------------------------------------------------------------------------------------------------------
# torch.tensor(...) made in the program: lift_fresh is declared aliasing, yet eager's result is no view (`._base`
# None); it was recorded as a view of a constant whose storage the functional run does not hold (refused as "a view of
# an intermediate moved to another storage"). torchao's optimizers build their state this way under torch.compile.


def literal_returned(x: T) -> object:
    return x + 1, torch.tensor((1.0, 2.0))


def literal_in_pair(x: T) -> object:
    return PairTensor(x, torch.tensor((1.0, 2.0)))


def literal_viewed_and_written(x: T) -> object:
    t = torch.tensor((1.0, 2.0))
    t[0:1].mul_(x[0])
    return t, t[1:]


@pytest.mark.parametrize("program", [literal_returned, literal_in_pair, literal_viewed_and_written])
def test_tensor_literal_made_in_program_matches_eager(
    program: Callable[[T], object], compile_fn: CompileFn | None
) -> None:
    check_no_grad(program, lambda: (leaf(2),), compile_fn)
    check_with_grad(program, lambda: (leaf(2),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# hcorpus17 (test_misc.py test_tensor_share_memory, test_tensor_setattr_getset_descriptor): share_memory_() of a tensor
# the program made was refused as a set_ with a storage of no input's, `x.real = 10` as a use of a tensor of shape ()
# that is not an argument (the setter lifts a real scalar below Python); a Python attribute set on an output was
# dropped silently.


def shared_fresh(x: T) -> object:
    h = torch.zeros(2, x.size(0), 4).share_memory_()  # type: ignore[no-untyped-call]
    return x + h.sum(), h[0]


def set_real(x: T) -> object:
    x.real = 10  # type: ignore[assignment]
    return x + 1


def set_imag_of_view(x: T) -> object:
    y = x[1:]
    y.imag = 2.5  # type: ignore[assignment]
    return y * 2


def complex_nonleaf() -> tuple[T]:
    return (torch.randn(5, dtype=torch.cfloat, requires_grad=True).clone(),)


def test_share_memory_of_a_made_tensor_and_real_imag_setters_match_eager(compile_fn: CompileFn | None) -> None:
    check_no_grad(shared_fresh, lambda: (leaf(3),), compile_fn)
    check_with_grad(shared_fresh, lambda: (leaf(3),), compile_fn)
    check_no_grad(set_real, lambda: (torch.ones(5, dtype=torch.cfloat),), compile_fn)
    with torch.enable_grad():
        assert_matches_eager(set_imag_of_view, complex_nonleaf, compile_fn=compile_fn)


def test_share_memory_of_an_input_and_attributes_on_outputs_are_refused(compile_fn: CompileFn | None) -> None:
    def shared_input(x: T) -> object:
        x.share_memory_()  # type: ignore[no-untyped-call]
        return x + 1

    def flagged_output(x: T) -> object:
        y = x + 1
        y.flag = 1  # type: ignore[attr-defined]
        return x * 2, y

    assert_refused(shared_input, lambda: (leaf(3),), compile_fn, match="calls share_memory_\\(\\) on an argument")
    for make in (lambda: (leaf(3),), lambda: (pair(3),)):
        assert_refused(flagged_output, make, compile_fn, match=r"output\[1\]: the program sets Python attributes")
