"""The flatten/unflatten protocol for traceable wrapper subclasses, typed and checked.

Input: tensors, plain or subclass (possibly nested). Output: a typed tree (`SubclassNode`) plus the plain inner
leaves in a fixed depth-first order, and the inverse that rebuilds a subclass from leaves.
Invariants: every call of `__tensor_unflatten__` made by subclassaot goes through `unflatten_subclass`, which checks
the contract (type, outer size, outer stride, dtype, device) and raises `ProtocolError` naming the input's path.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias, cast, runtime_checkable

import torch
from typing_extensions import TypeIs

from subclassaot.errors import ProtocolError, tuple_text
from subclassaot.torch_internals import (
    is_jagged_class,
    is_nested_expr,
    memoise_jagged_nested_int,
    no_torch_function,
    opaque_kind,
    try_expr_of,
)

SizeLike: TypeAlias = Sequence[int | torch.SymInt]

# Note [The Flatten Protocol]
# A traceable wrapper subclass exposes two dunders, exactly as torch.compile expects:
#     attrs, ctx = x.__tensor_flatten__()        # attrs: names readable with getattr; ctx: metadata
#     y = type(x).__tensor_unflatten__(inner, ctx, outer_size, outer_stride)
# `outer_size` / `outer_stride` are the size and stride the rebuilt wrapper must have; they may hold SymInts while
# tracing. A wrapper's strides do not always follow from its inner tensors (a sharded tensor's global strides, a
# transposed wrapper over contiguous inner tensors), which is why they are passed in and checked on the way out. A size
# is checked first as an expression: one whose expression is the expected one's is equal by construction and needs no
# traced comparison (a retraced backward rebuilds inputs under a tracer that never saw the compile's SymNodes); only
# sizes that differ as expressions are compared symbolically, and a nested int equals only itself.
# Leaves are ordered depth-first by `attrs` order; this is the order of the desugared (dense) calling convention, the
# same one PyTorch's AOTDispatch uses, so a subclass moves between the two systems unchanged.
# ctx rules (checked by `check_ctx`): survives copy.deepcopy with == (reflexive), holds no tensors and no SymInts, and
# pickles to the same bytes twice (it keys caches). `hash` is not required. Opaque *value* types (placements, enums)
# belong in ctx.
# Opaque inner objects: `__tensor_flatten__` may name, among its inner tensors, objects of a type registered with
# `torch._library.opaque_object.register_opaque_type(cls, typ="reference")` (DTensor names its DeviceMesh). Such an
# object is a handle to state outside tensors (a process group), not data: it is never fakified, never a graph input,
# never desugared into leaves. The node keeps it (`SubclassNode.opaques`, with its position in the attrs list) and every
# unflatten hands the very object back, so a fake DTensor holds the real mesh, as it does under torch.compile, and an
# output rebuilt at run time holds the mesh the entry was compiled with. That is only right while a call passes that
# same object, so the guards check each opaque inner object by identity, and name the fields of the type's registered
# `guard_fn` that differ when they fail. Any other non-tensor attribute is a ProtocolError that says how to register it.


@runtime_checkable
class TraceableWrapperSubclass(Protocol):
    """Static type of a tensor subclass that implements the flatten protocol."""

    def __tensor_flatten__(self) -> tuple[Sequence[str], object]: ...

    @staticmethod
    def __tensor_unflatten__(
        inner_tensors: dict[str, torch.Tensor], ctx: object, outer_size: SizeLike, outer_stride: SizeLike
    ) -> torch.Tensor: ...


def is_traceable_subclass(x: object) -> TypeIs[TraceableWrapperSubclass]:
    """True for a tensor whose type is a strict subclass of Tensor implementing both protocol dunders."""
    return (
        isinstance(x, torch.Tensor)
        and type(x) is not torch.Tensor
        and type(x) is not torch.nn.Parameter
        and hasattr(type(x), "__tensor_flatten__")
        and hasattr(type(x), "__tensor_unflatten__")
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LeafInfo:
    """A plain inner tensor of a flattened subclass (or a plain input itself)."""

    path: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OpaqueAttr:
    """A registered opaque reference object among a subclass's inner attributes (Note [The Flatten Protocol])."""

    name: str
    index: int  # position in the full attrs list `__tensor_flatten__` returned
    value: object


