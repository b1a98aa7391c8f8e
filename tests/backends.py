"""Test backends: one that records the graphs it is given, one that counts compiles, one that breaks the rules.

Input: what the pipeline hands a backend, `backend(gm, example_inputs) -> callable`.
Output: callables that run the graph eagerly (the recording and counting backends) or that mutate an input
before running it (the broken backend, which the pipeline must reject with `BackendError`).
Invariants: none of these backends changes what the graph computes; only `MutatingBackend` has a side effect.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch
import torch.fx

__all__ = ["CountingBackend", "MutatingBackend", "RecordingBackend", "mutating_nodes"]


@dataclasses.dataclass(slots=True)
class RecordingBackend:
    """Keeps every graph and its example inputs, and runs the graph as it is."""

    graphs: list[torch.fx.GraphModule] = dataclasses.field(default_factory=list)
    example_inputs: list[tuple[object, ...]] = dataclasses.field(default_factory=list)

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> Callable[..., object]:
        self.graphs.append(gm)
        self.example_inputs.append(tuple(example_inputs))
        return gm


@dataclasses.dataclass(slots=True)
class CountingBackend:
    """Counts how many graphs it compiled (a forward and a backward graph count as two)."""

    count: int = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> Callable[..., object]:
        self.count += 1
        return gm


@dataclasses.dataclass(slots=True)
class MutatingBackend:
    """Breaks the functional-graph rule: its callable adds 1 to its first tensor argument, then runs the graph."""

    calls: int = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> Callable[..., object]:
        def run(*args: object) -> object:
            self.calls += 1
            for arg in args:
                if isinstance(arg, torch.Tensor) and arg.dtype.is_floating_point:
                    with torch.no_grad():
                        arg.add_(1)
                    break
            return gm(*args)

        return run


def mutating_nodes(gm: torch.fx.GraphModule) -> list[str]:
    """The nodes of `gm` that call an op whose schema says it writes to an argument (`add_`, `copy_`, `set_`...)."""
    found = []
    for node in gm.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op == "call_function" and isinstance(schema, torch._C.FunctionSchema) and schema.is_mutable:
            found.append(f"{node.name} = {node.target}")
    return found
