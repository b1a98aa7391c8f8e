"""The whole corpus again with `dynamic=True`: every size symbolic (or static where the symbolic trace cannot be
done faithfully, which compiles again with static shapes), results still eager's."""

from __future__ import annotations

import dataclasses

import pytest

from tests.oracle import CompileFn
from tests.pipeline import test_corpus_inference, test_corpus_subclass, test_corpus_training
from tests.pipeline.corpus import Case, params, run_case


def _dynamic(cases: list[Case]) -> list[Case]:
    return [dataclasses.replace(c, compile_kwargs={**c.compile_kwargs, "dynamic": True}, inductor=False) for c in cases]


@pytest.mark.parametrize(("case", "backend"), params(_dynamic(test_corpus_inference.CASES), "inference"))
def test_inference_program_dynamic(case: Case, backend: str, compile_fn: CompileFn | None) -> None:
    run_case(case, backend, compile_fn)


@pytest.mark.parametrize(("case", "backend"), params(_dynamic(test_corpus_training.CASES), "training"))
def test_training_program_dynamic(case: Case, backend: str, compile_fn: CompileFn | None) -> None:
    run_case(case, backend, compile_fn)


@pytest.mark.parametrize(("case", "backend"), params(_dynamic(test_corpus_subclass.CASES), "subclass"))
def test_subclass_program_dynamic(case: Case, backend: str, compile_fn: CompileFn | None) -> None:
    run_case(case, backend, compile_fn)
