"""Models side by side: subclassaot.compile vs torch.compile, parity with eager, compile time, step time.

Run: `python benchmarks/models.py [--inductor] [--steps N]`. Models: a few from tests/pipeline/test_model_zoo.py
(train mode: BatchNorm running stats, dropout) and GPT-2 from a tiny transformers config (2 layers, 32 wide, 2
heads, vocab 100, attn_implementation="eager", dropout 0.1; an all-ones attention mask passed, as a tokenizer gives
it: without one, transformers checks position ids for packed sequences by reading a tensor's value). One step = forward, `out.float().pow(2).mean()`,
backward (no optimizer), with the same seed before each side's step. Per compiler, on its own copy of one initial
model: parity = output, loss, every parameter's grad and every buffer equal to eager's after the first step (atol =
rtol = 1e-4); compile = wall time of the first step (trace + compile + run); step = median wall time of the next N
steps. Ours runs backend "eager"; torch.compile runs "aot_eager"; `--inductor` adds both on inductor.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
import torch._dynamo
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import subclassaot
from tests.pipeline.test_model_zoo import ZOO

T = torch.Tensor
Inputs = Callable[[], tuple[T, ...]]


class TinyGPT2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        # attn_implementation goes through PretrainedConfig's **kwargs, which GPT2Config's signature does not show
        config = GPT2Config(  # type: ignore[call-arg]
            n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32, attn_implementation="eager"
        )
        self.model = GPT2LMHeadModel(config)

    def forward(self, ids: T, mask: T) -> T:
        return self.model(input_ids=ids, attention_mask=mask, use_cache=False).logits  # type: ignore[no-any-return]


MODELS: dict[str, tuple[Callable[[], nn.Module], Inputs]] = {
    name: ZOO[name]
    for name in ("conv_batchnorm", "layernorm_batchnorm_dropout_mlp", "embedding_lstm", "transformer_encoder_layer")
}
MODELS["gpt2_tiny"] = (TinyGPT2, lambda: (torch.randint(0, 100, (2, 16)), torch.ones(2, 16, dtype=torch.int64)))


def _step(model: Callable[..., object], make: Inputs, seed: int) -> tuple[T, T]:
    torch.manual_seed(seed)
    out = model(*make())
    assert isinstance(out, torch.Tensor)
    loss = out.float().pow(2).mean()
    torch.autograd.backward(loss)
    return out.detach(), loss.detach()


def _matches(got: nn.Module, want: nn.Module, got_step: tuple[T, T], want_step: tuple[T, T]) -> bool:
    pairs = [*zip(got_step, want_step, strict=True)]
    for p, q in zip(got.parameters(), want.parameters(), strict=True):
        if (p.grad is None) != (q.grad is None):
            return False
        if p.grad is not None and q.grad is not None:
            pairs.append((p.grad, q.grad))
    pairs += [*zip(got.buffers(), want.buffers(), strict=True)]
    return all(a.shape == b.shape and torch.allclose(a.float(), b.float(), atol=1e-4, rtol=1e-4) for a, b in pairs)


def _measure(name: str, compiler: str, steps: int) -> tuple[str, float, float]:
    make_model, make = MODELS[name]
    torch.manual_seed(0)
    base = make_model().train()
    eager, mine = copy.deepcopy(base), copy.deepcopy(base)
    torch._dynamo.reset()
    run: Callable[..., object]
    if compiler == "eager":
        run = mine
    elif compiler.startswith("ours"):
        run = subclassaot.compile(mine, backend=compiler.split(" ")[1])
    else:
        run = torch.compile(mine, backend=compiler.split(" ")[1])
    want = _step(eager, make, 1)
    start = time.perf_counter()
    got = _step(run, make, 1)
    first = time.perf_counter() - start
    parity = "yes" if _matches(mine, eager, got, want) else "NO"
    times = []
    for seed in range(2, 2 + steps):
        mine.zero_grad(set_to_none=True)
        start = time.perf_counter()
        _step(run, make, seed)
        times.append(time.perf_counter() - start)
    return parity, first, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inductor", action="store_true", help="add ours and torch.compile on inductor")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per model and compiler (median)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: steadier on a shared CPU)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    compilers = ["eager", "ours eager", "torch.compile aot_eager"]
    if args.inductor:
        compilers += ["ours inductor", "torch.compile inductor"]
    warnings.simplefilter("ignore")
    print("| model | compiler | parity | compile (s) | step (ms) |")
    print("|---|---|:---:|---:|---:|")
    for name in MODELS:
        for compiler in compilers:
            try:
                parity, first, step = _measure(name, compiler, args.steps)
                compile_s = "-" if compiler == "eager" else f"{first:.2f}"
                row = f"| {name} | {compiler} | {parity} | {compile_s} | {1000 * step:.2f} |"
            except Exception as e:  # a compiler that fails on a model is a row, not the end of the run
                row = f"| {name} | {compiler} | fails: {type(e).__name__}: {str(e)[:80]} | - | - |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
