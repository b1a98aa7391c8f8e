"""`ShardedTensor`: a DTensor-like wrapper over a 1-D mesh: one inner `local` tensor, ctx `ShardingSpec`.

Purpose: the global tensor of size `x.shape` is laid out over the ranks of a mesh as its placement says (`Shard`,
`Replicate`, `Partial`); each process holds `x.local`. Ops propagate placements (`ops.py`), redistributions run
functional collectives (`collectives.py`), and `redistribute`, `to_local` and `from_local` are autograd Functions so
gradients move between placements the way values do (see Note [Redistribute Backward]).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch

from policies import (
    SubclassSymbolicPolicy,
    dynamic,
    equal,
    inner,
    marked,
    outer,
    product,
)
from subclassaot.authoring.protocol import SizeLike
from subclassaot.authoring.wrapper_tensor import OuterMeta, WrapperTensor
from subclassaot.errors import ProtocolError
from subclasses.distributed import collectives
from subclasses.distributed.mesh import MeshSpec
from subclasses.distributed.placement import Partial, Placement, Replicate, Shard, ShardingSpec

# Note [Redistribute Backward]
# A redistribution leaves the global value unchanged, so its gradient is the incoming gradient, redistributed back
# to the input's placement: Shard -> Replicate (all_gather) gets Replicate -> Shard (a local chunk) or, when the
# gradient is Partial, Partial -> Shard (reduce_scatter); Partial -> Replicate (all_reduce) gets the Replicate
# gradient as is. A Partial input never receives a Partial gradient: d(sum_r local_r)/d local_r is the whole
# gradient on every rank, so its gradient placement is Replicate. The forward and backward both run through
# `collectives.redistribute_local`, on local tensors, inside `torch.autograd.Function`s at the ShardedTensor level;
# the functional collectives themselves never need autograd formulas.


def _contiguous(size: Sequence[int | torch.SymInt]) -> tuple[int | torch.SymInt, ...]:
    strides: list[int | torch.SymInt] = []
    running: int | torch.SymInt = 1
    for d in reversed(size):
        strides.append(running)
        running = d * running
    return tuple(reversed(strides))


def even_global_size(local: torch.Tensor, spec: ShardingSpec) -> tuple[int | torch.SymInt, ...]:
    """The global size when the local tensor is one of `world` equal chunks (what a constructor assumes)."""
    size = list(local.shape)
    placement = spec.placement
    if isinstance(placement, Shard):
        size[placement.dim] = size[placement.dim] * spec.mesh.world_size
    return tuple(size)


class ShardedTensor(WrapperTensor):
    """A global tensor laid out over a mesh. Build with `distribute_tensor` or `ShardedTensor.from_local`."""

    inner_names: ClassVar[tuple[str, ...]] = ("local",)
    ctx_names: ClassVar[tuple[str, ...]] = ("spec",)
    local: torch.Tensor
    spec: ShardingSpec

    @classmethod
    def outer_meta(cls, fields: Mapping[str, object]) -> OuterMeta:
        local, spec = fields["local"], fields["spec"]
        if not isinstance(local, torch.Tensor) or not isinstance(spec, ShardingSpec):
            raise ProtocolError(f"ShardedTensor(local, spec): got {type(local).__name__}, {type(spec).__name__}")
        size = even_global_size(local, spec)
        return OuterMeta(
            size=size,
            stride=_contiguous(size),
            storage_offset=0,
            dtype=local.dtype,
            device=local.device,
            layout=local.layout,
        )

    # The ctx is the ShardingSpec itself (not a 1-tuple), so a guard failure names its fields: "ctx field
    # placements[0] changed: Shard(dim=0) -> Replicate()".
    def __tensor_flatten__(self) -> tuple[list[str], ShardingSpec]:  # type: ignore[override]  # ctx is not a tuple
        return ["local"], self.spec

    @classmethod
    def __tensor_unflatten__(
        cls,
        inner_tensors: dict[str, torch.Tensor],
        ctx: object,
        outer_size: SizeLike | None,
        outer_stride: SizeLike | None,
    ) -> ShardedTensor:
        if not isinstance(ctx, ShardingSpec) or set(inner_tensors) != {"local"}:
            raise ProtocolError(
                f"ShardedTensor.__tensor_unflatten__: expected inner tensors {{'local'}} and a ShardingSpec ctx, "
                f"got {sorted(inner_tensors)} and {type(ctx).__name__}"
            )
        return cls(inner_tensors["local"], ctx, outer_size=outer_size, outer_stride=outer_stride)

    def __tensor_mark_dynamic__(
        self, dims: tuple[int, ...], min: int | None, max: int | None
    ) -> SubclassSymbolicPolicy:
        """Outer dims dynamic; the local dim follows: equal to it, or (Shard, even) global == local * world."""
        return mark_dynamic_policy(self, dims, min, max)

    def __coerce_same_metadata_as_tangent__(
        self, expected_metadata: object, expected_type: type | None = None
    ) -> ShardedTensor | None:
        """A tangent with other placements than the output it belongs to, redistributed to the output's (#118600)."""
        if not isinstance(expected_metadata, ShardingSpec) or expected_metadata.mesh != self.mesh:
            return None
        if expected_metadata == self.spec:
            return self
        local = collectives.redistribute_local(
            self.local, self.shape, self.spec.placement, expected_metadata.placement, self.mesh
        )
        return rewrap(local, expected_metadata, self.shape)

    # -- placements and conversions ----------------------------------------------------------------------------
    @property
    def placements(self) -> tuple[Placement, ...]:
        return self.spec.placements

    @property
    def mesh(self) -> MeshSpec:
        return self.spec.mesh

    @staticmethod
    def from_local(
        local: torch.Tensor,
        mesh: MeshSpec,
        placements: tuple[Placement, ...],
        *,
        global_size: Sequence[int] | None = None,
    ) -> ShardedTensor:
        """Wrap this rank's `local` (differentiably); `global_size` is needed only for uneven sharding."""
        spec = ShardingSpec(mesh=mesh, placements=placements)
        out: ShardedTensor = _FromLocal.apply(  # type: ignore[no-untyped-call]  # torch's stub leaves apply untyped
            local, spec, None if global_size is None else tuple(global_size)
        )
        return out

    def to_local(self) -> torch.Tensor:
        """This rank's local tensor (differentiably: its gradient comes back with this tensor's placement)."""
        out: torch.Tensor = _ToLocal.apply(self)  # type: ignore[no-untyped-call]  # torch's stub leaves apply untyped
        return out

    def redistribute(self, placements: tuple[Placement, ...]) -> ShardedTensor:
        """The same global tensor with `placements`, through functional collectives (differentiably)."""
        spec = ShardingSpec(mesh=self.mesh, placements=placements)
        out: ShardedTensor = _Redistribute.apply(self, spec)  # type: ignore[no-untyped-call]  # untyped torch stub
        return out

    def full_tensor(self) -> torch.Tensor:
        """The global tensor on every rank (a Replicate redistribution, then `to_local`)."""
        return self.redistribute((Replicate(),)).to_local()


