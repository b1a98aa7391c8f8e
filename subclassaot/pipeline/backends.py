"""Stage `backend`: a purely functional fx graph over plain tensors and symints -> a callable.

Input: a `TracedGraph`'s GraphModule and its fake example inputs. Output: a callable taking the graph's inputs as
positional arguments and returning its outputs as a list or tuple.
Invariants: every graph handed to a backend has been verified functional (`verify_functional`); the runtime checks
on the first call that the backend's callable did not mutate its inputs either.
"""

from __future__ import annotations

import copy
import functools
import keyword
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar, cast

import sympy
import torch
import torch.fx

from subclassaot.config import BackendFn
from subclassaot.errors import BackendError, UnsupportedError
from subclassaot.pipeline import opaque_ops
from subclassaot.pipeline.opaque_ops import with_eager_draws, with_printable_names, with_recomputed_workspaces
from subclassaot.pipeline.rules.strides_and_offsets import with_write_back_through_repeats
from subclassaot.runtime.plan import GraphCode, SettlingCall, made_from
from subclassaot.torch_internals import (
    code_generated,
    get_version,
    graph_module,
    inductor_callable,
    public_twin,
    storage_key,
)

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
    """Run the graph's aten ops one by one (the reference backend), as straight-line Python of our own (`_straight`)
    where the graph has only the nodes it writes out; else the graph module's `forward`. Made once per graph (a
    compile's check runs the graph it then compiles: the Note below)."""
    made = _EAGER_MADE.get(gm)
    if made is not None and made[0] is gm.graph and made[1] == len(gm.graph.nodes):
        return made[2]
    straight = _straight(gm)
    run = straight if straight is not None else code_generated(gm).forward
    _EAGER_MADE[gm] = (gm.graph, len(gm.graph.nodes), run)
    return run


# eager_backend's callable per graph module, with the graph (and its node count) it was made of
_EAGER_MADE: weakref.WeakKeyDictionary[torch.fx.GraphModule, tuple[torch.fx.Graph, int, Callable[..., object]]] = (
    weakref.WeakKeyDictionary()
)


def never_views(gm: torch.fx.GraphModule) -> frozenset[int]:
    """The graph's outputs that the eager backend never returns as views: each made by an aten op whose schema
    returns one tensor and no alias (GraphCall.no_views)."""
    found = set()
    for k, node in enumerate(cast(Sequence[object], gm.graph.output_node().args[0])):
        target = node.target if isinstance(node, torch.fx.Node) and node.op == "call_function" else None
        if isinstance(target, torch._ops.OpOverload) and target.namespace == "aten" and _returns_fresh(target):
            found.add(k)
    return frozenset(found)


def _straight(gm: torch.fx.GraphModule) -> Callable[..., object] | None:
    """The graph's code (`_graph_code`) as a function, which a generated runner writes into its own body instead of
    calling it (GraphCode, Note [Straight-Line Runners]). None for a node kind it does not write (fx's code runs)."""
    code = _graph_code(gm)
    return made_from(code) if code is not None else None


def _graph_code(gm: torch.fx.GraphModule) -> GraphCode | None:
    """The graph's code, each op called as the C++ callable its OpOverload wraps (`OpOverload.__call__` is that call
    behind a Python frame and four attribute reads: ~0.8 us an op), every other target and constant bound by reference
    as a global `_e<k>` (no text spliced in), over inputs `_i<k>` and values `_x<k>` (no node's name: the code is
    written into runners), each value dropped after its last use (`_dropped`)."""
    names: dict[object, str] = {}
    bound: dict[str, object] = {}
    local: dict[torch.fx.Node, str] = {}

    def bind(value: object) -> str:
        key = id(value)
        if key not in names:
            names[key] = f"_e{len(bound)}"
            bound[names[key]] = value
        return names[key]

    def render(a: object) -> str | None:
        if isinstance(a, torch.fx.Node):
            return local.get(a)
        if isinstance(a, list | tuple):
            items = [render(x) for x in a]
            if any(x is None for x in items):
                return None
            inner = ", ".join(cast(list[str], items))
            return f"[{inner}]" if isinstance(a, list) else f"({inner}{',' if len(items) == 1 else ''})"
        if isinstance(a, dict | slice):
            leaves: list[torch.fx.Node] = []
            torch.fx.node.map_arg(a, leaves.append)
            return None if leaves else bind(a)
        return bind(a)

    nodes = list(gm.graph.nodes)
    dropped = _dropped(nodes)
    params: list[str] = []
    lines: list[str] = []
    result, outputs, twins = None, None, 0  # (outputs: each output's value, where each is one)
    for node in nodes:
        if node.op == "placeholder":
            local[node] = f"_i{len(params)}"
            params.append(local[node])
            continue
        if node.op == "output":
            result, out = render(node.args[0]), node.args[0]
            if result is not None and isinstance(out, list | tuple) and all(isinstance(o, torch.fx.Node) for o in out):
                outputs = tuple(local[cast(torch.fx.Node, o)] for o in out)
            break
        local[node] = f"_x{len(local) - len(params)}"
        if node.op == "get_attr":
            value: object = gm
            for part in str(node.target).split("."):
                value = getattr(value, part)
            lines.append(f"{local[node]} = {bind(value)}")
        elif node.op == "call_function":
            target = node.target
            twin = _twin(node)
            twins += twin is not None
            fn = twin if twin is not None else target._op if isinstance(target, torch._ops.OpOverload) else target
            args = [render(a) for a in node.args]
            kwargs = [(k, render(v)) for k, v in node.kwargs.items()]
            if any(a is None for a in args) or any(v is None or not _name(k) for k, v in kwargs):
                return None
            call = ", ".join([*cast(list[str], args), *(f"{k}={v}" for k, v in kwargs)])
            lines.append(f"{local[node]} = {bind(fn)}({call})")
        else:
            return None
        if dropped.get(node):
            lines.append(" = ".join(local[n] for n in dropped[node]) + " = None")
    if result is None:
        return None
    checked = _outside_torch_function(params, bound) if twins else None
    return GraphCode(
        arity=len(params),
        values=len(local) - len(params),
        steps=tuple(lines),
        result=result,
        items=outputs,
        checked=checked,
        names={**bound, "_tf_off": torch._C.DisableTorchFunction, "_has_tf": _has_torch_function(checked)},
    )


