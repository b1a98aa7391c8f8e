"""First-call time on small real models, subclassaot.compile vs torch.compile(aot_eager), side by side (issue 29).

Run: `python benchmarks/compile_time.py [--rounds N] [--inductor] [--models a,b]`; `--profile MODEL:MODE` prints a
cProfile of our first call instead (sorted by cumulative time, then the pipeline's stages); `--stages MODEL:MODE`
the CPU time of each pipeline stage over `--rounds` fresh compiles, timed without a profiler (which inflates Python
code several times over C code, and so misstates the shares). Models: a
TransformerEncoderLayer (d_model 16, 2 heads, ff 32, dropout 0.1, input (2, 5, 16)), a 6-layer MLP (Linear(32, 32) +
ReLU x 6, input (8, 32)), a conv block with BatchNorm (Conv2d 3 -> 4, BatchNorm2d, ReLU, MaxPool, Linear; input (2,
3, 4, 4)), and GPT-2 from a tiny transformers config (2 layers, width 32, 2 heads, vocab 100, random weights, no
download; benchmarks/models.py). Modes: eval (`model.eval()`, the forward under `torch.no_grad()`: an inference
graph) and train (`model.train()`, forward, `out.float().pow(2).mean()`, backward: forward and backward graphs).

First call: wall time of the first call of a freshly compiled copy of one seeded model (train: forward and
backward), `torch._dynamo.reset()` before each torch.compile. Per model and mode the compilers take turns for
`--rounds` rounds after one untimed round (which pays the model's one-time costs, such as the first use of an op's
meta function, for both); the minimum is reported, of the wall time and of the process's CPU time (less disturbed by
other work on a shared machine). Ours runs backend "eager", torch.compile "aot_eager" (no code generation on either
side); `--inductor` adds both on inductor.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import functools
import importlib
import os
import pstats
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch._dynamo
from torch import nn

# The checkout this script lives in, not whichever one the environment's editable install points at.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import subclassaot
from benchmarks.models import TinyGPT2
from tests.pipeline.test_model_zoo import ZOO

T = torch.Tensor
Inputs = Callable[[], tuple[T, ...]]


def mlp6() -> nn.Module:
    layers: list[nn.Module] = []
    for _ in range(6):
        layers += [nn.Linear(32, 32), nn.ReLU()]
    return nn.Sequential(*layers)


MODELS: dict[str, tuple[Callable[[], nn.Module], Inputs]] = {
    "transformer_encoder_layer": ZOO["transformer_encoder_layer"],
    "mlp6": (mlp6, lambda: (torch.randn(8, 32),)),
    "conv_batchnorm": ZOO["conv_batchnorm"],
    "gpt2_tiny": (TinyGPT2, lambda: (torch.randint(0, 100, (2, 16)), torch.ones(2, 16, dtype=torch.int64))),
}
MODES = ("eval", "train")


def compiled(compiler: str, model: nn.Module) -> Callable[..., object]:
    tool, backend = compiler.split(" ")
    if tool == "ours":
        return subclassaot.compile(model, backend=backend)
    torch._dynamo.reset()
    return torch.compile(model, backend=backend)


def first_call_s(name: str, mode: str, compiler: str) -> tuple[float, float]:
    """Wall and CPU seconds of the first call of a fresh compile of a fresh copy of the model (train: forward and
    backward). CPU time: this process's, so less disturbed by other work on a shared machine (but without
    inductor's compile workers, which are other processes)."""
    make_model, make = MODELS[name]
    torch.manual_seed(0)
    model = make_model().train(mode == "train")
    run = compiled(compiler, model)
    args = make()
    start, cpu = time.perf_counter(), time.process_time()
    if mode == "train":
        out = run(*args)
        assert isinstance(out, torch.Tensor)
        torch.autograd.backward(out.float().pow(2).mean())
    else:
        with torch.no_grad():
            run(*args)
    return time.perf_counter() - start, time.process_time() - cpu


def warm_up(compilers: list[str]) -> None:
    """Pay one-time costs (imports, first traces) outside the timed compiles."""
    for compiler in compilers:
        for mode in MODES:
            model = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).train(mode == "train")
            out = compiled(compiler, copy.deepcopy(model))(torch.randn(2, 4))
            if mode == "train":
                assert isinstance(out, torch.Tensor)
                torch.autograd.backward(out.sum())


