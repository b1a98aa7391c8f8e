"""Redistribution of local tensors between placements, through torch's functional collectives.

Purpose: `redistribute_local(local, global_size, src, dst, mesh)` turns this rank's local tensor under placement
`src` into its local tensor under `dst`. Collectives are `torch.ops._c10d_functional.*` followed by `wait_tensor`,
so under make_fx they are graph nodes (a backend may reorder them) and on fake tensors they only compute shapes.
Autograd is not handled here: callers are either below autograd (`__torch_dispatch__`) or inside the
`torch.autograd.Function` that owns the backward rule (see Note [Redistribute Backward] in tensor.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from subclasses.distributed.mesh import MeshSpec
from subclasses.distributed.placement import Partial, Placement, Replicate, Shard

SizeLike = Sequence[int | torch.SymInt]
_c10d = torch.ops._c10d_functional

# Note [Chunk Sizes]
# Shard(d) follows torch.chunk: chunk = ceil(n / world), rank r holds [min(r * chunk, n), min((r + 1) * chunk, n)),
# so trailing ranks may hold less (or nothing). For collectives every rank pads its chunk to `chunk` rows, gathers
# or reduce-scatters, and narrows the result. With a symbolic n the sharding must be even: we `torch._check` that
# n % world == 0 (the policy's relation global == local * world makes it true by construction) and use n // world,
# so no Min/Max expressions reach the shape environment.


def _check(cond: bool | torch.SymBool, message: str) -> None:
    # torch._check is untyped; under symbolic shapes it records a runtime assert instead of specializing.
    torch._check(cond, lambda: message)  # type: ignore[no-untyped-call]  # untyped in torch


def chunk_bounds(n: int | torch.SymInt, world: int, rank: int) -> tuple[int | torch.SymInt, int | torch.SymInt]:
    """(start, length) of rank `rank`'s chunk of a dim of size `n`; see Note [Chunk Sizes]."""
    if isinstance(n, torch.SymInt):
        _check(n % world == 0, f"a symbolic sharded dim must divide evenly by the world size {world}")
        length = n // world
        return rank * length, length
    chunk = -(-n // world)
    start = min(rank * chunk, n)
    return start, max(0, min(chunk, n - start))


def local_size(global_size: SizeLike, placement: Placement, mesh: MeshSpec) -> tuple[int | torch.SymInt, ...]:
    """This rank's local size for a tensor of `global_size` under `placement`."""
    out = list(global_size)
    if isinstance(placement, Shard):
        out[placement.dim] = chunk_bounds(out[placement.dim], mesh.world_size, mesh.rank)[1]
    return tuple(out)


def _chunk(full: torch.Tensor, dim: int, mesh: MeshSpec) -> torch.Tensor:
    start, length = chunk_bounds(full.size(dim), mesh.world_size, mesh.rank)
    return full.narrow(dim, start, length).clone()


def _padded_chunk_len(n: int | torch.SymInt, world: int) -> int | torch.SymInt:
    return n // world if isinstance(n, torch.SymInt) else -(-n // world)


def _pad_to(t: torch.Tensor, dim: int, length: int | torch.SymInt) -> torch.Tensor:
    missing = length - t.size(dim)
    if isinstance(missing, int) and missing == 0:
        return t
    pad_shape: list[int | torch.SymInt] = list(t.shape)
    pad_shape[dim] = missing
    return torch.cat([t, t.new_zeros(pad_shape)], dim=dim)


def all_gather(local: torch.Tensor, dim: int, global_len: int | torch.SymInt, mesh: MeshSpec) -> torch.Tensor:
    """Shard(dim) -> Replicate: gather every rank's chunk along `dim`."""
    chunk = _padded_chunk_len(global_len, mesh.world_size)
    moved = _pad_to(local, dim, chunk).movedim(dim, 0).contiguous()
    gathered: torch.Tensor = _c10d.wait_tensor(_c10d.all_gather_into_tensor(moved, mesh.world_size, mesh.group_name))
    return gathered.movedim(0, dim).narrow(dim, 0, global_len).contiguous()


def reduce_scatter(local: torch.Tensor, dim: int, mesh: MeshSpec) -> torch.Tensor:
    """Partial -> Shard(dim): sum over ranks and keep this rank's chunk of `dim`."""
    n = local.size(dim)
    chunk = _padded_chunk_len(n, mesh.world_size)
    moved = _pad_to(local, dim, chunk * mesh.world_size).movedim(dim, 0).contiguous()
    scattered: torch.Tensor = _c10d.wait_tensor(
        _c10d.reduce_scatter_tensor(moved, "sum", mesh.world_size, mesh.group_name)
    )
    return scattered.movedim(0, dim).narrow(dim, 0, chunk_bounds(n, mesh.world_size, mesh.rank)[1]).contiguous()


def all_reduce(local: torch.Tensor, mesh: MeshSpec) -> torch.Tensor:
    """Partial -> Replicate."""
    reduced: torch.Tensor = _c10d.wait_tensor(_c10d.all_reduce(local.contiguous(), "sum", mesh.group_name))
    return reduced


def redistribute_local(
    local: torch.Tensor, global_size: SizeLike, src: Placement, dst: Placement, mesh: MeshSpec
) -> torch.Tensor:
    """This rank's local tensor under `dst`, from its local tensor under `src` (a new tensor unless src == dst)."""
    if src == dst:
        return local
    if not mesh.has_group:
        return local.clone()  # one rank: every placement's local tensor is the global tensor
    if isinstance(dst, Partial):
        # Replicate -> Partial keeps the value on rank 0 and zeros elsewhere; other sources go through Replicate.
        full = redistribute_local(local, global_size, src, Replicate(), mesh)
        return full.clone() if mesh.rank == 0 else torch.zeros_like(full)
    if isinstance(src, Partial):
        if isinstance(dst, Shard):
            return reduce_scatter(local, dst.dim, mesh)
        return all_reduce(local, mesh)
    if isinstance(src, Replicate):
        assert isinstance(dst, Shard), "BUG: Replicate -> Replicate handled above"
        return _chunk(local, dst.dim, mesh)
    full = all_gather(local, src.dim, global_size[src.dim], mesh)
    return full if isinstance(dst, Replicate) else _chunk(full, dst.dim, mesh)
