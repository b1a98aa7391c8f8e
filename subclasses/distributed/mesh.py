"""A 1-D device mesh: its comparable description (`MeshSpec`, part of the ctx) and a run-time registry of groups.

Purpose: collectives need a process group; ctx must not hold one (it is compared, deep-copied and pickled by guards).
`MeshSpec` holds the world size, this process's rank and the group's name; the group itself is looked up by name
when a collective runs (see Note [Mesh Registry]).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch.distributed as dist

# Note [Mesh Registry]
# `mesh_from_group(pg)` registers `pg` under `pg.group_name` (the name torch's functional collectives resolve too)
# and returns a MeshSpec naming it. The functional collectives (`torch.ops._c10d_functional.*`) take the group
# name, so a traced graph holds a string constant, never a group object, and a compiled entry stays valid for as
# long as a group of that name exists in the process. A mesh of one rank needs no group at all: `local_mesh()` has
# the empty group name and every redistribution over it is a local copy (no collective is issued), which is what
# single-process tests and `check_subclass` use.


@dataclass(frozen=True, slots=True, kw_only=True)
class MeshSpec:
    """A 1-D mesh as guards see it: comparable, hashable, deterministic to pickle."""

    world_size: int
    rank: int
    group_name: str  # "" only for the group-less mesh of one rank

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"MeshSpec: rank {self.rank} is outside [0, {self.world_size}); check world_size")
        if self.world_size > 1 and not self.group_name:
            raise ValueError(
                f"MeshSpec: a mesh of {self.world_size} ranks needs a process group name; "
                "build it with mesh_from_group(pg) after torch.distributed.init_process_group(...)"
            )

    @property
    def has_group(self) -> bool:
        return bool(self.group_name)


_GROUPS: dict[str, dist.ProcessGroup] = {}
_LOCK = threading.Lock()


def local_mesh() -> MeshSpec:
    """The mesh of this process alone, with no process group (redistributions are local copies)."""
    return MeshSpec(world_size=1, rank=0, group_name="")


def mesh_from_group(group: dist.ProcessGroup | None = None) -> MeshSpec:
    """Register `group` (default: the world group) by name and describe it as a 1-D mesh."""
    if not dist.is_initialized():
        raise RuntimeError(
            "mesh_from_group: torch.distributed is not initialized; call "
            'dist.init_process_group("gloo", rank=..., world_size=...) first, or use local_mesh() for one process'
        )
    pg = dist.group.WORLD if group is None else group
    if pg is None:
        raise RuntimeError("mesh_from_group: no default process group; pass the group explicitly")
    name = pg.group_name
    with _LOCK:
        _GROUPS[name] = pg
    return MeshSpec(world_size=dist.get_world_size(pg), rank=dist.get_rank(pg), group_name=name)


def try_get_group(name: str) -> dist.ProcessGroup | None:
    """The registered group named `name`, or None."""
    with _LOCK:
        return _GROUPS.get(name)


def get_group(mesh: MeshSpec) -> dist.ProcessGroup:
    """The process group of `mesh`; raises if it was never registered in this process."""
    found = try_get_group(mesh.group_name)
    if found is None:
        raise RuntimeError(
            f"no process group named {mesh.group_name!r} is registered in this process (mesh {mesh}); "
            "call mesh_from_group(pg) in every process before using tensors on that mesh"
        )
    return found
