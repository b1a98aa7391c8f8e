"""Stage `analyze`, output regeneration: views of an intermediate subclass whose `.data` the program assigned after
taking them, replayed from the intermediate rebuilt as it was when viewed, which then takes the metadata eager's
`.data =` left on it.

Input: the root a view chain starts at, its first view record, the run. Output: whether the rule applies, and the
`Replay` with the root's final metadata. Invariants: pure reads of the run's records (Note [Wrapper Data
Assignment]).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.pipeline.desugar import leaf_meta
from subclassaot.pipeline.functional_run import FunctionalRun
from subclassaot.pipeline.rules.swap_record import ViewRecord
from subclassaot.schemas import InputIndex, Replay

__all__ = ["assigned_root", "with_root_data_meta"]


def assigned_root(
    t: torch.Tensor,
    first: ViewRecord,
    run: FunctionalRun,
    input_by_id: dict[int, InputIndex],
    earlier: dict[int, int],
) -> bool:
    """`t`, the intermediate subclass a view chain starts at, had its metadata changed only by `.data =` after
    the chain's first view (Note [Wrapper Data Assignment])."""
    assignments = run.swaps.wrapper_data.get(id(t), [])
    return (
        bool(assignments)
        and is_traceable_subclass(t)
        and id(t) not in input_by_id
        and id(t) not in earlier
        and id(t) not in run.swaps.inplace_views
        and all(a.seq > first.seq for a in assignments)
    )


def with_root_data_meta(replay: Replay | None, t: torch.Tensor) -> Replay | None:
    """`replay` (from `t`, an `assigned_root`) with `t`'s metadata at the end where they differ from the root's when
    viewed (Note [Wrapper Data Assignment])."""
    if replay is None or replay.root_meta == leaf_meta(t):
        return replay
    return replace(replay, root_data_meta=leaf_meta(t))
