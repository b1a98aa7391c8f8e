"""What backends see and what the pipeline does with what they return (see tests/backends.py)."""

from __future__ import annotations

import pytest
import torch

import subclassaot
import subclassaot.api
from subclassaot.errors import BackendError, UnsupportedError
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


def test_double_backward_works_on_the_eager_backend() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * x * x).sum()

    x = torch.randn(3, requires_grad=True)
    (g,) = torch.autograd.grad(subclassaot.compile(f, backend="eager")(x), x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x)
    x2 = x.detach().requires_grad_(True)
    (e,) = torch.autograd.grad(f(x2), x2, create_graph=True)
    (ee,) = torch.autograd.grad(e.sum(), x2)
    torch.testing.assert_close(gg, ee)


def test_double_backward_through_inductor_is_refused_clearly() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * x).sum()

    x = torch.randn(3, requires_grad=True)
    y = subclassaot.compile(f, backend="inductor")(x)
    with pytest.raises(UnsupportedError, match="double backward"):
        torch.autograd.grad(y, x, create_graph=True)


def _clone_into_pair(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor]:
    t0 = x0.clone()
    t2 = t0.view(()).unsqueeze(0)
    x1.copy_(t0)
    return (t2,)


def test_a_fresh_output_inductor_returns_over_an_input_is_copied() -> None:
    # Found by `fuzz --backend inductor --subclass subclasses.pair:example --seed 60000` (program 145): inductor
    # drops the clone of x0 as a no-op and returned t2 as a view of x0 (offset 2, sharing its storage) where eager's
    # is a new tensor (Note [What A Backend Receives And Returns]).
    from subclasses.pair import PairTensor

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        with torch.enable_grad():
            b0 = torch.randn(4, requires_grad=True).clone()
        return b0.select(0, -2), PairTensor.from_tensor(torch.randn(1, 1))

    with torch.enable_grad():
        assert_matches_eager(_clone_into_pair, make, calls=2, backend="inductor")


def test_inductor_gets_a_copy_of_the_graph() -> None:
    # inductor rewrites the graph it compiles in place; the entry keeps the pipeline's own (explain shows it)
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.clone().view(-1) * 2

    compiled = subclassaot.compile(f, backend="inductor")
    compiled(torch.randn(2, 2))
    (entry,) = compiled.entries
    assert entry.traced.graph is not None
    assert any(n.target is torch.ops.aten.view.default for n in entry.traced.graph.graph.nodes)