def _dropped(nodes: Sequence[torch.fx.Node]) -> dict[torch.fx.Node, list[torch.fx.Node]]:
    """Per node: the values dropped after it, those it uses last and itself where unused (as fx's own code drops
    them). An input is the caller's, which holds it: never dropped, so the code can be written into a runner that
    reads its inputs after the graph's last use of them."""
    last_use: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in nodes:
        for used in node.all_input_nodes:
            last_use[used] = node
    dropped: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for used, user in last_use.items():
        if used.op != "placeholder":
            dropped.setdefault(user, []).append(used)
    for node in nodes:
        if not node.users and node.op not in ("placeholder", "output"):
            dropped.setdefault(node, []).append(node)
    return dropped


_Value = TypeVar("_Value")


def inductor_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> Callable[..., object]:
    """Inductor on the functional graph (compile_fx_inner: the graph is already functional aten)."""
    # A backward graph also takes the symbolic sizes the forward saved (Note [Training Through A Joint Graph]).
    # fallback_random: the random ops, traced as opaque ops of their own, run in program order (Note [What A Backend
    # Receives And Returns]); any other draw inductor lowers calls aten's kernel on the global generator.
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx_inner

    inputs: list[torch.Tensor | torch.SymInt | int] = [
        t for t in example_inputs if isinstance(t, torch.Tensor | torch.SymInt | int)
    ]
    # inductor reads an input's storage as it is, without its negative bit: those inputs (the guards keep their bit
    # the examples') it reads resolved, copies; the pipeline leaves their writes to the epilogue. (A conjugate bit
    # is left alone: complex ops fall back to aten, which reads it, and ops of the graph such as `_conj` treat it.)
    bits = [k for k, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.is_neg()]
    _refuse_written(gm, bits)
    _refuse_strided_over_bit_views(gm)
    _conjugates_as_copies(gm)
    inputs = [_resolved(t) if k in bits else t for k, t in enumerate(inputs)]
    solved = _symbols_only_in_expressions(inputs)
    if solved:
        gm, inputs = _with_symbol_inputs(gm, inputs, solved)
    with inductor_config.patch(fallback_random=True):
        compiled = inductor_callable(compile_fx_inner(gm, inputs))
    if not solved and not bits:
        return compiled

    def run(*args: object) -> object:
        if bits:
            args = tuple(_resolved(a) if k in bits else a for k, a in enumerate(args))
        extra: list[object] = []
        for position, dim, scale, offset in solved:
            t = args[position]
            assert isinstance(t, torch.Tensor), "BUG: a symbol is read from a tensor input"
            extra.append((t.size(dim) - offset) // scale)
        return compiled(*extra, *args)

    return run


def _resolved(t: _Value) -> _Value:
    """A tensor's values without its negative bit (a copy where it has one) at its own strides and storage offset:
    the graph may take an as_strided() of it, whose strides and offset name elements of the input's storage
    (`resolve_neg()`'s copy is laid out anew, from offset 0)."""
    if not isinstance(t, torch.Tensor) or not t.is_neg():
        return t
    offset = cast(int, t.storage_offset())  # (a SymInt in a fake example: torch's annotation says int)
    span = torch._prims_common.compute_required_storage_length(t.shape, t.stride(), offset)
    raw = torch._neg_view(t).as_strided((span,), (1,), 0)  # (the storage as it is, without the bit)
    return cast(_Value, raw.neg().as_strided(t.shape, t.stride(), offset))


def _refuse_strided_over_bit_views(gm: torch.fx.GraphModule) -> None:
    """Refuse an as_strided() of a view with a bit the graph takes, through views of it: inductor computes the bit's
    view (a fallback kernel) as a tensor of its own, and reads the as_strided() at the offset given from that tensor's
    first element, where eager reads from its storage's. So for `_neg_view` (the view of a member of an alias group
    that has the bit, or of a tensor set_() over such a storage) and for `_conj` at a storage offset (`x.real` of an
    input `c.conj()[1:]`: `view_as_real(_conj(x))`)."""
    for node in gm.graph.nodes:
        source = node.args[0] if node.op == "call_function" and node.args else None
        if node.target is not torch.ops.aten.as_strided.default:
            continue
        while isinstance(source, torch.fx.Node) and source.target not in _BIT_VIEWS and _is_view_node(source):
            source = source.args[0]
        if not isinstance(source, torch.fx.Node) or source.target not in _BIT_VIEWS:
            continue
        neg = source.target is torch.ops.aten._neg_view.default
        if neg or _at_an_offset(source):
            bit = "a negative bit (`c.conj().imag`)" if neg else "a conjugate bit (`c.conj()`)"
            raise UnsupportedError(
                f"inductor: the graph takes as_strided() ({node.name}) of a view with {bit} ({source.name}: of an "
                "input at a storage offset, over a storage another input shares, or set_() over one); inductor reads "
                'such a view at the wrong elements. Pass x.resolve_neg() or x.resolve_conj(), or use backend="eager"'
            )


_BIT_VIEWS = (torch.ops.aten._neg_view.default, torch.ops.aten._conj.default)


def _conjugates_as_copies(gm: torch.fx.GraphModule) -> None:
    """`clone(_conj(x))` as `conj_physical(x)`: inductor runs the `_conj` fallback kernel, a view, out of order with the
    copy_ its as_strided_scatter lowering writes a complex value with (`x.as_strided(...).add_(1)` of an expand() of
    `c.conj()`, read again: it read the elements before the write)."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not torch.ops.aten._conj.default:
            continue
        if not node.users or any(u.target is not torch.ops.aten.clone.default or u.kwargs for u in node.users):
            continue
        for user in list(node.users):
            with gm.graph.inserting_before(user):
                copy = gm.graph.call_function(torch.ops.aten.conj_physical.default, (node.args[0],))
            copy.meta = dict(user.meta)
            user.replace_all_uses_with(copy)
            gm.graph.erase_node(user)
        gm.graph.erase_node(node)
    gm.recompile()


def _is_view_node(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and bool(node.args) and bool(getattr(node.target, "is_view", False))


def _at_an_offset(node: torch.fx.Node) -> bool:
    value = node.meta.get("val")
    return not (
        isinstance(value, torch.Tensor) and isinstance(value.storage_offset(), int) and value.storage_offset() == 0
    )


def _refuse_written(gm: torch.fx.GraphModule, bits: Sequence[int]) -> None:
    """Refuse a graph that writes an input with a negative bit: inductor gets a resolved copy of it."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.copy_.default:
            if node.args[0] in [placeholders[k] for k in bits]:
                raise UnsupportedError(
                    f"inductor: graph input {node.args[0].name} has a negative bit (`c.conj().imag`) and the graph "
                    "writes it; inductor reads and writes storage without the bit. Pass x.resolve_neg()"
                )


# Note [What A Backend Receives And Returns]
# A backend receives a purely functional graph of plain tensors and SymInts, and returns a callable that reads its
# arguments only (the epilogue applies input mutations; a backend that writes an input is a BackendError). Two gaps
# between that contract and what backends do are closed here:
# - Symbols inductor cannot bind. Inductor binds every size symbol of its graph from an input's size or stride where the
#   symbol appears bare. A relation makes a dim an expression instead (`offsets.size(0) == s0 + 1`: Note [Fakify Through
#   The Symbol Cache]); when no input has s0 bare (the batch of a jagged tensor lives only in its offsets), inductor
#   cannot generate code. Such a symbol becomes an extra leading SymInt input of a copy of the graph, read at run time
#   by inverting the affine size it appears in (`s0 = offsets.size(0) - 1`). The pipeline's own graph keeps its
#   signature.
# - Output strides. The runtime promises eager's strides for every output, and regenerates views of intermediates from
#   the strides the graph returns. A backend may lay a fresh output out differently from eager: Inductor picks its own
#   stride for a size-1 dimension ((4, 4, 1) where eager has (8, 4, 1)), which changes no element's address but is
#   observable through .stride() (even the fake trace can disagree with eager there). So on the first call of a
#   non-eager backend the graph also runs eagerly (same inputs, the RNG state restored around it) and each output with
#   static metadata is compared with eager's; for the outputs that differ, every call gives back a tensor with eager's
#   strides: an alias of the same memory when only size-1 dimensions differ, a copy otherwise. Outputs that matched on
#   the first call are never touched again; where none differs (nor is fresh over an input), the wrapper leaves the
#   generated runner's path (runtime.plan.SettlingCall: the runner calls the backend's callable itself).
# - Fresh outputs over an input's memory. Inductor drops a clone it deems a no-op (`x.clone().view(())` returned from
#   a training forward came back as a view of x), so an output the graph computes can come back as an alias of an
#   input, where eager's is a new tensor. The first call finds those too; every call then returns a copy. So too for an
#   output without eager's negative bit (inductor resolves `c.conj().imag.detach()`): a copy into storage with the bit.
# - Input writes kept in the graph. A backend that compiles a graph writing its own inputs (inductor: a copy_ into a
#   placeholder becomes a store of the kernel that computes the value) saves the epilogue's copy and a pass over the
#   data. `graph_writes` picks the writes it may take: in an inference entry whose graph inputs require no grad (nothing
#   for autograd to record; where it records the graph's run, a program making new leaves, no write eager hid from it:
#   the input would get the value's history), with the generated runner, a new value of an input's own elements in its
#   own layout (an ORIGINAL update of a leaf with no metadata change, no final copy, nonzero static strides: no repeated
#   location) that no alias group shares, and a value the graph returns nowhere else (so no output can come back as the
#   input's buffer). The graph gets `aten.copy_(input, value)` before its output, after every read; its outputs stay as
#   they are, and the runner skips those copies and settles the version counters as before: a kernel's store leaves the
#   counter as it was, a fallback copy_ advances it, and the settle step makes either eager's. The eager backend's graph
#   takes them too: where the value is `op(input, ...)` and nothing can tell the difference (`_in_place`), the op
#   becomes its in-place overload (`add` -> `add_`), which is what eager's kernel did, and no copy is made at all.
# - One tensor for two outputs. Inductor returns one buffer for two outputs that alias entirely (an input's new value
#   `alias(t)` and the fresh output `t`, after `x.data = t`). The training Function returns each tensor once, an
#   alias of it the second time (autograd_function's `_distinct_outputs`): marked non-differentiable as the input's
#   value, the same object would have lost the fresh output's history.
# - Random draws. A compiled program draws eager's numbers only where each random op runs eager's own kernel on the
#   global generator, in program order, once. Inductor's decomposition table (which the trace applies) rewrites draws
#   into other draws (`exponential` into `rand` and `log`, `geometric`, `rrelu_with_noise` whose eager kernel draws for
#   the negative elements only, `native_dropout`, `rand_like`), and lowers the functional `bernoulli.p(empty, p)` that
#   dropout becomes as an in-place `bernoulli_` on a copy of a NaN-filled `empty`, which a fused kernel can read before
#   the fill runs. So for inductor the trace maps each random op (opaque_ops._DRAWS) to an opaque `subclassaot::` op:
#   the aten op's arguments, its kernel the aten op itself (a fill's functional variant: a clone filled in place), its
#   meta the aten op's (eager's strides), tagged `nondeterministic_seeded`. Inductor calls it as one extern kernel with
#   a fresh output and chains the tagged ops in program order (`fallback_random`); the tag keeps the pipeline's
#   dead-code pass and partition from dropping, merging or recomputing a draw. The ops run below autograd only (the
#   trace's proxy mode), so the derivatives are eager's. Ops that draw only where an argument says so (attention and
#   RNNs with dropout) are left to the backend. `random.from` (`random_(0, 10)`), an overload named by a Python
#   keyword, fx prints as code that does not compile: every backend's trace maps that one op.
# - Workspaces. A few CPU kernels also return a workspace, bytes only the op's backward reads, sized by the kernel:
#   oneDNN's LSTM layer (`mkldnn_rnn_layer`, every eager nn.LSTM on CPU, filled only with grad mode on) returns
#   28672 bytes where its meta says 0, and inductor, which checks an extern kernel's outputs against their fake sizes,
#   fails on it. (torch.compile never meets it: Dynamo runs RNN modules eagerly, and with `allow_rnn` AOTAutograd
#   decomposes `aten.lstm` above autograd into matmuls, which are not eager's numbers.) So for inductor the trace maps
#   the op to an opaque one (opaque_ops.py) that returns an empty workspace, and its backward to one that runs the
#   forward kernel again, grad mode on, on the inputs the backward takes anyway (the workspace is a function of them)
#   and then eager's backward kernel: eager's values and gradients, one more forward of each layer a training step.
# - Ordered effects. An op torch registers as having a side effect (torch._higher_order_ops.effects) functionalizes
#   into the `with_effects` higher-order op, a token threaded through the graph that the pipeline does not thread (its
#   modes crashed on it). The everyday one is `aten._linalg_check_errors`, which torch.linalg.solve, cholesky, inv, ...
#   call on their `info` result: eager raises LinAlgError there on a singular or non-positive-definite input. It writes
#   and returns nothing, so its order among the graph's ops changes no value: every trace maps it to the opaque
#   `subclassaot::linalg_check_errors` (opaque_ops.py: its kernel the aten op, no effect registered), which the
#   pipeline's dead-code pass and partition (into the forward) and fx's dead-code pass (inductor's) keep though
#   nothing reads it. The compiled call raises eager's error with eager's message; where eager raised after writing
#   an input in place, the compiled call, whose input writes follow the graph, has not written it. Any other
#   effectful op (aten._print, a torchbind method, a custom op registered as effectful) is refused by name.
# - Unannotated writes. `native_batch_norm` in training writes its running statistics, though its schema says no
#   write (eager's kernel moves no version counter). The trace runs under torch's Python dispatcher (make_fx), whose
#   rewrite sends it to `_native_batch_norm_legit`, whose schema says it: functionalization, and a subclass's
#   __torch_dispatch__, see that op there. The analysis's run (the swap record's mode) makes the same rewrite
#   (opaque_ops.traced_in_place_of), so it sees the write where the subclass calls the op on its inner tensors too;
#   without it, a subclass's running statistics stayed as passed (their write seen as spurious, leaf_mutations.py).
#   FSDP2's `fsdp.copy_(tensor, data)` says its write, but its own Functionalize kernel writes the unwrapped tensor
#   behind functionalization's back (torch's inductor re-applies it in place): our functionalization runs it as the
#   aten copy_ it is (torch_internals._FunctionalMode), an input write like any other; eager's value was lost before.
#
# Graph Modules Generate Their Code When Run:
# An fx GraphModule generates its Python code (and `compile()`s it) when made and at each `recompile()`: several ms
# for a graph of a small model, and a compile makes a few (make_fx's, again after dead code is dropped, the partition's
# forward and backward, the copy that writes inputs). The eager backend runs a graph as its own straight-line code
# (backends._straight) and never that code, so the pipeline's graph modules are torch's lazy ones, which generate it
# when first run or read (`.code`, `print`); `code_generated` generates it at once where a graph's own `forward` is
# what a compiled entry calls. A graph the compile runs on fakes before it compiles it with the eager backend (the
# native path's check, backward_probe.records_as_eager) runs as the backend's callable, made once per graph module
# (`eager_backend` keeps it while the module lives and holds the same graph; no graph is edited in place once
# traced: dead code goes at the trace, input writes into a copy), and neither fx's code nor ours is made twice.


def _symbols_only_in_expressions(
    inputs: Sequence[torch.Tensor | torch.SymInt | int],
) -> list[tuple[int, int, int, int]]:
    """(input position, dim, scale, offset) per symbol that appears in input sizes only as `scale * s + offset`."""
    bare: set[sympy.Symbol] = set()
    found: dict[sympy.Symbol, tuple[int, int, int, int]] = {}
    for position, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            continue
        for dims in (t.size(), t.stride()):
            bare |= {e for e in map(_expr, dims) if isinstance(e, sympy.Symbol)}
        for dim, size in enumerate(t.size()):
            e = _expr(size)
            if e is None or isinstance(e, sympy.Symbol) or len(e.free_symbols) != 1:
                continue
            (symbol,) = e.free_symbols
            offset = e.subs(symbol, 0)
            scale = e.subs(symbol, 1) - offset
            linear = sympy.expand(scale * symbol + offset - e) == 0
            if linear and isinstance(scale, sympy.Integer) and isinstance(offset, sympy.Integer):
                found.setdefault(symbol, (position, dim, int(scale), int(offset)))
    return [where for symbol, where in found.items() if symbol not in bare and where[2] > 0]


def _expr(value: object) -> sympy.Expr | None:
    return cast(sympy.Expr, value.node.expr) if isinstance(value, torch.SymInt) else None


def _with_symbol_inputs(
    gm: torch.fx.GraphModule,
    inputs: list[torch.Tensor | torch.SymInt | int],
    solved: list[tuple[int, int, int, int]],
) -> tuple[torch.fx.GraphModule, list[torch.Tensor | torch.SymInt | int]]:
    """A copy of `gm` with one leading SymInt placeholder per solved symbol (Note [What A Backend Receives And
    Returns])."""
    copied = copy.deepcopy(gm)
    first = next(n for n in copied.graph.nodes if n.op == "placeholder")
    extra: list[torch.Tensor | torch.SymInt | int] = []
    with copied.graph.inserting_before(first):
        for k, (position, dim, scale, offset) in enumerate(solved):
            t = inputs[position]
            assert isinstance(t, torch.Tensor)
            value = (t.size(dim) - offset) // scale
            node = copied.graph.placeholder(f"solved_symbol_{k}")
            node.meta["val"] = value
            extra.append(value)
    copied.recompile()
    return copied, [*extra, *inputs]


register_backend("eager", eager_backend)
register_backend("inductor", inductor_backend)


def with_input_writes(
    gm: torch.fx.GraphModule, writes: Sequence[tuple[int, int]], *, in_place: bool = False
) -> tuple[torch.fx.GraphModule, frozenset[int]]:
    """A copy of `gm` that copies graph output k into placeholder p for each (p, k) in `writes`, after every other
    node, and returns what it returned; with the outputs k it writes (Note [What A Backend Receives And Returns]). A
    value returned at another position too, or not of its input's dtype, shape and strides, is left to the
    epilogue. `in_place`: where the op computing the value can write it into the input itself, it does (`_in_place`)
    and no copy is added."""
    if not writes:
        return gm, frozenset()
    graph = copy.deepcopy(gm.graph)  # (the module is made once the graph is final: it generates its code then)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    output = graph.output_node()
    returned = list(cast(Sequence[object], output.args[0]))
    made: set[int] = set()
    for p, k in writes:
        value, target = returned[k], placeholders[p]
        if not isinstance(value, torch.fx.Node) or returned.count(value) != 1 or value is target:
            continue
        new, old = value.meta.get("val"), target.meta.get("val")
        if not (isinstance(new, torch.Tensor) and isinstance(old, torch.Tensor)):
            continue
        if (new.dtype, new.shape, new.stride()) != (old.dtype, old.shape, old.stride()):
            continue
        made.add(k)
        written = _in_place(graph, target, value, returned, k) if in_place else None
        if written is not None:
            returned[k] = written  # the input itself, as the in-place op returns it (nothing reads it)
            output.args = (cast(list[torch.fx.node.Argument], list(returned)), *output.args[1:])
            while value.target is torch.ops.aten.alias.default and not value.users:  # those between, now unused
                node, value = value, cast(torch.fx.Node, value.args[0])
                graph.erase_node(node)
            continue
        with graph.inserting_before(output):
            node = graph.call_function(torch.ops.aten.copy_.default, (target, value))
        node.meta["val"] = old
    if not made:
        return gm, frozenset()
    return graph_module(gm, graph), frozenset(made)


def _returns_fresh(op: torch._ops.OpOverload) -> bool:
    """One tensor, aliasing no argument (not a view op): by its schema."""
    returns = op._schema.returns
    return len(returns) == 1 and returns[0].alias_info is None and str(returns[0].type) == "Tensor"


def _name(text: str) -> bool:
    """Usable as a Python name in generated code (an identifier, no keyword: aten's `random.from` has an argument
    named `from`)."""
    return text.isidentifier() and not keyword.iskeyword(text)


def _in_place(
    graph: torch.fx.Graph, target: torch.fx.Node, value: torch.fx.Node, returned: Sequence[object], k: int
) -> torch.fx.Node | None:
    """Rewrite the op that computes `value` (through `alias` nodes) as its in-place form on `target`, where that
    gives the same results: `op(target, ...)` with an in-place overload of the same arguments, no RNG draw, and after
    it nothing reads the input's old elements (no node that aliases `target` is used later, no other argument shares
    its memory, the value has its layout and no repeated location), the input is a whole storage as the value is
    (`_same_memory_shape`), and no other output holds the value's memory (it becomes the input's). The eager
    backend's graph then writes its input as eager's kernel does, without the epilogue's copy (Note [What A Backend
    Receives And Returns])."""
    root = value
    while root.target is torch.ops.aten.alias.default and len(root.users) == 1:
        root = cast(torch.fx.Node, root.args[0])
    op = root.target
    if not (isinstance(op, torch._ops.OpOverload) and root.args and root.args[0] is target):
        return None
    inplace = _in_place_overload(op)
    old = target.meta["val"]
    if inplace is None or torch._debug_has_internal_overlap(old) != 0:
        return None
    order = {n: i for i, n in enumerate(graph.nodes)}
    mine, values = storage_key(old), root.meta.get("val")
    if not isinstance(values, torch.Tensor) or not _same_memory_shape(old, values):
        return None
    aliases = [n for n in graph.nodes if _on(n, mine)]
    if any(order[u] > order[root] for n in aliases for u in n.users):
        return None  # the input's old elements are read after the write
    arguments: list[torch.fx.Node] = []
    torch.fx.node.map_arg((root.args[1:], root.kwargs), arguments.append)
    if any(_on(n, mine) for n in arguments):
        return None
    theirs = storage_key(values)
    outputs = [r for j, r in enumerate(returned) if j != k and isinstance(r, torch.fx.Node)]
    if any(_on(r, theirs) or _on(r, mine) for r in outputs):
        return None
    with graph.inserting_after(root):
        node = graph.call_function(inplace, root.args, root.kwargs)
    node.meta = dict(root.meta)
    root.replace_all_uses_with(node)
    graph.erase_node(root)
    return node


def _same_memory_shape(old: torch.Tensor, new: torch.Tensor) -> bool:
    """The input spans the whole of its storage from offset 0, as the value it would stand in for does: an op that
    addresses storage itself (`as_strided` at an absolute offset, a view's storage offset read) finds the same
    elements in either (static sizes only)."""
    offsets, sizes = (
        (old.storage_offset(), new.storage_offset()),
        (
            old.untyped_storage().nbytes(),
            new.untyped_storage().nbytes(),
        ),
    )
    return all(type(v) is int for v in (*offsets, *sizes)) and offsets == (0, 0) and sizes[0] == sizes[1]


@functools.cache  # (by the op alone, which torch makes once: the answer reads its schema and tags only)
def _in_place_overload(op: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """`aten.add.Tensor` -> `aten.add_.Tensor`: the overload that writes its first argument and otherwise takes the
    same arguments; None where there is none or the op draws random numbers."""
    schema = op._schema
    if not _returns_fresh(op) or schema.is_mutable or torch.Tag.nondeterministic_seeded in op.tags:
        return None
    if op.namespace != "aten":
        return None
    if op._opname in _NOT_WRITES:
        return None
    packet = getattr(torch.ops.aten, f"{op._opname}_", None)
    inplace = getattr(packet, op._overloadname, None) if packet is not None else None
    if not isinstance(inplace, torch._ops.OpOverload) or torch.Tag.inplace_view in inplace.tags:
        return None
    theirs = inplace._schema
    first = theirs.arguments[0] if theirs.arguments else None
    if first is None or first.alias_info is None or not first.alias_info.is_write or len(theirs.returns) != 1:
        return None
    same = [(a.name, str(a.type), a.kwarg_only) for a in schema.arguments]
    return inplace if same == [(a.name, str(a.type), a.kwarg_only) for a in theirs.arguments] else None


# Functional ops whose in-place form changes the tensor's storage or size rather than writing its elements.
_NOT_WRITES = frozenset({"set", "resize", "resize_as", "_resize_output"})


def _on(node: torch.fx.Node, storage: object) -> bool:
    """The node's value (its fake) is a tensor on that storage (a `storage_key`)."""
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and storage_key(val) == storage


def is_own(backend: BackendFn) -> bool:
    """One of the backends above (by identity: a user's backend may be unhashable)."""
    return backend is eager_backend or backend is inductor_backend


def decompositions_for(backend: str | BackendFn) -> Mapping[torch._ops.OperatorBase, Callable[..., object]]:
    """The decomposition table applied while tracing: the one a backend wants (inductor lowers only decomposed aten),
    and the pipeline's write-back through views that repeat memory locations (Note [In-Place Ops As Eager Runs
    Them]) and `random.from` under a name fx can print (Note [What A Backend Receives And Returns]), over every
    backend's."""
    return with_write_back_through_repeats(with_printable_names(_backend_decompositions(backend)))


def _backend_decompositions(
    backend: str | BackendFn,
) -> Mapping[torch._ops.OperatorBase, Callable[..., object]] | None:
    if backend == "inductor" or backend is inductor_backend:
        # Some of inductor's decompositions read `torch._inductor.lowering` lazily (max_pool2d's): load it with them.
        import torch._inductor.lowering  # noqa: F401
        from torch._inductor.decomposition import select_decomp_table

        # Note [What A Backend Receives And Returns] (random draws, workspaces)
        return with_recomputed_workspaces(with_eager_draws(select_decomp_table()))
    table = getattr(backend, "decompositions", None)  # (and batch norm over eager's kernel: opaque_ops)
    return opaque_ops.with_statistics_kept(table if isinstance(table, Mapping) else None)


def verify_functional(gm: torch.fx.GraphModule) -> None:
    """Raise BackendError (a pipeline bug, really) if a node of the graph mutates anything."""
    for node in gm.graph.nodes:
        target = node.target
        if node.op == "call_function" and isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable:
            raise BackendError(
                f"BUG: the functional graph contains the mutating op {target} at node {node.name}; "
                "please report this program"
            )


def check_inputs_untouched(
    versions_before: Sequence[int],
    inputs: Sequence[torch.Tensor],
    backend_name: str,
    kept: frozenset[int] = frozenset(),
) -> None:
    """The backend's callable must not write its inputs (the epilogue owns every input mutation), but those the graph
    it was given writes itself (`kept`: `keep_input_mutations`)."""
    for i, (before, t) in enumerate(zip(versions_before, inputs, strict=True)):
        if i not in kept and get_version(t) != before:
            raise BackendError(
                f"backend {backend_name!r} mutated graph input {i} in place; a backend receives a purely functional "
                "graph and must return a callable without side effects on its inputs (the epilogue applies input "
                "mutations). Return a function that only reads its arguments"
            )


def keep_eager_outputs(
    compiled: Callable[..., object], gm: torch.fx.GraphModule, written: frozenset[int] = frozenset()
) -> Callable[..., object]:
    """Wrap a backend's callable so its outputs have eager's strides and the fresh ones share no input's memory (Note
    [What A Backend Receives And Returns]). `written`: outputs the graph copies into an input (the same
    Note), which nothing reads."""
    static = _static_outputs(gm)
    fresh = [f and k not in written for k, f in enumerate(_fresh_outputs(gm))]
    if not any(static) and not any(fresh):
        return compiled
    return _EagerOutputs(compiled, gm, static, fresh)


_Fix = tuple[tuple[tuple[int, ...], int] | None, bool, tuple[bool, bool]]  # eager's strides and offset, copy?, bits


class _EagerOutputs(SettlingCall):
    """keep_eager_outputs's wrapper: settled on `compiled` where the first call finds no output to fix."""

    def __init__(
        self, compiled: Callable[..., object], gm: torch.fx.GraphModule, static: list[bool], fresh: list[bool]
    ) -> None:
        super().__init__()
        self.compiled, self.gm, self.static, self.fresh = compiled, gm, static, fresh
        self.fix: dict[int, _Fix] | None = None

    def __call__(self, *args: object) -> object:
        outs = self.compiled(*args)
        assert isinstance(outs, list | tuple), "BUG: a backend returns a list or tuple of outputs"
        fix = self.fix
        if fix is None:
            with self._lock:
                if self.fix is None:
                    self.fix = _output_fixes(self.gm, args, outs, self.static, self.fresh)
                fix = self.fix
            if not fix:
                self.settle(self.compiled)
        if not fix:
            return outs
        fixed = list(outs)
        for k, (layout, copy_it, bits) in fix.items():
            fixed[k] = _with_strides(cast(torch.Tensor, outs[k]), layout, copy_it, bits)
        return fixed


def _fresh_outputs(gm: torch.fx.GraphModule) -> list[bool]:
    """Per output: the graph computes it (it is no input, nor a view of one through view ops)."""
    out: list[bool] = []
    for node in _output_args(gm):
        while (
            isinstance(node, torch.fx.Node)
            and node.op == "call_function"
            and isinstance(node.target, torch._ops.OpOverload)
            and node.target.is_view
        ):
            node = node.args[0]
        out.append(isinstance(node, torch.fx.Node) and node.op != "placeholder")
    return out


def _static_outputs(gm: torch.fx.GraphModule) -> list[bool]:
    vals = [node.meta.get("val") if isinstance(node, torch.fx.Node) else None for node in _output_args(gm)]
    return [isinstance(v, torch.Tensor) and all(isinstance(d, int) for d in (*v.shape, *v.stride())) for v in vals]


def _output_args(gm: torch.fx.GraphModule) -> list[object]:
    values = gm.graph.output_node().args[0]
    return list(values) if isinstance(values, list | tuple) else [values]


def _output_fixes(
    gm: torch.fx.GraphModule,
    args: Sequence[object],
    outs: Sequence[object],
    static: Sequence[bool],
    fresh: Sequence[bool],
) -> dict[int, _Fix]:
    """The first call's findings: outputs with other strides than eager's, and fresh outputs the backend returned
    over an input's memory (inductor drops a clone it deems a no-op) or without eager's negative or conjugate bit
    (inductor resolves the view chain of `c.conj().imag.detach()`), which must be copies."""
    devices = sorted({str(a.device) for a in args if isinstance(a, torch.Tensor) and a.device.type != "cpu"})
    with torch.random.fork_rng(devices=devices), torch.no_grad():
        reference = gm.forward(*args)
    inputs = {storage_key(a) for a in args if isinstance(a, torch.Tensor)}
    fixes: dict[int, _Fix] = {}
    for k, (ref, out) in enumerate(zip(reference, outs, strict=True)):
        if not isinstance(out, torch.Tensor) or not isinstance(ref, torch.Tensor):
            continue
        layout = (tuple(ref.stride()), int(ref.storage_offset())) if static[k] else None
        bits = (ref.is_neg(), ref.is_conj())
        if fresh[k] and storage_key(out) in inputs or bits != (out.is_neg(), out.is_conj()):
            fixes[k] = (layout, True, bits)
        elif static[k] and out.stride() != ref.stride():
            fixes[k] = (layout, False, bits)
    return fixes


def _with_strides(
    t: torch.Tensor, layout: tuple[tuple[int, ...], int] | None, copy_it: bool, bits: tuple[bool, bool]
) -> torch.Tensor:
    """`t` in eager's layout (None where not static: its own), a copy where `copy_it`, with eager's bits (neg, conj)."""
    stride, offset = layout or (tuple(t.stride()), t.storage_offset())
    if not copy_it and tuple(t.stride()) == stride:
        return t
    alias = not copy_it and all(a == b or n <= 1 for a, b, n in zip(t.stride(), stride, t.shape, strict=True))
    if alias:  # only size-1 dims differ: the same memory
        storage, offset = t.untyped_storage(), t.storage_offset()
    else:
        extent = offset + 1 + sum((n - 1) * abs(st) for n, st in zip(t.shape, stride, strict=True))
        storage = torch.empty(extent if t.numel() else 0, dtype=t.dtype, device=t.device).untyped_storage()
    out = torch.empty((0,), dtype=t.dtype, device=t.device)
    with torch.no_grad():
        out.set_(storage, offset, t.size(), stride)
        torch._C._set_neg(out, bits[0])  # (a copy_ into it writes the storage whose reads through them give t's values)
        torch._C._set_conj(out, bits[1])
        return out if alias else out.copy_(t)


_TWINS: dict[object, Callable[..., object] | None] = {}


def _kind(a: object) -> object:
    """What decides which overload a Python binding picks for an argument: its type, recursively (a node by its
    value's type: a tensor, a symbolic or concrete int, ...)."""
    if isinstance(a, torch.fx.Node):
        val = a.meta.get("val")
        return "tensor" if isinstance(val, torch.Tensor) else ("node", type(val).__name__)
    if isinstance(a, list | tuple):
        return ("list" if isinstance(a, list) else "tuple", tuple(_kind(x) for x in a))
    return type(a).__name__


def _outside_torch_function(params: Sequence[str], bound: Mapping[str, object]) -> tuple[str, ...]:
    """The names whose `has_torch_function` decides whether the graph's code, whose ops are called through their twins
    (`_twin`), runs with torch function off (GraphCode.checked), where no `__torch_function__` takes a call. A twin,
    unlike the aten op, first asks whether an argument's class overrides `__torch_function__` or a torch function
    mode is on the stack, and hands the call to it; eager's backward, which calls the aten op,
    never would: so the twins run with torch function off. That context costs more than a small graph's op and does
    nothing where nothing would take a call. The graph's tensors are its inputs, its tensor constants and what its ops
    return, and ops on tensors that override nothing return tensors that override nothing (a Parameter's disabled
    override is none, as torch's own check has it): so one call of torch's `has_torch_function` (true too where any
    mode is on the stack) on the inputs and tensor constants picks the code with the context or the same code
    without it. A graph with neither always runs with the context (no names)."""
    return (*params, *(k for k, v in bound.items() if isinstance(v, torch.Tensor)))


def _has_torch_function(checked: Sequence[str] | None) -> Callable[..., bool]:
    """torch's `has_torch_function` test as the graph's code calls it, `_has_tf(a, b)`: its unary form for one name
    (~0.2 us a call less than building a tuple for `has_torch_function`), else its variadic form. All three ask the same
    of each argument (its class's override, a torch function mode on the stack)."""
    if checked is not None and len(checked) == 1:
        return torch.overrides.has_torch_function_unary
    return torch.overrides.has_torch_function_variadic


def _twin(node: torch.fx.Node) -> Callable[..., object] | None:
    """The public `torch.<name>` function that dispatches exactly this node's aten overload with exactly its
    arguments (the binding eager's own `x * 2` goes through: about 0.9 us a call less than `OpOverload._op`'s boxed
    call), or None. Decided once per (overload, argument kinds) by calling the candidate on meta stand-ins under a
    dispatch mode that records the first op it dispatches; a candidate that decomposes, reorders, fills defaults or
    picks another overload is not a twin."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or target.namespace != "aten":
        return None
    key = (target, tuple(_kind(a) for a in node.args), tuple((k, _kind(v)) for k, v in node.kwargs.items()))
    if key not in _TWINS:
        _TWINS[key] = _checked_twin(target, node)
    return _TWINS[key]


def _checked_twin(target: torch._ops.OpOverload, node: torch.fx.Node) -> Callable[..., object] | None:
    stand_ins: dict[torch.fx.Node, torch.Tensor] = {}

    def stand_in(a: object) -> object:
        if isinstance(a, torch.fx.Node):
            val = a.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise _Symbolic
            return stand_ins.setdefault(a, torch.empty(0, dtype=val.dtype, device="meta"))
        if isinstance(a, list | tuple):
            return [stand_in(x) for x in a] if isinstance(a, list) else tuple(stand_in(x) for x in a)
        return a

    try:
        args = [stand_in(a) for a in node.args]
        kwargs = {k: stand_in(v) for k, v in node.kwargs.items()}
    except _Symbolic:
        return None  # (a symbolic value: no stand-in)
    return public_twin(target, args, kwargs)


class _Symbolic(Exception):
    """A node's argument is no tensor or constant (`_checked_twin`)."""
