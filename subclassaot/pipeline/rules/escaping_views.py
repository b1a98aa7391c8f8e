"""Part of stage `trace` (training): refuse a written view input whose own autograd history loses the gradient of
elements it reaches (Note [as_strided On Inputs]).

Input: `FlatInputs` (the real values of this call), `DenseLayout`, `Analysis`.
Output: None, or an UnsupportedError naming the input.
Invariants: reads the real inputs' autograd graphs only (autograd.grad to their bases: nothing accumulates).
"""

from __future__ import annotations

from typing import cast

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.schemas import Analysis, DenseLayout, FlatInputs

_MAX_CHAIN = 16


def refuse_written_escaping_views(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> None:
    """Note [as_strided On Inputs]."""
    for i, k in enumerate(flat.tensor_indices):
        real = flat.values[k]
        if not isinstance(real, torch.Tensor) or not real.requires_grad or real.is_leaf or real._base is None:
            continue
        own = layout.leaves_of_input[i]
        muts = [analysis.mutations[j] for j in own]
        # a write autograd records sends the gradient to the base; any other bump of the counter the view shares
        # makes eager rebuild its history from the base at its next read (Note [Stale View Functions]); a change of
        # another input over the storage (`.data =` of the base) makes the compiled call
        # send the group's gradients through the base, where eager's view keeps its own history
        # as does a group over the whole storage (the program reads outside its members)
        groups = [g for g in layout.groups if set(own) & set(g.members)]
        others = [analysis.mutations[m] for g in groups for m in g.members]
        if (
            not any((m.data and m.autograd_visible and not m.hidden_from_autograd) or m.version_bumped for m in muts)
            and not any(m.any or m.version_bumped for m in others)
            and not any(g.whole_storage for g in groups)
        ):
            continue
        if _has_as_strided(real) and _history_loses_gradient(real, real._base):
            raise UnsupportedError(
                f"{flat.leaves[k].path}: an as_strided() view that reaches elements of its base that the view it "
                "was taken of does not, and that the program writes (or changes in place, or changes another input "
                "over its storage, or reads outside the inputs over it): eager's write sends the "
                "gradient to the base, or eager rebuilds the view's history from the base at its next read, while "
                "the view's own history loses it (Note [as_strided On Inputs]); not supported in training. Take the "
                "as_strided() view of the base itself (base.as_strided(...)), or write a clone"
            )


def _has_as_strided(t: torch.Tensor) -> bool:
    """Whether t's history back to its base holds an as_strided()."""
    base = t._base
    stop = None if base is None else base.grad_fn
    node = t.grad_fn
    for _ in range(_MAX_CHAIN):
        if node is None or node is stop:
            return False
        if type(node).__name__ == "AsStridedBackward0":
            return True
        node = node.next_functions[0][0] if node.next_functions else None
    return True  # a longer chain: checked by its gradients


def _history_loses_gradient(t: torch.Tensor, base: torch.Tensor) -> bool:
    try:
        with torch.enable_grad():
            weights = torch.ones_like(t)
            # None where the history does not reach the base (allow_unused)
            history = cast(
                torch.Tensor | None, torch.autograd.grad(t, base, weights, retain_graph=True, allow_unused=True)[0]
            )
            view = base.as_strided(t.size(), t.stride(), t.storage_offset())
            direct = cast(torch.Tensor | None, torch.autograd.grad(view, base, weights, allow_unused=True)[0])
    except RuntimeError:
        return False  # a history autograd cannot run now: the backward says so in eager too
    if history is None or direct is None:
        return history is not direct
    return not torch.equal(history, direct)
