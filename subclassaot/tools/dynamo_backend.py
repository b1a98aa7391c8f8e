"""The torch.compile backend adapter: `torch.compile(fn, backend="subclassaot")`.

Input: what Dynamo hands a backend: one captured `torch.fx.GraphModule` and its example inputs (real tensors,
Parameters, subclass instances and SymInts for sizes), plus torch.compile's `options=` (see `ADAPTER_OPTIONS`).
Output: a callable that Dynamo calls with the graph's flat inputs; it runs the graph through `subclassaot`'s own
pipeline (`CompiledFunction`), so mutations, aliasing, subclasses and training behave as under `subclassaot.compile`.
Invariants: this is the only module of `subclassaot` that imports Dynamo; the pipeline never calls Dynamo. Each
captured graph is one `CompiledFunction` with its own cache, guards and recompile limit. Registered through the
`torch_dynamo_backends` entry point (pyproject.toml), so `backend="subclassaot"` works without importing us first.

Part: the fuzzer's entry through torch.compile. Input: a fuzz program's printed source and the inner backend name.
Output: `dynamo_compile_for(source)`, a compile function for `check_program` that ignores the interpreter closure it is
given and compiles the printed `f` (executed in a fresh namespace, as a regression test would) instead.
Invariants: `torch._dynamo.reset()` runs before each program, so no program sees another's cache; a refusal of ours
that Dynamo wraps (`BackendCompilerFailed` around an `UnsupportedError` raised while the backend compiles) is
unwrapped, so it counts as a refusal, as on the direct path; an exception none of whose frames (nor those of the
exceptions it chains) is ours (a frame of our process-wide wrappers of torch's own methods, `Function.apply`, is
torch's) is Dynamo's own failure (its run of the program on fakes, its guards), which the same program meets under
backend="aot_eager": it counts as a refusal under a rule that names Dynamo.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import os
import re
import threading
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, cast

import torch
import torch._dynamo
from torch._guards import TracingContext

from policies import Policy, TensorPolicy, dynamic, static
from subclassaot.api import CompiledEntry, CompiledFunction
from subclassaot.authoring.wrapper_tensor import WrapperTensor
from subclassaot.config import CallerGuarded, CompileConfig
from subclassaot.errors import SubclassAOTError, UnsupportedError
from subclassaot.pipeline.rules.autograd_state import PROGRAM_FUNCTION_FLAG
from subclassaot.runtime.autograd_function import engine_node_apply
from subclassaot.tools.explain import CapturedExplanation, Explanation, clone_arguments
from subclassaot.torch_internals import is_nested_int, torch_method_patches

log = logging.getLogger(__name__)


# Note [Dynamo Captures, The Pipeline Compiles]
# Dynamo and subclassaot split the work at the captured graph. Dynamo runs the user's Python: it breaks the graph where
# it must (data-dependent control flow, `.item()`, `loss.backward()`, unsupported calls), inlines nn.Modules and lifts
# their parameters and buffers, globals and closure tensors to graph inputs, and guards the Python around each graph.
# Each captured graph is an ordinary function over tensors, so it goes through the pipeline unchanged, as a
# `CompiledFunction` of `gm.forward`. What the two sides must agree on:
# - SymInt inputs. Under dynamic shapes Dynamo passes sizes as extra int inputs (`s77` = `x.size(0)`); where one is a
#   size, stride or offset of a tensor input (found on Dynamo's fakes, `node.meta["example_value"]`) the adapter reads
#   it from that tensor inside the compiled function, so it is symbolic in our trace too. Any other int stays a constant.
# - Dynamic dims. A dim whose size is a symbol on Dynamo's fake gets a dynamic policy at the input's path (`args[i]`,
#   `args[i].a`); every other dim is static (our ShapeEnv still guards its own symbols).
# - Guards Dynamo already holds are not repeated: TENSOR_MATCH on every tensor input and, for a traceable subclass, its
#   ctx (TENSOR_SUBCLASS_METADATA_MATCH), inner attribute names and each inner tensor. Ours for exactly those facts of
#   exactly those inputs are dropped (`CompileConfig.caller_guarded`, by input path), only where ours would check the
#   very value Dynamo checks. Storage offset, storage sharing, `is_leaf`, `_is_view` and our symbols stay ours. Python
#   state and global torch state Dynamo guards itself, and it traces through ambient modes: our snapshot guards are off
#   on this path (`python_state_guards=False`; Note [State The Program Reads]).
# - Grad switches. Dynamo records `with torch.no_grad():` as absolute `_set_grad_enabled(False)` / `(True)` calls, True
#   being the mode at capture. The pipeline also runs a graph under no_grad (a training graph's forward values), where
#   the closing switch would turn grad on for the rest of the graph. So a switch to the captured mode gives back the
#   mode the graph was entered in, and a switch away from it sets its own value.
# - Subclass dispatch runs without Dynamo. Where Dynamo breaks the graph (an in-place metadata op on a wrapper) it runs
#   the op eagerly with its frame hook on, and would compile WrapperTensor's `__torch_dispatch__` (user code, not in its
#   skip list) and fail inside it. Dispatch holds nothing to capture, so that code and the op handlers it calls carry a
#   flag on their code objects (free per call, unlike a torch.compiler.disable wrapper), set when this module loads.
#   So does the function the autograd engine calls to run a compiled step's node (it stands in for torch's
#   BackwardCFunction.apply, which Dynamo's skip list holds): a `loss.backward()` in a compiled training step runs
#   between captured graphs with the frame hook on, and Dynamo would trace the node's backward with its real ctx.
# - `torch.compiler.is_compiling()` is True while the pipeline runs the user's program to observe and trace it, as
#   under Dynamo and torch.export's non-strict tracing: libraries leave out work a graph cannot hold (transformers'
#   mask builders skip `padding_mask.all()`), so the compiled program is the program torch.compile would capture. The
#   entry's calls run outside the flag, as Dynamo's compiled frames do. Dynamo's frame hook is off meanwhile (stance
#   `force_eager`): eager's torch.cond, while_loop and map compile a wrapper of their op (`_hop_compile_and_call`),
#   which under our modes Dynamo skips and marks skipped for the process (eager's later torch.cond then fails); off,
#   the wrapper runs as Python and the higher-order op reaches our modes (torch_internals.base_mode_rule).

ADAPTER_OPTIONS = {
    "backend": "the inner backend each captured graph goes to: 'eager', 'inductor' (default) or a registered name",
    "dynamic": "None (default): the dims Dynamo made symbols; False: static in our pipeline; True: all dynamic",
    "recompile_limit": "compiled entries per captured graph before it runs eagerly (default 8)",
    "keep_input_mutations": "as subclassaot.compile's keep_input_mutations",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class SizeOf:
    """A SymInt input read from a tensor input: `tensor.size(dim)` / `.stride(dim)` / `.storage_offset()`."""

    tensor: int  # position among the graph's inputs
    what: Literal["size", "stride", "offset"]
    dim: int


class CapturedGraph:
    """One captured graph compiled by our pipeline; Dynamo calls it with the graph's flat inputs."""

    def __init__(
        self,
        gm: torch.fx.GraphModule,
        compiled: CompiledFunction[..., object],
        kept: Sequence[int],
        sources: Sequence[str | None] = (),
    ) -> None:
        self.gm = gm
        self.compiled = compiled
        self.kept = tuple(kept)  # positions of the graph inputs passed on (derived SymInts are recomputed)
        # len = len(kept), indexed by our input position (`args[i]`): Dynamo's name for it (`L['x']`), if known
        self.sources = tuple(sources[i] if i < len(sources) else None for i in self.kept)

    def __call__(self, *inputs: object) -> object:
        kept = self.kept
        if _RECORDERS:
            return self._recorded_call([inputs[i] for i in kept])
        return self.compiled(*[inputs[i] for i in kept])

    def _recorded_call(self, inputs: list[object]) -> object:
        entry = self.compiled.entry_for(*inputs)
        out = self.compiled(*inputs)
        ran = entry if entry is not None else self.compiled.entries[-1]  # none matched: the call compiled one
        with _RECORD_LOCK:
            for seen in _RECORDERS:
                seen.append((self, ran))
        return out


