"""Regressions found by the fifth PyTorch-derived corpus (tests/pipeline/corpus_pytorch5.py): tensors made by a
factory inside the program and written through a view with grad (SwapRecord.forget_factory_detach), with
their variants (factories, views, outputs, PairTensor sources, grad modes, called twice) and the detach() refusal
that still holds next to them; nested PairTensors written with dynamic shapes, whose retraced backward crashed
(Note [The Flatten Protocol])."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import subclassaot
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.fuzz_helpers import (
    check_no_grad,
    check_with_grad,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
)

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
    # next to the rule: an explicit detach() of a tensor the program made is still one (Note [Outputs That An Input Was
    # set_() To])
    def f(x: T) -> object:
        tmp = x.new_zeros(2, 2).detach()
        y = tmp.diagonal()
        y.copy_(x)
        return y

    refused_with_grad(f, lambda: (leaf(2),), compile_fn, match=r"is a detach\(\) of an intermediate")


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
# See Note [Symbolic Tangent Strides]: with dynamic shapes on inductor, `compiled(x).sum().backward()` (an expanded
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
