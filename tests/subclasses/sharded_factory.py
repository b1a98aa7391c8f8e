"""Input kinds for `python -m subclassaot fuzz --subclass tests.subclasses.sharded_factory:FACTORY`: the sample
ShardedTensor on a mesh of one rank that has a real process group (a one-rank gloo group on 127.0.0.1, started here
when none is running), so that its redistributions issue functional collectives as on many ranks.
"""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist

from subclasses.distributed import MeshSpec, Replicate, Shard, ShardedTensor, distribute_tensor, mesh_from_group
from tests.subclasses.distributed_worker import free_port


@functools.cache
def one_rank_group_mesh() -> MeshSpec:
    """The mesh of the world group, a one-rank gloo group started here if none is."""
    if not dist.is_initialized():
        store = dist.TCPStore("127.0.0.1", free_port(), 1, True)  # type: ignore[attr-defined]  # not re-exported in the stub
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    return mesh_from_group()


def sharded_on_group() -> ShardedTensor:
    """A (4, 6) float32 tensor sharded on dim 1 over the one-rank group's mesh."""
    full = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 8.0 - 1.0
    return distribute_tensor(full, one_rank_group_mesh(), (Shard(1),))


def replicated_on_group() -> ShardedTensor:
    """A (4, 6) float32 tensor replicated over the one-rank group's mesh."""
    full = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 8.0 - 1.0
    return distribute_tensor(full, one_rank_group_mesh(), (Replicate(),))
