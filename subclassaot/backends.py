"""Stage `backend`: a purely functional fx graph over plain tensors and symints -> a callable.

Input: a `TracedGraph`'s GraphModule and its fake example inputs. Output: a callable taking the graph's inputs as
positional arguments and returning its outputs as a list or tuple.
Invariants: every graph handed to a backend has been verified functional (`verify_functional`); the runtime checks
on the first call that the backend's callable did not mutate its inputs either.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import cast

import torch
import torch.fx

from subclassaot.config import BackendFn
from subclassaot.errors import BackendError
from subclassaot.torch_internals import get_version

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
    # A backward graph also takes the symbolic sizes the forward saved (Note [Partitioning The Joint Graph]).
    # fallback_random: random ops call aten's own kernels on the global generator, so a compiled program draws
    # the same numbers as eager (and compile_fx_inner runs no pass that would lower them otherwise).
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx_inner

    with inductor_config.patch(fallback_random=True):
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
        if get_version(t) != before:
            raise BackendError(
                f"backend {backend_name!r} mutated graph input {i} in place; a backend receives a purely functional "
                "graph and must return a callable without side effects on its inputs (the epilogue applies input "
                "mutations). Return a function that only reads its arguments"
            )


# Note [Backend Output Strides]
# The runtime promises eager's strides for every output, and regenerates views of intermediates from the strides
# the graph returns. A backend may lay a fresh output out differently from eager: Inductor picks its own stride for
# a size-1 dimension ((4, 4, 1) where eager has (8, 4, 1)), which changes no element's address but is observable
# through .stride() (even the fake trace can disagree with eager there). So on the first call of a non-eager backend
# the graph also runs eagerly (same inputs, the RNG state restored around it) and each output with static metadata
# is compared with eager's; for the outputs that differ, every call gives back a tensor with eager's strides: an
# alias of the same memory when only size-1 dimensions differ, a copy otherwise. Outputs that matched on the first
# call are never touched again.


def keep_eager_strides(compiled: Callable[..., object], gm: torch.fx.GraphModule) -> Callable[..., object]:
    """Wrap a backend's callable so its outputs have eager's strides (Note [Backend Output Strides])."""
    static = _static_outputs(gm)
    if not any(static):
        return compiled
    fix: dict[int, tuple[int, ...]] | None = None
    lock = threading.Lock()

    def run(*args: object) -> object:
        nonlocal fix
        outs = compiled(*args)
        assert isinstance(outs, list | tuple), "BUG: a backend returns a list or tuple of outputs"
        if fix is None:
            with lock:
                fix = _stride_fixes(gm, args, outs, static)
        if not fix:
            return outs
        fixed = list(outs)
        for k, stride in fix.items():
            fixed[k] = _with_strides(cast(torch.Tensor, outs[k]), stride)
        return fixed

    return run


def _static_outputs(gm: torch.fx.GraphModule) -> list[bool]:
    output = next(n for n in gm.graph.nodes if n.op == "output")
    values = output.args[0]
    out: list[bool] = []
    for node in values if isinstance(values, list | tuple) else [values]:
        val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        out.append(isinstance(val, torch.Tensor) and all(isinstance(d, int) for d in (*val.shape, *val.stride())))
    return out


def _stride_fixes(
    gm: torch.fx.GraphModule, args: Sequence[object], outs: Sequence[object], static: Sequence[bool]
) -> dict[int, tuple[int, ...]]:
    devices = sorted({str(a.device) for a in args if isinstance(a, torch.Tensor) and a.device.type != "cpu"})
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        reference = gm.forward(*args)
    return {
        k: tuple(ref.stride())
        for k, (ref, out, ok) in enumerate(zip(reference, outs, static, strict=True))
        if ok and isinstance(out, torch.Tensor) and isinstance(ref, torch.Tensor) and out.stride() != ref.stride()
    }


def _with_strides(t: torch.Tensor, stride: tuple[int, ...]) -> torch.Tensor:
    if tuple(t.stride()) == stride:
        return t
    if all(a == b or size <= 1 for a, b, size in zip(t.stride(), stride, t.shape, strict=True)):
        alias = torch.empty((0,), dtype=t.dtype, device=t.device)
        with torch.no_grad():
            alias.set_(t.untyped_storage(), t.storage_offset(), t.size(), stride)
        return alias
    out = torch.empty_strided(t.shape, stride, dtype=t.dtype, device=t.device)
    with torch.no_grad():
        out.copy_(t)
    return out
