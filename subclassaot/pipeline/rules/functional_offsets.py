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

# Note [Offsets Of Views Of Written Inputs]
# Functionalization regenerates a written tensor from a fresh value, and a view taken of it afterwards reports that
# value's storage offset, not the offset the view has on the input's storage in eager (fuzz seed 8000 #2407: after
# `x0.add_(x0)` on an input at offset 2, `x0.unsqueeze(-2)` reports offset 0 for one inner tensor, 2 for the
# other). The pipeline mostly never reads those offsets: a view of an input is rebuilt by replaying its view chain
# on the input at run time. An output that the program set_() (`Replay.then_set`, the program's own set_) is
# rebuilt from the metadata its leaves had at analysis: those are eager's, by Note [Offsets After A Write] (`alias_meta`
# for outputs, `leaf_mutations` for inputs set_() onto another input's storage). Such outputs were refused until
# that held for every leaf (fuzz seed 44000 #1228, #4584, #7294: `t0 = x0.view(...); t0.set_(x0); t0.add_(x0)`).

# Note [Offsets After A Write]
# A FunctionalTensor keeps eager's offset for the tensors that had one before a write to its storage (the input
# itself, views taken before, in-place view ops on them), but a view op run after the write computes its offset from
# the regenerated value, which starts at offset 0 where the storage's base (the input) started at its own offset:
# after `x0.mul_(2.0)` on a (4, 3) input at offset 12, `x0[1:]` reports offset 3, eager's 15 (fuzz seed 9000 #8570:
# `x0.set_(x0.transpose(1, 1))` then ended x0 at offset 0). The offsets functionalization keeps behind the wrappers
# are all relative to the regenerated value, so eager's offset of a tensor on the input's storage is that offset plus
# the input's original offset minus its original one behind the wrapper (0 where nothing wrote the storage). The
# analysis records that offset for an input's final metadata (one set_() onto another input's storage too: fuzz seed
# 44000 #109, `x0.set_(x1.unsqueeze(0))` after `x1.add_(-1.0)`, x1 at offset 2) and for outputs that alias the
# input's storage. Absolute offsets the program names go the other way (Note [Absolute Offsets On Written Inputs]).


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
