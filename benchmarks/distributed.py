"""Tensor-parallel MLP step, compiled vs eager, on 2 CPU ranks; and the guard cost of a ShardedTensor input.

Run: `python benchmarks/distributed.py`. Part 1 spawns 2 ranks (gloo on 127.0.0.1) and times one training step
(forward, backward, no optimizer) of the column -> GELU -> row parallel MLP from tests/subclasses, eager and through
`subclassaot.compile(backend="eager")`, median over the timed steps (rank 0 reports). Part 2, in this process, times
the compiled entry's guard function on the same call's flattened arguments for a ShardedTensor input and a
PairTensor input of the same shape (median of many repeats, per call).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils import _pytree as pytree

import subclassaot
from subclasses.distributed import Replicate, Shard, distribute_tensor, local_mesh, mesh_from_group
from subclasses.pair import PairTensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.subclasses.distributed_scenarios import TPMLP, RefMLP
from tests.subclasses.distributed_worker import free_port, spawn

BATCH, D, H, WARMUP, STEPS = 64, 256, 1024, 3, 20


def _median_ms(fn: Callable[[], object], warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _rank(rank: int, port: int, out: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    mesh = mesh_from_group()
    torch.manual_seed(0)
    tp = TPMLP(RefMLP(D, H), mesh)
    compiled = subclassaot.compile(tp, backend="eager")
    x = distribute_tensor(torch.randn(BATCH, D), mesh, (Replicate(),))

    def step(model: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]) -> Callable[[], None]:
        def run() -> None:
            _, loss = model(x)
            torch.autograd.backward(loss)
            tp.zero_grad(set_to_none=True)
            dist.barrier()

        return run

    eager_ms = _median_ms(step(tp), WARMUP, STEPS)
    compiled_ms = _median_ms(step(compiled), WARMUP, STEPS)
    if rank == 0:
        Path(out).write_text(f"{eager_ms:.3f} {compiled_ms:.3f} {compiled.compile_count}")
    dist.destroy_process_group()


def tp_step() -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "result")
        spawn(_rank, (free_port(), out), 2)
        eager, compiled, count = Path(out).read_text().split()
        return float(eager), float(compiled), int(count)


def guard_cost_us(x: torch.Tensor) -> float:
    compiled = subclassaot.compile(lambda t: t * 2, backend="eager")
    compiled(x)
    values, _ = pytree.tree_flatten(({}, (x,), {}))
    check = compiled.entries[0].guards.check
    assert isinstance(check(values), dict)
    repeats = 20000

    def many() -> None:
        for _ in range(repeats):
            check(values)

    return _median_ms(many, 2, 7) * 1e3 / repeats


def main() -> None:
    eager_ms, compiled_ms, count = tp_step()
    full = torch.randn(BATCH, D)
    sharded_us = guard_cost_us(distribute_tensor(full, local_mesh(), (Shard(0),)))
    pair_us = guard_cost_us(PairTensor.from_tensor(full))
    print(f"TP MLP step (2 ranks, batch {BATCH}, {D} -> {H} -> {D}, fp32, CPU), median of {STEPS}:")
    print("| step | time (ms) |\n|---|---:|")
    print(f"| eager | {eager_ms:.2f} |\n| compiled (backend=eager, {count} compile) | {compiled_ms:.2f} |")
    print("\nGuard check per call, one input of shape (64, 256):")
    print("| input | guard (us) |\n|---|---:|")
    print(f"| PairTensor | {pair_us:.2f} |\n| ShardedTensor | {sharded_us:.2f} |")
    print(f"\nratio ShardedTensor / PairTensor: {sharded_us / pair_us:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