@dataclass(frozen=True, slots=True, kw_only=True)
class SubclassNode:
    """One wrapper subclass in a flattened tree; `children[i]` belongs to `attrs[i]`."""

    path: str
    cls: type[torch.Tensor]
    attrs: tuple[str, ...]  # len = number of inner tensors; indexed like `children`
    ctx: object
    outer_size: tuple[int | torch.SymInt, ...]  # len = outer ndim
    outer_stride: tuple[int | torch.SymInt, ...]  # len = outer ndim
    dtype: torch.dtype
    device: torch.device
    children: tuple[SubclassNode | LeafInfo, ...]  # len = len(attrs)
    num_leaves: int  # plain leaves below this node, depth-first
    opaques: tuple[OpaqueAttr, ...] = ()  # len = opaque inner objects, in attrs order (Note [The Flatten Protocol])
    # A nested wrapper's own requires_grad, where its leaves do not give it (`TwoTensor(xx, xx.detach().clone()
    # .requires_grad_())`): its rebuild over leaves that do not require grad is turned on again, or the outer's
    # __tensor_unflatten__ sees members that disagree. False at the top (the pipeline decides the input's own).
    requires_grad: bool = False
    # A nested wrapper whose outer size and stride were those of its leaf `stride_leaf` (counted within its own
    # leaves; a TwoTensor takes its first inner tensor's): rebuilt inside its parent, it takes that leaf's strides
    # (Note [Strides The Kernels Choose]). Not compared: guards compare the metadata themselves.
    stride_leaf: int | None = dataclasses.field(default=None, compare=False, repr=False)

    def flatten_attrs(self) -> tuple[str, ...]:
        """Every name `__tensor_flatten__` returned, tensors and opaque objects, in its order."""
        names = list(self.attrs)
        for opaque in self.opaques:
            names.insert(opaque.index, opaque.name)
        return tuple(names)

    def leaf_paths(self) -> tuple[str, ...]:
        """Source paths of the plain leaves, in leaf order."""
        out: list[str] = []
        for child in self.children:
            out.extend(child.leaf_paths() if isinstance(child, SubclassNode) else (child.path,))
        return tuple(out)


def inner_path(path: str, attr: str) -> str:
    return f"{path}.{attr}"


def _flatten_call(x: TraceableWrapperSubclass, path: str) -> tuple[tuple[str, ...], object]:
    try:
        attrs, ctx = x.__tensor_flatten__()
    except Exception as e:
        raise ProtocolError(f"{path}: {type(x).__name__}.__tensor_flatten__() raised {e!r}") from e
    if not all(isinstance(a, str) for a in attrs):
        raise ProtocolError(
            f"{path}: {type(x).__name__}.__tensor_flatten__() must return attribute *names* (str) first; got {attrs!r}"
        )
    return tuple(attrs), ctx


def flatten_subclass(x: torch.Tensor, path: str) -> tuple[SubclassNode, list[torch.Tensor]]:
    """Flatten `x` (a traceable subclass) recursively; leaves are plain tensors in depth-first attrs order."""
    if not is_traceable_subclass(x):
        raise ProtocolError(
            f"{path}: {type(x).__name__} does not implement __tensor_flatten__/__tensor_unflatten__; "
            "define both (see subclassaot.WrapperTensor for a base class that derives them)"
        )
    all_attrs, ctx = _flatten_call(x, path)
    children: list[SubclassNode | LeafInfo] = []
    leaves: list[torch.Tensor] = []
    opaques: list[OpaqueAttr] = []
    attrs: list[str] = []
    for index, attr in enumerate(all_attrs):
        sub_path = inner_path(path, attr)
        inner = _inner_attr(x, attr, sub_path)
        if not isinstance(inner, torch.Tensor):
            opaques.append(OpaqueAttr(name=attr, index=index, value=inner))
            continue
        attrs.append(attr)
        if is_traceable_subclass(inner):
            node, sub_leaves = flatten_subclass(inner, sub_path)
            with no_torch_function():  # (reads of our own, not the program's)
                wants_grad = inner.requires_grad
                follows = _followed_leaf(node, sub_leaves)
            children.append(dataclasses.replace(node, requires_grad=wants_grad, stride_leaf=follows))
            leaves.extend(sub_leaves)
        elif type(inner) is torch.Tensor or type(inner) is torch.nn.Parameter or _is_plain_like(inner):
            children.append(LeafInfo(path=sub_path))
            leaves.append(inner)
        else:
            raise ProtocolError(
                f"{sub_path}: inner tensor of type {type(inner).__name__} is a subclass that does not implement "
                "the flatten protocol; every nested subclass must implement it too"
            )
    node = SubclassNode(
        path=path,
        cls=type(x),
        attrs=tuple(attrs),
        ctx=ctx,
        outer_size=tuple(x.size()),
        outer_stride=tuple(x.stride()),
        dtype=x.dtype,
        device=x.device,
        children=tuple(children),
        num_leaves=len(leaves),
        opaques=tuple(opaques),
    )
    return node, leaves


