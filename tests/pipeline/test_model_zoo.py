"""Models as users build them, from the standard nn layers (Conv, BatchNorm, LayerNorm, RNN/LSTM/GRU, Transformer
encoder and decoder layers, MultiheadAttention, Embedding, Dropout) and an autocast bf16 MLP, in train and eval mode,
compiled as modules on backend "eager": outputs, gradients, buffers and random draws equal eager's. Each model runs
through the parity oracle (train mode), and through two SGD steps on one model object with the same seed before each side's step
(the second step runs the cached entry), comparing the RNG state after each forward too. Eval mode and a small
inductor slice (inductor compiles C++ on CPU) are marked slow."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn

import subclassaot
from tests.oracle import assert_matches_eager

T = torch.Tensor
Inputs = Callable[[], tuple[T, ...]]


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(16, 2)

    def forward(self, x: T) -> T:
        return self.fc(self.pool(self.bn(self.conv(x)).relu()).flatten(1))  # type: ignore[no-any-return]


class NormMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(8, 16)
        self.ln = nn.LayerNorm(16)
        self.bn = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(0.3)
        self.l2 = nn.Linear(16, 4)

    def forward(self, x: T) -> T:
        return self.l2(self.drop(self.bn(self.ln(self.l1(x))).relu()))  # type: ignore[no-any-return]


class Recurrent(nn.Module):
    def __init__(self, kind: type[nn.RNN] | type[nn.LSTM] | type[nn.GRU]) -> None:
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.rnn = kind(8, 8, num_layers=2, batch_first=True, dropout=0.2)
        self.fc = nn.Linear(8, 3)

    def forward(self, x: T) -> T:
        out, _ = self.rnn(self.emb(x))
        return self.fc(out[:, -1])  # type: ignore[no-any-return]


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)

    def forward(self, x: T) -> T:
        return self.layer(x)  # type: ignore[no-any-return]


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(16, 2, 32, dropout=0.1, batch_first=True)

    def forward(self, x: T, memory: T) -> T:
        return self.layer(x, memory)  # type: ignore[no-any-return]


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 2, dropout=0.1, batch_first=True)

    def forward(self, x: T) -> T:
        out, weights = self.attn(x, x, x)
        return out + weights.sum()  # type: ignore[no-any-return]


class AutocastMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = nn.Linear(8, 16)
        self.l2 = nn.Linear(16, 4)

    def forward(self, x: T) -> T:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.l2(self.l1(x).relu()).float()  # type: ignore[no-any-return]


def _tokens() -> tuple[T, ...]:
    return (torch.randint(0, 10, (2, 5)),)


ZOO: dict[str, tuple[Callable[[], nn.Module], Inputs]] = {
    "conv_batchnorm": (ConvNet, lambda: (torch.randn(2, 3, 4, 4),)),
    "layernorm_batchnorm_dropout_mlp": (NormMLP, lambda: (torch.randn(5, 8),)),
    "embedding_rnn": (lambda: Recurrent(nn.RNN), _tokens),
    "embedding_lstm": (lambda: Recurrent(nn.LSTM), _tokens),
    "embedding_gru": (lambda: Recurrent(nn.GRU), _tokens),
    "transformer_encoder_layer": (Encoder, lambda: (torch.randn(2, 5, 16),)),
    "transformer_decoder_layer": (Decoder, lambda: (torch.randn(2, 5, 16), torch.randn(2, 3, 16))),
    "multihead_attention": (Attention, lambda: (torch.randn(2, 5, 16),)),
    "autocast_bf16_mlp": (AutocastMLP, lambda: (torch.randn(5, 8),)),
}


def _build(name: str, train: bool) -> nn.Module:
    torch.manual_seed(0)
    model = ZOO[name][0]()
    return model.train(train)


def _step(model: Callable[..., object], params: list[nn.Parameter], make: Inputs, seed: int) -> tuple[T, T, T]:
    """One SGD step with `seed` set before it: (output, RNG state after the forward, loss)."""
    torch.manual_seed(seed)
    out = model(*make())
    assert isinstance(out, torch.Tensor)
    state = torch.get_rng_state()
    loss = out.float().pow(2).mean()
    torch.autograd.backward(loss)
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.sub_(0.1 * p.grad)
    return out.detach(), state, loss.detach()


def _two_training_steps(name: str, train: bool, backend: str) -> None:
    eager = _build(name, train)
    compiled = subclassaot.compile(copy.deepcopy(eager), backend=backend)
    tol = 1e-4 if backend != "eager" else None

    def close(a: object, b: object, msg: str) -> None:
        torch.testing.assert_close(a, b, atol=tol, rtol=tol, msg=msg)

    for seed in (1, 2):
        want = _step(eager, list(eager.parameters()), ZOO[name][1], seed)
        got = _step(compiled, list(compiled.parameters()), ZOO[name][1], seed)
        close(got[0], want[0], f"step {seed}: output")
        assert torch.equal(got[1], want[1]), f"step {seed}: the RNG state after the forward differs from eager's"
        close(got[2], want[2], f"step {seed}: loss")
        for (pname, p), q in zip(compiled.named_parameters(), eager.parameters(), strict=True):
            close(p.grad, q.grad, f"step {seed}: {pname}.grad")
            close(p, q, f"step {seed}: {pname}")
            p.grad = q.grad = None
        for (bname, b), c in zip(compiled.named_buffers(), eager.buffers(), strict=True):
            assert b.dtype == c.dtype, bname
            close(b, c, f"step {seed}: {bname}")
    assert compiled.compile_count == 1, compiled.recompile_reasons


@pytest.mark.parametrize("name", sorted(ZOO))
def test_model_trains_like_eager(name: str) -> None:
    _two_training_steps(name, train=True, backend="eager")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ZOO))
def test_model_in_eval_mode_trains_like_eager(name: str) -> None:
    _two_training_steps(name, train=False, backend="eager")


@pytest.mark.parametrize("name", sorted(ZOO))
def test_model_matches_eager_through_the_oracle(name: str) -> None:
    with torch.enable_grad():
        assert_matches_eager(_build(name, train=True), ZOO[name][1])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["layernorm_batchnorm_dropout_mlp", "conv_batchnorm", "transformer_encoder_layer"])
def test_model_trains_like_eager_on_inductor(name: str) -> None:
    _two_training_steps(name, train=True, backend="inductor")
