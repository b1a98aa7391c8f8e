"""FP8: quantize bandwidth, scaled-matmul throughput and a Float8Linear training step, side by side with baselines.

Run: `python benchmarks/fp8.py [--m 8192 --k 8192 --n 8192 --iters 50] [--tables quantize,matmul,training]`.
On a CUDA GPU, one run prints three tables (`--tables` picks some):
  1. quantize (fused amax + scale + cast, bf16 -> e4m3; tensorwise and rowwise), the fused cast-transpose (both
     fp8 layouts from one read; Note [Fused Cast Transpose]) against quantize + a transposed copy, and dequantize,
     in GB/s of the minimal traffic (read the input once, write each output once) and as % of the bandwidth
     measured for a plain bf16 copy of the same tensor (`dst.copy_(src)`) in the same run;
  2. scaled matmul TFLOP/s: our Triton kernel (tensorwise, rowwise scales) vs `torch._scaled_mm` (same scales) vs
     a bf16 `torch.mm`;
  3. a training step (forward + backward) of Float8Linear (dynamic and delayed scaling; with the fused
     cast-transpose, the default, and with `fused_cast=False`, the unfused baseline) vs a bf16 nn.Linear.
Without CUDA it checks correctness only (kernels in Triton's interpreter against reference.py, Float8Linear against
nn.Linear) and says so: CPU timings of the interpreter mean nothing.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn

E4M3 = torch.float8_e4m3fn


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    name: str
    ms: float
    value: float  # GB/s or TFLOP/s, per table
    note: str = ""


def bench_ms(fn: Callable[[], object], iters: int, batches: int = 5, *, graph: bool = False) -> float:
    """Milliseconds per call of `fn` on the GPU: median over `batches` of `iters` back-to-back calls (CUDA events).

    `graph=False`: the calls are launched from Python; the host queues the next launch while the GPU runs the
    current one, so for long kernels the figure is the GPU's time, but for short ones it includes whatever host
    time per call (Python, custom-op dispatch, Triton's launcher) exceeds the GPU's.
    `graph=True`: the `iters` calls are captured once in a CUDA graph and the graph is replayed, so the figure is
    the kernels' own GPU time, with no host launch cost; this is how the kernel tables are measured.
    Warm-up first (it also compiles the Triton kernels).
    """
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    if graph:
        cuda_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(cuda_graph):
            for _ in range(iters):
                fn()
        run: Callable[[], object] = cuda_graph.replay
        run()
    else:

        def run() -> None:
            for _ in range(iters):
                fn()

    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]  # untyped in torch's stub
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / iters)
    return float(statistics.median(times))


def print_table(title: str, unit: str, rows: list[Row]) -> None:
    print(f"\n{title}")
    print(f"  {'':<40} {'ms':>9} {unit:>10}  note")
    for r in rows:
        print(f"  {r.name:<40} {r.ms:>9.4f} {r.value:>10.1f}  {r.note}")


def bandwidth_table(m: int, k: int, iters: int) -> list[Row]:
    from subclasses.fp8 import kernels

    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(x)
    copy_ms = bench_ms(lambda: dst.copy_(x), iters, graph=True)
    copy_gbs = 2 * x.numel() * 2 / copy_ms / 1e6
    data, scale = kernels.quantize_op(x, E4M3, "rowwise")
    rows = [Row(name="bf16 copy (reference bandwidth)", ms=copy_ms, value=copy_gbs, note="100%")]
    quantize_bytes = x.numel() * (2 + 1)  # read bf16, write e4m3 (scales are negligible)
    for granularity in ("tensorwise", "rowwise"):
        ms = bench_ms(partial(kernels.quantize_op, x, E4M3, granularity), iters, graph=True)
        gbs = quantize_bytes / ms / 1e6
        note = f"{100 * gbs / copy_gbs:.0f}% of copy"
        if granularity == "tensorwise":  # the amax pass reads x once more: 5 bytes per element actually move
            note += f" ({100 * gbs * 5 / 3 / copy_gbs:.0f}% counting the amax pass's read)"
        rows.append(Row(name=f"quantize {granularity}", ms=ms, value=gbs, note=note))
    ms = bench_ms(partial(kernels.dequantize_op, data, scale, torch.bfloat16), iters, graph=True)
    gbs = quantize_bytes / ms / 1e6
    rows.append(Row(name="dequantize rowwise", ms=ms, value=gbs, note=f"{100 * gbs / copy_gbs:.0f}% of copy"))
    return rows + cast_transpose_rows(x, iters, copy_gbs)


def cast_transpose_rows(x: torch.Tensor, iters: int, copy_gbs: float) -> list[Row]:
    """The fused cast-transpose vs what it replaces (quantize, then the launcher's transposed fp8 copy)."""
    from subclasses.fp8 import cast_transpose, kernels

    both_bytes = x.numel() * (2 + 1 + 1)  # read bf16, write e4m3 twice
    rows = []
    for granularity in ("tensorwise", "rowwise"):
        ms = bench_ms(partial(cast_transpose.cast_transpose_op, x, E4M3, granularity), iters, graph=True)
        gbs = both_bytes / ms / 1e6
        rows.append(Row(name=f"cast_transpose {granularity}", ms=ms, value=gbs, note=f"{100 * gbs / copy_gbs:.0f}%"))

        def unfused(granularity: str = granularity) -> None:
            data, _ = kernels.quantize_op(x, E4M3, granularity)
            data.t().contiguous()

        ms_unfused = bench_ms(unfused, iters, graph=True)
        rows.append(
            Row(
                name=f"quantize + transposed copy {granularity}",
                ms=ms_unfused,
                value=both_bytes / ms_unfused / 1e6,
                note=f"fused {ms_unfused / ms:.2f}x faster",
            )
        )
    return rows


def matmul_table(m: int, k: int, n: int, iters: int) -> list[Row]:
    from subclasses.fp8 import kernels

    a_hp = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b_hp = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)  # b = b_hp.t(): column-major, as _scaled_mm wants
    flops = 2 * m * k * n
    rows = [
        Row(
            name="bf16 torch.mm",
            ms=(ms := bench_ms(lambda: a_hp @ b_hp.t(), iters, graph=True)),
            value=flops / ms / 1e9,
        )
    ]
    for granularity in ("rowwise", "tensorwise"):
        a, sa = kernels.quantize_op(a_hp, E4M3, granularity)
        bt, sb_t = kernels.quantize_op(b_hp, E4M3, granularity)
        b, sb = bt.t(), sb_t.t() if granularity == "rowwise" else sb_t
        ms = bench_ms(partial(kernels.scaled_mm_op, a, b, sa, sb, torch.bfloat16), iters, graph=True)
        ours = Row(name=f"triton scaled_mm {granularity}", ms=ms, value=flops / ms / 1e9)
        rows.append(ours)
        inv_a, inv_b = sa.reciprocal(), sb.reciprocal()  # torch._scaled_mm takes dequantizing scales
        for fast in (True, False):  # ours accumulates like fast_accum=True; see Note [FP8 Dot Accumulation]
            name = f"torch._scaled_mm {granularity} fast_accum={fast}"
            try:
                ms = bench_ms(
                    partial(torch._scaled_mm, a, b, inv_a, inv_b, out_dtype=torch.bfloat16, use_fast_accum=fast),
                    iters,
                    graph=True,
                )
            except RuntimeError as e:  # e.g. no fp8 support on this GPU
                rows.append(Row(name=name, ms=float("nan"), value=float("nan"), note=str(e)[:60]))
                continue
            rows.append(Row(name=name, ms=ms, value=flops / ms / 1e9, note=f"ours {ms / ours.ms:.2f}x this"))
    return rows


def training_table(m: int, k: int, n: int, iters: int) -> list[Row]:
    from subclasses.fp8 import Float8Linear, ScalingType

    flops = 3 * 2 * m * k * n  # forward + two backward matmuls
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    base = nn.Linear(k, n, device="cuda", dtype=torch.bfloat16)
    modules: list[tuple[str, nn.Module]] = [("bf16 nn.Linear", base)]
    for scaling in ScalingType:
        for fused in (True, False):
            fp8 = Float8Linear.from_linear(base, scaling=scaling, fused_cast=fused)
            modules.append((f"Float8Linear {scaling.value}, {'fused' if fused else 'unfused'} casts", fp8))
    rows: list[Row] = []
    for name, module in modules:

        def step(module: nn.Module = module) -> None:
            module(x).backward(g)

        ms = bench_ms(step, iters)
        rows.append(Row(name=name, ms=ms, value=flops / ms / 1e9, note=f"{rows[0].ms / ms:.2f}x" if rows else "1.00x"))
    return rows


def check_correctness(device: torch.device) -> None:
    """Kernels against reference.py and Float8Linear against nn.Linear, on `device` (the CPU: Triton's interpreter).

    Raises AssertionError on a wrong result. On CUDA the kernels are compiled; quantize must still match the
    reference bit for bit (both divide with IEEE rounding and cast round-to-nearest-even).
    """
    from subclasses.fp8 import Float8Linear, kernels, reference
    from subclasses.fp8.reference import Granularity

    torch.manual_seed(0)
    shapes = [(37, 53), (29, 53)] if device.type == "cpu" else [(1031, 4133), (259, 4133), (3, 20000)]
    for shape in shapes:
        x = torch.randn(*shape, device=device)
        for granularity in Granularity:
            data, scale = kernels.quantize_op(x, E4M3, granularity.value)
            ref_data, ref_scale = reference.quantize(x, E4M3, granularity)
            assert torch.equal(data.view(torch.uint8), ref_data.view(torch.uint8)), (shape, granularity)
            assert torch.equal(scale, ref_scale), (shape, granularity)
            back = kernels.dequantize_op(data, scale, torch.float32)
            assert torch.equal(back, reference.dequantize(data, scale, torch.float32)), (shape, granularity)
    # torch._scaled_mm wants K and N divisible by 16; 4128 is not a multiple of the GPU's K tile (128).
    m, n, k = (37, 29, 53) if device.type == "cpu" else (1031, 272, 4128)
    a, sa = kernels.quantize_op(torch.randn(m, k, device=device), E4M3, "rowwise")
    bt, sb = kernels.quantize_op(torch.randn(n, k, device=device), E4M3, "rowwise")
    got = kernels.scaled_mm_op(a, bt.t(), sa, sb.t(), torch.float32)
    if device.type == "cpu":
        want = reference.scaled_mm(a, bt.t(), sa, sb.t(), torch.float32)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)
    else:
        # fp8 tensor cores accumulate with less than fp32 precision (Note [FP8 Dot Accumulation]): measure the
        # error against an fp64 product and hold it to torch._scaled_mm's with the same accumulation (fast).
        exact = (a.double() @ bt.t().double()) / (sa.double() * sb.t().double())
        inv_a, inv_b = sa.reciprocal(), sb.t().reciprocal()
        errors = {"ours": float((got.double() - exact).norm() / exact.norm())}
        for fast in (True, False):
            theirs = torch._scaled_mm(a, bt.t(), inv_a, inv_b, out_dtype=torch.float32, use_fast_accum=fast)
            errors[f"torch._scaled_mm fast_accum={fast}"] = float((theirs.double() - exact).norm() / exact.norm())
        print("scaled_mm relative error vs an fp64 product: " + ", ".join(f"{k} {v:.2e}" for k, v in errors.items()))
        assert errors["ours"] <= 2 * errors["torch._scaled_mm fast_accum=True"], errors
    check_cast_transpose(device, shapes)
    linear = nn.Linear(k, n, device=device)
    x = torch.randn(m, k, device=device)
    with torch.no_grad():
        out, ref = Float8Linear.from_linear(linear)(x), linear(x)
    sqnr = float(20 * torch.log10(ref.norm() / (out - ref).norm()))
    assert sqnr > 25, sqnr
    check_fused_linear(device, m, k, n)
    print(f"kernel path on {device.type}: {kernels.kernel_path(device).value}")
    print(f"quantize (tensorwise, rowwise) at {shapes}: bit-exact vs reference.py; dequantize: exact")
    print(f"scaled_mm ({m}, {k}) x ({k}, {n}) rowwise x colwise: matches reference.py")
    print(f"cast_transpose (tensorwise, rowwise, delayed; e4m3, e5m2) at {shapes}: bit-exact vs reference.py")
    print("Float8Linear training step, fused vs unfused casts (dynamic, delayed): outputs and grads identical")
    print(f"Float8Linear vs nn.Linear output SQNR: {sqnr:.1f} dB")


