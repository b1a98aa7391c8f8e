"""Random programs that switch grad mode inside (enable_grad in a no_grad call, set_grad_enabled, inference_mode),
call requires_grad_(), free and refill storages, apply custom autograd.Functions (mark_dirty, a backward that
transposes a saved input) and multi-output ops (sort, max(dim), split_with_sizes), over plain tensors and the sample
subclasses (Float8Tensor, JaggedTensor, ShardedTensor on a one-rank mesh), match eager or are refused by name,
through both entry points: `subclassaot.compile(fn)` and `torch.compile(fn, backend="subclassaot")`.

Fixed seeds, a few dozen programs: 0 DIVERGED and 0 CRASHED. A failure lists each shrunk program; paste it into a
test named by its behaviour (tests/pipeline/test_grad_mode_switches.py and its neighbours hold the ones found so far).
"""

from __future__ import annotations

import pytest

from subclassaot.tools.fuzz import FuzzConfig, Outcome
from subclassaot.tools.fuzz_program import to_source
from subclassaot.tools.fuzz_runner import Entry, FuzzReport, fuzz

WIDE = FuzzConfig(kinds=("plain", "subclasses.pair:example"))  # every vocabulary group


def _assert_no_divergence_or_crash(report: FuzzReport, programs: int) -> None:
    assert report.counted == programs
    failures = report.failures
    shrunk = "\n\n".join(
        f"{f.verdict.detail}\n{to_source(f.shrunk if f.shrunk is not None else f.program)}" for f in failures
    )
    assert failures == [], f"{report}\n\n{shrunk}"


@pytest.mark.parametrize(("entry", "programs"), [("direct", 24), ("dynamo", 12)])
def test_wide_vocabulary_matches_eager_or_is_refused(entry: Entry, programs: int) -> None:
    report = fuzz(programs, seed=27, config=WIDE, entry=entry, shrink_per_signature=1)
    _assert_no_divergence_or_crash(report, programs)
    assert report.counts[Outcome.PASS] >= programs // 2, str(report)


@pytest.mark.parametrize(
    "kind",
    ["subclasses.fp8:example", "subclasses.nested:example", "subclasses.distributed:example"],
    ids=["float8", "jagged", "sharded"],
)
def test_sample_subclass_inputs_match_eager_or_are_refused(kind: str) -> None:
    """Base 0 is always the sample subclass; ops its table does not support are dropped by the generator's eager
    run, never drawn into a program."""
    config = FuzzConfig(kinds=(kind, "plain"), first_kind_always=True)
    report = fuzz(6, seed=27, config=config, shrink_per_signature=1)
    _assert_no_divergence_or_crash(report, 6)