# While `recording()` is active: each call of one of our captured graphs, with the entry it ran.
_RECORDERS: list[list[tuple[CapturedGraph, CompiledEntry]]] = []
_RECORD_LOCK = threading.Lock()


@contextmanager
def recording() -> Iterator[list[tuple[CapturedGraph, CompiledEntry]]]:
    """Collect every call of a captured graph of ours made inside the block, in call order, with the compiled
    entry it ran (for `explain` and tests)."""
    seen: list[tuple[CapturedGraph, CompiledEntry]] = []
    with _RECORD_LOCK:
        _RECORDERS.append(seen)
    try:
        yield seen
    finally:
        with _RECORD_LOCK:
            _RECORDERS.remove(seen)


def explain_compiled(compiled: Callable[..., object], args: Sequence[object]) -> CapturedExplanation:
    """`explain` for a `torch.compile(fn, backend="subclassaot")` function: call it once on deep copies of `args`
    (and of the module, for a compiled module) and explain each captured graph that ran, in call order."""
    target, call_args = cast("tuple[Callable[..., object], tuple[object, ...]]", clone_arguments((compiled, args)))
    with recording() as calls:
        target(*call_args)
    inner = getattr(compiled, "_orig_mod", None) or getattr(compiled, "_torchdynamo_orig_callable", compiled)
    name = str(getattr(inner, "__name__", type(inner).__name__))
    if not calls:
        raise ValueError(
            f"explain({name}): no graph captured by torch.compile ran through subclassaot; compile it with "
            'torch.compile(fn, backend="subclassaot") (a function Dynamo runs eagerly captures no graph)'
        )
    graphs = []
    for k, (graph, entry) in enumerate(calls):
        tensors = [entry.flat.values[i] for i in entry.flat.tensor_indices]
        training = torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)
        graphs.append(
            Explanation(name=f"{name} graph {k}", entry=entry, config=graph.compiled.config, training=training)
        )
    first = graphs[0]
    sources = tuple(
        tuple(f"args[{i}] = {source}" for i, source in enumerate(graph.sources) if source is not None)
        for graph, _ in calls
    )
    return CapturedExplanation(
        name=name,
        entry=first.entry,
        config=first.config,
        training=first.training,
        graphs=tuple(graphs),
        sources=sources,
    )


