"""Fuzz regressions of helper l45b: a returned subclass input rebuilt without its in-place view op (seed 45000 #3277)
and a no_grad view of an intermediate with history moved by `.data =` (seed 46000 #590); each program is a shrunk
fuzz program (seed and index in the test's name)."""

from __future__ import annotations

import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, pair, refused_with_grad

T = torch.Tensor


def _two_views_of_pair_nonleaf() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = pair(3, 1, requires_grad=True).clone()
        return (b0.as_strided((), (), 0), b0.transpose(1, 0))


def test_seed45000_3277_returned_input_unsqueeze_then_other_input_t(compile_fn: CompileFn | None) -> None:
    # eager's backward rebuilds x1's history from view functions without its unsqueeze_() and raises "invalid
    # gradient ... got [1, 3, 1] but expected shape compatible with [1, 3]" (Note [Stale View Functions])
    def f(x0: T, x1: T) -> object:
        x1.unsqueeze_(2)
        x0.t_()
        return (x1,)

    rule = r"another view of the same tensor that it does not return.*Note \[Stale View Functions\]"
    refused_with_grad(f, _two_views_of_pair_nonleaf, compile_fn, rule)


def test_seed45000_3277_variant_own_op_last_supported(compile_fn: CompileFn | None) -> None:
    # the returned input's own in-place view op comes last: nothing rebuilds its history, no refusal
    def f(x0: T, x1: T) -> object:
        x0.t_()
        x1.unsqueeze_(2)
        return (x1,)

    check_with_grad(f, _two_views_of_pair_nonleaf, compile_fn)


def _twice_nonleaf() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = torch.randn(4, 2, requires_grad=True).clone()
        return (b0, b0)


def test_seed46000_590_no_grad_view_of_intermediate_with_history_assigned_data(compile_fn: CompileFn | None) -> None:
    # eager's t1._base is t0 (an intermediate with history, on its own storage); t1 lives on x0's storage
    def f(x0: T, x1: T) -> object:
        t0 = x1.sum(1)
        with torch.no_grad():
            t1 = t0.as_strided((1,), (0,), 2)
        t1.data = x0
        return (t1,)

    refused_with_grad(f, _twice_nonleaf, compile_fn, r"intermediate with autograd history .*Views Set Onto Another")


def test_seed46000_590_variant_diagonal(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        with torch.no_grad():
            t1 = t0.diagonal()
        t1.data = x0
        return (t1,)

    refused_with_grad(
        f, lambda: (torch.randn(3, 3, requires_grad=True),), compile_fn, r"intermediate with autograd history"
    )


def test_seed46000_590_variant_inference_supported(compile_fn: CompileFn | None) -> None:
    # under no_grad the intermediate has no history: the graph returns it as the base (Note [Views Set Onto Another
    # Storage])
    def f(x0: T, x1: T) -> object:
        t0 = x1.sum(1)
        t1 = t0.as_strided((1,), (0,), 2)
        t1.data = x0
        return (t1,)

    check_no_grad(f, lambda: (torch.randn(4, 2),) * 2, compile_fn)