def rewrap(local: torch.Tensor, spec: ShardingSpec, global_size: SizeLike) -> ShardedTensor:
    """A ShardedTensor of `global_size` holding `local` (strides: dense in the local tensor's dim order)."""
    return ShardedTensor(local, spec, outer_size=tuple(global_size), outer_stride=outer_strides(global_size, local))


def outer_strides(global_size: SizeLike, local: torch.Tensor) -> tuple[int | torch.SymInt, ...]:
    """Dense strides for `global_size` laid out in the order of `local`'s strides (zero where `local` broadcasts)."""
    ndim = len(global_size)
    strides = [local.stride(d) for d in range(ndim)]
    if all(isinstance(s, int) for s in strides) and strides == list(_contiguous(local.shape)):
        return _contiguous(global_size)
    order = sorted(range(ndim), key=lambda d: (_hint(strides[d]), -d))
    out: list[int | torch.SymInt] = [0] * ndim
    running: int | torch.SymInt = 1
    for d in order:
        broadcast = isinstance(strides[d], int) and strides[d] == 0 and not _is_one(local.shape[d])
        out[d] = 0 if broadcast else running
        if not broadcast:
            running = global_size[d] * running
    return tuple(out)


def _hint(n: int | torch.SymInt) -> int:
    return n if isinstance(n, int) else n.node.hint if n.node.hint is not None else 0


