"""In-place random fills of non-contiguous tensors (Note [In-Place Ops As Eager Runs Them]): dropout after a
transpose, `bernoulli_`/`uniform_`/`exponential_` on permuted and sliced tensors; the compiled call draws what eager
draws, element for element, and leaves the RNG state where eager leaves it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import subclassaot
from tests.oracle import assert_matches_eager

T = torch.Tensor


def dropout_after_transpose(x: T) -> T:
    return F.dropout(x.transpose(0, 1) * 2, 0.3)


def bernoulli_permuted(x: T) -> T:
    y = torch.empty(4, 3, 5).permute(2, 0, 1)
    y.bernoulli_(0.4)
    return y + x.sum()


def bernoulli_tensor_p(x: T) -> T:
    y = torch.empty(6, 5).t()
    y.bernoulli_(x.sigmoid().detach())
    return y


def uniform_sliced(x: T) -> T:
    y = torch.empty(5, 12)[:, ::2]
    y.uniform_(-1, 1)
    return y * x[:, :6]


def exponential_transposed(x: T) -> T:
    y = torch.empty(6, 5).t()
    y.exponential_(2.0)
    return y + x


def dropout_both_sides(x: T) -> T:
    a = F.dropout(x.t(), 0.5)
    return F.dropout(a.t() + 1, 0.5).t()


PROGRAMS = (
    dropout_after_transpose,
    bernoulli_permuted,
    bernoulli_tensor_p,
    uniform_sliced,
    exponential_transposed,
    dropout_both_sides,
)


def _run(fn: Callable[[T], T], x: T) -> tuple[T, T]:
    torch.manual_seed(7)
    out = fn(x)
    return out, torch.get_rng_state()


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_random_fill_draws_like_eager(fn: Callable[[T], T], grad: bool) -> None:
    x = torch.randn(5, 6, requires_grad=grad)
    compiled = subclassaot.compile(fn, backend="eager")
    with torch.set_grad_enabled(grad):
        want, want_state = _run(fn, x)
        for _ in range(2):  # the second call runs the cached entry
            got, state = _run(compiled, x)
            assert torch.equal(got, want) and got.stride() == want.stride()
            assert torch.equal(state, want_state)


def fill_an_input_through_its_transpose(x: T) -> T:
    x.t().uniform_(-1, 1)
    return x * 2


def bernoulli_into_a_strided_input(x: T) -> T:
    x.bernoulli_(0.3)
    return x.sum()


def test_random_fill_of_an_input_view_matches_eager() -> None:
    assert_matches_eager(fill_an_input_through_its_transpose, lambda: (torch.randn(4, 6),))
    assert_matches_eager(bernoulli_into_a_strided_input, lambda: (torch.randn(6, 4).t(),))
    assert_matches_eager(bernoulli_into_a_strided_input, lambda: (torch.randn(4, 10)[:, ::2],))


def random_from_to(x: T) -> T:
    return torch.empty_like(x).random_(-3, 10) * x


def _runs_fx_code(gm: torch.fx.GraphModule, example_inputs: object) -> Callable[..., object]:
    assert "random_from" in gm.code  # (fx's own code for the graph, which a backend may run or print)
    return gm.forward


def test_random_from_makes_a_graph_fx_can_print() -> None:
    """`random_(low, high)` is `aten.random.from`, an overload named by a Python keyword: fx printed it as
    `torch.ops.aten.random.from(...)`, a SyntaxError before any backend that reads the graph's code ran (Note [What A
    Backend Receives And Returns])."""
    assert_matches_eager(random_from_to, lambda: (torch.randn(4, 6),), backend=_runs_fx_code)
    assert_matches_eager(random_from_to, lambda: (torch.randn(4, 6, requires_grad=True),), backend=_runs_fx_code)
