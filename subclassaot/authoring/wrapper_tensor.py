"""`WrapperTensor`: a base class that derives the flatten protocol, an op table and aliasing from declarations.

Purpose: an author declares which attributes are inner tensors and which are context values; the base class gives
construction through `_make_wrapper_subclass`, `__tensor_flatten__` / `__tensor_unflatten__` (honouring the outer
size and stride, symbolic or `-1`), `__repr__`, a per-class op table (`@implements`), optional "apply every op to
every inner tensor" behaviour, aliasing correction for views and in-place ops, and detach / clone / copy_ / to /
deepcopy / pickle. See Note [The Flatten Protocol] in protocol.py for the contract this implements.
"""

from __future__ import annotations

import copy
import keyword
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from inspect import Parameter, signature
from typing import Any, ClassVar, TypeAlias, TypeVar, cast

import torch
import torch.utils._pytree as pytree
from torch._ops import OpOverload, OpOverloadPacket
from torch.utils._python_dispatch import return_and_correct_aliasing

from subclassaot.authoring.protocol import SizeLike, Unflattener
from subclassaot.errors import ProtocolError, UnsupportedError

aten = torch.ops.aten

# Note [Autograd Sees The Wrapper]
# In eager, autograd and view tracking run above a subclass's `__torch_dispatch__`, so everything they keep belongs to
# the wrapper: its grad_fn, requires_grad, `._base`, and version counter. Below them:
# - inner tensors carry no history. A write the subclass makes to them (or the program, `x.a.add_(1)`, `x.data.mul_(2)`)
#   is recorded on no autograd graph and bumps only the inner tensor's counter; a foreach op on wrappers writes their
#   inner tensors and leaves each wrapper's counter where it was.
# - a view op the subclass runs on its inner tensors shares storage but sets no `._base`: an inner tensor of a view
#   output is a plain alias of the source's, not an autograd view, with a counter of its own (taken out, `x[1:].a` or
#   a DTensor split piece's to_local() under no_grad, it is written without bumping the source's). Conversely a
#   wrapper-level view has `._base` its source whatever inner tensors the subclass returns, even new ones that share no
#   data (the checker's views.alias rule flags those), and a wrapper built from plain tensors inside the program may be
#   a view of them (an NJT's `._base` is its values).
# - a wrapper has a storage of its own that holds no data (a null data pointer): views share it, set_ moves it, and the
#   aliasing correction below keeps it right. set_() of a wrapper onto that storage leaves its inner tensors pointing at
#   no memory, which no compiled program can match: refused.
# `__torch_dispatch__` finds `func` by overload, then by packet, in the op tables of the class's MRO (nearest class
# first; parents' later registrations are seen). Unlisted ops apply to every inner tensor when
# `apply_to_inner_by_default` is set, else raise UnsupportedError naming the class, op and argument types. Every result
# goes through `return_and_correct_aliasing`: a view's output shares its input's wrapper storage (so the analysis sees
# the alias), an in-place op returns its input object, and an inplace_view op (t_, unsqueeze_, as_strided_) replays
# itself on the wrapper's own metadata. set_ / resize_ change metadata without being inplace_view ops, so the base class
# re-derives the wrapper's size and stride from its inner tensors after them.
# The pipeline follows from this: what autograd must see of a subclass input is applied at the wrapper level (Note
# [Inputs Written In Training]), what it must not see goes below it, and an output whose eager `._base` the
# rebuilt wrappers cannot reproduce (views over fresh inner tensors, wrappers that view a plain tensor) is refused by
# name (new nested ints are not: Note [Nested Int Dims]); so is a wrapper the program built around inner tensors with
# history of their own (`TwoTensor(x * 1, x * 2)`), which eager's keep and the graph's, computed below the wrapper,
# lack.

OpHandler: TypeAlias = Callable[[OpOverload[..., Any], tuple[Any, ...], dict[str, Any]], Any]
OpKey: TypeAlias = "OpOverload[..., Any] | OpOverloadPacket[..., Any]"
_H = TypeVar("_H", bound=OpHandler)
_W = TypeVar("_W", bound="WrapperTensor")

# return_and_correct_aliasing is untyped; this is its signature. See Note [Autograd Sees The Wrapper].
_correct_aliasing = cast(
    "Callable[[OpOverload[..., Any], tuple[Any, ...], dict[str, Any], Any], Any]", return_and_correct_aliasing
)
_RESERVED = frozenset({"outer_size", "outer_stride", "requires_grad"})
_METADATA_MUTATING = frozenset({"set_", "resize_", "resize_as_"})


