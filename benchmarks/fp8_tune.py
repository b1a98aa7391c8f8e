"""Tune the FP8 kernels' launch configs on a CUDA GPU: check each candidate against reference.py, then time it.

Run: `python -m benchmarks.fp8_tune [--m 8192 --k 8192 --n 8192 --iters 30] [--only KERNEL]` (CUDA only; it says so and exits
without one). Prints, per kernel, every candidate `LaunchConfig` change with its median time and the figure the
issue's targets use (quantize: % of a bf16 copy's bandwidth; scaled_mm: TFLOP/s and x torch._scaled_mm). The
winners become `kernels.GPU_CONFIG`; see Note [FP8 Launch Configs].
"""

from __future__ import annotations

import argparse
import dataclasses
from functools import partial

import torch

from benchmarks.fp8 import E4M3, bench_ms
from subclasses.fp8 import kernels, reference
from subclasses.fp8.reference import Granularity


def _mismatches(got: torch.Tensor, want: torch.Tensor) -> int:
    return int((got.view(torch.uint8) != want.view(torch.uint8)).sum())


def tune_quantize(m: int, k: int, iters: int) -> None:
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(x)
    copy_gbs = 4 * x.numel() / bench_ms(lambda: dst.copy_(x), iters, graph=True) / 1e6
    print(f"\nquantize ({m}, {k}) bf16 -> e4m3; bf16 copy {copy_gbs:.0f} GB/s (read + write)")
    ref = {g: reference.quantize(x, E4M3, g) for g in Granularity}
    base = kernels.GPU_CONFIG
    candidates = [
        ("default", base),
        *((f"block_size={b} warps={w}", dataclasses.replace(base, block_size=b, elementwise_warps=w))
          for b in (1024, 2048, 4096, 8192) for w in (4, 8, 16)),
        *((f"one_pass_elements={e}", dataclasses.replace(base, one_pass_elements=e)) for e in (4096, 16384, 32768)),
        ("two-pass rowwise", dataclasses.replace(base, one_pass_max_n=0)),
        ("forward cast order", dataclasses.replace(base, reverse_cast=False)),
    ]  # fmt: skip
    for granularity in Granularity:
        for name, cfg in candidates:
            data, scale = kernels.quantize(x, E4M3, granularity, config=cfg)
            bad = _mismatches(data, ref[granularity][0]) + int((scale != ref[granularity][1]).sum())
            ms = bench_ms(partial(kernels.quantize, x, E4M3, granularity, config=cfg), iters, graph=True)
            gbs = 3 * x.numel() / ms / 1e6
            print(
                f"  {granularity.value:<10} {name:<32} {ms:8.4f} ms {gbs:7.0f} GB/s {100 * gbs / copy_gbs:5.1f}% "
                f"of copy  mismatches vs reference: {bad}"
            )


def tune_cast_transpose(m: int, k: int, iters: int) -> None:
    """The fused cast-transpose's tiles (Note [Fused Cast Transpose]); its GPU_CONFIG tiles start untuned."""
    from subclasses.fp8 import cast_transpose

    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(x)
    copy_gbs = 4 * x.numel() / bench_ms(lambda: dst.copy_(x), iters, graph=True) / 1e6
    print(f"\ncast_transpose ({m}, {k}) bf16 -> e4m3 twice; bf16 copy {copy_gbs:.0f} GB/s (read + write)")
    ref = {g: reference.cast_transpose(x, E4M3, g) for g in Granularity}
    base = kernels.GPU_CONFIG
    candidates = [
        (f"tile {bm}x{bn} warps={w}", dataclasses.replace(base, ct_block_m=bm, ct_block_n=bn, elementwise_warps=w))
        for bm in (32, 64, 128) for bn in (32, 64, 128) for w in (4, 8)
    ]  # fmt: skip
    for granularity in Granularity:
        for name, cfg in candidates:
            data, data_t, scale = cast_transpose.cast_transpose(x, E4M3, granularity, config=cfg)
            want = ref[granularity]
            bad = _mismatches(data, want[0]) + _mismatches(data_t, want[1]) + int((scale != want[2]).sum())
            ms = bench_ms(partial(cast_transpose.cast_transpose, x, E4M3, granularity, config=cfg), iters, graph=True)
            gbs = 4 * x.numel() / ms / 1e6  # read 2 B, write 1 B twice
            print(
                f"  {granularity.value:<10} {name:<32} {ms:8.4f} ms {gbs:7.0f} GB/s {100 * gbs / copy_gbs:5.1f}% "
                f"of copy  mismatches vs reference: {bad}"
            )


