"""The fuzzer's op vocabulary: per op, how to draw its parameters, how to run it, and how to print it.

Input: a `Chooser` (random or hypothesis draws) and the tensor an op will be applied to (a real, eager tensor: the
generator runs each op as it draws it, so shapes, strides and legality are known exactly).
Output: `OPS`, a table from `OpName` to `OpDef`.
Invariants: for every op, `apply` and `expr` agree: running `expr`'s Python text on the same tensors does what
`apply` does (tests/subclassaot/test_fuzz.py execs printed programs and compares them with the interpreter).
The custom autograd.Function templates it draws (one op each, their source the op's preamble) live in
subclassaot/tools/fuzz_functions.py.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import torch

from subclassaot.authoring.protocol import dense_leaves
from subclassaot.errors import tuple_text
from subclassaot.pipeline.rules.swap_record import element_offsets, reads_elsewhere_written
from subclassaot.tools.fuzz_functions import SOURCES, FunctionName, function_class

Param = int | float | tuple[int, ...]
Params = tuple[Param, ...]
SCALARS: tuple[float, ...] = (2.0, -1.0, 0.5, 3.0)


class Chooser(Protocol):
    """Where random decisions come from: `random.Random` for the runner, hypothesis draws for strategies."""

    def integer(self, lo: int, hi: int) -> int:
        """An int in [lo, hi], both inclusive; smaller is simpler (hypothesis shrinks toward `lo`)."""
        ...

    def chance(self, percent: int) -> bool:
        """True with probability `percent`/100; False is simpler."""
        ...


class Family(enum.Enum):
    VIEW = "view"  # binds results that alias the source
    INPLACE = "inplace"  # mutates the source (data, metadata or storage); binds nothing; may go through `.data`
    FUNCTIONAL = "functional"  # binds results: fresh tensors (or, for a mark_dirty Function, the source itself)
    STATEMENT = "statement"  # binds nothing, never through `.data`: `x.data = y`, requires_grad_(), storage resizes


class Vocabulary(enum.Enum):
    """Groups of the vocabulary a `FuzzConfig` turns on or off (each run of a new group is counted on its own)."""

    CORE = "core"  # views, in-place data and metadata ops, set_, resize_, `.data`, a few functional ops, no_grad
    GRAD_MODE = "grad_mode"  # op-level enable_grad / set_grad_enabled / inference_mode scopes, nested up to two deep
    # requires_grad_() on whatever eager allows it on (leaves: views, intermediates); and, rarely, an input
    # `b.detach().requires_grad_()` beside `b` that requires grad: a leaf of its own over a storage with history
    REQUIRES_GRAD = "requires_grad"
    # untyped_storage().resize_(0) after last use; resize up and fill; inputs freed on entry; a resize_() that grows
    # a tensor's storage (under whatever else is over it), then fills the tensor
    STORAGE = "storage"
    FUNCTIONS = "functions"  # custom autograd.Function templates (subclassaot/tools/fuzz_ops.py)
    MULTI_OUTPUT = "multi_output"  # sort, max(dim) (values and int64 indices), split_with_sizes (views)
    # `x.set_(x)`: autograd's set_ node and nothing else, against the program's other nodes; inputs that share a base
    # drawn as views of it more often (rows of one base each set_() to itself: Note [set_ Under Grad])
    SET_ORDER = "set_order"
    # native_batch_norm / F.batch_norm in training over running statistics the program holds (mostly inputs or their
    # views), which the op writes though they are not its result
    RUNNING_STATS = "running_stats"
    # rarely, a base that is a TwoTensor of TwoTensors: over plain tensors, or over leaves that each require grad apart
    # (`TwoTensor(a, a.detach().clone().requires_grad_())`; subclassaot/tools/fuzz_program.py)
    NESTED = "nested"
    # unfold(dim, size, step): windows that overlap (step < size) or leave elements out (step > size), written through
    WINDOWS = "windows"
    # rarely, a complex base passed as its lazy conj view (`c.conj()`, conj bit set) or that view's imag (neg bit set)
    COMPLEX = "complex"
    # a new leaf made in the program: a factory's requires_grad=True (zeros, ones, full, randn, tensor, zeros_like,
    # ones_like) or its fresh result given requires_grad_(), under whatever grad-mode scope is drawn
    GRAD_FACTORIES = "grad_factories"


OpName = Literal[
    "view", "reshape", "transpose", "t", "select", "slice", "unsqueeze", "expand", "diagonal", "unbind",
    "as_strided", "detach", "contiguous",
    "add_", "mul_", "copy_", "zero_", "fill_", "t_", "unsqueeze_", "transpose_", "set_", "resize_",
    "add", "mul", "sin", "clone", "sum",
    "data_assign",
    "requires_grad_", "requires_grad_set", "requires_grad_if_flagless", "mul_by_flags", "storage_free", "storage_refill", "resize_grow", "set_self",
    "SinFn", "DirtyScale", "TransposeSaved", "DirtyAdd", "DirtyAddSaved", "TwoViews",
    "sort", "max_dim", "split_with_sizes", "batch_norm", "detached_leaf", "unfold", "grad_factory",
]  # fmt: skip

Result = torch.Tensor | tuple[torch.Tensor, ...] | None  # a tuple binds one variable per element
Apply = Callable[[torch.Tensor, "torch.Tensor | None", Params], Result]
Expr = Callable[[str, "str | None", Params], str]
Gen = Callable[[Chooser, torch.Tensor], "Params | None"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OpDef:
    name: OpName
    family: Family
    other: Literal["never", "maybe", "always"]  # whether the op takes a second tensor (`x.copy_(y)`)
    gen: Gen  # draws params from the source tensor; None when the op does not apply to it
    apply: Apply
    expr: Expr  # Python source of the op, given the source's and the other's expressions
    weight: int  # relative frequency in generated programs
    vocabulary: Vocabulary
    outs: Callable[[Params], int]  # how many variables the op binds (0: none)
    preamble: str  # source a printed program needs before `f` (a Function's class); "" for none


def _i(p: Param) -> int:
    assert isinstance(p, int), f"BUG: expected an int param, got {p!r}"
    return p


def _f(p: Param) -> float:
    assert isinstance(p, float), f"BUG: expected a float param, got {p!r}"
    return p


def _s(p: Param) -> tuple[int, ...]:
    assert isinstance(p, tuple), f"BUG: expected a shape param, got {p!r}"
    return p


def shape_for_numel(choose: Chooser, numel: int) -> tuple[int, ...]:
    """A shape of rank 0-3 with `numel` elements, sometimes with one -1."""
    if numel == 0:
        return (0,) if choose.chance(50) else ((1, 0) if choose.chance(50) else (0, 2))
    options: list[tuple[int, ...]] = [(numel,)]
    options += [(a, numel // a) for a in range(1, numel + 1) if numel % a == 0]
    options += [(a, b, numel // (a * b)) for a in range(1, 5) for b in range(1, 5) if numel % (a * b) == 0]
    if numel == 1:
        options.append(())
    shape = options[choose.integer(0, len(options) - 1)]
    if shape and choose.chance(25):
        k = choose.integer(0, len(shape) - 1)
        shape = (*shape[:k], -1, *shape[k + 1 :])
    return shape


def _dim(choose: Chooser, rank: int) -> int:
    return choose.integer(0, rank - 1)


# ---------------------------------------------------------------------------------------------------------------
# Parameter generators (each sees the real source tensor)


def _gen_none(choose: Chooser, t: torch.Tensor) -> Params | None:
    return ()


def _gen_numel_shape(choose: Chooser, t: torch.Tensor) -> Params | None:
    return (shape_for_numel(choose, t.numel()),)


def _gen_two_dims(choose: Chooser, t: torch.Tensor) -> Params | None:
    if t.dim() == 0:
        return None
    return (_dim(choose, t.dim()), _dim(choose, t.dim()))


def _gen_t(choose: Chooser, t: torch.Tensor) -> Params | None:
    return () if t.dim() <= 2 else None


def _gen_index(choose: Chooser, t: torch.Tensor, *, negative: bool = False) -> Params | None:
    """(dim, index into it): select's index may count from the end."""
    if t.dim() == 0:
        return None
    d = _dim(choose, t.dim())
    if t.size(d) == 0:
        return None
    return (d, choose.integer(-t.size(d) if negative else 0, t.size(d) - 1))