@dataclass(frozen=True, slots=True, kw_only=True)
class OuterMeta:
    """What `_make_wrapper_subclass` needs to build the outer wrapper."""

    size: tuple[int | torch.SymInt, ...]  # len = outer ndim
    stride: tuple[int | torch.SymInt, ...]  # len = outer ndim
    storage_offset: int | torch.SymInt
    dtype: torch.dtype
    device: torch.device
    layout: torch.layout


def implements(*ops: OpKey) -> Callable[[_H], _H]:
    """Mark a function in a WrapperTensor class body as the handler of `ops` (collected at class creation).

    The function takes `(func, args, kwargs)` and returns the op's result; it becomes a staticmethod.
    """

    def mark(fn: _H) -> _H:
        # An attribute on the function object marks it for the class's op table (read in __init_subclass__).
        fn.__subclassaot_ops__ = (*getattr(fn, "__subclassaot_ops__", ()), *ops)  # type: ignore[attr-defined]
        return fn

    return mark


def _contiguous_strides(size: tuple[int | torch.SymInt, ...]) -> tuple[int | torch.SymInt, ...]:
    strides: list[int | torch.SymInt] = []
    running: int | torch.SymInt = 1
    for dim in reversed(size):
        strides.append(running)
        running = running * dim if isinstance(dim, int) else dim * running
    return tuple(reversed(strides))