def measure(names: list[str], compilers: list[str], rounds: int) -> None:
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), load average at start "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}; first call: min of {rounds} rounds, wall s (CPU s)\n"
    )
    heads = " | ".join(compilers)
    print(f"| model | mode | {heads} | ours/tc wall (CPU) |\n|---|---|{'---:|' * len(compilers)}---:|")
    for name in names:
        for mode in MODES:
            times: dict[str, list[tuple[float, float]]] = {c: [] for c in compilers}
            failed: dict[str, str] = {}
            for round_ in range(rounds + 1):
                for compiler in compilers:
                    if compiler in failed:
                        continue
                    try:
                        took = first_call_s(name, mode, compiler)
                    except Exception as e:  # a compiler that fails on a model is a cell, not the end of the run
                        failed[compiler] = f"fails: {type(e).__name__}: {str(e).splitlines()[0][:60]}"
                        continue
                    if round_:
                        times[compiler].append(took)
            best = {c: (min(w for w, _ in t), min(u for _, u in t)) for c, t in times.items() if t}
            cells = [failed.get(c) or f"{best[c][0]:.3f} ({best[c][1]:.3f})" for c in compilers]
            ratios = []
            for backend, theirs in (("eager", "aot_eager"), ("inductor", "inductor")):
                mine, other = best.get(f"ours {backend}"), best.get(f"tc {theirs}")
                if mine and other:
                    ratios.append(f"{mine[0] / other[0]:.2f}x ({mine[1] / other[1]:.2f}x)")
            print(f"| {name} | {mode} | {' | '.join(cells)} | {' / '.join(ratios) or 'n/a'} |", flush=True)
    print(f"\nload average at end {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


STAGES = (
    "api.py:*(_compile_over)",
    "fakify.py:*(fakify_inputs)",
    "desugar.py:*(dense_layout)",
    "analyze.py:*(analyze)",
    "functional_run.py:*(run_functional)",
    "trace.py:*(trace_inference)",
    "joint_backward.py:*(trace_backward)",
    "joint.py:*(forward_example)",
    "joint.py:*(trace_joint)",
    "partition.py:*(partition_joint)",
    "guards.py:*(build_guards)",
    "ambient_modes.py:*(torch_function_trial)",
    "api.py:*(_compile_graph)",
    "call.py:*(make_runner)",
)


def profile(name: str, mode: str, top: int) -> None:
    """cProfile of our first call (backend eager) on one model, after the same warm-up as the timed runs."""
    first_call_s(name, mode, "ours eager")  # the model's one-time costs, as the untimed round pays them
    profiler = cProfile.Profile()
    profiler.enable()
    took, _ = first_call_s(name, mode, "ours eager")
    profiler.disable()
    print(f"{name} {mode}: first call {took:.3f} s (under the profiler)")
    stats = pstats.Stats(profiler)
    stats.sort_stats("cumulative").print_stats(top)
    print("Pipeline stages (calls, cumulative s):")
    for key, value in sorted(stats.stats.items(), key=lambda kv: -kv[1][3]):  # type: ignore[attr-defined]
        filename, _, function = key
        where = f"{Path(filename).name}:*({function})"
        if where in STAGES and "subclassaot" in filename:
            print(f"  {where:45s} {value[1]:4d} {value[3]:8.3f}")


# (module, attribute, stage): each timed where the pipeline calls it (a name imported into a module is that module's)
STAGE_TIMERS = (
    ("subclassaot.api", "_compile_any", "whole compile"),
    ("subclassaot.api", "fakify_inputs", "fakify"),
    ("subclassaot.api", "_Program.analyze", "analysis run (alone)"),
    ("subclassaot.api", "_Program.analyze_and_trace", "analysis and trace, one run"),
    ("subclassaot.api", "_trace_inference", "inference trace (its own run)"),
    ("subclassaot.api", "records_as_eager", "native path's record check"),
    ("subclassaot.api", "trace_backward", "backward: forward example, joint, partition"),
    ("subclassaot.pipeline.backward_trace.joint_backward", "forward_example", "  forward example"),
    ("subclassaot.pipeline.backward_trace.graph", "trace_joint_views", "  joint trace"),
    ("subclassaot.pipeline.backward_trace.input_values", "trace_joint_views", "  joint trace"),
    ("subclassaot.pipeline.joint", "_grads", "    its autograd.grad"),
    ("subclassaot.pipeline.backward_trace.graph", "partition_joint", "  partition"),
    ("subclassaot.api", "eager_saves", "eager saves probe"),
    ("subclassaot.pipeline.backward_probe", "_graded_together", "  its grading backward"),
    ("subclassaot.pipeline.functional_run", "functional_alias", "originals (every functional run)"),
    ("subclassaot.pipeline.functional_run", "_clone_inputs", "input clones (every functional run)"),
    ("subclassaot.api", "_compile_graph", "backend (forward graph)"),
    ("subclassaot.api", "_entry_guards", "guards"),
    ("subclassaot.api", "make_runner", "runner"),
    ("subclassaot.pipeline.python_state", "watched_now", "Python state, before"),
    ("subclassaot.pipeline.python_state", "snapshot", "Python state, after"),
)


@contextmanager
def _stage_timers(spent: dict[str, float]) -> Iterator[None]:
    """Each STAGE_TIMERS callable wrapped to add its CPU seconds to `spent[stage]` (a call inside another of the same
    stage counts once); restored on exit."""
    patched: list[tuple[object, str, object]] = []

    def timed(fn: Callable[..., object], stage: str) -> Callable[..., object]:
        depth = [0]

        @functools.wraps(fn)
        def run(*args: object, **kwargs: object) -> object:
            depth[0] += 1
            start = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                depth[0] -= 1
                if not depth[0]:
                    spent[stage] = spent.get(stage, 0.0) + time.process_time() - start

        return run

    try:
        for module, attribute, stage in STAGE_TIMERS:
            owner: object = importlib.import_module(module)
            *path, name = attribute.split(".")
            for part in path:
                owner = getattr(owner, part)
            original = getattr(owner, name)
            patched.append((owner, name, original))
            setattr(owner, name, timed(original, stage))
        yield
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


def stages(name: str, mode: str, rounds: int) -> None:
    """The median CPU ms of each pipeline stage over `rounds` first calls of fresh compiles (after the untimed one)."""
    first_call_s(name, mode, "ours eager")  # the model's one-time costs, as the untimed round pays them
    calls: list[float] = []
    spent: list[dict[str, float]] = []
    for _ in range(rounds):
        spent.append({})
        with _stage_timers(spent[-1]):
            calls.append(first_call_s(name, mode, "ours eager")[1])
    print(
        f"{name} {mode}: first call, CPU ms: min {min(calls) * 1e3:.1f}, median {statistics.median(calls) * 1e3:.1f} "
        f"({rounds} fresh compiles; load average {os.getloadavg()[0]:.2f})\n"
    )
    whole = statistics.median(s.get("whole compile", 0.0) for s in spent)
    print("| stage | median CPU ms | of the compile |\n|---|---:|---:|")
    for _, _, stage in STAGE_TIMERS:
        ms = statistics.median(s.get(stage, 0.0) for s in spent)
        if ms:
            print(f"| {stage} | {ms * 1e3:.1f} | {ms / whole:.0%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per model, mode and compiler (min)")
    parser.add_argument("--inductor", action="store_true", help="add ours and torch.compile on inductor")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset of " + ",".join(MODELS))
    parser.add_argument("--profile", metavar="MODEL:MODE", help="profile our first call on one model instead")
    parser.add_argument("--top", type=int, default=60, help="rows of the profile")
    parser.add_argument("--stages", metavar="MODEL:MODE", help="CPU time per pipeline stage (--rounds compiles)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    compilers = ["ours eager", "tc aot_eager"] + (["ours inductor", "tc inductor"] if args.inductor else [])
    warm_up(compilers if not (args.profile or args.stages) else ["ours eager"])
    if args.stages:
        name, mode = args.stages.split(":")
        stages(name, mode, args.rounds)
        return
    if args.profile:
        name, mode = args.profile.split(":")
        profile(name, mode, args.top)
        return
    measure(args.models.split(","), compilers, args.rounds)


if __name__ == "__main__":
    main()
