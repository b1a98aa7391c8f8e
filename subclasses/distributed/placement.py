"""Placements of a 1-D-mesh sharded tensor and the spec that is its flatten ctx.

Purpose: `Shard(dim)`, `Replicate()`, `Partial("sum")` say how the global tensor relates to each rank's local
tensor; `ShardingSpec` (mesh description + placements) is `ShardedTensor`'s ctx: frozen dataclasses, compared by
`==`, pickled deterministically, holding no process group and no sizes (see Note [Sharding Ctx Holds No Sizes]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

from subclasses.distributed.mesh import MeshSpec

# Note [Sharding Ctx Holds No Sizes]
# DTensor's spec carries the global shape and stride, so any change of batch size is a ctx change and recompiles
# (PRIOR_ART 3.2, #163820). Here the global size is the wrapper's outer size (what `__tensor_unflatten__` is given,
# possibly symbolic) and the ctx holds only what guards must compare by value: the mesh (world size, rank, group
# name) and the placements. A rule that needs the global size reads it from the wrapper (`x.shape`), never the ctx;
# a constructor given no outer size assumes even sharding (global = local * world along a Shard dim).

ReduceOp: TypeAlias = Literal["sum"]


@dataclass(frozen=True, slots=True)
class Shard:
    """The global tensor is split into `world` chunks along `dim` (torch.chunk semantics); rank r holds chunk r."""

    dim: int


@dataclass(frozen=True, slots=True)
class Replicate:
    """Every rank holds the whole global tensor."""


@dataclass(frozen=True, slots=True)
class Partial:
    """The global tensor is the reduction (`reduce_op`) of the local tensors of all ranks."""

    reduce_op: ReduceOp = "sum"


Placement: TypeAlias = Shard | Replicate | Partial


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardingSpec:
    """`ShardedTensor`'s ctx: where the tensor lives and how it is laid out over the mesh."""

    mesh: MeshSpec
    placements: tuple[Placement, ...]  # len = mesh ndim (1); indexed by mesh dim

    def __post_init__(self) -> None:
        if len(self.placements) != 1:
            raise ValueError(
                f"ShardingSpec: a 1-D mesh takes exactly one placement, got {self.placements!r}; "
                "write placements=(Shard(0),) (a one-element tuple)"
            )

    @property
    def placement(self) -> Placement:
        return self.placements[0]

    def with_placement(self, placement: Placement) -> ShardingSpec:
        return ShardingSpec(mesh=self.mesh, placements=(placement,))


def shard_dim(placement: Placement) -> int | None:
    """The sharded dim of a `Shard`, else None."""
    return placement.dim if isinstance(placement, Shard) else None