def tune_scaled_mm(m: int, k: int, n: int, iters: int, granularity: Granularity, *, accumulation: bool) -> None:
    flops = 2 * m * k * n
    a, sa = kernels.quantize(torch.randn(m, k, device="cuda"), E4M3, granularity)
    bt, sbt = kernels.quantize(torch.randn(n, k, device="cuda"), E4M3, granularity)
    b, sb = bt.t(), sbt.t()
    exact = (a.double() @ b.double()) / (sa.double() * sb.double())

    def err(t: torch.Tensor) -> float:
        return float((t.double() - exact).norm() / exact.norm())

    ia, ib = sa.reciprocal(), sb.reciprocal()  # torch._scaled_mm takes dequantizing scales
    print(f"\nscaled_mm ({m}, {k}) x ({k}, {n}) {granularity.value}, fp32 out; relative error vs an fp64 product")
    for fast in (False, True):
        ref = torch._scaled_mm(a, b, ia, ib, out_dtype=torch.float32, use_fast_accum=fast)
        ref_ms = bench_ms(
            partial(torch._scaled_mm, a, b, ia, ib, out_dtype=torch.bfloat16, use_fast_accum=fast), iters, graph=True
        )
        print(f"  torch._scaled_mm use_fast_accum={fast}: {flops / ref_ms / 1e9:.0f} TFLOP/s, rel err {err(ref):.1e}")
    base = kernels.GPU_CONFIG
    tiles = [(128, 256, 128, 8, 3), (256, 128, 128, 8, 3), (128, 128, 128, 8, 4), (128, 256, 64, 8, 4)]
    accumulations = [None, 128] if accumulation else [None]
    for bm, bn, bk, w, s in tiles:
        for imprecise in accumulations:
            cfg = dataclasses.replace(
                base, mm_block_m=bm, mm_block_n=bn, mm_tensorwise_block_mn=(bm, bn), mm_block_k=bk, mm_warps=w, mm_stages=s,
                mm_max_imprecise_acc=imprecise,
            )  # fmt: skip
            name = f"{bm}x{bn}x{bk} warps={w} stages={s} imprecise_acc={imprecise}"
            try:
                got = kernels.scaled_mm(a, b, sa, sb, torch.float32, config=cfg)
            except Exception as e:  # a config the compiler rejects (e.g. out of shared memory): say so, go on
                print(f"  {name:<64} failed: {type(e).__name__}: {str(e)[:120]}")
                continue
            ms = bench_ms(partial(kernels.scaled_mm, a, b, sa, sb, torch.bfloat16, config=cfg), iters, graph=True)
            print(f"  {name:<64} {ms:8.4f} ms {flops / ms / 1e9:7.0f} TFLOP/s  rel err {err(got):.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=8192)
    parser.add_argument("--k", type=int, default=8192)
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--only", choices=["quantize", "cast_transpose", "scaled_mm"], help="tune one kernel only")
    parser.add_argument("--accumulation", action="store_true", help="scaled_mm: also time precise accumulation")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to tune (the kernels' CPU correctness is `python benchmarks/fp8.py`)")
        return
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    if args.only in (None, "quantize"):
        tune_quantize(args.m, args.k, args.iters)
    if args.only in (None, "cast_transpose"):
        tune_cast_transpose(args.m, args.k, args.iters)
    if args.only in (None, "scaled_mm"):
        for granularity in Granularity:
            tune_scaled_mm(args.m, args.k, args.n, args.iters, granularity, accumulation=args.accumulation)


if __name__ == "__main__":
    main()
