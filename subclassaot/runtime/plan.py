"""The runtime plan: what one compiled entry's per-call path needs, and the small evaluators both the epilogue
(call.py) and output regeneration (regenerate.py) use.

Input: built by api.py from the analysis, the layout and the graph outputs.
Output: `RuntimePlan`, `BackwardPlan` (training), `MetaEvaluator` (size/stride/offset expressions over the guards'
symbols), `GraphCall`.
Invariants: the plan holds no fake tensors, no ShapeEnv and no graph it does not run; the one callable that does
compile-time work at call time is `BackwardPlan.retrace` (Note [Tangent Retrace]).

Part: wrapper subclasses' own metadata and storage: what `set_()` and `.data =` leave on a wrapper that its inner
tensors do not say, and on the inner wrappers of a nested subclass set_() at the wrapper level (Note [Wrapper
Storage]), and the layouts the epilogue takes from the graph's real results instead of the fake tensors of the
analysis. Input: the per-call values (flat inputs, outputs as built), the analysis's `WrapperStorageClass`es,
`InnerWrapperClass`es and per-output `data_meta`; the metadata the analysis recorded for an input after the call (a
fake tensor's) and the real tensor the graph returned for it. Output: the same tensors, each wrapper on its class's
storage and with eager's own size/stride/offset; the size, stride and offset the epilogue gives the input
(`set_target_layout`) or its wrapper (`wrapper_layout`). Invariants: nothing here dispatches to a subclass, records
autograd history or moves a version counter; a layout is taken only where the sizes agree, and one eager computes
from view ops alone (the fake one is exact there) comes out the same.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import CodeType
from typing import cast

import sympy
import torch

from subclassaot.authoring.protocol import SubclassNode, dense_leaves, flatten_subclass
from subclassaot.schemas import (
    Analysis,
    BackwardReshape,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    GraphOutputs,
    InnerWrapperClass,
    Meta,
    SourceSize,
    WrapperStorageClass,
)
from subclassaot.torch_internals import (
    assign_wrapper_metadata,
    is_nested_expr,
    python_source,
    storage_key,
    storage_nbytes,
)


def wrapper_write_recorded(analysis: Analysis, layout: DenseLayout, t: int) -> bool:
    """Whether the program wrote tensor subclass input `t` where autograd records it: else the epilogue's
    wrapper-level copy_ of its new value runs under no_grad, and no gradient flows through that value
    (runtime._copy_wrapper, Note [Backward Errors Are Deferred])."""
    return any(analysis.mutations[j].autograd_visible for j in layout.leaves_of_input[t])


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimePlan:
    flat: FlatInputs  # structure only at run time: leaf kinds, tensor indices, output spec
    layout: DenseLayout
    analysis: Analysis
    graph_outputs: GraphOutputs
    leaf_attr_paths: tuple[tuple[str, ...], ...]  # per dense leaf: attribute names from its owner input
    input_requires_grad: tuple[bool, ...]  # per tensor input: requires_grad when compiled (a guard holds it)
    # tensor inputs that run as stand-ins of their own with an accumulator of their own when compiled
    # (steps.own_accumulator_inputs: guarded by requires_grad, is_leaf and the no_grad view's flag)
    own_accumulators: frozenset[int] = frozenset()
    # per output (OutputIndex): the torch-function subclass eager returns it as, or None (Note [Ambient
    # Modes]); () when no input is such a subclass
    output_types: tuple[type[torch.Tensor] | None, ...] = ()
    # Note [Input Updates], inference inputs: the written subclass inputs (tensor positions) that are inference
    # tensors themselves, and the graph inputs whose synthetic base is one: their copies run inside inference_mode.
    # Decided from the compile's tensors; guards._inference_guards pins what decides them.
    inference_wrappers: frozenset[int] = frozenset()
    inference_bases: frozenset[int] = frozenset()
    # per dense leaf the program writes (guarded likewise): whether it is an inference tensor, which decides its
    # copy's (steps.copy_into); None for another leaf (read per call, where one is copied into); () not decided
    inference_leaves: tuple[bool | None, ...] = ()
    # dense leaves of inputs eager's program leaves requiring no grad (`historyless_leaves`): no write of theirs
    # recorded history, so the epilogue's copy of the graph's value into them records none either
    historyless_leaves: frozenset[int] = frozenset()


def historyless_leaves(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> frozenset[int]:
    """The dense leaves whose owner eager's program leaves requiring no grad (a value requiring grad written under
    no_grad or inside inference_mode, grad mode on or not, records no history), decided at compile time."""
    ends = analysis.requires_grad_after
    return frozenset(j for j, leaf in enumerate(layout.leaves) if not ends[flat.tensor_indices.index(leaf.owner)])


def last_gains(plan: RuntimePlan) -> list[int]:
    """Tensor positions the program makes require grad after its last use of their storage (Analysis.gains_last), and
    those that came requiring grad and got requires_grad_() all the same (on a non-leaf eager keeps a flag no read shows
    until its grad_fn is rebuilt as None): set once the call is done (Note [Grad Mode And Autograd Reads])."""
    a = plan.analysis
    flagged = zip(a.requires_grad_set, plan.input_requires_grad, a.requires_grad_after, strict=True)
    return [i for i, (late, f) in enumerate(zip(a.gains_last, flagged, strict=True)) if late or all(f)]


def requires_grad_changes(plan: RuntimePlan) -> tuple[list[int], list[int]]:
    """Tensor positions whose requires_grad the program changes: those it turns on (set before the graph runs, unless
    a node of the graph does: Note [Training Without A Function]), and those that end without it (detach_(),
    requires_grad_(False), `.requires_grad = False`, also after turning it on: dropped after the graph ran)."""
    analysis = plan.analysis
    last = set(last_gains(plan))
    gains = [
        i
        for i, (on, marked) in enumerate(zip(analysis.requires_grad_set, analysis.leaf_marked, strict=True))
        if on and not plan.input_requires_grad[i] and not marked and i not in last  # (marked: the graph sets it)
    ]
    loses = [
        i
        for i, after in enumerate(analysis.requires_grad_after)
        if (plan.input_requires_grad[i] or analysis.requires_grad_set[i]) and not after
    ]
    return gains, loses


@dataclass(frozen=True, slots=True, kw_only=True)
class RetracedBackward:
    """A backward for runtime tangents of another structure than the traced one, compiled (Note [Tangent Retrace])."""

    run: Callable[..., object]  # (saved[saved_index]..., tangents...) -> (grads..., backward mutations...)
    saved_index: tuple[int, ...]  # per saved placeholder: its position among the forward's saved values
    grad_trees: tuple[SubclassNode | None, ...]  # as BackwardPlan's, for this backward
    grad_stride_leaves: tuple[int | None, ...]  # as BackwardPlan's, for this backward
    unused: frozenset[int]  # as BackwardPlan's, for this backward
    tangent_deps: tuple[frozenset[int], ...]  # as BackwardPlan's, for this backward


# (per diff output: the runtime tangent's structure and its dense leaves; the diff positions given no tangent; per
# diff output: its dense leaves' sizes in the call) -> the backward for them, or UnsupportedError. See Note [Tangent
# Retrace].
RetraceBackward = Callable[
    [
        Sequence[SubclassNode | None],
        Sequence[Sequence[torch.Tensor]],
        frozenset[int],
        Sequence[Sequence[torch.Size]],
    ],
    RetracedBackward,
]


@dataclass(frozen=True, slots=True, kw_only=True)
class BackwardPlan:
    """What the compiled autograd.Function needs of the training compile (Note [Training Through A Joint Graph]):
    the meaning of the forward's extra outputs and of the backward graph's inputs and outputs, or the program's own
    backward error (Note [Backward Errors Are Deferred])."""

    # the program's own backward error, raised when backward runs (no backward graph) or when one of the diff outputs
    # at positions `raising_tangents` gets a tangent (Note [Backward Errors Are Deferred])
    error: RuntimeError | None
    raising_tangents: frozenset[int]
    # no backward graph: the sets of diff positions given a tangent for which eager's backward was seen to raise
    # before any gradient (Note [Probing Eager's Backward]); another set is refused when backward runs. None: not
    # probed. With a graph: the sets for which `error` is raised instead of running it; another set giving a tangent
    # at `raising_tangents` is refused (Note [Backward Errors Are Deferred])
    raising_patterns: frozenset[frozenset[int]] | None
    # no backward graph, `raising_patterns` None: (diff position, input path) per new value of an input that no
    # program output's backward reaches; a backward through such values alone is refused (Note [Probing Eager's
    # Backward]). With a graph: per new value at `raising_tangents`, named where a backward giving one is refused
    unprobed_values: tuple[tuple[int, str], ...]
    # no backward graph: tensor inputs given to the Function detached (Note [Backward Errors Are
    # Deferred])
    detached: frozenset[int]
    diff_outputs: tuple[int, ...]  # forward-output positions (tensor outputs) that receive a tangent
    grad_inputs: tuple[int, ...]  # tensor-input positions (FlatInputs.tensor_indices order) that get a gradient
    unused: frozenset[int]  # positions in grad_inputs whose gradient eager leaves None (unreachable from outputs)
    grad_trees: tuple[SubclassNode | None, ...]  # per grad input: the gradient's subclass structure (None: plain)
    # per grad input: the dense leaf (position among its leaves) whose size and stride its subclass gradient had
    # while tracing (Note [Tangent Retrace])
    grad_stride_leaves: tuple[int | None, ...]
    # per grad input: the diff outputs (positions in diff_outputs) whose tangents reach its gradient in the graph
    tangent_deps: tuple[frozenset[int], ...]
    # dense inputs the backward itself writes (a custom Function's backward updating a buffer); their new values
    # follow the gradients in the backward's outputs, and the runtime copies them into the real inputs
    backward_mutations: tuple[DenseIndex, ...]
    backward_reshapes: tuple[BackwardReshape, ...]  # Note [Custom Functions]
    tangent_trees: tuple[SubclassNode | None, ...]  # per diff output: the subclass structure its tangent must have
    wrapper_updates: tuple[int, ...]  # tensor inputs whose new value the Function returns as a wrapper (last outputs)
    # graph inputs (synthetic bases of aliased inputs) that require grad: Function inputs after the user tensors,
    # their gradients after the user inputs' (Note [Aliased Inputs In Training])
    group_grads: tuple[int, ...]
    tangent_strides: tuple[tuple[int, ...] | None, ...]  # per dense tangent: its traced strides (static ones)
    # per dense tangent: the dims outermost first, where its strides are symbolic (Note [Tangent Retrace])
    tangent_orders: tuple[tuple[int, ...] | None, ...]
    num_saved: int  # forward outputs after the GraphOutputs ones, the backward's first inputs
    saved_primals: tuple[int | None, ...]  # per saved value: the graph input it is, if it is one
    # per saved value: the graph input it is a clone of, if one (an input at an offset: Note [Probing Eager's
    # Backward])
    saved_clones: tuple[int | None, ...]
    forward_reads_grad_mode: bool  # Note [Training Through A Joint Graph]
    # the joint graph, where it can run again from the primals for double backward (no random op in the forward);
    # see Note [Training Through A Joint Graph]
    rerun: Callable[..., object] | None
    num_fw_outputs: int  # the joint graph's outputs before the gradients
    subclass_grads: bool  # a gradient the joint took was a tensor subclass (no double backward's rerun)
    retrace: RetraceBackward  # Note [Tangent Retrace]


def leaf_attr_paths(layout: DenseLayout) -> tuple[tuple[str, ...], ...]:
    out: list[tuple[str, ...]] = []
    for tree in layout.trees:
        out.extend(_attr_paths(tree) if tree is not None else [()])
    return tuple(out)


def _attr_paths(node: SubclassNode) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for attr, child in zip(node.attrs, node.children, strict=True):
        out.extend([(attr, *p) for p in _attr_paths(child)] if isinstance(child, SubclassNode) else [(attr,)])
    return out


_EVAL_GLOBALS: dict[str, object] = {"math": math, "floor": math.floor, "ceil": math.ceil}


class MetaEvaluator:
    """Evaluates (size, stride, offset) expressions over symbols; compiled once per expression."""

    def __init__(self) -> None:
        self._cache: dict[object, CodeType] = {}  # keyed by the sympy expression: printed and compiled once

    def dim(self, d: object, symbols: dict[str, int]) -> int:
        if isinstance(d, int):
            return d
        if is_nested_expr(d):
            # A nested int (Note [Nested Int Dims]) is rebuilt by its subclass from the offsets it is given; -1 is
            # torch's convention for "not checked" in an outer size (see protocol's unflatten check).
            return -1
        code = self._cache.get(d)
        if code is None:
            code = compile(python_source(cast(sympy.Expr, d)), "<shape expr>", "eval")
            self._cache[d] = code
        return int(eval(code, _EVAL_GLOBALS, dict(symbols)))

    def meta(self, meta: Meta, symbols: dict[str, int]) -> tuple[list[int], list[int], int]:
        size, stride, offset = meta
        return (
            [self.dim(s, symbols) for s in size],
            [self.dim(s, symbols) for s in stride],
            self.dim(offset, symbols),
        )

    def arg(self, a: object, symbols: dict[str, int], src: torch.Tensor | None = None) -> object:
        """A recorded op argument with its symbolic ints evaluated (lists and tuples elementwise); a SourceSize is
        that size of `src`, the tensor the step views."""
        if isinstance(a, list | tuple):
            return type(a)(self.arg(x, symbols, src) for x in a)
        if isinstance(a, sympy.Expr):
            return self.dim(a, symbols)
        if isinstance(a, SourceSize):
            assert src is not None, "BUG: a nested int argument replayed without the tensor it is a size of"
            return src.size(a.dim)
        return a


# (values, graph inputs, dense inputs) -> (graph outputs, prewrapped fresh outputs by OutputIndex, new values of
# subclass inputs mutated in training by tensor-input position: Note [Inputs Written In Training],
# intermediate subclass roots by Replay.root_bases: Note [Output Regeneration], and what the runner calls with the
# program's outputs (by OutputIndex) once the call's epilogue has run and they are built, or None: training's Function
# notes there the version counters of the tensors eager's backward checks, as the call leaves them
# (backward_probe.eager_saves))
GraphRunResult = tuple[
    list[object],
    dict[int, torch.Tensor],
    dict[int, torch.Tensor],
    dict[tuple[int, ...], torch.Tensor],
    Callable[[Sequence[object]], None] | None,
]
GraphRun = Callable[[Sequence[object], list[torch.Tensor], list[torch.Tensor], dict[str, int]], GraphRunResult]


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphCode:
    """A graph's own straight-line code (the eager backend's, backends._straight), which a generated runner writes
    into its body in place of calling the function made from it (Note [Straight-Line Runners], "the graph written
    in"). Its source is ours: over the inputs `_i0`, `_i1`, ..., locals `_x0`, `_x1`, ..., and the globals `names`
    (every op, target and constant bound by reference), with integer literals and keyword names of the ops' schemas."""

    arity: int  # the inputs
    values: int  # the locals `_x<k>`
    steps: tuple[str, ...]  # the statements, at depth 0, in the graph's order
    result: str  # the outputs: a tuple or list display over the locals and inputs
    items: tuple[str, ...] | None  # `result`'s items where each is a name (an input, a local, a global), else None
    # where the ops are called through bindings that ask `__torch_function__` (backends._outside_torch_function):
    # None, they are not; () they always run with torch function off; else the inputs and tensor constants one call
    # of `_has_tf` on which (torch's `has_torch_function` test, its variadic or unary form: no tuple built) picks the
    # steps with the context or the same steps without it
    checked: tuple[str, ...] | None
    names: Mapping[str, object]

    def lines(self, then: str | None) -> list[str]:
        """The code at depth 0 over the inputs `_i0`, `_i1`, ..., each path ending in `then` and the result
        (`"return "`, `"outs = "`), or in its last step (None: the caller reads the outputs themselves, `items`). A
        runner binds the inputs to its own values (`_i0 = d3`) before it: the text is written as it is."""
        steps = [*self.steps, *([] if then is None else [then + self.result])]
        if self.checked is None:
            return steps
        off = ["with _tf_off():", *(f"    {step}" for step in steps)]
        if not self.checked:
            return off
        test = f"if _has_tf({', '.join(self.checked)}):"
        return [test, *(f"    {line}" for line in off), "else:", *(f"    {step}" for step in steps)]

    def locals(self) -> frozenset[str]:
        """The local names the code reads or binds: its inputs and its values."""
        return frozenset({*(f"_i{k}" for k in range(self.arity)), *(f"_x{k}" for k in range(self.values))})


# the function made from each GraphCode (backends._straight) -> that code
_GRAPH_CODE: weakref.WeakKeyDictionary[Callable[..., object], GraphCode] = weakref.WeakKeyDictionary()


def graph_code(compiled: object) -> GraphCode | None:
    """The code `compiled` was made from, where it is a function made from a GraphCode (else None)."""
    try:
        return _GRAPH_CODE.get(cast(Callable[..., object], compiled))
    except TypeError:  # (not weakly referenceable, or unhashable: no function of ours)
        return None


def made_from(code: GraphCode) -> Callable[..., object]:
    """The function of `code`, `run(_i0, _i1, ...)` returning its outputs, noted as made from it (graph_code)."""
    params = [f"_i{k}" for k in range(code.arity)]
    lines = code.lines("return ")
    source = f"def run({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in lines)
    namespace = dict(code.names)
    exec(compile(source, "<subclassaot eager graph>", "exec"), namespace)
    run = cast(Callable[..., object], namespace["run"])
    _GRAPH_CODE[run] = code
    return run


class SettlingCall:
    """A wrapper around a backend's callable that its first call may find needless (backends.keep_eager_outputs:
    the output fixes found on the first call; Note [What A Backend Receives And Returns]). Once its first call found
    nothing to do, it only passes each call on to `inner`: a generated runner that binds it as a global (Note
    [Straight-Line Runners]) asks to be told (`when_settled`) and calls `inner` itself from then on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._settled: Callable[..., object] | None = None  # the callable that stands for this one, once settled
        self._rebinds: list[Callable[[Callable[..., object]], None]] = []

    def __call__(self, *args: object) -> object:
        raise NotImplementedError  # (abstract: defined by each subclass, backends._EagerOutputs)

    def when_settled(self, rebind: Callable[[Callable[..., object]], None]) -> None:
        """Call `rebind(inner)` once calling `inner` is the same as calling this (at once if it is already)."""
        with self._lock:
            if self._settled is None:
                self._rebinds.append(rebind)
                return
        rebind(self._settled)

    def settle(self, inner: Callable[..., object]) -> None:
        """From now on, calling `inner` is the same as calling this."""
        with self._lock:
            self._settled, rebinds, self._rebinds = inner, self._rebinds, []
        for rebind in rebinds:
            rebind(inner)


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphCall:
    """How one call runs the compiled graph(s), and what a generated per-call path needs to know of it (Note
    [Straight-Line Runners])."""

    run: GraphRun
    # inference, where `run` is `list(direct(*graph_inputs))` and nothing else: the compiled callable itself
    direct: Callable[..., object] | None = None
    prewraps: frozenset[int] = frozenset()  # OutputIndex: the outputs `run` returns built (training's fresh ones)
    wrapper_updates: tuple[int, ...] = ()  # tensor inputs whose new value `run` returns as a wrapper (training)
    # graph outputs (ORIGINAL updates) whose copy into their input the compiled graph makes itself (Note [What A
    # Backend Receives And Returns]): the runner settles their version counters only
    written: frozenset[int] = frozenset()
    # graph outputs that are never views (the eager backend's: made by an op whose schema returns no alias), which
    # the runner hands out without the view check of `fresh_output`
    no_views: frozenset[int] = frozenset()
    # training, where `run` applies the Function to the tensor inputs and hands back its results, the `prewraps`
    # outputs in order, and nothing else: `apply(*tensor inputs)` (Note [Straight-Line Runners])
    apply: Callable[..., Sequence[torch.Tensor]] | None = None
    # ... what `apply` calls outside functorch's transforms, where it takes every input as it comes: the Function's C
    # apply bound to the step, of the tensor inputs with dead functorch wrappers unwrapped (what torch's
    # `Function.apply` hands it), which the runner calls itself
    apply_outside_transforms: Callable[..., Sequence[torch.Tensor]] | None = None


@dataclass(frozen=True, slots=True)
class EagerSave:
    """A tensor eager's autograd saves as itself: backward_probe's comment on saved tensors."""

    # the program output whose version counter the saved tensor uses (the saved tensor, its base or a view), or
    output: int | None
    input: int | None  # ... the tensor input (position among the tensor inputs) whose counter it uses
    outputs: frozenset[int]  # program outputs whose backward runs a node that saved it
    # tensor inputs (positions among the tensor inputs) the call gave a new history that runs such a node: the caller
    # holds them, returned or not, and may differentiate through them
    held: frozenset[int] = frozenset()
    # eager's backward, with it written after the call, may give some leaf input its gradient before the node that
    # saved it raises (its engine runs later-made nodes first): the compiled backward refuses instead of raising
    graded_first: bool = False
    # ... not so, but where the caller also wrote an output view of an input (the view's node, made again at the
    # backward's read, runs first): the compiled backward refuses where it finds such a view written
    graded_after_view_writes: bool = False
    # eager's error at unpacking it once written, where that is not the version check's: every tensor saved over that
    # counter is a view made under no_grad (or by a multi-output op), whose grad_fn, read first, raises
    view_error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EagerSaves:
    """backward_probe.eager_saves: the saved wrappers, and the inputs the Function takes detached where it gives
    them no gradient (backward_probe's comment on saved tensors)."""

    saves: tuple[EagerSave, ...] = ()
    # tensor inputs (positions among the tensor inputs): leaves, or views of leaves, returned as themselves whose leaf
    # no node of eager's program reaches: eager runs that leaf's AccumulateGrad apart from the program's nodes
    detached: frozenset[int] = frozenset()
    # whether `saves` are all the tensors eager's backward checks (the probe ran): only then does the Function leave
    # the checks to them (Note [Probing Eager's Backward])
    probed: bool = False
    # where not probed: the inputs (tensor positions) a custom Function saved (itself or a view), whose counters
    # eager's backward checks though it may read none of their values (`Analysis.function_taken`)
    taken: frozenset[int] = frozenset()


def probed_stride(
    plan: RuntimePlan, outs: Sequence[object], probe: int | None, size: list[int], stride: list[int]
) -> list[int]:
    """Note [Strides The Kernels Choose]: the real strides of the stride probe the analysis named, if any."""
    if probe is None:
        return stride
    leaf = _probe(plan, outs, probe)
    return list(leaf.stride()) if list(leaf.shape) == size else stride


def probed_layout(
    plan: RuntimePlan, outs: Sequence[object], probe: int, source: torch.Tensor, meta: tuple[list[int], list[int], int]
) -> tuple[list[int], list[int], int]:
    """Note [Strides The Kernels Choose]: the real size, strides and offset of stride probe `probe`, an output leaf's
    own value in the graph, where it has the leaf's size `meta[0]` and views the storage of `source`, the real base
    the leaf is rebuilt over (a backend that returned it apart from its base leaves the trace's layout `meta`)."""
    leaf = _probe(plan, outs, probe)
    if list(leaf.shape) != meta[0] or storage_key(leaf) != storage_key(source):
        return meta
    return meta[0], list(leaf.stride()), int(leaf.storage_offset())


def _probe(plan: RuntimePlan, outs: Sequence[object], probe: int) -> torch.Tensor:
    gout = plan.graph_outputs
    leaf = outs[len(gout.updates) + gout.num_fresh + gout.num_bases + gout.num_symints + probe]
    assert isinstance(leaf, torch.Tensor), "BUG: a stride probe is no tensor"
    return leaf


_below_views = torch._C._AutoDispatchBelowADInplaceOrView
_no_subclass_functions = torch._C.DisableTorchFunctionSubclass


def fresh_output(value: torch.Tensor) -> torch.Tensor:
    # A fresh output is never a view in eager; the eager backend may return a view of a graph temporary.
    return non_view_alias(value) if value._is_view() and not value.requires_grad else value


def non_view_alias(t: torch.Tensor, meta: tuple[Sequence[int], Sequence[int], int] | None = None) -> torch.Tensor:
    """A tensor sharing `t`'s storage, with `t`'s metadata or `meta` (size, stride, offset), that is not a view (no
    `._base`), with a counter of its own at 0 and no autograd history: what a view op on an inner tensor makes inside
    a subclass's `__torch_dispatch__` (below autograd and ADInplaceOrView, which alone make a view). An inference
    tensor's alias is made by `set_()` instead (below ADInplaceOrView it would be an inference tensor)."""
    if not t.is_inference():
        # (a plain tensor: a torch-function subclass's `__torch_function__` would hand back its own class)
        with _below_views(), _no_subclass_functions():
            if meta is None:
                return t.as_strided(t.size(), t.stride(), t.storage_offset())
            return t.as_strided(*meta)
    if meta is not None:
        t = t.as_strided(*meta)
    alias = torch.empty((0,), dtype=t.dtype, device=t.device)
    with torch.no_grad():
        alias.set_(t.untyped_storage(), t.storage_offset(), t.size(), t.stride())
    return alias


# -- wrappers' own metadata and storage (the module docstring's second part) -------------------------------------------


def anchor_holders(
    flat: FlatInputs, classes: Sequence[WrapperStorageClass | InnerWrapperClass], values: Sequence[object]
) -> list[torch.Tensor | None]:
    """Per class, a plain tensor on the wrapper storage its anchor (an input, or an input's inner wrapper) had as
    received (None: no anchor). Taken before the epilogue, which may move an anchor off it (`.data =`)."""
    anchors = [(c.anchor, ()) if isinstance(c.anchor, int) else c.anchor for c in classes]
    return [None if a is None else storage_holder(_at(values[flat.tensor_indices[a[0]]], a[1])) for a in anchors]


def _at(t: object, attrs: tuple[str, ...]) -> torch.Tensor:
    for attr in attrs:
        t = getattr(t, attr)
    assert isinstance(t, torch.Tensor)
    return t


def storage_holder(anchor: torch.Tensor) -> torch.Tensor:
    """A plain tensor on `anchor`'s wrapper storage (set without autograd or a version bump), to keep it past an
    epilogue that may move `anchor` off it."""
    holder = torch.empty(0, dtype=anchor.dtype, device=anchor.device)
    torch._functionalize_unsafe_set(holder, anchor)
    return holder


def share_wrapper_storages(
    flat: FlatInputs,
    classes: Sequence[WrapperStorageClass],
    holders: Sequence[torch.Tensor | None],
    values: Sequence[object],
    result: Sequence[object],
    dense_leaf: Callable[[int], torch.Tensor],
) -> None:
    """Note [Wrapper Storage]: each member of a class ends on the class's wrapper storage. `holders`: from
    `anchor_holders`, taken before the epilogue; `dense_leaf(k)`: dense leaf k as the call left it."""
    targets: list[torch.Tensor] = []
    for c, holder in zip(classes, holders, strict=True):
        if c.leaf is not None:  # Note [Wrapper Storage]
            holder = dense_leaf(c.leaf)
        elif c.output_leaf is not None:
            o, pos = c.output_leaf
            out = result[o]
            assert isinstance(out, torch.Tensor)
            holder = out if pos < 0 else flatten_subclass(out, "out")[1][pos]
        if holder is None:
            # A storage the call made (set_() to an intermediate): a new wrapper storage, shared by no one else.
            first = values[flat.tensor_indices[c.inputs[0]]] if c.inputs else result[c.outputs[0]]
            assert isinstance(first, torch.Tensor)
            holder = torch.Tensor._make_wrapper_subclass(  # private API: a storage with no data
                type(first), first.shape, dtype=first.dtype, device=first.device
            )
        targets.append(holder)
    for c, holder in zip(classes, targets, strict=True):
        key = holder.untyped_storage()._cdata
        members = [values[flat.tensor_indices[t]] for t in c.inputs] + [result[o] for o in c.outputs]
        for m in members:
            if isinstance(m, torch.Tensor) and m.untyped_storage()._cdata != key:
                torch._functionalize_unsafe_set(m, holder)


def assign_data_meta(t: torch.Tensor, size: list[int], stride: list[int], offset: int) -> None:
    """Give wrapper `t` the size/stride/offset eager's `.data =` left on it (Note [Wrapper Storage]), when
    they differ from those it was built with; its storage is its class's (`share_wrapper_storages`)."""
    if list(t.shape) != size or list(t.stride()) != stride or t.storage_offset() != offset:
        assign_wrapper_metadata(t, size, stride, offset)


def settle_inner_wrappers(
    flat: FlatInputs,
    classes: Sequence[InnerWrapperClass],
    holders: Sequence[torch.Tensor | None],
    values: Sequence[object],
    result: Sequence[object],
) -> None:
    """Note [Wrapper Storage]: the inner wrappers of nested subclasses after a wrapper-level set_(), as eager's set_,
    repeated on each, left them: each takes its first dense leaf's metadata, then its class's wrapper storage (a new
    one where the class has no anchor: a storage the call made). `holders`: from `anchor_holders`."""
    for c, holder in zip(classes, holders, strict=True):
        members = [_at(values[flat.tensor_indices[t]], attrs) for t, attrs in c.inputs]
        members += [_at(result[o], attrs) for o, attrs in c.outputs]
        for w in members:
            leaf = dense_leaves(w)[0]
            assign_data_meta(w, list(leaf.shape), list(leaf.stride()), int(leaf.storage_offset()))
        if holder is None:
            first = members[0]
            numel = max(storage_nbytes(m.untyped_storage()) for m in members) // first.element_size()
            holder = torch.Tensor._make_wrapper_subclass(  # private API: a storage with no data
                type(first), [numel], dtype=first.dtype, device=first.device
            )
        key = holder.untyped_storage()._cdata
        for w in members:
            if w.untyped_storage()._cdata != key:
                torch._functionalize_unsafe_set(w, holder)


Layout = tuple[list[int], list[int], int]


def set_target_layout(meta: Layout, value: object) -> Layout:
    """Note [Strides The Kernels Choose]: `value`'s (the graph's final value of the input) strides and offset,
    where its size is the recorded one; else `meta`."""
    size, stride, offset = meta
    if not isinstance(value, torch.Tensor) or list(value.shape) != size:
        return meta
    return size, list(value.stride()), int(value.storage_offset())


def wrapper_layout(meta: Layout, leaf_metas: Sequence[Layout], leaves: Sequence[torch.Tensor]) -> Layout:
    """Note [Strides The Kernels Choose]: a wrapper's outer layout `meta`, with the real strides of the first of
    its dense `leaves` whose recorded size and stride (`leaf_metas`) it had."""
    size, stride, offset = meta
    for (leaf_size, leaf_stride, _), leaf in zip(leaf_metas, leaves, strict=True):
        if leaf_size == size and leaf_stride == stride and list(leaf.shape) == size:
            return size, list(leaf.stride()), offset
    return meta
