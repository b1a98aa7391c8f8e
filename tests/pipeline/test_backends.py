"""What backends see and what the pipeline does with what they return (see tests/backends.py)."""

from __future__ import annotations

import pytest
import torch

import subclassaot.api
from subclassaot.errors import BackendError
from tests.backends import CountingBackend, MutatingBackend, RecordingBackend, mutating_nodes
from tests.oracle import assert_matches_eager


def mutates(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.mul_(2)
    y.t_()
    return x + y.t()


def make() -> tuple[object, ...]:
    return torch.randn(3, 3), torch.randn(3, 3)


def test_backend_sees_a_purely_functional_graph() -> None:
    recording = RecordingBackend()
    assert_matches_eager(mutates, make, backend=recording)
    assert recording.graphs
    for gm in recording.graphs:
        assert mutating_nodes(gm) == [], gm.code


def test_training_graphs_are_functional_too() -> None:
    recording = RecordingBackend()
    assert_matches_eager(
        mutates, lambda: (torch.randn(3, 3, requires_grad=True).clone(), torch.randn(3, 3)), backend=recording
    )
    assert len(recording.graphs) >= 1
    for gm in recording.graphs:
        assert mutating_nodes(gm) == [], gm.code


def test_keep_input_mutations_may_put_copy_in_the_graph_and_stays_correct() -> None:
    recording = RecordingBackend()
    assert_matches_eager(mutates, make, backend=recording, compile_kwargs={"keep_input_mutations": True})
    for gm in recording.graphs:
        assert all("copy_" in node for node in mutating_nodes(gm)), gm.code


def test_counting_backend_counts_one_graph_per_inference_compile() -> None:
    counting = CountingBackend()
    c = subclassaot.api.compile(mutates, backend=counting)
    c(*make())  # type: ignore[arg-type]
    c(*make())  # type: ignore[arg-type]
    assert counting.count == 1
    c(torch.randn(3, 3, dtype=torch.float64), torch.randn(3, 3, dtype=torch.float64))
    assert counting.count == 2


def test_backend_that_mutates_its_inputs_is_rejected() -> None:
    broken = MutatingBackend()
    c = subclassaot.api.compile(mutates, backend=broken)
    with pytest.raises(BackendError, match=r"mutat|input"):
        c(*make())  # type: ignore[arg-type]