def _gen_slice(choose: Chooser, t: torch.Tensor) -> Params | None:
    if t.dim() == 0:
        return None
    d = _dim(choose, t.dim())
    start = choose.integer(0, t.size(d))
    return (d, start, choose.integer(start, t.size(d)), choose.integer(1, 2))


def _gen_unsqueeze(choose: Chooser, t: torch.Tensor) -> Params | None:
    return (choose.integer(-(t.dim() + 1), t.dim()),)


def _gen_unfold(choose: Chooser, t: torch.Tensor) -> Params | None:
    """(dim, size, step): a step below the size overlaps windows, one above leaves elements out."""
    if t.dim() == 0:
        return None
    d = _dim(choose, t.dim())
    return (d, choose.integer(1, max(t.size(d), 1)), choose.integer(1, 3))


def _gen_expand(choose: Chooser, t: torch.Tensor) -> Params | None:
    sizes = [choose.integer(1, 3) if s == 1 else (-1 if choose.chance(30) else s) for s in t.shape]
    if len(sizes) < 3 and choose.chance(30):
        sizes.insert(0, choose.integer(1, 2))
    return (tuple(sizes),)


def _gen_diagonal(choose: Chooser, t: torch.Tensor) -> Params | None:
    if t.dim() < 2:
        return None
    d1 = _dim(choose, t.dim())
    d2 = (d1 + choose.integer(1, t.dim() - 1)) % t.dim()
    return (choose.integer(-1, 1), d1, d2)


