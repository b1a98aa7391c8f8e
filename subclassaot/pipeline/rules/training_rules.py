"""Training rules shared by the stages: which inputs get a synthetic-base gradient, which subclass inputs come back
from the compiled autograd.Function as wrappers, which inputs gain grad, and what training refuses
(`check_training_supported`, `check_swapped_storage_outputs`).

Input: `DenseLayout`, `Analysis`, the fake user inputs. Output: index tuples and refusals (UnsupportedError naming
the input and the rule). Invariants: pure functions of compile-time records; no tracing here.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from typing import cast

import torch

from subclassaot.errors import AliasedSubclassRefusal, UnsupportedError
from subclassaot.pipeline.rules.data_assignment import data_assignments_allowed, data_set_in_place
from subclassaot.pipeline.rules.leaf_mutations import check_assigned_writes
from subclassaot.pipeline.rules.set_storage_rules import (
    inner_written_inputs,
    kernel_strides,
    refuse_leaves_resized_under_no_grad,
    set_under_no_grad_inputs,
)
from subclassaot.runtime.steps import own_accumulator_inputs
from subclassaot.schemas import (
    AliasGroup,
    AliasGroupRef,
    Analysis,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    InputIndex,
    LeafMutation,
    LeafSource,
    Meta,
    OutputKind,
    ReplaySource,
)
from subclassaot.torch_internals import leaf_view_of_its_own

# Note [Inputs Written In Training]
# Autograd sees a subclass at the wrapper level (Note [Autograd Sees The Wrapper]), and a plain input's writes through
# the graph's update, so what the epilogue does to an input follows what eager's autograd recorded of the program's
# changes to it. A plain input written with grad needs nothing new: the epilogue's copy_ runs with grad from the
# Function's differentiable update. A subclass input that requires grad, or gains it:
# - Writes autograd records: the Function also returns the input's new value as a wrapper (rebuilt from the ORIGINAL
#   updates of its leaves; a leaf the program left alone is the input's own, as a NestedTensor's offsets after a
#   write of its values), and the epilogue applies `input.copy_(new)` at the wrapper level with grad, as eager records
#   it. With in-place view ops too, the epilogue writes the original storage below autograd, replays the ops under the
#   grad mode each had, then copies in: the gradient reaches the input through the Function alone. A view of an input
#   that gained grad by that copy gets its grad_fn only when read (an in-place op before takes it for a leaf and raises),
#   so the epilogue reads it before each replayed step. A leaf written only through an alias autograd does not relate to
#   it (`z.set_(x)`, then `z.mul_(2)`) is copied below autograd (`_copy_wrapper`). Views changed in place: Note [Stale
#   View Functions].
# - Changes autograd does not record need no new value: in-place view ops with writes only under no_grad or through
#   `.data`, writes of its inner tensors (`x.a.add_(1)`: written below autograd), set_() under no_grad (storage,
#   metadata, values below autograd). Refused for set_(): a read with grad after one to another size, a write with grad
#   after it, and a target whose strides a kernel chose (`kernel_strides`). A leaf relaid below autograd keeps its
#   refusal (Note [Leaves Laid Out Anew Under no_grad]).
# - set_() under grad: the epilogue gives storage, metadata and values as in inference, then repeats `x.set_(x)` under
#   grad (Note [set_ Under Grad]); outputs computed before the swap carry gradients through the Function, those after
#   fail as eager's (Note [Backward Errors Are Deferred]). An alias-group member's real base is rebased as eager's, and it
#   leaves the group's metadata check. Only where every dense leaf was set_() so and no kernel chose its final strides.
# Inputs that gain grad (x.copy_(w), x.set_(w) with w requiring grad) become non-leaves with eager's op as grad_fn; a view
# of one regenerates its history from it, an input merely sharing its storage does not. Beyond the rules above:
# - A plain input set_() to a value requiring grad gets the raising set_ node by a repeat `x.set_(source)` under grad,
#   `source` a differentiable alias of its new storage (from the input it now shares, else a fresh leaf never reached);
#   the updates of a swapped storage are not differentiated. Refused: an output that is the intermediate set_() to
#   (`check_swapped_storage_outputs`), and a write that gains grad after a swap autograd did not record.
# - A subclass input set_() so repeats the set_ at the wrapper level once x has its final storage (`x.set_(alias)`, the
#   alias taken from the input w is or views). Only where that set_ was x's last change autograd saw and w is an input or
#   a view of one taken with grad on.
# - Inputs passed twice that gain grad (`f(x, w, x)`, `x.add_(w)`): the group's base is an as_strided view of x, so the
#   epilogue's copy_ gives x a CopySlices history, as eager's. Only where every member is that one tensor, its layout
#   kept; distinct views or detach() aliases, set_ under grad into a storage inputs share (eager rebases the storage's
#   base), and grad-free members of a subclass family another member of which gained grad stay refused.
# - A plain member autograd relates to no other (its `._base`, else itself, is no other member nor another's `._base`:
#   `x.detach()` passed beside x, a view of a detach()) that gains grad by a write: eager records the write on it
#   alone; the others keep their history (x's output reads the new values with x's own gradient) or stay without one.
#   It runs detached from the base, whether or not that requires grad (`view_bases.autograd_apart`), so the trace
#   records as eager does; the BASE copy gives the values, and its FINAL, whose traced history is the write's, is copied
#   in with grad after it (LeafMutation.history_of_its_own), its apartness guarded (`view_bases.apart_guards`). Only
#   where it keeps its storage and layout; a member alone in its group (an as_strided() reach) stays refused.
# Inputs the program makes require grad (requires_grad_()) are compiled requiring grad from the start: writes to them
# that autograd records none of (under no_grad, through detach()), keeping their storage and layout, read the same
# either way (eager's gradient is w.r.t. the value at requires_grad_(), which those writes cut from the entry value
# just as well). So do in-place view ops on such a leaf (or leaf view) in no alias group (before the flag, or under
# no_grad after it: neither records a node in eager), which the epilogue replays under no_grad (Note [Leaves Laid Out
# Anew Under no_grad]). A write with grad before the flag (unrecorded in eager, a leaf written in place here), an
# in-place view op on another such input, and a swap or `.data =` stay refused (`check_written_inputs_gaining_grad`),
# but on a plain input in no alias group that the program made require grad before
# any op changed its storage otherwise than by writes autograd records none of (Analysis.gained_before_changes): a
# change after the flag is ordered as the run that requires grad from the start orders it, and other storages'
# changes before the flag do not reach it. A swap, resize or relayout before the flag stays refused: eager's leaf
# takes its accumulator's size after it, where the compiled Function's edge expects the entry size.
# Other storage changes (set_ or resize_ with a write autograd records) are refused.


def wrapper_update_inputs(
    layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> tuple[int, ...]:
    """Subclass inputs that require grad and whose data the program writes (and at most changes their metadata by
    in-place view ops the epilogue replays)."""
    grouped = {m for g in layout.groups for m in g.members}
    out = []
    for i, (tree, fake) in enumerate(zip(layout.trees, user_fakes, strict=True)):
        leaves = layout.leaves_of_input[i]
        muts = [analysis.mutations[j] for j in leaves]
        if tree is None or not (fake.requires_grad or gains_grad(analysis, i, fake)) or not any(m.data for m in muts):
            continue
        if any(m.storage_changed or m.swapped or m.resized for m in muts):
            continue
        if i in inner_written_inputs(layout, analysis):
            continue
        alone = fake.requires_grad and not any(j in grouped for j in leaves)
        if any(m.metadata or m.final_data for m in muts) and not _recorded_view_ops(analysis, i, muts, alone):
            continue
        # See Note [Aliased Inputs In Training]: a member of an alias group gets its new value only where
        # the program wrote through its own wrapper family (not through an alias autograd does not relate to it),
        # and once per object; not where it wrote only through another member of the family (it shares the
        # member's version counter), whose wrapper-level copy_ rebases their common base.
        if any(j in grouped for j in leaves) and (
            not analysis.wrapper_version_bumps[i]
            or _duplicate(layout, i)
            or (any(m.metadata for m in muts) and not _one_object(layout, i))
            or _not_written_through_own_wrapper(analysis, i)
        ):
            continue
        if any(_read_only_member(layout, analysis, g, i) for g in layout.groups if set(leaves) & set(g.members)):
            continue  # Note [Aliased Inputs In Training]
        out.append(i)
    return tuple(out)


def _one_object(layout: DenseLayout, i: int) -> bool:
    """Every alias group tensor input `i` is in holds only `i` itself (the same object passed several times)."""
    same = layout.same_wrapper or (None,) * len(layout.trees)
    first = {t: t if same[t] is None else same[t] for t in range(len(layout.trees))}
    owner = {j: t for t, leaves in enumerate(layout.leaves_of_input) for j in leaves}
    mine = set(layout.leaves_of_input[i])
    return all(first[owner[m]] == first[i] for g in layout.groups if mine & set(g.members) for m in g.members)


def _not_written_through_own_wrapper(analysis: Analysis, i: int) -> bool:
    return bool(analysis.wrapper_first_write) and analysis.wrapper_first_write[i] is None


def _duplicate(layout: DenseLayout, i: int) -> bool:
    """The same subclass object as an earlier input, traced as one object (Note [Synthetic Bases])."""
    grouped = {m for g in layout.groups for m in g.members}
    same = layout.same_wrapper[i] if layout.same_wrapper else None
    return same is not None and any(j in grouped for j in layout.leaves_of_input[i])


def duplicate_wrappers(layout: DenseLayout) -> frozenset[int]:
    """Tensor inputs that are the same subclass object as an earlier one in a traced alias group: the program sees
    one object, and its gradient goes to the first position only (autograd sums both positions in eager)."""
    return frozenset(i for i in range(len(layout.trees)) if _duplicate(layout, i))


def _recorded_view_ops(analysis: Analysis, i: int, muts: Sequence[LeafMutation], alone: bool) -> bool:
    """The input's metadata changes are in-place view ops the epilogue replays, and its writes all happened where
    autograd records them (`.data` ones are refused: Note [Inputs Written In Training]); so did the view
    ops, unless the input requires grad and is in no alias group (`alone`: Note [Inputs Written In
    Training])."""
    steps = analysis.inplace_replay[i]
    visible = all(m.autograd_visible and not m.hidden_from_autograd for m in muts if m.data)
    return bool(steps) and visible and (alone or all(step.grad_enabled for step in steps))


# Note [Aliased Inputs In Training]
# Inputs that share storage are traced as views of one synthetic base (Note [Synthetic Bases]). In training, that base
# is what autograd sees: the runtime makes it from the real inputs (an as_strided view of one member, recorded by
# autograd), passes it to the compiled autograd.Function, and the backward returns the gradient with respect to it,
# which autograd carries back through the as_strided to the real tensors behind the members, the way eager's gradients
# reach them through both aliases. A mutation of a member is a copy into that base, which autograd records as well.
# Where a plain member that requires grad is no view and the other members are it or views of it (f(x, x), x and x.t()),
# the group is traced from that member instead, so that writes are recorded on it as eager records them on x
# (view_bases.py). Subclass members: at the end of this Note.
# Metadata changes. A member whose metadata the program changes in place (a.t_()) is traced as an in-place view op on a
# view of the synthetic base, and the epilogue replays it on the real member. Autograd rebuilds the history of a traced
# view of the base from a view function that misses in-place view ops (Note [Stale View Functions]), so the question is
# whether anyone reads such a rebuilt history:
# - Layout changes by in-place view ops alone (t_, unsqueeze_, transpose_, as_strided_): where no stale rebuilt history
#   is read (recorded per storage: `Analysis.stale_view_reads`), every traced member's history is eager's op for op, and
#   the epilogue replays the new layouts on the real members. Refused where a stale history is read, and where a
#   member's input is an autograd leaf given another size by such ops under no_grad alone (eager makes its accumulator
#   at the new size, ours sums the gradient down to the base's old one) and then seen: read by an op with grad, itself
#   or through a view, or returned (`Analysis.seen_after_layout_ops`); unseen, no gradient arrives in the new size.
# - With no tensor output that requires grad, the Function's only differentiable outputs are the input updates, whose
#   gradient reaches the base through the epilogue's copy into it, never through the traced views: nothing is refused
#   for metadata (plain members).
# - Grad-free members (a `detach()` beside the input that requires grad, requiring grad neither before nor after the
#   call) have no history to read: autograd records nothing on them, and no gradient of the Function flows through them.
#   Their metadata changes do not count. A plain one the program makes require grad (requires_grad_()) is, in eager,
#   a leaf of its own over the storage: it runs as such a detached member too, gains the flag from the start (its
#   writes below autograd stay hidden, the others' writes reach its values and none of its history), and gets a
#   gradient of its own as a Function input, never taken as the group's autograd root, at run time
#   (runtime.steps.own_stand_in_inputs) or in the backward trace (taken, the base would require grad through the
#   leaf, and the group's written value, a differentiable output, would carry that flag where eager's base has
#   none). Writes with grad in its version-counter family stay refused (the leaf requires grad from the start,
#   where eager's, written before the flag, does not). So too one whose group no member requires grad as passed,
#   made to require grad after a read with grad (functional_run.own_leaf_inputs), a leaf without grad until the
#   program's flag: the others' writes, before the flag or after, reach its values and none of its history.
# - Flagless no_grad views: a member whose input is a view taken under no_grad of a tensor that requires grad, with no
#   flag of its own (torch_internals.flagless_no_grad_view: `with no_grad(): v = b[:, 1]`, passed beside b), requires
#   grad through its base but has neither history nor accumulator: an op with grad that reads it records an edge to
#   nothing, and no gradient reaches the base through it, whatever writes its storage. Traced as a view of the
#   synthetic base with history it would hand the base its gradient; so it is taken again under no_grad (a plain
#   member, of its view of the base; a subclass one, its view ops replayed on its base's traced wrapper): the same
#   kind of view as eager's, whose reads with grad after a recorded write of the base raise as eager's do.
# - Leaf views of their own: a plain member that is a view requiring grad by a flag of its own (requires_grad_() of a
#   no_grad view, or of a view of a base requiring none: `b[0].requires_grad_()`) is a leaf with an accumulator of its
#   own in eager, its `._base` no autograd ancestor. Where it would not be the group's autograd root (its base requires
#   grad, or another input of the group does), it runs as a stand-in of its own as above, a Function input whose
#   gradient reaches that accumulator (runtime.steps.own_accumulator_inputs; two such views of one base leave the
#   group's base requiring none). Eager rebuilds its history from its `._base` when read after its counter moved,
#   only where that base requires grad then: refused where a write with grad on reaches its version-counter family
#   and its base requires grad as passed (a view taken under no_grad: the read raises), where any write does and its
#   base gains grad in the call (a value requiring grad written into it or a view of it, its requires_grad_(): the
#   group's root view too), and where its layout or storage changes; over a base requiring none throughout it stays
#   a leaf whatever writes the storage (`b.mul_(2)`, a detach()'s write, with grad on). So is a tensor
#   subclass member of that kind, and two leaves requiring grad over one storage that are no views and each have
#   views among the inputs. A plain leaf that is no view (`b.detach().requires_grad_()`) beside a member with a
#   history (b, a non-leaf requiring grad), or beside another such leaf (b a leaf: the one the others' views are of,
#   else the first passed, stays the group's root), runs as such a stand-in too (the group's root would be b's,
#   sending its gradient to b's leaf): writes with grad through the others are fine there (eager's leaf takes their
#   values, never a history); so do its own layout or storage changes, but beside a write autograd records.
# - Data assignments to aliased inputs: a member whose layout changes only by `.data =` (its last storage swap) keeps
#   the history it came with in eager (a leaf, its accumulator: Note [Gradient Accumulators Of Leaves]); the epilogue's
#   as_strided_ below autograd gives it the new layout. So does a leaf beside other members that require grad (its
#   own views): their histories reach it through its accumulator as they came, and its reads after the assignment
#   run as those of a leaf alone. What eager does differently is refused by its own rule: a view member whose
#   history autograd rebuilds over the assigned base (Note [Stale View Functions]), a backward whose size checks
#   differ (Note [Probing Eager's Backward]).
# - set_() under no_grad onto the group's storage (its in-place view ops under no_grad too): eager keeps every
#   member's history (a leaf, its accumulator), and the set_() advances the group's counter, so a view member's
#   history is rebuilt from its base at the new layout when next read, as the real member's is once the epilogue
#   repeats the set_(). Supported where no op with grad reads a member after its set_() (a write with grad through
#   it included: the traced view keeps the history of its old layout; refused, `Analysis.read_after_nograd_set`).
#   Writes of the group, before the set_() or after it, with grad or without, are copies into the base like any
#   other: no stale history is read by them, and the set_() member's history is rebuilt from the written base.
# - A set_() to another storage (x.set_(y), y not a view of the base) takes the member out of the group: its metadata do
#   not count, the swap is replayed on the real member like any storage swap (with `x.set_(x)` under grad where eager
#   records it: Note [set_ Under Grad]), and the updates of its new storage get no gradient. Nor does the metadata of a
#   member set_() under grad to a view of the base count: eager's backward through it raises, and ours too (Note
#   [Backward Errors Are Deferred]).
# Groups with a subclass member keep the refusals of set_() and of metadata changes, except as below.
# Subclass members. Subclass inputs whose inner tensors share storage are traced like plain aliases, their inner
# tensors as views of one
# synthetic base per storage (Note [Synthetic Bases]), so that every alias sees every write. Autograd, though, sees a
# subclass at the wrapper level, and relates two wrappers only when they are views of one wrapper base (one
# version-counter family): there an in-place op on one rebases the other's history. So each member stays its own input
# of the compiled Function, with its own wrapper-level gradient (the program runs on a wrapper over its very inner
# tensors, `_SameStorageClone`, a non-leaf as eager's views are), and autograd sums the members' gradients through their
# own grad_fns. A member written through its own wrapper family comes back from the Function as a wrapper around its
# region of the new base, copied in at the wrapper level (Note [Inputs Written In Training]); the base itself is
# written below autograd. A leaf (or view of one) written through an alias autograd does not relate to it is copied in
# below autograd. Exact except where rebasing matters: a recorded write into a group in which two members of one wrapper
# family overlap is refused (`errors.AliasedSubclassRefusal`), unless:
# - one member is the other's real `._base` (x and x[0]): the view member runs as the same view of its base's traced
#   wrapper (`replay_view`, the `._base` relation guarded), so the trace rebases it as eager does;
# - members are views of one base the call does not pass (x[0] and x[0], overlapping as_strided views): the call
#   compiles again with that base as one more input, a keyword argument the user's function never sees (path
#   `kwargs['<base of args[0]>']`), and the members run as views of it as above. Only where the first compile refuses
#   the overlap (a retry that fails gives the first refusal), guarded by `._base is` on the same positions, and for
#   functions called with their own arguments; views of a leaf (eager forbids their writes) keep the refusal. An inner
#   tensor of the base that is its group's whole synthetic base is traced as that base (desugar `_whole_hidden_base`);
# - one member is the only one written with grad and no other is used with grad by a non-view op after the write: the
#   writer's copy rebases the common base, so the others, views of it, get their history from the write. A use before the
#   write may save a member whose version check then fails, in the trace as in eager (the wrapper-level write advances
#   the traced counters of its family).
# The same object passed twice is one object in the program, its group that object alone: its in-place view ops with
# grad are those of one input (the Function returns its new value with final metadata, `group_final`, and the epilogue
# replays them, then copies in); under no_grad it follows the rule below; a set_() of it keeps the refusal.
# Metadata changes: members whose input requires grad neither before nor after the call have no history to spoil and
# do not count. A member whose layout changes only by in-place view ops under no_grad keeps its own history, replayed
# under no_grad, where it is the only one changed and none of the group is written, set_() or resized (not a leaf).
# The general case would need the gradient with respect to the shared inner storage, split back per member, below
# autograd (autograd on the inner tensors, or as_strided on the subclass). A group mixing a plain and a subclass member
# that both require grad is refused too: their gradients would meet below autograd.


def grad_bases(layout: DenseLayout, user_fakes: Sequence[torch.Tensor], own: Container[int] = ()) -> tuple[int, ...]:
    """Graph inputs that are synthetic bases of plain inputs one of which requires grad (subclass members get their
    gradients at the wrapper level: Note [Aliased Inputs In Training]), not one running as a stand-in of its own
    (`own`: functional_run.own_stand_ins; a leaf of its own, in eager the base requires no grad for it)."""
    requires_grad = {
        layout.leaves[leaves[0]].owner: fake.requires_grad and tree is None and i not in own
        for i, (leaves, fake, tree) in enumerate(zip(layout.leaves_of_input, user_fakes, layout.trees, strict=True))
        if leaves
    }
    return tuple(
        k
        for k, item in enumerate(layout.graph_inputs)
        if isinstance(item, AliasGroupRef)
        and any(requires_grad[layout.leaves[m].owner] for m in layout.groups[item.group].members)
    )


def group_of(layout: DenseLayout, k: int) -> int:
    item = layout.graph_inputs[k]
    assert isinstance(item, AliasGroupRef), "BUG: not a synthetic base"
    return item.group


def _metadata_only_inputs(layout: DenseLayout, analysis: Analysis) -> tuple[int, ...]:
    """Subclass inputs whose only change is in-place view ops the epilogue replays on the real input (autograd
    records them there, as in eager); no value comes out of the compiled Function for them."""
    out = []
    for i, tree in enumerate(layout.trees):
        muts = [analysis.mutations[j] for j in layout.leaves_of_input[i]]
        if tree is None or not analysis.inplace_replay[i]:
            continue
        if not any(m.data or m.storage_changed or m.swapped or m.resized or m.final_data for m in muts):
            out.append(i)
    return tuple(out)


def _unsupported_group_change(
    members: Sequence[DenseIndex],
    analysis: Analysis,
    input_of: Callable[[DenseIndex], int],
    plain: bool,
    grad_free: Callable[[int], bool],
    leaf: Callable[[DenseIndex], bool],
    set_by_grad: Callable[[int], bool],
    member_meta: Sequence[Meta],
) -> DenseIndex | None:
    """The member whose change makes the group unsupported in training (Note [Aliased Inputs In Training]), if any.
    `input_of`: the tensor input a member belongs to; `plain`: no member is a subclass's; `grad_free`: the tensor input
    requires grad neither before nor after the call; `leaf`: the member's tensor input is an autograd leaf;
    `set_by_grad`: a subclass input set_() under grad (Note [Inputs Written In Training]); `member_meta`: each
    member's layout as it came."""
    muts = [(m, analysis.mutations[m]) for m in members]
    if not plain:  # See Note [Inputs Written In Training]
        muts = [(m, mut) for m, mut in muts if not set_by_grad(input_of(m))]
    if not plain:  # the relaxations below are checked for plain members only
        swapped = [m for m, mut in muts if mut.storage_changed]
        if swapped:
            return swapped[0]
        # See Note [Aliased Inputs In Training]
        held = [(m, mut) for m, mut in muts if not grad_free(input_of(m))]
        if len({input_of(m) for m, _ in held}) == 1 and not any(mut.swapped for _, mut in muts):
            written = any(mut.data for _, mut in muts)
            return _one_subclass_object_change(held, analysis, input_of, leaf, written)
    # A member set_() elsewhere left the group; one set_() under grad has a backward that raises anyway.
    meta = [m for m, mut in muts if mut.metadata and not (plain and (mut.storage_changed or mut.set_under_grad))]
    if plain and all(grad_free(input_of(m)) for m in meta):
        return None  # no history reads their layout (Note [Aliased Inputs In Training])
    if not meta or (plain and not (_returns_tensors(analysis) and analysis.grad_outputs)):
        return None
    if plain and data_assignments_allowed(meta, analysis):
        return None  # See Note [Aliased Inputs In Training]
    if plain and _hidden_sets_only(meta, analysis, input_of):
        return None  # See Note [Aliased Inputs In Training]
    if plain and not any(analysis.mutations[m].swapped for m in meta):
        # See Note [Aliased Inputs In Training]
        stale = [m for m in members if analysis.stale_view_reads and analysis.stale_view_reads[m]]
        sizes = dict(zip(members, (mm[0] for mm in member_meta), strict=True))
        hidden = [
            m
            for m in meta
            if leaf(m)
            and analysis.mutations[m].metadata_hidden
            and analysis.mutations[m].final_meta[0] != sizes[m]
            and (not analysis.seen_after_layout_ops or analysis.seen_after_layout_ops[input_of(m)])
        ]
        return meta[-1] if stale else (hidden[-1] if hidden else None)
    # Replayed as view ops (subclasses) or as_strided_ (plain; recorded iff autograd saw the change)
    steps = analysis.inplace_replay[input_of(meta[0])]
    recorded = all(step.grad_enabled for step in steps) and all(
        mut.autograd_visible and not mut.hidden_from_autograd for m, mut in muts if m in meta
    )
    if len({input_of(m) for m in meta}) > 1 or any(mut.data for _, mut in muts):
        return meta[-1]
    if not recorded and not (not plain and steps and not any(s.grad_enabled for s in steps) and not leaf(meta[0])):
        return meta[-1]  # the exception: Note [Aliased Inputs In Training]
    return None


