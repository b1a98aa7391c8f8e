"""Per-call overhead and first-call compile time, subclassaot vs torch.compile, on tiny inputs (issue 4).

Run: `python benchmarks/overhead.py [--quick]`. Three functions on (2, 2) fp32 inputs: (a) plain `x + 1`,
(b) PairTensor `p * 2`, (c) PairTensor with an input mutation and an output aliasing the input
(`p.add_(1); return p.view(-1)`). Each goes through `subclassaot.compile(backend="eager")` and through
`torch.compile(backend="aot_eager", fullgraph=True)`: both run the same aten graph with no code generation, so the
difference is the wrapper around the graph (guards, unwrap, epilogue, wrap). A third side,
`torch.compile(backend="subclassaot")` (our Dynamo backend, inner backend eager), is compared with aot_eager too. `torch._dynamo.reset()` runs before
every torch.compile. Per-call time: median over repeats of the mean time of a batch of calls, gc off; per-call
overhead = that time minus the eager time of the same function. Compile time: the first call of a freshly compiled
function (median over a few compiles, after a warm-up compile of each toolchain that pays one-time imports).
"""

from __future__ import annotations

import argparse
import functools
import gc
import statistics
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch._dynamo

import subclassaot
from subclassaot.tools.dynamo_backend import subclassaot_backend
from subclasses.pair import PairTensor

Fn = Callable[[torch.Tensor], torch.Tensor]
Compiler = Callable[[Fn], Fn]


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    batch: int  # calls per timed batch
    repeats: int  # timed batches; the median batch is reported
    compiles: int  # fresh compiles timed for the compile-time figure


FULL = Budget(batch=200, repeats=21, compiles=5)
QUICK = Budget(batch=20, repeats=3, compiles=1)


