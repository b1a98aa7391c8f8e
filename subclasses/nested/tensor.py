"""`JaggedTensor`: a batch of rows of different lengths, packed into one values buffer with row offsets.

Purpose: the jagged sample subclass. Inner tensors `flat_values` (total_length, *features) and `offsets`
(batch + 1,) int64, optional `lengths` (batch,) int64 for rows with holes; ctx `(ragged_dim,)`, always 1. Row i is
`flat_values[offsets[i] : offsets[i] + len_i]` with `len_i = lengths[i]` when lengths is given, else
`offsets[i + 1] - offsets[i]`. The outer (logical) shape is `(batch, ragged, *features)`; see Note [Jagged Ragged
Size] for what `ragged` is. The op table lives in `ops.py` (the package imports it, which registers it);
reductions, softmax and padding run the `subclassaot_jagged` custom ops of `kernels.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeAlias, cast

import torch
from torch import Tensor
from torch._ops import OpOverload
from torch._subclasses.fake_tensor import is_fake
from torch._subclasses.functional_tensor import FunctionalTensor

from policies import DimPolicy, SubclassSymbolicPolicy, TensorPolicy, affine, dynamic, equal, inner, outer
from policies.marks import unspecified
from subclassaot.authoring.protocol import SizeLike
from subclassaot.authoring.wrapper_tensor import OpHandler, OuterMeta, WrapperTensor
from subclassaot.errors import ProtocolError, UnsupportedError
from subclasses.nested import kernels

# Note [Jagged Ragged Size]
# The outer shape is (B, R, *F). R, the ragged entry, is the *max row length*, read from the data (offsets, or
# lengths for rows with holes) once, when a JaggedTensor is built from user data (`from_tensors`, `from_lengths`,
# `JaggedTensor(values, offsets)`: one device sync, as NJT's max_seqlen). From then on R is carried as the SIZE of an
# inner tensor, `ragged_size_tensor`, of shape (R, 0) (zero bytes; NJT's `_max_seqlen_tensor` trick, #122836), and
# every op that keeps the rows passes that tensor on; nothing re-reads the data. `to_padded()` pads to R by default,
# so R >= every row length is an invariant; `from_padded(t, lengths)` sets R to the padded width t.shape[1] (an
# upper bound, not re-read from lengths) in eager and compiled code alike, so the two agree.
# The outer size is always derived from the inner tensors: (offsets.size(0) - 1, ragged_size_tensor.size(0),
# *flat_values.shape[1:]). `__tensor_unflatten__` ignores the outer_size it is given (the protocol check then ties
# the two, `outer_size[1] == ragged_size_tensor.size(0)`, which the ShapeEnv turns into a replacement) and accepts -1
# (torch's AOTDispatch convention for nested ints).
# Why an inner tensor and not a symbol of its own in outer_size: a symbol that appears only in an outer size is not
# a graph input, so make_fx cannot track it ("s7 is not tracked with proxy", what NJT's nested ints hit in #138496)
# and the pipeline has no tensor to bind it from. As an inner size it is a graph input's dim like any other:
#   - policy (`jagged_policy`, `__tensor_mark_dynamic__`): ragged_size_tensor.size(0) a free DYNAMIC symbol,
#     outer size(1) == it, offsets.size(0) == size(0) + 1, lengths.size(0) == size(0), flat_values.size(0) its own
#     DYNAMIC symbol, flat_values.size(1 + k) == size(2 + k). No relation ties R to any other size: two batches with
#     the same offsets shape have different R;
#   - what the pipeline must do: nothing special. It binds R from `args[i].ragged_size_tensor.size(0)` like any
#     dense leaf's size, and checks `args[i].size(1) == R` (always true: the wrapper derives it). Under a static
#     policy R is a constant and IS guarded (`args[0].size(1): expected 7, got 9` recompiles; automatic
#     dynamic then makes it a symbol): "a guard says so", never a stale R. R of 0 or 1 is planned static
#     (Note [Zero One Specialization]) and guarded; the next batch recompiles once.

# Note [Jagged Same Rows]
# A binary op between two JaggedTensors needs the same row structure. The check is cheap first: the same offsets
# object (what every op that keeps rows passes on), or, when the data can be read (eager), equal offsets and
# lengths (one sync). Under tracing, distinct offsets tensors cannot be compared without reading data, so they are
# trusted if their shapes agree; a program that combines two unrelated batches must fail in eager first.

_RAGGED_DIM = 1
_SizeT: TypeAlias = tuple[int | torch.SymInt, ...]
TorchFunctionImpl: TypeAlias = Callable[..., Any]


def readable(t: Tensor) -> bool:
    """True when `t` holds data that can be read (not fake, not a functional wrapper, not meta)."""
    if is_fake(t) or isinstance(t, FunctionalTensor) or torch._is_functional_tensor(t):
        return False
    return t.device.type != "meta"


def row_lengths(offsets: Tensor, lengths: Tensor | None) -> Tensor:
    """Each row's length, (B,) int64."""
    return lengths if lengths is not None else offsets[1:] - offsets[:-1]


