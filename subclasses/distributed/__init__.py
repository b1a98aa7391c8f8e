"""A DTensor-like sharded tensor over a 1-D mesh of torch.distributed ranks (`ShardedTensor`).

`tensor.py` (the subclass and its autograd Functions), `ops.py` (its op table), `propagation.py` (placement rules),
`collectives.py` (redistribution through functional collectives), `placement.py`, `mesh.py`.
"""

from subclasses.distributed import ops as _ops  # noqa: F401  # registers the op table
from subclasses.distributed.mesh import MeshSpec, get_group, local_mesh, mesh_from_group, try_get_group
from subclasses.distributed.placement import Partial, Placement, Replicate, Shard, ShardingSpec
from subclasses.distributed.tensor import ShardedTensor, distribute_tensor

__all__ = [
    "MeshSpec",
    "Partial",
    "Placement",
    "Replicate",
    "Shard",
    "ShardedTensor",
    "ShardingSpec",
    "distribute_tensor",
    "example",
    "get_group",
    "local_mesh",
    "mesh_from_group",
    "try_get_group",
]


def example() -> ShardedTensor:
    """A (4, 6) float32 tensor sharded on dim 1 over the group-less mesh of one rank (world size 1)."""
    import torch

    full = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    return distribute_tensor(full, local_mesh(), (Shard(1),))
