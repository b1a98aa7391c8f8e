"""A training step with PairTensor inputs: time and saved-activation bytes; the training wrapper's per-call overhead.

Run: `python benchmarks/training.py [--quick]`. (1) An MLP (Linear 64 -> 128, ReLU, Linear 128 -> 64, loss
`out.pow(2).mean()`, plain `nn.Linear` weights) on a PairTensor input of shape (32, 64) (no grad on the input; the
weight gradients are PairTensors, which SGD applies side by side). One step = forward, backward, SGD step,
`zero_grad(set_to_none=True)`; median per step after warm-up, for eager, `torch.compile(backend="aot_eager",
fullgraph=True)`, and `subclassaot.compile` with backend "eager" and "inductor" (each on its own copy of the same
initial model). Saved bytes: one forward under `torch.autograd.graph.saved_tensors_hooks`, summing the nbytes of the
unique storages packed (a subclass is counted through its inner tensors), split into parameters, the input x and
the rest (activations). The compiled versions save through their autograd.Function, which the same hooks see.
(2) The per-call cost of the training wrapper on a tiny input: x of shape (2, 2) requiring grad, `(x * 2).sum()`,
forward + backward, minus the eager time of the same; ours (backend "eager") vs torch.compile (aot_eager).
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch._dynamo
from torch import nn
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

import subclassaot
from subclasses.pair import PairTensor

BATCH, D_IN, D_HIDDEN = 32, 64, 128
Step = Callable[[], object]


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    steps: int  # timed training steps (median reported)
    warmup: int  # untimed steps first (the first one compiles)
    batch: int  # calls per timed batch for the tiny per-call figure
    repeats: int  # timed batches for the tiny per-call figure


FULL = Budget(steps=30, warmup=3, batch=100, repeats=21)
QUICK = Budget(steps=3, warmup=1, batch=10, repeats=3)


class MLPLoss(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(D_IN, D_HIDDEN), nn.ReLU(), nn.Linear(D_HIDDEN, D_IN))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(x)
        return out.pow(2).mean()


def compiled_model(kind: str, model: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
    if kind == "eager":
        return model
    if kind == "torch.compile (aot_eager)":
        torch._dynamo.reset()
        return torch.compile(model, backend="aot_eager", fullgraph=True)
    backend = kind.removeprefix("ours (").removesuffix(")")
    return subclassaot.compile(model, backend=backend)


KINDS = ("eager", "torch.compile (aot_eager)", "ours (eager)", "ours (inductor)")


def inner_tensors(t: torch.Tensor) -> list[torch.Tensor]:
    if not is_traceable_wrapper_subclass(t):
        return [t]
    names, _ = t.__tensor_flatten__()
    return [leaf for name in names for leaf in inner_tensors(getattr(t, name))]


@dataclass(frozen=True, slots=True, kw_only=True)
class Saved:
    total: int
    params: int
    inputs: int

    @property
    def activations(self) -> int:
        return self.total - self.params - self.inputs


def saved_bytes(model_fn: Callable[[torch.Tensor], torch.Tensor], model: nn.Module, x: torch.Tensor) -> Saved:
    """Unique storages packed by autograd during one forward (then the backward runs to release them)."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        for leaf in inner_tensors(t):
            storage = leaf.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        loss = model_fn(x)
    torch.autograd.backward(loss)
    model.zero_grad(set_to_none=True)
    param_ptrs = {p.untyped_storage().data_ptr() for p in model.parameters()}
    input_ptrs = {leaf.untyped_storage().data_ptr() for leaf in inner_tensors(x)}
    return Saved(
        total=sum(storages.values()),
        params=sum(n for ptr, n in storages.items() if ptr in param_ptrs),
        inputs=sum(n for ptr, n in storages.items() if ptr in input_ptrs),
    )


