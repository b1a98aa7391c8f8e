"""Stage `trace` (training), deferred backward errors: views of leaf inputs replayed before the compiled call, so
that autograd runs their nodes after the Function's, as eager ran them after the failing node (Note [Backward Errors
Are Deferred]).

Input: the `Analysis`, `FlatInputs` and `DenseLayout`, and the outputs that bypass the Function to a leaf input
(`TangentPatterns.leaf_bypass`).
Output: those outputs where each is such a view (else None); the analysis with their replays made early.
Invariants: only outputs whose source input the program leaves untouched: replayed before or after the epilogue,
they are the same views of the same tensor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Set

import torch

from subclassaot.schemas import Analysis, DenseLayout, FlatInputs, InputIndex, OutputKind, ReplaySource


def early_leaf_views(
    analysis: Analysis, flat: FlatInputs, layout: DenseLayout, outputs: Set[int]
) -> frozenset[int] | None:
    """`outputs` where each is a view replayed from a leaf input the program does not change, else None."""
    for o in outputs:
        info = analysis.outputs[o]
        r = info.replay
        if info.kind is not OutputKind.TENSOR or r is None or r.source is not ReplaySource.INPUT:
            return None
        if r.then_set or r.late_steps or r.split_made:
            return None
        real = flat.values[r.index]
        if not isinstance(real, torch.Tensor) or not real.is_leaf:
            return None
        t = flat.tensor_indices.index(InputIndex(r.index))
        if any(analysis.mutations[j].any or analysis.mutations[j].version_bumped for j in layout.leaves_of_input[t]):
            return None
    return frozenset(outputs)


def replays_before_call(analysis: Analysis, outputs: Set[int]) -> Analysis:
    """The analysis with the replays of `outputs` made before the compiled call."""
    infos = tuple(
        dataclasses.replace(info, replay=dataclasses.replace(info.replay, before_epilogue=True))
        if o in outputs and info.replay is not None
        else info
        for o, info in enumerate(analysis.outputs)
    )
    return dataclasses.replace(analysis, outputs=infos)
