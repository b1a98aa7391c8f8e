"""Cross-stage vocabulary: the frozen dataclasses that flow from one pipeline stage to the next.

Input: nothing. Output: types. Invariants: distinct index spaces have distinct NewTypes (most AOT bugs are index
mix-ups); sequence fields say their length and what indexes them; nothing here holds a graph or a fake tensor except
the compile-time records (`FlatInputs`, `DenseLayout`, `Analysis`) that never reach the per-call path.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NewType, TypeAlias

import sympy
import torch
from torch.utils._pytree import TreeSpec

from subclassaot.authoring.protocol import SubclassNode

InputIndex = NewType("InputIndex", int)  # index into the user's flat input leaves (tensors and constants)
DenseIndex = NewType("DenseIndex", int)  # index into the plain tensor leaves after desugaring every tensor input
GraphInputIndex = NewType("GraphInputIndex", int)  # index into the graph's placeholders
OutputIndex = NewType("OutputIndex", int)  # index into the user's flat output leaves

Dim: TypeAlias = "int | sympy.Expr"  # a size, stride or offset: concrete, or an expression over the ShapeEnv's symbols
Meta: TypeAlias = "tuple[tuple[Dim, ...], tuple[Dim, ...], Dim]"  # (size, stride, storage_offset)


class LeafKind(enum.Enum):
    TENSOR = "tensor"
    CONSTANT = "constant"  # any non-tensor leaf: guarded by ==, baked into the graph


# ----------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True, kw_only=True)
class BackwardReshape:
    """A plain tensor input whose size and strides, or only version counter, the program's backward changed in place
    (Note [Custom Functions])."""

    position: int  # tensor-input position (FlatInputs.tensor_indices order)
    size: tuple[int, ...] | None  # None: the backward changed its values or nothing, never its layout
    stride: tuple[int, ...] | None
    bumps: int  # version-counter increments the backward made on it
    # per custom Function node whose backward made the change: the diff outputs (positions in diff_outputs) whose
    # tangents reach it; eager runs the node only where one of them gets a tangent. (): whenever the backward runs
    reached_by: tuple[frozenset[int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class InputLeaf:
    index: InputIndex
    path: str  # "args[0]", "kwargs['x']", "self.weight"
    kind: LeafKind


@dataclass(frozen=True, slots=True, kw_only=True)
class FlatInputs:
    """The user's call flattened: module state first (when compiling a module), then args and kwargs."""

    spec: TreeSpec  # of (params_and_buffers_dict, args, kwargs)
    leaves: tuple[InputLeaf, ...]  # len = number of pytree leaves; indexed by InputIndex
    values: tuple[object, ...]  # the real leaf values of this call; indexed by InputIndex (compile time only)
    tensor_indices: tuple[InputIndex, ...]  # the TENSOR leaves, in order
    module_state_names: tuple[str, ...]  # parameter and buffer names lifted from a module; () for a function


# ----------------------------------------------------------------------------- desugar


@dataclass(frozen=True, slots=True, kw_only=True)
class DenseLeaf:
    path: str  # "args[0]" for a plain input, "args[0].a" for an inner tensor
    owner: InputIndex  # the user input this leaf belongs to
    position: int  # position among the owner's leaves (0 for a plain input)