def _hidden_sets_only(meta: Sequence[DenseIndex], analysis: Analysis, input_of: Callable[[DenseIndex], int]) -> bool:
    """Every changed plain member (`meta`) was last set_() under no_grad onto the group's storage, its in-place view
    ops under no_grad too, and no op with grad read it after that set_(), a write through it included (Note [Aliased
    Inputs In Training])."""
    reads = analysis.read_after_nograd_set
    return all(
        (mut := analysis.mutations[m]).swapped
        and not mut.swapped_by_data
        and mut.metadata_hidden
        and not mut.storage_changed
        and not mut.set_under_grad
        and bool(reads)
        and not reads[input_of(m)]
        for m in meta
    )


def _one_subclass_object_change(
    muts: Sequence[tuple[DenseIndex, LeafMutation]],
    analysis: Analysis,
    input_of: Callable[[DenseIndex], int],
    leaf: Callable[[DenseIndex], bool],
    written: bool,
) -> DenseIndex | None:
    """One subclass object passed several times (Note [Aliased Inputs In Training]); `written`: the
    program writes a member of its group."""
    meta = [m for m, mut in muts if mut.metadata]
    if not meta:
        return None
    steps = analysis.inplace_replay[input_of(meta[0])]
    if steps and all(step.grad_enabled for step in steps):
        return None
    hidden = steps and not any(step.grad_enabled for step in steps)
    if hidden and (not _returns_tensors(analysis) or not (leaf(meta[0]) or written)):
        return None  # as Note [Aliased Inputs In Training]
    return meta[-1]


