"""Policy objects: what a user (or a subclass, or a mark) says about the dims of one tensor or subclass.

Input: constructor arguments. Output: frozen, typed, readable policy values. Invariants: a policy that contradicts
itself (min > max, a range on a static dim) cannot be built; anything that needs the input (a relation naming a
missing attribute, a size outside a range) is checked where the policy meets the input (`policies.plan`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import TypeAlias

from policies.errors import PolicyError


class DimKind(Enum):
    """How one dim of a size (or stride) is treated when the input is fakified."""

    STATIC = "static"  # the size seen is baked in and guarded
    DYNAMIC = "dynamic"  # a symbol
    AUTOMATIC = "automatic"  # static until a second, different size is seen at the same source path


class Origin(Enum):
    """Where the policy in force for a dim came from (shown by `describe`)."""

    DEFAULT = "default"  # nothing said anything: the compile's `dynamic` setting
    POLICY = "policy"  # a policy object given by the user (to compile, or built by hand)
    MARK = "mark"  # mark_dynamic / mark_static on this instance
    HOOK = "hook"  # the class's __tensor_mark_dynamic__
    TORCH_MARK = "torch mark"  # torch's own mark_dynamic (read from `_dynamo_dynamic_indices`)
    CLASS = (
        "class"  # the rule of a class that carries no hook: torch's jagged NestedTensor (Note [Jagged Layout Policy])
    )
    AUTOMATIC = "automatic"  # automatic dynamic saw this dim change
    SHARED = "shared"  # an inner dim that follows the outer dim of the same index (the default relation)
    RELATION = "relation"  # derived from another dim by a declared relation


class Prop(Enum):
    """Which per-dim property of a tensor a policy or a symbol binding talks about."""

    SIZE = "size"
    STRIDE = "stride"


@dataclass(frozen=True, slots=True, kw_only=True)
class DimPolicy:
    """The policy for one dim: its kind, an optional inclusive range and divisibility."""

    kind: DimKind = DimKind.STATIC
    min: int | None = None
    max: int | None = None
    divisible_by: int | None = None
    origin: Origin = field(default=Origin.POLICY, compare=False)

    def __post_init__(self) -> None:
        has_constraint = self.min is not None or self.max is not None or self.divisible_by is not None
        if self.kind is DimKind.STATIC and has_constraint:
            raise PolicyError(
                f"{self!r}: a range or divisibility on a static dim means nothing (a static dim is one exact size); "
                "use dynamic(min=..., max=...) instead of static(...) with a range"
            )
        if self.min is not None and self.min < 0:
            raise PolicyError(f"{self!r}: min={self.min} is negative; sizes are >= 0")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise PolicyError(f"{self!r}: min={self.min} > max={self.max}, no size satisfies it; swap them")
        if self.divisible_by is not None and self.divisible_by < 1:
            raise PolicyError(f"{self!r}: divisible_by={self.divisible_by} must be >= 1")

    def __repr__(self) -> str:
        parts = [
            f"{name}={value}"
            for name, value in (("min", self.min), ("max", self.max), ("divisible_by", self.divisible_by))
            if value is not None
        ]
        return f"{self.kind.value}({', '.join(parts)})"

    def with_origin(self, origin: Origin) -> DimPolicy:
        return DimPolicy(kind=self.kind, min=self.min, max=self.max, divisible_by=self.divisible_by, origin=origin)


def static() -> DimPolicy:
    return DimPolicy(kind=DimKind.STATIC)


def dynamic(*, min: int | None = None, max: int | None = None, divisible_by: int | None = None) -> DimPolicy:
    return DimPolicy(kind=DimKind.DYNAMIC, min=min, max=max, divisible_by=divisible_by)


def automatic(*, min: int | None = None, max: int | None = None, divisible_by: int | None = None) -> DimPolicy:
    return DimPolicy(kind=DimKind.AUTOMATIC, min=min, max=max, divisible_by=divisible_by)


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorPolicy:
    """The policy for a plain tensor (or for the outer tensor of a subclass)."""

    sizes: tuple[DimPolicy, ...]  # len = ndim; indexed by dim
    # len = ndim, indexed by dim; None (whole or per entry): inferred from the sizes where the tensor is dense in
    # some dim order, static where it is not. A DYNAMIC entry gives that stride its own symbol.
    strides: tuple[DimPolicy | None, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "sizes", tuple(self.sizes))
        if self.strides is not None:
            strides = tuple(self.strides)
            object.__setattr__(self, "strides", strides)
            if len(strides) != len(self.sizes):
                raise PolicyError(
                    f"TensorPolicy has {len(self.sizes)} size policies but {len(strides)} stride policies; "
                    "give one per dim (None for an inferred stride)"
                )
            for d, p in enumerate(strides):
                if p is not None and p.kind is DimKind.AUTOMATIC:
                    raise PolicyError(
                        f"TensorPolicy stride({d}) is automatic; strides are inferred from sizes, static or dynamic"
                    )

    @staticmethod
    def all_static(ndim: int) -> TensorPolicy:
        return TensorPolicy(sizes=(static(),) * ndim)

    @staticmethod
    def all_dynamic(ndim: int) -> TensorPolicy:
        return TensorPolicy(sizes=(dynamic(),) * ndim)

    def __repr__(self) -> str:
        sizes = ", ".join(repr(p) for p in self.sizes)
        if self.strides is None:
            return f"TensorPolicy(sizes=({sizes}))"
        strides = ", ".join("inferred" if p is None else repr(p) for p in self.strides)
        return f"TensorPolicy(sizes=({sizes}), strides=({strides}))"


@dataclass(frozen=True, slots=True, kw_only=True)
class DimRef:
    """One dim of the outer tensor (`attr == ""`) or of an inner tensor (`attr` a dotted attribute path)."""

    attr: str
    dim: int
    prop: Prop = Prop.SIZE

    def __repr__(self) -> str:
        where = f"{self.attr}." if self.attr else ""
        return f"{where}{self.prop.value}({self.dim})"


def outer(dim: int, prop: Prop = Prop.SIZE) -> DimRef:
    return DimRef(attr="", dim=dim, prop=prop)


def inner(attr: str, dim: int, prop: Prop = Prop.SIZE) -> DimRef:
    if not attr:
        raise PolicyError("inner(attr, dim): attr must name an inner tensor; use outer(dim) for the outer tensor")
    return DimRef(attr=attr, dim=dim, prop=prop)


def linear_text(source: str, *, scale: int, divisor: int, offset: int) -> str:
    """`source * scale // divisor + offset`, leaving out the identity parts."""
    text = source
    if scale != 1:
        text += f" * {scale}"
    if divisor != 1:
        text += f" // {divisor}"
    if offset:
        text += f" {'+' if offset > 0 else '-'} {abs(offset)}"
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class Relation:
    """`target == source * scale // divisor + offset`: the target dim is an expression of the source dim's symbol.

    Equality, affine (`offsets.size(0) == size(0) + 1`), product (`size(0) == local.size(0) * world`) and floor
    division are all this one form; the target gets no symbol of its own (see Note [Fakify Through The Symbol Cache]).
    """

    target: DimRef
    source: DimRef
    scale: int = 1
    divisor: int = 1
    offset: int = 0

    def __post_init__(self) -> None:
        if self.scale < 1 or self.divisor < 1:
            raise PolicyError(f"{self!r}: scale and divisor must be >= 1 (got {self.scale}, {self.divisor})")
        if self.target == self.source:
            raise PolicyError(f"{self!r}: a dim cannot be related to itself")

    def apply(self, source_value: int) -> int:
        return source_value * self.scale // self.divisor + self.offset

    def rhs(self) -> str:
        return linear_text(repr(self.source), scale=self.scale, divisor=self.divisor, offset=self.offset)

    def __repr__(self) -> str:
        return f"{self.target!r} == {self.rhs()}"


def equal(target: DimRef, source: DimRef) -> Relation:
    return Relation(target=target, source=source)


def affine(target: DimRef, source: DimRef, *, offset: int) -> Relation:
    return Relation(target=target, source=source, offset=offset)


def product(target: DimRef, source: DimRef, *, factor: int) -> Relation:
    return Relation(target=target, source=source, scale=factor)


def floordiv(target: DimRef, source: DimRef, *, divisor: int) -> Relation:
    return Relation(target=target, source=source, divisor=divisor)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubclassSymbolicPolicy:
    """The outer tensor's policy, one policy per inner tensor (recursively), and relations between their dims.

    Inner tensors not named in `inner` get the policy derived for them (their own marks, or defaults). With
    `share_outer_dims`, an inner tensor of the outer's rank whose size in a dim equals the outer's shares the
    outer's symbol there (the default relation; see Note [Inner Dims Share Outer Symbols]).
    """

    outer: TensorPolicy
    inner: Mapping[str, TensorPolicy | SubclassSymbolicPolicy] = field(default_factory=dict)
    relations: Sequence[Relation] = ()
    share_outer_dims: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "inner", MappingProxyType(dict(self.inner)))
        object.__setattr__(self, "relations", tuple(self.relations))
        targets = [r.target for r in self.relations]
        for t in targets:
            if targets.count(t) > 1:
                raise PolicyError(
                    f"SubclassSymbolicPolicy: {t!r} is the target of {targets.count(t)} relations; a dim can be "
                    "derived from one other dim only (state the others as relations on their own targets)"
                )

    def __repr__(self) -> str:
        parts = [f"outer={self.outer!r}"]
        if self.inner:
            parts.append("inner={" + ", ".join(f"{k!r}: {v!r}" for k, v in self.inner.items()) + "}")
        if self.relations:
            parts.append("relations=[" + ", ".join(repr(r) for r in self.relations) + "]")
        if not self.share_outer_dims:
            parts.append("share_outer_dims=False")
        return f"SubclassSymbolicPolicy({', '.join(parts)})"


Policy: TypeAlias = TensorPolicy | SubclassSymbolicPolicy


def unspecified() -> DimPolicy:
    """A dim nobody spoke about: the compile's default applies."""
    return DimPolicy(kind=DimKind.STATIC, origin=Origin.DEFAULT)


def marked(ndim: int, dims: Iterable[int], policy: DimPolicy) -> TensorPolicy:
    """A TensorPolicy that says `policy` for `dims` and nothing for the others (for hooks)."""
    chosen = set(dims)
    return TensorPolicy(sizes=tuple(policy if d in chosen else unspecified() for d in range(ndim)))
