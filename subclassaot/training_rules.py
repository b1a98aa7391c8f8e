"""Training rules shared by the stages: which inputs get a synthetic-base gradient, which subclass inputs come back
from the compiled autograd.Function as wrappers, and what training refuses (`check_training_supported`).

Input: `DenseLayout`, `Analysis`, the fake user inputs. Output: index tuples and refusals (UnsupportedError naming
the input and the rule). Invariants: pure functions of compile-time records; no tracing here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.schemas import AliasGroupRef, Analysis, DenseIndex, DenseLayout, FlatInputs, LeafMutation

# Note [Subclass Inputs Mutated In Training]
# Autograd sees a subclass at the wrapper level: its inner tensors carry no history. So when the program writes
# into a subclass input that requires grad, writing the new inner values into the real input (as inference does)
# would leave autograd blind. Instead the compiled autograd.Function also returns the input's new value as a
# wrapper (rebuilt from the graph's ORIGINAL updates of its leaves), differentiable like any output, and the
# epilogue applies `input.copy_(new)` at the wrapper level with grad enabled, which autograd records as eager does.
# In the backward graph the program runs on a clone of the input (Note [Training Through A Joint Graph]), whose mutated self
# is that output. An input whose metadata the program also changes by in-place view ops (t_, unsqueeze_,
# as_strided_) gets its new value with its final metadata: the epilogue writes the original storage below autograd
# (as inference does), replays the view ops on the real input, then copies the new value in at the wrapper level
# (the copy replaces all of it, so the gradient reaches the input through the Function alone, as eager's through its
# ops). An input whose storage changes (set_, resize_) is refused.


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
        if tree is None or not fake.requires_grad or not any(m.data for m in muts):
            continue
        if any(m.storage_changed or m.swapped or m.resized for m in muts):
            continue
        if any(m.metadata or m.final_data for m in muts) and not _recorded_view_ops(analysis, i, muts):
            continue
        if any(j in grouped for j in leaves):
            continue
        out.append(i)
    return tuple(out)


def _recorded_view_ops(analysis: Analysis, i: int, muts: Sequence[LeafMutation]) -> bool:
    """The input's metadata changes are in-place view ops the epilogue replays, and they and its writes all happened
    where autograd records them (no_grad or `.data` ones are refused: Note [Subclass Inputs Mutated In
    Training])."""
    steps = analysis.inplace_replay[i]
    visible = all(m.autograd_visible and not m.hidden_from_autograd for m in muts if m.data)
    return bool(steps) and visible and all(step.grad_enabled for step in steps)


# Note [Aliased Inputs In Training]
# Inputs that share storage are traced as views of one synthetic base (Note [Synthetic Bases]). In training, that base
# is what autograd sees: the runtime makes it from the real inputs (an as_strided view of one member, recorded by
# autograd), passes it to the compiled autograd.Function, and the backward returns the gradient with respect to it,
# which autograd carries back through the as_strided to the real tensors behind the members, the way eager's
# gradients reach them through both aliases. A mutation of a member is a copy into that base, which autograd
# records as well. Subclass members are not covered (refused).


def grad_bases(layout: DenseLayout, user_fakes: Sequence[torch.Tensor]) -> tuple[int, ...]:
    """Graph inputs that are synthetic bases of plain inputs one of which requires grad."""
    requires_grad = {
        layout.leaves[leaves[0]].owner: fake.requires_grad
        for leaves, fake in zip(layout.leaves_of_input, user_fakes, strict=True)
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


# Note [Metadata Changes Of Aliased Inputs In Training]
# A member of an alias group (Note [Aliased Inputs In Training]) whose metadata the program changes in place (a.t_())
# is traced as an in-place view op on a view of the synthetic base, and the epilogue replays it on the real member,
# where autograd records it as in eager. Gradients match eager when exactly one member changes its metadata, by
# in-place view ops run with grad enabled, and no member is written. With two members changed, or one changed and written, autograd's view tracking of the traced
# views of the base gives other gradients than eager's (checked by the parity oracle), so those are refused.


def _unsupported_group_change(
    members: Sequence[DenseIndex], analysis: Analysis, input_of: Callable[[DenseIndex], int]
) -> DenseIndex | None:
    """The member whose change makes the group unsupported in training (Note [Metadata Changes Of Aliased Inputs
    In Training]), if any. `input_of`: the tensor input a member belongs to."""
    muts = [(m, analysis.mutations[m]) for m in members]
    swapped = [m for m, mut in muts if mut.storage_changed]
    if swapped:
        return swapped[0]
    meta = [m for m, mut in muts if mut.metadata]
    if not meta:
        return None
    # Replayed as view ops (subclasses) or as_strided_ (plain; recorded iff autograd saw the change)
    steps = analysis.inplace_replay[input_of(meta[0])]
    recorded = all(step.grad_enabled for step in steps) and all(
        mut.autograd_visible and not mut.hidden_from_autograd for m, mut in muts if m in meta
    )
    if len({input_of(m) for m in meta}) > 1 or any(mut.data for _, mut in muts) or not recorded:
        return meta[-1]
    return None


def check_training_supported(
    flat: FlatInputs, layout: DenseLayout, analysis: Analysis, user_fakes: Sequence[torch.Tensor]
) -> None:
    by_object = {id(fake): t for t, fake in reversed(list(enumerate(user_fakes)))}

    def input_of(m: DenseIndex) -> int:
        # one object passed twice is one input (its first position)
        return by_object[id(user_fakes[flat.tensor_indices.index(layout.leaves[m].owner)])]

    for group in layout.groups:
        owners = {layout.leaves[m].owner for m in group.members}
        needs_grad = any(fake.requires_grad for t, fake in enumerate(user_fakes) if flat.tensor_indices[t] in owners)
        changed = _unsupported_group_change(group.members, analysis, input_of)
        if needs_grad and changed is not None:
            raise UnsupportedError(
                f"{layout.leaves[changed].path} shares storage with another input that requires grad and the "
                "program changes its storage in place (set_), or the metadata (t_, unsqueeze_, ...) of several "
                "members or of one that is also written; in training this is not supported yet (its gradients "
                "would not be eager's). Pass one base tensor and take the views inside the function"
            )
        for t_index, (tree, fake) in enumerate(zip(layout.trees, user_fakes, strict=True)):
            if flat.tensor_indices[t_index] in owners and fake.requires_grad and tree is not None:
                raise UnsupportedError(
                    f"{flat.leaves[flat.tensor_indices[t_index]].path} is a tensor subclass that requires grad and "
                    "shares storage with another input; in training this is not supported yet. Pass one base "
                    "tensor and take the views inside the function"
                )
    supported = (*wrapper_update_inputs(layout, analysis, user_fakes), *_metadata_only_inputs(layout, analysis))
    for t_index, (tree, fake) in enumerate(zip(layout.trees, user_fakes, strict=True)):
        if tree is not None and fake.requires_grad and t_index not in supported:
            if any(analysis.mutations[j].any for j in layout.leaves_of_input[t_index]):
                raise UnsupportedError(
                    f"{tree.path}: a tensor subclass input that requires grad has its metadata or storage changed "
                    "in place (t_, set_, resize_ ...); in training only data writes to such inputs are supported "
                    "yet. Change a clone instead, or run it under torch.no_grad()"
                )