def _followed_leaf(node: SubclassNode, leaves: Sequence[torch.Tensor]) -> int | None:
    """The first of `leaves` whose size and stride are `node`'s outer ones (static sizes only)."""
    if not all(type(d) is int for d in (*node.outer_size, *node.outer_stride)):
        return None
    return next(
        (k for k, leaf in enumerate(leaves) if leaf.size() == node.outer_size and leaf.stride() == node.outer_stride),
        None,
    )


def _child_stride(child: SubclassNode, leaves: Sequence[torch.Tensor]) -> SizeLike | None:
    """A nested wrapper's strides in its rebuild: those of the leaf it followed where that leaf has its size, so a
    kernel's choice of strides in a dim of size 0 or 1 (which fakes may not make) reaches it as in eager (Note
    [Strides The Kernels Choose]); else None (its recorded ones)."""
    if child.stride_leaf is None:
        return None
    leaf = leaves[child.stride_leaf]
    return tuple(leaf.stride()) if tuple(leaf.size()) == child.outer_size else None


def inner_wrappers(x: torch.Tensor, path: str) -> list[tuple[tuple[str, ...], torch.Tensor]]:
    """The tensor subclasses among `x`'s inner tensors, recursively (not `x` itself), depth-first in attrs order, each
    with the attribute names leading to it from `x`; [] for a plain tensor or a subclass over plain tensors only."""
    if not is_traceable_subclass(x):
        return []
    found: list[tuple[tuple[str, ...], torch.Tensor]] = []
    for attr in _flatten_call(x, path)[0]:
        inner = getattr(x, attr, None)
        if isinstance(inner, torch.Tensor) and is_traceable_subclass(inner):
            found.append(((attr,), inner))
            found.extend(((attr, *attrs), t) for attrs, t in inner_wrappers(inner, inner_path(path, attr)))
    return found


def dense_leaves(t: torch.Tensor, path: str = "t") -> list[torch.Tensor]:
    """The plain tensors `t` holds: its inner tensors, recursively, if it is a traceable subclass; else `[t]`."""
    return flatten_subclass(t, path)[1] if is_traceable_subclass(t) else [t]


def _inner_attr(x: torch.Tensor, attr: str, sub_path: str) -> object:
    """`getattr(x, attr)`: a tensor or a registered opaque reference object (Note [The Flatten Protocol])."""
    try:
        inner: object = getattr(x, attr)
    except AttributeError as e:
        raise ProtocolError(
            f"{sub_path}: {type(x).__name__}.__tensor_flatten__() names attribute {attr!r}, but the tensor has no "
            "such attribute; name only attributes that are set (leave optional inner tensors that are None out)"
        ) from e
    if isinstance(inner, torch.Tensor):
        return inner
    kind = opaque_kind(inner)
    if kind == "reference":
        return inner
    name = type(inner).__name__
    if kind == "value":
        raise ProtocolError(
            f"{sub_path}: {type(x).__name__}.__tensor_flatten__() names attribute {attr!r}, an opaque *value* "
            f"({name}); only tensors and opaque reference objects may be inner attributes. Put values in ctx"
        )
    raise ProtocolError(
        f"{sub_path}: {type(x).__name__}.__tensor_flatten__() names attribute {attr!r}, but getattr gives a {name}, "
        "which is neither a Tensor nor a registered opaque reference type. Leave optional inner tensors that are None "
        f"out of attrs; put plain metadata in ctx; or, for a handle to outside state, register its type: "
        f"torch._library.opaque_object.register_opaque_type({name}, typ='reference') "
        "(the class deriving torch._opaque_base.OpaqueBase)"
    )


