"""Training rules for tensor subclass inputs that require grad and whose storage or size the program changes where
autograd does not record it (under no_grad): which of them the epilogue changes exactly as inference does
(`set_under_no_grad_inputs`), and which are refused (`refuse_leaves_resized_under_no_grad`).

Input: `FlatInputs`, `DenseLayout`, `Analysis`. Output: tensor input indexes (positions in `DenseLayout.trees`), or
UnsupportedError naming the input and the rule. Invariants: pure functions of compile-time records, as the rest of
`training_rules`.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.schemas import Analysis, DenseLayout, FlatInputs, LeafMutation


def kernel_strides(m: LeafMutation) -> bool:
    """The leaf ends with no elements, or set_() to a tensor the program computed with a dim of size 1: strides the
    kernels choose (Note [Strides The Kernels Choose]), which the epilogue's fake-traced metadata may not match."""
    size = m.final_meta[0]
    computed = m.storage_changed and m.set_source is None
    return any(isinstance(d, int) and (d == 0 or (computed and d == 1)) for d in size)


def _lone_subclass_inputs(layout: DenseLayout, analysis: Analysis) -> Iterator[tuple[int, list[LeafMutation]]]:
    """Subclass inputs with dense leaves, in no alias group and with no `.data =` of the wrapper, and their leaves'
    mutations."""
    grouped = {m for g in layout.groups for m in g.members}
    for i, tree in enumerate(layout.trees):
        leaves = layout.leaves_of_input[i]
        if tree is None or not leaves or any(j in grouped for j in leaves) or analysis.wrapper_data[i] is not None:
            continue
        yield i, [analysis.mutations[j] for j in leaves]


def set_under_no_grad_inputs(layout: DenseLayout, analysis: Analysis) -> tuple[int, ...]:
    """Subclass inputs set_() under no_grad only (Note [Inputs Written In Training])."""
    out = []
    for i, muts in _lone_subclass_inputs(layout, analysis):
        if analysis.inplace_replay[i] or (analysis.read_after_set and analysis.read_after_set[i]):
            continue
        if all(_hidden_swap(m) for m in muts):
            out.append(i)
    return tuple(out)


def _hidden_swap(m: LeafMutation) -> bool:
    return (
        m.swapped
        and not (m.swapped_by_data or m.set_under_grad or m.resized or m.autograd_visible)
        and not kernel_strides(m)
    )


def inner_written_inputs(layout: DenseLayout, analysis: Analysis) -> tuple[int, ...]:
    """Subclass inputs whose inner tensors the program wrote directly, and nothing else (Note [Inputs Written In
    Training])."""
    out = []
    for i, muts in _lone_subclass_inputs(layout, analysis):
        if analysis.wrapper_version_bumped[i] or analysis.inplace_replay[i]:
            continue
        if any(m.storage_changed or m.swapped or m.resized or m.metadata or m.final_data for m in muts):
            continue
        if any(m.data for m in muts):
            out.append(i)
    return tuple(out)


def refuse_leaves_resized_under_no_grad(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> None:
    """Note [Leaves Laid Out Anew Under no_grad];
    for `.data =`, Note [Gradient Accumulators Of Leaves]."""
    for i, (tree, index) in enumerate(zip(layout.trees, flat.tensor_indices, strict=True)):
        real = flat.values[index]
        if not isinstance(real, torch.Tensor) or not (real.is_leaf and real.requires_grad):
            continue
        read = bool(analysis.read_after_hidden_resize and analysis.read_after_hidden_resize[i])
        if tree is not None and analysis.releaf_sizes and analysis.releaf_sizes[i] is not None:
            continue  # made a leaf again in the trace: Note [Leaves Laid Out Anew Under no_grad]
        if tree is None and read:
            raise UnsupportedError(
                f"{flat.leaves[index].path}: an input that is an autograd leaf and requires grad is set_() under "
                "torch.no_grad() to a tensor of another size (or assigned one by `.data =` before any use with "
                "grad, or after uses whose results all died, or laid out anew so by an in-place view op under "
                "no_grad), and the program then uses it with grad: eager's gradient reaches it in the new size, where "
                "the compiled one is checked against the old (Note [Leaves Laid Out Anew Under no_grad], Note "
                "[Gradient Accumulators Of Leaves]); not supported in training. Call set_() on a clone, or use the "
                "other tensor itself"
            )
        if tree is not None and read:
            raise UnsupportedError(
                f"{tree.path}: a tensor subclass input that is an autograd leaf and requires grad gets another size "
                "from an in-place view op under torch.no_grad() (t_, transpose_, ...) or from a `.data =` before any "
                "use with grad, and the program then uses it with grad: eager's gradient reaches it in the new size, "
                "where the compiled one is checked against the old (Note [Leaves Laid Out Anew Under no_grad], "
                "Note [Gradient Accumulators Of Leaves]); not supported in training. Use the out-of-place view op "
                "(x = x.t()) or the assigned tensor itself, or change its size with grad enabled"
            )