@dataclass(frozen=True, slots=True, kw_only=True)
class AliasGroup:
    """Dense leaves that share one storage; traced as views of one synthetic base (a flat view of the storage)."""

    members: tuple[DenseIndex, ...]  # len >= 2, or 1 where whole_storage
    member_meta: tuple[Meta, ...]  # len = len(members): each member's (size, stride, offset) as a view of the base
    base_numel: int  # elements in the shared storage
    same_as: tuple[int | None, ...]  # per member: the earlier member that is the very same tensor (f(x, x)), or None
    # per member: its (conjugate, negative) bits (`c.conj()`, `c.conj().imag`); the base holds the storage as it is,
    # without bits, and each member takes its own bits on top of its as_strided() view of it
    member_bits: tuple[tuple[bool, bool], ...] = ()
    # the program reaches storage elements outside its members (Note [as_strided On Inputs]): the group stays traced
    # even untouched, and the guards check the storage's size
    whole_storage: bool = False
    # ... and its storage came freed (fewer bytes than its members' elements need): the base holds their elements,
    # which the program re-allocates before it reads them, and the guards check it comes freed (Note [Storage Swaps
    # By Rebinding])
    freed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DenseLayout:
    trees: tuple[SubclassNode | None, ...]  # len = number of tensor inputs (FlatInputs.tensor_indices order)
    leaves: tuple[DenseLeaf, ...]  # indexed by DenseIndex
    leaves_of_input: tuple[tuple[DenseIndex, ...], ...]  # len = number of tensor inputs
    groups: tuple[AliasGroup, ...]  # the traced groups: each is one synthetic base (Note [Synthetic Bases])
    # every storage the inputs share, traced or not: the aliasing pattern the guards check
    observed_groups: tuple[AliasGroup, ...]
    # What each graph placeholder is: a dense leaf, or the synthetic base of groups[g].
    graph_inputs: tuple[DenseIndex | AliasGroupRef, ...]  # indexed by GraphInputIndex
    # Which dense leaves / wrappers share a version counter in eager (views of one base): equal numbers share.
    leaf_families: tuple[int, ...]  # indexed by DenseIndex
    wrapper_families: tuple[int, ...]  # per tensor input (-1 for plain inputs)
    # per tensor input: the first earlier tensor input that is the very same subclass object (f(x, x)), else None
    same_wrapper: tuple[int | None, ...] = ()
    # per tensor input: the subclass tensor input whose real wrapper is its autograd `._base` (Note [Aliased Inputs
    # In Training]), else None
    view_of: tuple[int | None, ...] = ()
    # per tensor input: the real wrapper's own storage size in bytes (None for plain inputs): Note [Wrapper
    # Storage]
    wrapper_bytes: tuple[int | None, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AliasGroupRef:
    group: int  # index into DenseLayout.groups


# ----------------------------------------------------------------------------- analyze


class AssignedWrite(enum.Enum):
    """When a plain input that requires grad was written with grad, against its last `.data =` (Note [History Kept
    Through .data =])."""

    # only after it (to the storage it gave, or its own where that is the assigned tensor's): the epilogue gives the
    # input the write's history
    AFTER = "after"
    # ... where its size at entry does not expand to the assigned one: eager's backward through it raises, and so
    # does the epilogue's copy_ of a value not differentiated
    AFTER_RAISING = "after_raising"
    BEFORE = "before"  # (also) before it: refused
    # (also) before it, at the layout it came with (no in-place view op), its size at entry expanding to its last: the
    # trace's stand-in keeps that history across the rebinding as eager's tensor does; the epilogue gives it as AFTER
    KEPT = "kept"
    # written with grad, then set_() under no_grad onto another storage (the last swap, no set_() under grad): eager
    # keeps the write's history; refused
    SET_BEFORE = "set_before"
    RESHAPED = "reshaped"  # after it, with an in-place view op on it after its `.data =`: refused
    # not written with grad, but an in-place view op with grad changed it, and `.data =` gave it another storage:
    # refused (Note [History Kept Through .data =])
    VIEWED = "viewed"


class GradSetNode(enum.Enum):
    """The node eager's history of a tensor set_() under grad ends on, by the last op autograd recorded on it (Note
    [Epilogue Nodes In Eager's Order])."""

    SET = "set"  # its own set_ node, numbered above every other
    LAYOUT = "layout"  # an in-place view op's node right over it, numbered as the program made it
    # a view's set_() (the base's CopySlices) or a write's node over it, numbered as the program made it
    NUMBERED = "numbered"


@dataclass(frozen=True, slots=True, kw_only=True)
class LeafMutation:
    """What the program did to one dense input leaf, observed under functionalization."""

    data: bool  # the leaf's original storage was written (through it or any alias)
    metadata: bool  # size/stride/offset changed (t_, unsqueeze_, as_strided_, resize_, ...)
    storage_changed: bool  # set_() gave it another storage
    set_source: DenseIndex | None  # after set_(), the dense input whose storage it now shares (None: a new storage)
    final_data: bool  # the storage it ends with holds values written during the call
    hidden_from_autograd: bool  # every mutation went through .data / under no autograd tracking
    final_meta: Meta  # size, stride, storage_offset at the end
    resized: bool  # its storage had to grow (resize_): replay with resize_, not as_strided_
    swapped: bool  # set_() or `.data =` was called on it (even if it ends on its original storage)
    swapped_by_data: bool  # its last storage swap was `.data =` (invisible to autograd and the version counter)
    # a plain input whose every storage swap was `.data =`, no set_(): a leaf keeps its gradient accumulator (Note
    # [Gradient Accumulators Of Leaves])
    swapped_by_data_only: bool = False
    # its (conjugate, negative) bits at the end, where it ends on another storage or they are not those it came with:
    # `.data =` gives it the assigned tensor's (`x.data = y.conj()`), where set_() keeps its own; the epilogue gives
    # them after its swap
    final_bits: tuple[bool, bool] | None = None
    # how many times eager advances its version counter (writes through it or a view sharing its counter)
    version_bumps: int
    # ... of those, how many came after its last one by an op that may record a node (with grad on): eager's grad_fn
    # of a view on the counter is stale at the end (runtime/steps.py: Version Counters As Eager's)
    bumps_after_grad: int = 0
    autograd_visible: bool  # some write to it happened with grad enabled, not through .data / detach()
    # an input that is no view, grown by resize_() and written with grad through itself (its counter's family) in the
    # grown storage: eager's grad_fn is a node at the grown layout (whose gradient its older history rejects), so its
    # FINAL is copied in with grad after the resize_ (Note [Input Updates])
    written_after_growth: bool = False
    # some autograd-visible write went through it or a view of it (its version-counter family), not only through
    # a tensor set_() or `.data =`-assigned to its storage: on a leaf that requires grad, eager raises
    visible_through_self: bool = False
    # x.set_(x) was called on it (or a view of it) with grad on while it required no grad: autograd checks that
    # in-place op, which raises once it is a leaf that requires grad (Note [Inputs Written In Training])
    self_set_with_grad: bool = False
    set_under_grad: bool = False  # set_() was called on it with grad enabled while it or the source required grad
    # ... and the last such set_() took another input that requires grad (or a view of one taken with grad), over any
    # storage for a plain input (`x0.set_(x0.detach().requires_grad_())` too): eager's node has an edge to that input's
    # history (Note [set_ Under Grad])
    set_source_edge: bool = False
    # ... and how many times eager had advanced that source's version counter when the last such set_() read its
    # history (before the set_'s own advance; None: no source): the epilogue's repeat reads the source at that count
    # (Note [set_ Under Grad])
    source_bumps_at_set: int | None = None
    # ... where it kept its storage: the dense input that the last such set_() took, itself or as the root of views of
    # it taken with grad, if one (its node's edge goes to that input's history: Note [set_ Under Grad])
    grad_set_input: DenseIndex | None = None
    # ... on a view of it, which rebased its history (Note [set_ Under Grad])
    view_set_under_grad: bool = False
    # ... and the node its history ends on there (Note [Epilogue Nodes In Eager's Order])
    grad_set_node: GradSetNode = GradSetNode.SET
    # a view of a tensor was set_() under grad to (a view of) it (Note [set_ Under Grad])
    view_set_source: bool = False
    # set_() to a new storage (set_source None) that an earlier dense leaf ends on too: the leaf that makes it
    new_storage_of: DenseIndex | None = None
    # set_() to a new storage: its size in elements, where concrete (an intermediate's, which the leaf may cover in
    # part: a view of it taken after reads past the leaf's elements); else None: just the leaf's
    new_storage_numel: int | None = None
    # a plain input whose metadata changed by in-place view ops (t_, unsqueeze_) and set_()s all run under no_grad:
    # eager leaves its grad_fn as it was, and so does the epilogue's layout op (Note [Leaves Laid Out Anew Under
    # no_grad])
    metadata_hidden: bool = False
    # set_() (or `.data =`) off its own storage after a resize_() grew that storage, traced as a view of a synthetic
    # base (its values there without a history): eager leaves the storage grown in place, holding the program's
    # writes, so the BASE update writes it before the epilogue moves the input (Note [Storage Swaps By Rebinding])
    left_grown: bool = False
    # resized, never by a resize_() of itself: only its storage grew, under it, by another tensor's (a detach() of it,
    # or the storage's own resize_), so its own layout is its in-place view ops', which autograd records where run with
    # grad, and so does the epilogue's layout op (Note [Input Updates])
    grown_under_it: bool = False
    # ... and it is a plain view that requires grad, written with grad: eager rebuilds its grad_fn from its base at the
    # next read, as_strided() at its new layout over the base's history (the ORIGINAL copy records the writes), so
    # its FINAL value, whose traced history reads gradients in the old layout, is copied in below autograd (Note
    # [Input Updates])
    history_from_base: bool = False
    # a plain alias-group member that autograd relates to no other member (`x.detach()` passed beside x: neither is
    # the other's `._base` nor shares one with it), which gains grad by a write with grad, its storage and layout kept:
    # eager records that write on it alone, so its FINAL, whose traced history is the write's, is copied in with grad
    # after the BASE copy (Note [Inputs Written In Training])
    history_of_its_own: bool = False
    # a plain input that requires grad, assigned `.data =` another storage, written with grad through itself or a
    # view of it: when (Note [History Kept Through .data =])
    assigned_write: AssignedWrite | None = None
    # ... KEPT, with no such write after its last `.data =`: eager's node of the write is at the layout the input came
    # with, not the assigned one (Note [History Kept Through .data =])
    kept_at_entry: bool = False
    # a plain view input assigned `.data =`, whose history eager rebuilt at the layout it came with after its counter
    # last moved, and keeps: the runtime rebuilds it once the counter has its final count (Note [Stale View Functions])
    rebuilt_at_entry_layout: bool = False
    # the last op to advance its counter was an in-place view op run on it with grad: eager's history ends on that
    # op's node, over the history it had, whether the layout changed or not (its view function, as_strided() of the
    # base at the layout, may reach elements its chain does not), which the epilogue's relayout with grad makes too
    # (Note [Epilogue Nodes In Eager's Order])
    relaid_last: bool = False

    @property
    def any(self) -> bool:
        return self.data or self.metadata or self.storage_changed or self.swapped

    @property
    def version_bumped(self) -> bool:
        """Eager advances its version counter."""
        return self.version_bumps > 0

    @property
    def written_after_data(self) -> bool:
        """Its history takes the write (after the `.data =`, or before it where KEPT): Note [History Kept Through
        .data =]."""
        return self.assigned_write in (AssignedWrite.AFTER, AssignedWrite.AFTER_RAISING, AssignedWrite.KEPT)


class OutputKind(enum.Enum):
    CONSTANT = "constant"  # a Python value returned as is
    SYMINT = "symint"  # a symbolic int computed by the graph
    IS_INPUT = "is_input"  # the very input object
    SAME_AS = "same_as"  # the very object of an earlier output (input_index holds that OutputIndex)
    TENSOR = "tensor"  # a tensor (plain or subclass) whose dense leaves are described per leaf


class LeafSource(enum.Enum):
    GRAPH = "graph"  # a fresh value computed by the graph
    INPUT_ALIAS = "input_alias"  # a view of a dense input leaf, regenerated after the epilogue
    INTERMEDIATE_ALIAS = "intermediate_alias"  # a view of a graph-computed base shared with other outputs


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputLeaf:
    source: LeafSource
    index: int  # GRAPH: position among graph tensor outputs; INPUT_ALIAS: DenseIndex; INTERMEDIATE: base number
    meta: Meta  # the output's size, stride, storage_offset (used by regeneration)
    is_view: bool  # eager gives a view (`._base` set); otherwise a plain alias sharing storage
    passthrough: DenseIndex | None = None  # GRAPH in training: return this dense input itself from the Function
    # ... not itself but an alias of it with this leaf's metadata and a counter of its own, no view: eager's is one
    # that the subclass's own dispatch made by view ops (torchao's Float8 detach() of `_scale`)
    passthrough_alias: bool = False
    # ... a view (is_view) whose `._base` in eager is such an alias (a DTensor's tensor_split() piece's inner tensor):
    # that alias's size, stride, offset; the Function returns the view of an alias made so (Note [Custom Functions])
    passthrough_base: Meta | None = None
    # GRAPH in training: eager's is a view that the program's custom autograd.Function made of an intermediate the
    # program does not return (DTensor.to_local); the Function returns such a view too (Note [Custom
    # Functions])
    function_view: bool = False
    # ... where eager's `._base` is an intermediate base the graph returns (base number): the Function returns the
    # view as that base's as_strided() with `meta`, so `._base` is eager's (Note [Custom Functions])
    function_view_base: int | None = None
    # INPUT_ALIAS: the very leaf object of the input (a subclass built around it); INTERMEDIATE_ALIAS: the base itself
    same_object: bool = False
    # INTERMEDIATE_ALIAS, the base or set_() to it (`t0.data = base`), with its base's size, stride and offset in the
    # trace: it takes the real base's layout, strides in size-1 dims included (Note [Strides The Kernels Choose])
    base_layout: bool = False
    # INPUT_ALIAS view whose `._base` in eager is a tensor nobody else sees that set_() put on the input's storage
    # (or the input was set_() to): its size, stride, offset; the output is regenerated as a view of such an alias
    hidden_base: Meta | None = None
    # a view whose `._base` in eager is on another storage (Note [Outputs Over Another Storage]): that base, an
    # input's dense leaf (INPUT_ALIAS, DenseIndex) or an intermediate base (INTERMEDIATE_ALIAS, base number)
    foreign_base: tuple[LeafSource, int] | None = None
    # ... an input whose view the program set_() there with grad on: rebuilt so, with grad (Note [set_ Under
    # Grad])
    foreign_grad: bool = False
    # hidden_base: a token naming eager's hidden base object, shared by the leaves that view it (Note [Output
    # Regeneration])
    hidden_key: int | None = None
    # hidden_base: eager's is the input's own detach() (or one of a view of it) that a resize_() grew, sharing the
    # input's version counter, which the rebuilt one shares too (Note [Output Regeneration])
    hidden_shares_counter: bool = False
    # GRAPH in training: the intermediate an input was set_() (or `.data =`-assigned) to, with its own history: after
    # the epilogue it is set_() under no_grad onto that dense input's new storage (Note [Outputs Over Another
    # Storage])
    storage_of: DenseIndex | None = None
    # an alias whose (conjugate, negative) bits are not those of the tensor it is regenerated from (after
    # `x.conj().set_(t)`, t reads x's storage without x's bits): it takes these; None: its source's
    bits: tuple[bool, bool] | None = None
    # INPUT_ALIAS, not a view: its metadata are those the input ends with, on a storage set_() gave it: it takes the
    # input's real layout after the epilogue (Note [Strides The Kernels Choose])
    input_layout: bool = False
    # INPUT_ALIAS with a layout of its own over such a storage: the view ops that made it from the tensor the input
    # took there, whose layout the input ends with; it takes the layout they give the input's real final value, and
    # its hidden base (that tensor) the value's own (Note [Strides The Kernels Choose])
    set_steps: tuple[ViewStep, ...] | None = None
    # GRAPH in training: a detach() of this dense input the program wrote with a value that requires grad; after the
    # epilogue it is set_() under no_grad onto that input's storage with `meta` (Note [Outputs Over Another
    # Storage])
    onto_input: DenseIndex | None = None
    # INPUT_ALIAS, a plain view: eager's is stale at the end (its counter moved since autograd last set its history),
    # so its grad_fn regenerates at its next read as an as_strided() of its `._base`, which is the input's where the
    # input is a view: rebuilt from that base, whose elements past the input's get their gradient too (Note [Views Of
    # Inputs Whose History Raises])
    from_base: bool = False
    # INTERMEDIATE_ALIAS rebuilt by as_strided() (no replay) with a dim of size 0 or 1, whose strides and offset a
    # kernel chose: it takes the size, strides and offset of this graph stride probe, its own value in the graph,
    # where that views the base's storage (Note [Strides The Kernels Choose])
    layout_probe: int | None = None


class ReplaySource(enum.Enum):
    INPUT = "input"  # a user tensor input (index: InputIndex), after the epilogue
    BASE = "base"  # an intermediate base the graph returns (index: base number)
    OUTPUT = "output"  # an earlier output of the same call (index: OutputIndex)
    WRAPPER = "wrapper"  # an intermediate subclass rebuilt from intermediate bases (root_tree / root_bases)
    # an intermediate subclass whose dense leaves are on input storages after set_() (root_tree / root_leaves)
    INPUT_ROOT = "input_root"


@dataclass(frozen=True, slots=True, kw_only=True)
class InputArg:
    """A ViewStep argument that is a user input (a wrapper-level set_() source): `index` is its flat input index."""

    index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceSize:
    """A ViewStep argument that is a nested int of the step's source (`nt.view(2, 20, nt.size(1))`): its size at
    `dim` at run time, since a nested int is no symbol's value (Note [Nested Int Dims])."""

    dim: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewStep:
    """One view op of a chain that eager ran to produce an output from its source."""

    op: torch._ops.OpOverload
    args: tuple[object, ...]  # the op's arguments after the source; sizes as Dim expressions
    kwargs: tuple[tuple[str, object], ...]
    index: int | None  # which output of a multi-output view (unbind, split); None for single-output views
    grad_enabled: bool  # grad mode when eager ran it (views made under no_grad behave differently later)
    own_version: bool = False  # the program took `.data`: the result has a version counter of its own
    # taken with grad enabled of a source that required no grad then, and does by the end (a requires_grad_() of its
    # base): eager's view has no history and grad mode's creation meta; replayed under no_grad and given that meta
    # (Note [Views That Raise After A Bump])
    without_history: bool = False
    # taken inside a torch.inference_mode() block of a normal tensor: replayed inside one, eager's creation meta
    inference_mode: bool = False
    # the as_strided() that stands for a history autograd regenerates from the `._base` of an input whose
    # requires_grad is its own (a view of a base requiring none): taken one count behind the counter it shares with
    # the input, then given it back, so that its next read regenerates it from that base, as eager's (Note [Views
    # That Raise After A Bump])
    from_root: bool = False
    # a multi-output view (split, chunk, unbind): eager's call, named by the analysis; the replays of one call's
    # outputs share one call (Note [Output Regeneration]): eager's outputs share one grad_fn
    call: int | None = None
    # the program made the step's result a new autograd leaf (requires_grad_(), in a call begun with grad on) before
    # the chain's next view of it: the replay makes it one there, the leaf the later views' histories end in (Note
    # [Training Without A Function])
    makes_leaf: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DataAssignmentPlan:
    """How the epilogue repeats the `.data =` assignments to one subclass input (Note [Wrapper Storage])."""

    after_steps: int  # how many of the input's `inplace_replay` steps are replayed before the wrapper takes `meta`
    meta: Meta  # the wrapper's own size, stride, offset from the last assignment on (the assigned tensor's)
    # the tensor input the last assignment assigned, as the program received it (its real metadata are `meta`, even
    # where the analysis ran on a clone of it), or None
    source: int | None
    final: bool  # no later op changes the wrapper's own metadata: `meta` are its metadata after the call
    resizes: bool  # an assignment gave the wrapper another size than it had
    # the assigned tensor's strides are the real ones of this graph stride probe (Note [Strides The Kernels Choose])
    stride_probe: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StrideProbe:
    """A dense leaf the graph returns for its real strides: leaf `leaf` of the tensor the last `.data =` to tensor
    input `input_index` or to output `output_index` (exactly one is set) assigned, or, `own`, of output
    `output_index`'s own value (OutputLeaf.layout_probe) (Note [Strides The Kernels Choose])."""

    input_index: int | None
    output_index: int | None
    leaf: int
    own: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class WrapperStorageClass:
    """Subclass tensors whose wrappers share one storage after the call (Note [Wrapper Storage])."""

    anchor: int | None  # the tensor input whose wrapper storage (as received) it is; None: one made by the call
    inputs: tuple[int, ...]  # tensor inputs (positions in DenseLayout.trees) whose wrapper ends on it
    outputs: tuple[int, ...]  # OutputIndex of the outputs whose wrapper is on it
    # See Note [Wrapper Storage]: the storage is that of dense leaf `leaf` after the call, else of
    # leaf `pos` of output `o` (`output_leaf` = (o, pos), pos -1: the plain output itself); None: neither
    leaf: int | None = None
    output_leaf: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InnerWrapperClass:
    """Inner wrappers of nested subclasses (a TwoTensor of TwoTensors) that share one wrapper storage after the call,
    each given its first dense leaf's metadata (Note [Wrapper Storage]). A member: (tensor input position or
    OutputIndex, the attribute names from the tensor down to the inner wrapper)."""

    anchor: tuple[int, tuple[str, ...]] | None  # the input's inner wrapper whose storage (as received) it is
    inputs: tuple[tuple[int, tuple[str, ...]], ...]
    outputs: tuple[tuple[int, tuple[str, ...]], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """How to rebuild an aliased output exactly as eager made it (Note [Output Regeneration])."""

    source: ReplaySource
    index: int
    steps: tuple[ViewStep, ...]  # applied in order; () only for WRAPPER: the intermediate itself
    root_tree: SubclassNode | None = None  # WRAPPER: the intermediate subclass's structure
    # WRAPPER: per dense leaf of the root, its intermediate base number, or -1 - j: the input's dense leaf j itself
    # (Note [Output Regeneration])
    root_bases: tuple[int, ...] = ()
    root_meta: Meta | None = None  # WRAPPER, INPUT_ROOT: the root's outer size, stride, offset
    # WRAPPER: the root dense leaf whose size and stride the root's were while tracing; the root takes its real
    # strides at run time (Note [Strides The Kernels Choose])
    root_stride_leaf: int | None = None
    root_leaves: tuple[OutputLeaf, ...] = ()  # INPUT_ROOT: per dense leaf of the root, the input leaf it aliases
    # INPUT_ROOT: names eager's intermediate (its id() while analyzing); replays naming one share one rebuilt root
    # (Note [Output Regeneration])
    root_token: int | None = None
    # INPUT: a view of an input that requires grad, taken before the program wrote the input: rebuilt before the
    # epilogue writes it, so that autograd sees the same order as in eager (a no_grad or multi-output view whose
    # base is then written has a grad_fn that raises)
    before_epilogue: bool = False
    # INPUT, after the epilogue: the input's metadata when the chain's first view was taken, where it changed in
    # place before and after that: the chain starts from an alias of the input with them (Note [Output
    # Regeneration]). OUTPUT, WRAPPER: the same for a chain through a detach() of an earlier output or an
    # intermediate subclass root changed in place since (Note [Output Regeneration])
    source_meta: Meta | None = None
    # before_epilogue: when the program made the output (its last view or in-place view op, the run's sequence
    # number): early replays run in this order, so that one's in-place view op advances a version counter after
    # another's multi-output view was taken, as in eager. After the epilogue: when the program
    # made the output (or, then_set, set_() it), its build order where an output repeats a set_() (Note [Views
    # That Raise After A Bump])
    made: int = 0
    # before_epilogue: how many of the last steps are taken after the epilogue instead, from what the early steps
    # made (Note [Views That Raise After A Bump])
    late_steps: int = 0
    # before_epilogue: made with the input's version counter advanced by this many (eager's bumps of it; 0: not), the
    # count the runtime gives the input back after the epilogue: eager's made its view after the program's last write
    # to the input, and it reads fine (Note [Views That Raise After A Bump])
    counter_at_end: int = 0
    # before_epilogue: eager's grad_fn of the view raises at the end (made under no_grad, or by a multi-output op, of
    # an input requiring grad whose counter the program moved after, by a write or an in-place view op on any view of
    # it): the epilogue may settle the input's counter past the count the view was made at, which makes ours raise
    # too; a view that reads its grad_fn keeps a subclass input's count (EpiloguePlan.viewed_wrappers; Note [Views
    # That Raise After A Bump])
    eager_raises: bool = False
    # INPUT, rebuilt after the epilogue: when the program took the chain's first view made by a multi-output view op
    # with grad enabled (the run's sequence number; 0: none). See Note [Views That Raise After A Bump].
    split_made: int = 0
    # the program set_() the output's wrapper after making it as this view: the view then takes the output's
    # dense leaves by a wrapper-level set_ (Note [Wrapper Storage])
    then_set: bool = False
    # then_set is the runtime's own, not the program's (Note [Output Regeneration]): the view keeps its
    # source's version counter and wrapper storage
    runtime_set: bool = False
    # the program's was `.data =` on a plain view (it stays a view of its base): repeated as `.data =`
    set_by_data: bool = False
    # INPUT: eager's view is stale at the end (its counter moved since autograd last set its history), so its grad_fn
    # regenerates from its base at its next read with grad (set_by_data: over the assigned metadata; Note [History
    # Kept Through .data =]; a view without history: once the base requires grad, Note [Views That Raise After A
    # Bump]): replayed at the input's counter at entry. Not INPUT (with bump_after): eager's view, with no history, of
    # a tensor the program wrote after taking it is stale: bumped as soon as it is built, outputs built in program
    # order (Note [Views That Raise After A Bump])
    stale_view: bool = False
    # not INPUT_ROOT, nor before_epilogue: eager's grad_fn raises (the program wrote the intermediate after taking this no_grad or
    # multi-output view of it), or eager's view has no history and is stale (the program wrote the intermediate after
    # taking it): the runtime advances the view's version counter after the replay (Note [Views That Raise After A
    # Bump])
    bump_after: bool = False
    # OUTPUT, bump_after: the input (flat value index) at the root of the outputs it is replayed from, whose version
    # counter every view of the chain shares: replayed at the input's counter at entry, then given it back, instead of
    # advanced, so that the input keeps eager's count (Note [Views That Raise After A Bump])
    root_input: int | None = None
    # INPUT, after the epilogue: the program made the view before its last write to the input; where the input's
    # grad_fn raises by then, the view is replayed with the input's counter at entry (Note [Views That Raise
    # After A Bump])
    entry_counter: bool = False
    # (steps applied, token) per eager object the chain makes that other chains may pass through, steps ascending;
    # the token is the object's id() at analysis, opaque (Note [Output Regeneration])
    marks: tuple[tuple[int, int], ...] = ()
    # in-place view ops the program applied to the output's eager `._base`, an object its chain makes, after the
    # chain viewed it: applied to the replayed `._base` once every output is built (Note [Output
    # Regeneration])
    base_after: tuple[ViewStep, ...] = ()
    # WRAPPER: the metadata a `.data =` after the chain's first view left on eager's root (its `._base`), given to the
    # rebuilt root once every output is built (Note [Wrapper Storage])
    root_data_meta: Meta | None = None
    # INPUT, after the epilogue: its steps advance the input's version counter (in-place view ops), which the epilogue
    # set to eager's count, these ops included: a replayed view that needs no grad gives the input that count back
    # (runtime/steps.py: Version Counters As Eager's)
    keeps_counter: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class GradSetBase:
    """Eager's `._base` of an output view set_() under grad (Note [set_ Under Grad])."""

    # where the base's dense leaves are: intermediate bases (BASE for a plain base, WRAPPER for a subclass); None:
    # on the output's own storage (views taken after the base was set_())
    source: Replay | None
    meta: Meta | None  # the base's size, stride, offset on that storage; None: the WRAPPER root as it is
    # the source is eager's base object itself, which other outputs may view too: the holder is a view of it
    same_object: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionSlot:
    """Where eager's output, a view the program's custom autograd.Function returned, sits among that Function's
    outputs: its grad_fn's error after a write to its base numbers it so (Note [Custom Functions])."""

    call: int  # which apply of the program's Functions (numbered in output order): its outputs share one node
    index: int  # its output number among that apply's outputs
    count: int  # how many outputs that apply returned (non-tensors included)
    multi: bool  # creation meta MULTI_OUTPUT_NODE (the apply returned several differentiable outputs)
    # the program wrote its base after the apply, so that eager's grad_fn raises: its counter is advanced once built
    bumped: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputInfo:
    path: str  # "out", "out[0]", "out['loss']"
    kind: OutputKind
    constant: object  # CONSTANT: the value; otherwise None
    input_index: InputIndex | None  # IS_INPUT: which input
    tree: SubclassNode | None  # TENSOR subclass: how to rebuild it (ctx and outer size from tracing)
    outer_meta: Meta | None  # TENSOR subclass: outer size, stride, offset
    leaves: tuple[OutputLeaf, ...]  # TENSOR: one per dense leaf
    replay: Replay | None  # TENSOR aliasing an input or intermediate: the view chain to replay, when exact
    # TENSOR in training: a subclass view of an intermediate no other output aliases, computed by the graph and
    # returned as a view of that fresh value (Note [Output Regeneration])
    view_of_fresh: bool = False
    # TENSOR subclass computed by the graph: the position in `leaves` of a fresh leaf whose size and stride the wrapper
    # had while tracing; its strides are that leaf's at run time (Note [Strides The Kernels Choose])
    outer_stride_leaf: int | None = None
    # TENSOR in training: the program set_() it with grad on; rebuilt by such a set_() of a fresh tensor
    # (Note [set_ Under Grad])
    set_under_grad: bool = False
    # ... and it was a view (of an intermediate) when set_(): the fresh tensor is a view of a fresh base
    set_under_grad_view: bool = False
    # ... where eager's output is a view: that fresh base is eager's `._base` (Note [set_ Under Grad])
    grad_set_base: GradSetBase | None = None
    # ... the inputs eager's raising node of it stands in front of: the holder's history reaches them too (Note
    # [set_ Under Grad]); any length, ascending input indexes
    set_blocks: tuple[InputIndex, ...] = ()
    # TENSOR subclass whose own size/stride/offset a `.data =` set apart from its inner tensors': those eager left on
    # the wrapper, given to it after it is built (Note [Wrapper Storage])
    data_meta: Meta | None = None
    # ... where their strides are the real ones of this graph stride probe (Note [Strides The Kernels Choose])
    data_stride_probe: int | None = None
    # ... and, computed by the graph in training, the size its autograd history recorded before a `.data =` gave it
    # another: the Function returns it with that size (Note [Wrapper Storage])
    history_size: tuple[Dim, ...] | None = None
    # TENSOR replayed through a detach(): eager's `._base` (that detach, written since with a value that requires grad
    # in training, or made to require grad in a call under no_grad) requires grad, and the replayed one is made to (Note
    # [Views That Raise After A Bump])
    base_gains_grad: bool = False
    # TENSOR in inference: it requires grad in eager as the program made it (requires_grad_() on it, or on the tensor
    # it is a view of, under no_grad), and is made to once built (Note [Grad Mode And Autograd Reads]); so is a new
    # leaf the caller sees by its flag alone, in any call (Note [Training Without A Function])
    gains_grad: bool = False
    # ... that new leaf's flag given once every output is built: the outputs replayed from it are views eager's
    # program made of it as the program without that flag makes them (the other outputs show the same autograd state
    # either way: Note [Training Without A Function]); with base_gains_grad, the flag its `._base` is given
    gains_grad_last: bool = False
    # TENSOR, a view with history that the program gave requires_grad_() all the same: eager keeps the flag, which no read
    # shows until its grad_fn is rebuilt as None (a view remade by its view function over a base that requires no
    # grad); the runtime gives it once built (runtime.plan.last_gains: the same for inputs)
    flag_kept: bool = False
    # TENSOR: eager's is an inference tensor (computed inside a torch.inference_mode() block, or a view of one), and
    # these of its dense leaves are (a plain tensor: (0,); of a subclass, those over storage made inside the block: a
    # view's leaves, an input's offsets, are not; a wrapper made after the block may have some while it is none);
    # the runtime makes them so (Note [Grad Mode And Autograd Reads])
    inference: bool = False
    inference_leaves: tuple[int, ...] = ()
    # TENSOR: eager's version counter, where it is not what the rest makes: an inference tensor with one (a detach()
    # of one taken after the block: writable outside it), or a normal tensor without one (`.data =` of a normal
    # tensor onto one made inside the block: writes raise) (Note [Grad Mode And Autograd Reads])
    inference_counter: bool = False
    counterless: bool = False
    # TENSOR: eager's is an autograd view with creation meta INFERENCE_MODE (taken inside an inference_mode block of a
    # normal tensor, or a view of one, after a `.data =` too), which the runtime gives the rebuilt view, whatever
    # steps rebuilt it (an as_strided() under no_grad): its grad_fn raises naming inference mode, as eager's (Note
    # [Grad Mode And Autograd Reads])
    inference_view: bool = False
    # TENSOR in training, from the graph with its history: its `.data` is then assigned from this leaf's alias, as
    # eager's program did (Note [History Kept Through .data =])
    data_from: OutputLeaf | None = None
    # TENSOR subclass in training that the program's own autograd.Function returned as an input or a view of it: the
    # wrapper-level view chain from that input, replayed on it inside the compiled Function's forward (Note [Custom
    # Functions])
    function_view: Replay | None = None
    # TENSOR, plain, in training: a view the program's own autograd.Function returned (OutputLeaf.function_view) whose
    # grad_fn is that Function's node: its place among that apply's outputs (Note [Custom Functions])
    function_slot: FunctionSlot | None = None
    # TENSOR: eager's is a Parameter the program made (`nn.Parameter(t)`), which the runtime makes the built output
    # (new_leaves.made_parameter, torch_internals.as_parameter)
    parameter: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageResize:
    """The program's `untyped_storage().resize_(n)` calls on the storage of one input's dense leaf (Note [Storage
    Swaps By Rebinding]): the runtime grows the real storage to `grow` bytes before the compiled call where it has
    fewer, and resizes it to `final` bytes after the epilogue and the outputs."""

    leaf: DenseIndex
    grow: int | sympy.Expr | None  # the first count above 0 (None: none)
    # the last count (None: a tensor's resize_() grew the storage after it, which the epilogue repeats)
    final: int | sympy.Expr | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Analysis:
    mutations: tuple[LeafMutation, ...]  # indexed by DenseIndex
    wrapper_meta_after: tuple[Meta | None, ...]  # per tensor input: a subclass's outer metadata at the end
    # per tensor input: how many times eager advances the wrapper's version counter (0 for a plain tensor)
    wrapper_version_bumps: tuple[int, ...]
    requires_grad_after: tuple[bool, ...]  # per tensor input: requires_grad when the program returns
    requires_grad_set: tuple[bool, ...]  # per tensor input: the program called requires_grad_() on it (a leaf)
    # per tensor input: the in-place view ops (t_, unsqueeze_, ...) the program applied to it, replayed on the real
    # input by the epilogue (exact for subclasses: their ctx and nested wrappers change as in eager); () if none
    inplace_replay: tuple[tuple[ViewStep, ...], ...]
    # per tensor input: the program applied an in-place view op (t_, unsqueeze_, ...) to it, even if they cancel out
    # a custom Function applied with grad mode on inside inference_mode marked a view dirty: its rebase of the view's
    # history there fails the fake mode's internal assert, so eager's saved tensors are probed on meta copies of the
    # inputs (Note [Probing Eager's Backward])
    marks_view_dirty_in_inference: bool = False
    inplace_view_ops: tuple[bool, ...] = ()
    # ... and each of them was a set_() of it onto itself that autograd does not record (grad mode off, or inside
    # inference_mode): it changes none of its values, storage or layout, only its version counter
    inplace_self_sets_only: tuple[bool, ...] = ()
    # per tensor input (subclasses), positions in the program's ops on subclass tensors: the first that wrote
    # through its own wrapper (or a view of it the program took), the last other than a view op that it (or such a
    # view) was passed to; whether the program wrote its inner tensors directly (x.a.mul_()). See Note [Aliased
    # Inputs In Training].
    wrapper_first_write: tuple[int | None, ...] = ()
    wrapper_last_use: tuple[int | None, ...] = ()
    dense_written: tuple[bool, ...] = ()
    # tensor positions of the inputs a custom Function of the program saved for backward, as themselves or through a
    # view of them (backward_probe's comment on saved values, where the probe could not run)
    function_taken: frozenset[int] = frozenset()
    # per tensor input: how the epilogue repeats the `.data =` assignments to a subclass input; None if none
    wrapper_data: tuple[DataAssignmentPlan | None, ...]
    outputs: tuple[OutputInfo, ...]  # indexed by OutputIndex
    output_spec: TreeSpec
    num_intermediate_bases: int
    stride_probes: tuple[StrideProbe, ...] = ()  # returned by the graph after its symbolic ints, in this order
    # which subclass inputs and outputs share one wrapper storage after the call; () unless the program called
    # set_() on a wrapper or assigned a wrapper's `.data` (Note [Wrapper Storage])
    wrapper_storage: tuple[WrapperStorageClass, ...] = ()
    # the inner wrappers of nested subclass inputs set_() at the wrapper level, and of outputs set_() (or views of such),
    # by the wrapper storage they share after the call (Note [Wrapper Storage])
    inner_wrapper_storage: tuple[InnerWrapperClass, ...] = ()
    # torch functions the program called with requires_grad=True, in call order
    # (See Note [Grad Mode And Autograd Reads])
    grad_factories: tuple[str, ...] = ()
    # the program's reads of autograd state, in call order (Note [Grad Mode And Autograd Reads])
    autograd_reads: tuple[object, ...] = ()
    # per custom autograd.Function apply, in call order: per output, the position among the apply's tensor arguments
    # of the one it is, else -1 (Note [Custom Functions])
    function_returns: tuple[tuple[int, ...], ...] = ()
    # per requires_grad_() call that turns the flag on, in call order: eager makes a new autograd leaf there (a tensor
    # that is no input, with grad on), which the graph marks (Note [Training Without A Function])
    new_leaves: tuple[bool, ...] = ()
    # the places among those of the leaves that are views eager's view ops gave the creation meta of one taken under
    # no_grad, which the graph's node gives them (Note [Training Without A Function])
    no_grad_leaf_views: tuple[int, ...] = ()
    # ... and of those that are views of an input requiring no grad then, whose node takes the leaf over the caller's
    # input (Note [Training Without A Function])
    input_base_leaf_views: tuple[int, ...] = ()
    # where the program makes new leaves: its calls that ran with grad off returning fresh plain tensors, by count of
    # calls, whose results the graph detaches (new_leaves.note_no_history_results)
    no_history_calls: tuple[int, ...] = ()
    # the places among those of the leaves eager makes inside a torch.inference_mode() block: inference tensors
    # requiring grad, leaves that results computed from them after the block with grad on have history to
    inference_new_leaves: tuple[int, ...] = ()
    # per tensor input: one of those calls was on this input, a plain leaf that requires no grad, after
    # an op with grad on read it; the graph's run makes the caller's input require grad there (Note [Training Without
    # A Function])
    leaf_marked: tuple[bool, ...] = ()
    # per tensor input: one of those calls was on this input, a plain tensor that requires no grad, after an op with
    # grad on read its storage, and nothing of the program takes that storage after: the runtime sets the flag once
    # the call is done (Note [Grad Mode And Autograd Reads])
    gains_last: tuple[bool, ...] = ()
    # per tensor input: a plain input over storage other inputs share, none requiring grad as passed, that the
    # program makes require grad as a leaf of its own after a read with grad, its group unwritten: its stand-in is a
    # detached leaf over the group's storage, no part of the group's autograd root (pipeline.functional_run.
    # own_leaf_inputs: the first analysis finds them, every later one is given them); () where none
    own_leaf_inputs: tuple[bool, ...] = ()
    # per tensor input: the program turned its requires_grad off at some point (requires_grad_(False), `.requires_grad
    # = False`), even if it turned it on again after
    requires_grad_dropped: tuple[bool, ...] = ()
    # per tensor input: the program made it require grad before any of its ops changed its storage (an in-place view
    # op, set_(), a resize, `.data =` on a tensor over it, or a write autograd may record: grad mode on and a tensor
    # among the op's arguments requiring grad), and never turned that off: the run that requires grad from the start
    # changes it where eager's does, after the flag (Note [Inputs Written In Training])
    gained_before_changes: tuple[bool, ...] = ()
    # the program's `._base` / `._is_view()` reads of inputs: (tensor position, what the guards check) (Note [Grad
    # Mode And Autograd Reads])
    base_reads: tuple[tuple[int, int | None], ...] = ()
    # tensor positions of the inputs whose autograd creation meta the analysis read off the real input (Note
    # [What The Guards Compare])
    creation_meta_reads: tuple[int, ...] = ()
    # tensor positions of the inputs, no leaves, whose grad_fn the program read (Note [What The Guards Compare])
    grad_fn_type_reads: tuple[int, ...] = ()
    # tensor positions of the view inputs whose `._base`'s requires_grad the analysis decided on (Note [Views That
    # Raise After A Bump])
    base_flag_reads: tuple[int, ...] = ()
    # tensor positions of the view inputs the analysis read as views without history of a base it made require grad,
    # their counters unmoved (Note [Grad Mode And Autograd Reads])
    unbumped_view_reads: tuple[int, ...] = ()
    # (tensor position, eager's count of bumps then) of the view inputs with history whose history eager rebuilt from
    # their base before any op with grad read them, their counter moved by no op that records a node (Note [Views
    # That Raise After A Bump]; autograd_state.rebuilt_before_read)
    rebuilt_before_read: tuple[tuple[int, int], ...] = ()
    # torch functions that ran with grad mode turned back on (torch.enable_grad()) in a run begun under no_grad, on
    # tensors that require grad (Note [Grad Mode And Autograd Reads])
    grad_reenabled: tuple[str, ...] = ()
    # per dense leaf: the program read a view of its synthetic base whose history autograd rebuilt from a view
    # function that misses an in-place view op (Note [Stale View Functions]); () outside alias groups
    stale_view_reads: tuple[bool, ...] = ()
    # paths of plain view inputs that require grad, read with grad after the program set_() them under no_grad to
    # another storage or layout (Note [Stale View Functions]): refused after the other training checks
    views_read_after_own_set: tuple[str, ...] = ()
    # per tensor input (plain): an op with grad read it after a set_() under no_grad gave it another storage or layout
    # (Note [Aliased Inputs In Training]); () where not computed
    read_after_nograd_set: tuple[bool, ...] = ()
    # per tensor input with in-place view ops (subclasses): how many ran before the program's last write of its data,
    # None if unknown (Note [Stale View Functions]); () where not computed
    write_steps: tuple[int | None, ...] = ()
    # per tensor input: when the program last advanced its version counter (the run's sequence number; 0: never)
    last_bumps: tuple[int, ...] = ()
    # per tensor input (subclasses): an op with grad enabled read its wrapper (or a view of it taken after) after the
    # program set_() the wrapper (Note [Inputs Written In Training])
    read_after_set: tuple[bool, ...] = ()
    # per tensor input (subclasses): the same after an in-place view op under no_grad gave the wrapper another size
    # (Note [Leaves Laid Out Anew Under no_grad])
    read_after_hidden_resize: tuple[bool, ...] = ()
    # per tensor input: the program called x.set_(x) on it under no_grad (Note [Gradient Accumulators Of Leaves])
    self_set: tuple[bool, ...] = ()
    # ... read with grad only after its last x.set_(x): renewed before the compiled call; both before its last and
    # after its first: mixed (Note [Gradient Accumulators Of Leaves])
    self_set_first: tuple[bool, ...] = ()
    self_set_mixed: tuple[bool, ...] = ()
    # per tensor input: set_() while it required grad inside inference_mode only, never under no_grad outside it:
    # eager keeps its gradient accumulator, and so does the epilogue's set_() (Note [Gradient Accumulators Of Leaves])
    set_inside_inference: tuple[bool, ...] = ()
    # per tensor input: set_() under grad, then read with grad, not apart before, and returned; or a view set_() under
    # grad before every node of the program a backward reaches: its set_ repeated before the call (Note [set_ Under
    # Grad])
    read_after_grad_set: tuple[bool, ...] = ()
    # per tensor input set_() under grad to a tensor that is no input: the inputs (flat indices) whose history its
    # set_ node reaches, which eager's backward then never gets to (Note [set_ Under Grad])
    input_set_blocks: tuple[tuple[InputIndex, ...], ...] = ()
    # per tensor input written with grad after a `.data =` whose node raises in eager's backward (AssignedWrite.
    # AFTER_RAISING): the other inputs (flat indices) whose history that write's history reaches, which eager's
    # backward then never gets to (Note [History Kept Through .data =])
    raising_write_blocks: tuple[tuple[InputIndex, ...], ...] = ()
    # per tensor input: a leaf whose gradient accumulator a `.data =` kept (Note [Gradient Accumulators Of Leaves]),
    # or an in-place view op under no_grad (Note [Leaves Laid Out Anew Under no_grad])
    kept_accumulators: tuple[bool, ...] = ()
    # per tensor input: a subclass leaf's size when eager made its gradient accumulator, after a `.data =` (None:
    # no such read; Note [Gradient Accumulators Of Leaves])
    accumulator_sizes: tuple[tuple[int | sympy.Expr, ...] | None, ...] = ()
    # per tensor input: a leaf's size when eager made its gradient accumulator, after an in-place view op under
    # no_grad (None: no such read; Note [Leaves Laid Out Anew Under no_grad])
    releaf_sizes: tuple[tuple[int | sympy.Expr, ...] | None, ...] = ()
    # per tensor input: after its last in-place view op, an op with grad read it (or a view of it), or the program
    # returns it or such a view (Note [Aliased Inputs In Training]); () where not computed
    seen_after_layout_ops: tuple[bool, ...] = ()
    # some tensor the program returns requires grad (Note [Aliased Inputs In Training])
    grad_outputs: bool = True
    # the run traced a group member with views of it among the others as its group's base (Note [Aliased Inputs In
    # Training]); the joint trace does the same
    own_base_views: bool = False
    # the program assigned some tensor's `.data` (Note [Probing Eager's Backward])
    data_assigned: bool = False
    # an in-place view op with grad changed a view that requires grad: fakes rebuild its history by replaying its
    # view ops, eager by as_strided() (Note [Probing Eager's Backward])
    views_relaid_with_grad: bool = False
    # the program set_() under grad a tensor other than an input, then read it with grad (Note [set_ Under
    # Grad])
    grad_set_intermediate_read: bool = False
    # the program's storage resize_ of inputs' storages (Note [Storage Swaps By Rebinding])
    storage_resizes: tuple[StorageResize, ...] = ()
    # (output index, eager's count) for each tensor output whose version counter is no input's, where eager's count
    # is not 0: the runtime gives it that count once the outputs are built (runtime/steps.py: Version Counters As Eager's)
    output_versions: tuple[tuple[int, int], ...] = ()
    # the same for fresh outputs that require grad from a node of the graph: the training Function gives them their
    # counts in its forward, before it saves them (runtime/steps.py: Version Counters As Eager's)
    graded_output_versions: tuple[tuple[int, int], ...] = ()
    # (intermediate base number, eager's count, requires grad from a node of the graph) for each base whose views are
    # the only outputs on its counter: given before they are replayed, in the training Function where it requires grad
    # (runtime/steps.py: Version Counters As Eager's)
    base_versions: tuple[tuple[int, int, bool], ...] = ()
    # the same for intermediate subclass roots (Replay.root_bases) whose views are the only outputs on their counter
    root_versions: tuple[tuple[tuple[int, ...], int, bool], ...] = ()
    # (output index, flat input index) for each tensor output built from dense leaves (no replay) whose counter in
    # eager is that input's (a detach() of it): the runtime gives it the input's count as built (runtime/steps.py:
    # Version Counters As Eager's)
    output_input_counters: tuple[tuple[int, int], ...] = ()
    # what the backward trace's forward example reads of each output, from this run where it is that example's run
    # (Note [Training Through A Joint Graph], bullet "Tangents"); None where not recorded
    tangent_examples: TangentExamples | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TangentExample:
    """One tensor's answers to what shapes its tangent (Note [Training Through A Joint Graph], bullet "Tangents")."""

    grad: bool  # floating point, requires grad through a node of the program, and that node reads
    size: tuple[int, ...]  # of its value under functionalization (the dense value the tangent is laid out like)
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device


@dataclass(frozen=True, slots=True, kw_only=True)
class TangentExamples:
    # per output leaf (Analysis.outputs order): a plain tensor's example, else None
    outputs: tuple[TangentExample | None, ...]
    # per DenseIndex: the final value's example where the program wrote that leaf, else None
    finals: tuple[TangentExample | None, ...]
    # per DenseIndex: the original's (the input as it came, through its writes: an ORIGINAL update's value) where the
    # program wrote that leaf and left its layout, else None
    originals: tuple[TangentExample | None, ...]


# ----------------------------------------------------------------------------- graph outputs


class UpdateKind(enum.Enum):
    """Which value of a mutated input a graph output holds (See Note [Input Updates])."""

    ORIGINAL = "original"
    FINAL = "final"
    BASE = "base"


@dataclass(frozen=True, slots=True, kw_only=True)
class InputUpdate:
    kind: UpdateKind
    target: int  # ORIGINAL/FINAL: a DenseIndex; BASE: a GraphInputIndex


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphOutputs:
    updates: tuple[InputUpdate, ...]  # graph outputs [0, len(updates))
    num_fresh: int  # then this many fresh tensor leaves of user outputs (OutputLeaf.index order)
    num_bases: int  # then the intermediate bases (OutputLeaf.index of INTERMEDIATE_ALIAS leaves)
    num_symints: int  # then the symbolic ints returned by the user, in output order
