"""The fuzz runner: N eager-legal programs from one seed, a verdict each, failures shrunk and written out.

Input: a program count, a seed, a `FuzzConfig`, a compile function.
Output: a `FuzzReport` (counts per outcome, UNSUPPORTED per rule, failures grouped by signature with a shrunk
program each); `write_report(report, out_dir)` writes one regression-test file per shrunk failure and REPORT.md.
Invariants: program i of seed s is the same program on every run (`RandomChooser(seed * 1_000_003 + i)`);
programs eager rejects are skipped and not counted. Shrinking costs many compiles, so only the first
`shrink_per_signature` failures of each signature are shrunk; the rest are counted and listed unshrunk.
With a `timeout`, every check (shrinking's too) runs in a forked child process and gets that many seconds: a hang
can hold the GIL inside torch's C++ (a deadlock on an autograd lock), where no Python timeout ever runs, so the
child past it is killed, the check is HUNG and the next one forks a fresh child. A HUNG program is not shrunk (each
try could take the whole limit) but written out as it is.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import ctypes
import functools
import multiprocessing
import os
import signal
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Literal, TypeVar, cast, get_args

import torch

from subclassaot.tools.checker_rules import Factory, Rule, fail
from subclassaot.tools.fuzz import (
    DEFAULT_CONFIG,
    CompileFn,
    FuzzConfig,
    Outcome,
    RandomChooser,
    Verdict,
    check_program,
    generate,
    same_failure,
    shrink,
)
from subclassaot.tools.fuzz_changes import check_with_argument_changes, check_with_state_changes
from subclassaot.tools.fuzz_ops import Vocabulary
from subclassaot.tools.fuzz_program import (
    Program,
    as_function,
    kind_from_factory,
    make_inputs,
    register_input_kind,
    to_source,
)
from subclassaot.tools.parity import Versions

R = TypeVar("R")
Entry = Literal["direct", "dynamo"]  # subclassaot.compile(fn), or torch.compile(fn, backend="subclassaot")
Changes = Literal["none", "state", "arguments"]  # what changes between calls: nothing, or fuzz_changes' two modes
MakeCheck = Callable[[int], Callable[[Program], Verdict]]  # a program's changes seed -> the check of the program
_FAILED = (Outcome.DIVERGED, Outcome.CRASHED, Outcome.HUNG)  # the outcomes reported as failures
_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent ends


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    index: int  # the program's index under the run's seed
    program: Program
    verdict: Verdict
    shrunk: Program | None  # None when not shrunk (past `shrink_per_signature`)
    shrunk_verdict: Verdict | None


@dataclass(slots=True, kw_only=True)
class FuzzReport:
    seed: int
    backend: str
    entry: Entry = "direct"
    changes: Changes = "none"
    versions: Versions = "moved"
    counts: Counter[Outcome] = field(default_factory=Counter)  # DISCARDED counts programs skipped, not run
    unsupported_rules: Counter[str] = field(default_factory=Counter)
    unsupported_indexes: dict[str, list[int]] = field(default_factory=dict)  # rule -> program indexes, in order
    failure_signatures: Counter[tuple[Outcome, str]] = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)  # DIVERGED, CRASHED and HUNG, in program order

    @property
    def counted(self) -> int:
        return sum(n for o, n in self.counts.items() if o is not Outcome.DISCARDED)

    def __str__(self) -> str:
        lines = [
            f"fuzz seed={self.seed} backend={self.backend} entry={self.entry} versions={self.versions}: "
            f"{self.counted} programs"
        ]
        lines += [f"  {o.value:<11} {self.counts[o]}" for o in Outcome]
        if self.unsupported_rules:
            lines.append("UNSUPPORTED by rule:")
            lines += [f"  {n:>5}  {rule}" for rule, n in self.unsupported_rules.most_common()]
        if self.failure_signatures:
            lines.append("DIVERGED / CRASHED / HUNG by signature:")
            lines += [f"  {n:>5}  {o.value}: {sig}" for (o, sig), n in self.failure_signatures.most_common()]
        return "\n".join(lines)


def pipeline_compile(backend: str) -> CompileFn:
    from subclassaot.api import compile as subclassaot_compile

    def compile_fn(fn: Callable[..., object]) -> Callable[..., object]:
        return subclassaot_compile(fn, backend=backend)

    return compile_fn


def fuzz(
    programs: int,
    seed: int,
    *,
    config: FuzzConfig = DEFAULT_CONFIG,
    compile_fn: CompileFn | None = None,
    backend: str = "eager",
    shrink_per_signature: int = 2,
    progress: Callable[[FuzzReport], None] | None = None,
    shard: tuple[int, int] = (0, 1),
    state_changes: bool = False,
    argument_changes: bool = False,
    entry: Entry = "direct",
    timeout: float | None = None,
    versions: Versions = "moved",
) -> FuzzReport:
    """Check `programs` eager-legal programs; see the module docstring. `shard=(k, n)`: only program indexes
    congruent to k mod n, until this shard's share of `programs` is counted (`run_shards` runs all n).
    `state_changes`: wrap each program in a module reading Python state and change that state between calls
    (subclassaot.tools.fuzz_changes). `argument_changes`: call each program with Python constants and a module whose
    buffers it updates as arguments, changed between calls (subclassaot.tools.fuzz_changes). `entry="dynamo"`:
    compile each program's printed source with torch.compile(backend="subclassaot") (subclassaot.tools.dynamo_backend)
    instead of `compile_fn`. `timeout`: seconds per check, each run in a forked child (None: in this process, no
    limit). `versions`: how version counters are compared (subclassaot.tools.parity.Versions; the change modes
    compare them "moved")."""
    if versions != "moved" and (state_changes or argument_changes):
        raise ValueError(f"fuzz(versions={versions!r}) compares counts only without a change mode")
    if entry == "dynamo" and (state_changes or argument_changes or compile_fn is not None):
        raise ValueError("fuzz(entry='dynamo') compiles the printed program itself: no compile_fn, no change modes")
    compile_fn = compile_fn if compile_fn is not None else pipeline_compile(backend)
    make_check = _make_check(compile_fn, backend, entry, state_changes, argument_changes, versions)
    changes: Changes = "arguments" if argument_changes else "state" if state_changes else "none"
    report = FuzzReport(seed=seed, backend=backend, entry=entry, changes=changes, versions=versions)
    forked = _ForkedChecks(make_check, timeout) if timeout else None
    target = shard_share(programs, shard)
    index = shard[0]
    with contextlib.ExitStack() as stack:
        if forked is not None:
            stack.callback(forked.close)
        while report.counted < target and index < 20 * programs:
            changes_seed = seed * 1_000_003 + index
            program = generate(RandomChooser(changes_seed), config)
            check = make_check(changes_seed) if forked is None else functools.partial(forked.check, changes_seed)
            _record(report, index, program, check, shrink_per_signature, progress)
            index += shard[1]
    return report


def _record(
    report: FuzzReport,
    index: int,
    program: Program,
    check: Callable[[Program], Verdict],
    shrink_per_signature: int,
    progress: Callable[[FuzzReport], None] | None,
) -> None:
    """Check program `index` and count its verdict in `report` (a failure shrunk, and told at once)."""
    verdict = check(program)
    report.counts[verdict.outcome] += 1
    if verdict.outcome is Outcome.UNSUPPORTED:
        report.unsupported_rules[verdict.signature] += 1
        report.unsupported_indexes.setdefault(verdict.signature, []).append(index)
    elif verdict.outcome in _FAILED:
        key = (verdict.outcome, verdict.signature)
        report.failure_signatures[key] += 1
        report.failures.append(
            _failure(index, program, verdict, check, report.failure_signatures[key], shrink_per_signature)
        )
        if progress is not None:
            progress(report)  # a failure is told at once, not only in the final report
    elif progress is not None and report.counted % 100 == 0 and verdict.outcome is not Outcome.DISCARDED:
        progress(report)


def _make_check(
    compile_fn: CompileFn,
    backend: str,
    entry: Entry,
    state_changes: bool,
    argument_changes: bool,
    versions: Versions = "moved",
) -> MakeCheck:
    """The check of a program given its changes seed (only the change modes draw from it)."""
    if entry == "dynamo":
        return lambda _: _dynamo_checker(backend, versions)
    if state_changes or argument_changes:
        return functools.partial(_checker, compile_fn, argument_changes)
    return lambda _: functools.partial(_check_program, compile_fn, versions)


def _check_program(compile_fn: CompileFn, versions: Versions, program: Program) -> Verdict:
    return check_program(program, compile_fn, versions=versions)


def _checker(compile_fn: CompileFn, argument_changes: bool, changes_seed: int) -> Callable[[Program], Verdict]:
    check = check_with_argument_changes if argument_changes else check_with_state_changes
    return lambda p: check(as_function(p), lambda: make_inputs(p), p.grad_mode, compile_fn, changes_seed)


def _dynamo_checker(backend: str, versions: Versions) -> Callable[[Program], Verdict]:
    from subclassaot.tools.dynamo_backend import dynamo_compile_for  # (imports Dynamo: only for that entry)

    return lambda p: check_program(p, dynamo_compile_for(to_source(p), backend=backend), versions=versions)


class _ForkedChecks:
    """Checks run one at a time in a forked child process, each given `timeout` seconds (module docstring). A child
    that dies inside a check (a segfault in torch) makes that check CRASHED; the next check forks a fresh child."""

    def __init__(self, make_check: MakeCheck, timeout: float) -> None:
        self._make_check = make_check
        self._timeout = timeout
        self._child: tuple[BaseProcess, Connection] | None = None

    def check(self, changes_seed: int, program: Program) -> Verdict:
        process, conn = self._child if self._child is not None else self._fork()
        conn.send((changes_seed, program))
        if not conn.poll(self._timeout):
            self.close()
            return Verdict(
                outcome=Outcome.HUNG,
                detail=f"no verdict within {self._timeout:g} s: the process checking the program was killed "
                "(run it under `timeout`)",
                signatures=("no verdict within the time limit",),
            )
        with contextlib.suppress(EOFError):
            return cast(Verdict, conn.recv())
        process.join()
        self.close()
        return Verdict(
            outcome=Outcome.CRASHED,
            detail=f"the process checking the program died (exit code {process.exitcode})",
            signatures=(f"the process checking the program died (exit code {process.exitcode})",),
        )

    def _fork(self) -> tuple[BaseProcess, Connection]:
        ours, theirs = multiprocessing.Pipe()
        context = multiprocessing.get_context("fork")  # (the child inherits compile_fn: nothing is pickled but data)
        process = context.Process(target=_serve_checks, args=(theirs, ours, self._make_check), daemon=True)
        process.start()
        theirs.close()
        self._child = (process, ours)
        return self._child

    def close(self) -> None:
        if self._child is not None:
            process, conn = self._child
            self._child = None
            process.kill()
            process.join()
            conn.close()


def _serve_checks(conn: Connection, parent_end: Connection, make_check: MakeCheck) -> None:
    """The forked child: a verdict for each (changes seed, program) it is sent, until the parent's end closes."""
    parent_end.close()  # (the parent's copy: with it open here, the parent's exit would never end the loop)
    _one_thread()
    if sys.platform == "linux":  # killed with the parent however it ends, not left running a hang
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    with contextlib.suppress(EOFError):
        while True:
            changes_seed, program = conn.recv()
            conn.send(make_check(changes_seed)(program))


