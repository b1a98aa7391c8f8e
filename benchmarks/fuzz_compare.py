"""The fuzzer's programs through subclassaot and through torch.compile(backend="aot_eager", fullgraph=True).

Run: `python benchmarks/fuzz_compare.py --programs 1000 --seed 1 [--subclass subclasses.pair:example] [--jobs 2]
[--side both|ours|torch] [--vocabulary core,grad_mode,...]` (one side only: the same programs in the same order, the
other column stays 0).
Each program is checked by the same parity oracle (subclassaot.tools.parity, two calls on fresh inputs) against eager:
once compiled by subclassaot (the interpreter closure) and once by torch.compile (the printed source, exec'd, so that
dynamo sees plain user code; tests/subclassaot/test_fuzz.py checks the two agree in eager). `torch._dynamo.reset()`
runs between programs. Each shard runs in a worker process, started again after one that dies (a segfault in torch):
that program counts as CRASHED on the side that was checking it. Dynamo's refusals (graph breaks under fullgraph=True) count as UNSUPPORTED, as
subclassaot's UnsupportedError does. Prints both sides' counts and divergence rates.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
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

    def count(self, index: int, mine: object, other: object) -> None:
        for side, verdict, sigs in (("ours", mine, self.our_sigs), ("torch", other, self.their_sigs)):
            if not isinstance(verdict, list):
                continue
            outcome, signature = Outcome(verdict[0]), str(verdict[1])
            (self.ours if side == "ours" else self.theirs)[outcome] += 1
            if outcome is not Outcome.PASS:
                sigs[f"{outcome.value}: {signature}"] += 1
            if side == "ours" and outcome in (Outcome.DIVERGED, Outcome.CRASHED):
                self.our_failures.append(index)
        both = [v for v in (mine, other) if isinstance(v, list)]
        self.both_wrong += len(both) == 2 and all(v[0] == Outcome.DIVERGED.value for v in both)

    def add(self, other: Tally) -> None:
        self.ours.update(other.ours)
        self.theirs.update(other.theirs)
        self.our_sigs.update(other.our_sigs)
        self.their_sigs.update(other.their_sigs)
        self.our_failures.extend(other.our_failures)
        self.both_wrong += other.both_wrong


def worker(args: argparse.Namespace) -> None:
    """`--worker K N FROM`: programs with index = K mod N from index FROM on, until `--share` are counted; prints a
    line before each check (which program and side) and one with both verdicts after, so that the parent can tell
    which check killed the process (a segfault in torch) and start a new worker after it."""
    vocabulary = frozenset(Vocabulary(name) for name in args.vocabulary.split(",") if name)
    config = FuzzConfig(kinds=("plain", *args.subclass), vocabulary=vocabulary)
    k, n, index = args.worker
    done = 0
    subclassaot_compile = pipeline_compile("eager")
    while done < args.share:
        program = generate(RandomChooser(args.seed * 1_000_003 + index), config)
        mine: Verdict | None = None
        if args.side != "torch":
            _say({"checking": index, "side": "ours"})
            mine = check_program(program, subclassaot_compile)
        other: Verdict | None = None
        if args.side != "ours" and (mine is None or mine.outcome is not Outcome.DISCARDED):
            torch._dynamo.reset()
            _say({"checking": index, "side": "torch", "ours": _verdict(mine)})
            other = check_program(program, torch_compile_for(program))
        discarded = any(v is not None and v.outcome is Outcome.DISCARDED for v in (mine, other))
        _say({"index": index, "ours": _verdict(mine), "torch": _verdict(other), "discarded": discarded})
        done += not discarded
        index += n
        try:
            torch.randn(1)
        except RuntimeError:  # a failed torch.compile left dispatch state behind (torch 2.13): a fresh worker goes on
            sys.exit(_POISONED)


_POISONED = 3


def _verdict(v: Verdict | None) -> list[str] | None:
    return None if v is None else [v.outcome.value, v.signature]


def _say(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


def run_shard(args: argparse.Namespace, shard: tuple[int, int]) -> Tally:
    """Shard (k, n) through worker processes, each started again after one that died, from the program after the
    one it died on (that check counted CRASHED, naming the signal)."""
    k, n = shard
    share, index, done = shard_share(args.programs, shard), k, 0
    tally = Tally()
    while done < share:
        command = [sys.executable, __file__, "--worker", str(k), str(n), str(index), "--share", str(share - done)]
        command += ["--seed", str(args.seed), "--vocabulary", args.vocabulary, "--side", args.side]
        for kind in args.subclass:
            command += ["--subclass", kind]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        checking: dict[str, object] | None = None
        for line in proc.stdout:
            record = json.loads(line)
            if "checking" in record:
                checking = record
                continue
            checking = None
            index = int(record["index"]) + n
            if not record["discarded"]:
                done += 1
                tally.count(int(record["index"]), record["ours"], record["torch"])
                if done % 500 == 0:
                    print(f"shard {k}/{n}: {done}/{share}", file=sys.stderr, flush=True)
        code = proc.wait()
        if code == _POISONED and checking is None:
            continue  # (from the program after the last one it told)
        if checking is not None:  # the worker died on this check
            died = [Outcome.CRASHED.value, f"the process died (exit status {code})"]
            ours = checking.get("ours") if checking["side"] == "torch" else died
            theirs = died if checking["side"] == "torch" else None
            tally.count(int(str(checking["checking"])), ours, theirs)
            print(f"shard {k}/{n}: program {checking['checking']} killed the worker ({code})", file=sys.stderr)
            done += 1
            index = int(str(checking["checking"])) + n
        elif code != 0:
            raise RuntimeError(f"fuzz_compare worker failed (exit status {code})")
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
    parser.add_argument("--worker", type=int, nargs=3, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--share", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args)
        return
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