def _gen_as_strided(choose: Chooser, t: torch.Tensor) -> Params | None:
    rank = choose.integer(0, 2)
    size = tuple(choose.integer(1, 3) for _ in range(rank))
    stride = tuple(choose.integer(0, 3) for _ in range(rank))
    return (size, stride, choose.integer(0, 2))


def _scalar(choose: Chooser) -> float:
    return float(SCALARS[choose.integer(0, len(SCALARS) - 1)])


def _gen_scalar_or_other(choose: Chooser, t: torch.Tensor) -> Params | None:
    return (_scalar(choose),)


def _gen_unsqueeze_(choose: Chooser, t: torch.Tensor) -> Params | None:
    return (choose.integer(-(t.dim() + 1), t.dim()),) if t.dim() < 3 else None


def _gen_resize_(choose: Chooser, t: torch.Tensor) -> Params | None:
    # Never more elements than now, nor than its storage holds from its offset (an expanded tensor has more elements
    # than its storage holds): growing exposes uninitialized memory, whose values no two runs share.
    shape = tuple(choose.integer(1, 4) for _ in range(choose.integer(0, 3)))
    numel = torch.Size(shape).numel()
    return (shape,) if numel <= t.numel() and numel <= _capacity(t) else None


def _capacity(t: torch.Tensor) -> int:
    """How many elements resize_() can give `t` without growing a storage (a subclass: its inner tensors')."""
    leaves = dense_leaves(t)
    return min((u.untyped_storage().nbytes() // u.element_size() - int(u.storage_offset()) for u in leaves), default=0)


def _gen_sum(choose: Chooser, t: torch.Tensor) -> Params | None:
    return () if t.dim() == 0 else (_dim(choose, t.dim()),)


# ---------------------------------------------------------------------------------------------------------------
# The semantics users reach for: requires_grad_(), storage resizes, custom Functions, multi-output ops


def _gen_float(choose: Chooser, t: torch.Tensor) -> Params | None:
    return () if t.dtype.is_floating_point else None


def _gen_plain(choose: Chooser, t: torch.Tensor) -> Params | None:
    # Only a plain tensor's storage is the program's to resize: a wrapper subclass's own storage holds no data.
    return () if type(t) is torch.Tensor else None


def _gen_refill(choose: Chooser, t: torch.Tensor) -> Params | None:
    """(bytes, scalar): the generator fills in the storage's size before it was freed (see fuzz.py)."""
    return (0, _scalar(choose)) if type(t) is torch.Tensor else None


def _gen_resize_grow(choose: Chooser, t: torch.Tensor) -> Params | None:
    """(size, scalar): a 1-d size past what `t`'s storage holds from its offset, so that resize_() grows it; the fill
    covers every element the growth adds (eager's grown storage ends where `t` does), none stays uninitialized."""
    if type(t) is not torch.Tensor or not t.dtype.is_floating_point:
        return None
    return ((_capacity(t) + choose.integer(1, 4),), _scalar(choose))


def _resize_grow(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> None:
    t.resize_(_s(p[0]))
    t.fill_(_f(p[1]))


def _resize_grow_expr(t: str, o: str | None, p: Params) -> str:
    return f"{t}.resize_({tuple_text(_s(p[0]))}); {t}.fill_({_f(p[1])!r})"


def _gen_sort(choose: Chooser, t: torch.Tensor) -> Params | None:
    return (_dim(choose, max(t.dim(), 1)), choose.integer(0, 1))


def _gen_split(choose: Chooser, t: torch.Tensor) -> Params | None:
    if t.dim() == 0:
        return None
    d = _dim(choose, t.dim())
    first = choose.integer(0, t.size(d))
    if choose.chance(50) or first == t.size(d):
        return ((first, t.size(d) - first), d)
    second = choose.integer(0, t.size(d) - first)
    return ((first, second, t.size(d) - first - second), d)


def _free(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> None:
    t.untyped_storage().resize_(0)


def _refill(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> None:
    t.untyped_storage().resize_(_i(p[0]))
    if o is not None:
        t.copy_(o)
    else:
        t.fill_(_f(p[1]))


# Training-mode batch norm: the running mean is a row of the source (its last dimension: `t[0, 0]` of a rank-3 `t`)
# and the variance fresh, or the variance is and the mean fresh, or both are (`t[0, 0]` and `t[1, 0]`); a clone of the
# other tensor, reshaped to (-1, C), is the batch (two rows at least: one row's unbiased variance divides by zero; a
# clone: the kernel reads its batch after it writes the statistics, which may share its memory); sometimes its first row
# repeated three times (variance 0, where 1/sqrt(eps) magnifies rounding: eager's CPU kernel picks its arithmetic by
# the statistics' layout). The source does not require grad (a buffer's statistics); rows whose elements
# share memory (an expand()) are not written.


def _rows(t: str, which: int, k: int, c: int) -> str:
    first, second = (f"{t}[{', '.join([i, *['0'] * (k - 1)])}]" if k else t for i in ("0", "1"))
    return (f"{first}, torch.ones({c})", f"torch.zeros({c}), {first}", f"{first}, {second}")[which]


def batch_norm_stats(t: torch.Tensor) -> bool:
    """Can `t` hold running statistics: float, no grad, a last dimension of some elements?"""
    return t.dim() > 0 and t.numel() > 0 and t.dtype.is_floating_point and not t.requires_grad


def _gen_batch_norm(choose: Chooser, t: torch.Tensor) -> Params | None:
    if not batch_norm_stats(t):
        return None
    which = choose.integer(0, 2 if t.dim() > 1 and t.size(0) > 1 else 1)
    params: Params = (which, choose.integer(0, 1), t.size(-1), t.dim() - 1, int(choose.chance(25)))
    first, second = (t[(i, *(0,) * (t.dim() - 2))] if t.dim() > 1 else t for i in (0, 1))
    offsets: dict[int, list[int]] = {}  # storage -> the elements written there (two alike where not listed)
    for u in [leaf for row in (first, second)[: 2 if which == 2 else 1] for leaf in dense_leaves(row)]:
        offsets.setdefault(u.untyped_storage().data_ptr(), []).extend(element_offsets(u) or [-1, -1])
    return params if all(len(set(v)) == len(v) for v in offsets.values()) else None


def batch_norm_fits(stats: torch.Tensor, batch: torch.Tensor) -> bool:
    """Can `batch` be the batch of running statistics `stats` (same dtype, two rows at least)?"""
    c = stats.size(-1)
    return batch.dtype == stats.dtype and batch.numel() % c == 0 and batch.numel() >= 2 * c


def _batch_norm_expr(t: str, o: str | None, p: Params) -> str:
    which, api, c, k, repeated = map(_i, p)
    stats, batch = _rows(t, which, k, c), f"{o}.clone().reshape(-1, {c})" + ("[:1].repeat(3, 1)" if repeated else "")
    if api == 0:
        return f"torch.native_batch_norm({batch}, None, None, {stats}, True, 0.1, 1e-05)[0]"
    return f"torch.nn.functional.batch_norm({batch}, {stats}, training=True, momentum=0.1, eps=1e-05)"


def _batch_norm(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> torch.Tensor:
    which, api, c, k, repeated = map(_i, p)
    assert o is not None, "BUG: batch_norm needs a batch"
    first, second = (t[(i, *(0,) * (k - 1))] if k else t for i in (0, 1))
    mean, var = ((first, torch.ones(c)), (torch.zeros(c), first), (first, second))[which]
    batch = o.clone().reshape(-1, c)
    batch = batch[:1].repeat(3, 1) if repeated else batch
    if api == 0:
        return torch.native_batch_norm(batch, None, None, mean, var, True, 0.1, 1e-05)[0]
    return torch.nn.functional.batch_norm(batch, mean, var, training=True, momentum=0.1, eps=1e-05)


# ---------------------------------------------------------------------------------------------------------------
# The table


def _slice(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> torch.Tensor:
    d, start, stop, step = map(_i, p)
    return t[(*(slice(None),) * d, slice(start, stop, step))]


def _slice_expr(t: str, o: str | None, p: Params) -> str:
    d, start, stop, step = map(_i, p)
    return f"{t}[{':, ' * d}{start}:{stop}:{step}]"


# How a method call's arguments come from the op's other tensor and params: (values, source text)
_ArgsOf = tuple[Callable[["torch.Tensor | None", Params], tuple[object, ...]], Callable[["str | None", Params], str]]
_ARGS: dict[str, _ArgsOf] = {
    "params": (lambda o, p: p, lambda o, p: ", ".join(map(repr, p))),
    "other": (lambda o, p: (o,), lambda o, p: str(o)),
    "scalar_or_other": (
        lambda o, p: (o if o is not None else _f(p[0]),),
        lambda o, p: o if o is not None else repr(_f(p[0])),
    ),
    "shape": (lambda o, p: (_s(p[0]),), lambda o, p: tuple_text(_s(p[0]))),
}


def _method(method: str, args: Literal["params", "other", "scalar_or_other", "shape"] = "params") -> tuple[Apply, Expr]:
    """`t.<method>(...)`, its arguments as `args` says."""
    values, text = _ARGS[args]

    def apply(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> torch.Tensor:
        out: torch.Tensor = getattr(t, method)(*values(o, p))
        return out

    return apply, lambda t, o, p: f"{t}.{method}({text(o, p)})"


def _values_indices(method: str, flag: str) -> tuple[Apply, Expr]:
    """`t.<method>(dim, flag=...)` returning (values, indices): sort, max(dim)."""

    def apply(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> tuple[torch.Tensor, ...]:
        return tuple(getattr(t, method)(_i(p[0]), **{flag: bool(p[1])}))

    return apply, lambda t, o, p: f"{t}.{method}({p[0]}{f', {flag}=True' if p[1] else ''})"


def _fmt(template: str) -> Expr:
    """An op's source from a template over `t`, `o` and `p` (str.format: `{p[0]}` is the first param)."""
    return lambda t, o, p: template.format(t=t, o=o, p=p)


def _data_assign(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> None:
    assert o is not None, "BUG: data_assign needs a second tensor"
    t.data = o


def _set_self(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> None:
    t.set_(t)  # type: ignore[call-overload]  # torch's stubs list only the storage overloads of set_


def _set_requires_grad(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> None:
    t.requires_grad = bool(p[0])


def _requires_grad_if_flagless(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> None:
    if not t.requires_grad:  # a read that steers the program (Note [Grad Mode And Autograd Reads])
        t.requires_grad_()


def _detached_leaf(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> torch.Tensor:
    return t.detach().requires_grad_()


def _mul_by_flags(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> torch.Tensor:
    return t.mul(1.0 + t.requires_grad + 2 * t.is_leaf)


def _gen_flag(choose: Chooser, t: torch.Tensor) -> Params | None:
    return (choose.chance(70),) if t.dtype.is_floating_point else None


def _refill_expr(t: str, o: str | None, p: Params) -> str:
    fill = f"{t}.copy_({o})" if o is not None else f"{t}.fill_({_f(p[1])!r})"
    return f"{t}.untyped_storage().resize_({_i(p[0])}); {fill}"


def _function(name: FunctionName, *, binary: bool) -> tuple[Apply, Expr]:
    """The template's call (on the op's source, and on its other tensor too where `binary`)."""
    cls = function_class(name)

    def apply(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> Result:
        assert (o is not None) == binary, f"BUG: {name} takes {2 if binary else 1} tensors"
        args = (t, o) if binary else (t,)
        out = cls.apply(*args)  # type: ignore[no-untyped-call]  # torch.autograd.Function.apply is untyped
        assert isinstance(out, torch.Tensor | tuple), f"BUG: {name} returned {type(out).__name__}"
        return out

    return apply, lambda t, o, p: f"{name}.apply({t}, {o})" if binary else f"{name}.apply({t})"


def _function_op(name: FunctionName, gen: Gen, *, binary: bool = False, outs: int = 1) -> OpDef:
    """A template as an op: a binary one draws its second tensor from the program like `x.add_(y)` does."""
    return _op(
        name, Family.FUNCTIONAL, gen, _function(name, binary=binary), weight=1, vocabulary=Vocabulary.FUNCTIONS,
        other="always" if binary else "never", outs=lambda p: outs, preamble=SOURCES[name].strip() + "\n",
    )  # fmt: skip


# A new leaf: (factory, shape, fill value, form). The shape is the source's (so that the leaf meets it in the ops
# drawn later), the source itself only for a `_like` factory; form 0 passes requires_grad=True, form 1 calls
# requires_grad_() on the factory's fresh result. torch.tensor's values are fixed by the shape.
_FACTORIES = ("zeros", "ones", "full", "randn", "tensor", "zeros_like", "ones_like")


def _gen_grad_factory(choose: Chooser, t: torch.Tensor) -> Params | None:
    k = choose.integer(0, len(_FACTORIES) - 1)
    return (k, tuple(t.shape), _scalar(choose), int(choose.chance(30)))


def _factory_values(shape: tuple[int, ...], start: int = 0) -> object:
    """torch.tensor's nested list for `shape`: -1.0, -0.5, 0.0, ... in row-major order (plain Python: the
    interpreter runs while the pipeline traces it, where a tensor's values are not there to read)."""
    if not shape:
        return start * 0.5 - 1.0
    step = torch.Size(shape[1:]).numel()
    return [_factory_values(shape[1:], start + k * step) for k in range(shape[0])]


def _grad_factory(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> torch.Tensor:
    name, shape, value, form = _FACTORIES[_i(p[0])], _s(p[1]), _f(p[2]), _i(p[3])
    first: object = {"full": shape, "tensor": _factory_values(shape)}.get(name, t if "_like" in name else shape)
    args = (first, value) if name == "full" else (first,)
    out: torch.Tensor = getattr(torch, name)(*args, requires_grad=form == 0)
    return out.requires_grad_() if form else out


def _grad_factory_expr(t: str, o: str | None, p: Params) -> str:
    name, shape, value, form = _FACTORIES[_i(p[0])], _s(p[1]), _f(p[2]), _i(p[3])
    first = {"full": tuple_text(shape), "tensor": repr(_factory_values(shape))}.get(
        name, t if "_like" in name else tuple_text(shape)
    )
    args = f"{first}, {value!r}" if name == "full" else first
    return f"torch.{name}({args}).requires_grad_()" if form else f"torch.{name}({args}, requires_grad=True)"


def _unbind(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> torch.Tensor:
    return t.unbind(_i(p[0]))[_i(p[1])]


def _split(t: torch.Tensor, o: torch.Tensor | None, p: Params) -> tuple[torch.Tensor, ...]:
    return tuple(t.split_with_sizes(list(_s(p[0])), _i(p[1])))


def _split_expr(t: str, o: str | None, p: Params) -> str:
    return f"{t}.split_with_sizes({list(_s(p[0]))}, {p[1]})"


def _op(
    name: OpName,
    family: Family,
    gen: Gen,
    impl: tuple[Apply, Expr],
    *,
    weight: int,
    other: Literal["never", "maybe", "always"] = "never",
    vocabulary: Vocabulary = Vocabulary.CORE,
    outs: Callable[[Params], int] | None = None,
    preamble: str = "",
) -> OpDef:
    binds = 1 if family in (Family.VIEW, Family.FUNCTIONAL) else 0
    return OpDef(
        name=name,
        family=family,
        other=other,
        gen=gen,
        apply=impl[0],
        expr=impl[1],
        weight=weight,
        vocabulary=vocabulary,
        outs=outs if outs is not None else lambda p: binds,
        preamble=preamble,
    )


VIEW, INPLACE, FUNC, STATE = Family.VIEW, Family.INPLACE, Family.FUNCTIONAL, Family.STATEMENT
GRAD, STORAGE, MULTI = Vocabulary.REQUIRES_GRAD, Vocabulary.STORAGE, Vocabulary.MULTI_OUTPUT
_OPS: tuple[OpDef, ...] = (
    _op("view", VIEW, _gen_numel_shape, _method("view", "shape"), weight=4),
    _op("reshape", VIEW, _gen_numel_shape, _method("reshape", "shape"), weight=2),
    _op("transpose", VIEW, _gen_two_dims, _method("transpose"), weight=3),
    _op("t", VIEW, _gen_t, _method("t"), weight=2),
    _op("select", VIEW, functools.partial(_gen_index, negative=True), _method("select"), weight=3),
    _op("slice", VIEW, _gen_slice, (_slice, _slice_expr), weight=3),
    _op("unsqueeze", VIEW, _gen_unsqueeze, _method("unsqueeze"), weight=2),
    _op("expand", VIEW, _gen_expand, _method("expand", "shape"), weight=2),
    _op("diagonal", VIEW, _gen_diagonal, _method("diagonal"), weight=2),
    _op("unbind", VIEW, _gen_index, (_unbind, _fmt("{t}.unbind({p[0]})[{p[1]}]")), weight=2),
    _op(
        "as_strided",
        VIEW,
        _gen_as_strided,
        (
            lambda t, o, p: t.as_strided(_s(p[0]), _s(p[1]), _i(p[2])),
            lambda t, o, p: f"{t}.as_strided({tuple_text(_s(p[0]))}, {tuple_text(_s(p[1]))}, {p[2]})",
        ),
        weight=1,
    ),
    _op("unfold", VIEW, _gen_unfold, _method("unfold"), weight=3, vocabulary=Vocabulary.WINDOWS),
    _op("detach", VIEW, _gen_none, _method("detach"), weight=1),
    _op("contiguous", VIEW, _gen_none, _method("contiguous"), weight=1),
    _op("add_", INPLACE, _gen_scalar_or_other, _method("add_", "scalar_or_other"), weight=5, other="maybe"),
    _op("mul_", INPLACE, _gen_scalar_or_other, _method("mul_", "scalar_or_other"), weight=4, other="maybe"),
    _op("copy_", INPLACE, _gen_none, _method("copy_", "other"), weight=3, other="always"),
    _op("zero_", INPLACE, _gen_none, _method("zero_"), weight=1),
    _op("fill_", INPLACE, _gen_scalar_or_other, _method("fill_"), weight=1),
    _op("t_", INPLACE, _gen_t, _method("t_"), weight=2),
    _op("unsqueeze_", INPLACE, _gen_unsqueeze_, _method("unsqueeze_"), weight=1),
    _op("transpose_", INPLACE, _gen_two_dims, _method("transpose_"), weight=1),
    _op("set_", INPLACE, _gen_none, _method("set_", "other"), weight=2, other="always"),
    _op("set_self", INPLACE, _gen_none, (_set_self, _fmt("{t}.set_({t})")), weight=3, vocabulary=Vocabulary.SET_ORDER),
    _op("resize_", INPLACE, _gen_resize_, _method("resize_", "shape"), weight=1),
    _op("add", FUNC, _gen_scalar_or_other, _method("add", "scalar_or_other"), weight=3, other="maybe"),
    _op("mul", FUNC, _gen_scalar_or_other, _method("mul", "scalar_or_other"), weight=3, other="maybe"),
    _op("sin", FUNC, _gen_none, _method("sin"), weight=1),
    _op("clone", FUNC, _gen_none, _method("clone"), weight=2),
    _op("sum", FUNC, _gen_sum, _method("sum"), weight=1),
    _op("data_assign", STATE, _gen_none, (_data_assign, _fmt("{t}.data = {o}")), weight=1, other="always"),
    _op("requires_grad_", STATE, _gen_float, _method("requires_grad_"), weight=2, vocabulary=GRAD),
    # the setter, True or False: eager allows either on leaves only
    _op(
        "requires_grad_set",
        STATE,
        _gen_flag,
        (_set_requires_grad, _fmt("{t}.requires_grad = {p[0]!r}")),
        weight=1,
        vocabulary=GRAD,
    ),
    _op(
        "requires_grad_if_flagless",
        STATE,
        _gen_float,
        (_requires_grad_if_flagless, _fmt("if not {t}.requires_grad: {t}.requires_grad_()")),
        weight=1,
        vocabulary=GRAD,
    ),
    _op(
        "mul_by_flags",
        FUNC,
        _gen_float,
        (_mul_by_flags, _fmt("{t}.mul(1.0 + {t}.requires_grad + 2 * {t}.is_leaf)")),
        weight=1,
        vocabulary=GRAD,
    ),
    _op(
        "storage_free",
        STATE,
        _gen_plain,
        (_free, _fmt("{t}.untyped_storage().resize_(0)")),
        weight=2,
        vocabulary=STORAGE,
    ),
    _op("storage_refill", STATE, _gen_refill, (_refill, _refill_expr), weight=3, other="maybe", vocabulary=STORAGE),
    _op("resize_grow", STATE, _gen_resize_grow, (_resize_grow, _resize_grow_expr), weight=2, vocabulary=STORAGE),
    _function_op("SinFn", _gen_float),
    _function_op("DirtyScale", _gen_float),
    _function_op("TransposeSaved", _gen_t),
    _function_op("DirtyAdd", _gen_float, binary=True),
    _function_op("DirtyAddSaved", _gen_float, binary=True, outs=2),
    _function_op("TwoViews", _gen_float, outs=2),
    _op("sort", FUNC, _gen_sort, _values_indices("sort", "descending"), weight=2, vocabulary=MULTI, outs=lambda p: 2),
    _op("max_dim", FUNC, _gen_sort, _values_indices("max", "keepdim"), weight=2, vocabulary=MULTI, outs=lambda p: 2),
    _op(
        "split_with_sizes",
        VIEW,
        _gen_split,
        (_split, _split_expr),
        weight=2,
        vocabulary=MULTI,
        outs=lambda p: len(_s(p[0])),
    ),
    _op(
        "batch_norm",
        FUNC,
        _gen_batch_norm,
        (_batch_norm, _batch_norm_expr),
        weight=3,
        other="always",
        vocabulary=Vocabulary.RUNNING_STATS,
    ),
    _op(
        "grad_factory",
        FUNC,
        _gen_grad_factory,
        (_grad_factory, _grad_factory_expr),
        weight=2,
        vocabulary=Vocabulary.GRAD_FACTORIES,
    ),
    # an input form only (weight 0: never a program's op): a leaf of its own beside its base (fuzz.py's _draw_input)
    _op(
        "detached_leaf",
        VIEW,
        _gen_float,
        (_detached_leaf, _fmt("{t}.detach().requires_grad_()")),
        weight=0,
        vocabulary=GRAD,
    ),
)
OPS: dict[OpName, OpDef] = {op.name: op for op in _OPS}


# ---------------------------------------------------------------------------------------------------------------
# Writes eager leaves unspecified are not drawn (Note [In-Place Ops As Eager Runs Them]): an elementwise in-place op
# through a tensor whose elements share memory (x.as_strided((2, 3), (1, 1)).mul_(2)), or one that reads memory it
# writes at another index (x.add_(y) with y an overlapping view of x that is not x's own layout). Writes of one value
# (fill_, zero_) through shared memory are well defined and stay; so does a write of no elements. The Functions write
# as their ops do: DirtyScale(x) by x.mul_(2), DirtyAdd(x, y) and DirtyAddSaved(x, y) by x.add_(y).

_ELEMENTWISE_WRITES = frozenset({"add_", "mul_", "copy_", "DirtyScale", "DirtyAdd", "DirtyAddSaved"})


def unspecified_write(name: str, t: torch.Tensor, other: torch.Tensor | None) -> bool:
    """Is op `name` on `t` (reading `other`) a write whose eager result depends on loop order?"""
    if name not in _ELEMENTWISE_WRITES:
        return False
    return any(_unspecified_leaf_write(w, r) for w, r in _leaf_pairs(t, other))


def _leaf_pairs(t: torch.Tensor, other: torch.Tensor | None) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """The dense tensors the op writes, each with the dense tensor it reads there (a subclass runs per inner)."""
    writes = dense_leaves(t)
    if other is None:
        return [(w, None) for w in writes]
    reads = dense_leaves(other, "other")
    if len(reads) == len(writes) and type(t) is type(other):
        return list(zip(writes, reads, strict=True))
    return [(w, r) for w in writes for r in reads]


def _unspecified_leaf_write(w: torch.Tensor, r: torch.Tensor | None) -> bool:
    if w.numel() == 0:
        return False
    written = element_offsets(w)
    assert written is not None, "BUG: the fuzzer's tensors are small and concrete"
    if len(set(written)) < len(written):
        return True  # several elements of the written tensor share one memory location
    if r is None or r.untyped_storage().data_ptr() != w.untyped_storage().data_ptr() or r.dtype != w.dtype:
        return False
    return bool(reads_elsewhere_written(w, r))  # None: not broadcastable, the op raises in eager