def _is_one(n: int | torch.SymInt) -> bool:
    return isinstance(n, int) and n == 1


def mark_dynamic_policy(
    x: ShardedTensor, dims: tuple[int, ...], min: int | None, max: int | None
) -> SubclassSymbolicPolicy:
    world, placement = x.mesh.world_size, x.spec.placement
    relations = []
    outer_dims, local_dims = [], []
    for d in dims:
        if isinstance(placement, Shard) and placement.dim == d and world > 1:
            if x.shape[d] % world != 0:
                raise ValueError(
                    f"mark_dynamic(x, {d}): dim {d} of size {x.shape[d]} is sharded unevenly over {world} ranks; "
                    "a dynamic sharded dim must divide evenly (global == local * world). Pad it to a multiple of "
                    f"{world}, or leave the dim static"
                )
            local_dims.append(d)
            relations.append(product(outer(d), inner("local", d), factor=world))
        else:
            outer_dims.append(d)
            relations.append(equal(inner("local", d), outer(d)))
    lo = None if min is None else -(-min // world)
    hi = None if max is None else max // world
    return SubclassSymbolicPolicy(
        outer=marked(x.dim(), outer_dims, dynamic(min=min, max=max)),
        inner={"local": marked(x.dim(), local_dims, dynamic(min=lo, max=hi))},
        relations=relations,
    )


class _FromLocal(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, local: torch.Tensor, spec: ShardingSpec, size: tuple[int, ...] | None) -> ShardedTensor:
        ctx.spec = spec
        wrapped = local.view_as(local)  # a fresh tensor object: autograd must not see the input returned as is
        return rewrap(wrapped, spec, even_global_size(local, spec) if size is None else size)

    @staticmethod
    def backward(ctx: Any, grad: ShardedTensor) -> tuple[torch.Tensor, None, None]:
        return _local_grad(grad, ctx.spec), None, None


class _ToLocal(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: ShardedTensor) -> torch.Tensor:
        ctx.spec, ctx.size = x.spec, tuple(x.shape)
        return x.local.view_as(x.local)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> ShardedTensor:
        return rewrap(grad.contiguous(), ctx.spec, ctx.size)


class _Redistribute(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: ShardedTensor, spec: ShardingSpec) -> ShardedTensor:
        ctx.spec = x.spec
        local = collectives.redistribute_local(x.local, x.shape, x.spec.placement, spec.placement, x.mesh)
        return rewrap(local.view_as(local) if local is x.local else local, spec, x.shape)

    @staticmethod
    def backward(ctx: Any, grad: ShardedTensor) -> tuple[ShardedTensor, None]:
        target = ctx.spec.placement
        target = Replicate() if isinstance(target, Partial) else target  # see Note [Redistribute Backward]
        local = collectives.redistribute_local(grad.local, grad.shape, grad.spec.placement, target, grad.mesh)
        return rewrap(local, ctx.spec.with_placement(target), grad.shape), None


def _local_grad(grad: ShardedTensor, spec: ShardingSpec) -> torch.Tensor:
    """The local gradient of a `from_local` input: the output gradient brought to the wrapped placement."""
    target = Replicate() if isinstance(spec.placement, Partial) else spec.placement
    return collectives.redistribute_local(grad.local, grad.shape, grad.spec.placement, target, grad.mesh)


def distribute_tensor(full: torch.Tensor, mesh: MeshSpec, placements: tuple[Placement, ...]) -> ShardedTensor:
    """Lay out `full` (the same on every rank) over `mesh`: each rank keeps its chunk (no communication)."""
    spec = ShardingSpec(mesh=mesh, placements=placements)
    placement = spec.placement
    if isinstance(placement, Shard):
        start, length = collectives.chunk_bounds(full.size(placement.dim), mesh.world_size, mesh.rank)
        local = full.detach().narrow(placement.dim, start, length).clone()
    elif isinstance(placement, Partial):
        local = collectives.redistribute_local(full.detach(), full.shape, Replicate(), placement, mesh)
    else:
        local = full.detach().clone()
    return rewrap(local, spec, full.shape)


def placements_of(x: torch.Tensor) -> tuple[Placement, ...]:
    """The placements of a ShardedTensor; a plain tensor counts as Replicate."""
    return x.placements if isinstance(x, ShardedTensor) else (Replicate(),)
