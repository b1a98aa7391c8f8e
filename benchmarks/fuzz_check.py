"""Re-check chosen programs of a fuzz seed: `PYTHONPATH=. python benchmarks/fuzz_check.py SEED i,j,k [SUBSTRING]`.

Prints each program's verdict; with SUBSTRING, shrinks every DIVERGED/CRASHED/UNSUPPORTED one whose detail contains
it and prints the shrunk program and its detail. Program i of seed S is the one `python -m subclassaot fuzz --seed S
--subclass subclasses.pair:example` numbers i (REPORT.md lists them), so a report's indexes can be re-run after a fix.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from subclassaot.tools.fuzz import (
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
from subclassaot.tools.fuzz_program import Program, to_source
from subclassaot.tools.fuzz_runner import pipeline_compile


def _fails_alike(verdict: Verdict, compile_fn: CompileFn) -> Callable[[Program], bool]:
    still = same_failure(verdict)

    def check(q: Program) -> bool:
        return still(check_program(q, compile_fn))

    return check


def main() -> None:
    seed, indexes = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(",")]
    want = sys.argv[3] if len(sys.argv) > 3 else None
    config = FuzzConfig(kinds=("plain", "subclasses.pair:example"))
    compile_fn = pipeline_compile("eager")
    for i in indexes:
        program = generate(RandomChooser(seed * 1_000_003 + i), config)
        verdict = check_program(program, compile_fn)
        print(i, verdict.outcome.value, verdict.signature[:140], flush=True)
        if want is None or verdict.outcome is Outcome.PASS or want not in verdict.detail:
            continue
        small = shrink(program, _fails_alike(verdict, compile_fn))
        print(to_source(small))
        print(check_program(small, compile_fn).detail[:1500], flush=True)


if __name__ == "__main__":
    main()
