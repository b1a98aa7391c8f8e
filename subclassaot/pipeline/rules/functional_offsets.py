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

# Note [Offsets After A Write]
# Functionalization regenerates a written tensor from a fresh value, which starts at offset 0 where the storage's base
# (the input) started at its own offset. A FunctionalTensor keeps eager's offset for the tensors that had one before the
# write (the input itself, views taken before, in-place view ops on them), but a view op run after the write computes
# its offset from the regenerated value: after `x0.mul_(2.0)` on a (4, 3) input at offset 12, `x0[1:]` reports offset 3,
# eager's 15. So there are two frames, and every offset crosses between them by one shift, the input's original offset
# less its original offset behind the wrapper (0 where nothing wrote the storage):
# - Reading eager's offsets (`eager_offset`): the analysis records, for an input's final metadata (one set_() onto
#   another input's storage too) and for outputs that alias an input's storage, the offset behind the wrapper plus the
#   shift. A view of an input is rebuilt by replaying its view chain on the real input, so its offsets are never read;
#   an output the program set_() is rebuilt from its leaves' metadata at analysis, corrected so.
# - Absolute offsets on written inputs: those the program names (as_strided(), set_(storage, offset, ...)) are eager's:
#   passed on as they are they would name other elements, or none ("setStorage: ... out of bounds"). They are moved into
#   the regenerated frame (minus the shift), and the wrapper keeps eager's offset.
# - Absolute offsets across a frame change: functionalization regenerates a view by replaying its view ops with their
#   arguments as they were, so an as_strided() view (or a set_(storage, offset, ...) target) holds an absolute offset in
#   the frame of its time. A later write through the input itself starts a new frame (a write through a view of it
#   scatters into it and keeps the frame), and the view's replay names other elements. The shift at each such view is
#   recorded; once the current shift differs, before the next op and at the end of the run, the trace raises
#   StorageReachError and the input is traced over its whole storage (Note [as_strided On Inputs]), whose synthetic base
#   starts at 0 in every frame.


def eager_offset(t: torch.Tensor, original: torch.Tensor) -> int | torch.SymInt:
    """Note [Offsets After A Write]: eager's storage offset of FunctionalTensor `t`, which is on the storage of
    `original` (an input's alias with its original metadata); `t`'s own where nothing wrote that storage."""
    if not has_data_mutation(original):
        return t.storage_offset()
    return inner_storage_offset(t) + (original.storage_offset() - inner_storage_offset(original))


def alias_meta(leaf: torch.Tensor, run: FunctionalRun, j: DenseIndex, original: DenseIndex | None) -> Meta:
    """Eager's metadata of FunctionalTensor `leaf`, on the storage dense input `j` has at the end (`original`: the
    input whose storage that was as the inputs came, if any): the offset shifted where the input runs as a clone at
    another offset, else corrected by Note [Offsets After A Write]."""
    meta = leaf_meta(leaf)
    shift = run.clone_offset_shift.get(j)
    if shift is not None and not (isinstance(shift, int) and shift == 0):
        return (meta[0], meta[1], symint_expr(leaf.storage_offset() + shift))
    if original is not None:
        return (meta[0], meta[1], symint_expr(eager_offset(leaf, run.originals[original])))
    return meta


__all__ = ["alias_meta", "eager_offset"]