def check_cast_transpose(device: torch.device, shapes: list[tuple[int, int]]) -> None:
    """The fused cast-transpose against reference.py, bit for bit (same arithmetic as quantize)."""
    from subclasses.fp8 import cast_transpose, reference
    from subclasses.fp8.reference import Granularity

    def same(got: tuple[torch.Tensor, ...], want: tuple[torch.Tensor, ...]) -> bool:
        def bits(t: torch.Tensor) -> torch.Tensor:
            return t.view(torch.uint8) if t.element_size() == 1 else t

        return all(torch.equal(bits(g), bits(w)) for g, w in zip(got, want, strict=True))

    history = torch.rand(16, device=device) * 4
    for shape in shapes:
        x = torch.randn(*shape, device=device, dtype=torch.bfloat16) * 3
        for fp8_dtype in (E4M3, torch.float8_e5m2):
            for granularity in Granularity:
                got = cast_transpose.cast_transpose_op(x, fp8_dtype, granularity.value)
                assert same(got, reference.cast_transpose(x, fp8_dtype, granularity)), (shape, granularity)
            got_d = cast_transpose.cast_transpose_delayed_op(x, history, fp8_dtype)
            assert same(got_d, reference.cast_transpose_delayed(x, history, fp8_dtype)), (shape, "delayed")


