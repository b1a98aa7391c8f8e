"""Regressions found by the second PyTorch-derived corpus (tests/pipeline/corpus_pytorch2.py), each from its shrunk
program: refusals where the compiled program diverged from eager, and parity where the neighbouring program runs."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import assert_refused, nonleaf, pair, pair_nonleaf

T = torch.Tensor


def test_tensor_made_requiring_grad_without_grad_inputs_is_refused(compile_fn: CompileFn | None) -> None:
    # test_aotdispatch.py test_set__and_data_mutation_bad (inference): eager's output of a value computed from
    # `torch.ones(..., requires_grad=True)` requires grad and has a grad_fn; the inference graph's had neither.
    def f(x: T) -> object:
        t = torch.ones(3, requires_grad=True)
        return x + t

    with torch.enable_grad():
        assert_refused(f, lambda: (torch.randn(3),), compile_fn, match="makes a tensor that requires grad itself")


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
    # (args[1] kept its strides after the backward); now replayed (Note [Metadata Changed By A Custom Backward]).
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
    # autograd view of the input wrapper; the compiled Function replays that view on the input (Note [Inputs
    # Returned By A Custom Function]; refused before, more variants in test_pair_function_alias.py).
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
