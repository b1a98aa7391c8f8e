"""Jagged vs padded-dense for the same math: linear -> softmax over the sequence -> weighted sum over it.

Run: `python benchmarks/jagged.py [--backend eager|inductor] [--repeat N] [--blocks padded,jagged,fused]`. Batch 64,
features 256, row lengths drawn from a clipped log-normal with mean ~64 and one row of the maximum, 1024 (a realistic
long tail). The padded side pads every row to 1024 and masks the softmax; the jagged side is a JaggedTensor, its
softmax-weighted sum written out (softmax, product, sum: three ops) or, in the "fused" rows, as `softmax_pool` (one
kernel; Note [Fused Softmax Pool]). All run in eager and through `subclassaot.compile`, side by side, on the CPU
(and on CUDA when available). Reported per configuration: the
median time per call over back-to-back calls (see `measure`), and the peak memory allocated during one call (CPU:
the profiler's allocation events; CUDA: the caching allocator's peak), above the inputs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.profiler import ProfilerActivity, profile

import subclassaot
from subclasses.nested import JaggedTensor, softmax_pool

BATCH, FEATURES, MEAN_LEN, MAX_LEN = 64, 256, 64, 1024


def lengths(seed: int = 0) -> Tensor:
    """One row of MAX_LEN, the others log-normal with the mean that makes the batch mean MEAN_LEN."""
    gen = torch.Generator().manual_seed(seed)
    sigma, rest_mean = 1.0, (BATCH * MEAN_LEN - MAX_LEN) / (BATCH - 1)
    drawn = torch.exp(sigma * torch.randn(BATCH - 1, generator=gen))
    drawn = (drawn * rest_mean / drawn.mean()).round().clamp(1, MAX_LEN).long()
    return torch.cat([torch.tensor([MAX_LEN]), drawn])


def jagged_block(x: JaggedTensor, w: Tensor) -> Tensor:
    y = F.linear(x, w).relu()
    return (y.softmax(1) * y).sum(1)


def jagged_fused_block(x: JaggedTensor, w: Tensor) -> Tensor:
    """`jagged_block` with the softmax-weighted sum as one fused kernel."""
    y = F.linear(x, w).relu()
    assert isinstance(y, JaggedTensor)
    return softmax_pool(y)


def padded_block(padded: Tensor, mask: Tensor, w: Tensor) -> Tensor:
    y = F.linear(padded, w).relu()
    probs = y.masked_fill(~mask, float("-inf")).softmax(1)
    return (probs * y).sum(1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    name: str
    ms: float
    peak_mb: float


def _peak_cpu_bytes(run: Callable[[], object]) -> int:
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run()
    live = peak = 0
    for event in prof.events():
        live += event.cpu_memory_usage
        peak = max(peak, live)
    return peak


def _peak_cuda_bytes(run: Callable[[], object]) -> int:
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    run()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def measure(name: str, run: Callable[[], object], device: torch.device, repeat: int, calls: int = 10) -> Result:
    """Median over `repeat` batches of the time per call of `calls` back-to-back calls, and one call's peak memory.

    Back to back, as a model runs its layers: on CUDA the host queues the next call while the GPU runs the current
    one, so a call costs the larger of its host time and its GPU time (synchronizing after every call would add
    the two and charge the host-bound jagged side twice).
    """
    for _ in range(2):  # warm-up: compiles, allocator caches
        run()
    times = []
    for _ in range(repeat):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            run()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3 / calls)
    peak = _peak_cuda_bytes(run) if device.type == "cuda" else _peak_cpu_bytes(run)
    return Result(name=name, ms=statistics.median(times), peak_mb=peak / 2**20)


BLOCKS = ("padded", "jagged", "fused")


def run_device(
    device: torch.device, backend: str, repeat: int, blocks: frozenset[str] = frozenset(BLOCKS)
) -> list[Result]:
    lens = lengths().to(device)
    gen = torch.Generator().manual_seed(1)
    values = torch.randn(int(lens.sum()), FEATURES, generator=gen).to(device)
    w = (torch.randn(FEATURES, FEATURES, generator=gen) / FEATURES**0.5).to(device)
    x = JaggedTensor.from_lengths(values, lens)
    padded = x.to_padded(0.0)
    mask = (torch.arange(MAX_LEN, device=device)[None, :] < lens[:, None])[:, :, None]
    with torch.no_grad():
        want = padded_block(padded, mask, w)
        torch.testing.assert_close(jagged_block(x, w), want, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(jagged_fused_block(x, w), want, atol=1e-4, rtol=1e-4)
        compiled_jagged = subclassaot.compile(jagged_block, backend=backend)
        compiled_fused = subclassaot.compile(jagged_fused_block, backend=backend)
        compiled_padded = subclassaot.compile(padded_block, backend=backend)
        runs: list[tuple[str, str, Callable[[], object]]] = [
            ("padded", "padded eager", lambda: padded_block(padded, mask, w)),
            ("jagged", "jagged eager", lambda: jagged_block(x, w)),
            ("fused", "jagged fused eager", lambda: jagged_fused_block(x, w)),
            ("padded", f"padded compiled ({backend})", lambda: compiled_padded(padded, mask, w)),
            ("jagged", f"jagged compiled ({backend})", lambda: compiled_jagged(x, w)),
            ("fused", f"jagged fused compiled ({backend})", lambda: compiled_fused(x, w)),
        ]
        return [measure(name, run, device, repeat) for block, name, run in runs if block in blocks]


def check_kernels(device: torch.device) -> None:
    """Each jagged kernel against its reference.py twin on `device`, with empty and long rows; raises if one differs."""
    from subclasses.nested import kernels, reference

    gen = torch.Generator().manual_seed(2)
    lens = torch.tensor([0, 1, 17, 1030, 3, 0, 64])
    offsets = torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)]).to(device)
    values = torch.randn(int(lens.sum()), 67, generator=gen).to(device)
    for reduction, twin in (
        (kernels.Reduction.SUM, reference.jagged_sum),
        (kernels.Reduction.MEAN, reference.jagged_mean),
        (kernels.Reduction.AMAX, reference.jagged_amax),
    ):
        got, want = kernels.jagged_reduce(values, offsets, reduction), twin(values, offsets)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, equal_nan=True)
    torch.testing.assert_close(
        kernels.jagged_softmax(values, offsets), reference.jagged_softmax(values, offsets), atol=1e-5, rtol=1e-5
    )
    torch.testing.assert_close(
        kernels.jagged_softmax_pool(values, offsets),
        reference.jagged_softmax_pool(values, offsets),
        atol=1e-5,
        rtol=1e-5,
    )
    padded = kernels.jagged_to_padded(values, offsets, 1030, -1.5)
    assert torch.equal(padded, reference.to_padded(values, offsets, 1030, -1.5))
    assert torch.equal(kernels.jagged_from_padded(padded, offsets, values.shape[0]), values)
    print(f"{device.type}: jagged kernels ({kernels.kernel_path(device).value}) match reference.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="eager", help="subclassaot backend for the compiled rows")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--blocks", default=",".join(BLOCKS), help=f"comma-separated subset of {','.join(BLOCKS)}")
    args = parser.parse_args()
    blocks = frozenset(args.blocks.split(","))
    if not blocks <= set(BLOCKS):
        parser.error(f"--blocks: unknown block(s) {sorted(blocks - set(BLOCKS))}")
    lens = lengths()
    print(
        f"batch {BATCH}, features {FEATURES}, lengths mean {lens.float().mean():.1f} max {int(lens.max())} "
        f"(total {int(lens.sum())} vs padded {BATCH * MAX_LEN} positions)"
    )
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    for device in devices:
        if device.type == "cuda":
            check_kernels(device)
        print(f"\n{device.type}:\n| block | time (ms) | peak memory (MiB) |\n|---|---:|---:|")
        for r in run_device(device, args.backend, args.repeat, blocks):
            print(f"| {r.name} | {r.ms:.2f} | {r.peak_mb:.1f} |")


if __name__ == "__main__":
    main()
