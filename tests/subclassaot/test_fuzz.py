"""The fuzzer: its generator (legal programs, source that round-trips), its shrinker, and a fixed-seed smoke run.

The smoke run (`test_fixed_seed_smoke_has_no_divergence_or_crash`) asserts what the pipeline must achieve: no
DIVERGED and no CRASHED program; a failure lists each shrunk program.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import pathlib
import pickle
import time
import traceback
from collections.abc import Callable
from typing import cast

import pytest
import torch
from hypothesis import HealthCheck, given, settings

from subclassaot.errors import UnsupportedError
from subclassaot.tools import fuzz_runner
from subclassaot.tools.checker import Status, check_subclass
from subclassaot.tools.fuzz import (
    FuzzConfig,
    Outcome,
    RandomChooser,
    check_program,
    generate,
    programs,
    same_failure,
    shrink,
    storage_safe,
)
from subclassaot.tools.fuzz_ops import _FACTORIES, OPS, Family, Vocabulary
from subclassaot.tools.fuzz_program import (
    COMPLEX_KINDS,
    NESTED_KINDS,
    BaseSpec,
    InputSpec,
    Op,
    Program,
    as_function,
    make_inputs,
    to_source,
)
from subclassaot.tools.fuzz_runner import _checkpoint, fuzz, merge_reports, regression_source, write_report
from subclassaot.tools.parity import compare_with_eager, fresh_call

PAIR = "subclasses.pair:example"
CORE = frozenset({Vocabulary.CORE})
CONFIG = FuzzConfig(kinds=("plain", PAIR))
Fn = Callable[..., object]


def identity_compile(fn: Fn) -> Fn:
    return fn


def drops_input_mutations(fn: Fn) -> Fn:
    """A broken "compiler": runs the program on clones of its inputs, so every input mutation is lost (an input
    whose storage is freed is passed as it is: cloning it would read freed memory)."""

    def run(*args: object) -> object:
        return fn(*(a.clone() if isinstance(a, torch.Tensor) and not _freed(a) else a for a in args))

    return run


def _freed(t: torch.Tensor) -> bool:
    return type(t) is torch.Tensor and t.untyped_storage().nbytes() == 0 and t.numel() > 0


def _exec_source(program: Program) -> dict[str, object]:
    namespace: dict[str, object] = {}
    exec(compile(to_source(program), "<fuzz program>", "exec"), namespace)
    return namespace


@settings(max_examples=60, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(programs(CONFIG))
def test_printed_source_does_what_the_interpreter_does(program: Program) -> None:
    _assert_printed_source_does_what_the_interpreter_does(program)


def _assert_printed_source_does_what_the_interpreter_does(program: Program) -> None:
    namespace = _exec_source(program)
    f, make = namespace["f"], namespace["make_inputs"]
    assert callable(f) and callable(make)
    with torch.set_grad_enabled(program.grad_mode):
        diffs = compare_with_eager(f, as_function(program), lambda: make_inputs(program))
    assert diffs == (), to_source(program)
    printed_inputs = fresh_call(make)
    with torch.set_grad_enabled(program.grad_mode):  # (the fuzz makes its inputs under the call's grad mode)
        interpreted_inputs = fresh_call(lambda: make_inputs(program))
    for p, i in zip(printed_inputs.args, interpreted_inputs.args, strict=True):
        assert isinstance(p, torch.Tensor) and isinstance(i, torch.Tensor)
        assert _creation_meta(p) == _creation_meta(i), to_source(program)
        assert _freed(p) == _freed(i)
        if not _freed(p):  # (reading a freed storage's elements would read freed memory)
            torch.testing.assert_close(p.detach(), i.detach())


def _creation_meta(t: torch.Tensor) -> object:
    return torch._C._autograd._get_creation_meta(t) if t._is_view() else None


def test_printed_inputs_of_an_inference_call_make_their_bases_under_no_grad() -> None:
    """The fuzz makes an inference program's bases under the call's no_grad (`make_base`): a conj view's imag is a
    no_grad view then, whose requires_grad_() gives it a flag of its own. The printed make_inputs (decorated with
    enable_grad for its requires_grad_() calls) makes them so too, so that a shrunk program reproduces; a training
    program's, with grad."""
    base = BaseSpec(kind="conj_view_imag", shape=(3,), grad="leaf")
    for grad_mode in (False, True):
        program = Program(
            bases=(base,), inputs=(InputSpec(var=0, base=0, views=()),), ops=(), outputs=(0,), grad_mode=grad_mode
        )
        make = _exec_source(program)["make_inputs"]
        assert callable(make)
        (printed,) = fresh_call(make).args
        with torch.set_grad_enabled(grad_mode):
            (interpreted,) = fresh_call(functools.partial(make_inputs, program)).args
        assert isinstance(printed, torch.Tensor) and isinstance(interpreted, torch.Tensor)
        meta = torch._C._autograd.CreationMeta.DEFAULT if grad_mode else torch._C._autograd.CreationMeta.NO_GRAD_MODE
        assert _creation_meta(printed) == _creation_meta(interpreted) == meta, to_source(program)
        assert printed.requires_grad and printed.is_leaf