def _one_thread() -> None:
    """In a forked process: the parent's OpenMP threads are not the child's, but OpenMP believes they are, so the first
    parallel kernel (batch norm's, a large reduction's) waits on them forever. One thread runs no parallel region
    (what torch's DataLoader workers do)."""
    torch.set_num_threads(1)


def shard_share(programs: int, shard: tuple[int, int]) -> int:
    """How many of `programs` shard (k, n) counts: the shares of all n shards add up to `programs`."""
    k, n = shard
    return programs // n + (1 if k < programs % n else 0)


def run_shards(worker: Callable[[tuple[int, int]], R], jobs: int) -> list[R]:
    """`worker((k, jobs))` for every k, in `jobs` forked processes (in this process when jobs == 1); the workers'
    results in shard order. `worker` must be a module-level function (it is pickled by name)."""
    if jobs <= 1:
        return [worker((0, 1))]
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_one_thread) as pool:
        return list(pool.map(worker, [(k, jobs) for k in range(jobs)]))


def merge_reports(reports: Sequence[FuzzReport]) -> FuzzReport:
    """One report for a run split into shards; failures in program order."""
    first = reports[0]
    merged = FuzzReport(
        seed=first.seed, backend=first.backend, entry=first.entry, changes=first.changes, versions=first.versions
    )
    for r in reports:
        merged.counts.update(r.counts)
        merged.unsupported_rules.update(r.unsupported_rules)
        for rule, indexes in r.unsupported_indexes.items():
            merged.unsupported_indexes.setdefault(rule, []).extend(indexes)
        merged.failure_signatures.update(r.failure_signatures)
        merged.failures.extend(r.failures)
    merged.failures.sort(key=lambda f: f.index)
    for indexes in merged.unsupported_indexes.values():
        indexes.sort()
    return merged