def config_from_options(options: Mapping[str, object] | None, mode: str | None) -> CompileConfig:
    if mode not in (None, "default"):
        raise UnsupportedError(
            f"torch.compile(backend='subclassaot', mode={mode!r}): modes are not supported; pass "
            "options={'backend': 'inductor'} (the inner backend) instead of a mode"
        )
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(ADAPTER_OPTIONS))
    if unknown:
        known = "; ".join(f"{k}: {v}" for k, v in ADAPTER_OPTIONS.items())
        raise ValueError(f"torch.compile(backend='subclassaot'): unknown option(s) {unknown}; the options are: {known}")
    dynamic = opts.get("dynamic")
    limit = opts.get("recompile_limit", 8)
    if dynamic is not None and not isinstance(dynamic, bool):
        raise TypeError(f"options['dynamic'] must be None, True or False, got {dynamic!r}")
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise TypeError(f"options['recompile_limit'] must be an int, got {limit!r}")
    backend = opts.get("backend", "inductor")
    if not (isinstance(backend, str) or callable(backend)):
        raise TypeError(f"options['backend'] must be a backend name or a callable, got {backend!r}")
    return CompileConfig(
        backend=backend,
        dynamic=dynamic,
        recompile_limit=limit,
        keep_input_mutations=bool(opts.get("keep_input_mutations", False)),
        python_state_guards=False,  # See Note [Dynamo Captures, The Pipeline Compiles]
    )


def subclassaot_backend(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[object],
    *,
    options: Mapping[str, object] | None = None,
    mode: str | None = None,
) -> Callable[..., object]:
    """The Dynamo backend (the `subclassaot` entry point). See Note [Dynamo Captures, The Pipeline Compiles]."""
    config = config_from_options(options, mode)
    _restore_data_reads(gm)
    captured = torch.is_grad_enabled()  # Dynamo calls the backend in the mode the graph starts in, which it guards
    _relative_grad_switches(gm, captured)
    _function_bodies_as_eager(gm, captured)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    sources = [_source_name(n) for n in placeholders]
    derived = _derived_symints(sources)
    kept = [i for i in range(len(placeholders)) if i not in derived]
    dynamic_sources = _dynamic_sources()
    if config.dynamic is None and dynamic_sources is not None:  # follow Dynamo, dim by dim
        policies, guarded = _policies_and_guards(example_inputs, sources, kept, dynamic_sources)
        config = dataclasses.replace(config, policies=policies, caller_guarded=guarded)
    fn = _graph_function(gm, derived, len(placeholders), kept)
    log.debug("subclassaot backend: graph with %d inputs (%d recomputed sizes)", len(placeholders), len(derived))
    return CapturedGraph(gm, CompiledFunction(fn, config), kept, sources)


