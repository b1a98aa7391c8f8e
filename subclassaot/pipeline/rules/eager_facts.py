"""Facts of eager's run a rule reads from the eager record where the functional run once simulated them (Note [The
Eager Record], reading a fact).

Input: a functional run's SwapRecord: the places of the program's calls it noted, its simulation of the fact, and
`SwapRecord.eager`, which builds the record the first time a rule asks.
Output: eager's fact, or the run's simulation where the record has no event at that place.
"""

from __future__ import annotations

import torch

from subclassaot.pipeline.rules.swap_record import SwapRecord

__all__ = ["source_bumps_at_set"]


def source_bumps_at_set(swaps: SwapRecord, x: torch.Tensor) -> int | None:
    """How many times eager had advanced the version counter of the tensor the last set_() of `x` under grad took,
    when that set_() read its history (before its own advance; None: no source): its event's `found` for its second
    input (`LeafMutation.source_bumps_at_set`); the run's `bump_count` at the set_() where the record has none."""
    simulated = swaps.grad_set_source_bumps.get(id(x))
    place = swaps.grad_set_places.get(id(x))
    if simulated is None or place is None or swaps.eager is None:
        return simulated
    record = swaps.eager.record()
    event = None if record is None else record.try_get_event("Tensor.set_", *place)
    if event is None or not event.grad_enabled or len(event.inputs) < 2 or event.inputs[1] == event.inputs[0]:
        return simulated  # (eager raised before it, or the place holds no set_() of a tensor onto another)
    return event.found[1]