def plain_add(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def pair_mul(p: torch.Tensor) -> torch.Tensor:
    return p * 2


def pair_mutate_view(p: torch.Tensor) -> torch.Tensor:
    p.add_(1)
    return p.view(-1)


CASES: tuple[tuple[str, Fn, Callable[[], torch.Tensor]], ...] = (
    ("(a) plain x + 1", plain_add, lambda: torch.randn(2, 2)),
    ("(b) PairTensor p * 2", pair_mul, lambda: PairTensor.from_tensor(torch.randn(2, 2))),
    ("(c) PairTensor add_ + view", pair_mutate_view, lambda: PairTensor.from_tensor(torch.randn(2, 2))),
)


def ours(fn: Fn) -> Fn:
    return subclassaot.compile(fn, backend="eager")


def theirs(fn: Fn) -> Fn:
    torch._dynamo.reset()
    return torch.compile(fn, backend="aot_eager", fullgraph=True)


def via_dynamo(fn: Fn) -> Fn:
    """`torch.compile(fn, backend="subclassaot")` (the function behind the entry point), inner backend eager: Dynamo's
    guards and frame around our runtime, beside `backend="aot_eager"` (Dynamo's guards around AOTAutograd's)."""
    torch._dynamo.reset()
    compiled: Fn = torch.compile(fn, backend=subclassaot_backend, fullgraph=True, options={"backend": "eager"})
    return compiled


def dense(fn: Fn) -> Fn:
    """The same work on plain tensors: `fn` on each inner tensor of a PairTensor (the aten floor of both graphs)."""

    def run(x: torch.Tensor) -> torch.Tensor:
        if isinstance(x, PairTensor):
            fn(x.a)
            return fn(x.b)
        return fn(x)

    return run


def per_call_us(fns: dict[str, tuple[Fn, torch.Tensor]], budget: Budget) -> dict[str, float]:
    """Per function: the median over `budget.repeats` rounds of the mean time of one call in a batch, in microseconds.

    The functions take turns within each round (in a rotating order), so that load from other work on the machine
    falls on all of them alike.
    """
    names = list(fns)
    for fn, x in fns.values():
        for _ in range(max(3, budget.batch // 10)):
            fn(x)
    times: dict[str, list[float]] = {name: [] for name in names}
    gc.collect()
    gc.disable()
    try:
        for round_ in range(budget.repeats):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                fn, x = fns[name]
                start = time.perf_counter()
                for _ in range(budget.batch):
                    fn(x)
                times[name].append((time.perf_counter() - start) / budget.batch)
    finally:
        gc.enable()
    return {name: statistics.median(t) * 1e6 for name, t in times.items()}


def compile_ms(
    compilers: dict[str, Compiler], fn: Fn, make: Callable[[], torch.Tensor], budget: Budget
) -> dict[str, float]:
    """Per compiler: the median first-call time of a fresh compile, compilers taking turns, in milliseconds."""
    times: dict[str, list[float]] = {name: [] for name in compilers}
    for _ in range(budget.compiles):
        for name, compiler in compilers.items():
            compiled, x = compiler(fn), make()
            start = time.perf_counter()
            compiled(x)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if isinstance(a, PairTensor) and isinstance(b, PairTensor):
        return torch.equal(a.a, b.a) and torch.equal(a.b, b.b)
    return type(a) is type(b) and torch.equal(a, b)


def check(compiler: Compiler, fn: Fn, make: Callable[[], torch.Tensor]) -> str:
    """'' if the compiled function matches eager on a fresh input (output, mutated input, aliasing), else why not."""
    torch.manual_seed(0)
    x_ref = make()
    torch.manual_seed(0)
    x = make()
    ref, out = fn(x_ref), compiler(fn)(x)
    if not same(ref, out) or not same(x_ref, x):
        return "result differs from eager"
    if ref._base is x_ref and out._base is not x:
        return "output is not a view of the input as in eager"
    return ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Side:
    call_us: float
    compile_ms: float
    note: str  # '' when the figures are valid; otherwise why they are missing or suspect


def failure(e: Exception) -> str:
    reason = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {reason[:160]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    name: str
    eager_us: float
    floor_us: float
    ours: Side
    theirs: Side
    dynamo: Side  # torch.compile(backend="subclassaot")


def measure(name: str, fn: Fn, make: Callable[[], torch.Tensor], budget: Budget) -> Row:
    """Eager, dense floor, ours and torch.compile for one function; a side that fails is reported, not raised."""
    compilers: dict[str, Compiler] = {"ours": ours, "theirs": theirs, "dynamo": via_dynamo}
    fns: dict[str, tuple[Fn, torch.Tensor]] = {"eager": (fn, make()), "floor": (dense(fn), make())}
    notes = {}
    for side, compiler in list(compilers.items()):
        try:
            notes[side] = check(compiler, fn, make)
            fns[side] = (compiler(fn), make())
            fns[side][0](fns[side][1])
        except Exception as e:  # a failure is a result here: report it and go on with the other side
            notes[side] = failure(e)
            del compilers[side]
            fns.pop(side, None)
    calls = per_call_us(fns, budget)
    compiles = compile_ms(compilers, fn, make, budget)
    nan = float("nan")
    sides = {
        side: Side(call_us=calls.get(side, nan), compile_ms=compiles.get(side, nan), note=notes[side])
        for side in ("ours", "theirs", "dynamo")
    }
    return Row(
        name=name,
        eager_us=calls["eager"],
        floor_us=calls["floor"],
        ours=sides["ours"],
        theirs=sides["theirs"],
        dynamo=sides["dynamo"],
    )


def warm_up() -> None:
    """Pay one-time costs (imports, dispatcher caches) outside the timed compiles."""
    for compiler in (ours, theirs, via_dynamo):
        for _, fn, make in CASES:
            try:
                compiler(fn)(make())
            except Exception:  # measured (and reported) later
                pass


def fmt(value: float) -> str:
    return "n/a" if value != value else f"{value:.1f}"


def ratio(mine: float, other: float) -> str:
    if mine != mine or other != other:
        return "n/a"
    if other <= 0 or mine < 0:
        return "n/a (<= 0)"
    return f"{mine / other:.2f}x"


def print_tables(rows: list[Row], budget: Budget) -> None:
    print(
        f"torch {torch.__version__}, 1 thread; per call: median of {budget.repeats} batches of {budget.batch} calls; "
        f"compile: median of {budget.compiles} first calls; ratio = ours / torch.compile\n"
    )
    print("Per call (us); dense floor = the function run on the inner plain tensors (what both graphs compute):")
    print(
        "| function | eager | dense floor | ours | torch.compile | ours / torch.compile |\n|---|---:|---:|---:|---:|---:|"
    )
    for r in rows:
        print(
            f"| {r.name} | {r.eager_us:.1f} | {r.floor_us:.1f} | {fmt(r.ours.call_us)} | {fmt(r.theirs.call_us)} | "
            f"{ratio(r.ours.call_us, r.theirs.call_us)} |"
        )
    print("\nPer-call overhead (us) = compiled - eager, and compiled - dense floor:")
    print("| function | ours - eager | tc - eager | ratio | ours - floor | tc - floor | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        mine, other = r.ours.call_us - r.eager_us, r.theirs.call_us - r.eager_us
        mine_f, other_f = r.ours.call_us - r.floor_us, r.theirs.call_us - r.floor_us
        print(
            f"| {r.name} | {fmt(mine)} | {fmt(other)} | {ratio(mine, other)} | {fmt(mine_f)} | {fmt(other_f)} | "
            f"{ratio(mine_f, other_f)} |"
        )
    print("\nFirst-call compile time (ms):")
    print("| function | ours | torch.compile | ratio |\n|---|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r.name} | {fmt(r.ours.compile_ms)} | {fmt(r.theirs.compile_ms)} | "
            f"{ratio(r.ours.compile_ms, r.theirs.compile_ms)} |"
        )
    print('\ntorch.compile(backend="subclassaot") vs torch.compile(backend="aot_eager"), per call (us):')
    print(
        "| function | backend=subclassaot | backend=aot_eager | ratio | subclassaot.compile |\n|---|---:|---:|---:|---:|"
    )
    for r in rows:
        print(
            f"| {r.name} | {fmt(r.dynamo.call_us)} | {fmt(r.theirs.call_us)} | "
            f"{ratio(r.dynamo.call_us, r.theirs.call_us)} | {fmt(r.ours.call_us)} |"
        )
    print("\ntargets: per-call overhead ratio <= 0.5x, compile ratio <= 0.5x; backend=subclassaot per call <= 1.0x")
    for r in rows:
        for who, side in (("ours", r.ours), ("torch.compile", r.theirs), ("backend=subclassaot", r.dynamo)):
            if side.note:
                print(f"note: {r.name}, {who}: {side.note}")


# ---------------------------------------------------------------------------------------------------------------
# Guard time alone (issue 31): what CompiledFunction.__call__ does before it runs an entry


SCALE = 2.0
OFFSET = [3.0]


def reads_python(x: torch.Tensor) -> torch.Tensor:
    return x * SCALE + OFFSET[0]


def mlp6() -> torch.nn.Module:
    layers: list[torch.nn.Module] = []
    for _ in range(6):
        layers += [torch.nn.Linear(8, 8), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


GUARD_CASES: tuple[tuple[str, Callable[[], Callable[..., object]], Callable[[], torch.Tensor]], ...] = (
    ("(a) plain x + 1", lambda: plain_add, lambda: torch.randn(2, 2)),
    ("(b) PairTensor p * 2", lambda: pair_mul, lambda: PairTensor.from_tensor(torch.randn(2, 2))),
    ("(d) x * SCALE + OFFSET[0] (a global float, a global list)", lambda: reads_python, lambda: torch.randn(2, 2)),
    ("(e) 6-layer MLP module (Linear+ReLU x6)", mlp6, lambda: torch.randn(4, 8)),
)


def find_entry(compiled: subclassaot.CompiledFunction[..., object], x: torch.Tensor) -> object:
    """CompiledFunction.__call__ up to the entry it would run, for one positional argument: the fast path for a
    plain function, else lifted state + flatten + each entry's guards. Written against attributes both this commit
    and the one before the Python-state guards have, so one script times both."""
    from torch.utils import _pytree as pytree

    from subclassaot.pipeline.inputs import lifted_state

    args = (x,)
    if not compiled._is_module and not compiled._captures:
        for entry in compiled._entries:
            if entry.simple_arity == 1:
                bound = entry.guards.check(args)
                if isinstance(bound, dict):
                    return bound
    values, spec = pytree.tree_flatten((lifted_state(compiled.fn, compiled._captures), args, {}))
    for entry in compiled._entries:
        if entry.spec == spec:
            bound = entry.guards.check(values)
            if isinstance(bound, dict):
                return bound
    raise AssertionError("BUG: no entry accepts the call it was compiled for")


def guard_us(budget: Budget, *, python_state_guards: bool | None = None) -> dict[str, float]:
    """Per case: the fastest of many small batches (a guard does the same work every call, so the minimum is its
    cost and everything above it is other load on the shared machine), in microseconds. `python_state_guards`: the
    compile option (None: leave it out, for commits that predate it)."""
    out: dict[str, float] = {}
    options = {} if python_state_guards is None else {"python_state_guards": python_state_guards}
    for name, make_fn, make in GUARD_CASES:
        compiled = subclassaot.compile(make_fn(), backend="eager", **options)  # type: ignore[call-overload]
        x = make()
        compiled(x)
        lookup = functools.partial(find_entry, compiled, x)
        batch, repeats = max(budget.batch // 4, 5), budget.repeats * 10
        out[name] = min(timeit.repeat(lookup, number=batch, repeat=repeats)) / batch * 1e6
    return out


def print_guard_table(budget: Budget) -> None:
    print("Guard time per call (us): CompiledFunction.__call__ up to the entry it runs; min over batches")
    try:
        subclassaot.compile(plain_add, python_state_guards=True)
    except TypeError:  # a commit before the Python-state guards
        print("| function | guards (us) |\n|---|---:|")
        for name, us in guard_us(budget).items():
            print(f"| {name} | {us:.2f} |")
        return
    # Both settings in one process, taking turns, so that load falls on both alike.
    on: dict[str, list[float]] = {}
    off: dict[str, list[float]] = {}
    for _ in range(3):
        for flag, into in ((True, on), (False, off)):
            for name, us in guard_us(budget, python_state_guards=flag).items():
                into.setdefault(name, []).append(us)
    print("| function | python_state_guards=False | True (default) | ratio |\n|---|---:|---:|---:|")
    for name in on:
        a, b = min(off[name]), min(on[name])
        print(f"| {name} | {a:.2f} | {b:.2f} | {b / a:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="few iterations (smoke test)")
    parser.add_argument("--guards", action="store_true", help="only the guard time per call (issue 31)")
    args = parser.parse_args()
    budget = QUICK if args.quick else FULL
    torch.set_num_threads(1)
    if args.guards:
        print_guard_table(budget)
        return
    warm_up()
    rows = [measure(name, fn, make, budget) for name, fn, make in CASES]
    print_tables(rows, budget)


if __name__ == "__main__":
    main()