def data_of(t: torch.Tensor) -> torch.Tensor:
    """`t.data`, as the user wrote it (a graph node calls this; see `_restore_data_reads`)."""
    return t.data


def assign_data(t: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """`t.data = value`, as the user wrote it (a graph node calls this; see `_restore_data_reads`)."""
    t.data = value
    return t


def resize_storage(t: torch.Tensor, nbytes: int) -> None:
    """`t.untyped_storage().resize_(nbytes)`, as the user wrote it (a graph node calls this; see
    `_restore_data_reads`)."""
    t.untyped_storage().resize_(nbytes)


def _restore_data_reads(gm: torch.fx.GraphModule) -> None:
    """Dynamo records `t.data` as `torch._C._autograd._get_data_attr(t)`, `t.data = v` as `t.set_(v)` under
    no_grad followed by `_lower_version_count_by_1(t)`, and `t.untyped_storage().resize_(n)` as
    `inductor::resize_storage_bytes_(t, n)`. Our pipeline knows `.data` itself (a read is a tensor with its own
    version counter: `w.data.add_(1)` leaves w's version alone; an assignment swaps t's storage and layout hidden from
    autograd) and a storage's resize_ (Note [Storage Swaps By Rebinding]), so those nodes call `t.data` /
    `t.data = v` / the storage's `resize_` again."""
    changed = False
    get_data_attr = getattr(torch._C._autograd, "_get_data_attr", None)  # absent from torch's stubs
    resizes = (torch.ops.inductor.resize_storage_bytes_, torch.ops.inductor.resize_storage_bytes_.default)
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is get_data_attr:
            node.target = data_of
            changed = True
        elif node.target in resizes and len(node.args) == 2 and not node.kwargs and not node.users:
            node.target = resize_storage
            changed = True
        elif getattr(node.target, "__name__", "") == "_lower_version_count_by_1" and len(node.args) == 1:
            source = node.args[0]
            if (
                isinstance(source, torch.fx.Node)
                and source.target is torch.Tensor.set_
                and len(source.args) == 2
                and not source.kwargs
            ):
                source.target = assign_data
                node.replace_all_uses_with(source)
                gm.graph.erase_node(node)
                changed = True
    if changed:
        gm.recompile()


def _dispatch_runs_eagerly() -> None:
    """See Note [Dynamo Captures, The Pipeline Compiles]."""
    from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy

    for code in (WrapperTensor.__dict__["__torch_dispatch__"].__func__.__code__, engine_node_apply.__code__):
        set_code_exec_strategy(code, _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP))


_dispatch_runs_eagerly()


def set_grad_from_captured(value: bool, captured: bool, entered: bool) -> None:
    """`torch._C._set_grad_enabled(value)` of a captured graph (a graph node calls this; see the Note above)."""
    torch._C._set_grad_enabled(entered if value == captured else value)


def _relative_grad_switches(gm: torch.fx.GraphModule, captured: bool) -> None:
    """See Note [Dynamo Captures, The Pipeline Compiles]."""
    switches = [
        n for n in gm.graph.nodes if n.op == "call_function" and n.target is torch._C._set_grad_enabled and n.args
    ]
    if not switches:
        return
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    where = gm.graph.inserting_after(placeholders[-1]) if placeholders else gm.graph.inserting_before(switches[0])
    with where:
        entered = gm.graph.call_function(torch.is_grad_enabled, ())
    for node in switches:
        node.target = set_grad_from_captured
        node.args = (node.args[0], captured, entered)
    gm.recompile()


