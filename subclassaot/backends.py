"""Stage `backend`: a purely functional fx graph over plain tensors and symints -> a callable.

Input: a `TracedGraph`'s GraphModule and its fake example inputs. Output: a callable taking the graph's inputs as
positional arguments and returning its outputs as a list or tuple.
Invariants: every graph handed to a backend has been verified functional (`verify_functional`); the runtime checks
on the first call that the backend's callable did not mutate its inputs either.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

import torch
import torch.fx

from subclassaot.config import BackendFn
from subclassaot.errors import BackendError

_REGISTRY: dict[str, BackendFn] = {}
_LOCK = threading.Lock()


def register_backend(name: str, backend: BackendFn) -> None:
    """Make `backend` available as `subclassaot.compile(fn, backend=name)`."""
    with _LOCK:
        _REGISTRY[name] = backend


def get_backend(backend: str | BackendFn) -> BackendFn:
    if callable(backend):
        return backend
    with _LOCK:
        found = _REGISTRY.get(backend)
        names = sorted(_REGISTRY)
    if found is None:
        raise ValueError(f"unknown backend {backend!r}; registered: {names}. Add one with register_backend(name, fn)")
    return found


def eager_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> Callable[..., object]:
    """Run the graph module as Python (the reference backend); `forward` skips GraphModule's call wrapper."""
    return gm.forward


def inductor_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> Callable[..., object]:
    """Inductor on the functional graph (compile_fx_inner: the graph is already functional aten)."""
    from torch._inductor.compile_fx import compile_fx_inner

    # A backward graph also takes the symbolic sizes the forward saved (Note [Partitioning The Joint Graph]).
    compiled = compile_fx_inner(gm, [t for t in example_inputs if isinstance(t, torch.Tensor | torch.SymInt | int)])

    def run(*args: object) -> object:
        return compiled(list(args))

    return run


register_backend("eager", eager_backend)
register_backend("inductor", inductor_backend)


def decompositions_for(backend: str | BackendFn) -> Mapping[torch._ops.OperatorBase, Callable[..., object]] | None:
    """The decomposition table a backend wants applied while tracing (inductor lowers only decomposed aten)."""
    if backend == "inductor" or backend is inductor_backend:
        from torch._inductor.decomposition import select_decomp_table

        return select_decomp_table()
    table = getattr(backend, "decompositions", None)
    return table if isinstance(table, Mapping) else None


def verify_functional(gm: torch.fx.GraphModule) -> None:
    """Raise BackendError (a pipeline bug, really) if a node of the graph mutates anything."""
    for node in gm.graph.nodes:
        target = node.target
        if node.op == "call_function" and isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
            raise BackendError(
                f"BUG: the functional graph contains the mutating op {target} at node {node.name}; "
                "please report this program"
            )


def check_inputs_untouched(versions_before: Sequence[int], inputs: Sequence[torch.Tensor], backend_name: str) -> None:
    """The backend's callable must not write its inputs (the epilogue owns every input mutation)."""
    for i, (before, t) in enumerate(zip(versions_before, inputs, strict=True)):
        if t._version != before:
            raise BackendError(
                f"backend {backend_name!r} mutated graph input {i} in place; a backend receives a purely functional "
                "graph and must return a callable without side effects on its inputs (the epilogue applies input "
                "mutations). Return a function that only reads its arguments"
            )
