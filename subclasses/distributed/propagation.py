"""Sharding propagation rules: pure functions from input placements (and global shapes) to a `Decision`.

Purpose: each rule says which placement every sharded argument must be brought to before the op runs on local
tensors, and the placement of the result. Rules never touch tensors, so they run unchanged on fake tensors with
symbolic sizes; a comparison of sizes here is a comparison the shape environment guards (see Note [Rules And
Symbolic Sizes]).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from subclasses.distributed.placement import Partial, Placement, Replicate, Shard

SizeLike = Sequence[int | torch.SymInt]

# Note [Rules And Symbolic Sizes]
# Rules look at placements and ranks first and at sizes only where the answer depends on them: a broadcast dim of
# size 1 (never sharded), and which dims a view merges or splits. Those size tests compare a dim with 1 or two
# products of dims; on a dynamic batch dim they are decided by the shape environment (usually statically, since
# the products share their symbols) and become guards only when they are not. Nothing here reads a local size:
# local sizes follow from the decision (`collectives.local_size`) or from running the op on local tensors.


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What to do before running an op on local tensors, and the placement of its result."""

    inputs: tuple[Placement, ...]  # len = number of tensor arguments of the rule; each one's required placement
    output: Placement


class Linearity(enum.Enum):
    """How a pointwise op treats Partial (sum) inputs."""

    NONE = "none"  # f(a + b) != f(a) + f(b): reduce Partial inputs first
    ADDITIVE = "additive"  # add/sub: Partial op Partial stays Partial
    MULTIPLICATIVE = "multiplicative"  # mul/div/neg: one Partial (first arg for div) times non-sharded stays Partial


def _aligned(p: Placement, ndim: int, out_ndim: int) -> Placement:
    return Shard(p.dim + out_ndim - ndim) if isinstance(p, Shard) else p


def _unaligned(p: Placement, ndim: int, out_ndim: int) -> Placement:
    return Shard(p.dim - (out_ndim - ndim)) if isinstance(p, Shard) else p


def _keeps_partial(placements: Sequence[Placement], linearity: Linearity) -> bool:
    partial = [isinstance(p, Partial) for p in placements]
    if not any(partial):
        return False
    if linearity is Linearity.ADDITIVE:
        return all(partial)
    if linearity is Linearity.MULTIPLICATIVE:
        return sum(partial) == 1 and all(isinstance(p, Partial | Replicate) for p in placements)
    return False


def pointwise(
    placements: Sequence[Placement], shapes: Sequence[SizeLike], out_ndim: int, linearity: Linearity
) -> Decision:
    """A broadcasting pointwise op over tensor arguments with `placements` and global `shapes` (plain ones Replicate).

    The first Shard (in output dims) wins; Replicate arguments that are not size 1 there are chunked locally,
    other Shards are moved to it. Partial survives only for linear ops (`Linearity`), else is reduced first.
    """
    ndims = [len(s) for s in shapes]
    aligned = [_aligned(p, n, out_ndim) for p, n in zip(placements, ndims, strict=True)]
    if _keeps_partial(aligned, linearity):
        return Decision(inputs=tuple(placements), output=Partial())
    aligned = [Replicate() if isinstance(p, Partial) else p for p in aligned]
    target = next((p for p in aligned if isinstance(p, Shard)), None)
    if target is None:
        return Decision(inputs=tuple(Replicate() for _ in placements), output=Replicate())
    required = []
    for shape, n in zip(shapes, ndims, strict=True):
        local_dim = target.dim - (out_ndim - n)
        broadcast = local_dim < 0 or _is_one(shape[local_dim])
        required.append(Replicate() if broadcast else _unaligned(target, n, out_ndim))
    return Decision(inputs=tuple(required), output=target)


def _is_one(n: int | torch.SymInt) -> bool:
    return isinstance(n, int) and n == 1


