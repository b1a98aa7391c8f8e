"""Factories for `python -m subclassaot check tests.subclasses.dtensor_factory:FACTORY` on torch's DTensor.

Each starts a one-rank gloo process group on 127.0.0.1 when none is running (the checker runs in its own process).
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

from tests.subclasses.distributed_worker import free_port


@functools.cache
def one_rank_mesh() -> DeviceMesh:
    """A CPU mesh over a one-rank gloo group (started here if none is)."""
    if not dist.is_initialized():
        store = dist.TCPStore("127.0.0.1", free_port(), 1, True)  # type: ignore[attr-defined]  # not re-exported in the stub
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    return DeviceMesh("cpu", list(range(dist.get_world_size())))


def sharded() -> DTensor:
    """A (4, 6) float32 DTensor sharded on dim 0."""
    return distribute_tensor(torch.arange(24, dtype=torch.float32).reshape(4, 6), one_rank_mesh(), [Shard(0)])


def replicated() -> DTensor:
    """A (4, 6) float32 DTensor replicated."""
    return distribute_tensor(torch.arange(24, dtype=torch.float32).reshape(4, 6), one_rank_mesh(), [Replicate()])