def max_row_length(offsets: Tensor, lengths: Tensor | None, *, what: str = "JaggedTensor") -> int:
    """The longest row's length, read from the data (a device sync); see Note [Jagged Ragged Size]."""
    source = lengths if lengths is not None else offsets
    if not readable(source):
        raise UnsupportedError(
            f"{what}: the ragged size (max row length) must be read from the offsets, which hold no data here "
            "(under tracing). Pass it: JaggedTensor(values, offsets, ragged_size_tensor_for(max_len, device)), "
            "or build the result from an existing JaggedTensor (ops keep its ragged size)"
        )
    if offsets.shape[0] <= 1:
        return 0
    return int(row_lengths(offsets, lengths).max())


def _contiguous(size: _SizeT) -> _SizeT:
    strides: list[int | torch.SymInt] = []
    running: int | torch.SymInt = 1
    for dim in reversed(size):
        strides.append(running)
        running = running * dim
    return tuple(reversed(strides))


def _is_minus_one(d: object) -> bool:
    return isinstance(d, int) and d == -1


def _check_inner(flat_values: Tensor, offsets: Tensor, lengths: Tensor | None, ragged_dim: object) -> None:
    if ragged_dim != _RAGGED_DIM:
        raise UnsupportedError(f"JaggedTensor: only ragged_dim=1 is supported, got {ragged_dim!r}")
    if flat_values.dim() < 1:
        raise ProtocolError("JaggedTensor: flat_values must have a leading total_length dim; got a 0-d tensor")
    if offsets.dim() != 1 or offsets.dtype != torch.int64:
        raise ProtocolError(
            f"JaggedTensor: offsets must be 1-D int64 (batch + 1,), got {offsets.dim()}-D {offsets.dtype}; build "
            "them as torch.cat([zeros(1), lengths.cumsum(0)]), or use JaggedTensor.from_lengths(values, lengths)"
        )
    if lengths is not None and (lengths.dim() != 1 or lengths.dtype != torch.int64):
        raise ProtocolError(f"JaggedTensor: lengths must be 1-D int64 (batch,), got {lengths.dim()}-D {lengths.dtype}")


def validate_rows(flat_values: Tensor, offsets: Tensor, lengths: Tensor | None) -> None:
    """Check the row invariants against the data (eager only; a device sync). Raises ValueError naming the rule."""
    if not (readable(offsets) and readable(flat_values)):
        return
    if offsets.shape[0] < 1 or int(offsets[0]) != 0 or int(offsets[-1]) != flat_values.shape[0]:
        raise ValueError(
            f"JaggedTensor: offsets must start at 0 and end at flat_values.shape[0] = {flat_values.shape[0]}; got "
            f"{offsets.tolist()}"
        )
    slots = offsets[1:] - offsets[:-1]
    if bool((slots < 0).any()):
        raise ValueError(f"JaggedTensor: offsets must be non-decreasing; got {offsets.tolist()}")
    if lengths is not None and (lengths.shape[0] != slots.shape[0] or bool(((lengths < 0) | (lengths > slots)).any())):
        raise ValueError(
            "JaggedTensor: lengths must have one entry per row with 0 <= lengths[i] <= offsets[i + 1] - offsets[i] "
            f"(a row's hole is at the end of its slot); got lengths {lengths.tolist()}, offsets {offsets.tolist()}"
        )