def interleaved(calls: dict[str, Step], rounds: int, batch: int) -> dict[str, float]:
    """Per callable: the median over `rounds` of the mean time of one call in a batch of `batch`, in seconds.

    The callables take turns within each round (in a rotating order), so that load from other work on the machine
    falls on all of them alike.
    """
    names = list(calls)
    times: dict[str, list[float]] = {name: [] for name in names}
    gc.collect()
    gc.disable()
    try:
        for round_ in range(rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                call = calls[name]
                start = time.perf_counter()
                for _ in range(batch):
                    call()
                times[name].append((time.perf_counter() - start) / batch)
    finally:
        gc.enable()
    return {name: statistics.median(t) for name, t in times.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    kind: str
    model: MLPLoss
    fn: Callable[[torch.Tensor], torch.Tensor]
    step: Step
    first_ms: float  # the first forward + backward (compiles)
    max_grad_diff: float  # first step's weight gradients vs eager's (sum of both PairTensor sides)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepResult:
    kind: str
    first_ms: float
    step_ms: float
    saved: Saved | None
    max_grad_diff: float
    note: str  # why the figures are missing; '' when they are not


def summed(g: torch.Tensor | None) -> torch.Tensor:
    assert g is not None, "BUG: a weight got no gradient"
    return sum(inner_tensors(g), torch.zeros(()))


def prepare(kind: str, initial: MLPLoss, x: torch.Tensor, reference: list[torch.Tensor]) -> Prepared:
    """A copy of the model for `kind`, its first forward + backward timed and its gradients checked against eager."""
    model = copy.deepcopy(initial)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    fn = compiled_model(kind, model)

    def step() -> None:
        torch.autograd.backward(fn(x))
        opt.step()
        opt.zero_grad(set_to_none=True)

    start = time.perf_counter()
    torch.autograd.backward(fn(x))
    first_ms = (time.perf_counter() - start) * 1e3
    grads = [summed(p.grad) for p in model.parameters()]
    diff = max(float((g - r).abs().max()) for g, r in zip(grads, reference, strict=True)) if reference else 0.0
    reference.extend([] if reference else grads)
    opt.zero_grad(set_to_none=True)
    return Prepared(kind=kind, model=model, fn=fn, step=step, first_ms=first_ms, max_grad_diff=diff)


def train_steps(initial: MLPLoss, x: torch.Tensor, budget: Budget) -> list[StepResult]:
    nan = float("nan")
    failed: dict[str, str] = {}
    ready: dict[str, Prepared] = {}
    reference: list[torch.Tensor] = []
    for kind in KINDS:
        try:
            ready[kind] = prepare(kind, initial, x, reference)
            for _ in range(budget.warmup):
                ready[kind].step()
        except Exception as e:  # a failure is a result here: report it and go on with the other versions
            failed[kind] = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    step_s = interleaved({kind: p.step for kind, p in ready.items()}, budget.steps, 1)
    results = []
    for kind in KINDS:
        if kind in failed:
            results.append(
                StepResult(kind=kind, first_ms=nan, step_ms=nan, saved=None, max_grad_diff=nan, note=failed[kind])
            )
            continue
        p = ready[kind]
        saved = saved_bytes(p.fn, p.model, x)
        results.append(
            StepResult(
                kind=kind,
                first_ms=p.first_ms,
                step_ms=step_s[kind] * 1e3,
                saved=saved,
                max_grad_diff=p.max_grad_diff,
                note="",
            )
        )
    return results


def tiny_call(fn: Callable[[torch.Tensor], torch.Tensor]) -> Step:
    """Forward + backward of `fn` on a (2, 2) input requiring grad (warmed up)."""
    x = torch.randn(2, 2, requires_grad=True)

    def call() -> None:
        torch.autograd.backward(fn(x))
        x.grad = None

    for _ in range(5):
        call()
    return call


def double_sum(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).sum()


def kib(n: int) -> str:
    return f"{n / 1024:.1f}"


def ratio(mine: float, other: float) -> str:
    if mine != mine or other != other:
        return "n/a"
    return "n/a (<= 0)" if other <= 0 or mine < 0 else f"{mine / other:.2f}x"


def print_steps(results: list[StepResult], budget: Budget) -> None:
    print(
        f"MLP {D_IN} -> {D_HIDDEN} -> {D_IN}, batch {BATCH}, PairTensor input, fp32, SGD; "
        f"median of {budget.steps} steps after {budget.warmup} warm-up steps"
    )
    print("| version | first step (ms) | step (ms) | saved total (KiB) | params | input x | activations | grad diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        s = r.saved
        saved = f"{kib(s.total)} | {kib(s.params)} | {kib(s.inputs)} | {kib(s.activations)}" if s else "n/a | | |"
        print(f"| {r.kind} | {r.first_ms:.1f} | {r.step_ms:.2f} | {saved} | {r.max_grad_diff:.1e} |")
    eager = results[0].saved
    for r in results[1:]:
        if r.note:
            print(f"note: {r.kind} failed: {r.note}")
        elif r.saved is not None and eager is not None:
            verdict = "met" if r.saved.total <= eager.total else "NOT met"
            print(f"{r.kind}: saved {r.saved.total / eager.total:.2f}x eager's (target <= 1x: {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="few iterations (smoke test)")
    args = parser.parse_args()
    budget = QUICK if args.quick else FULL
    torch.set_num_threads(1)
    torch.manual_seed(0)
    initial = MLPLoss()
    x = PairTensor(torch.randn(BATCH, D_IN), torch.randn(BATCH, D_IN))
    print_steps(train_steps(initial, x, budget), budget)

    torch._dynamo.reset()
    calls = {
        "eager": tiny_call(double_sum),
        "ours": tiny_call(subclassaot.compile(double_sum, backend="eager")),
        "theirs": tiny_call(torch.compile(double_sum, backend="aot_eager", fullgraph=True)),
    }
    us = {name: t * 1e6 for name, t in interleaved(calls, budget.repeats, budget.batch).items()}
    eager, mine, other = us["eager"], us["ours"], us["theirs"]
    print(
        f"\nTraining wrapper, (x * 2).sum() on (2, 2) requiring grad, forward + backward, "
        f"median of {budget.repeats} batches of {budget.batch} calls (us):"
    )
    print("| version | per call | overhead (- eager) |\n|---|---:|---:|")
    print(f"| eager | {eager:.1f} | |")
    print(f"| ours (eager) | {mine:.1f} | {mine - eager:.1f} |")
    print(f"| torch.compile (aot_eager) | {other:.1f} | {other - eager:.1f} |")
    print(f"overhead ratio ours / torch.compile: {ratio(mine - eager, other - eager)} (target <= 0.5x)")


if __name__ == "__main__":
    main()
