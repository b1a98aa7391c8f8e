"""The fuzzer's argument-change mode (subclassaot.tools.fuzz_changes): programs called with Python constants (str,
torch.device, dtype, enum member, float, None, nested tuple/dict/list) they branch on or use as scalars, and a
module argument whose buffers they update, all changed between calls. A fixed-seed run has no DIVERGED and no
CRASHED program; a compiler that freezes the first call's constants is caught."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from subclassaot.tools.fuzz import FuzzConfig, Outcome
from subclassaot.tools.fuzz_ops import Vocabulary
from subclassaot.tools.fuzz_runner import fuzz


# CI: the first 12 programs (each takes every argument kind and draws its module changes); the slow run: 80
@pytest.mark.parametrize("programs", [12, pytest.param(80, marks=pytest.mark.slow)])
def test_argument_changes_fixed_seed_has_no_divergence_or_crash(programs: int) -> None:
    core = FuzzConfig(vocabulary=frozenset({Vocabulary.CORE}))  # the argument kinds, over the core op vocabulary
    report = fuzz(programs, seed=3, config=core, argument_changes=True, shrink_per_signature=0)
    assert report.counts[Outcome.PASS] >= programs * 7 // 8, str(report)
    assert report.counts[Outcome.DIVERGED] == 0 and report.counts[Outcome.CRASHED] == 0, str(report)


def test_argument_changes_catch_a_compiler_that_freezes_the_first_constants() -> None:
    from subclassaot.api import compile as subclassaot_compile

    def frozen(fn: Callable[..., object]) -> Callable[..., object]:
        compiled = subclassaot_compile(fn, backend="eager")
        first: list[object] = []

        def call(stats: object, opts: object, *args: object) -> object:
            first.append(opts)
            return compiled(stats, first[0], *args)

        return call

    report = fuzz(4, seed=3, argument_changes=True, compile_fn=frozen, shrink_per_signature=0)
    assert report.counts[Outcome.DIVERGED] >= 3, str(report)
