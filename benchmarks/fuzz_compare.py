"""The fuzzer's programs through subclassaot and through torch.compile(backend="aot_eager", fullgraph=True).

Run: `python benchmarks/fuzz_compare.py --programs 1000 --seed 1 [--subclass subclasses.pair:example] [--jobs 2]
[--side both|ours|torch] [--vocabulary core,grad_mode,...]` (one side only: the same programs in the same order, the
other column stays 0).
Each program is checked by the same parity oracle (subclassaot.tools.parity, two calls on fresh inputs) against eager:
once compiled by subclassaot (the interpreter closure) and once by torch.compile (the printed source, exec'd, so that
dynamo sees plain user code; tests/subclassaot/test_fuzz.py checks the two agree in eager). `torch._dynamo.reset()`
runs between programs. Dynamo's refusals (graph breaks under fullgraph=True) count as UNSUPPORTED, as
subclassaot's UnsupportedError does. Prints both sides' counts and divergence rates.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch._dynamo

from subclassaot.errors import UnsupportedError
from subclassaot.tools.fuzz import FuzzConfig, Outcome, RandomChooser, Verdict, check_program, generate
from subclassaot.tools.fuzz_ops import Vocabulary
from subclassaot.tools.fuzz_program import Program, to_source
from subclassaot.tools.fuzz_runner import pipeline_compile, run_shards, shard_share

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


@dataclass(slots=True)
class Tally:
    ours: Counter[Outcome] = field(default_factory=Counter)
    theirs: Counter[Outcome] = field(default_factory=Counter)
    our_sigs: Counter[str] = field(default_factory=Counter)
    their_sigs: Counter[str] = field(default_factory=Counter)
    our_failures: list[int] = field(default_factory=list)  # program indexes that DIVERGED or CRASHED on our side
    both_wrong: int = 0

    def add(self, other: Tally) -> None:
        self.ours.update(other.ours)
        self.theirs.update(other.theirs)
        self.our_sigs.update(other.our_sigs)
        self.their_sigs.update(other.their_sigs)
        self.our_failures.extend(other.our_failures)
        self.both_wrong += other.both_wrong


def run_shard(args: argparse.Namespace, shard: tuple[int, int]) -> Tally:
    """Programs with index = k mod n until this shard's share of `args.programs` is counted."""
    vocabulary = frozenset(Vocabulary(name) for name in args.vocabulary.split(",") if name)
    config = FuzzConfig(kinds=("plain", *args.subclass), vocabulary=vocabulary)
    tally = Tally()
    k, n = shard
    share, index, done = shard_share(args.programs, shard), k, 0
    subclassaot_compile = pipeline_compile("eager")
    while done < share:
        program = generate(RandomChooser(args.seed * 1_000_003 + index), config)
        index += n
        # DISCARDED comes from eager alone (the program raises there): either side decides it alike.
        mine = check_program(program, subclassaot_compile) if args.side != "torch" else None
        if mine is not None and mine.outcome is Outcome.DISCARDED:
            continue
        other: Verdict | None = None
        if args.side != "ours":
            torch._dynamo.reset()
            other = check_program(program, torch_compile_for(program))
            if other.outcome is Outcome.DISCARDED:
                continue
        done += 1
        if mine is not None:
            tally.ours[mine.outcome] += 1
            if mine.outcome is not Outcome.PASS:
                tally.our_sigs[f"{mine.outcome.value}: {mine.signature}"] += 1
            if mine.outcome in (Outcome.DIVERGED, Outcome.CRASHED):
                tally.our_failures.append(index - n)
        if other is not None:
            tally.theirs[other.outcome] += 1
            if other.outcome is not Outcome.PASS:
                tally.their_sigs[f"{other.outcome.value}: {other.signature}"] += 1
        if mine is not None and other is not None:
            tally.both_wrong += mine.outcome is Outcome.DIVERGED and other.outcome is Outcome.DIVERGED
        if done % 500 == 0:
            print(f"shard {k}/{n}: {done}/{share}", file=sys.stderr, flush=True)
    return tally


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--programs", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--subclass", action="append", default=[])
    parser.add_argument(
        "--vocabulary",
        default=",".join(v.value for v in Vocabulary),
        help="comma-separated vocabulary groups (as `python -m subclassaot fuzz --vocabulary`; default all)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (programs split by index mod jobs)")
    parser.add_argument(
        "--side",
        choices=("both", "ours", "torch"),
        default="both",
        help="run one side only (the programs and their order are the same; the other side's column stays 0)",
    )
    args = parser.parse_args()
    start = time.perf_counter()
    tally = Tally()
    for part in run_shards(functools.partial(run_shard, args), args.jobs):
        tally.add(part)
    ours, theirs = tally.ours, tally.theirs
    n = max(sum(ours.values()), sum(theirs.values()))
    kinds = ("plain", *args.subclass)
    print(
        f"{n} programs, seed {args.seed}, kinds {kinds}, {args.jobs} jobs, side {args.side}, "
        f"{time.perf_counter() - start:.0f} s"
    )
    print(f"{'outcome':<12} {'subclassaot':>12} {'torch.compile':>14}")
    for o in Outcome:
        if o is not Outcome.DISCARDED:
            print(f"{o.value:<12} {ours[o]:>6} {100 * ours[o] / n:5.2f}% {theirs[o]:>7} {100 * theirs[o] / n:5.2f}%")
    print(f"DIVERGED on both: {tally.both_wrong}")
    print(f"subclassaot's DIVERGED/CRASHED program indexes: {sorted(tally.our_failures)}")
    for title, sigs in (("subclassaot", tally.our_sigs), ("torch.compile", tally.their_sigs)):
        print(f"{title}'s non-PASS signatures:")
        for sig, count in sigs.most_common(30):
            print(f"  {count:>5}  {sig}")


if __name__ == "__main__":
    main()