def ragged_size_tensor_for(ragged: int | torch.SymInt, device: torch.device) -> Tensor:
    """The (R, 0) uint8 tensor that carries the ragged size R; see Note [Jagged Ragged Size]."""
    return torch.empty((ragged, 0), dtype=torch.uint8, device=device)


class JaggedTensor(WrapperTensor):
    """A jagged batch; see the module docstring and Note [Jagged Ragged Size]. Build with `from_tensors`,
    `from_lengths`, `from_padded`, or `JaggedTensor(flat_values, offsets, lengths=...)`."""

    inner_names: ClassVar[tuple[str, ...]] = ("flat_values", "offsets", "ragged_size_tensor")
    optional_inner_names: ClassVar[tuple[str, ...]] = ("lengths",)
    ctx_names: ClassVar[tuple[str, ...]] = ("ragged_dim",)
    torch_functions: ClassVar[dict[object, TorchFunctionImpl]] = {}  # filled by ops.py
    pointwise_handler: ClassVar[OpHandler | None] = None  # set by ops.py: every op tagged pointwise
    flat_values: Tensor
    offsets: Tensor
    ragged_size_tensor: Tensor
    lengths: Tensor | None
    ragged_dim: int

    @staticmethod
    def __new__(
        cls: type[JaggedTensor],
        flat_values: Tensor,
        offsets: Tensor,
        ragged_size_tensor: Tensor | None = None,
        lengths: Tensor | None = None,
        ragged_dim: int = _RAGGED_DIM,
        *,
        outer_size: SizeLike | None = None,
        outer_stride: SizeLike | None = None,
        requires_grad: bool = False,
    ) -> JaggedTensor:
        # outer_size / outer_stride are not used: see Note [Jagged Ragged Size] (the protocol check compares them).
        _check_inner(flat_values, offsets, lengths, ragged_dim)
        if ragged_size_tensor is None:
            given = None if outer_size is None or len(outer_size) < 2 else outer_size[_RAGGED_DIM]
            if given is None or _is_minus_one(given):
                validate_rows(flat_values, offsets, lengths)
                given = max_row_length(offsets, lengths)
            ragged_size_tensor = ragged_size_tensor_for(given, offsets.device)
        out: JaggedTensor = WrapperTensor.__new__(
            cls, flat_values, offsets, ragged_size_tensor, lengths, ragged_dim, requires_grad=requires_grad
        )
        return out

    @classmethod
    def outer_meta(cls, fields: Mapping[str, object]) -> OuterMeta:
        values, offsets, holder = fields["flat_values"], fields["offsets"], fields["ragged_size_tensor"]
        assert isinstance(values, Tensor) and isinstance(offsets, Tensor) and isinstance(holder, Tensor), "BUG"
        size: _SizeT = (offsets.shape[0] - 1, holder.shape[0], *values.shape[1:])
        return OuterMeta(
            size=size,
            stride=_contiguous(size),
            storage_offset=0,
            dtype=values.dtype,
            device=values.device,
            layout=values.layout,
        )

    # -- construction from user data -----------------------------------------------------------------------------
    @classmethod
    def from_lengths(
        cls, flat_values: Tensor, lengths: Tensor, *, max_length: int | None = None, requires_grad: bool = False
    ) -> JaggedTensor:
        """Rows of `lengths[i]` consecutive entries of `flat_values` (no holes)."""
        lengths = lengths.to(device=flat_values.device, dtype=torch.int64)
        offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])
        validate_rows(flat_values, offsets, None)
        ragged = max_row_length(offsets, None) if max_length is None else max_length
        holder = ragged_size_tensor_for(ragged, offsets.device)
        return cls(flat_values, offsets, holder, requires_grad=requires_grad)

    @classmethod
    def from_tensors(cls, rows: Sequence[Tensor], *, requires_grad: bool = False) -> JaggedTensor:
        """One row per tensor (each (len_i, *features), same features, dtype and device)."""
        if not rows:
            raise ValueError("JaggedTensor.from_tensors needs at least one row (the feature shape comes from it)")
        lengths = torch.tensor([r.shape[0] for r in rows], dtype=torch.int64, device=rows[0].device)
        values = torch.cat([r.detach() for r in rows]) if len(rows) > 1 else rows[0].detach().clone()
        return cls.from_lengths(values, lengths, requires_grad=requires_grad)

    # -- views of the structure ----------------------------------------------------------------------------------
    def values(self) -> Tensor:  # Tensor.values is the sparse accessor; this is NJT's values()
        """The packed buffer (total_length, *features), as NJT's `values()`; shares storage with this tensor."""
        return self.flat_values

    def row_lengths(self) -> Tensor:
        """Each row's length, (B,) int64."""
        return row_lengths(self.offsets, self.lengths)

    @property
    def max_length(self) -> int | torch.SymInt:
        """The ragged size R (see Note [Jagged Ragged Size])."""
        return self.shape[_RAGGED_DIM]

    def same_rows(self, other: JaggedTensor) -> bool:
        """Whether `other` has this tensor's row structure; see Note [Jagged Same Rows]."""
        if other.offsets is self.offsets and other.lengths is self.lengths:
            return True
        if (self.lengths is None) != (other.lengths is None):
            return False
        pairs = [(self.offsets, other.offsets)]
        if self.lengths is not None and other.lengths is not None:
            pairs.append((self.lengths, other.lengths))
        if all(readable(a) and readable(b) for a, b in pairs):
            return all(a.shape == b.shape and bool(torch.equal(a, b)) for a, b in pairs)
        return all(a.shape[0] == b.shape[0] for a, b in pairs)

    def to_padded(self, padding_value: float = 0.0, output_size: int | torch.SymInt | None = None) -> Tensor:
        """(B, L, *features) dense, L = output_size or the ragged size; see Note [Jagged Ragged Size]."""
        return to_padded(self, padding_value, output_size)

    @staticmethod
    def from_padded(padded: Tensor, lengths: Tensor, *, total_length: int | torch.SymInt | None = None) -> JaggedTensor:
        """Rows `padded[i, :lengths[i]]`; the ragged size is padded.shape[1]. See `ops.from_padded`."""
        return from_padded(padded, lengths, total_length=total_length)

    def from_padded_like(self, padded: Tensor) -> JaggedTensor:
        """`padded` (B, L, *features) packed into this tensor's rows (traceable)."""
        return from_padded_like(padded, self)

    # -- dispatch ------------------------------------------------------------------------------------------------
    @classmethod
    def try_get_handler(cls, func: OpOverload[..., Any]) -> OpHandler | None:
        """The op table's handler, else the pointwise handler for ops tagged pointwise."""
        handler = super().try_get_handler(func)
        if handler is None and torch.Tag.pointwise in func.tags:
            return cls.pointwise_handler
        return handler

    # -- torch functions -----------------------------------------------------------------------------------------
    @classmethod
    def __torch_function__(  # type: ignore[override]  # torch's stub types differ
        cls,
        func: Any,
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        # See Note [Jagged Ops Above Autograd] in ops.py: ops whose autograd formula would build a dense gradient
        # of the outer shape run here, on the values, with autograd tracking the values.
        impl = cls.torch_functions.get(func)
        if impl is not None:
            with torch._C.DisableTorchFunctionSubclass():
                return impl(*args, **(kwargs or {}))
        return torch._C._disabled_torch_function_impl(func, types, args, kwargs or {})

    @classmethod
    def function(cls, *funcs: object) -> Callable[[TorchFunctionImpl], TorchFunctionImpl]:
        """Register the decorated function as the implementation of the torch functions `funcs` on JaggedTensors."""

        def register(impl: TorchFunctionImpl) -> TorchFunctionImpl:
            for f in funcs:
                cls.torch_functions[f] = impl
            return impl

        return register

    # -- symbolic shape policy -----------------------------------------------------------------------------------
    def __tensor_mark_dynamic__(
        self, dims: tuple[int, ...], min: int | None, max: int | None
    ) -> SubclassSymbolicPolicy:
        """`mark_dynamic(x, dims)`: `dims` dynamic, and always the ragged dim and flat_values.size(0)."""
        return jagged_policy(self, dims, dynamic(min=min, max=max))

    def symbolic_policy(self, dims: Sequence[int] = (0,)) -> SubclassSymbolicPolicy:
        """The class's default policy: batch (and `dims`) dynamic; see Note [Jagged Ragged Size]."""
        return jagged_policy(self, dims, dynamic())


def jagged_policy(x: JaggedTensor, dims: Sequence[int], policy: DimPolicy) -> SubclassSymbolicPolicy:
    """See Note [Jagged Ragged Size]: `dims` get `policy`; the ragged size (ragged_size_tensor.size(0)) and
    flat_values.size(0) are their own dynamic symbols; every other inner size is an expression of an outer dim."""
    chosen = {d % x.dim() for d in dims}
    sizes = [policy if d in chosen and d != _RAGGED_DIM else unspecified() for d in range(x.dim())]
    ragged = policy if _RAGGED_DIM in chosen else dynamic()
    n_features = x.dim() - 2
    relations = [
        equal(outer(_RAGGED_DIM), inner("ragged_size_tensor", 0)),
        affine(inner("offsets", 0), outer(0), offset=1),
        *(equal(inner("flat_values", 1 + k), outer(2 + k)) for k in range(n_features)),
    ]
    inner_policies: dict[str, TensorPolicy | SubclassSymbolicPolicy] = {
        "flat_values": TensorPolicy(sizes=(dynamic(), *(unspecified() for _ in range(n_features)))),
        "offsets": TensorPolicy(sizes=(unspecified(),)),
        "ragged_size_tensor": TensorPolicy(sizes=(ragged, unspecified())),
    }
    if x.lengths is not None:
        relations.append(equal(inner("lengths", 0), outer(0)))
        inner_policies["lengths"] = TensorPolicy(sizes=(unspecified(),))
    return SubclassSymbolicPolicy(
        outer=TensorPolicy(sizes=tuple(sizes)), inner=inner_policies, relations=relations, share_outer_dims=False
    )


def example() -> JaggedTensor:
    """Three rows of lengths 2, 4 and 1 with 3 features, float32 (for `python -m subclassaot check`)."""
    values = torch.arange(21, dtype=torch.float32).reshape(7, 3) / 7.0 - 1.0
    return JaggedTensor.from_lengths(values, torch.tensor([2, 4, 1]))


def example_with_holes() -> JaggedTensor:
    """Three rows of lengths 1, 3 and 0 in slots of 2, 4 and 1 entries (rows with holes)."""
    values = torch.arange(21, dtype=torch.float32).reshape(7, 3) / 7.0 - 1.0
    offsets = torch.tensor([0, 2, 6, 7])
    return JaggedTensor(values, offsets, lengths=torch.tensor([1, 3, 0]))


# -- values <-> JaggedTensor with autograd -------------------------------------------------------------------------
class _ValuesOf(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: JaggedTensor) -> Tensor:
        ctx.like = (x.offsets, x.ragged_size_tensor, x.lengths)
        return x.flat_values.detach()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> JaggedTensor:
        offsets, holder, lengths = ctx.like
        return JaggedTensor(grad, offsets, holder, lengths)


class _JaggedFrom(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, values: Tensor, offsets: Tensor, holder: Tensor, lengths: Tensor | None) -> JaggedTensor:
        return JaggedTensor(values.detach(), offsets, holder, lengths)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:
        if not isinstance(grad, JaggedTensor):
            raise UnsupportedError(f"BUG: a JaggedTensor output got a dense gradient of shape {tuple(grad.shape)}")
        return grad.flat_values, None, None, None


def values_of(x: JaggedTensor) -> Tensor:
    """x's packed values (total_length, *features); differentiable: the gradient flows back to x."""
    if torch.is_grad_enabled() and x.requires_grad:
        out: Tensor = _ValuesOf.apply(x)  # type: ignore[no-untyped-call]  # torch stub
        return out
    return x.flat_values


def jagged(values: Tensor, offsets: Tensor, holder: Tensor, lengths: Tensor | None) -> JaggedTensor:
    """A JaggedTensor over `values` (total_length, *features); differentiable in `values`."""
    if torch.is_grad_enabled() and values.requires_grad:
        out: JaggedTensor = _JaggedFrom.apply(values, offsets, holder, lengths)  # type: ignore[no-untyped-call]  # torch stub
        return out
    return JaggedTensor(values, offsets, holder, lengths)


def jagged_like(x: JaggedTensor, values: Tensor) -> JaggedTensor:
    """`values` with x's rows and ragged size (features may differ)."""
    return jagged(values, x.offsets, x.ragged_size_tensor, x.lengths)


def rewrap(x: JaggedTensor, values: Tensor) -> JaggedTensor:
    """`values` with x's rows and ragged size, below autograd (in aten handlers)."""
    return JaggedTensor(values, x.offsets, x.ragged_size_tensor, x.lengths)


def size_arg(n: int | torch.SymInt) -> int:
    # The custom ops' schemas take SymInt; their Python signatures say int (kernels.py is typed for eager calls).
    return cast(int, n)


def as_2d(values: Tensor) -> Tensor:
    return values.reshape(values.shape[0], -1)


# -- padding and rows ----------------------------------------------------------------------------------------------
def to_padded(x: JaggedTensor, padding_value: float = 0.0, output_size: int | torch.SymInt | None = None) -> Tensor:
    """(B, L, *features), L = output_size or the ragged size (Note [Jagged Ragged Size]); longer rows truncated."""
    width = x.shape[1] if output_size is None else output_size
    values = values_of(x)
    padded = kernels.jagged_to_padded_op(as_2d(values), x.offsets, size_arg(width), padding_value)
    if x.lengths is not None:
        positions = torch.arange(padded.shape[1], device=padded.device)
        inside = (positions[None, :] < x.lengths[:, None])[:, :, None]
        padded = torch.where(inside, padded, torch.full((), padding_value, dtype=padded.dtype, device=padded.device))
    return padded.reshape(padded.shape[0], padded.shape[1], *values.shape[1:])


def from_padded(padded: Tensor, lengths: Tensor, *, total_length: int | torch.SymInt | None = None) -> JaggedTensor:
    """Rows `padded[i, :lengths[i]]` of a (B, L, *features) tensor; ragged size L (Note [Jagged Ragged Size]).

    Reads `lengths` for total_length unless it is given (pass it under tracing)."""
    lengths = lengths.to(device=padded.device, dtype=torch.int64)
    offsets = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])
    if total_length is None:
        if not readable(lengths):
            raise UnsupportedError(
                "from_padded(t, lengths) reads lengths.sum() for the packed size, and lengths hold no data here "
                "(under tracing): pass total_length=..., or use from_padded_like(t, x) to reuse x's rows"
            )
        total_length = int(offsets[-1])
        if lengths.numel() and int(lengths.max()) > padded.shape[1]:
            raise ValueError(f"from_padded: a length exceeds the padded width {padded.shape[1]}: {lengths.tolist()}")
    holder = ragged_size_tensor_for(padded.shape[1], offsets.device)
    return _from_padded(padded, offsets, holder, None, total_length)


def from_padded_like(padded: Tensor, like: JaggedTensor) -> JaggedTensor:
    """`padded` (B, L, *features) packed into `like`'s rows (traceable: reads no data)."""
    return _from_padded(padded, like.offsets, like.ragged_size_tensor, like.lengths, like.flat_values.shape[0])


def _from_padded(
    padded: Tensor,
    offsets: Tensor,
    holder: Tensor,
    lengths: Tensor | None,
    total_length: int | torch.SymInt,
) -> JaggedTensor:
    batch, width, features = padded.shape[0], padded.shape[1], padded.shape[2:]
    flat = kernels.jagged_from_padded_op(padded.reshape(batch, width, -1), offsets, size_arg(total_length))
    return jagged(flat.reshape(flat.shape[0], *features), offsets, holder, lengths)


__all__ = [
    "JaggedTensor",
    "example",
    "example_with_holes",
    "jagged_policy",
    "max_row_length",
    "ragged_size_tensor_for",
    "readable",
    "row_lengths",
    "validate_rows",
]
