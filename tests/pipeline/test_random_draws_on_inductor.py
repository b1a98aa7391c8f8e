"""Random draws on backend "inductor" (Note [What A Backend Receives And Returns]): each random op runs eager's own
kernel on the global generator, in program order, so a compiled program draws what eager draws. Each program reads a
reduction before its draw (the fused kernel that read dropout's mask buffer before `bernoulli_` wrote it, which gave
NaN); the ops inductor decomposed (`exponential_`, `geometric_`, `rrelu`) drew other numbers; `random_(0, 10)` made
a graph fx could not print. CI runs dropout, `bernoulli_` and `exponential_` (each in one grad mode) and a slice of
the rest (inductor compiles C++ on CPU)."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import torch
import torch.nn.functional as F

from tests.oracle import Call, assert_matches_eager

T = torch.Tensor


def dropout_after_layer_norm(x: T, w: T, b: T) -> T:
    return F.dropout(F.layer_norm(x, (32,), w, b), 0.1, True)


def test_dropout_after_layer_norm_draws_like_eager() -> None:
    for grad in (True, False):
        assert_matches_eager(
            dropout_after_layer_norm,
            lambda grad=grad: (  # type: ignore[misc]  # (a default binds the loop's value)
                torch.randn(2, 8, 32),
                torch.randn(32, requires_grad=grad),
                torch.randn(32, requires_grad=grad),
            ),
            backend="inductor",
        )


DRAWS: dict[str, Callable[[T], T]] = {
    "dropout": lambda a: F.dropout(a, 0.1, True),
    "bernoulli_p_": lambda a: torch.empty_like(a).bernoulli_(0.9),
    "exponential_": lambda a: torch.empty_like(a).exponential_(),
    "bernoulli_probs": lambda a: torch.bernoulli(torch.sigmoid(a)),
    "uniform_": lambda a: torch.empty_like(a).uniform_(-1, 1),
    "normal_": lambda a: torch.empty_like(a).normal_(),
    "log_normal_": lambda a: torch.empty_like(a).log_normal_(),
    "cauchy_": lambda a: torch.empty_like(a).cauchy_(),
    "geometric_": lambda a: torch.empty_like(a).geometric_(0.5),
    "random_": lambda a: torch.empty_like(a).random_(0, 10),
    "rand_like": torch.rand_like,
    "randn_like": torch.randn_like,
    "randint_like": lambda a: torch.randint_like(a, 10),
    "randn": lambda a: torch.randn(a.shape),
    "multinomial": lambda a: torch.multinomial(torch.sigmoid(a[0]), 4).float().mean() / 32 * a,
    "rrelu": lambda a: F.rrelu(a, training=True),
    "dropout1d": lambda a: F.dropout1d(a, 0.5, True),
    "alpha_dropout": lambda a: F.alpha_dropout(a, 0.2, True),
}
# CI: each in one grad mode (the other: slow), both modes among them
CI = (("dropout", True), ("bernoulli_p_", False), ("exponential_", True))


def _after_a_reduction(draw: Callable[[T], T]) -> Callable[[T], tuple[T, T]]:
    def program(a: T) -> tuple[T, T]:
        centered = a - a.mean(2, keepdim=True)
        drawn = draw(a) * 2
        return centered * drawn, drawn

    return program


def test_dropout_bernoulli_and_exponential_draw_like_eager() -> None:
    for name, grad in CI:
        _check(name, grad)


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("name", [n for n in DRAWS if n not in dict(CI)])
def test_random_op_draws_like_eager(name: str, grad: bool) -> None:
    _check(name, grad)  # (a sweep: conftest keeps a slice of it in CI)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "grad"), [(n, not g) for n, g in CI])
def test_dropout_bernoulli_and_exponential_in_the_other_grad_mode_draw_like_eager(name: str, grad: bool) -> None:
    _check(name, grad)


def _check(name: str, grad: bool) -> None:
    assert_matches_eager(
        _after_a_reduction(DRAWS[name]), lambda: (torch.randn(2, 8, 32, requires_grad=grad),), backend="inductor"
    )


def two_dropouts_of_one_shape(x: T) -> tuple[T, T]:
    centered = x - x.mean(1, keepdim=True)
    return F.dropout(centered, 0.5, True), F.dropout(centered, 0.5, True)


def test_two_dropouts_of_one_shape_draw_two_masks() -> None:
    """Two draws of one op, shape and arguments are two draws: nothing merges them (eager's masks differ)."""
    compiled = assert_matches_eager(
        two_dropouts_of_one_shape, lambda: (torch.randn(4, 16, requires_grad=True),), backend="inductor"
    )
    torch.manual_seed(3)
    first, second = cast(tuple[T, T], compiled(torch.randn(4, 16)))
    assert not torch.equal(first != 0, second != 0)


transformers = pytest.importorskip("transformers")


@pytest.mark.slow
def test_tiny_bert_trains_like_eager_on_inductor() -> None:
    """LayerNorm then Dropout in train mode (every BERT layer): loss, logits and gradients equal eager's."""
    torch.manual_seed(0)
    config = transformers.BertConfig(
        num_hidden_layers=1,
        num_attention_heads=2,
        hidden_size=32,
        intermediate_size=64,
        vocab_size=100,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    model = transformers.BertForMaskedLM(config).train()

    def call() -> Call:
        ids = torch.randint(0, 100, (2, 8))
        return Call(args=(ids,), kwargs={"labels": ids})

    with torch.enable_grad():
        assert_matches_eager(model, call, backend="inductor", atol=1e-5, rtol=1e-4)
