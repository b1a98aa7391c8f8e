"""The mark_dynamic policy of torch's DTensor, whose class has no `__tensor_mark_dynamic__` of its own.

Input: a DTensor and the dims marked dynamic. Output: a SubclassSymbolicPolicy that ties each marked outer dim to
the same dim of `_local_tensor`. Invariants: imports only torch (torch.distributed.tensor, found through sys.modules:
no DTensor exists unless torch imported it).
"""

from __future__ import annotations

import math
import sys

import torch

from policies.errors import PolicyError
from policies.spec import Relation, SubclassSymbolicPolicy, dynamic, equal, inner, marked, outer, product

# Note [DTensor Dims Are Tied To Their Local Dims]
# A dim marked dynamic on a tensor subclass needs, in the trace, a size the graph's inputs determine: only the
# inner tensors are graph inputs, so every dynamic outer dim must be an expression of an inner tensor's dim (the
# default mark gives the outer and the inner dims symbols of their own, which on one rank happen to coincide). For
# a DTensor: a dim that no mesh dim shards is the local dim itself (`local == global`); a dim sharded over k ranks
# in all (the product of the sizes of the mesh dims whose placement is Shard(d)) is `global == local * k`, the local
# dim being the symbol, which holds only while it divides evenly. An uneven sharded dim is a PolicyError: its local
# size differs between ranks, and so would the graphs. Automatic dynamic (a second size seen) uses the same ties:
# `derive_policy` gives a DTensor these relations for every dim unless a policy gives relations of its own, and
# keeps a dim sharded unevenly static where nothing else was said (a new size recompiles, its local dim may be
# dynamic).


def is_dtensor(x: object) -> bool:
    api = sys.modules.get("torch.distributed.tensor._api")
    return api is not None and isinstance(x, getattr(api, "DTensor", ()))


def _shards(x: torch.Tensor, d: int) -> int:
    """How many ranks dim `d` of DTensor `x` is split over (1: not sharded)."""
    placements = tuple(getattr(x, "placements", ()))
    mesh_shape = tuple(getattr(x, "device_mesh").shape)  # noqa: B009  # DTensor's typed attribute, seen untyped here
    return math.prod(
        size
        for size, p in zip(mesh_shape, placements, strict=True)
        if type(p).__name__ == "Shard" and getattr(p, "dim", None) == d
    )


def dtensor_relations(x: torch.Tensor) -> list[Relation]:
    """Every dim of DTensor `x` tied to its local dim (Note [DTensor Dims Are Tied To Their Local Dims]); a dim
    sharded unevenly gets none (it can only be static)."""
    out = []
    for d in range(x.dim()):
        k = _shards(x, d)
        if k == 1:
            out.append(equal(inner("_local_tensor", d), outer(d)))
        elif x.shape[d] % k == 0:
            out.append(product(outer(d), inner("_local_tensor", d), factor=k))
    return out


def uneven_dims(x: torch.Tensor) -> tuple[int, ...]:
    """The dims of DTensor `x` sharded unevenly: they stay static unless a policy says otherwise."""
    return tuple(d for d in range(x.dim()) if (k := _shards(x, d)) > 1 and x.shape[d] % k != 0)


def dtensor_mark_dynamic(
    x: torch.Tensor, dims: tuple[int, ...], min: int | None, max: int | None
) -> SubclassSymbolicPolicy:
    """See Note [DTensor Dims Are Tied To Their Local Dims]."""
    relations = []
    outer_dims, local_dims = [], []
    shards_of: dict[int, int] = {}
    for d in dims:
        shards = _shards(x, d)
        if shards > 1:
            if x.shape[d] % shards != 0:
                raise PolicyError(
                    f"mark_dynamic(x, {d}): dim {d} of this DTensor (size {x.shape[d]}) is sharded unevenly over "
                    f"{shards} ranks; a dynamic sharded dim must divide evenly (global == local * {shards}). Pad it "
                    f"to a multiple of {shards}, or leave the dim static"
                )
            local_dims.append(d)
            shards_of[d] = shards
            relations.append(product(outer(d), inner("_local_tensor", d), factor=shards))
        else:
            outer_dims.append(d)
            relations.append(equal(inner("_local_tensor", d), outer(d)))
    counts = set(shards_of.values())
    if len(counts) > 1 and (min is not None or max is not None):
        raise PolicyError(
            f"mark_dynamic(x, {dims}, min=, max=): the marked dims of this DTensor are sharded over different numbers "
            "of ranks, so one range cannot hold for their local dims; mark them one call at a time"
        )
    k = counts.pop() if counts else 1
    lo = None if min is None else -(-min // k)
    hi = None if max is None else max // k
    return SubclassSymbolicPolicy(
        outer=marked(x.dim(), outer_dims, dynamic(min=min, max=max)),
        inner={"_local_tensor": marked(x.dim(), local_dims, dynamic(min=lo, max=hi))},
        relations=relations,
    )