def _failure(
    index: int, program: Program, verdict: Verdict, check: Callable[[Program], Verdict], nth: int, limit: int
) -> Failure:
    if nth > limit or verdict.outcome is Outcome.HUNG:  # (a hang is not shrunk: each try may take the whole limit)
        return Failure(index=index, program=program, verdict=verdict, shrunk=None, shrunk_verdict=None)
    predicate = same_failure(verdict)
    small = shrink(program, lambda p: predicate(check(p)))
    return Failure(index=index, program=program, verdict=verdict, shrunk=small, shrunk_verdict=check(small))


# ---------------------------------------------------------------------------------------------------------------
# Writing failures out as regression tests


def regression_source(
    failure: Failure,
    seed: int,
    entry: Entry = "direct",
    changes: Changes = "none",
    backend: str = "eager",
    versions: Versions = "moved",
) -> str:
    """A regression test for `failure`: the printed program and a test that compares it with eager as the run did
    (with `changes`, through the same wrapper and changes between calls, drawn from the program's own seed)."""
    program = failure.shrunk if failure.shrunk is not None else failure.program
    verdict = failure.shrunk_verdict if failure.shrunk_verdict is not None else failure.verdict
    name = f"test_fuzz_seed{seed}_program{failure.index}"
    what = "\n".join(f"#   {line}" for line in verdict.detail.splitlines()[:12])
    grad = "enable_grad" if program.grad_mode else "no_grad"
    compile_arg = ""
    if entry == "dynamo":
        from subclassaot.tools.dynamo_backend import REGRESSION_COMPILE_ARG  # (imports Dynamo: only for that entry)

        compile_arg = f", {REGRESSION_COMPILE_ARG}"
    if versions != "moved":
        compile_arg += f", versions={versions!r}"
    header = (
        f"# subclassaot fuzz, seed {seed}, entry {entry}, changes {changes}, versions {versions}, "
        f"program {failure.index}: "
        f"{verdict.outcome.value}{' (shrunk)' if failure.shrunk is not None else ''}\n"
        f"# signature: {verdict.signature}\n# what differed:\n{what}\n{to_source(program)}\n\n"
    )
    if changes == "none":
        return header + (
            f"def {name}() -> None:\n"
            "    from tests.oracle import assert_matches_eager\n\n"
            f"    with torch.{grad}():\n"
            f"        assert_matches_eager(f, make_inputs{compile_arg})\n"
            + (
                "        # ... and with every output written after the call (the fuzzer's last call in training)\n"
                "        from subclassaot.tools.parity import write_outputs\n\n"
                f"        assert_matches_eager(f, make_inputs{compile_arg}, after_call=write_outputs)\n"
                if program.grad_mode
                else ""
            )
        )
    check = "check_with_argument_changes" if changes == "arguments" else "check_with_state_changes"
    return header + (
        f"def {name}() -> None:\n"
        f"    from subclassaot.tools.fuzz_changes import {check}\n"
        "    from subclassaot.tools.fuzz_runner import pipeline_compile\n\n"
        f"    verdict = {check}(f, make_inputs, {program.grad_mode}, pipeline_compile({backend!r}), "
        f"{seed * 1_000_003 + failure.index})\n"
        '    assert verdict.outcome.value == "PASS", verdict.detail\n'
    )