def check_fused_linear(device: torch.device, m: int, k: int, n: int) -> None:
    """One training step of Float8Linear with and without the fused casts: identical outputs and gradients."""
    from subclasses.fp8 import Float8Linear, ScalingType

    for scaling in ScalingType:
        base = nn.Linear(k, n, device=device, dtype=torch.bfloat16)
        results = []
        for fused in (True, False):
            linear = Float8Linear.from_linear(copy.deepcopy(base), scaling=scaling, fused_cast=fused)
            torch.manual_seed(0)
            x = torch.randn(m, k, device=device, dtype=torch.bfloat16, requires_grad=True)
            out = linear(x)
            out.backward(torch.ones_like(out))
            assert x.grad is not None and linear.weight.grad is not None
            results.append((out, x.grad, linear.weight.grad))
        for got, want in zip(results[0], results[1], strict=True):
            assert torch.equal(got, want), scaling


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--m", type=int, default=8192)
    parser.add_argument("--k", type=int, default=8192)
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--iters", type=int, default=50)
    parser.add_argument(
        "--tables", default="quantize,matmul,training", help="comma-separated subset of quantize,matmul,training"
    )
    args = parser.parse_args()
    tables = set(args.tables.split(","))
    if not tables <= {"quantize", "matmul", "training"}:
        parser.error(f"--tables: unknown table(s) {sorted(tables - {'quantize', 'matmul', 'training'})}")
    if not torch.cuda.is_available():
        # Kernels are defined when subclasses.fp8 is imported: set the interpreter before that (a script's own
        # choice; the library never reads the variable, see Note [Kernel Dispatch]).
        os.environ.setdefault("TRITON_INTERPRET", "1")
        check_correctness(torch.device("cpu"))
        print("no CUDA device: checked correctness only; run on a GPU for the bandwidth / TFLOP/s tables")
        return
    print(
        f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, m={args.m} k={args.k} n={args.n}, "
        f"median of {args.iters}"
    )
    check_correctness(torch.device("cuda"))
    if "quantize" in tables:
        title = f"quantize / cast_transpose / dequantize, ({args.m}, {args.k}) bf16"
        print_table(title, "GB/s", bandwidth_table(args.m, args.k, args.iters))
    if "matmul" in tables:
        print_table("scaled matmul", "TFLOP/s", matmul_table(args.m, args.k, args.n, args.iters))
    if "training" in tables:
        print_table("training step (fwd + bwd)", "TFLOP/s", training_table(args.m, args.k, args.n, args.iters))


if __name__ == "__main__":
    main()