class WrapperTensor(torch.Tensor):
    """Base class for traceable wrapper subclasses.

    A subclass declares three tuples of attribute names:
        inner_names           inner tensors that are always present (flattened, in this order)
        optional_inner_names  inner tensors that may be None (flattened only when present, after inner_names)
        ctx_names             plain metadata (ctx = tuple of their values, in this order; see check_ctx's rules)
    The constructor takes exactly these names, in this order, positionally or by keyword, plus the keyword-only
    outer_size / outer_stride / requires_grad. The outer metadata defaults to the first present inner tensor's
    (override `outer_meta` when the wrapper's dtype or shape differs from its data, e.g. FP8 data with a float outer
    dtype). `__init_subclass__` checks the declarations once, at class creation, so a typo or a name that shadows a
    Tensor attribute ("data", "grad", "shape") fails where it is written, not in the middle of a trace. If the class
    defines its own __init__ or __new__, its leading parameters must be the declared names in order.
    """

    inner_names: ClassVar[tuple[str, ...]] = ()
    optional_inner_names: ClassVar[tuple[str, ...]] = ()
    ctx_names: ClassVar[tuple[str, ...]] = ()
    apply_to_inner_by_default: ClassVar[bool] = False
    _own_ops: ClassVar[dict[OpKey, OpHandler]] = {}

    # Ops reach __torch_dispatch__ below autograd; torch functions run Tensor's own implementations.
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]  # stub types differ

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _check_declarations(cls)
        cls._own_ops = {}
        for value in list(vars(cls).values()):
            fn = value.__func__ if isinstance(value, staticmethod) else value
            for op in getattr(fn, "__subclassaot_ops__", ()):
                cls._own_ops[op] = fn
        for name, value in list(vars(cls).items()):
            if callable(value) and hasattr(value, "__subclassaot_ops__"):
                setattr(cls, name, staticmethod(value))

    # -- construction ------------------------------------------------------------------------------------------
    @staticmethod
    def __new__(
        cls: type[_W],
        *args: Any,
        outer_size: SizeLike | None = None,
        outer_stride: SizeLike | None = None,
        requires_grad: bool = False,
        **kwargs: Any,
    ) -> _W:
        fields = _bind_fields(cls, args, kwargs)
        meta = cls.outer_meta(fields)
        size, stride = _resolve_outer(meta.size, meta.stride, outer_size, outer_stride)
        return _plain_wrapper(cls, meta, size, stride, fields.items(), requires_grad)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # All state is set in __new__; Tensor's own __init__ must not see the constructor's arguments.
        super().__init__()

    @classmethod
    def outer_meta(cls, fields: Mapping[str, object]) -> OuterMeta:
        """Outer metadata derived from the fields: by default the first present inner tensor's."""
        inner = (fields.get(n) for n in (*cls.inner_names, *cls.optional_inner_names))
        first = next((t for t in inner if isinstance(t, torch.Tensor)), None)
        if first is None:
            raise ProtocolError(f"{cls.__name__}: no inner tensor given; declared inner_names={cls.inner_names!r}")
        return OuterMeta(
            size=tuple(first.size()),
            stride=tuple(first.stride()),
            storage_offset=first.storage_offset(),
            dtype=first.dtype,
            device=first.device,
            layout=first.layout,
        )

    # -- the flatten protocol ----------------------------------------------------------------------------------
    def __tensor_flatten__(self) -> tuple[list[str], tuple[object, ...]]:
        # (called by every guard check and unflatten of a wrapper: the common declarations take no generator)
        optional, ctx_names = self.optional_inner_names, self.ctx_names
        attrs = (
            [*self.inner_names, *(n for n in optional if getattr(self, n) is not None)]
            if optional
            else [*self.inner_names]
        )
        return attrs, tuple(getattr(self, n) for n in ctx_names) if ctx_names else ()

    @classmethod
    def __tensor_unflatten__(
        cls,
        inner_tensors: dict[str, torch.Tensor],
        ctx: object,
        outer_size: SizeLike | None,
        outer_stride: SizeLike | None,
    ) -> WrapperTensor:
        if not isinstance(ctx, tuple) or len(ctx) != len(cls.ctx_names):
            raise ProtocolError(
                f"{cls.__name__}.__tensor_unflatten__: ctx must be a tuple of {len(cls.ctx_names)} values "
                f"{cls.ctx_names!r}, got {ctx!r}"
            )
        built = _build_plainly(cls, inner_tensors, ctx, outer_size, outer_stride)
        if built is not None:
            return built
        fields: dict[str, object] = {n: None for n in cls.optional_inner_names}
        fields.update(inner_tensors)
        fields.update(zip(cls.ctx_names, ctx, strict=True))
        return cls(**fields, outer_size=outer_size, outer_stride=outer_stride)

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]  # untyped in torch
        parts = [f"{n}={getattr(self, n)!r}" for n in (*self.inner_names, *self.optional_inner_names)]
        parts += [f"{n}={getattr(self, n)!r}" for n in self.ctx_names]
        return f"{type(self).__name__}({', '.join(parts)}, outer_size={tuple(self.shape)})"

    # -- copying and pickling ----------------------------------------------------------------------------------
    def __reduce_ex__(self, proto: Any) -> tuple[Any, ...]:
        attrs, ctx = self.__tensor_flatten__()
        inner = {n: getattr(self, n) for n in attrs}
        meta = (tuple(self.size()), tuple(self.stride()), self.requires_grad)
        return (_rebuild_wrapper, (type(self), inner, ctx, meta))

    def __deepcopy__(self, memo: dict[int, Any]) -> WrapperTensor:
        if id(self) in memo:
            return memo[id(self)]  # type: ignore[no-any-return]  # deepcopy's memo is a dict[int, Any]
        attrs, ctx = self.__tensor_flatten__()
        inner = {n: copy.deepcopy(getattr(self, n), memo) for n in attrs}
        out = _rebuild_wrapper(
            type(self), inner, copy.deepcopy(ctx, memo), (self.size(), self.stride(), self.requires_grad)
        )
        memo[id(self)] = out
        return out

    # -- dispatch ----------------------------------------------------------------------------------------------
    @classmethod
    def implements(cls, *ops: OpKey) -> Callable[[_H], _H]:
        """Register the decorated `(func, args, kwargs)` function as this class's handler of `ops`."""

        def register(fn: _H) -> _H:
            for op in ops:
                cls._own_ops[op] = fn
            return fn

        return register

    @classmethod
    def try_get_handler(cls, func: OpOverload[..., Any]) -> OpHandler | None:
        """The nearest handler of `func` along the MRO (overload before packet), or None."""
        for klass in cls.__mro__:
            table: dict[OpKey, OpHandler] | None = vars(klass).get("_own_ops")
            if table is None:
                continue
            handler = table.get(func) or table.get(func.overloadpacket)
            if handler is not None:
                return handler
        return None

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]  # Tensor's stub omits `func`
        cls,
        func: OpOverload[..., Any],
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = {} if kwargs is None else kwargs
        handler = cls.try_get_handler(func)
        if handler is not None:
            out = handler(func, args, kwargs)
        elif cls.apply_to_inner_by_default:
            out = cls.apply_to_inner(func, args, kwargs)
        else:
            raise UnsupportedError(_unsupported_message(cls, func, args, kwargs))
        out = _correct_aliasing(func, args, kwargs, out)
        if func.overloadpacket.__name__ in _METADATA_MUTATING and isinstance(args[0], WrapperTensor):
            _resync_metadata(args[0])
        return out

    @classmethod
    def apply_to_inner(cls, func: OpOverload[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run `func` once per inner attribute (plain tensors broadcast); rewrap tensor results, rest from the first.

        Every `cls` argument must have the same present attributes and ctx as the first one.
        """
        wrappers: list[WrapperTensor] = []
        _collect(cls, (args, kwargs), wrappers)
        if not wrappers:
            raise UnsupportedError(f"{cls.__name__}: {func} has no {cls.__name__} argument to apply to")
        attrs, ctx = wrappers[0].__tensor_flatten__()
        for other in wrappers[1:]:
            other_attrs, other_ctx = other.__tensor_flatten__()
            if list(other_attrs) != list(attrs) or other_ctx != ctx:
                raise UnsupportedError(
                    f"{cls.__name__}: {func} mixes wrappers with attrs/ctx {attrs}/{ctx!r} and "
                    f"{list(other_attrs)}/{other_ctx!r}; register a handler with @{cls.__name__}.implements({func})"
                )
        per_attr = {name: _run_on(func, cls, name, args, kwargs) for name in attrs}
        return _rewrap(cls, per_attr, dict(zip(cls.ctx_names, ctx, strict=True)))


# Aten op arguments and results nest only tuples, lists and dicts (sizes, tensor lists, unbind's tuple). Walking those
# directly instead of through torch.utils._pytree keeps a subclass op a few microseconds cheaper, which every eager
# call and every view the compiled runtime replays on a subclass output pays.
def _collect(cls: type[WrapperTensor], x: object, found: list[WrapperTensor]) -> None:
    if type(x) is cls:
        found.append(x)
    elif type(x) in (list, tuple):
        for item in cast(Sequence[object], x):
            _collect(cls, item, found)
    elif type(x) is dict:
        for item in cast(dict[str, object], x).values():
            _collect(cls, item, found)


def _inner_of(cls: type[WrapperTensor], name: str, x: object) -> object:
    if type(x) is cls:
        return getattr(x, name)
    if isinstance(x, list):
        return [_inner_of(cls, name, item) for item in x]
    if type(x) is tuple:
        return tuple(_inner_of(cls, name, item) for item in x)
    if type(x) is dict:
        return {k: _inner_of(cls, name, v) for k, v in cast(dict[str, object], x).items()}
    return x


def _run_on(func: OpOverload[..., Any], cls: type[WrapperTensor], name: str, args: Any, kwargs: Any) -> Any:
    inner_args = [_inner_of(cls, name, a) for a in args]
    inner_kwargs = {k: _inner_of(cls, name, v) for k, v in kwargs.items()}
    return func(*inner_args, **inner_kwargs)


def _rewrap(cls: type[WrapperTensor], per_attr: dict[str, Any], ctx: dict[str, object]) -> Any:
    return _build(cls, per_attr, list(per_attr), ctx, (), per_attr[next(iter(per_attr))])


def _build(
    cls: type[WrapperTensor],
    per_attr: dict[str, Any],
    names: list[str],
    ctx: dict[str, object],
    position: tuple[int, ...],
    first: object,
) -> object:
    if isinstance(first, torch.Tensor):
        fields: dict[str, object] = {n: None for n in cls.optional_inner_names}
        for n in names:
            value = per_attr[n]
            for i in position:
                value = value[i]
            fields[n] = value
        names_ctx = cls.ctx_names
        same_ctx = len(ctx) == len(names_ctx) and all(n in ctx for n in names_ctx)
        built = _build_plainly(cls, fields, tuple(ctx[n] for n in names_ctx), None, None) if same_ctx else None
        return built if built is not None else cls(**fields, **ctx)
    if isinstance(first, list | tuple):
        items = [_build(cls, per_attr, names, ctx, (*position, i), item) for i, item in enumerate(first)]
        make: Callable[..., object] = type(first)
        if hasattr(first, "_fields"):  # a namedtuple
            return make(*items)
        return make(items)  # list, tuple, or a structseq such as torch.return_types.max
    return first


def _resync_metadata(wrapper: WrapperTensor) -> None:
    # See Note [Autograd Sees The Wrapper]: set_/resize_ changed the inner tensors' metadata; mirror it outside.
    meta = type(wrapper).outer_meta(vars(wrapper))
    if tuple(wrapper.size()) == meta.size and tuple(wrapper.stride()) == meta.stride:
        return
    with torch.utils._mode_utils.no_dispatch():
        include = torch._C._meta_in_tls_dispatch_include()
        torch._C._set_meta_in_tls_dispatch_include(True)
        try:
            wrapper.set_(wrapper.untyped_storage(), meta.storage_offset, meta.size, meta.stride)
        finally:
            torch._C._set_meta_in_tls_dispatch_include(include)


def _unsupported_message(
    cls: type[WrapperTensor], func: OpOverload[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str:
    arg_types = ", ".join(type(a).__name__ for a in args)
    kwarg_types = ", ".join(f"{k}={type(v).__name__}" for k, v in kwargs.items())
    return (
        f"{cls.__name__} does not implement {func} (called with args ({arg_types}), kwargs {{{kwarg_types}}}). "
        f"Register a handler: @{cls.__name__}.implements(torch.ops.aten.{func.overloadpacket.__name__}) "
        f"def _(func, args, kwargs): ..., or set apply_to_inner_by_default = True to run it on every inner tensor"
    )


def _constructs_plainly(cls: type[WrapperTensor]) -> bool:
    """`cls` constructs as WrapperTensor does (no `__new__`, `__init__` or `outer_meta` of its own), from a fixed
    set of inner tensors (no optional ones)."""
    return (
        cls.__new__ is WrapperTensor.__new__
        and cls.__init__ is WrapperTensor.__init__
        # (a classmethod: its function, not the bound method, tells whether the class overrides it)
        and cls.outer_meta.__func__ is WrapperTensor.outer_meta.__func__  # type: ignore[attr-defined]  # classmethod
        and not cls.optional_inner_names
        and bool(cls.inner_names)
    )


def plain_ctx_names(cls: type, attrs: Sequence[str]) -> tuple[str, ...] | None:
    """Where `cls.__tensor_flatten__` is WrapperTensor's own over a fixed set of inner tensors, `attrs`: the names of
    its ctx fields (for every instance it returns `(list(attrs), tuple(getattr(self, n) for n in those))`, which a
    guard reads without the call); else None."""
    if (
        issubclass(cls, WrapperTensor)
        and cls.__tensor_flatten__ is WrapperTensor.__tensor_flatten__
        and not cls.optional_inner_names
        and tuple(attrs) == cls.inner_names
    ):
        return cls.ctx_names
    return None


def plain_fields(cls: type, attrs: Sequence[str], ctx: object) -> tuple[str, ...] | None:
    """The fields `plain_unflattener`'s build sets, inner tensors then ctx (values: the leaves, then `ctx`'s items),
    where `cls.__tensor_unflatten__(dict(zip(attrs, leaves)), ctx, size, stride)` is WrapperTensor's own plain
    construction (`_plain_wrapper`: a wrapper over the first leaf's offset, dtype, device and layout, these fields
    set), for sizes and strides with no -1; else None."""
    own_unflatten = WrapperTensor.__tensor_unflatten__.__func__  # type: ignore[attr-defined]  # a classmethod
    if not (
        issubclass(cls, WrapperTensor)
        and getattr(cls.__tensor_unflatten__, "__func__", None) is own_unflatten
        and _constructs_plainly(cls)
        and tuple(attrs) == cls.inner_names
        and isinstance(ctx, tuple)
        and len(ctx) == len(cls.ctx_names)
    ):
        return None
    return (*cls.inner_names, *cls.ctx_names)


def plain_unflattener(cls: type, attrs: Sequence[str], ctx: object) -> Unflattener | None:
    """`build(leaves, size, stride)`: what `cls.__tensor_unflatten__(dict(zip(attrs, leaves)), ctx, size, stride)`
    returns, with every decision that depends only on (cls, attrs, ctx) made here, once; None where that call is not
    WrapperTensor's own plain construction (the caller calls `__tensor_unflatten__`). A runtime's output rebuild."""
    fields = plain_fields(cls, attrs, ctx)
    if fields is None:
        return None
    assert issubclass(cls, WrapperTensor) and isinstance(ctx, tuple)
    general = cls.__tensor_unflatten__

    def build(leaves: Sequence[torch.Tensor], size: SizeLike, stride: SizeLike) -> torch.Tensor:
        if len(leaves) != len(attrs) or -1 in size or -1 in stride:  # _resolve_outer's cases: the general path
            return general(dict(zip(attrs, leaves, strict=True)), ctx, tuple(size), tuple(stride))
        return _plain_wrapper(cls, leaves[0], size, stride, zip(fields, (*leaves, *ctx), strict=True))

    return build


def _resolve_outer(
    own_size: tuple[int | torch.SymInt, ...],
    own_stride: tuple[int | torch.SymInt, ...],
    outer_size: SizeLike | None,
    outer_stride: SizeLike | None,
) -> tuple[tuple[int | torch.SymInt, ...], tuple[int | torch.SymInt, ...]]:
    """The wrapper's size and stride: the given ones, else its outer metadata's (`own_*`)."""
    size = own_size if outer_size is None else _fill_unknown(outer_size, own_size)
    if outer_stride is None:
        return size, own_stride if size == own_size else _contiguous_strides(size)
    return size, _fill_unknown(outer_stride, own_stride)


def _fill_unknown(given: SizeLike, own: tuple[int | torch.SymInt, ...]) -> tuple[int | torch.SymInt, ...]:
    """`given`, each -1 in it (a dimension only the inner tensors know: a nested int at runtime) taken from `own`."""
    dims = tuple(given)
    if len(dims) != len(own) or not any(isinstance(d, int) and d == -1 for d in dims):
        return dims
    return tuple(own[i] if isinstance(d, int) and d == -1 else d for i, d in enumerate(dims))


def _build_plainly(
    cls: type[WrapperTensor],
    inner: Mapping[str, object],
    ctx: tuple[object, ...],
    outer_size: SizeLike | None,
    outer_stride: SizeLike | None,
) -> WrapperTensor | None:
    """What `cls(**inner, **ctx_fields, outer_size=..., outer_stride=...)` builds, without the checks and objects of
    the general constructor, for a class that constructs as WrapperTensor does (no `__new__`, `__init__` or
    `outer_meta` of its own) given exactly its declared inner tensors; None otherwise (the constructor decides)."""
    names = cls.inner_names
    if not _constructs_plainly(cls) or len(inner) != len(names):
        return None
    values = [inner.get(n) for n in names]
    if not all(isinstance(v, torch.Tensor) for v in values):
        return None
    first = cast(torch.Tensor, values[0])  # outer_meta: the first inner tensor's
    size, stride = _resolve_outer(tuple(first.size()), tuple(first.stride()), outer_size, outer_stride)
    fields = (*zip(names, values, strict=True), *zip(cls.ctx_names, ctx, strict=True))
    return _plain_wrapper(cls, first, size, stride, fields)


def _plain_wrapper(
    cls: type[_W],
    meta: torch.Tensor | OuterMeta,
    size: SizeLike,
    stride: SizeLike,
    fields: Iterable[tuple[str, object]],
    requires_grad: bool = False,
) -> _W:
    """A `cls` wrapper of this size and stride over `meta`'s offset, dtype, device and layout (outer_meta's; the
    first inner tensor's by default), with these fields set: what WrapperTensor's own constructor makes, without its
    checks."""
    offset = meta.storage_offset if isinstance(meta, OuterMeta) else meta.storage_offset()
    out = torch.Tensor._make_wrapper_subclass(
        cls,
        size,
        strides=stride,
        storage_offset=offset,
        dtype=meta.dtype,
        device=meta.device,
        layout=meta.layout,
        requires_grad=requires_grad,
    )
    for name, value in fields:
        object.__setattr__(out, name, value)
    return out


def _bind_fields(cls: type[WrapperTensor], args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, object]:
    names = (*cls.inner_names, *cls.optional_inner_names, *cls.ctx_names)
    if len(args) > len(names):
        raise TypeError(f"{cls.__name__}() takes {len(names)} fields {names!r}, got {len(args)} positional arguments")
    fields: dict[str, object] = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key not in names or key in fields:
            raise TypeError(f"{cls.__name__}() got an unexpected or repeated argument {key!r}; fields are {names!r}")
        fields[key] = value
    for name in cls.optional_inner_names:
        fields.setdefault(name, None)
    missing = [n for n in names if n not in fields]
    if missing:
        raise TypeError(f"{cls.__name__}() missing field(s) {missing!r}; fields are {names!r}")
    for name in (*cls.inner_names, *cls.optional_inner_names):
        value = fields[name]
        if not (isinstance(value, torch.Tensor) or (value is None and name in cls.optional_inner_names)):
            raise TypeError(f"{cls.__name__}(): inner tensor {name!r} must be a Tensor, got {type(value).__name__}")
    return fields


def _rebuild_wrapper(
    cls: type[WrapperTensor],
    inner: dict[str, torch.Tensor],
    ctx: tuple[object, ...],
    meta: tuple[SizeLike, SizeLike, bool],
) -> WrapperTensor:
    size, stride, requires_grad = meta
    out = cls.__tensor_unflatten__(inner, ctx, size, stride)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _check_declarations(cls: type[WrapperTensor]) -> None:
    """Fail at class creation on a malformed declaration (see WrapperTensor's docstring)."""
    groups = {
        "inner_names": cls.inner_names,
        "optional_inner_names": cls.optional_inner_names,
        "ctx_names": cls.ctx_names,
    }
    for group, declared in groups.items():
        names: object = declared
        if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
            raise ProtocolError(
                f"{cls.__name__}.{group} must be a tuple of attribute names, got {names!r}; "
                f'write {group} = ("a", "b") (a one-name tuple needs a trailing comma: ("a",))'
            )
    all_names = (*cls.inner_names, *cls.optional_inner_names, *cls.ctx_names)
    for name in all_names:
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
            raise ProtocolError(f"{cls.__name__}: declared name {name!r} is not a usable attribute name")
        if name in _RESERVED or hasattr(torch.Tensor, name):
            raise ProtocolError(
                f"{cls.__name__}: declared name {name!r} shadows a torch.Tensor attribute or a constructor keyword; "
                f"rename it (e.g. {name!r} -> {name + '_'!r})"
            )
    duplicated = sorted({n for n in all_names if all_names.count(n) > 1})
    if duplicated:
        raise ProtocolError(f"{cls.__name__}: names declared twice across inner/optional/ctx names: {duplicated}")
    _check_constructor(cls, all_names)


def _check_constructor(cls: type[WrapperTensor], names: tuple[str, ...]) -> None:
    for method in ("__new__", "__init__"):
        fn = vars(cls).get(method)
        if fn is None:
            continue
        fn = fn.__func__ if isinstance(fn, staticmethod | classmethod) else fn
        params = [
            p.name
            for p in list(signature(fn).parameters.values())[1:]
            if p.kind in (Parameter.POSITIONAL_ONLY, Parameter.POSITIONAL_OR_KEYWORD, Parameter.KEYWORD_ONLY)
        ]
        if tuple(params[: len(names)]) != names:
            raise ProtocolError(
                f"{cls.__name__}.{method} takes {tuple(params)!r} but the class declares fields {names!r} "
                "(inner_names + optional_inner_names + ctx_names); the constructor's leading parameters must be "
                "exactly the declared names, in that order: fix the typo in one or the other"
            )


def _first_wrapper_type(args: tuple[Any, ...], kwargs: dict[str, Any]) -> type[WrapperTensor]:
    for x in pytree.tree_leaves((args, kwargs)):
        if isinstance(x, WrapperTensor):
            return type(x)
    raise AssertionError("BUG: __torch_dispatch__ called without a WrapperTensor argument")


@WrapperTensor.implements(aten.detach, aten.clone, aten.alias, aten._to_copy, aten.contiguous)
def _apply_to_every_inner(func: OpOverload[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return _first_wrapper_type(args, kwargs).apply_to_inner(func, args, kwargs)


@WrapperTensor.implements(aten.copy_)
def _copy_(func: OpOverload[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    dst, src = args[0], args[1]
    cls = _first_wrapper_type(args, kwargs)
    same = type(dst) is type(src) and dst.__tensor_flatten__() == src.__tensor_flatten__()
    if same or cls.apply_to_inner_by_default:
        return cls.apply_to_inner(func, args, kwargs)
    raise UnsupportedError(
        f"{cls.__name__}: copy_ from {type(src).__name__} into {type(dst).__name__} needs the same class with the same "
        f"present inner tensors and ctx (got {_describe(dst)} vs {_describe(src)}); "
        f"register @{cls.__name__}.implements(torch.ops.aten.copy_) to convert"
    )


def _describe(x: object) -> str:
    return repr(x.__tensor_flatten__()) if isinstance(x, WrapperTensor) else f"a {type(x).__name__}"