def write_report(report: FuzzReport, out_dir: str) -> str:
    """Write one `<outcome>_<index>.py` per shrunk or HUNG failure and REPORT.md (returned as text too)."""
    os.makedirs(out_dir, exist_ok=True)
    sections = [f"# Fuzz report\n\n```\n{report}\n```\n"]
    for failure in report.failures:
        if failure.shrunk is None and failure.verdict.outcome is not Outcome.HUNG:
            continue
        text = regression_source(failure, report.seed, report.entry, report.changes, report.backend, report.versions)
        path = os.path.join(out_dir, f"{failure.verdict.outcome.value.lower()}_{failure.index:05d}.py")
        with open(path, "w") as f:
            f.write(text)
        sections.append(f"## {os.path.basename(path)}\n\n```python\n{text}```\n")
    unshrunk = [f.index for f in report.failures if f.shrunk is None and f.verdict.outcome is not Outcome.HUNG]
    if unshrunk:
        sections.append(f"Not shrunk (signature already shrunk twice), program indexes: {unshrunk}\n")
    if report.unsupported_indexes:
        sections.append("## UNSUPPORTED program indexes, by rule\n")
        sections += [
            f"- {rule}: {indexes}\n"
            for rule, indexes in sorted(report.unsupported_indexes.items(), key=lambda item: -len(item[1]))
        ]
    text = "\n".join(sections)
    with open(os.path.join(out_dir, "REPORT.md"), "w") as f:
        f.write(text)
    return text