def _is_plain_like(t: torch.Tensor) -> bool:
    # FunctionalTensor and FakeTensor are torch's own mode tensors: they stand for plain tensors while tracing.
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    return isinstance(t, FakeTensor | FunctionalTensor)


def unflatten_subclass(
    node: SubclassNode,
    leaves: Sequence[torch.Tensor],
    *,
    outer_size: SizeLike | None = None,
    outer_stride: SizeLike | None = None,
    check_dtype_device: bool = True,
    check: bool = True,
) -> torch.Tensor:
    """Rebuild a subclass from `leaves` (depth-first, as `flatten_subclass` gave them) and check the contract."""
    if len(leaves) != node.num_leaves:
        raise AssertionError(f"BUG: {node.path} expects {node.num_leaves} leaves, got {len(leaves)}")
    size = tuple(node.outer_size if outer_size is None else outer_size)
    stride = tuple(node.outer_stride if outer_stride is None else outer_stride)
    size, stride = _leaf_symbols(size, leaves), _leaf_symbols(stride, leaves)
    inner: dict[str, torch.Tensor] = {}
    start = 0
    for attr, child in zip(node.attrs, node.children, strict=True):
        if isinstance(child, SubclassNode):
            own = leaves[start : start + child.num_leaves]
            inner[attr] = unflatten_subclass(
                child, own, outer_stride=_child_stride(child, own), check_dtype_device=check_dtype_device, check=check
            )
            if child.requires_grad and not inner[attr].requires_grad and inner[attr].is_leaf:
                inner[attr].requires_grad_(True)
            start += child.num_leaves
        else:
            inner[attr] = leaves[start]
            start += 1
    memoise_jagged_nested_int(node.cls, inner, node.ctx, size)
    # The Protocol types inner values as tensors, as most authors write them; opaque objects ride along.
    opaque_inner = cast("dict[str, torch.Tensor]", {**inner, **{o.name: o.value for o in node.opaques}})
    out = _call_unflatten(node.cls, node.path, opaque_inner, node.ctx, size, stride)
    if check:
        check_unflatten_result(node, out, size, stride, check_dtype_device=check_dtype_device)
    assert isinstance(out, torch.Tensor)
    return out


def _leaf_symbols(meta: SizeLike, leaves: Sequence[torch.Tensor]) -> tuple[int | torch.SymInt, ...]:
    """`meta` (an outer size or stride) with each symbolic value the leaves' own where one has it: the recorded
    value was made before the trace, which knows a product like `s1*s5*(s2 + s3)` only through the leaves (building
    it from its symbols fails in make_fx); the same expression is the same value."""
    known: dict[object, torch.SymInt] = {}
    for leaf in leaves:
        for d in (*leaf.shape, *leaf.stride(), leaf.storage_offset()):
            if isinstance(d, torch.SymInt) and hasattr(d.node, "expr"):  # (a nested int has none)
                known.setdefault(d.node.expr, d)
    return tuple(known.get(getattr(d.node, "expr", None), d) if isinstance(d, torch.SymInt) else d for d in meta)


def _call_unflatten(
    cls: type, path: str, inner: dict[str, torch.Tensor], ctx: object, size: SizeLike, stride: SizeLike
) -> object:
    """`cls.__tensor_unflatten__(...)`; whatever it raises but a ProtocolError becomes one naming `path`."""
    try:
        return cast("type[TraceableWrapperSubclass]", cls).__tensor_unflatten__(inner, ctx, size, stride)
    except ProtocolError:
        raise
    except Exception as e:
        raise ProtocolError(f"{path}: {cls.__name__}.__tensor_unflatten__ raised {e!r}") from e


