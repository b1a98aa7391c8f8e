"""Outputs with history a custom Function or a detach() gives them: outputs a Function returned as (a view of) its
input, inputs it marked dirty, and detach()es of inputs later written with a value that requires grad. Each part
below keeps its own contract.

Stage `analyze`, training: outputs that a custom autograd.Function returned as its input, or as a view of it,
and inputs that one wrote and marked dirty.

Input: the output's value in the functional run, its path, the run's records, the user inputs by id().
Output: for a tensor subclass output, the `Replay` (source INPUT) that the compiled autograd.Function applies to the
real input inside its forward; otherwise nothing, or an UnsupportedError naming the output or input and the rule
(Note [Custom Functions]).
Invariants: pure reads of the run's records.

Part: Outputs that are a detach() of an input the program then wrote with a value that requires grad: computed by the
graph (with the compiled Function's history), then put on the input's storage.

Input (analysis): one output of the functional run, its dense leaves, the storage maps of `_analyze_outputs`.
Output: the output's leaves as GRAPH leaves naming the input each is set_() onto (`OutputLeaf.onto_input`), or None
where the rule does not apply; at run time, runtime/steps.py's `set_onto_inputs` moves them. Invariants:
only with grad enabled; the values the graph computes are those the epilogue writes into the input, so moving a
leaf changes no value.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun, dense_leaves_of
from subclassaot.pipeline.rules.autograd_state import is_program_function
from subclassaot.pipeline.rules.chain_facts import dispatch_view_root
from subclassaot.pipeline.rules.view_chains import view_step
from subclassaot.schemas import (
    DenseIndex,
    DenseLayout,
    FlatInputs,
    FunctionSlot,
    InputIndex,
    LeafSource,
    Meta,
    OutputInfo,
    OutputKind,
    OutputLeaf,
    Replay,
    ReplaySource,
    ViewStep,
)
from subclassaot.torch_internals import (
    creation_meta_of,
    custom_function_of,
    grad_fn_before_bump,
    grad_fn_raises,
    is_custom_function_view,
    is_multi_output_view,
    is_nested_int,
    nested_coeff,
    no_torch_function,
    node_function_class,
    storage_key,
)

# Note [Custom Functions]
# Eager: a custom autograd.Function whose forward returns its input `x` (autograd then returns `x.view_as(x)`, made with
# grad off) or a view of it (`x.view(-1)`, `x[0]`) gives an output that is an autograd view of `x` (its `._base` is x,
# or x's own base; it shares x's version counter) with the Function's history. The compiled output must get its history
# from the compiled autograd.Function, whose backward holds the program's, so that Function returns it from its forward,
# where autograd makes it a view of the input with that history:
# - a plain tensor: the dense input itself, or its as_strided (autograd_runtime._passthrough); an inner tensor of a
#   subclass input is no input of the compiled Function, so the Function returns a view_as of it, as DTensor.to_local's
#   Function does; where eager's is a view of an alias the subclass's dispatch made of that inner tensor (a DTensor's
#   tensor_split() piece), of such an alias made at run time (`passthrough_base`); a view the program's Function made
#   of an intermediate (`OutputLeaf.function_view`) is returned as an as_strided of the graph's intermediate base, which
#   eager's `._base` is (`function_view_base`: `(x * 2).view(-1)`, DTensor's `to_local()[0]` of a computed DTensor),
#   else as a view_as of the graph's output; a multi-output Function's views (creation meta MULTI_OUTPUT_NODE) alike,
#   so outputs viewing one such base share it; so does a view the program takes of one (its creation meta carried
#   on: made_as_function_view). An alias base two outputs view is refused (each output would get an alias of its
#   own). Once their base is written, reading such a view's grad_fn raises naming its output number among the
#   outputs of its node (the apply's; a view taken of one: its view op's) and its creation meta (one differentiable
#   output: IN_CUSTOM_FUNCTION, several: MULTI_OUTPUT_NODE); the compiled Function's outputs number otherwise, so the
#   outputs of each such node (`OutputInfo.function_slot`) go through the runtime's FunctionOutputs, which returns
#   them at eager's output numbers (placeholders elsewhere) and passes their gradients through;
# - a tensor subclass: the wrapper-level view chain from the input as the program received it to the output, replayed on
#   the real input inside the forward with grad off, as eager's Function forward ran, so the subclass's own view ops
#   build the inner tensors as eager's did. One made of a tensor the forward computed (`y = x * 2; return
#   y.unsqueeze(0)`) has no input to replay from and comes out rebuilt, no view: refused (check_rebuilt_view_relation).
# A wrapper the Function builds around a view of an input (`DTensor.from_local(x, ...)`: no view itself) has the
# Function's history in eager; rebuilt with `__tensor_unflatten__` around the input's storage it would be a leaf that
# no gradient passes, so it is refused (check_rebuilt_over_input).
# The forward runs before the epilogue writes the inputs, and a Function output whose base is then written has a grad_fn
# that raises, so either form is exact only where the program never writes, set_()s or changes the metadata of that
# input (or any tensor over its storages), and no tensor of the chain had an in-place view op; refused otherwise, and so
# are views of an input or subclass views whose base the program wrote after the Function returned them, and views of
# an intermediate whose storage an input ends on (`x.data = t0`, set_(): eager's output shares that input's storage;
# check_rebuilt_view_relation). A plain view of a tensor the forward made, whose base the program wrote after (its
# grad_fn raises, naming its output number and creation meta), goes through FunctionOutputs as above, over an alias
# of that base requiring grad where the graph gives it no tangent (one alias per base, shared as eager's `._base`),
# and its counter is advanced once built (FunctionSlot.bumped); refused where another output views that base
# without being such a view (its `._base` would not be the alias).
# Inputs marked dirty: where the apply records a node (grad mode on, an input requiring grad), ctx.mark_dirty(x) gives
# eager's `x` the Function's node as its grad_fn (a view marked: its base holds it in a CopySlices); the forward's
# write, run with grad off, is then one autograd records, so the analysis counts it so, and the epilogue copies x's new
# value in with grad from the compiled Function's update, whose backward holds the program's Function's. Only on x's own
# history: where x is a detach() or `.data` alias (or a view of one; an input passed as the grad-free alias of another
# is one), the tensor it was taken from keeps its history, as under a write with grad through x. An apply recording no
# node leaves x's history. Either way the mark advances x's counter. A training compile traces its inference graph under
# no_grad, where the apply returns an input that requires grad detached, not the input it marked dirty: that run takes
# which outputs are the very inputs from the analysis run's applies, in call order (Analysis.function_returns), so the
# program's later in-place view ops and set_() through the result change the input, as eager's do. Refused: a mark with
# no write (no new value to carry the history), and a subclass input written so that shares its wrapper-level version
# counter with another input requiring grad: eager rebuilds that input's history from x's; the compiled call leaves it
# the one it came with. The caller holds every input, so this is refused whether or not the program returns it. So is a
# subclass input marked whose inner tensors share storage with another input's: that storage is traced as a synthetic
# base written below autograd, which the wrapper's rebased history does not reach (the same object passed twice is one
# input instead). So is a view marked by an apply recording a node inside an inference_mode block: the functionalized
# run cannot rebase its base there (functional_run._refuse_run_error).
# Metadata changed by a custom backward (`x.t_()` on ctx.saved_tensors): eager's caller sees its tensor's new size and
# strides after backward() and its counter moved. The runtime replays the traced change on the real input when the
# compiled backward runs (as_strided_() at the input's offset, under no_grad, counter set to eager's). Only for a plain
# tensor whose traced metadata before the backward are the input's as passed, static sizes, and an unchanged offset;
# AccumulateGrad then raises for a leaf as eager's does (not where the leaf is in an alias group and a dim has size 0
# or 1: its gradient comes through the synthetic base in its own strides, which decide there). Others stay refused.
# A backward that only writes a saved input's values (or whose in-place op changes no metadata) bumps its counter as
# eager's, at any sizes. Eager runs a Function's node only where an output given a gradient reaches it (not through a
# view taken under no_grad, whose gradient stops there): the joint trace notes which node made each change and the
# outputs reaching it (BackwardReshape.reached_by), and the runtime makes a change only where one of those got a
# tangent; where some of the nodes changing one input run and others do not, that backward is refused.


def function_view_replay(
    path: str, value: torch.Tensor, run: FunctionalRun, input_by_id: dict[int, InputIndex]
) -> Replay:
    """The chain that makes `value` (a subclass output with the history of the program's own autograd.Function,
    over an input's storage) from that input; refused where replaying it inside the compiled Function is not exact."""
    steps: list[ViewStep] = []
    t = value
    while id(t) not in input_by_id:
        record = run.swaps.views.get(id(t))
        step = None if record is None or record.func is torch.ops.aten.detach.default else view_step(record)
        if record is None or step is None or _changed(t, run):
            raise _refusal(path, "its wrapper-level view chain from that input cannot be replayed")
        steps.append(step)
        t = record.source
    if not is_traceable_subclass(t) or written_or_changed(t, run):
        raise _refusal(path, "the program also writes, set_()s or changes the metadata of that input")
    return Replay(source=ReplaySource.INPUT, index=input_by_id[id(t)], steps=tuple(reversed(steps)))


def function_slots(infos: Sequence[OutputInfo], leaves: Sequence[object]) -> list[OutputInfo]:
    """`infos` with `function_slot` set on each plain output that is a view the program's Function returned, its
    grad_fn that Function's node (Note [Custom Functions])."""
    calls: dict[int, tuple[int, object]] = {}  # id() of a node -> its number, the node (held: ids stay its own)
    out = list(infos)
    for k, (info, value) in enumerate(zip(infos, leaves, strict=True)):
        if info.kind is not OutputKind.TENSOR or info.tree is not None or not isinstance(value, torch.Tensor):
            continue
        if len(info.leaves) != 1 or not info.leaves[0].function_view or not value.requires_grad:
            continue
        # (of a view taken of such a view: its own view op's node; of one whose base the program wrote since, the
        # node it was made with, its counter advanced once built: FunctionSlot.bumped)
        written = grad_fn_raises(value)
        node = grad_fn_before_bump(value) if written else value.grad_fn
        cls = _function_of(value)
        if cls is not None and not is_program_function(cls) and written:
            raise UnsupportedError(
                f"{info.path}: its grad_fn raises in eager (a view a custom autograd.Function that is no Function of "
                "the program's returned, whose base the program then wrote), which the compiled output cannot "
                "reproduce (Note [Custom Functions]). Return a clone made before the write"
            )
        if (cls is not None and not is_program_function(cls)) or node is None:
            continue  # (no node: the program's requires_grad_() on a view its apply under no_grad returned)
        slot = FunctionSlot(
            call=calls.setdefault(id(node), (len(calls), node))[0],
            index=value.output_nr,
            count=len(node._input_metadata),  # (one entry per output of its forward)
            multi=creation_meta_of(value) == torch._C._autograd.CreationMeta.MULTI_OUTPUT_NODE,
            bumped=written,
        )
        out[k] = replace(info, function_slot=slot)
    _check_written_bases(out, leaves)
    return out


def _check_written_bases(infos: Sequence[OutputInfo], leaves: Sequence[object]) -> None:
    """Refuse an output whose base another output rebuilt through FunctionOutputs and bumped (FunctionSlot.bumped)
    views too, but is no such view itself: the bumped ones are rebuilt over a base of their own (runtime
    `_with_grad`), which eager's outputs share."""
    bumped = {
        storage_key(value)
        for info, value in zip(infos, leaves, strict=True)
        if info.function_slot is not None and info.function_slot.bumped and isinstance(value, torch.Tensor)
    }
    for info, value in zip(infos, leaves, strict=True):
        slot = info.function_slot
        if info.kind is not OutputKind.TENSOR or not isinstance(value, torch.Tensor) or not value._is_view():
            continue  # (an output returned again, SAME_AS, is the very object built)
        if storage_key(value) not in bumped:
            continue
        if slot is None or not slot.bumped:
            raise UnsupportedError(
                f"{info.path} is a view of a tensor a custom autograd.Function made, which another output views as "
                "one the Function returned, whose grad_fn raises in eager since the program wrote that tensor; the "
                "compiled call rebuilds such outputs over a base of their own, which this view would not share as "
                "eager's does (Note [Custom Functions]). Return a clone"
            )


def made_as_function_view(leaf: torch.Tensor, run: FunctionalRun) -> bool:
    """Is plain `leaf` a view the program's custom Function returned, or a view the program took of one (one of several
    views that apply returned: its creation meta MULTI_OUTPUT_NODE carried on)? Note [Custom Functions]. A view made
    in the forward of one of the pipeline's own Functions (a stand-in the analysis run reads in a tensor's place) has
    creation meta IN_CUSTOM_FUNCTION too, where eager's has none: the Function nearest up the chain names the maker."""
    direct = _is_function_view(leaf)
    if not direct and (not is_multi_output_view(leaf) or _function_of(leaf) is not None):
        return False
    t, pipeline = leaf, False
    while True:
        cls = _function_of(t)
        if cls is not None and is_program_function(cls):
            return direct or _is_function_view(t)
        pipeline = pipeline or cls is not None
        if (record := run.swaps.views.get(id(t))) is None:
            return direct and not pipeline
        t = record.source


def _function_of(t: torch.Tensor) -> type | None:
    """`custom_function_of`, also for a view whose grad_fn raises since the program wrote its base: its node as
    made (Note [Custom Functions])."""
    return node_function_class(grad_fn_before_bump(t)) or custom_function_of(t)


def _is_function_view(t: torch.Tensor) -> bool:
    """`is_custom_function_view`, also for a multi-output view whose grad_fn raises since its base was written."""
    return is_custom_function_view(t) or (is_multi_output_view(t) and _function_of(t) is not None)


def holds_input_leaves(path: str, value: torch.Tensor, run: FunctionalRun) -> bool:
    """Does wrapper `value` (made by an op, not a view) hold inner tensors of an input: its very leaves, or aliases of
    them that the subclass's own dispatch made with view ops (torchao's Float8 detach() detaches its `_scale` too), and
    nothing else over an input's storage (an inner tensor set_() onto the input keeps the history its set_() gave it:
    Note [set_ Under Grad])? Only the compiled Function can give such a wrapper its history (Note [Training Through A
    Joint Graph])."""
    inputs = {storage_key(t): t for t in run.finals}
    held = False
    for leaf in dense_leaves_of(value, path)[1]:
        own = inputs.get(storage_key(leaf))
        if own is None:
            continue
        if own is not leaf and dispatch_view_root(leaf, run) is not own:
            return False
        held = True
    return held


def dispatch_alias_base(path: str, leaf: torch.Tensor, final: torch.Tensor, run: FunctionalRun) -> Meta | None:
    """The metadata of eager's `._base` of `leaf`, a view over input leaf `final`'s storage, where that base is an
    alias a subclass's dispatch made of `final` (no view, with a counter of its own: a DTensor's tensor_split()
    piece's inner tensor); else None. Refused where another output sees that alias too (Note [Custom Functions])."""
    base = leaf._base
    if base is None or base is final or base._is_view() or dispatch_view_root(base, run) is not final:
        return None
    for other in pytree.tree_leaves(run.output):
        if isinstance(other, torch.Tensor) and other is not leaf and (other is base or other._base is base):
            raise UnsupportedError(
                f"{path} is a view a custom autograd.Function returned of an alias a tensor subclass's dispatch made "
                "of an input's inner tensor (a DTensor's tensor_split() piece's to_local()), and another output views "
                "that alias too: eager's outputs share that `._base`, which the compiled Function makes once per "
                "output (Note [Custom Functions]). Return one view of it, or clones"
            )
    return leaf_meta(base)


def check_function_input_unwritten(path: str, source: torch.Tensor, run: FunctionalRun) -> None:
    """Refuse a plain output the compiled Function returns as (a view of) input `source`, which the program
    writes (Note [Custom Functions])."""
    if written_or_changed(source, run):
        raise _refusal(path, "the program also writes, set_()s or changes the metadata of that input")


def check_written_function_view(
    path: str, value: torch.Tensor, leaves: Sequence[OutputLeaf], run: FunctionalRun
) -> None:
    """Refuse an output made by a custom autograd.Function as a view of its input, or as a tensor subclass view, whose
    base the program wrote since (Note [Custom Functions]); a plain one of a tensor the Function made is rebuilt
    through FunctionOutputs and its counter advanced (FunctionSlot.bumped)."""
    own = len(leaves) == 1 and leaves[0].function_view and leaves[0].passthrough is None
    if torch.is_grad_enabled() and is_custom_function_view(value) and grad_fn_raises(value) and not own:
        raise _refusal(path, "the program then writes its base, so that its grad_fn raises naming that Function")
    if is_traceable_subclass(value) and grad_fn_raises(value) and made_as_function_view(value, run):
        # (its view chain replayed from the rebuilt wrapper the Function made would not require grad as eager's does)
        raise UnsupportedError(
            f"{path}: its grad_fn raises in eager (a view a custom autograd.Function returned of a "
            f"{type(value).__name__} it made, whose base the program then wrote), which a tensor subclass output "
            "rebuilt from the graph cannot reproduce (Note [Custom Functions]). Return a clone made before the write"
        )


def check_dirty_inputs(flat: FlatInputs, layout: DenseLayout, run: FunctionalRun) -> None:
    """Refuse an input whose history a custom autograd.Function's ctx.mark_dirty rebased where the compiled call
    cannot rebuild it (Note [Custom Functions]): marked without a write, or a subclass input written so that shares
    its wrapper-level version counter with another input that requires grad."""
    families = layout.wrapper_families
    for p, (t, k) in enumerate(zip(run.user_tensors, flat.tensor_indices, strict=True)):
        cls = _dirty_function_of(t, run)
        if cls is None:
            continue
        path = flat.leaves[k].path
        leaves = dense_leaves_of(t, "input")[1] if is_traceable_subclass(t) else [t]
        # (moved since by set_() or `.data =`: the storage it ends on need not be the one written; other rules)
        written = any(storage_key(leaf) in run.swaps.moved_storages for leaf in leaves)
        if not written and id(t) not in run.swaps.swapped_ids:
            raise UnsupportedError(_unwritten_dirty_refusal(path, t, cls, run))
        # (another input that requires grad and shares t's wrapper-level version counter, a view of t or of t's
        # base: the caller holds it, returned or not, and eager rebuilds its history from t's; the compiled call
        # gives it the history it came with)
        sharing = [
            flat.leaves[flat.tensor_indices[q]].path
            for q, u in enumerate(run.user_tensors)
            if u is not t and u.requires_grad and families[p] >= 0 and families[q] == families[p]
        ]
        if sharing:
            raise UnsupportedError(
                f"{path}: a custom autograd.Function ({cls.__name__}) writes this input (or a view of it) in place "
                f"and marks it dirty (ctx.mark_dirty), and input {sharing[0]} shares its wrapper-level version counter (a "
                "view of it, or of its base): eager rebuilds that input's history from this one's, which takes the "
                "Function's backward, whether the program returns it or the caller differentiates through it later; the "
                "compiled program gives it the history it came with (Note [Custom Functions]). Return a new tensor "
                "from the Function's forward instead, or pass the Function only one of the two"
            )
        other = _group_partner(p, layout) if is_traceable_subclass(t) else None
        if other is not None:
            raise UnsupportedError(
                f"{path}: a custom autograd.Function ({cls.__name__}) writes this tensor subclass input (or a view "
                f"of it) in place and marks it dirty (ctx.mark_dirty), and its inner tensors share storage with input "
                f"{flat.leaves[flat.tensor_indices[other]].path}: the compiled program writes that shared storage "
                "below autograd, so the mark, which rebases the wrapper's history onto the Function's backward, gives "
                "that history no gradient (Note [Custom Functions]). Pass inputs that share no storage (a clone of "
                "one), or return a new tensor from the Function's forward"
            )


def _group_partner(p: int, layout: DenseLayout) -> int | None:
    """Another tensor input with a dense leaf in a traced alias group (Note [Synthetic Bases]) that holds one of
    tensor input `p`'s, if any."""
    owner = {m: q for q, leaves in enumerate(layout.leaves_of_input) for m in leaves}
    own = set(layout.leaves_of_input[p])
    for group in layout.groups:
        if own & set(group.members):
            others = [owner[m] for m in group.members if m in owner and owner[m] != p]
            if others:
                return others[0]
    return None


def _unwritten_dirty_refusal(path: str, t: torch.Tensor, cls: type, run: FunctionalRun) -> str:
    """check_dirty_inputs: `t` (or a view of it) marked dirty with no new value: unwritten, or written with no
    element (an empty write is traced as a version bump alone: storage_swaps._unrecorded_empty_write)."""
    marked = [t] if id(t) in run.swaps.marked_dirty else [v for v, _ in _dirty_views_of(t, run)]
    how = (
        "after an in-place write that reaches no element (the tensor marked has none: the trace records such a write "
        "as a version bump alone)"
        if any(v.numel() == 0 for v in marked)
        else "without writing it"
    )
    return (
        f"{path}: a custom autograd.Function ({cls.__name__}) marks this input (or a view of it) dirty "
        f"(ctx.mark_dirty) {how}, so that eager's input takes the Function's backward as its history (a backward "
        "run for it, an empty one's too); the compiled program has no new value of the input to give that history "
        "(Note [Custom Functions]). Mark dirty only the tensors the forward writes in place, or skip the Function "
        "for an empty tensor"
    )


def _dirty_function_of(t: torch.Tensor, run: FunctionalRun) -> type | None:
    """The custom Function of the program that marked `t` (or a view of it) dirty where its apply recorded a node
    (the pipeline's own, around input clones, aside)."""
    cls = run.swaps.marked_dirty.get(id(t))
    cls = cls if cls is not None else next((c for _, c in _dirty_views_of(t, run)), None)
    return cls if cls is not None and is_program_function(cls) else None


def _dirty_views_of(t: torch.Tensor, run: FunctionalRun) -> list[tuple[torch.Tensor, type]]:
    """The views of `t` a custom Function of the program marked dirty, with that Function."""
    found = []
    for i, cls in run.swaps.marked_dirty.items():
        v = run.swaps.pinned.get(i)
        if isinstance(v, torch.Tensor) and v is not t and run.swaps.view_root(v, through_swaps=True) is t:
            found.append((v, cls))
    return found


def written_or_changed(t: torch.Tensor, run: FunctionalRun) -> bool:
    """Did the program advance `t`'s version counter (a write that autograd sees, to `t` or to a tensor over its
    storages; for a subclass, one through a wrapper of its family), set_() it or change its metadata?"""
    k = next((k for k, u in enumerate(run.user_tensors) if u is t), None)
    if k is None or leaf_meta(t) != run.initial_metas[k] or _changed(t, run):
        return True
    if is_traceable_subclass(t):
        return run.swaps.bumps(t) or any(_changed(leaf, run) for leaf in dense_leaves_of(t, "input")[1])
    return storage_key(t) in run.swaps.last_bump or storage_key(t) in run.swaps.moved_storages  # (and unbumped)


def _changed(t: torch.Tensor, run: FunctionalRun) -> bool:
    swaps = run.swaps
    return any(id(t) in ids for ids in (swaps.inplace_views, swaps.swapped_ids, swaps.grown_ids, swaps.wrapper_data))


def _refusal(path: str, why: str) -> UnsupportedError:
    return UnsupportedError(
        f"{path}: a custom autograd.Function returned its input, or a view of it, with its own autograd history, and "
        f"{why}; the compiled output could not be eager's view of that input with the Function's history (Note "
        "[Custom Functions]). Return a clone from the Function's forward"
    )


def check_fresh_inner_grad(path: str, value: torch.Tensor) -> None:
    """A subclass output rebuilt from fresh graph leaves (Note [Output Regeneration]) gets inner tensors without
    autograd state; refused where eager's inner tensor requires grad (a view, taken under a custom Function's no_grad,
    of a tensor with history: `DTensor.from_local(x + 1, ...)`)."""
    for k, leaf in enumerate(dense_leaves_of(value, path)[1]):
        if leaf.requires_grad:
            raise UnsupportedError(
                f"{path}: its inner tensor {k} ({type(value).__name__}) requires grad in eager, a view of a tensor "
                "with autograd history (a custom autograd.Function built the wrapper around it); the compiled "
                "output's inner tensors, made by the compiled graph, cannot (Note [Output Regeneration]). Build it "
                "from a tensor without history (a detach()), or return its plain parts"
            )


def check_rebuilt_over_input(path: str, value: torch.Tensor, leaves: Sequence[OutputLeaf], replay: object) -> None:
    """A subclass output with autograd history whose inner tensors view an input, with no chain to replay (a wrapper
    a custom Function built around a view of the input: `DTensor.from_local(x, ...)`) is rebuilt with
    `__tensor_unflatten__`: a leaf wrapper, through which no gradient reaches the input; refused."""
    if replay is not None or not torch.is_grad_enabled() or not is_traceable_subclass(value):
        return
    if custom_function_of(value) is None or not any(o.source is LeafSource.INPUT_ALIAS for o in leaves):
        return  # (a set_() under grad gives its history otherwise: Note [set_ Under Grad])
    raise UnsupportedError(
        f"{path} is a {type(value).__name__} a custom autograd.Function built around a view of an input, with that "
        "Function's autograd history; the compiled output, rebuilt around the input's storage with "
        "__tensor_unflatten__, would be a leaf through which no gradient reaches the input (Note [Custom "
        "Functions]). Build it outside the compiled function, or return a clone"
    )


def function_view_of_fresh(value: torch.Tensor, leaves: tuple[OutputLeaf, ...], run: FunctionalRun) -> bool:
    """See Note [Output Regeneration]."""
    if is_traceable_subclass(value) or not torch.is_grad_enabled() or not value.requires_grad:
        return False
    if len(leaves) != 1 or leaves[0].source is not LeafSource.GRAPH or not is_custom_function_view(value):
        return False
    base = value._base
    return base is not None and not base.requires_grad and all(base is not t for t in run.user_tensors)


def check_built_wrapper_output(path: str, value: torch.Tensor, run: FunctionalRun) -> None:
    """Note [Autograd Sees The Wrapper]."""
    if not is_traceable_subclass(value):
        return
    t = value  # (a view of such a tensor too: `nested_tensor_from_jagged(v, o).transpose(1, 2)`)
    while (record := run.swaps.views.get(id(t))) is not None:
        if not is_traceable_subclass(record.source):
            built = "" if t is value else f", and then viewed ({run.swaps.views[id(value)].func})"
            raise UnsupportedError(
                f"{path} is a {type(value).__name__} the program built as a view of a plain tensor ({record.func}"
                f"{built}); its `._base` cannot be rebuilt by the compiled code (Note [Autograd Sees The Wrapper]). "
                "Build it outside the compiled function, or return its plain parts"
            )
        t = record.source
    for dim, size in enumerate((*value.shape, *value.stride())):
        if is_nested_int(size) and nested_coeff(size) is None:
            raise UnsupportedError(
                f"{path} has a ragged dim (size/stride entry {dim}) whose nested int is a shape-environment symbol: "
                "the program built it from an offsets or lengths tensor passed plain that already had a nested int "
                "(an NJT was built from it before the call), which the compiled code cannot name (Note [Nested Int "
                "Dims]). Pass that NJT itself, or offsets without one (a clone)"
            )


def check_graph_leaf_shared_under_grad(
    infos: Sequence[OutputInfo], values: Sequence[object], inputs: Collection[object]
) -> None:
    """Note [Nested Int Dims]: one tensor the graph computes that is a dense leaf of a wrapper output and of another
    output (`o = offsets.clone()` under two NJTs, or returned beside one) is one object in eager, which gives one
    nested int to every NJT built from it. The compiled Function returns each graph output as a tensor of its own,
    so under grad the wrappers would get apart offsets, and nested ints apart: refused, naming both outputs. `inputs`:
    the storage keys of the dense inputs (an input's offsets come back as the input itself)."""
    if not torch.is_grad_enabled():
        return
    holders: dict[int, list[str]] = {}
    for info, value in zip(infos, values, strict=True):
        if info.kind is not OutputKind.TENSOR or not isinstance(value, torch.Tensor):
            continue
        dense = dense_leaves_of(value, info.path)[1] if info.tree is not None else [value]
        for leaf, d in zip(info.leaves, dense, strict=True):
            if leaf.source is LeafSource.GRAPH and storage_key(d) not in inputs:
                holders.setdefault(id(d), []).append(info.path)
    for value, info in zip(values, infos, strict=True):
        if info.tree is None or not isinstance(value, torch.Tensor):
            continue
        for d in dense_leaves_of(value, info.path)[1]:
            paths = list(dict.fromkeys(holders.get(id(d), [])))
            if len(paths) > 1:
                raise UnsupportedError(
                    f"{paths[0]} and {paths[1]} hold one tensor the program computed (in eager one object: the "
                    "offsets an NJT's nested int stands for); in training the compiled outputs hold a tensor each, "
                    "so NJTs built from it would not share eager's nested int (Note [Nested Int Dims]). Build the "
                    "outputs from an input's offsets, or return one of them"
                )


def check_wrapper_over_history(
    path: str, value: torch.Tensor, dense: Sequence[torch.Tensor], leaves: Sequence[OutputLeaf]
) -> None:
    """Note [Autograd Sees The Wrapper]: a wrapper output the program built around inner tensors with autograd history
    of their own (`TwoTensor(x * 1, x * 2)`, x requiring grad): eager's inner tensors keep it (`out.a.sum().backward()`
    reaches x), where the compiled output's, computed by the graph below the wrapper, have none."""
    if not is_traceable_subclass(value):
        return
    with no_torch_function():
        carried = [
            k
            for k, (d, leaf) in enumerate(zip(dense, leaves, strict=True))
            if leaf.source is not LeafSource.INPUT_ALIAS and d.requires_grad
        ]
    if carried:
        raise UnsupportedError(
            f"{path} is a {type(value).__name__} the program built around inner tensors with autograd history of "
            f"their own (dense leaf {carried[0]} requires grad): eager's inner tensors keep that history below the "
            "wrapper, which the compiled output, whose inner tensors the graph computes below autograd, cannot have "
            "(Note [Autograd Sees The Wrapper]). Build the wrapper outside the compiled function from its returned "
            "inner tensors, or build it from detached ones"
        )


def detached_output_leaves(
    value: torch.Tensor,
    dense: Sequence[torch.Tensor],
    run: FunctionalRun,
    placed: tuple[dict[object, DenseIndex], dict[object, DenseIndex]],
    graph_count: int,
    meta_of: Callable[[torch.Tensor, DenseIndex], Meta],
) -> tuple[OutputLeaf, ...] | None:
    """Note [Outputs Over Another Storage]: `value`'s leaves as GRAPH leaves (numbered from `graph_count`)
    set_() onto their inputs at run time, or None. `placed`: (storage key -> dense input whose storage it is at the
    end, ... as the inputs came); `meta_of`: eager's metadata of a leaf on that input's storage."""
    current, original = placed
    record = run.swaps.views.get(id(value))
    if record is None or record.func is not torch.ops.aten.detach.default or not torch.is_grad_enabled():
        return None
    if not value.requires_grad or grad_fn_raises(value) or value.grad_fn is None or not record.source.requires_grad:
        return None
    swaps = run.swaps
    if id(value) in swaps.swapped_ids or id(value) in swaps.data_aliases:
        return None
    if is_traceable_subclass(value) and not any(record.source is u for u in run.user_tensors):
        return None  # the wrapper shares the wrapper storage of the input it detached (set_onto_inputs)
    keys = [storage_key(leaf) for leaf in dense]
    if any(k not in current or original.get(k) != current[k] for k in keys):
        return None
    if any(leaf_meta(run.finals[current[k]]) != leaf_meta(run.originals[current[k]]) for k in keys):
        return None  # an input whose layout the program changed (x.t_() after the write: its output had no history)
    for other in pytree.tree_leaves(run.output):
        if isinstance(other, torch.Tensor) and other is not value and swaps.view_root(other) is value:
            return None
    return tuple(
        OutputLeaf(
            source=LeafSource.GRAPH,
            index=graph_count + k,
            meta=meta_of(leaf, current[key]),
            is_view=False,
            onto_input=current[key],
        )
        for k, (leaf, key) in enumerate(zip(dense, keys, strict=True))
    )