# ---------------------------------------------------------------------------------------------------------------
# `python -m subclassaot fuzz`


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--programs", type=int, default=200, help="how many eager-legal programs to check")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--subclass",
        action="append",
        default=[],
        metavar="MODULE:FACTORY",
        help="an input kind besides plain tensors (repeatable), e.g. subclasses.pair:example",
    )
    parser.add_argument("--backend", default="eager", help="the backend (with --entry dynamo: the inner backend)")
    parser.add_argument(
        "--entry",
        choices=get_args(Entry),
        default="direct",
        help="direct: subclassaot.compile(fn); dynamo: torch.compile(fn, backend='subclassaot') of the printed program",
    )
    parser.add_argument(
        "--vocabulary",
        default=",".join(v.value for v in Vocabulary),
        help=f"comma-separated groups of ops drawn (default all): {', '.join(v.value for v in Vocabulary)}",
    )
    parser.add_argument("--max-ops", type=int, default=6)
    parser.add_argument(
        "--versions",
        choices=get_args(Versions),
        default="moved",
        help="how version counters are compared with eager's: moved (whether each input's changed), counted, exact",
    )
    parser.add_argument("--shrink-per-signature", type=int, default=2)
    parser.add_argument("--out", default=None, help="a folder for shrunk failures (regression tests) and REPORT.md")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (programs split by index mod jobs)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds per check (in a child process killed past it: the program is HUNG); 0 for no limit, in process",
    )
    parser.add_argument(
        "--state-changes",
        action="store_true",
        help="wrap each program in a module reading Python state, and change that state between calls",
    )
    parser.add_argument(
        "--argument-changes",
        action="store_true",
        help="pass each program Python constants and a module whose buffers it updates, changed between calls",
    )