Unflattener = Callable[[Sequence[torch.Tensor], SizeLike, SizeLike], torch.Tensor]


def unflattener(node: SubclassNode) -> Unflattener:
    """`unflatten_subclass(node, leaves, outer_size=..., outer_stride=..., check=False)` with what is fixed per node
    decided once: for a node whose children are all plain leaves, with no opaque object and no jagged nested int to
    memoise, only the `__tensor_unflatten__` call is left for each call (a runtime's output rebuild: the contract was
    checked when the entry was traced)."""
    simple = not node.opaques and all(isinstance(c, LeafInfo) for c in node.children)
    if not simple or is_jagged_class(node.cls):

        def general(leaves: Sequence[torch.Tensor], size: SizeLike, stride: SizeLike) -> torch.Tensor:
            return unflatten_subclass(node, leaves, outer_size=size, outer_stride=stride, check=False)

        return general
    cls, attrs, ctx, path = node.cls, node.attrs, node.ctx, node.path

    def build(leaves: Sequence[torch.Tensor], size: SizeLike, stride: SizeLike) -> torch.Tensor:
        if len(leaves) != len(attrs):
            raise AssertionError(f"BUG: {path} expects {len(attrs)} leaves, got {len(leaves)}")
        out = _call_unflatten(cls, path, dict(zip(attrs, leaves, strict=True)), ctx, tuple(size), tuple(stride))
        assert isinstance(out, torch.Tensor)
        return out

    return build


def check_unflatten_result(
    node: SubclassNode, out: object, size: SizeLike, stride: SizeLike, *, check_dtype_device: bool = True
) -> None:
    """Raise ProtocolError unless `out` is what `__tensor_unflatten__` promised for `node`."""
    name = node.cls.__name__
    if type(out) is not node.cls:
        raise ProtocolError(f"{node.path}: {name}.__tensor_unflatten__ must return a {name}, got {type(out).__name__}")
    assert isinstance(out, torch.Tensor)
    _check_dims(node.path, name, "size", tuple(out.size()), tuple(size))
    _check_dims(node.path, name, "stride", tuple(out.stride()), tuple(stride))
    if check_dtype_device and out.dtype != node.dtype:
        raise ProtocolError(
            f"{node.path}: {name}.__tensor_unflatten__ gave dtype {out.dtype}, expected {node.dtype} "
            "(the dtype the flattened tensor had)"
        )
    if check_dtype_device and out.device.type != node.device.type:
        raise ProtocolError(
            f"{node.path}: {name}.__tensor_unflatten__ gave device {out.device}, expected {node.device}"
        )


def _same_dim(got: int | torch.SymInt, expected: int | torch.SymInt) -> bool:
    # The expected size is the SymNode the subclass had when it was fakified; a backward retraced for another tangent
    # structure rebuilds inputs under a new tracer that never saw it, where `==` would be a traced op on an untracked
    # symbol. Equal expressions (an int counting as a constant expression) are equal by construction: no traced op.
    # See Note [The Flatten Protocol].
    if isinstance(got, torch.SymInt) or isinstance(expected, torch.SymInt):
        got_expr, expected_expr = try_expr_of(got), try_expr_of(expected)
        if got_expr is not None and got_expr == expected_expr:
            return True
        if is_nested_expr(got_expr) or is_nested_expr(expected_expr):
            return False  # a plain nested int equals only itself (and `==` with a symbol has no meaning)
    return bool(got == expected)


def _check_dims(
    path: str, name: str, what: str, got: tuple[int | torch.SymInt, ...], expected: tuple[int | torch.SymInt, ...]
) -> None:
    # A -1 stands for a dimension only the subclass can rebuild (a nested int); it is not checked.
    ok = len(got) == len(expected) and all(
        (isinstance(e, int) and e == -1) or _same_dim(g, e) for g, e in zip(got, expected, strict=True)
    )
    if not ok:
        raise ProtocolError(
            f"{path}: {name}.__tensor_unflatten__ broke the outer {what} contract: expected {what} "
            f"{tuple_text(expected)}, got {tuple_text(got)}. Build the wrapper with the outer_size/outer_stride it is given, "
            "e.g. torch.Tensor._make_wrapper_subclass(cls, outer_size, strides=outer_stride, ...)"
        )