def mm(a: Placement, b: Placement) -> Decision:
    """`a @ b` for 2-d a (M, K) and b (K, N): row-, column- and contraction-parallel, else through Replicate."""
    table: dict[tuple[Placement, Placement], Placement] = {
        (Replicate(), Replicate()): Replicate(),
        (Replicate(), Shard(1)): Shard(1),  # column parallel
        (Shard(0), Replicate()): Shard(0),  # row (batch) parallel
        (Shard(1), Shard(0)): Partial(),  # contraction parallel
        (Partial(), Replicate()): Partial(),
        (Replicate(), Partial()): Partial(),
    }
    found = table.get((a, b))
    if found is not None:
        return Decision(inputs=(a, b), output=found)
    if a == Shard(0):
        return Decision(inputs=(a, Replicate()), output=Shard(0))
    if b == Shard(1):
        return Decision(inputs=(Replicate(), b), output=Shard(1))
    return Decision(inputs=(Replicate(), Replicate()), output=Replicate())


def bmm(a: Placement, b: Placement) -> Decision:
    """`a @ b` for 3-d a (B, M, K) and b (B, K, N): batch-sharded both, else the 2-d rules shifted by one dim."""
    if a == Shard(0) and b == Shard(0):
        return Decision(inputs=(a, b), output=Shard(0))
    inner = mm(_shift(a, -1), _shift(b, -1))
    return Decision(inputs=(_shift(inner.inputs[0], 1), _shift(inner.inputs[1], 1)), output=_shift(inner.output, 1))


def _shift(p: Placement, by: int) -> Placement:
    if not isinstance(p, Shard):
        return p
    return Shard(p.dim + by) if p.dim + by >= 0 else Replicate()


def reduction(p: Placement, ndim: int, dims: Sequence[int] | None, keepdim: bool) -> Placement:
    """sum/mean over `dims` (None: all): a reduced Shard dim becomes Partial, other Shards move left."""
    reduced = set(range(ndim)) if not dims else {d % ndim for d in dims}
    if not isinstance(p, Shard):
        return p
    if p.dim in reduced:
        return Partial()
    return p if keepdim else Shard(p.dim - sum(1 for d in reduced if d < p.dim))


def transpose(p: Placement, dim0: int, dim1: int) -> Placement:
    if not isinstance(p, Shard):
        return p
    return Shard(dim1 if p.dim == dim0 else dim0 if p.dim == dim1 else p.dim)


def permute(p: Placement, dims: Sequence[int]) -> Placement:
    if not isinstance(p, Shard):
        return p
    return Shard([d % len(dims) for d in dims].index(p.dim))


def unsqueeze(p: Placement, dim: int) -> Placement:
    return Shard(p.dim + 1) if isinstance(p, Shard) and p.dim >= dim else p


def squeeze(p: Placement, removed: Sequence[int]) -> Placement:
    if not isinstance(p, Shard):
        return p
    if p.dim in removed:
        return Replicate()
    return Shard(p.dim - sum(1 for d in removed if d < p.dim))


def view(p: Placement, in_shape: SizeLike, out_shape: SizeLike, world: int) -> Placement | None:
    """The placement after viewing `in_shape` as `out_shape`, or None if the shard does not survive the view.

    Shard(d) survives when the product of the dims before d equals the product of some prefix of the output dims:
    the sharded dim then starts a group of merged or split dims and its chunk stays contiguous in that group's
    first output dim (the caller views the local tensor with -1 there). Both dims must divide evenly by `world`:
    torch.chunk of a merged dim (n * m) cuts elsewhere than chunks of n times m when n is uneven.
    """
    if not isinstance(p, Shard):
        return p
    before = math.prod(in_shape[: p.dim])
    for d in range(len(out_shape)):
        if _same(math.prod(out_shape[:d]), before) and not _is_one(out_shape[d]):
            even = _same(in_shape[p.dim] % world, 0) and _same(out_shape[d] % world, 0)
            return Shard(d) if even else None
    return None


def _same(a: int | torch.SymInt, b: int | torch.SymInt) -> bool:
    return bool(a == b)
