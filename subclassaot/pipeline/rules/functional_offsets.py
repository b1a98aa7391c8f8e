"""Where the functional run's storage offsets are not eager's, and eager's from them.

Input: functional tensors of the analysis's run. Output: eager's offset of a tensor on a written input's storage
(`eager_offset`), eager's metadata of a leaf on an input's storage (`alias_meta`).
Invariants: reads the run only.
"""

from __future__ import annotations

import torch

from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun
from subclassaot.schemas import DenseIndex, Meta
from subclassaot.torch_internals import has_data_mutation, inner_storage_offset, symint_expr


def eager_offset(t: torch.Tensor, original: torch.Tensor) -> int | torch.SymInt:
    """Note [as_strided On Inputs]: eager's storage offset of FunctionalTensor `t`, which is on the storage of
    `original` (an input's alias with its original metadata); `t`'s own where nothing wrote that storage."""
    if not has_data_mutation(original):
        return t.storage_offset()
    return inner_storage_offset(t) + (original.storage_offset() - inner_storage_offset(original))


def alias_meta(leaf: torch.Tensor, run: FunctionalRun, j: DenseIndex, original: DenseIndex | None) -> Meta:
    """Eager's metadata of FunctionalTensor `leaf`, on the storage dense input `j` has at the end (`original`: the
    input whose storage that was as the inputs came, if any): the offset shifted where the input runs as a clone at
    another offset, else corrected by Note [as_strided On Inputs]."""
    meta = leaf_meta(leaf)
    shift = run.clone_offset_shift.get(j)
    if shift is not None and not (isinstance(shift, int) and shift == 0):
        return (meta[0], meta[1], symint_expr(leaf.storage_offset() + shift))
    if original is not None:
        return (meta[0], meta[1], symint_expr(eager_offset(leaf, run.originals[original])))
    return meta


__all__ = ["alias_meta", "eager_offset"]
