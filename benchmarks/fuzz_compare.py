"""The fuzzer's programs through subclassaot and through torch.compile(backend="aot_eager", fullgraph=True).

Run: `python benchmarks/fuzz_compare.py --programs 1000 --seed 1 [--subclass subclasses.pair:example]`.
Each program is checked by the same parity oracle (subclassaot.parity, two calls on fresh inputs) against eager:
once compiled by subclassaot (the interpreter closure) and once by torch.compile (the printed source, exec'd, so that
dynamo sees plain user code; tests/subclassaot/test_fuzz.py checks the two agree in eager). `torch._dynamo.reset()`
runs between programs. Dynamo's refusals (graph breaks under fullgraph=True) count as UNSUPPORTED, as
subclassaot's UnsupportedError does. Prints both sides' counts and divergence rates.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable

import torch
import torch._dynamo

from subclassaot.errors import UnsupportedError
from subclassaot.fuzz import FuzzConfig, Outcome, RandomChooser, Verdict, check_program, generate
from subclassaot.fuzz_program import Program, to_source
from subclassaot.fuzz_runner import pipeline_compile

Fn = Callable[..., object]


def torch_compile_for(program: Program) -> Callable[[Fn], Fn]:
    """A compile function that ignores the interpreter it is given and compiles the program's printed source."""
    namespace: dict[str, object] = {}
    exec(compile(to_source(program), "<fuzz program>", "exec"), namespace)
    source_fn = namespace["f"]
    assert callable(source_fn)

    def compile_fn(_interpreter: Fn) -> Fn:
        compiled = torch.compile(source_fn, backend="aot_eager", fullgraph=True)

        def run(*args: object) -> object:
            try:
                return compiled(*args)
            except torch._dynamo.exc.Unsupported as e:
                message = str(e)
                reason = message.split("Reason: ")[1] if "Reason: " in message else message
                raise UnsupportedError(f"dynamo: {reason.splitlines()[0]}") from e

        return run

    return compile_fn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--programs", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--subclass", action="append", default=[])
    args = parser.parse_args()
    config = FuzzConfig(kinds=("plain", *args.subclass))
    ours: Counter[Outcome] = Counter()
    theirs: Counter[Outcome] = Counter()
    their_sigs: Counter[str] = Counter()
    both_wrong = index = 0
    start = time.perf_counter()
    subclassaot_compile = pipeline_compile("eager")
    while sum(ours.values()) < args.programs:
        program = generate(RandomChooser(args.seed * 1_000_003 + index), config)
        index += 1
        mine = check_program(program, subclassaot_compile)
        if mine.outcome is Outcome.DISCARDED:
            continue
        torch._dynamo.reset()
        other: Verdict = check_program(program, torch_compile_for(program))
        ours[mine.outcome] += 1
        theirs[other.outcome] += 1
        if other.outcome is not Outcome.PASS:
            their_sigs[f"{other.outcome.value}: {other.signature}"] += 1
        both_wrong += mine.outcome is Outcome.DIVERGED and other.outcome is Outcome.DIVERGED
    n = sum(ours.values())
    print(f"{n} programs, seed {args.seed}, kinds {config.kinds}, {time.perf_counter() - start:.0f} s")
    print(f"{'outcome':<12} {'subclassaot':>12} {'torch.compile':>14}")
    for o in Outcome:
        if o is not Outcome.DISCARDED:
            print(f"{o.value:<12} {ours[o]:>6} {100 * ours[o] / n:4.1f}% {theirs[o]:>7} {100 * theirs[o] / n:4.1f}%")
    print(f"DIVERGED on both: {both_wrong}")
    print("torch.compile's non-PASS signatures:")
    for sig, count in their_sigs.most_common(25):
        print(f"  {count:>5}  {sig}")


if __name__ == "__main__":
    main()