@settings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(programs(CONFIG))
def test_generated_programs_are_legal_in_eager_and_pass_an_identity_compiler(program: Program) -> None:
    verdict = check_program(program, identity_compile)
    assert verdict.outcome is Outcome.PASS, f"{verdict.detail}\n{to_source(program)}"


def test_generation_is_deterministic_per_seed() -> None:
    assert generate(RandomChooser(7), CONFIG) == generate(RandomChooser(7), CONFIG)
    assert len({generate(RandomChooser(s), CONFIG) for s in range(20)}) > 15


def test_shrinking_finds_a_smaller_program_that_a_broken_compiler_still_gets_wrong() -> None:
    found = None
    for seed in range(200):
        program = generate(RandomChooser(seed), FuzzConfig(max_ops=8, vocabulary=CORE))  # reads freed inputs
        verdict = check_program(program, drops_input_mutations)
        if verdict.outcome is Outcome.DIVERGED and len(program.ops) >= 4:
            found = program, verdict
            break
    assert found is not None, "no program with an input mutation in 200 seeds"
    program, verdict = found
    predicate = same_failure(verdict)
    small = shrink(program, lambda p: predicate(check_program(p, drops_input_mutations)))
    assert small.size() < program.size()
    assert check_program(small, drops_input_mutations).outcome is Outcome.DIVERGED
    assert check_program(small, identity_compile).outcome is Outcome.PASS
    assert len(small.ops) <= 2, to_source(small)  # one mutation (plus at most one view to reach the input)


def test_a_broken_compiler_is_caught_by_the_runner_and_written_as_a_regression_test() -> None:
    report = fuzz(30, seed=3, config=CONFIG, compile_fn=drops_input_mutations, shrink_per_signature=1)
    assert report.counts[Outcome.DIVERGED] > 0
    shrunk = [f for f in report.failures if f.shrunk is not None]
    assert shrunk
    text = regression_source(shrunk[0], seed=3)
    assert "def test_fuzz_seed3_program" in text and "assert_matches_eager(f, make_inputs)" in text
    compile(text, "<regression>", "exec")


def bumps_output_counters(fn: Fn) -> Fn:
    """A broken "compiler": right values and layouts, but the version counter of each plain output that shares no
    storage with an input one ahead of eager's."""

    def run(*args: object) -> object:
        out = fn(*args)
        inputs = {a.untyped_storage().data_ptr() for a in args if type(a) is torch.Tensor}
        for t in out if isinstance(out, tuple) else (out,):
            if type(t) is torch.Tensor and t._base is None and t.untyped_storage().data_ptr() not in inputs:
                torch._C._autograd._unsafe_set_version_counter((t,), (t._version + 1,))
        return out

    return run


def test_versions_exact_catches_a_counter_the_default_comparison_lets_through() -> None:
    config = FuzzConfig(vocabulary=CORE)
    moved = fuzz(20, seed=5, config=config, compile_fn=bumps_output_counters, shrink_per_signature=0)
    exact = fuzz(20, seed=5, config=config, compile_fn=bumps_output_counters, shrink_per_signature=1, versions="exact")
    assert moved.counts[Outcome.DIVERGED] == 0 and moved.counted == 20
    assert exact.counts[Outcome.DIVERGED] > 0, str(exact)
    assert all("version counter" in sig for _, sig in exact.failure_signatures), str(exact)
    shrunk = [f for f in exact.failures if f.shrunk is not None]
    text = regression_source(shrunk[0], seed=5, versions="exact")
    assert "assert_matches_eager(f, make_inputs, versions='exact')" in text and "versions exact" in text
    compile(text, "<regression>", "exec")
    assert "versions=exact" in str(exact)