def map_inner_tensors(
    x: torch.Tensor,
    fn: Callable[[str, torch.Tensor], torch.Tensor],
    path: str,
    *,
    outer_size: SizeLike | None = None,
    outer_stride: SizeLike | None = None,
) -> torch.Tensor:
    """Rebuild subclass `x` with `fn(leaf_path, leaf)` applied to every plain leaf (recursively), checked."""
    node, leaves = flatten_subclass(x, path)
    new_leaves = [fn(p, leaf) for p, leaf in zip(node.leaf_paths(), leaves, strict=True)]
    return unflatten_subclass(node, new_leaves, outer_size=outer_size, outer_stride=outer_stride)


def check_ctx(ctx: object, path: str, cls_name: str) -> None:
    """The ctx rules of Note [The Flatten Protocol]; raises ProtocolError naming the broken rule."""
    where = f"{path}: {cls_name}.__tensor_flatten__() ctx"
    bad = find_tensor_or_symint(ctx)
    if bad is not None:
        raise ProtocolError(
            f"{where} holds a {bad}; ctx is compared as a constant by guards and keys caches. Move tensors into the "
            "inner-tensor attrs and keep sizes out of ctx (they are the outer_size passed to __tensor_unflatten__)"
        )
    unordered = find_unordered_set(ctx)
    if unordered is not None:
        raise ProtocolError(
            f"{where} holds a {unordered}: its pickle (a cache key) depends on the process's hash seed. "
            "Use a sorted tuple instead"
        )
    try:
        copied = copy.deepcopy(ctx)
    except Exception as e:
        raise ProtocolError(f"{where} does not survive copy.deepcopy: {e!r}") from e
    try:
        equal = bool(copied == ctx)
    except Exception as e:
        raise ProtocolError(f"{where} cannot be compared with ==: {e!r}") from e
    if not equal:
        raise ProtocolError(
            f"{where} is not equal to its deepcopy ({ctx!r}); guards compare ctx with == against a deepcopy, so "
            "it would recompile on every call. Give its types value equality (e.g. @dataclass(frozen=True))"
        )
    try:
        first, second = pickle.dumps(ctx), pickle.dumps(copied)
    except Exception as e:
        raise ProtocolError(f"{where} cannot be pickled: {e!r}") from e
    if first != second or pickle.dumps(ctx) != first:
        raise ProtocolError(
            f"{where} does not pickle to the same bytes twice (a set, a dict keyed by objects, an address?); "
            "cache keys need deterministic pickling: use tuples and sorted items instead of sets"
        )


def find_tensor_or_symint(obj: object, _seen: set[int] | None = None) -> str | None:
    """Describe the first tensor or symbolic number inside `obj` (containers and dataclasses searched)."""
    seen = set() if _seen is None else _seen
    if id(obj) in seen:
        return None
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return f"Tensor of shape {tuple(obj.shape)}"
    if isinstance(obj, torch.SymInt | torch.SymFloat | torch.SymBool):
        return f"symbolic value {obj}"
    children: list[object] = []
    if isinstance(obj, Mapping):
        children = [*obj.keys(), *obj.values()]
    elif isinstance(obj, list | tuple | set | frozenset):
        children = list(obj)
    elif hasattr(obj, "__dataclass_fields__"):
        children = [getattr(obj, f, None) for f in obj.__dataclass_fields__]
    for child in children:
        found = find_tensor_or_symint(child, seen)
        if found is not None:
            return found
    return None


def find_unordered_set(obj: object) -> str | None:
    """Describe the first set/frozenset inside `obj` (whose iteration order is process-dependent)."""
    if isinstance(obj, set | frozenset):
        return f"{type(obj).__name__} {obj!r}"
    children: list[object] = []
    if isinstance(obj, Mapping):
        children = [*obj.keys(), *obj.values()]
    elif isinstance(obj, list | tuple):
        children = list(obj)
    elif hasattr(obj, "__dataclass_fields__"):
        children = [getattr(obj, f, None) for f in obj.__dataclass_fields__]
    for child in children:
        found = find_unordered_set(child)
        if found is not None:
            return found
    return None