def _returns_tensors(analysis: Analysis) -> bool:
    return any(info.kind not in (OutputKind.CONSTANT, OutputKind.SYMINT) for info in analysis.outputs)


def _check_overlapping_wrapper_writes(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> None:
    """A subclass input whose elements overlap (expand()) that the epilogue writes at the wrapper level (Note
    [Inputs Written In Training]): its copy_ into the repeated elements raises. One
    written only through another input over its storage or below autograd
    is not written that way."""
    for i in wrapper_update_inputs(layout, analysis, user_fakes):
        t = user_fakes[i]
        if any(st == 0 and sz != 1 for sz, st in zip(t.shape, t.stride(), strict=True)):
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path}: the program writes this tensor subclass input, which "
                "requires grad and whose elements overlap (expand()), where autograd records it; writing its new "
                "values back into the input's repeated elements is not supported. Pass the tensor it was expanded "
                "from and expand it inside the function, or write a clone of it"
            )


def check_training_supported(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> None:
    _check_data_swap_after_recorded_write(flat, layout, analysis, user_fakes)
    check_assigned_writes(flat, layout, analysis, user_fakes)
    _check_overlapping_wrapper_writes(flat, layout, analysis, user_fakes)
    by_object = {id(fake): t for t, fake in reversed(list(enumerate(user_fakes)))}

    def input_of(m: DenseIndex) -> int:
        # one object passed twice is one input (its first position)
        return by_object[id(user_fakes[flat.tensor_indices.index(layout.leaves[m].owner)])]

    def grad_free(t: int) -> bool:
        return not user_fakes[t].requires_grad and not analysis.requires_grad_after[t]

    def leaf(m: DenseIndex) -> bool:
        return bool(cast(torch.Tensor, flat.values[layout.leaves[m].owner]).is_leaf)

    def set_by_grad(t: int) -> bool:
        return _set_under_grad(layout, analysis, t)

    for group in layout.groups:
        owners = {layout.leaves[m].owner for m in group.members}
        needs_grad = any(fake.requires_grad for t, fake in enumerate(user_fakes) if flat.tensor_indices[t] in owners)
        plain = all(layout.trees[input_of(m)] is None for m in group.members)
        changed = _unsupported_group_change(
            group.members, analysis, input_of, plain, grad_free, leaf, set_by_grad, group.member_meta
        )
        if needs_grad and changed is not None:
            path = layout.leaves[changed].path
            if plain and any(analysis.stale_view_reads[m] for m in group.members if analysis.stale_view_reads):
                raise UnsupportedError(
                    f"{path} shares storage with another input that requires grad and the program changes the "
                    "metadata (t_, unsqueeze_, ...) of a member, then writes through it (or a view of it taken "
                    "after), or uses it after a write to the storage or after an in-place view op under no_grad; in "
                    "training this is not supported yet (autograd would rebuild its history in its old layout: Note "
                    "[Stale View Functions]). Pass one base tensor and take the views inside the function, or change "
                    "the layout of a clone"
                )
            raise UnsupportedError(
                f"{path} shares storage with another input that requires grad and the program changes the metadata "
                "(for plain members: by set_() or `.data =` onto the shared storage; a set_() under no_grad where "
                "that member is read or written with grad after it) of several members, or of one that is also "
                "written or changed under no_grad, and returns tensors (for tensor subclass members: "
                "returning tensors or not where they are distinct objects, and any set_() of one too); in training "
                "this is not supported yet (their gradients would not be eager's). Pass one base tensor and take the "
                "views inside the function"
            )
        _check_aliased_subclass_group(flat, layout, analysis, user_fakes, group)
        _check_leaves_of_their_own(flat, layout, analysis, group.members, input_of)
    supported = (
        *wrapper_update_inputs(layout, analysis, user_fakes),
        *_metadata_only_inputs(layout, analysis),
        *_written_through_alias(layout, analysis),
        *_set_under_grad_inputs(layout, analysis),
        *_hidden_change_inputs(flat, layout, analysis),
        *set_under_no_grad_inputs(layout, analysis),
        *inner_written_inputs(layout, analysis),
    )
    for t_index, (tree, fake) in enumerate(zip(layout.trees, user_fakes, strict=True)):
        same = layout.same_wrapper[t_index] if layout.same_wrapper else None
        if _duplicate(layout, t_index) and same in supported:
            continue  # one object: its first position carries its updates
        if tree is not None and fake.requires_grad and t_index not in supported:
            if any(analysis.mutations[j].any for j in layout.leaves_of_input[t_index]):
                raise UnsupportedError(
                    f"{tree.path}: a tensor subclass input that requires grad has its metadata or storage changed "
                    "in place (t_, set_, resize_ ...); in training only data writes to such inputs are supported "
                    "yet. Change a clone instead, or run it under torch.no_grad()"
                )
    refuse_leaves_resized_under_no_grad(flat, layout, analysis, user_fakes)


def _check_leaves_of_their_own(
    flat: FlatInputs,
    layout: DenseLayout,
    analysis: Analysis,
    members: Sequence[DenseIndex],
    input_of: Callable[[DenseIndex], int],
) -> None:
    """Inputs over one written storage that are each a leaf requiring grad. A plain leaf view with a flag of its own
    (`b[0].requires_grad_()`, a no_grad view given requires_grad_()) runs as a stand-in of its own, a Function input
    whose gradient reaches its accumulator (runtime.steps.own_accumulator_inputs): refused where a write reaches its
    storage where its base requires grad (`_history_rebuilt`: eager's view, read after it, takes a history from its
    base or raises for it) or its layout or storage changes; one that is no view (b.detach().requires_grad_() beside b, a non-leaf, or beside another leaf
    that is no view) only where its layout or storage changes beside a write autograd records over its storage (the
    epilogue would update it in place with grad on). Two other leaves requiring grad (no views, of which neither runs
    as a stand-in of its own: both with views of their own among the inputs) are traced over one synthetic base, whose
    gradient reaches one accumulator: refused (Note [Aliased Inputs In Training])."""
    if not any(analysis.mutations[m].any for m in members):
        return
    own = own_accumulator_inputs(layout, [flat.values[k] for k in flat.tensor_indices])
    leaves: dict[int, str] = {}
    for m in members:
        real = cast(torch.Tensor, flat.values[layout.leaves[m].owner])
        mutation = analysis.mutations[m]
        # (a write with grad on: recorded by autograd, or advancing its version counter, which it shares with its
        # base and that base's detach(), by an op that may record a node)
        with_grad = mutation.version_bumps > mutation.bumps_after_grad
        # (a leaf no view, `b.detach().requires_grad_()`, takes no history from a write: its values alone change)
        view = real._is_view()
        recorded = any(analysis.mutations[k].autograd_visible for k in members)
        changed = (
            mutation.metadata
            or mutation.storage_changed
            or (mutation.swapped and not data_set_in_place(mutation, real))
            or mutation.resized
        )
        # (a leaf view of its own that is the group's root, `b[1].requires_grad_()` beside b alone: the same rule)
        stand_in = input_of(m) in own or layout.trees[input_of(m)] is None and leaf_view_of_its_own(real)
        rebuilt = (
            stand_in
            and view
            and _history_rebuilt(flat, layout, analysis, (members, m), input_of, own, with_grad or recorded)
        )
        if rebuilt or input_of(m) in own and (view and changed or changed and recorded):
            raise UnsupportedError(
                f"{layout.leaves[m].path}: a view (or a detach()) that requires grad by a flag of its own (a leaf "
                "with an accumulator of its own), over a storage the program writes where the view's base requires "
                "grad (as passed: a write with grad on, through any input over it, a detach() too; or gained in the "
                "call, by a value that requires grad written into it or a view of it, or its requires_grad_(): any "
                "write), or whose layout or storage the program changes (in-place view ops, set_(), resize_()): in "
                "eager, its reads after such a write take a history from its base (or raise), which the compiled "
                "call, running it as a leaf of its own, does not give. Pass a .clone() of it, or write under "
                "torch.no_grad() into a base that requires no grad"
            )
        if layout.trees[input_of(m)] is None and real.is_leaf and real.requires_grad and input_of(m) not in own:
            leaves.setdefault(input_of(m), layout.leaves[m].path)
    if len(leaves) > 1:
        raise UnsupportedError(
            f"{' and '.join(leaves.values())}: inputs over one storage the program writes, each a leaf that requires "
            "grad and no view (an accumulator of its own each: x and x.detach().requires_grad_()); in training the "
            "compiled call traces them over one base, whose gradient would reach one of them only. Pass clones of "
            "them, or pass one of them and take the other inside the function"
        )


def _history_rebuilt(
    flat: FlatInputs,
    layout: DenseLayout,
    analysis: Analysis,
    group: tuple[Sequence[DenseIndex], DenseIndex],
    input_of: Callable[[DenseIndex], int],
    own: Container[int],
    with_grad: bool,
) -> bool:
    """Eager's leaf view of its own (member `group[1]`), read after the call, takes a history from its `._base` (or
    raises): its counter moved and the base requires grad at the read. A base that requires grad as passed (a view
    taken under no_grad): refused for a write with grad on (`with_grad`; below autograd, the no_grad views' rules
    apply). A base requiring none that gains grad in the call (an input autograd relates to it, the base or a view of
    it with a history, requires grad at the end: a value requiring grad written in, the base's requires_grad_()):
    any write. Over a base that requires none throughout, the view stays a leaf whatever writes its storage."""
    members, m = group
    base = cast(torch.Tensor, flat.values[layout.leaves[m].owner])._base
    if base is None or base.requires_grad:
        return with_grad
    for k in members:
        t = input_of(k)
        other = cast(torch.Tensor, flat.values[layout.leaves[k].owner])
        # (requires_grad_after as traced: a root view makes its group's traced members require grad, so only
        # the program's requires_grad_() counts there; a view requiring grad as passed has it from a leaf view of its
        # own, `v[1:]` of this one, not from the base)
        gained = analysis.requires_grad_set[t] or input_of(m) in own and analysis.requires_grad_after[t]
        if t not in own and (other is base or other._base is base) and gained and not other.requires_grad:
            return with_grad or analysis.mutations[m].version_bumped
    return False


def _set_under_grad_inputs(layout: DenseLayout, analysis: Analysis) -> tuple[int, ...]:
    """Subclass inputs set_() with grad enabled (Note [Inputs Written In Training])."""
    return tuple(i for i in range(len(layout.trees)) if _set_under_grad(layout, analysis, i))


def _set_under_grad(layout: DenseLayout, analysis: Analysis, i: int) -> bool:
    leaves = layout.leaves_of_input[i]
    muts = [analysis.mutations[j] for j in leaves]
    if layout.trees[i] is None or not leaves or analysis.wrapper_data[i] is not None:
        return False
    return all(m.set_under_grad and not m.resized and not m.swapped_by_data for m in muts) and not any(
        kernel_strides(m) for m in muts
    )


def _hidden_change_inputs(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> tuple[int, ...]:
    """Subclass inputs, not autograd leaves, whose layout the program changes by in-place view ops the epilogue
    replays, and whose values it writes only where autograd does not record it (Note [Inputs Written In
    Training])."""
    grouped = {m for g in layout.groups for m in g.members}
    out = []
    for i, tree in enumerate(layout.trees):
        leaves = layout.leaves_of_input[i]
        muts = [analysis.mutations[j] for j in leaves]
        if tree is None or not analysis.inplace_replay[i] or any(j in grouped for j in leaves):
            continue
        if cast(torch.Tensor, flat.values[flat.tensor_indices[i]]).is_leaf:
            continue
        if analysis.wrapper_data[i] is not None or any(m.storage_changed or m.swapped or m.resized for m in muts):
            continue
        if all(not m.autograd_visible and (m.hidden_from_autograd or not m.data) for m in muts):
            out.append(i)
    return tuple(out)


def _written_through_alias(layout: DenseLayout, analysis: Analysis) -> tuple[int, ...]:
    """Subclass members of traced alias groups whose data changed only: the base copy writes their storage."""
    grouped = {m for g in layout.groups for m in g.members}
    out = []
    for i, tree in enumerate(layout.trees):
        leaves = layout.leaves_of_input[i]
        muts = [analysis.mutations[j] for j in leaves]
        if tree is None or not any(j in grouped for j in leaves):
            continue
        if not any(m.metadata or m.storage_changed or m.swapped or m.resized or m.final_data for m in muts):
            out.append(i)
    return tuple(out)


def _check_aliased_subclass_group(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor], group: AliasGroup
) -> None:
    """Refuse the alias groups Note [Aliased Inputs In Training] cannot make exact."""
    owner_of = {m: layout.leaves[m].owner for m in group.members}
    position = {flat.tensor_indices[t]: t for t in range(len(layout.trees))}
    subclass_grad = [
        m
        for m in group.members
        if layout.trees[position[owner_of[m]]] is not None and user_fakes[position[owner_of[m]]].requires_grad
    ]
    if not subclass_grad:
        return
    path = flat.leaves[owner_of[subclass_grad[0]]].path
    if any(
        layout.trees[position[owner_of[m]]] is None and user_fakes[position[owner_of[m]]].requires_grad
        for m in group.members
    ):
        raise UnsupportedError(
            f"{path} is a tensor subclass that requires grad and shares storage with a plain input that requires "
            "grad; in training this is not supported yet (Note [Aliased Inputs In Training]). Pass one "
            "of them and take the other inside the function"
        )
    visible = any(
        analysis.mutations[m].data
        and analysis.mutations[m].autograd_visible
        and not analysis.mutations[m].hidden_from_autograd
        for m in group.members
    )
    if not visible:
        return
    clash = _overlapping_members(layout, group, subclass_grad, position)
    if (
        clash is not None
        and _writer_of(layout, analysis, group) is None
        and not _one_traced_view_family(layout, subclass_grad)
    ):
        raise AliasedSubclassRefusal(
            f"{layout.leaves[clash].path} overlaps another input that is a view of the same tensor subclass base "
            "(or overlaps itself), and the program writes them where autograd records it; in training this is not "
            "supported yet (autograd's history of one alias goes through the write to the other; views of one base "
            "that is not passed are compiled with that base, except in a module's forward or beside captured "
            "tensors). Pass the base tensor and take the views inside the function, or write under torch.no_grad()"
        )


def _writer_of(layout: DenseLayout, analysis: Analysis, group: AliasGroup) -> int | None:
    """The one tensor input the program writes the group through, where Note [Aliased Inputs In Training]
    applies; else None."""
    if not analysis.wrapper_first_write:
        return None
    input_of = {j: t for t, leaves in enumerate(layout.leaves_of_input) for j in leaves}
    inputs = set()
    for m in group.members:
        t = input_of[m]
        same = layout.same_wrapper[t] if layout.same_wrapper else None
        inputs.add(t if same is None else same)
    if any(layout.trees[t] is None or analysis.dense_written[t] or analysis.inplace_view_ops[t] for t in inputs):
        return None
    if any(analysis.mutations[m].metadata or analysis.mutations[m].storage_changed for m in group.members):
        return None
    writers = [t for t in inputs if analysis.wrapper_first_write[t] is not None]
    if len(writers) != 1:
        return None
    first = analysis.wrapper_first_write[writers[0]]
    for t in inputs - {writers[0]}:
        # Used after the write: eager's history of that use goes through the write. Saved by an op before it, or
        # by the write itself: the trace's backward fails as eager's (Note [Aliased Inputs In Training]).
        last = analysis.wrapper_last_use[t]
        if last is not None and (first is None or last > first) and not _traced_as_view(layout, t, writers[0]):
            return None
    return writers[0]


def _one_traced_view_family(layout: DenseLayout, members: Sequence[DenseIndex]) -> bool:
    """The tensor inputs of `members` (those of a group that require grad: the others are written below autograd,
    as in eager) are one base input and views of it traced as such (Note [Aliased Inputs In Training])."""
    input_of = {j: t for t, leaves in enumerate(layout.leaves_of_input) for j in leaves}
    inputs = set()
    for m in members:
        t = input_of[m]
        same = layout.same_wrapper[t] if layout.same_wrapper else None
        inputs.add(t if same is None else same)
    bases = {t if layout.view_of[t] is None else layout.view_of[t] for t in inputs} if layout.view_of else inputs
    return len(bases) == 1 and all(layout.trees[t] is not None for t in inputs)


def _traced_as_view(layout: DenseLayout, t: int, writer: int) -> bool:
    """Input `t` or the writer is the other's autograd `._base`: the trace differentiates a use after the write
    through it (Note [Aliased Inputs In Training])."""
    return bool(layout.view_of) and (layout.view_of[t] == writer or layout.view_of[writer] == t)


def _read_only_member(layout: DenseLayout, analysis: Analysis, group: AliasGroup, i: int) -> bool:
    """Tensor input `i` is a member of `group` other than its one writer, in a group whose members overlap (Note
    [Aliased Inputs In Training])."""
    writer = _writer_of(layout, analysis, group)
    if writer is None or writer == i or (layout.same_wrapper and layout.same_wrapper[i] == writer):
        return False
    position = {layout.leaves[j].owner: t for t, leaves in enumerate(layout.leaves_of_input) for j in leaves}
    return _overlapping_members(layout, group, group.members, position) is not None


def _overlapping_members(
    layout: DenseLayout, group: AliasGroup, members: Sequence[DenseIndex], position: dict[InputIndex, int]
) -> DenseIndex | None:
    """A member whose elements overlap another distinct member of the same wrapper family, or themselves."""
    index = torch.arange(group.base_numel)
    seen: dict[int, list[tuple[int, torch.Tensor]]] = {}  # wrapper family -> (input, elements) of its members
    for m in members:
        k = group.members.index(m)
        if group.same_as[k] is not None:
            continue  # the very same tensor as an earlier member: one object in the program
        size, stride, offset = group.member_meta[k]
        elements = torch.as_strided(index, _static(size), _static(stride), _static((offset,))[0]).flatten()
        if elements.numel() and int(torch.bincount(elements).max()) > 1:
            return m
        t = position[layout.leaves[m].owner]
        family = layout.wrapper_families[t]
        for other_t, other in seen.get(family, []):
            if other_t != t and bool(torch.isin(elements, other).any()):
                return m
        seen.setdefault(family, []).append((t, elements))
    return None


def _static(dims: Sequence[object]) -> tuple[int, ...]:
    assert all(isinstance(d, int) for d in dims), "BUG: alias-group metadata must be static"
    return tuple(int(d) for d in dims if isinstance(d, int))


def one_tensor_passed_again(layout: DenseLayout, analysis: Analysis, j: int) -> bool:
    """Dense leaf `j` is in an alias group every member of which is one tensor passed several times, whose layout
    the program leaves as it was (Note [Inputs Written In Training])."""
    group = next(g for g in layout.groups if j in g.members)
    same = not group.whole_storage and all(s is not None for s in group.same_as[1:])
    return same and not any(analysis.mutations[m].metadata for m in group.members)


def gains_grad(analysis: Analysis, i: int, fake: torch.Tensor) -> bool:
    """Tensor input `i` does not require grad and the program writes or set_()s a value that requires grad into it
    (not requires_grad_(): that input is compiled as requiring grad from the start)."""
    return not fake.requires_grad and analysis.requires_grad_after[i] and not analysis.requires_grad_set[i]


def check_swapped_storage_outputs(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> None:
    """Refuse an output that shares the new storage of an input set_() to an intermediate that requires grad
    (`y = w * 2; x.set_(y); return y`): it is rebuilt from the input after the epilogue, without the
    intermediate's own history, so its gradient would not be eager's (Note [Inputs Written In Training])."""
    input_of: dict[int, int] = {leaf: i for i, leaves in enumerate(layout.leaves_of_input) for leaf in leaves}
    for info in analysis.outputs:
        if info.replay is not None and info.replay.source is ReplaySource.INPUT:
            continue  # a view of the input itself, taken after the swap: replayed with grad, as in eager
        for leaf in info.leaves:
            if leaf.source is not LeafSource.INPUT_ALIAS:
                continue
            m, i = analysis.mutations[leaf.index], input_of[leaf.index]
            if m.storage_changed and m.set_source is None and analysis.requires_grad_after[i]:
                raise UnsupportedError(
                    f"{info.path} shares storage with {flat.leaves[flat.tensor_indices[i]].path}, which the program "
                    "set_() to a new tensor that requires grad; in training such an output cannot keep that "
                    "tensor's autograd history. Return a clone of it (.clone()), or set_() the input to a clone"
                )


def _check_data_swap_after_recorded_write(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> None:
    """An input that requires grad, written where autograd records it and then given other data by `.data =`:
    eager's history of the write (saved for its backward) and the new data disagree in ways the compiled Function
    does not reproduce (wrong gradients), so it is refused, except where the epilogue gives the input that write's
    history (`LeafMutation.written_after_data`, Note [History Kept Through .data =]). For a subclass input, where
    an assignment changes the wrapper's size (Note [Wrapper Storage]), before or after the write (the backward
    would raise)."""
    for i, fake in enumerate(user_fakes):
        muts = [analysis.mutations[j] for j in layout.leaves_of_input[i]]
        data = analysis.wrapper_data[i]
        assigned = data is not None and data.resizes
        swapped = [m for m in muts if (m.swapped_by_data or assigned) and not m.written_after_data]
        if fake.requires_grad and any(m.data and m.autograd_visible for m in swapped):
            raise UnsupportedError(
                f"{flat.leaves[flat.tensor_indices[i]].path}: the program writes this input where autograd records "
                "it and assigns its `.data` (a tensor subclass's: from a tensor of another size); in training this is "
                "not supported (its gradients would not be eager's). Assign `.data` of a detached clone, or write "
                "under torch.no_grad()"
            )


def check_overlapping_plain_groups(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> None:
    """A plain input whose elements overlap (an expand()) is traced over its whole storage when written (Note
    [as_strided On Inputs]); in training, autograd's gradient of such a view (as_strided onto repeated elements) raises
    in the backward where eager's expand backward does not: refused when a write is recorded. An overlapping input
    traced as a member of a synthetic base (written, or aliased with an input written) that is its own autograd root
    (a leaf, or a view of a base that requires no grad) is refused too, written under no_grad or not: eager gives
    each of its elements its own gradient, where the gradient taken with respect to the base spreads the mean of the
    elements sharing memory (whatever put the group in one base: a write, or another member's set_() or in-place
    view op alone, x1.set_(x1) beside an expanded x0, as the gradient is still taken with respect to the base)."""
    for group in layout.groups:
        owners = {layout.leaves[m].owner for m in group.members}
        needs_grad = any(fake.requires_grad for t, fake in enumerate(user_fakes) if flat.tensor_indices[t] in owners)
        recorded = any(
            analysis.mutations[m].autograd_visible and not analysis.mutations[m].hidden_from_autograd
            for m in group.members
        )
        if not needs_grad:
            continue
        position = {index: t for t, index in enumerate(flat.tensor_indices)}
        for m, (size, stride, offset) in zip(group.members, group.member_meta, strict=True):
            owner = position[layout.leaves[m].owner]
            if layout.trees[owner] is not None:
                continue  # subclass members: see _check_aliased_subclass_group
            elements = torch.as_strided(
                torch.arange(group.base_numel), _static(size), _static(stride), _static((offset,))[0]
            )
            if not elements.numel() or int(torch.bincount(elements.flatten()).max()) < 2:
                continue
            if group.whole_storage and recorded:  # (aliased inputs written through a member that does not overlap pass)
                raise UnsupportedError(
                    f"{layout.leaves[m].path}: an input whose elements overlap in memory (an expand()), that requires "
                    "grad and that the program writes where autograd records it; in training this is not supported "
                    "yet (the gradient through its repeated elements would not be eager's). Pass the tensor it was "
                    "expanded from and expand it inside the function"
                )
            real = flat.values[layout.leaves[m].owner]
            if user_fakes[owner].requires_grad and isinstance(real, torch.Tensor) and real.grad_fn is None:
                raise UnsupportedError(
                    f"{layout.leaves[m].path}: an input whose elements overlap in memory (an expand()), that requires "
                    "grad with no autograd history of its own (a leaf), over a storage the program writes (through it "
                    "or another input, under no_grad) or set_()s or relays another input of; in training this is not "
                    "supported yet (eager gives each of its elements its own gradient, the compiled gradient through "
                    "the storage would spread their mean). "
                    "Pass the tensor it was expanded from and expand it inside the function, or pass .contiguous()"
                )