@pytest.mark.parametrize("changes", ["arguments", "state"])
def test_a_failure_found_with_changes_is_written_with_its_wrapper(
    changes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A regression test written from a change-mode run calls the program through the same wrapper, with the same
    changes between calls (it dropped them, and the written test of fuzz seed 27000 #2444 passed)."""
    report = fuzz(
        20,
        seed=3,
        config=CONFIG,
        compile_fn=drops_input_mutations,
        shrink_per_signature=1,
        argument_changes=changes == "arguments",
        state_changes=changes == "state",
    )
    shrunk = [f for f in report.failures if f.shrunk is not None]
    assert shrunk and report.changes == changes
    text = regression_source(shrunk[0], 3, changes=report.changes)
    namespace: dict[str, object] = {}
    exec(compile(text, "<regression>", "exec"), namespace)
    test = cast(Callable[[], None], namespace[f"test_fuzz_seed3_program{shrunk[0].index}"])
    test()  # the real pipeline: passes
    monkeypatch.setattr(fuzz_runner, "pipeline_compile", lambda backend: drops_input_mutations)
    with pytest.raises(AssertionError, match=r"call \d"):
        test()  # the broken compiler the run used: fails again


def test_the_progress_line_tells_each_failure_as_soon_as_it_is_found() -> None:
    """A long run's failures show while it runs (it shrinks them inline; the report comes only at the end)."""
    lines: list[str] = []
    told = [0]
    report = fuzz(
        12,
        seed=3,
        config=CONFIG,
        compile_fn=drops_input_mutations,
        shrink_per_signature=0,
        progress=lambda r: _checkpoint(r, 12, None, lines.append, told),
    )
    failures = [line for line in lines if line.startswith("  program ")]
    assert report.counts[Outcome.DIVERGED] > 0
    assert failures == [
        f"  program {f.index}: {f.verdict.outcome.value} ({f.verdict.signature})" for f in report.failures
    ]


def _stalls_on_one_input(stall: Callable[[], None]) -> Callable[[Fn], Fn]:
    """A "compiler" whose programs run `stall()` when called with one argument (else eager)."""

    def compile_fn(fn: Fn) -> Fn:
        def run(*args: object) -> object:
            if len(args) == 1:
                stall()
            return fn(*args)

        return run

    return compile_fn


def _sleep() -> None:
    time.sleep(3600)  # (a deadlock inside torch's C++ holds the GIL: no Python timeout would end either)


def _die() -> None:
    os._exit(70)  # (as a segfault in torch ends the process, without its stack printed into the test's output)


def _one_input(index: int) -> bool:
    return len(generate(RandomChooser(3 * 1_000_003 + index), CONFIG).inputs) == 1


@pytest.mark.parametrize(("stall", "outcome"), [(_sleep, Outcome.HUNG), (_die, Outcome.CRASHED)])
def test_a_check_past_the_time_limit_is_hung_and_the_run_goes_on(
    stall: Callable[[], None], outcome: Outcome, tmp_path: pathlib.Path
) -> None:
    """With a timeout each check runs in a forked child: one past the limit is killed and HUNG (a child that dies is
    CRASHED), and a fresh child checks the next program (fuzz seed 122970 #1276 deadlocked and stopped a run)."""
    report = fuzz(4, seed=3, config=CONFIG, compile_fn=_stalls_on_one_input(stall), timeout=1.0)
    stalled = [i for i in range(4) if _one_input(i)]
    assert stalled and len(stalled) < 4 and report.counts[Outcome.DISCARDED] == 0, str(report)
    assert [(f.index, f.verdict.outcome) for f in report.failures] == [(i, outcome) for i in stalled], str(report)
    assert report.counts[Outcome.PASS] == 4 - len(stalled), str(report)  # (checked after a stall: by a new child)
    if outcome is Outcome.HUNG:
        assert all(f.shrunk is None for f in report.failures)  # not shrunk, but written out
        text = write_report(report, str(tmp_path))
        assert "HUNG: no verdict within the time limit" in text
        for index in stalled:
            source = (tmp_path / f"hung_{index:05d}.py").read_text()
            assert "no verdict within 1 s" in source
            compile(source, "<regression>", "exec")


def _runs_a_parallel_kernel(fn: Fn) -> Fn:
    def run(*args: object) -> object:
        torch.ones(1 << 20).sum()  # (above the grain size: split over threads)
        return fn(*args)

    return run


def test_a_forked_check_runs_parallel_kernels_the_parent_ran_before() -> None:
    """The parent's OpenMP team is not the forked child's: a parallel kernel there waited on threads that did not
    exist (HUNG; the first run of seed 123040 with a time limit hung on a max() drawn by the generator)."""
    if torch.get_num_threads() < 2:
        pytest.skip("one intra-op thread: no kernel runs in parallel")
    torch.ones(1 << 20).sum()
    report = fuzz(1, seed=3, config=CONFIG, compile_fn=_runs_a_parallel_kernel, timeout=30.0)
    assert report.counts[Outcome.PASS] == 1, str(report)


def test_the_cli_timeout_kills_the_worker_that_runs_past_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    """`--timeout` with `--jobs 2`: each worker's hung checks are HUNG, told, counted and written out."""
    monkeypatch.setattr(fuzz_runner, "pipeline_compile", lambda backend: _stalls_on_one_input(_sleep))
    parser = argparse.ArgumentParser()
    fuzz_runner.add_arguments(parser)
    out = tmp_path / "out"
    args = parser.parse_args(["--programs", "4", "--seed", "3", "--jobs", "2", "--timeout", "1", "--out", str(out)])
    lines: list[str] = []
    assert fuzz_runner.run_cli(args, lines.append) == 1
    stalled = [i for i in range(4) if _one_input(i)]
    assert f"  HUNG        {len(stalled)}" in lines[0] and "  PASS        " + str(4 - len(stalled)) in lines[0]
    assert sorted(p.name for p in out.glob("hung_*.py")) == [f"hung_{i:05d}.py" for i in stalled]


def refuses_everything(fn: Fn) -> Fn:
    def run(*args: torch.Tensor) -> object:
        raise UnsupportedError("refused by rule R")

    return run


def test_refused_programs_are_listed_by_rule_with_their_indexes(tmp_path: object) -> None:
    shards = [fuzz(7, seed=4, config=CONFIG, compile_fn=refuses_everything, shard=(k, 2)) for k in range(2)]
    merged = merge_reports(shards)
    assert merged.counts[Outcome.UNSUPPORTED] == 7
    (indexes,) = merged.unsupported_indexes.values()
    assert indexes == sorted(indexes) and len(set(indexes)) == 7  # both shards' programs, in program order
    assert {i % 2 for i in indexes} == {0, 1}
    text = write_report(merged, str(tmp_path))
    assert f"refused by rule R: {indexes}" in text


@pytest.mark.parametrize("count", [60, pytest.param(200, marks=pytest.mark.slow)])
def test_fixed_seed_smoke_has_no_divergence_or_crash(count: int) -> None:
    core = dataclasses.replace(CONFIG, vocabulary=frozenset({Vocabulary.CORE}))
    report = fuzz(count, seed=0, config=core, backend="eager", shrink_per_signature=1)
    assert report.counted == count
    shrunk = "\n\n".join(to_source(f.shrunk) + f.verdict.detail for f in report.failures if f.shrunk is not None)
    assert report.counts[Outcome.DIVERGED] == 0 and report.counts[Outcome.CRASHED] == 0, f"{report}\n\n{shrunk}"


@pytest.mark.parametrize("count", [60, pytest.param(200, marks=pytest.mark.slow)])
def test_fixed_seed_smoke_of_the_wide_vocabulary_has_no_divergence_or_crash(count: int) -> None:
    report = fuzz(count, seed=0, config=CONFIG, backend="eager", shrink_per_signature=1)
    assert report.counted == count
    shrunk = "\n\n".join(to_source(f.shrunk) + f.verdict.detail for f in report.failures if f.shrunk is not None)
    assert report.counts[Outcome.DIVERGED] == 0 and report.counts[Outcome.CRASHED] == 0, f"{report}\n\n{shrunk}"


def test_check_subclass_fuzz_adds_the_pipeline_fuzz_rule() -> None:
    from subclasses.pair import example

    report = check_subclass(example, rules=(), fuzz=10)
    result = report.get_result("pipeline.fuzz")
    assert result.status is not Status.SKIP
    if result.status is Status.FAIL:
        assert "minimal programs" in result.reason and "def f(" in result.reason


TWO = "tests.subclasses.two_tensor_factory:two_tensor"  # torch's TwoTensor, a subclass we did not write


def _drawn_with(config: FuzzConfig, wanted: set[str], count: int) -> list[Program]:
    """The first `count` programs of seeds 0, 1, ... whose bases are drawn of every kind in `wanted`."""
    found = []
    for seed in range(500):
        program = generate(RandomChooser(seed), config)
        if wanted <= {b.kind for b in program.bases}:
            found.append(program)
            if len(found) == count:
                return found
    raise AssertionError(f"fewer than {count} programs over {wanted} in 500 seeds")


def test_the_fuzzer_draws_two_tensor_inputs_and_mixes_kinds_within_a_program() -> None:
    """The kind is drawn per input: one program takes a PairTensor and a TwoTensor. TwoTensor has no `from_tensor`;
    its factory's own makes it in any shape, and the printed source builds the same inputs."""
    programs_ = _drawn_with(FuzzConfig(kinds=("plain", PAIR, TWO)), {PAIR, TWO}, 3)
    shapes = {b.shape for p in programs_ for b in p.bases if b.kind == TWO}
    assert shapes - {(3, 4)}, shapes  # shapes other than the factory's own instance's
    for program in programs_:
        namespace = _exec_source(program)
        make = namespace["make_inputs"]
        assert callable(make) and f"{TWO}.from_tensor(".replace(":", ".") in to_source(program)
        printed, interpreted = fresh_call(make), fresh_call(functools.partial(make_inputs, program))
        types = [type(t).__name__ for t in interpreted.args]
        assert "TwoTensor" in types and "PairTensor" in types
        assert types == [type(t).__name__ for t in printed.args]


@pytest.mark.parametrize("kinds", [("plain", TWO), ("plain", PAIR, TWO)], ids=["two_tensor", "mixed"])
def test_programs_over_two_tensor_inputs_pass_the_oracle(kinds: tuple[str, ...]) -> None:
    """A few programs over TwoTensor inputs (with PairTensor inputs in the same program, for `mixed`) compile and
    match eager, or are refused by a named rule."""
    wanted = set(kinds) - {"plain"}
    for program in _drawn_with(FuzzConfig(kinds=kinds), wanted, 6):
        verdict = check_program(program, fuzz_runner.pipeline_compile("eager"))
        assert verdict.outcome in (Outcome.PASS, Outcome.UNSUPPORTED), f"{verdict.detail}\n{to_source(program)}"


def test_generated_resize_never_grows_a_storage() -> None:
    # Fuzz seed 5000, program 3128: resize_() of an expanded input to fewer elements than it has but more than its
    # storage holds read uninitialized memory, which no two runs share.
    from subclassaot.tools.fuzz_ops import _gen_resize_
    from subclasses.pair import PairTensor

    for t in (torch.randn(4, 1, 2).expand(4, 2, 2), PairTensor.from_tensor(torch.randn(4, 1, 2)).expand(4, 2, 2)):
        shapes = [_gen_resize_(RandomChooser(seed), t) for seed in range(300)]
        chosen = [torch.Size(cast(tuple[int, ...], s[0])).numel() for s in shapes if s is not None]
        assert chosen and max(chosen) <= 8


def test_writes_whose_eager_result_depends_on_loop_order_are_recognized() -> None:
    # Note [In-Place Ops As Eager Runs Them]: fuzz seed 3000 #5450 (mul_ through as_strided((2, 3), (1, 1))), #7829.
    from subclassaot.tools.fuzz_ops import unspecified_write
    from subclasses.pair import PairTensor

    x = torch.randn(4, 4)
    assert unspecified_write("mul_", x.as_strided((2, 3), (1, 1)), None)
    assert unspecified_write("add_", x[0].expand(2, 4), None)
    assert unspecified_write("add_", x, x.t())  # reads x[j, i] where it writes x[i, j]
    assert unspecified_write("copy_", x[1:3], x[0:2])
    assert unspecified_write("mul_", PairTensor.from_tensor(x).as_strided((2, 3), (1, 1)), None)
    # defined: one value everywhere, no elements, the written tensor's own layout, disjoint memory, other storage
    assert not unspecified_write("fill_", x[0].expand(2, 4), None)
    assert not unspecified_write("zero_", x[0].expand(2, 4), None)
    assert not unspecified_write("add_", x[0].expand(0, 4), None)
    assert not unspecified_write("add_", x, x)
    assert not unspecified_write("add_", x[0], x[0].view(2, 2).view(4))
    assert not unspecified_write("copy_", x[0:2], x[2:4])
    assert not unspecified_write("add_", x, torch.randn(4, 4).t())
    assert unspecified_write("add_", x, x[0])  # row 1 reads row 0, which the write of row 0 changes


def test_state_changes_mode_fixed_seed_has_no_divergence_or_crash() -> None:
    """Python state (training, a module float, a global, a closure item, a submodule) changes between calls."""
    report = fuzz(3, seed=11, state_changes=True, shrink_per_signature=0)
    assert report.counts[Outcome.PASS] >= 2, str(report)
    assert report.counts[Outcome.DIVERGED] == 0 and report.counts[Outcome.CRASHED] == 0, str(report)


def test_state_changes_mode_catches_a_compiler_that_ignores_python_state() -> None:
    from subclassaot.api import compile as subclassaot_compile

    def stale(fn: Callable[..., object]) -> Callable[..., object]:
        return subclassaot_compile(fn, backend="eager", python_state_guards=False)

    # (a program that reads Python state; seed 7's program is refused since the set_order group was drawn)
    report = fuzz(1, seed=8, state_changes=True, compile_fn=stale, shrink_per_signature=0)
    assert report.counts[Outcome.DIVERGED] == 1, str(report)


def test_every_group_of_the_vocabulary_is_drawn() -> None:
    """Grad-mode scopes, requires_grad_(), storage free and refill (and inputs freed on entry), resize_() growths, the
    Function templates and the multi-output ops all occur in a few hundred default programs."""
    seen: set[str] = set()
    for seed in range(500):
        program = generate(RandomChooser(seed), CONFIG)
        seen.update(op.name for op in program.ops)
        seen.update(f"scope {s}" for op in program.ops for s in op.scopes)
        seen.update("freed input" for b in program.bases if b.freed)
        seen.update("several results" for op in program.ops if len(op.outs) > 1)
    wanted = {
        "requires_grad_", "storage_free", "storage_refill", "resize_grow", "SinFn", "DirtyScale", "TransposeSaved",
        "TwoViews", "sort", "max_dim", "split_with_sizes", "freed input", "several results", "set_self", "grad_factory",
        *(f"scope {s}" for s in ("no_grad", "enable_grad", "grad_off", "grad_on", "inference_mode")),
    }  # fmt: skip
    assert wanted - seen == set()


def _issue_27_classes(program: Program) -> set[str]:
    leaf = any(spec.views and spec.views[0].name == "detached_leaf" for spec in program.inputs)
    return {
        *(b.kind for b in program.bases if b.kind in NESTED_KINDS),
        *(f"batch_norm api {op.params[1]}" for op in program.ops if op.name == "batch_norm"),
        *(f"batch_norm stats {op.params[0]}" for op in program.ops if op.name == "batch_norm"),
        *(["detached leaf beside its base"] if leaf else []),
    }


def test_the_classes_fixed_for_issue_27_are_drawn_rarely_and_print_as_they_run() -> None:
    """Issue #27's classes: an input `b.detach().requires_grad_()` beside `b` that requires grad, training-mode
    native_batch_norm / F.batch_norm writing running statistics the program holds (the mean, the variance, both), and
    TwoTensor-of-TwoTensor inputs (over plain tensors, over leaves that require grad apart) each occur in a few
    hundred default programs, each in a few percent at most; the printed source of each does what the interpreter
    does."""
    found: dict[str, Program] = {}
    counts: dict[str, int] = {}
    for seed in range(600):
        program = generate(RandomChooser(seed), FuzzConfig())
        for name in _issue_27_classes(program):
            found.setdefault(name, program)
            counts[name] = counts.get(name, 0) + 1
    leaf = found["detached leaf beside its base"]
    (detached,) = (spec for spec in leaf.inputs if spec.views and spec.views[0].name == "detached_leaf")
    assert any(spec.base == detached.base for spec in leaf.inputs if spec is not detached)
    wanted = {*NESTED_KINDS, "detached leaf beside its base"}
    wanted |= {"batch_norm api 0", "batch_norm api 1", *(f"batch_norm stats {w}" for w in (0, 1, 2))}
    assert wanted - found.keys() == set()
    assert max(counts.values()) <= 30, counts  # 5% of 600
    for program in found.values():
        _assert_printed_source_does_what_the_interpreter_does(program)


def _session_55_classes(program: Program) -> set[str]:
    windows = {v for op in program.ops if op.name == "unfold" for v in op.outs}
    written = any(op.src in windows and OPS[op.name].family is Family.INPLACE for op in program.ops)
    steps = [(cast(int, op.params[2]), cast(int, op.params[1])) for op in program.ops if op.name == "unfold"]
    return {
        *(f"unfold {'overlapping' if step < size else 'apart'}" for step, size in steps if step != size),
        *(["written through unfold"] if written else []),
        *(["batch_norm repeated row"] if any(op.name == "batch_norm" and op.params[4] for op in program.ops) else []),
        *(b.kind for b in program.bases if b.kind in COMPLEX_KINDS),
    }  # fmt: skip


def test_the_classes_fixed_in_session_55_are_drawn_rarely_and_print_as_they_run() -> None:
    """Session 55's classes: writes through unfold windows that overlap or leave elements out, training-mode batch
    norm over one row repeated (variance 0), and complex inputs passed as a conj view or its imag (a neg view) each
    occur in a thousand default programs, each in a few percent at most; the printed source of each does what the
    interpreter does."""
    found: dict[str, Program] = {}
    counts: dict[str, int] = {}
    for seed in range(1000):
        program = generate(RandomChooser(seed), FuzzConfig())
        for name in _session_55_classes(program):
            found.setdefault(name, program)
            counts[name] = counts.get(name, 0) + 1
    wanted = {"unfold overlapping", "unfold apart", "written through unfold", "batch_norm repeated row"}
    assert (wanted | set(COMPLEX_KINDS)) - found.keys() == set(), counts
    assert max(counts.values()) <= 50, counts  # 5% of 1000
    for program in found.values():
        _assert_printed_source_does_what_the_interpreter_does(program)


def _new_leaf_classes(program: Program) -> set[str]:
    made = {v: op for op in program.ops if op.name == "grad_factory" for v in op.outs}
    users = [op for op in program.ops if op.src in made or op.other in made]
    return {
        *(f"factory {_FACTORIES[cast(int, op.params[0])]}" for op in made.values()),
        *(f"form {op.params[3]}" for op in made.values()),
        *(f"scope {s}" for op in made.values() for s in op.scopes),
        *(f"in {'training' if program.grad_mode else 'inference'}" for _ in made.values()),
        *(["returned"] if made.keys() & set(program.outputs) else []),
        *(f"then {OPS[op.name].family.value}" for op in users),
        *(["beside an input"] if any(op.other is not None for op in users) else []),
    }


def test_new_leaves_from_factories_are_drawn_rarely_and_print_as_they_run() -> None:
    """A new leaf made in the program (torch.zeros(..., requires_grad=True) and the other factories, or a factory's
    fresh result given requires_grad_()) occurs in a thousand default programs, in training and inference calls,
    under no_grad, enable_grad and inference_mode scopes, returned, viewed, written and combined with another variable;
    in a few percent of programs at most; the printed source of each does what the interpreter does."""
    found: dict[str, Program] = {}
    programs_with_one = 0
    for seed in range(1000):
        program = generate(RandomChooser(seed), FuzzConfig())
        classes = _new_leaf_classes(program)
        programs_with_one += bool(classes)
        for name in classes:
            found.setdefault(name, program)
    wanted = {*(f"factory {name}" for name in _FACTORIES), "form 0", "form 1", "in training", "in inference"}
    wanted |= {"scope no_grad", "scope enable_grad", "scope inference_mode", "returned", "beside an input"}
    wanted |= {"then view", "then inplace", "then functional"}
    assert wanted - found.keys() == set(), sorted(found)
    assert programs_with_one <= 100, programs_with_one  # 10% of 1000
    for program in found.values():
        _assert_printed_source_does_what_the_interpreter_does(program)


def test_the_core_vocabulary_alone_draws_no_other_group() -> None:
    core = FuzzConfig(kinds=CONFIG.kinds, vocabulary=CORE)
    for seed in range(100):
        program = generate(RandomChooser(seed), core)
        assert all(OPS[op.name].vocabulary is Vocabulary.CORE for op in program.ops)
        assert all(op.scopes in ((), ("no_grad",)) for op in program.ops) and not any(b.freed for b in program.bases)
        assert not _issue_27_classes(program) and not _session_55_classes(program)


def test_programs_that_would_read_a_freed_storage_are_never_run() -> None:
    """Eager reads a freed storage without a check (it segfaults): the generator never draws such a program, and a
    shrunk candidate that lost the op refilling a storage (or its free's target) is skipped before it runs."""
    base = BaseSpec(kind="plain", shape=(2, 2), grad="none")
    x = InputSpec(var=0, base=0, views=())
    free = Op(name="storage_free", src=1)
    refill = Op(name="storage_refill", src=1, params=(16, 0.5))
    freed_then_read = Program(
        bases=(base,),
        inputs=(x,),
        ops=(Op(name="mul", src=0, params=(2.0,), outs=(1,)), free, Op(name="sin", src=1, outs=(2,))),
        outputs=(2,),
        grad_mode=False,
    )
    assert not storage_safe(freed_then_read)
    refilled = dataclasses.replace(freed_then_read, ops=(*freed_then_read.ops[:2], refill, freed_then_read.ops[2]))
    assert storage_safe(refilled)
    assert check_program(refilled, identity_compile).outcome is Outcome.PASS
    free_an_input = dataclasses.replace(freed_then_read, ops=(Op(name="storage_free", src=0),), outputs=())
    assert not storage_safe(free_an_input)
    freed_input = dataclasses.replace(freed_then_read, bases=(dataclasses.replace(base, freed=True),), ops=())
    assert not storage_safe(dataclasses.replace(freed_input, outputs=(0,)))
    filled = Op(name="storage_refill", src=0, params=(16, 0.5), scopes=("no_grad",))
    assert storage_safe(dataclasses.replace(freed_input, ops=(filled,), outputs=(0,)))
    for seed in range(100):
        assert storage_safe(generate(RandomChooser(seed), CONFIG))


def test_the_dynamo_entry_compiles_the_printed_program_and_counts_refusals() -> None:
    report = fuzz(4, seed=2, config=CONFIG, entry="dynamo", shrink_per_signature=0)
    assert report.counted == 4 and report.entry == "dynamo"
    assert report.counts[Outcome.PASS] + report.counts[Outcome.UNSUPPORTED] == 4, str(report)


def test_a_failure_through_our_wrapper_of_function_apply_is_not_counted_as_ours() -> None:
    # fuzz seed 75700 #646 (Dynamo entry): Dynamo's own error, which torch.compile(backend="aot_eager") and
    # backend="eager" raise too, passed through the process-wide wrapper of `Function.apply` that an earlier compile
    # installed, and was counted as a crash of ours
    from subclassaot.tools.dynamo_backend import _ran_our_code
    from subclassaot.torch_internals import function_applies_noted

    class Raises(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
            raise ValueError("not ours")

        @staticmethod
        def backward(ctx: object, g: torch.Tensor) -> torch.Tensor:
            return g

    with function_applies_noted(lambda cls, args, kwargs: None):  # (installs the wrapper, as a compile does)
        pass
    with pytest.raises(ValueError, match="not ours") as caught:
        Raises.apply(torch.randn(2))  # type: ignore[no-untyped-call]  # untyped in torch
    frames = [frame.f_code.co_name for frame, _ in traceback.walk_tb(caught.value.__traceback__)]
    assert "_noted_function_apply" in frames
    assert not _ran_our_code(caught.value)


def test_the_command_line_arguments_of_a_sharded_fuzz_run_reach_its_workers() -> None:
    """`python -m subclassaot fuzz --jobs 2` sends its parsed arguments to worker processes, which pickle them: a
    lambda among them (the subcommand's `run` default) made every sharded run fail before its first program."""
    from subclassaot.__main__ import build_parser

    args = build_parser().parse_args(["fuzz", "--programs", "1", "--jobs", "2"])
    assert pickle.loads(pickle.dumps(args)).run is args.run