def _checkpoint(
    report: FuzzReport, programs: int, out_dir: str | None, echo: Callable[[str], None], told: list[int]
) -> None:
    """A progress line; each failure once, as soon as it is found (`told[0]`: how many were told already)."""
    echo(f"[{report.counted}/{programs}] " + " ".join(f"{o.value}={report.counts[o]}" for o in Outcome))
    for failure in report.failures[told[0] :]:
        echo(f"  program {failure.index}: {failure.verdict.outcome.value} ({failure.verdict.signature})")
    told[0] = len(report.failures)
    if out_dir is not None and report.counted % 1000 == 0:
        write_report(report, out_dir)


def _cli_shard(args: argparse.Namespace, echo: Callable[[str], None], shard: tuple[int, int]) -> FuzzReport:
    vocabulary = frozenset(Vocabulary(name.strip()) for name in args.vocabulary.split(",") if name.strip())
    config = FuzzConfig(kinds=("plain", *args.subclass), max_ops=args.max_ops, vocabulary=vocabulary)
    share = shard_share(args.programs, shard)
    prefix = f"shard {shard[0]}/{shard[1]} " if shard[1] > 1 else ""
    out_dir = args.out if shard[1] == 1 else None  # shards write nothing until merged
    told = [0]
    return fuzz(
        args.programs,
        args.seed,
        config=config,
        backend=args.backend,
        shrink_per_signature=args.shrink_per_signature,
        progress=lambda r: _checkpoint(r, share, out_dir, lambda line: echo(prefix + line), told),
        shard=shard,
        state_changes=args.state_changes,
        argument_changes=args.argument_changes,
        entry=args.entry,
        timeout=args.timeout or None,
        versions=args.versions,
    )


def _echo_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def run_cli(args: argparse.Namespace, echo: Callable[[str], None]) -> int:
    if args.jobs > 1:
        worker = functools.partial(_cli_shard, args, _echo_stderr)
        report = merge_reports(run_shards(worker, args.jobs))
    else:
        report = _cli_shard(args, echo, (0, 1))
    echo(str(report))
    if args.out is not None:
        write_report(report, args.out)
        echo(f"wrote {args.out}/REPORT.md")
    return 0 if not report.failures else 1


# ---------------------------------------------------------------------------------------------------------------
# The checker's `pipeline.fuzz` rule


def fuzz_rule(programs: int) -> Rule:
    """`check_subclass(factory, fuzz=N)`: N programs whose first input is the author's subclass, the rest mixed."""

    def check(factory: Factory) -> None:
        key = f"{factory.__module__}:{factory.__qualname__}"
        register_input_kind(kind_from_factory(factory, key=key))
        config = FuzzConfig(kinds=(key, "plain"), first_kind_always=True)
        report = fuzz(programs, 0, config=config, shrink_per_signature=1)  # (seed 0)
        if report.failures:
            shown = [f for f in report.failures if f.shrunk is not None][:3]
            programs_text = "\n\n".join(regression_source(f, 0) for f in shown)
            fail(
                f"{len(report.failures)} of {report.counted} random programs over this subclass differ from eager "
                f"or crash when compiled:\n{report}\nminimal programs (paste one into a test to debug):\n"
                f"{programs_text}"
            )

    return Rule(
        name="pipeline.fuzz",
        description=f"{programs} random programs over the subclass compile and match eager",
        check=check,
    )