def _function_bodies_as_eager(gm: torch.fx.GraphModule, captured: bool) -> None:
    """A custom autograd.Function, captured as `autograd_function_apply(fwd, bwd, ...)`, runs its forward and
    backward graphs inside an autograd.Function of torch's: the pipeline takes it as the program's own (Note [Custom
    Functions]). Dynamo traced those bodies in the caller's grad mode and wrote `_set_grad_enabled(False)` ...
    `_set_grad_enabled(True)` around them (a view_as() of a returned input after the restore), where eager's
    Function runs its forward under no_grad: their switches are made relative as the graph's own are. An in-place
    foreach op returns None when run, where Dynamo's graph indexes its result: such unused reads are dropped. torch's
    Function hands the saved values to the backward by closure, so autograd checks none of their version counters;
    the node calls `apply_captured_function` instead, which saves with `ctx.save_for_backward` what the program did.
    """
    for node in gm.graph.nodes:
        if node.op != "call_function" or "autograd_function_apply" not in str(node.target):
            continue
        if set(node.kwargs) <= {"non_differentiable_idx", "saved_for_backward_idx", "dirty_idx"}:
            node.target = apply_captured_function
        for body in node.args[:2]:
            sub = getattr(gm, str(body.target)) if isinstance(body, torch.fx.Node) and body.op == "get_attr" else None
            if not isinstance(sub, torch.fx.GraphModule):
                continue
            for read in [n for n in sub.graph.nodes if n.target is operator.getitem and not n.users]:
                sub.graph.erase_node(read)
            sub.recompile()
            _relative_grad_switches(sub, captured)


def apply_captured_function(
    fwd: Callable[..., Any],
    bwd: Callable[..., Any],
    *args: object,
    non_differentiable_idx: Sequence[int] = (),
    saved_for_backward_idx: Sequence[int] = (),
    dirty_idx: Sequence[int] = (),
) -> object:
    """Dynamo's `autograd_function_apply(fwd, bwd, *args, ...)` as the program's own Function ran: `fwd(*args)` gives
    (outputs, saved values), the values the program saved with `ctx.save_for_backward` are saved so (their version
    counters checked when the backward unpacks them) and the others kept on ctx; `bwd(*grads, *saved)`."""

    class CapturedFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *inputs: object) -> Any:
            outputs, saved = fwd(*inputs)
            if dirty_idx:
                ctx.mark_dirty(*(o for k, o in enumerate(outputs) if k in dirty_idx))
            if non_differentiable_idx:
                ctx.mark_non_differentiable(*(o for k, o in enumerate(outputs) if k in non_differentiable_idx))
            checked = [k for k in saved_for_backward_idx if isinstance(saved[k], torch.Tensor)]
            ctx.save_for_backward(*(saved[k] for k in checked))
            ctx.checked = checked
            ctx.kept = [None if k in checked else v for k, v in enumerate(saved)]
            return outputs

        @staticmethod
        def backward(ctx: Any, *grads: object) -> Any:
            saved = list(ctx.kept)
            for k, value in zip(ctx.checked, ctx.saved_tensors, strict=True):
                saved[k] = value
            return bwd(*grads, *saved)

    setattr(CapturedFunction, PROGRAM_FUNCTION_FLAG, True)  # (the program's Function, not one of the pipeline's)
    return CapturedFunction.apply(*args)  # type: ignore[no-untyped-call]  # untyped in torch


def _source_name(node: torch.fx.Node) -> str | None:
    """Dynamo's name for where a graph input comes from (`L['x']`, `L['x'].size()[0]`), if it says."""
    arg = node.meta.get("grapharg")
    source = getattr(arg, "source", None)
    name = getattr(source, "name", None)
    return name if isinstance(name, str) else None


def _dynamic_sources() -> frozenset[str] | None:
    """The sources Dynamo made a symbol for (`L['x'].size()[0]`): the dims it did not guard to a value. None outside
    a Dynamo compile (a hand call of the backend): then nothing is taken from Dynamo."""
    context = TracingContext.try_get()
    shape_env = getattr(getattr(context, "fake_mode", None), "shape_env", None)
    if shape_env is None:
        return None if context is None else frozenset()
    return frozenset(source.name for sources in shape_env.var_to_sources.values() for source in sources)


_SIZE_SOURCE = re.compile(
    r"^(?P<tensor>.*)\.(?P<what>size|stride)\(\)\[(?P<dim>\d+)\]$|^(?P<owner>.*)\.storage_offset\(\)$"
)


def _derived_symints(sources: Sequence[str | None]) -> dict[int, SizeOf]:
    """SymInt inputs that are a size, stride or offset of a tensor input (by their Dynamo source), by position."""
    tensors = {name: i for i, name in enumerate(sources) if name is not None}
    derived: dict[int, SizeOf] = {}
    for i, name in enumerate(sources):
        match = _SIZE_SOURCE.match(name or "")
        if match is None:
            continue
        owner = match["tensor"] if match["tensor"] is not None else match["owner"]
        if owner in tensors:
            what: Literal["size", "stride", "offset"] = "size" if match["what"] == "size" else "offset"
            if match["what"] == "stride":
                what = "stride"
            derived[i] = SizeOf(tensor=tensors[owner], what=what, dim=int(match["dim"] or 0))
    return derived


def _graph_function(
    gm: torch.fx.GraphModule, derived: Mapping[int, SizeOf], arity: int, kept: Sequence[int]
) -> Callable[..., object]:
    """The function our pipeline compiles: the graph's forward, with derived SymInts read from their tensors."""
    # A graph holding tensors as attributes (Dynamo keeps an optimizer's parameters as get_attr) compiles as a
    # module (held in `run`'s closure below): our pipeline lifts its parameters, buffers and tensor attributes to
    # inputs, read afresh on every call (Note [State The Program Reads]).
    graph: Callable[..., object] = gm if _has_state(gm) else gm.forward
    if not derived:
        return graph
    slot_of = {position: slot for slot, position in enumerate(kept)}

    def run(*inputs: object) -> object:
        full: list[object] = []
        for i in range(arity):
            source = derived.get(i)
            if source is None:
                full.append(inputs[slot_of[i]])
                continue
            t = inputs[slot_of[source.tensor]]
            assert isinstance(t, torch.Tensor), "BUG: a size source is not a tensor"
            if source.what == "size":
                full.append(t.size(source.dim))
            elif source.what == "stride":
                full.append(t.stride(source.dim))
            else:
                full.append(t.storage_offset())
        return graph(*full)

    return run


def _state_items(gm: torch.fx.GraphModule) -> list[tuple[str, torch.Tensor]]:
    items = list(gm.named_parameters()) + list(gm.named_buffers())
    items += [(k, v) for k, v in vars(gm).items() if isinstance(v, torch.Tensor)]
    return items


def _has_state(gm: torch.fx.GraphModule) -> bool:
    return bool(_state_items(gm))


def _is_subclass(t: torch.Tensor) -> bool:
    return type(t) is not torch.Tensor and type(t) is not torch.nn.Parameter and hasattr(t, "__tensor_flatten__")


def _policies_and_guards(
    reals: Sequence[object], sources: Sequence[str | None], kept: Sequence[int], dynamic_sources: frozenset[str]
) -> tuple[dict[str, Policy], dict[str, CallerGuarded]]:
    """Per kept tensor input, by its path in our pipeline: a policy with the dims Dynamo made symbols for dynamic and
    every other dim static, and what Dynamo guards of it (Note [Dynamo Captures, The Pipeline Compiles]). Read from
    Dynamo's sources and the real inputs, not from Dynamo's fakes: its trace mutates those (a set_() in the program
    leaves the placeholder's fake with the new shape)."""
    policies: dict[str, Policy] = {}
    guarded: dict[str, CallerGuarded] = {}
    for slot, position in enumerate(kept):
        real, source = reals[position], sources[position]
        if not isinstance(real, torch.Tensor) or source is None:
            continue
        path = f"args[{slot}]"
        for suffix, t in _tensors_under(real, ""):
            name = source + suffix
            sizes = [f"{name}.size()[{d}]" in dynamic_sources for d in range(t.dim())]
            # a jagged tensor's dims other than the batch and the ragged one make the coefficient of its nested
            # strides, which a symbol cannot (Note [Nested Int Dims]): static in the pipeline, which guards them
            pinned = any(is_nested_int(n) for n in t.size())
            ours = [
                dyn and not (pinned and d > 0 and not is_nested_int(n))
                for d, (dyn, n) in enumerate(zip(sizes, t.size(), strict=True))
            ]
            policies[path + suffix] = TensorPolicy(sizes=tuple(dynamic() if dyn else static() for dyn in ours))
            guarded[path + suffix] = CallerGuarded(
                type=type(t),
                dtype=t.dtype,
                device=t.device,
                requires_grad=t.requires_grad,
                sizes=tuple(None if dyn else int(n) for dyn, n in zip(sizes, t.size(), strict=True)),
                # a stride is trusted only where no size is symbolic (then Dynamo guards each stride to its value)
                strides=tuple(None if any(sizes) else int(n) for n in t.stride()),
                # TENSOR_SUBCLASS_METADATA_MATCH compares the ctx by == unless the class defines its own check
                flatten_guarded=_is_subclass(t) and not hasattr(type(t), "__metadata_guard__"),
            )
    return policies, guarded


def _tensors_under(t: torch.Tensor, path: str) -> Iterator[tuple[str, torch.Tensor]]:
    yield path, t
    if _is_subclass(t):
        attrs, _ = t.__tensor_flatten__()  # type: ignore[attr-defined]  # a traceable wrapper subclass
        for attr in attrs:
            inner = getattr(t, attr)
            if isinstance(inner, torch.Tensor):
                yield from _tensors_under(inner, f"{path}.{attr}")


# The oracle's `compile_fn` argument in a regression test the fuzzer's Dynamo entry writes (test source: the printed
# program is compiled by torch.compile with our backend, as the run did)
REGRESSION_COMPILE_ARG = (
    "compile_fn=lambda fn, **kw: torch.compile(fn, backend='subclassaot', options={'backend': 'eager'})"
)
_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the subclassaot package
_PATCHES = torch_method_patches()
# a subclass's own code (its dispatch, which Dynamo calls to fakify a subclass view), not the pipeline's
_AUTHORING = os.path.join(_OURS, "authoring") + os.sep


def _ran_our_code(e: BaseException) -> bool:
    """Did the exception (or one it was raised from or during) pass through a frame of the pipeline or the backend
    (subclassaot, but for the fuzzer's call of the compiled program and the authoring base classes of subclasses)?"""
    seen: set[int] = set()
    todo: list[BaseException | None] = [e]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        for frame, _ in traceback.walk_tb(current.__traceback__):
            if frame.f_code in _PATCHES or frame.f_code is _call_compiled.__code__:
                continue  # torch's own method, through our process-wide wrapper; or the fuzzer's call
            path = os.path.abspath(frame.f_code.co_filename)
            if path.startswith(_OURS + os.sep) and not path.startswith(_AUTHORING):
                return True
        todo += [current.__cause__, current.__context__]
    return False


def dynamo_compile_for(
    source: str, *, backend: str = "eager"
) -> Callable[[Callable[..., object]], Callable[..., object]]:
    """A compile function: `torch.compile(f, backend="subclassaot", options={"backend": backend})` of the `f` that
    the printed program `source` defines (Dynamo's caches reset first)."""
    namespace: dict[str, object] = {"__name__": "fuzz_program_source"}
    exec(compile(source, "<fuzz program>", "exec"), namespace)
    source_fn = namespace["f"]
    assert callable(source_fn), "BUG: the printed program defines no f"

    def compile_fn(_interpreter: Callable[..., object]) -> Callable[..., object]:
        torch._dynamo.reset()
        compiled = torch.compile(source_fn, backend=subclassaot_backend, options={"backend": backend})
        return lambda *args: _call_compiled(compiled, args)

    return compile_fn


def _call_compiled(compiled: Callable[..., object], args: tuple[object, ...]) -> object:
    try:
        return compiled(*args)
    except torch._dynamo.exc.BackendCompilerFailed as e:
        if isinstance(e.inner_exception, SubclassAOTError):
            raise e.inner_exception from e
        raise
    except Exception as e:
        if isinstance(e, SubclassAOTError) or _ran_our_code(e):
            raise
        # Dynamo failed on its own (tracing the program on fakes, or building its guards), with no frame of
        # ours on the stack: counted as a refusal, under a rule naming Dynamo.
        first = str(e).splitlines()[0] if str(e) else ""
        raise UnsupportedError(f"dynamo, not our backend: {type(e).__name__}: {first}") from e


_ = torch._dynamo  # the one Dynamo import of the package (see the module docstring)
