"""The one place that touches torch's private or loosely typed machinery, each piece behind a typed function.

Input: nothing. Output: typed wrappers over functionalization, make_fx, fake tensors, storages and version counters.
Invariants: casts and `type: ignore[code]` for torch internals live here and nowhere else (STYLE.md "Typing").
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import sympy
import torch
import torch._guards
import torch.fx
import torch.utils._python_dispatch
from torch._C._dynamo.guards import GlobalStateGuard, TensorGuards
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses._fake_tensor_utils import _CacheKeyState, _SymIntOutputStub
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
    UnsupportedOperatorException,
    _DispatchCacheEntryOutputInfo,
    _DispatchCacheKey,
    in_kernel_invocation_manager,
)
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode, disable_functional_mode
from torch._subclasses.meta_utils import MetaConverter
from torch.autograd.graph import GradientEdge
from torch.fx._lazy_graph_module import _LazyGraphModule, _use_lazy_graph_module
from torch.fx.experimental import proxy_tensor
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import (
    GuardOnDataDependentSymNode,
    PendingUnbackedSymbolNotFound,
    ShapeEnv,
    statically_known_true,
)
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils import _pytree as pytree
from torch.utils._sympy.printers import PythonPrinter
from torch.utils.weak import WeakIdKeyDictionary

from subclassaot.errors import UnsupportedError

# Raised when a traced program turns a tensor's value into a Python number (.item(), float(t), bool(t), ...).
DataDependentError = GuardOnDataDependentSymNode


def differentiable_dtype(dtype: torch.dtype) -> bool:
    """Can a tensor of `dtype` carry autograd history (an output's tangent)? Floating point and complex, as autograd
    has it: `view_as_real` of a complex intermediate has a history and a gradient like any float output."""
    return dtype.is_floating_point or dtype.is_complex


def is_view_op(func: object) -> bool:
    """Does eager's `func` return a view of its first argument? Its schema's alias annotation says so, except for
    lift_fresh: declared aliasing, it returns its argument itself in eager (`torch.tensor(...)` made in the program
    has no `._base`), and a fresh tensor under fake and functional modes, which is no view of the constant either."""
    return bool(getattr(func, "is_view", False)) and func is not torch.ops.aten.lift_fresh.default


def public_twin(
    target: torch._ops.OpOverload, args: Sequence[object], kwargs: Mapping[str, object]
) -> Callable[..., object] | None:
    """The public binding of `target` (a tensor method, else `torch.<name>`) that dispatches exactly `target` with
    exactly `args` and `kwargs`, or None: the binding eager's own `x * 2` goes through, ~0.9-1.9 us a call less than
    `OpOverload._op`'s boxed call (the method's the cheaper). Decided by calling the candidate once on these arguments
    (tensors among them: meta stand-ins) under a dispatch mode that records the first op it dispatches; a candidate
    that decomposes, reorders, fills defaults or picks another overload is no twin."""
    for owner in (torch._C.TensorBase, torch._C._VariableFunctions):
        candidate = getattr(owner, target._overloadpacket.__name__, None)
        if candidate is not None and _dispatches_as(candidate, target, args, kwargs):
            return cast(Callable[..., object], candidate)
    return None


def _dispatches_as(
    candidate: Callable[..., object],
    target: torch._ops.OpOverload,
    args: Sequence[object],
    kwargs: Mapping[str, object],
) -> bool:
    recorder = _Recorder()
    try:
        with torch._C.DisableTorchFunction(), recorder:
            candidate(*args, **kwargs)
    except _Seen:
        pass
    except Exception:
        return False
    if recorder.seen is None:
        return False
    func, seen_args, seen_kwargs = recorder.seen
    return func is target and _same_args(seen_args, tuple(args)) and _same_args(seen_kwargs, dict(kwargs))


class _Seen(Exception):
    """Raised by `_Recorder` at the first op a candidate twin dispatches (its kernel never runs)."""


class _Recorder(torch.utils._python_dispatch.TorchDispatchMode):  # type: ignore[no-untyped-call]  # untyped __init_subclass__
    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # untyped in torch
        self.seen: tuple[object, tuple[object, ...], dict[str, object]] | None = None

    def __torch_dispatch__(
        self, func: object, types: object, args: tuple[object, ...] = (), kwargs: Mapping[str, object] | None = None
    ) -> object:
        self.seen = (func, tuple(args), dict(kwargs or {}))
        raise _Seen


def _same_args(a: object, b: object) -> bool:
    """The same arguments: the stand-in tensors themselves, everything else equal and of the same type."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_args(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return (
            isinstance(a, list) == isinstance(b, list)  # (fx's immutable_list is a list)
            and len(a) == len(b)
            and all(_same_args(x, y) for x, y in zip(a, b, strict=True))
        )
    return type(a) is type(b) and a == b


def bumps_written_args(func: object) -> bool:
    """Does eager's dispatcher advance the version counter of each argument `func`'s schema writes? For aten, its
    in-place and out= variants (their ADInplaceOrView kernels); for an op of another namespace, one with an
    ADInplaceOrView kernel: torch.library.custom_op registers one that advances each of its `mutates_args` once
    (what its body writes besides, opaque to the trace, is its kernel's: runtime/steps.py: Version Counters As
    Eager's)."""
    namespace, name = getattr(func, "namespace", "aten"), getattr(func, "_name", "")
    if namespace == "aten" or not name:
        return False
    return bool(torch._C._dispatch_has_kernel_for_dispatch_key(name, "ADInplaceOrView"))


def is_value_read_type_error(e: TypeError) -> bool:
    """Did torch's argument parser fail to read a pipeline tensor as a Python int (a 0-dim tensor passed as a size,
    as `nn.LSTM` does with a PackedSequence's `batch_sizes[0]`)? Eager reads the value; a fake or functional tensor
    has none, and the parser's TypeError names the tensor's type."""
    return any(f"but got {cls.__name__}" in str(e) for cls in (FunctionalTensor, FakeTensor))


# ---------------------------------------------------------------------------------------------------------------
# Functionalization (used by analyze and trace)
# ---------------------------------------------------------------------------------------------------------------

# What tracing raises when the program reads tensor values into Python (.item(), `if tensor:`) or makes a size out of
# them (nonzero, unique): the value does not exist while tracing with fake tensors.
DATA_DEPENDENT_ERRORS: tuple[type[Exception], ...] = (
    GuardOnDataDependentSymNode,
    PendingUnbackedSymbolNotFound,
    DataDependentOutputException,
    DynamicOutputShapeException,
)


# What tracing raises where an op has no fake (meta) kernel: torch's strided-layout NestedTensor ops (NJT's SDPA on
# CPU falls back to its math kernel through one, `_nested_tensor_from_tensor_list`); api.py refuses it, naming the op.
NO_FAKE_KERNEL_ERROR = UnsupportedOperatorException


class _FunctionalMode(FunctionalTensorMode):  # type: ignore[no-untyped-call]  # untyped __init_subclass__
    """Functionalization as torch's, except that an in-place aten op on a tensor of symbolic size runs with the Python
    dispatcher on (as torch.compile traces everything). Functionalization's C++ kernel of an in-place op first runs the
    op itself on meta copies of its arguments, the Python key excluded (no fake mode): torch's Meta kernel of clamp_ or
    clamp_min_ is a Python ref that expands a scalar's 0-d tensor to the symbolic size through C++ expand, which
    raises without the Python dispatcher. NJT values() always have a symbolic size (the ragged total). FSDP2's
    `fsdp.copy_(tensor, data)` (`tensor.copy_(data)` on every device) is functionalized as aten's copy_: its own
    Functionalize kernel would write the unwrapped tensor, unseen."""

    supports_higher_order_operators = True

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # each view's chain root by its inner tensor, which rebind_functional moves to the wrapper (`chain_root`)
        self.view_roots = WeakIdKeyDictionary()

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Sequence[type],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if isinstance(func, torch._ops.HigherOrderOperator):
            rule = base_mode_rule(func, FunctionalTensorMode, self)
            _refuse_writing_branches(self, func, args)
            if rule is not None:
                return rule(*args, **(kwargs or {}))
        if getattr(func, "_name", None) == "fsdp::copy_":
            # FSDP2's copy_ (Note [What A Backend Receives And Returns], "Unannotated writes")
            super().__torch_dispatch__(torch.ops.aten.copy_.default, types, args, kwargs)
            return None
        apart: list[str] = []
        if _writes_args_auto_functionalized(func):
            _refuse_body_autograd_records(func, args, kwargs or {})
            args, kwargs = _one_operand_per_written_memory(func, args, kwargs or {}, apart)
        if func is torch.ops.aten.expand.default and _expands_to_itself(args):
            func, args, kwargs = torch.ops.aten.alias.default, args[:1], {}
        if func is torch.ops.aten.unfold.default and not resolved_in_another_layout(args[0]):
            func, args, kwargs = torch.ops.aten.as_strided.default, self._unfold_as_strided(*args), {}
        if _in_place_on_symbolic_size(func, args):
            with enable_python_dispatcher():
                out = super().__torch_dispatch__(func, types, args, kwargs)
        else:
            out = super().__torch_dispatch__(func, types, args, kwargs)
        _relayout_out_arguments(func, args, kwargs or {})
        if apart:
            _regenerated_apart(func, apart)
        if is_view_op(func) and isinstance(args[0], FunctionalTensor):
            root = self.view_roots.get(args[0].elem, args[0])  # type: ignore[no-untyped-call]  # unannotated in torch
            for view in out if isinstance(out, list | tuple) else (out,):
                if isinstance(view, FunctionalTensor) and view is not args[0]:
                    self.view_roots[view.elem] = root
        return out

    def _unfold_as_strided(self, x: torch.Tensor, dim: int, size: Any, step: Any) -> tuple[Any, ...]:
        """aten.as_strided's arguments for `aten.unfold(x, dim, size, step)`: of x's chain root where x is a view
        (Unfold as the as_strided view it is)."""
        sizes, strides = unfold_layout(x, dim, size, step)
        root = chain_root(x, self)
        if root is None or any(t.is_neg() or t.is_conj() for t in (x, root)):
            return x, sizes, strides
        return root, sizes, strides, inner_storage_offset(x)


def chain_root(x: torch.Tensor, mode: object = None) -> torch.Tensor | None:
    """The head of FunctionalTensor `x`'s view chain, which the functional mode (`mode`, or the active one) made: the
    tensor to take an as_strided() view of `x` from (Note [as_strided On Inputs]), of x's storage and dtype (its own
    math bits: `with_bits`)."""
    mode = mode or torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FUNCTIONAL)
    if not isinstance(mode, _FunctionalMode) or not isinstance(x, FunctionalTensor) or not has_view_chain(x):
        return None
    root = mode.view_roots.get(x.elem)  # type: ignore[no-untyped-call]  # torch leaves it unannotated
    same = isinstance(root, FunctionalTensor) and (root.dtype, storage_key(root)) == (x.dtype, storage_key(x))
    return root if same else None


# Out arguments an out= op resized.
# `torch.sigmoid(x, out=o)` resizes `o` where its size differs (resize_output: a 0-d or empty `o` becomes x's shape).
# Functionalization's kernel gives the inner tensor its new layout, but torch's mode updates the FunctionalTensor
# wrapper's own sizes only for ops tagged inplace_view (resize_, transpose_), and out= ops have no such tag: the
# program then reads the old layout (`o.size()`, `o.numel()`, `o.stride()`) where eager reads the new one, and an
# input resized so is taken for one whose metadata did not change. After an out= op, each out argument that is a
# FunctionalTensor takes its inner tensor's layout, as torch's mode does for resize_ (the op under no_dispatch).


def _relayout_out_arguments(func: object, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    schema = getattr(func, "_schema", None)
    if schema is None or not schema.is_mutable:
        return
    for i, argument in enumerate(schema.arguments):
        if not argument.is_out:
            continue
        value = kwargs.get(argument.name, args[i] if i < len(args) else None)
        for t in value if isinstance(value, list | tuple) else [value]:
            if isinstance(t, FunctionalTensor):
                inner = torch._from_functional_tensor(t.elem)
                if (t.shape, t.stride(), t.storage_offset()) != (inner.shape, inner.stride(), inner.storage_offset()):
                    with torch.utils._mode_utils.no_dispatch():
                        t.resize_(inner.shape).as_strided_(inner.shape, inner.stride(), inner.storage_offset())


# Expand to the same size.
# `x.expand(x.shape)` (or with -1 for every kept size) is a view of x with x's sizes and strides: an alias. Eager
# writes through it into x's memory exactly. Functionalization writes a mutated expand back into its base as
# `base + sum_to(mutated - base)` (torch's expand_inverse), which is exact in real numbers but not in floating point:
# `x + (0.5 - x)` is 0.5 give or take one ulp, and an op after it that compares values (max, sort, ==) then differs
# from eager's (a tie broken another way, and the gradient routed to another element). Such an expand is traced as
# `aten.alias`, whose inverse is the mutated value itself. An expand that broadcasts a dim is left as it is.


def _expands_to_itself(args: tuple[Any, ...]) -> bool:
    """Is `aten.expand(x, sizes)` x's own layout: as many sizes as x has dims, each -1 or x's size there?"""
    x, sizes = args[0], args[1]
    if not isinstance(x, torch.Tensor) or len(sizes) != x.dim():
        return False
    return all(
        (isinstance(s, int) and s == -1) or statically_known_true(s == d) for s, d in zip(sizes, x.shape, strict=True)
    )


# Unfold as the as_strided view it is.
# `x.unfold(d, size, step)` is a view of x's memory, and eager writes through it into x exactly. Functionalization
# writes a mutated unfold back into its base through torch's unfold_inverse, `unfold_backward` (the gradient's
# formula): it raises where the windows overlap (size > step) and stores zeros in the elements no window covers
# (size < step, or a remainder past the last window), where eager leaves them as they were. Traced as the as_strided
# view of the same layout at x's own offset (relative, as unfold is), whose write-back (as_strided_scatter, Note
# [In-Place Ops As Eager Runs Them]) stores each location once and leaves the rest of the base alone. An unfold of a
# view is the as_strided of its chain's root at x's offset (functionalization writes back through an as_strided only
# at the head of a chain: Note [as_strided On Inputs]), `chain_root`, in the program and in a backward (CopySlices
# replays a written view's chain on the gradient) alike. Autograd above this mode recorded the unfold itself. Not
# where x has a negative or conjugate bit and is not dense: torch's math-bit fallback runs the as_strided_scatter on
# a dense resolved copy of x, in whose frame x's strides name other elements; such an unfold stays
# functionalization's, exact where its windows tile the dim (`unfold_tiles`), refused written otherwise.


def unfold_layout(x: torch.Tensor, dim: int, size: Any, step: Any) -> tuple[list[Any], list[Any]]:
    """The sizes and strides of `aten.unfold(x, dim, size, step)` (ATen's unfold), at x's offset."""
    if x.dim() == 0:
        return [size], [1]
    dim = dim % x.dim()
    sizes, strides = list(x.shape), list(x.stride())
    sizes[dim] = (sizes[dim] - size) // step + 1
    strides[dim] = strides[dim] * step
    return [*sizes, size], [*strides, x.stride(dim)]


def resolved_in_another_layout(x: torch.Tensor) -> bool:
    """Does torch's math-bit fallback run an op that is no view on a copy of `x` laid out otherwise (x has a negative
    or conjugate bit and is not dense)?"""
    return (x.is_neg() or x.is_conj()) and not torch._prims_common.is_non_overlapping_and_dense_or_false(x)


def unfold_tiles(x: torch.Tensor, dim: int, size: Any, step: Any) -> bool:
    """Do the windows of `x.unfold(dim, size, step)` hold each element of x's dim exactly once?"""
    n = x.size(dim) if x.dim() > 0 else 1
    windows = (n - size) // step + 1
    return statically_known_true((windows - 1) * step + size == n) and (
        statically_known_true(windows == 1) or statically_known_true(step == size)
    )


# Custom ops writing aliases inside a subclass. A torch.library custom op whose `mutates_args` are given two
# tensors of one memory (`op(a, b)`, a and b aliases of x) writes that memory twice in eager: `x.sin_(); y.sin_()`
# applies sin twice. Functionalization runs it as
# torch's `auto_functionalized_v2`, which clones each written argument's *base* (`t._base`, or t itself), runs the
# op on the clones and writes each clone back: arguments with one base share one clone, and the op's writes meet
# as in eager. Autograd's ADInplaceOrView kernel sets `_base`, and it is off inside a subclass's
# `__torch_dispatch__`: TwoTensor's `aten.alias` runs `alias` on each inner tensor, whose results share the inner
# tensor's (functional) storage but have no `_base`. The op on the inner tensors then clones each argument apart,
# each write lands in its own clone, and the last write back wins: eager's value through one of the two. So before
# functionalization, each written argument that has the memory and layout (storage, size, stride, offset, dtype) of
# an earlier written argument is passed as that one: one base, one clone, both writes in it, as eager's kernel
# sees them. Written arguments of one storage in other layouts that meet are refused before the trace (an in-place
# op reading memory it writes through another view, storage_swaps' check); disjoint ones are right apart.


def _writes_args_auto_functionalized(func: object) -> bool:
    """Is `func` an op that functionalization runs as `auto_functionalized`, one of another namespace than aten's
    writing some of its arguments (a torch.library custom op with `mutates_args`)?"""
    from torch._higher_order_ops.auto_functionalize import can_auto_functionalize

    return isinstance(func, torch._ops.OpOverload) and func._schema.is_mutable and can_auto_functionalize(func)


_AUTOGRAD_KEYS = ("Autograd", "AutogradCPU", "AutogradCUDA", "CompositeImplicitAutograd")


def _refuse_body_autograd_records(func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """An op declared by a schema that writes its arguments and has no autograd kernel (a CompositeExplicitAutograd
    kernel only, as torch.library.Library.impl registers): eager runs it through the dispatcher's autograd fallback,
    and where grad is on and an operand requires grad its body's ops are recorded (`copy_(fresh, x)` gives `fresh`
    x's history and x its gradient). The trace sees the op whole (auto_functionalized, no derivative): refused."""
    if func.namespace == "subclassaot" or not torch.is_grad_enabled():
        return
    if any(torch._C._dispatch_has_kernel_for_dispatch_key(func._name, key) for key in _AUTOGRAD_KEYS):
        return
    if any(isinstance(t, torch.Tensor) and t.requires_grad for t in pytree.tree_leaves((args, kwargs))):
        raise UnsupportedError(
            f"{func}: an op declared by a schema, with no autograd kernel, writes its arguments with grad on and an "
            "operand that requires grad: eager's autograd fallback records its kernel's body (what it writes gains "
            "that history), which the trace, seeing the op whole, cannot. Register its autograd formula "
            "(torch.library.register_autograd) or call it under torch.no_grad()"
        )


def _one_operand_per_written_memory(
    func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any], apart: list[str]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`func`'s operands with each written tensor that has the storage and layout of an earlier written one replaced
    by that one (the comment above `_writes_args_auto_functionalized`: custom ops writing aliases inside a subclass);
    `apart` gets the auto_functionalized_v2 prefixes of those replaced (`_x`, `_xs_1`: another object in eager)."""
    seen: dict[tuple[object, ...], torch.Tensor] = {}

    def one(t: object, name: str) -> object:
        if not isinstance(t, torch.Tensor):
            return t
        layout = (*t.shape, None, *t.stride(), None, t.storage_offset())
        key = (storage_key(t), t.dtype, *(v.node.expr if isinstance(v, torch.SymInt) else v for v in layout))
        kept = seen.setdefault(key, t)
        if kept is not t:
            apart.append(name)
        return kept

    def written(arg_schema: Any, value: object) -> object:
        if arg_schema.alias_info is None or not arg_schema.alias_info.is_write:
            return value
        name = arg_schema.name
        if isinstance(value, list | tuple):
            return [one(t, f"_{name}_{k}") for k, t in enumerate(value)]
        return one(value, f"_{name}")

    new_args = list(args)
    new_kwargs = dict(kwargs)
    for i, arg_schema in enumerate(func._schema.arguments):
        if i < len(args) and not arg_schema.kwarg_only:
            new_args[i] = written(arg_schema, args[i])
        elif arg_schema.name in kwargs:
            new_kwargs[arg_schema.name] = written(arg_schema, kwargs[arg_schema.name])
    return tuple(new_args), new_kwargs


def _regenerated_apart(func: torch._ops.OpOverload, apart: Sequence[str]) -> None:
    """The auto_functionalized_v2 node just traced for `func` regenerates its arguments `apart` (replaced by an earlier
    one of the same memory: `_one_operand_per_written_memory`) as aliases of their base, as other tensor objects over
    the same clone: eager's kernel gets `alias(x)` and `x` as two objects (its writes still meet)."""
    mode = proxy_tensor.get_proxy_mode()
    if mode is None:
        return  # (a run on fakes alone: no graph)
    hop = torch.ops.higher_order.auto_functionalized_v2
    node = next((n for n in reversed(mode.tracer.graph.nodes) if n.target is hop), None)
    if node is None or node.args[0] is not func:
        return
    # (one regenerated as a view of its base already is another object)
    bases = [p for p in apart if not any(f"{p}_{k}" in node.kwargs for k in ("alias", "slice_dim", "size"))]
    node.kwargs = {**node.kwargs, **{f"{p}_alias": True for p in bases}}


def base_mode_rule(func: torch._ops.HigherOrderOperator, base: type, mode: object) -> Callable[..., object] | None:
    """The rule torch registered for higher-order op `func` under mode type `base`, bound to `mode` (an instance of a
    subclass of `base`); None where that rule is the base mode's own `__torch_dispatch__` (torch's
    `redirect_to_mode`: the caller runs its base's method). torch finds a HOP's rule by the current mode's exact type,
    so our subclasses of its modes have none of their own: with `supports_higher_order_operators` the HOP reaches
    their `__torch_dispatch__`, which hands it to their base's rule, as the base mode would run it (the branches
    traced, functionalized or run on fakes as torch does). A HOP with no rule for the base is refused by name
    (UnsupportedError), where torch's base mode would raise NotImplementedError."""
    rule = func.python_key_table.get(base)
    if rule is None:
        raise UnsupportedError(
            f"the program calls torch's higher-order op {func._name}, for which torch registers no rule under "
            f"{base.__name__} (the mode subclassaot runs the program under at this stage): call it outside the "
            "compiled function"
        )
    if getattr(rule, "__qualname__", None) == "redirect_to_mode.<locals>.impl":
        return None
    return functools.partial(cast("Callable[..., object]", rule), mode)


def cond_with_flat_branches(
    func: object,
    args: tuple[Any, ...],
    around: Callable[
        [Callable[..., object], tuple[object, ...], tuple[object, ...]],
        contextlib.AbstractContextManager[Callable[[object], object]],
    ],
    reads: Sequence[torch.Tensor] = (),
) -> tuple[tuple[Any, ...], Callable[[object], object]] | None:
    """For the program's own call of torch.cond's op (`torch.ops.higher_order.cond(pred, true_fn, false_fn,
    operands)`): its arguments with each branch returning the flat tuple of its output's tensors, and the function
    that rebuilds the op's output as the branches returned it; None for any other call. Eager's torch.cond hands the
    op branches Dynamo captured, each returning a flat tuple (torch's autograd rule of cond needs one: a branch
    returning one tensor fails its backward); ours runs the program's branches as written (Dynamo's frame hook is
    off: Note [Dynamo Captures, The Pipeline Compiles]). `reads`, the tensors the branches read besides their
    operands, are passed as operands after the program's (as Dynamo lifts them); each run of a branch takes the
    program's operands and is entered in `around(branch, operands, lifted)`, `lifted` being what the op passed the
    branch for `reads`, in their order; the function it enters as gives the op each leaf the branch returns."""
    from torch._higher_order_ops.cond import cond_op

    if func is not cond_op or len(args) != 4 or not callable(args[1]) or not callable(args[2]):
        return None
    if isinstance(args[1], torch.fx.GraphModule) and isinstance(args[2], torch.fx.GraphModule):
        return None  # (Dynamo's own: a graph it captured calls the op)
    pred, true_fn, false_fn, operands = args
    specs: list[pytree.TreeSpec] = []
    n = len(operands)

    def flat(branch: Callable[..., object]) -> Callable[..., tuple[object, ...]]:
        def flat_branch(*ops: object) -> tuple[object, ...]:
            with around(branch, ops[:n], ops[n:]) as returned:
                leaves, spec = pytree.tree_flatten(branch(*ops[:n]))
                leaves = [returned(t) for t in leaves]
            specs.append(spec)
            return tuple(leaves)

        # (its name, not its signature: make_fx binds the op's operands, lifted ones too, to the signature it finds)
        flat_branch.__name__ = getattr(branch, "__name__", "branch")
        flat_branch.__qualname__ = getattr(branch, "__qualname__", flat_branch.__name__)
        return flat_branch

    def rebuilt(out: object) -> object:
        return pytree.tree_unflatten(list(cast("Sequence[object]", out)), specs[0]) if specs else out

    operands = (*operands, *reads) if reads else operands
    return (pred, flat(true_fn), flat(false_fn), operands), rebuilt


def _refuse_writing_branches(mode: FunctionalTensorMode, func: object, args: tuple[Any, ...]) -> None:
    """torch.cond's and while_loop's branches may neither write their operands nor return an alias of one: eager
    (through Dynamo) raises, and so do torch's functionalization rules for them, except under Python
    functionalization (ours), which first functionalizes such a branch as a custom op that writes (auto-
    functionalization) and would compile what eager refuses. The rules' own check, raising their error, comes first."""
    from torch._higher_order_ops.cond import cond_op
    from torch._higher_order_ops.utils import _check_alias_and_mutation
    from torch._higher_order_ops.while_loop import while_loop_op
    from torch._subclasses.functional_tensor import PythonFunctionalizeAPI

    if func is cond_op and len(args) == 4:
        branches, operands = ((args[1], "cond_true"), (args[2], "cond_false")), tuple(args[3])
    elif func is while_loop_op and len(args) >= 4:
        branches, operands = ((args[0], "cond_fn"), (args[1], "body_fn")), (*args[2], *args[3])
    else:
        return
    ctx = PythonFunctionalizeAPI(mode)
    unwrapped = ctx.unwrap_tensors(operands)
    with ctx.redispatch_to_next():
        for branch, name in branches:
            _check_alias_and_mutation(branch, unwrapped, name, False)  # type: ignore[no-untyped-call]  # untyped in torch


@functools.cache
def _writes_first_argument(func: object) -> bool:
    schema = getattr(func, "_schema", None)
    return schema is not None and bool(schema.arguments) and bool(schema.arguments[0].is_write)


def _in_place_on_symbolic_size(func: object, args: Sequence[object]) -> bool:
    if not args or not _writes_first_argument(func):
        return False
    first = args[0]
    return isinstance(first, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in first.shape)


def new_functional_mode() -> FunctionalTensorMode:
    return _FunctionalMode(pre_dispatch=False, export=False, _allow_token_discovery=True)


def to_functional(t: torch.Tensor) -> torch.Tensor:
    """Wrap a plain (fake or proxy-tracked) tensor as a FunctionalTensor; a FunctionalTensorMode must be active."""
    return FunctionalTensor.to_functional(t)


def is_functional(t: object) -> bool:
    return isinstance(t, FunctionalTensor)


def from_functional(t: torch.Tensor) -> torch.Tensor:
    """The current value behind a FunctionalTensor after applying pending updates."""
    return torch._from_functional_tensor(_elem(t))


def _elem(t: torch.Tensor) -> torch.Tensor:
    """The tensor inside FunctionalTensor `t`, after applying pending updates."""
    assert isinstance(t, FunctionalTensor), f"BUG: expected a FunctionalTensor, got {type(t).__name__}"
    torch._functionalize_sync(t.elem)
    return t.elem


def keep_bits_of_written(args: object) -> None:
    """Give each FunctionalTensor among `args` (an op's operands, after it ran; the written first) a value with its own
    conjugate and negative bits. A write into `x` with a bit leaves functionalization a value without it (the math-bit
    fallback's `copy_`), which its views and base replay onto: `x.imag` (`view_as_real(x._conj())`) crashed, views'
    is_conj()/is_neg() read False, batch_norm updated running stats in `x[0]` that eager's fallback copies. The value
    is replaced by one with its bits over the same elements, committed as its update."""
    for x in tensors_in(args):
        if not isinstance(x, FunctionalTensor):
            continue
        torch._functionalize_sync(x.elem)
        value = torch._from_functional_tensor(x.elem)
        if (value.is_conj(), value.is_neg()) != (x.is_conj(), x.is_neg()):
            with disable_functional_mode():  # (clone() resolves the bits: a copy of the elements read through them)
                fixed = with_bits(with_bits(value, x.is_conj(), x.is_neg()).clone(), x.is_conj(), x.is_neg())
            torch._functionalize_replace(x.elem, fixed)
            torch._functionalize_commit_update(x.elem)
            torch._functionalize_sync(x.elem)


# View ops functionalization writes back by a scatter into the viewed value, whose result has none of its bits.
_SCATTERED_VIEWS = frozenset(getattr(torch.ops.aten, n) for n in ("slice", "select", "diagonal", "split", "unbind"))


def view_keeping_bits(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """View op `func` of FunctionalTensor args[0] with a math bit, its write-back a scatter: taken of args[0] without
    bits, its outputs given them back. The scatter into a value with a bit gave one without, and the toggles above it
    gave the storage's value a bit (`x[1:].real.mul_(3)` of `x = c.conj()`: `x.imag` then crashed in view_as_real)."""
    x = args[0] if args else None
    if not (
        isinstance(x, FunctionalTensor) and func.overloadpacket in _SCATTERED_VIEWS and (x.is_conj() or x.is_neg())
    ):
        return func(*args, **kwargs)
    out = func(without_bits(x), *args[1:], **kwargs)
    return pytree.tree_map_only(torch.Tensor, lambda o: with_bits(o, x.is_conj(), x.is_neg()), out)


def has_view_chain(t: torch.Tensor) -> bool:
    """Did a view op, an in-place view op or a resize_() make FunctionalTensor `t` from (or into) a view of its
    storage's value (functionalization's chain of ViewMetas is not empty)?"""
    assert isinstance(t, FunctionalTensor), f"BUG: expected a FunctionalTensor, got {type(t).__name__}"
    return bool(torch._C._functionalization.get_view_meta_sequence(t.elem))


def has_data_mutation(t: torch.Tensor) -> bool:
    return bool(torch._functionalize_has_data_mutation(_elem(t)))  # type: ignore[attr-defined]  # no stub


def mutations_hidden_from_autograd(t: torch.Tensor) -> bool:
    return bool(torch._functionalize_are_all_mutations_hidden_from_autograd(_elem(t)))


def mutation_counter(t: torch.Tensor) -> int:
    return int(torch._functionalize_mutation_counter(_elem(t)))


def inner_storage_offset(t: torch.Tensor) -> int | torch.SymInt:
    """The storage offset functionalization keeps for FunctionalTensor `t` (after pending updates): once its storage
    was written, relative to the regenerated value, not to the input's storage (Note [as_strided On Inputs])."""
    return _elem(t).storage_offset()


# ---------------------------------------------------------------------------------------------------------------
# Storages, versions, dispatch
# ---------------------------------------------------------------------------------------------------------------


def tensors_in(tree: object) -> list[torch.Tensor]:
    """The tensors among `tree`'s pytree leaves, in pytree order: `[t for t in pytree.tree_leaves(tree) if
    isinstance(t, torch.Tensor)]`, with exact tuples, lists and dicts (an op's arguments and results) walked here and
    any other pytree node by pytree (the per-op rules' walk, run for every op of every run)."""
    found: list[torch.Tensor] = []
    todo = [tree]
    while todo:
        x = todo.pop()
        kind = type(x)
        if kind is tuple or kind is list:
            todo.extend(reversed(cast(Sequence[object], x)))
        elif kind is dict:
            todo.extend(reversed(list(cast(dict[object, object], x).values())))
        elif kind in pytree.SUPPORTED_NODES or isinstance(x, tuple):  # (a namedtuple or structseq: pytree's call)
            found.extend(t for t in pytree.tree_leaves(x) if isinstance(t, torch.Tensor))
        elif isinstance(x, torch.Tensor):
            found.append(x)
    return found


def storage_key(t: torch.Tensor) -> object:
    """A hashable identity of `t`'s storage (works for real, fake and functional tensors)."""
    return untyped_storage_key(t.untyped_storage())


def with_bits(t: torch.Tensor, conj: bool, neg: bool) -> torch.Tensor:
    """A view of `t` whose conjugate and negative bits are toggled where asked (`t.conj()`, `torch._neg_view(t)`):
    on a view without bits, the bits given; on one with them, `without_bits(t)` is `with_bits(t, *bits)`."""
    t = t.conj() if conj else t
    return torch._neg_view(t) if neg else t


def with_bits_of(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A view of `t` that reads its storage through `like`'s conjugate and negative bits."""
    return with_bits(t, like.is_conj() != t.is_conj(), like.is_neg() != t.is_neg())


def without_bits(t: torch.Tensor) -> torch.Tensor:
    """A view of `t` that reads its storage as it is: its conjugate and negative bits cleared."""
    return with_bits(t, t.is_conj(), t.is_neg())


# The address of a tensor's StorageImpl (`t.untyped_storage()._cdata`, without making the storage object: half the
# cost, for the guards' aliasing check); untyped in torch's stubs.
storage_address: Callable[[torch.Tensor], int] = torch._C._storage_id  # type: ignore[attr-defined]  # private, not in torch's stubs


def property_check(t: torch.Tensor) -> Callable[[torch.Tensor], bool]:
    """A check, in one C call, that a tensor has `t`'s exact type, dispatch keys (device type, conj/neg bits, ...),
    dtype, device index, requires_grad, sizes and strides: torch's own TensorGuards, the per-tensor part of Dynamo's
    guards. Its dispatch keys are compared under the thread-local include/exclude sets of the call."""
    # torch's stub declares keywords only; the C++ takes the tensors positionally and one list of dims per tensor
    make = cast(Callable[..., Any], TensorGuards)
    guards = make(t, dynamic_dims_sizes=[list(t.size())], dynamic_dims_strides=[list(t.stride())])
    check: Callable[[torch.Tensor], bool] = guards.check
    return check


def output_zeros(ctx: object, output: int) -> torch.Tensor:
    """Zeros like the output `output` of the autograd.Function whose backward context is `ctx`, from the metadata
    its node keeps of that output (what the engine itself materializes a missing gradient from): no per-call record
    of the output's size, dtype and device in the forward. Only for an output the Function did not mark
    non-differentiable (the node keeps no metadata of those)."""
    # `_input_metadata`: the node's metadata of its gradient inputs (the Function's outputs), private and untyped
    meta = ctx._input_metadata[output]  # type: ignore[attr-defined]  # private, not in torch's stubs
    return torch.zeros(meta.shape, dtype=meta.dtype, device=meta.device)


def inductor_callable(compiled: object) -> Callable[..., object]:
    """`compile_fx_inner`'s result as a callable of the graph's inputs, positionally. From its second call on it runs
    the generated module's `call` itself (`current_callable`, read at each call): `CompiledFxGraph.__call__` around
    it keeps per-call bookkeeping (an autotune-cache context, runtime metrics, a debug log, the profiler's label) that
    costs about as much as the call of a small graph. The first call (which ends the autotune cache's compile), and
    every call under the profiler or inductor's graph-execution recording, still go through it."""
    from torch._inductor import debug as inductor_debug
    from torch._inductor.output_code import CompiledFxGraph

    through = cast(Callable[[list[object]], object], compiled)
    if not isinstance(compiled, CompiledFxGraph):
        return lambda *args: through(list(args))
    fx_graph = compiled
    profiler = torch.autograd.profiler
    first = True

    def run(*args: object) -> object:
        nonlocal first
        if first or profiler._is_profiler_enabled or inductor_debug.RECORD_GRAPH_EXECUTION:
            first = False
            return through(list(args))
        # (no `cast` call: a function call on every call of the graph)
        direct: Callable[[list[object]], object] = fx_graph.current_callable  # type: ignore[assignment]
        return direct(list(args))

    return run


def untyped_storage_key(storage: object) -> object:
    """A hashable identity of an UntypedStorage (`storage_key` of a tensor on it)."""
    return StorageWeakRef(storage)  # type: ignore[no-untyped-call]  # torch leaves it unannotated


def has_version_counter(t: torch.Tensor) -> bool:
    """False for an inference tensor (made under torch.inference_mode), and for a normal tensor that was one: `.data =`
    onto an inference tensor takes the new data's dispatch keys (`is_inference()` turns False) but keeps the absent
    version counter, so reading `._version` raises and eager's in-place ops on it raise."""
    if t.is_inference():
        return False
    try:
        int(t._version)
    except RuntimeError:  # "Inference tensors do not track version counter": torch has no other way to ask
        return False
    return True


def get_version(t: torch.Tensor) -> int:
    """`t._version`; 0 for a tensor without a version counter (`has_version_counter`; read once: the per-call path
    reads counters)."""
    if t.is_inference():
        return 0
    try:
        return int(t._version)
    except RuntimeError:  # (a former inference tensor: `has_version_counter`)
        return 0


def set_version(t: torch.Tensor, version: int) -> None:
    """Set `t`'s version counter; a tensor without one (`has_version_counter`) has none to set, nor has eager's. One
    access: the per-call path sets counters."""
    if t.is_inference():
        return
    try:
        torch._C._autograd._unsafe_set_version_counter((t,), (version,))
    except RuntimeError:  # (a former inference tensor; any other error is torch's own and raises again)
        if has_version_counter(t):
            raise


def after_accumulating(leaf: torch.Tensor, hook: Callable[[torch.Tensor], None]) -> Callable[[], None]:
    """Call `hook(leaf)` each time autograd's engine has accumulated a gradient into `leaf`, in the engine's order;
    returns the hook's removal."""
    handle = leaf.register_post_accumulate_grad_hook(hook)  # type: ignore[no-untyped-call]  # untyped in torch
    return cast(Callable[[], None], handle.remove)


def replay_view(view: torch.Tensor, new_base: torch.Tensor) -> torch.Tensor:
    """The view ops that made `view` from its autograd `._base`, replayed on `new_base` (autograd's view function:
    the ops themselves, not an as_strided)."""
    return cast(torch.Tensor, view._view_func_unsafe(new_base))


def rebuilt_view_node(view: torch.Tensor) -> object:
    """The grad_fn eager's autograd rebuilds for the view `view` from its `._base` after a write: its view function
    replayed with grad over a detach() of that base made to require grad (AsStridedBackward0 for a plain view taken
    outside view replay mode, its last view op's node for one taken inside it or a subclass's), on tensors of its own:
    `view` and its base are left as they came. Inside an inference_mode() block too: eager's read rebuilds there too."""
    with outside_current_modes(), no_torch_function(), torch.inference_mode(False), torch.enable_grad():
        base = cast(torch.Tensor, view._base).detach().requires_grad_()
        return replay_view(view, base).grad_fn


def give_base_grad(view: torch.Tensor) -> None:
    """requires_grad_() on `view`'s autograd `._base` where that is a leaf without it: the view then requires grad,
    as a view does whose base requires grad (Note [Views That Raise After A Bump])."""
    base = view._base
    if base is not None and base.is_leaf and not base.requires_grad:
        base.requires_grad_(True)


def refresh_view_grad_fn(t: torch.Tensor) -> None:
    """Read `t.grad_fn` of a view that requires grad, so that autograd regenerates it after its base gained grad
    (Note [Inputs Written In Training]); a grad_fn whose read raises is left to the op."""
    grad_fn_raises(t)  # its read of grad_fn is the refresh


def autograd_sequence_nr() -> int:
    """The sequence number autograd gives the next node it makes, read without making one: a call that moves it made
    a node (an op's grad_fn, a view's history regenerated after a write, a custom Function's); AccumulateGrad and
    autograd's error nodes take none."""
    return int(torch._C._autograd._get_sequence_nr())


def autograd_sequence_mark() -> int:
    """The sequence number autograd gives the next node it makes: nodes made before this call have a lower one,
    nodes made after a higher one (the engine's order among ready nodes). Made by creating one node that is never
    run (it takes a number of its own, which leaves the order of every other node as it was)."""
    node: Any = torch._C._functions.DelayedError("never run", 0)  # (torch's stubs do not list the node's methods)
    return int(node._sequence_nr())


def is_program_node(node: Any, start: int) -> bool:
    """Was autograd node `node` made after the sequence mark `start` (see `autograd_sequence_mark`)? Nodes made
    without a number of their own (AccumulateGrad, autograd's error nodes) count as made before."""
    seq = int(node._sequence_nr())
    return start <= seq < _NO_SEQUENCE_NR


_NO_SEQUENCE_NR = 2**64 - 1  # the number of nodes made without one (AccumulateGrad, NotImplemented, Error)


def autograd_nodes(starts: Iterable[object]) -> Iterator[Any]:
    """Each autograd node the nodes `starts` reach (themselves included; None skipped) once, depth first. The nodes
    seen are held, not their id()s: torch frees the Python object of a C++ node no one holds, and a new one may get
    its id."""
    seen: set[object] = set()
    stack = list(starts)
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        yield node
        stack.extend(child for child, _ in getattr(node, "next_functions", ()))


def grad_fn_raises(t: torch.Tensor) -> bool:
    """Does reading `t.grad_fn` raise autograd's view-after-write error (a view made under no_grad, or by a
    multi-output op, whose base was written since)? Only views that require grad can."""
    if not t.requires_grad or not t._is_view():
        return False
    try:
        t.grad_fn  # noqa: B018  # the access itself is the check (is_leaf reads it too)
    except RuntimeError:
        return True
    except (ValueError, IndexError):
        # Replaying view ops after an in-place view op of the base (t_) failed here; eager's grad_fn regenerates
        # a plain view by as_strided instead: it is not the view-after-write error.
        return False
    return False


def grad_fn_error_after_bump(t: torch.Tensor) -> RuntimeError | None:
    """The error autograd raises reading `t.grad_fn` once `t`'s version counter has moved, where it raises one: a view
    that requires grad made under no_grad, inside inference_mode, by a multi-output op (unbind, split, chunk) or by a
    custom Function, whose counter (its base's) an in-place write, a resize_() that changes a size or a set_() moves.
    Read on `t` itself with its counter moved by one and given back at once: eager's very message (the op's name and
    output number), nothing of `t` changed. None for a view of the default kind (the read would rebuild its history
    instead: no error to find, and a change) and for anything else."""
    if not t.requires_grad or not t._is_view() or is_plain_autograd_view(t) or grad_fn_raises(t):
        return None  # (one that raises already: its error is the caller's to see, not a bump's)
    version = get_version(t)
    set_version(t, version + 1)
    try:
        t.grad_fn  # noqa: B018  # the access itself is the check
    except RuntimeError as e:
        return e
    finally:
        set_version(t, version)
    return None


def grad_fn_before_bump(t: torch.Tensor) -> Any:
    """The node a view whose grad_fn raises since its counter moved (`grad_fn_raises`: not a view of the default kind,
    whose read would rebuild it) had when made: read with its counter lowered to each earlier count in turn until the
    read answers (the count autograd made it at), the counter given back at once; None where none answers."""
    if not grad_fn_raises(t) or is_plain_autograd_view(t):
        return None
    version = get_version(t)
    try:
        for count in range(version - 1, -1, -1):
            set_version(t, count)
            try:
                return t.grad_fn
            except RuntimeError:
                continue
    finally:
        set_version(t, version)
    return None


# autograd's one message for a view whose history it refuses, as it names what was modified in place: the view's base
# (or another view of it), at a read of the view's history after the write; the view itself, at its own write
_BASE_MODIFIED = "its base or another view of its base has been modified inplace"
_SELF_MODIFIED = "is being modified inplace"


def view_write_error(read_error: RuntimeError) -> RuntimeError:
    """The error autograd raises at an in-place write with grad of a view whose history raises once its counter moved
    (`grad_fn_error_after_bump`'s `read_error`): the same message, naming the view itself as modified."""
    return RuntimeError(str(read_error).replace(_BASE_MODIFIED, _SELF_MODIFIED, 1))


def grad_fn_or_none(t: torch.Tensor) -> Any:
    """`t.grad_fn`, or None where reading it raises (the view-after-write error, or a view replay that fails after
    its base's layout changed: see grad_fn_raises)."""
    try:
        return t.grad_fn
    except (RuntimeError, ValueError, IndexError):
        return None


def has_grad_fn(t: torch.Tensor) -> bool:
    """Has `t` a grad_fn, reading it as eager does? Where the read raises autograd's view-after-write error, no;
    where replaying its view ops fails (its base's `.data =` gave it another layout since, see grad_fn_raises),
    eager regenerates a plain view's grad_fn by as_strided: a node."""
    try:
        return t.grad_fn is not None
    except RuntimeError:
        return False
    except (ValueError, IndexError):
        return True


def recorded_size(t: torch.Tensor) -> tuple[int | torch.SymInt, ...] | None:
    """The size autograd recorded for `t` with its grad_fn (what the engine checks `t`'s gradient against: a
    `.data =` since may have given `t` another); None without a grad_fn."""
    try:
        node = t.grad_fn
    except (RuntimeError, ValueError, IndexError):  # see grad_fn_raises
        return None
    if node is None:
        return None
    metadata = node._input_metadata
    return tuple(metadata[t.output_nr].shape)


_CreationMeta = torch._C._autograd.CreationMeta


def _created_as(t: torch.Tensor, kind: _CreationMeta) -> bool:
    """`t` is an autograd view whose creation meta (how autograd treats it once its base changes) is `kind`."""
    return t._is_view() and bool(torch._C._autograd._get_creation_meta(t) == kind)


def creation_meta_of(t: torch.Tensor) -> _CreationMeta | None:
    """`t`'s autograd creation meta; None where `t` is no autograd view (autograd's reader refuses one)."""
    return torch._C._autograd._get_creation_meta(t) if t._is_view() else None


_CREATION_META_WORDS = {
    _CreationMeta.DEFAULT: "a view of the default kind",
    _CreationMeta.MULTI_OUTPUT_NODE: "an output of an op returning several views (unbind, split, chunk)",
    _CreationMeta.NO_GRAD_MODE: "a view taken under no_grad",
    _CreationMeta.INFERENCE_MODE: "a view taken inside inference_mode",
    _CreationMeta.IN_CUSTOM_FUNCTION: "a view a custom autograd.Function returned",
}


def describe_creation_meta(meta: _CreationMeta | None) -> str:
    """`creation_meta_of`'s answer in words."""
    if meta is None:
        return "a tensor that is no view"
    return _CREATION_META_WORDS.get(meta, f"a view of creation meta {meta}")


def is_multi_output_view(t: torch.Tensor) -> bool:
    """An autograd view made by an op returning several views (unbind, split, chunk): autograd refuses to read
    its grad_fn once its base's version counter advanced."""
    return _created_as(t, _CreationMeta.MULTI_OUTPUT_NODE)


def custom_function_of(t: torch.Tensor) -> type | None:
    """The custom autograd.Function class whose node is `t`'s grad_fn (an output of its forward, or an input it
    marked dirty), if it is one."""
    try:
        return node_function_class(t.grad_fn)
    except (RuntimeError, ValueError, IndexError):  # see grad_fn_raises
        return None


def node_function_class(node: Any) -> type | None:
    """The custom autograd.Function class whose node `node` is, if it is one."""
    if not isinstance(node, torch.autograd.function.BackwardCFunction):
        return None
    cls: type = cast(Any, node)._forward_cls  # set on the node class by FunctionMeta
    return cls


def is_custom_function_view(t: torch.Tensor) -> bool:
    """An autograd view a custom autograd.Function returned (its input, or a view of it), or a view of one: autograd
    refuses to read its grad_fn once its base's version counter advanced, naming that Function. A Function returning
    several views gives them MULTI_OUTPUT_NODE instead, counted here where the Function's node is the view's own."""
    if _created_as(t, _CreationMeta.IN_CUSTOM_FUNCTION):
        return True
    return _created_as(t, _CreationMeta.MULTI_OUTPUT_NODE) and custom_function_of(t) is not None


def mark_inference_mode_view(t: torch.Tensor) -> None:
    """Give autograd view `t` the creation meta of a view taken inside a torch.inference_mode() block
    (INFERENCE_MODE): taken under no_grad instead, it then reads, raises and is written exactly as that view."""
    if t._is_view():
        torch._C._autograd._set_creation_meta(t, torch._C._autograd.CreationMeta.INFERENCE_MODE)


def is_inference_mode_view(t: torch.Tensor) -> bool:
    """An autograd view with creation meta INFERENCE_MODE: taken inside a torch.inference_mode() block of a normal
    tensor, or a view of such a view (autograd propagates that creation meta along a chain of views, whatever the grad
    mode of the later views)."""
    return _created_as(t, _CreationMeta.INFERENCE_MODE)


def is_plain_autograd_view(t: torch.Tensor) -> bool:
    """An autograd view of the default kind (not made under no_grad nor by a multi-output op): reading its grad_fn
    after its base's version counter advanced rebuilds it over the base's history instead of raising."""
    return _created_as(t, _CreationMeta.DEFAULT)


def rebuild_view_history_outside_inference_mode(t: torch.Tensor) -> None:
    """Rebuild the history of autograd view `t` whose base's version counter advanced, now, with inference mode off
    (Note [Stale View Functions]). Torch function modes do not see the read, as autograd's own
    read from C++ is not seen; an error autograd raises for such a view (one made under no_grad) raises here, as
    it would at the read this one comes before."""
    with torch._C.DisableTorchFunction():
        if not t._is_view() or t.is_inference():
            return
        with torch.inference_mode(False), torch.enable_grad():
            t.grad_fn  # noqa: B018  (the read is the rebuild: VariableHooks::grad_fn)


def requires_grad_through_base(t: torch.Tensor) -> bool:
    """An autograd view made under no_grad (or inference mode) of a tensor that requires grad: it reports requires_grad
    from its base but has neither history nor an accumulator of its own, so no gradient reaches it, until
    requires_grad_() gives it its own flag (a new autograd leaf). The flag is read from the base each time it is
    asked (the base's requires_grad_() after the view changes it), whatever the view op and sizes, and whatever
    set_() did to the base before the view was taken."""
    if not t._is_view() or not t.requires_grad:
        return False
    meta = torch._C._autograd._get_creation_meta(t)
    modes = (torch._C._autograd.CreationMeta.NO_GRAD_MODE, torch._C._autograd.CreationMeta.INFERENCE_MODE)
    return meta in modes and not grad_fn_raises(t) and t.grad_fn is None


def history_less_view(t: torch.Tensor) -> bool:
    """An autograd view taken with grad of a tensor that required none then (creation meta DEFAULT or
    MULTI_OUTPUT_NODE, no history) whose base requires grad now: like a view made under no_grad, it reports
    requires_grad from its base with neither history nor an accumulator of its own, until requires_grad_() gives it
    its own flag (a new autograd leaf). Reads its grad_fn: call it where eager's does (requires_grad_() reads
    is_leaf), or on a tensor the caller holds."""
    if not t.requires_grad or not (is_plain_autograd_view(t) or is_multi_output_view(t)):
        return False
    try:  # (one read: grad_fn_raises's cases, each meaning it has or will raise a history of its own)
        return t.grad_fn is None
    except (RuntimeError, ValueError, IndexError):
        return False


def flagless_no_grad_view(t: torch.Tensor) -> bool:
    """`reads_flag_of_base`, and no requires_grad_() gave it a flag of its own: autograd's edge for it leads nowhere
    (neither history nor accumulator), so an op with grad that reads it records an edge to nothing, and no gradient
    reaches it nor, through it, its base. One whose grad_fn raises (its base written since: a compile's tensors read
    again after the compiled call wrote them, Note [Tangent Retrace]) counts, its edge unread: every read of it with
    grad raises, whatever its flag. The accumulator is asked for outside every mode, so a trace in progress records
    nothing of it."""
    if not reads_flag_of_base(t):
        return False
    if grad_fn_raises(t):
        return True
    with outside_current_modes():
        return wrapper_grad_accumulator(t).node is None


def leaf_view_of_its_own(t: torch.Tensor) -> bool:
    """An autograd view that requires grad by a flag of its own and has no history (`b[0].requires_grad_()` of a base
    requiring none, or a view taken under no_grad given requires_grad_()): a leaf whose accumulator is its own, its
    `._base` no autograd ancestor of it. Not a flagless no_grad view (`flagless_no_grad_view`: its flag is its
    base's, its edge leads nowhere)."""
    return t._is_view() and t.requires_grad and is_leaf_before_base_write(t) and not flagless_no_grad_view(t)


def is_no_grad_view(t: torch.Tensor) -> bool:
    """An autograd view made under no_grad (or inference mode): it has no history, and its requires_grad reads its own
    flag or its base's (autograd's view meta answers `own or base.requires_grad`), so requires_grad_() gives it a flag
    of its own whatever its base's."""
    modes = (_CreationMeta.NO_GRAD_MODE, _CreationMeta.INFERENCE_MODE)
    return t._is_view() and torch._C._autograd._get_creation_meta(t) in modes


def reads_flag_of_base(t: torch.Tensor) -> bool:
    """`requires_grad_through_base`, or such a view whose base was written since (its grad_fn raises where the base
    requires grad): either way it has no flag of its own until requires_grad_() gives it one. Reads no grad_fn of a
    view of another creation meta: that read rebuilds the history of a view whose base was written (a side effect,
    wrong where the read comes inside autograd's rebuild of another view's, as a custom Function's apply does)."""
    if requires_grad_through_base(t):
        return True
    modes = (_CreationMeta.NO_GRAD_MODE, _CreationMeta.INFERENCE_MODE)
    return t._is_view() and torch._C._autograd._get_creation_meta(t) in modes and grad_fn_raises(t)


def is_leaf_before_base_write(t: torch.Tensor) -> bool:
    """`t.is_leaf` as it read before its base was written, where reading it now raises autograd's view-after-write
    error (a view made under no_grad or by a multi-output op, whose base was written since): one made under no_grad
    had no history (a leaf), one made with grad had its view node. A compile's inputs are read again by a tangent
    retrace after the compiled call wrote them (Note [Tangent Retrace]): this read gives what the compile read."""
    if grad_fn_raises(t):
        return reads_flag_of_base(t)
    return bool(t.is_leaf)


def take_creation_meta(view: torch.Tensor, source: torch.Tensor) -> None:
    """Give autograd view `view` the creation meta of autograd view `source` (what a view taken with grad of `source`
    inherits: autograd's propagate_creation_meta keeps anything over DEFAULT)."""
    torch._C._autograd._set_creation_meta(view, torch._C._autograd._get_creation_meta(source))


def give_grad_mode_creation_meta(view: torch.Tensor, source: torch.Tensor, multi_output: bool) -> None:
    """Give `view`, taken of `source` under no_grad, the creation meta autograd gives a view taken with grad enabled
    of a source that requires no grad (no history either way): MULTI_OUTPUT_NODE for an op returning several views,
    else DEFAULT, where `source` is a view with DEFAULT creation meta or none; else `source`'s, which a view of a view
    inherits (autograd's propagate_creation_meta: INFERENCE_MODE over anything, anything over DEFAULT)."""
    if not view._is_view():
        return
    before = torch._C._autograd._get_creation_meta(source) if source._is_view() else _CreationMeta.DEFAULT
    new = _CreationMeta.MULTI_OUTPUT_NODE if multi_output else _CreationMeta.DEFAULT
    keep = new == _CreationMeta.DEFAULT or before == _CreationMeta.INFERENCE_MODE
    torch._C._autograd._set_creation_meta(view, before if keep else new)


def is_fake(t: object) -> bool:
    return isinstance(t, FakeTensor)


def fake_mode_active() -> bool:
    """Is a FakeTensorMode on the dispatch mode stack (we are tracing, not running for real)?"""
    return torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None


def functorch_unwrapped(t: torch.Tensor) -> torch.Tensor:
    """The tensor under every functorch wrapper (vmap's BatchedTensor, grad's GradTrackingTensor): those wrappers
    are C++ tensors that show as torch.Tensor, so what they hold says whether the data is real or traced."""
    while is_functorch_wrapped(t):
        t = torch._C._functorch.get_unwrapped(t)
    return t


def is_functorch_wrapped(t: object) -> bool:
    """A functorch wrapper (vmap's BatchedTensor, grad's GradTrackingTensor): it lives inside one transform."""
    return isinstance(t, torch.Tensor) and bool(torch._C._functorch.is_functorch_wrapped_tensor(t))


_TRANSFORM_NAMES = {
    "Grad": "torch.func.grad (or vjp, jacrev, hessian: a reverse-mode transform)",
    "Jvp": "torch.func.jvp (or jacfwd: a forward-mode transform)",
    "Vmap": "torch.vmap",
    "Functionalize": "torch.func.functionalize",
}


def compiled_call_under_transform_message(where: str) -> str:
    """The refusal of a compiled function called inside a torch.func transform (the innermost one named): the
    compiled program runs as an autograd.Function over tensors it unwraps itself, which no transform sees through;
    outside every transform, the refusal of a wrapper that outlived its transform. `where`: the argument's path, or
    "the call" (Note [Compiled Functions Inside torch.func Transforms])."""
    # (typed as never None: it is None outside every transform, where a dead wrapper may still arrive)
    interpreter = cast("Any", torch._C._functorch.peek_interpreter_stack())
    if interpreter is None:
        return (
            f"{where}: a tensor wrapped by a torch.func transform that has ended (kept from inside it) reaches a "
            "function compiled by subclassaot, whose guards and trace read storages such a wrapper has none of. "
            "Return the tensor from the transformed function (torch.func unwraps what it returns) instead of "
            "keeping it from inside"
        )
    key = interpreter.key().name
    transform = _TRANSFORM_NAMES.get(key, "a torch.func transform")
    return (
        f"{where}: a function compiled by subclassaot was called inside {transform}, which cannot run through the "
        "compiled program (its autograd.Function has no setup_context or vmap rule, and the compiled graph reads "
        "real tensors, not the transform's wrappers). Call the function uncompiled inside the transform "
        "(torch.func.grad(fn)(x) instead of torch.func.grad(subclassaot.compile(fn))(x)), or compile the whole "
        "transformed function (subclassaot.compile(torch.func.grad(fn))(x))"
    )


def differentiates_inside_transform(func: object, args: tuple[object, ...], kwargs: dict[str, object]) -> bool:
    """Is this torch.autograd.grad the one a torch.func transform runs on its own wrapped tensors (Note [Grad Mode And
    Autograd Reads])?"""
    if func is not torch.autograd.grad or torch._C._functorch.peek_interpreter_stack() is None:
        return False
    outputs = args[0] if args else kwargs.get("outputs")
    flat = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    return bool(flat) and all(is_functorch_wrapped(t) for t in flat)


def is_real_plain_tensor(t: torch.Tensor) -> bool:
    """A plain tensor with real data: not a fake, not a functional wrapper (C++ ones show as torch.Tensor), not a
    functorch wrapper of a traced tensor (one around a real tensor is real: its innermost tensor decides)."""
    t = functorch_unwrapped(t)
    return type(t) in (torch.Tensor, torch.nn.Parameter) and not torch._is_functional_tensor(t)


class _CacheKeepsStorage(FakeTensorMode):  # type: ignore[no-untyped-call]  # untyped __init_subclass__
    """A fake mode whose cached results that are not views keep the storage offset and storage size the kernel gave
    them, whoever filled the cache: a cached call answers as the kernel does, the first time in a process or the
    hundredth. Every fake mode the pipeline makes is one (`new_fake_mode`, `static_fake_copies`).

    FakeTensorMode's dispatch cache outlives its modes (process-wide for static shapes, per ShapeEnv for symbolic
    ones): a call whose arguments have the metadata of an earlier call returns a tensor rebuilt from the earlier
    result's recorded metadata, and torch rebuilds a result that is not a view with empty_strided(size, stride), at
    storage offset 0 in a storage just large enough. The kernel's own result may be laid out otherwise: `aten.copy`
    and `as_strided_scatter` (what functionalization makes of `x.copy_(v)` and of a write through an as_strided
    view) clone their first argument with clone_preserve_strides, which keeps its storage offset in a copy of its
    whole storage, as the real kernels in the graph do. So the first call in a process (a miss: the kernel's answer)
    and every later one (a hit) disagreed: `x = base.as_strided((1,), (1,), 1); x.add_(1)` left x's functional value
    at offset 1 on the first compile and 0 after, a view of it (`x.t()`) took the value's offset, and a subclass
    whose two inner tensors ran the same op met one miss and one hit.

    Higher-order ops: torch finds a HOP's rule for the current mode by the mode's exact type, so a subclass of
    FakeTensorMode has none of FakeTensorMode's (functionalization's `auto_functionalized_v2` of a custom op that
    writes its inputs raised NotImplementedError). With `supports_higher_order_operators` the HOP comes to the method
    here, which runs FakeTensorMode's rule for it (`base_mode_rule`: torch.cond's runs both branches on fakes; where
    the rule is FakeTensorMode's own `__torch_dispatch__`, torch's `redirect_to_mode`, that method), and one without
    a FakeTensorMode rule raises as it would under FakeTensorMode.
    """

    supports_higher_order_operators = True

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Sequence[type],
        args: Sequence[object] = (),
        kwargs: Mapping[str, object] | None = None,
    ) -> object:
        if isinstance(func, torch._ops.HigherOrderOperator):
            rule = base_mode_rule(func, FakeTensorMode, self)
            if rule is not None:
                return rule(*args, **(kwargs or {}))
        out = super().__torch_dispatch__(func, types, args, kwargs or {})
        if func in _BATCH_NORM_INPUT:  # Note [Strides The Kernels Choose]: batch_norm's, as the CPU kernels lay out
            _batch_norm_as_cpu(self, args[_BATCH_NORM_INPUT[func]], out)
        return out

    def _get_output_tensor_from_cache_entry(
        self,
        state: _CacheKeyState,
        entry: _DispatchCacheEntryOutputInfo,
        key: _DispatchCacheKey,
        func: torch._ops.OpOverload,
        args: Sequence[object],
    ) -> FakeTensor | None:
        out: FakeTensor | None = super()._get_output_tensor_from_cache_entry(state, entry, key, func, args)
        meta = entry.metadata
        if out is None or meta is None or entry.view_idx is not None or meta.storage_bytes is None:
            return out  # a constant, an in-place op's argument, or a view (already on its argument's storage)

        def cached(value: object) -> int | torch.SymInt:
            if isinstance(value, _SymIntOutputStub):
                assert state.shape_env is not None, "BUG: a symbolic cached result without a ShapeEnv"
                return cast(int | torch.SymInt, value.extract(key, state.shape_env))
            return cast(int | torch.SymInt, value)

        offset, nbytes = cached(meta.storage_offset), cached(meta.storage_bytes)
        if statically_known_true(offset == 0) and statically_known_true(nbytes == out.untyped_storage().nbytes()):
            return out  # laid out as empty_strided lays it out: the common case
        guards = self.shape_env.suppress_guards() if self.shape_env is not None else contextlib.nullcontext()
        with in_kernel_invocation_manager(self), guards:
            storage = torch.empty((nbytes,), dtype=torch.uint8, device="meta").untyped_storage()
            out.set_(storage, offset, out.shape, out.stride())
        return out

    def create_symbolic_nested_int(self, *, nt_tensor_id: int | None = None) -> torch.SymInt:
        """The nested int of an offsets (or lengths) tensor the program made or passed plain, when NJT first asks
        for it (`nested_tensor_from_jagged` inside the program): a plain nested int, as every NJT input's
        (`nested_int`), never torch's ShapeEnv symbol. A symbol is a traced value that no graph input carries: the
        joint trace, which meets the one the forward memoised on the fake, had no proxy for it (a backward through
        `.values()` or a linear of such an NJT failed) (Note [Nested Int Dims])."""
        import torch.nested._internal.nested_tensor as njt_module

        if nt_tensor_id is not None:  # a symbol hinted by a known nested int (`symbolic_nested_int`)
            made = super().create_symbolic_nested_int(nt_tensor_id=nt_tensor_id)
            assert isinstance(made, torch.SymInt), f"BUG: a nested int symbol is a SymInt, got {type(made).__name__}"
            return made
        nt_tensor_id = njt_module._tensor_id_counter
        njt_module._tensor_id_counter += 1
        return nested_int(nt_tensor_id, 1)


_aten = torch.ops.aten
# the batch_norm ops whose first result eager's CPU kernel lays out contiguously in its input's suggested memory
# format, where the meta kernel keeps the strides of an argument; each by the position of that input
_BATCH_NORM_INPUT: dict[object, int] = {
    **dict.fromkeys(
        (
            _aten.native_batch_norm.default,
            _aten._native_batch_norm_legit.default,
            _aten._native_batch_norm_legit.no_stats,
            _aten._native_batch_norm_legit_functional.default,
            _aten._native_batch_norm_legit_no_training.default,
            _aten._batch_norm_with_update.default,
            _aten._batch_norm_with_update_functional.default,
            _aten._batch_norm_no_update.default,
        ),
        0,
    ),
    _aten.native_batch_norm_backward.default: 1,  # (grad_out, input, ...): grad_input is laid out as the input
    _aten.batch_norm_backward.default: 1,
}


def memory_format_strides(size: Sequence[Any], memory_format: torch.memory_format | None) -> list[Any]:
    """The strides of a dense tensor of `size` laid out in `memory_format` (contiguously where None)."""
    if memory_format is torch.channels_last:
        return list(torch._prims_common.make_channels_last_strides_for(size))
    if memory_format is torch.channels_last_3d:
        return list(torch._prims_common.make_channels_last_3d_strides_for(size))
    return list(torch._prims_common.make_contiguous_strides_for(tuple(size)))


def _batch_norm_as_cpu(mode: FakeTensorMode, x: object, out: object) -> None:
    """Give the first result `out` of a batch_norm op on CPU fakes (`x`: the input its layout follows) the strides
    eager's kernel gives it, contiguous in x's suggested memory format, where the meta kernel kept other strides (a
    transposed input's: Note [Strides The Kernels Choose]). In place, as the cache's results are relaid."""
    first = out[0] if isinstance(out, tuple | list) and out else None
    if not isinstance(first, FakeTensor) or not isinstance(x, FakeTensor) or first.device.type != "cpu":
        return
    if first.shape != x.shape or first.layout != torch.strided:
        return
    strides = memory_format_strides(first.shape, torch._prims_common.suggest_memory_format(x))
    if all(statically_known_true(a == b) for a, b in zip(first.stride(), strides, strict=True)):
        return
    version = get_version(first)
    guards = mode.shape_env.suppress_guards() if mode.shape_env is not None else contextlib.nullcontext()
    with in_kernel_invocation_manager(mode), guards:
        first.set_(first.untyped_storage(), 0, first.shape, strides)
    set_version(first, version)


def new_fake_mode(shape_env: ShapeEnv | None = None) -> FakeTensorMode:
    """A fresh fake mode with its own ShapeEnv (`shape_env`, or a new one), as every compile needs (fake tensor
    freshness), whose cached results are the kernels' (`_CacheKeepsStorage`)."""
    return _CacheKeepsStorage(shape_env=ShapeEnv() if shape_env is None else shape_env, allow_non_fake_inputs=False)


# The error autograd raises where a backward reaches the history a non-leaf input had before it was fakified
# (meta_utils wraps such a fake in a node that raises it).
EXAMPLE_INPUT_HISTORY_ERROR = "Tried to backward() through example input"


def fresh_static_fake(mode: FakeTensorMode, t: torch.Tensor) -> torch.Tensor:
    """A static fake of `t` in `mode` that is no fake `mode` made before: where `mode` has one of `t` (a real tensor
    its trace already took, as an input's offsets an NJT output and its tangent share), a new fake of `t`'s layout,
    which no trace reads as that earlier one."""
    if mode.fake_tensor_converter._get_memo(t) is None:
        return mode.from_tensor(t, static_shapes=True)
    with mode:
        return torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device=t.device)


def static_fake_copies(values: Sequence[object]) -> tuple[FakeTensorMode, list[object]]:
    """Fakes of `values`' tensors with static shapes in a fresh fake mode (no ShapeEnv, so no guards), aliasing
    kept (the same object gives the same fake, a view a view of its base's fake); a non-leaf that requires grad
    becomes a non-leaf whose earlier history raises EXAMPLE_INPUT_HISTORY_ERROR; a plain tensor that is no view but
    shares another's version counter (a detach() of it) shares its fake's (`_share_fake_counters`). Other values as
    they are."""
    mode = _EagerEmptyLayouts(allow_non_fake_inputs=False)
    made: dict[int, torch.Tensor] = {}
    fakes = [_static_fake(mode, v, made) if isinstance(v, torch.Tensor) else v for v in values]
    _share_fake_counters(mode, values, fakes)
    return mode, fakes


def _static_fake(mode: FakeTensorMode, t: torch.Tensor, made: dict[int, torch.Tensor]) -> torch.Tensor:
    """`mode.from_tensor(t, static_shapes=True)`, but for a subclass holding a subclass (a TwoTensor of
    TwoTensors), or a view of one: built here from its inner tensors' fakes, each inner subclass given its own
    requires_grad, which torch's MetaConverter leaves at what its `__tensor_unflatten__` made (its inner tensors'):
    eager's `TwoTensor(f, g.detach().clone().requires_grad_())` holds a `g` requiring grad over inner tensors that
    do not, whose fake would not, and the outer unflatten then fails (or differs from eager's). A view is its view
    ops replayed on its base's fake, with grad where it requires grad. The same object gives the same fake (`made`:
    id -> fake); requires_grad and a non-leaf's raising history as `from_tensor`'s."""
    if id(t) in made:
        return made[id(t)]
    base = t._base
    if not _holds_a_subclass(t if base is None else base):
        return mode.from_tensor(t, static_shapes=True)
    if base is not None:
        base_fake = _static_fake(mode, base, made)
        with mode, torch.set_grad_enabled(t.requires_grad):
            fake = replay_view(t, base_fake)
    else:
        # (a traceable subclass, checked by `_holds_a_subclass`: the protocol's dunders, undeclared on torch.Tensor)
        attrs, ctx = type(t).__tensor_flatten__(t)  # type: ignore[attr-defined]
        inner = {a: _static_fake(mode, v, made) if isinstance(v := getattr(t, a), torch.Tensor) else v for a in attrs}
        unflatten = type(t).__tensor_unflatten__  # type: ignore[attr-defined]  # (as above)
        fake = cast(torch.Tensor, unflatten(inner, ctx, tuple(t.shape), tuple(t.stride())))
        if fake.requires_grad != t.requires_grad:
            fake.requires_grad_(t.requires_grad)
        if t.requires_grad and not t.is_leaf:
            fake = torch._C._functions.DelayedError(EXAMPLE_INPUT_HISTORY_ERROR, 1)(fake)
    made[id(t)] = fake
    return fake


def _holds_a_subclass(t: torch.Tensor) -> bool:
    """Is `t` a traceable subclass (no Parameter) one of whose inner tensors is a subclass?"""
    flatten = getattr(type(t), "__tensor_flatten__", None)
    if flatten is None or type(t) is torch.nn.Parameter:
        return False
    return any(type(v := getattr(t, a)) is not torch.Tensor and isinstance(v, torch.Tensor) for a in flatten(t)[0])


def static_meta_copies(values: Sequence[object]) -> tuple[contextlib.AbstractContextManager[object], list[object]]:
    """Copies of `values`' tensors on the meta device, kept as static_fake_copies keeps its fakes (sizes, strides,
    storage sharing, views of the same base, requires_grad, leafness, a non-leaf's earlier history raising
    EXAMPLE_INPUT_HISTORY_ERROR, shared version counters), with no mode to run them in (the context returned does
    nothing): ops on them run eager's own autograd and view handling, where the fake mode's differ (Note [Probing
    Eager's Backward])."""
    convert: MetaConverter[torch.Tensor] = MetaConverter()
    copies: list[object] = []
    for v in values:
        if not isinstance(v, torch.Tensor):
            copies.append(v)
            continue
        meta = convert(v)
        if not isinstance(meta, torch.Tensor):  # (NotImplemented: a layout it cannot copy, a sparse or nested one)
            raise NotImplementedError(f"no meta copy of a {type(v).__name__} laid out as {v.layout}")
        copies.append(meta)
    mode: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
    _share_fake_counters(mode, values, copies)
    return mode, copies


def shares_version_counter(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Do `a` and `b` share a version counter? Advance a's and see whether b's moves (then restore it)."""
    if a is b:
        return True
    if a.is_inference() or b.is_inference() or storage_key(a) != storage_key(b):
        return False  # only aliases (views, detach) can share a counter; an inference tensor has none
    before, other = get_version(a), get_version(b)
    set_version(a, before + 1)
    shared = get_version(b) != other
    set_version(a, before)
    return shared


def _share_fake_counters(
    mode: contextlib.AbstractContextManager[object], values: Sequence[object], fakes: list[object]
) -> None:
    """Give the fake of each tensor without history that is no view (no `._base`) but shares another tensor's
    version counter (`x.detach()` passed beside x: a write of either moves both, and autograd's saved-version check
    of one sees the other's writes) an alias of that tensor's fake sharing its counter, laid out as the real one:
    the fake mode makes such a fake over the same storage with a counter of its own. A subclass only where it is
    laid out as the other or as the other's base (a detach() of it: its class's own detach makes the alias). Not
    where a view of it is among the values (its fake is a view of the fake replaced)."""
    tensors = [(k, v) for k, v in enumerate(values) if isinstance(v, torch.Tensor)]
    bases = {id(v._base) for _, v in tensors if v._base is not None}
    movable = {id(v) for _, v in tensors if v._base is None and v.grad_fn is None and id(v) not in bases}
    done: dict[int, torch.Tensor] = {}
    for n, (k, v) in enumerate(tensors):
        if id(v) in done:
            fakes[k] = done[id(v)]
            continue
        if id(v) not in movable:
            continue
        # the source: a tensor whose fake stays, or one replaced before this one
        source = next(
            (
                j
                for m, (j, u) in enumerate(tensors)
                if u is not v and (id(u) not in movable or m < n) and shares_version_counter(u, v)
            ),
            None,
        )
        fake_source = fakes[source] if source is not None else None
        if not isinstance(fake_source, torch.Tensor) or shares_version_counter(
            fake_source, cast(torch.Tensor, fakes[k])
        ):
            continue
        relaid = _layout(fake_source) != _layout(v)
        if type(v) is not torch.Tensor:  # (a subclass: only a detach() of another input of its class as it is, or
            # of the base of one that is a view: its fake is a view of the base's fake)
            candidates = (fake_source, fake_source._base)
            found = next((c for c in candidates if type(c) is type(v) and _layout(c) == _layout(v)), None)
            if found is None:
                continue
            fake_source, relaid = found, False
        with mode, torch.no_grad():
            alias = fake_source.detach()  # (the same storage and counter, no view, no history)
            version = get_version(alias)
            if relaid:
                alias.as_strided_(v.shape, v.stride(), v.storage_offset())
            set_version(alias, version)  # (as_strided_ moved the shared counter)
        fakes[k] = done[id(v)] = alias.requires_grad_(v.requires_grad)


def _layout(t: torch.Tensor) -> tuple[object, ...]:
    return (t.shape, t.stride(), t.storage_offset())


class _EagerEmptyLayouts(_CacheKeepsStorage):  # type: ignore[no-untyped-call]  # untyped __init_subclass__
    """A static fake mode whose empty results have eager's strides (Note [Strides The Kernels Choose]), whose
    composite views inside inference_mode are eager's (Note [The Eager Record]) and whose cached results are the
    kernels' (`_CacheKeepsStorage`)."""

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: Sequence[type],
        args: Sequence[object] = (),
        kwargs: Mapping[str, object] | None = None,
    ) -> object:
        kwargs = kwargs or {}
        retaken, view = composite_view_as_eager(func, args, kwargs)
        if retaken:
            return view
        out = super().__torch_dispatch__(func, types, args, kwargs)
        schema = getattr(func, "_schema", None)
        if not isinstance(out, FakeTensor | list | tuple) or (isinstance(out, FakeTensor) and out.numel() != 0):
            return out  # (most ops: one result with elements, or none (`prim.device`); no walk of the args)
        if isinstance(out, FakeTensor) and schema is not None and not schema.is_mutable:
            return _empty_view_as_eager(func, args, kwargs, out, schema)
        tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        results = [t for t in pytree.tree_leaves(out) if isinstance(t, FakeTensor)]
        if (
            schema is None
            or schema.is_mutable
            or any(r.alias_info is not None for r in schema.returns)
            or not tensors
            or not results
            or not all(isinstance(t, FakeTensor) and t.device.type == "cpu" and t.numel() == 0 for t in tensors)
            or not all(r.numel() == 0 for r in results)
        ):
            return out
        real = {
            id(t): torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu").as_strided(
                t.shape, t.stride(), int(t.storage_offset())
            )
            for t in tensors
        }
        real_args, real_kwargs = pytree.tree_map(lambda v: real.get(id(v), v), (tuple(args), dict(kwargs)))
        with torch.random.fork_rng(devices=[]):
            try:
                eager = func(*real_args, **real_kwargs)
            except (RuntimeError, ValueError, IndexError, TypeError, NotImplementedError):  # the real kernel refuses
                return out  # what the meta one took: keep the fake's answer
        strides = {
            id(f): tuple(e.stride())
            for f, e in zip(pytree.tree_leaves(out), pytree.tree_leaves(eager), strict=False)
            if isinstance(f, FakeTensor) and isinstance(e, torch.Tensor) and e.shape == f.shape
        }

        def relaid(v: object) -> object:
            if not isinstance(v, FakeTensor) or strides.get(id(v), tuple(v.stride())) == tuple(v.stride()):
                return v
            return self.from_tensor(torch.empty_strided(v.shape, strides[id(v)], dtype=v.dtype, device="cpu"))

        return pytree.tree_map(relaid, out)


def _empty_view_as_eager(
    func: torch._ops.OpOverload,
    args: Sequence[object],
    kwargs: Mapping[str, object],
    out: FakeTensor,
    schema: torch._C.FunctionSchema,
) -> object:
    """An empty view of a static CPU fake at eager's storage offset: the meta kernel of an empty view may place it
    elsewhere (`x.diagonal(-1)` of a 1x1 tensor at offset 1, eager's at 0), and the fakes of an input that is such a
    view, replayed from their base, fail the converter's offset check."""
    base = args[0] if args else None
    if (
        len(schema.returns) != 1
        or schema.returns[0].alias_info is None
        or not isinstance(base, FakeTensor)
        or base.device.type != "cpu"
        or any(isinstance(d, torch.SymInt) for d in (*base.shape, *base.stride()))
    ):
        return out
    storage = torch.empty(base.untyped_storage().nbytes() // base.element_size(), dtype=base.dtype)
    real = storage.as_strided(base.shape, base.stride(), int(base.storage_offset()))
    try:
        eager = func(real, *args[1:], **kwargs)
    except (RuntimeError, ValueError, IndexError, TypeError, NotImplementedError):  # the real kernel refuses
        return out
    if not isinstance(eager, torch.Tensor) or eager.storage_offset() == out.storage_offset():
        return out
    return torch.ops.aten.as_strided.default(base, out.shape, out.stride(), eager.storage_offset())


def composite_view_as_eager(
    func: torch._ops.OpOverload, args: Sequence[object], kwargs: Mapping[str, object]
) -> tuple[bool, object]:
    """For a dispatch mode: (True, eager's result) where `func` is a view op with no kernel of its own called inside
    inference_mode on a plain tensor, taken again as eager's (Note [The Eager Record]); (False, None) otherwise, and
    where the op copies instead: the mode runs it as it would."""
    if not torch.is_inference_mode_enabled():  # (first: this runs on every op the mode sees)
        return False, None
    schema = getattr(func, "_schema", None)
    first = next((t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)), None)
    if (
        schema is None
        or schema.is_mutable
        or not any(r.alias_info is not None for r in schema.returns)
        or first is None
        or type(first) not in (torch.Tensor, torch.nn.Parameter, FakeTensor)  # (a wrapper's is an inference tensor)
        or first.is_inference()
        or not _composite_only(f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name)
    ):
        return False, None
    if _inside_subclass_dispatch():
        return False, None
    # dispatched again from the top, as the backend kernel's view ops are in eager; with no dispatch mode left to take
    # it, a plain tensor's op skips the Python key (there, it would find no mode)
    below = not torch._C._len_torch_dispatch_stack() and not any(
        type(t) not in (torch.Tensor, torch.nn.Parameter)
        for t in pytree.tree_leaves((args, kwargs))
        if isinstance(t, torch.Tensor)
    )
    python_keys = torch._C.DispatchKeySet(torch._C.DispatchKey.Python) | torch._C.DispatchKeySet(
        torch._C.DispatchKey.PythonTLSSnapshot
    )
    with (
        torch.overrides.enable_reentrant_dispatch(),
        torch._C._ExcludeDispatchKeyGuard(python_keys) if below else contextlib.nullcontext(),
        torch.inference_mode(False),
        torch.no_grad(),
    ):
        out = func(*args, **kwargs)
    made = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    if not made or not all(o._is_view() for o in made):
        return False, None
    for o in made:
        mark_inference_mode_view(o)
    return True, out


def _composite_only(name: str) -> bool:
    """An op with no kernel of its own: a CompositeImplicitAutograd one with no ADInplaceOrView kernel (chunk() has
    one, which makes its results views itself)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return has(name, "CompositeImplicitAutograd") and not has(name, "ADInplaceOrView")


def _inside_subclass_dispatch() -> bool:
    """Is the op called by a tensor subclass's `__torch_dispatch__` (on its inner tensors)? There eager runs below
    autograd and ADInplaceOrView, so a view op makes no view. The dispatcher's state does not tell (a mode's handler runs
    below them too, and its snapshot of the state is the outermost call's), so the Python stack is read: a frame of a
    `__torch_dispatch__` whose class is a tensor subclass other than FakeTensor (modes' handlers belong to no tensor)."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "__torch_dispatch__":
            owner = frame.f_locals.get("cls", frame.f_locals.get("self"))
            cls = owner if isinstance(owner, type) else type(owner)
            if issubclass(cls, torch.Tensor) and not issubclass(cls, FakeTensor):
                return True
        frame = frame.f_back
    return False


def shape_env_of(mode: FakeTensorMode) -> ShapeEnv:
    env = mode.shape_env
    assert env is not None, "BUG: fake modes made by subclassaot always carry a ShapeEnv"
    return env


def unbacked_symbols_made(mode: FakeTensorMode) -> int:
    """How many unbacked symbols (a tensor's value read as a number: `.item()`, a data-dependent size) the ShapeEnv
    of `mode` has made so far."""
    env = shape_env_of(mode)
    return env.unbacked_symint_counter + env.unbacked_symfloat_counter


# ---------------------------------------------------------------------------------------------------------------
# Tracing and symbolic expressions
# ---------------------------------------------------------------------------------------------------------------


def trace_graph(
    fn: Callable[..., object],
    example_inputs: Sequence[object],
    decompositions: Mapping[torch._ops.OperatorBase, Callable[..., object]] | None = None,
) -> torch.fx.GraphModule:
    """make_fx over fake inputs (already symbolic where the policy says so); the fake mode must be active."""
    table = dict(decompositions) if decompositions is not None else None

    def program(*args: object) -> object:
        unmark()  # (fx has patched what it patches by now)
        # make_fx runs on fx's symbolic tracer, which raises the flag that refuses Proxy-based tracing; the program
        # itself sees fake tensors, not Proxies, so code that checks the flag (torch.nested's constructors) runs as
        # it does in eager. torch drops the flag the same way when it traces a higher-order op's body.
        import torch.fx._symbolic_trace as fx_trace

        old = fx_trace._is_fx_tracing_flag
        fx_trace._is_fx_tracing_flag = False
        try:
            return fn(*args)
        finally:
            fx_trace._is_fx_tracing_flag = old

    # make_fx types its table as Mapping[OpOverload, ...]; decomposition tables are keyed by OperatorBase. No
    # torch-function mode of make_fx's own on every torch call the program makes: it only names each node's torch
    # function in `node.meta["torch_fn"]` (torch.export's), and turns an explicit `aten.size.default` on symbolic
    # sizes into `sym_size`, a call the analysis, run before any trace without that mode, already fails on.
    with _use_lazy_graph_module(True), _module_methods_marked() as unmark:  # Note [What A Backend Receives And Returns]
        return make_fx(
            program,
            decomposition_table=table,  # type: ignore[arg-type]  # make_fx types it by OpOverload, tables by OperatorBase
            tracing_mode="real",
            _allow_non_fake_inputs=False,
            _disable_torch_fn_metadata_mode=True,
        )(*example_inputs)


# fx's tracer, which make_fx runs on, patches torch.nn.Module.__call__ and __getattr__ for each trace (and puts them
# back after): setting an attribute of nn.Module's class drops the attribute caches of every Module subclass loaded
# (0.05-0.12 ms a setattr with ~400 loaded, four a trace, and the lookups after it miss). Under make_fx both patches
# do nothing: its tracer's call_module runs the module's forward and its getattr returns the attribute as it is, and
# the math functions the patched __call__ wraps in a module's globals act only on fx Proxies, which make_fx never
# hands out.
# fx's patcher leaves alone a method carrying the `__fx_already_patched` mark, so the trace marks both (only until
# the program starts: fx patches before that, and the program's own fx traces, if any, patch as usual. Like
# `_is_fx_tracing_flag`, which the program runs with lowered, the mark is process-wide: an fx trace another thread
# starts in that window would not patch either).
_FX_PATCHED_MARK = "__fx_already_patched"


@contextlib.contextmanager
def _module_methods_marked() -> Iterator[Callable[[], None]]:
    """Mark nn.Module's __call__ and __getattr__ as patched (the comment above); yields the function that unmarks
    them, which also runs at the end."""
    methods = (torch.nn.Module.__call__, torch.nn.Module.__getattr__)
    # (a method someone replaced by an object without attributes of its own stays as it is, and is patched)
    marked = all(isinstance(m, types.FunctionType) and not hasattr(m, _FX_PATCHED_MARK) for m in methods)
    if marked:
        for m in methods:
            setattr(m, _FX_PATCHED_MARK, True)

    def unmark() -> None:
        nonlocal marked
        if marked:
            marked = False
            for m in methods:
                delattr(m, _FX_PATCHED_MARK)

    try:
        yield unmark
    finally:
        unmark()


def graph_module(root: torch.fx.GraphModule, graph: torch.fx.Graph) -> torch.fx.GraphModule:
    """`torch.fx.GraphModule(root, graph)`, generating its code when first run or read (Note [What A Backend Receives
    And Returns])."""
    return _LazyGraphModule(root, graph)


def code_generated(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """`gm` with its code generated now, so that `gm.forward` is the generated one (Note [What A Backend Receives And
    Returns])."""
    _LazyGraphModule.force_recompile(gm)
    return gm


def new_autograd_leaf(
    t: torch.Tensor, is_view: bool = True, no_grad_view: bool = False, input_base: bool = False
) -> torch.Tensor:
    """A traced graph's node (Note [Training Without A Function]): `t` made a new autograd leaf, as the program's
    requires_grad_() made eager's. Itself where the graph's run gave it no history and it is a view only if eager's
    is (`is_view`); else a detached alias, which is no view: eager's had no history (computed in a no_grad block,
    say), or is no view where the graph's value is one (a resize_() the graph runs as an as_strided() of a
    temporary). A view whose graph value has history where eager's (taken with grad on of a base computed under
    no_grad) has none is taken again, by as_strided(), of its base's detached alias: a view with no history, as
    eager's. `no_grad_view`: eager's has the creation meta of a view taken under no_grad, which the graph's run,
    taking its views with grad on, did not give it; a view result is given it (but inside inference_mode's, which
    holds over any). `input_base`: eager's is a view of an input requiring no grad then, which the runtime made
    require grad before the graph ran (the program turns its flag on later): the view is taken again of that input
    itself under no_grad, with the creation meta of one taken with grad on, so that a write to the input after the
    call rebuilds its history as it rebuilds eager's (whose backward then raises "leaf variable has been moved into
    the graph interior"). A view taken under no_grad (`no_grad_view`) of a base requiring grad is taken again of
    that base under no_grad, as eager's was: its base's counter moving after it was taken (a write of the input, even
    the caller's after the call) makes its accumulator's backward raise "A view was created in no_grad mode ...", as
    eager's (a view of the detached alias shares the counter, but autograd checks it only against a base requiring
    grad). The graph's base requires grad where eager's does not only where eager's was computed in a no_grad block,
    whose outputs the native path refuses, and which the functional graph never writes in place. The nodes after it
    read the result."""
    own_base = no_grad_view and t._base is not None and t._base.requires_grad
    if t.grad_fn is None and (is_view or not t._is_view()):
        leaf = t.requires_grad_()
    elif is_view and t._base is not None and (input_base and t._base.grad_fn is None or own_base):
        with torch.no_grad():
            leaf = t._base.as_strided(t.size(), t.stride(), t.storage_offset())
        torch._C._autograd._set_creation_meta(leaf, _CreationMeta.DEFAULT)  # (no_grad_view's is set below)
        leaf.requires_grad_()
    elif is_view and t._base is not None:
        leaf = t._base.detach().as_strided(t.size(), t.stride(), t.storage_offset()).requires_grad_()
    else:
        return t.detach().requires_grad_()
    if no_grad_view and leaf._is_view() and torch._C._autograd._get_creation_meta(leaf) != _CreationMeta.INFERENCE_MODE:
        torch._C._autograd._set_creation_meta(leaf, _CreationMeta.NO_GRAD_MODE)
    return leaf


def without_history(t: torch.Tensor) -> torch.Tensor:
    """A traced graph's node (Note [Training Without A Function]): `t`, the result of an op the program ran with grad
    off, detached: eager's autograd recorded no history of it, where the graph's run, with grad on throughout, would.
    A detached alias shares its counter, as the graph's own value is no view."""
    return t.detach()


def trace_without_history(t: torch.Tensor) -> None:
    """Under make_fx over functionalization: a `without_history` node on FunctionalTensor `t`'s current value, whose
    result the nodes traced after it read for that value (`trace_new_leaf`'s way). Nothing where no make_fx trace is
    running."""
    mode = proxy_tensor.get_proxy_mode()
    if mode is None:
        return
    value = from_functional(t)
    before = proxy_tensor.get_proxy_slot(value, mode.tracer)
    proxy = mode.tracer.create_proxy("call_function", without_history, (before.proxy,), {})
    proxy_tensor.set_meta(proxy, value)
    proxy_tensor.set_proxy_slot(value, mode.tracer, proxy_tensor._ProxyTensor(proxy, None))


def as_parameter(t: torch.Tensor) -> None:
    """Make output `t` what the program's `nn.Parameter(...)` made in eager (new_leaves.made_parameter): a plain tensor
    of class Parameter, the same object (its history, accumulator and the outputs' histories ending in it kept); any
    other class marked `_is_param`, as Parameter.__new__ marks one."""
    if type(t) is torch.Tensor:
        t.__class__ = torch.nn.Parameter
    elif not isinstance(t, torch.nn.Parameter):
        t._is_param = True  # (Parameter.__new__'s own mark)


def trace_new_leaf(
    t: torch.Tensor, is_input: bool = False, no_grad_view: bool = False, input_base: bool = False
) -> None:
    """Under make_fx over functionalization: a `new_autograd_leaf` node on FunctionalTensor `t`'s current value, whose
    result the nodes traced after it read for that value, and which is a view only where the program's `t` is one.
    `is_input`: `t` stands for an input, whose stand-in is no view where the caller's may be (a view passed alone):
    the caller's own tensor is made the leaf, view or not. `no_grad_view`: the node gives its view result the creation
    meta of one taken under no_grad, and `input_base` takes it over the caller's input (`new_autograd_leaf`). Nothing
    where no make_fx trace is running."""
    mode = proxy_tensor.get_proxy_mode()
    if mode is None:
        return
    value = from_functional(t)
    tracer = mode.tracer
    before = proxy_tensor.get_proxy_slot(value, tracer)
    args = (before.proxy, is_input or t._is_view(), no_grad_view, input_base)
    proxy = tracer.create_proxy("call_function", new_autograd_leaf, args, {})
    proxy_tensor.set_meta(proxy, value)
    proxy_tensor.set_proxy_slot(value, tracer, proxy_tensor._ProxyTensor(proxy, None))


def functional_alias(t: torch.Tensor) -> torch.Tensor:
    """`aten.alias(t)` of FunctionalTensor `t` (a FunctionalTensorMode active), its graph node, under make_fx, the one
    make_fx's dispatch would make (same name, same metadata), made directly: the alias runs with make_fx's proxy mode
    off, and its value is given an `alias` node of `t`'s value's node. make_fx's dispatch of the op (its arguments'
    and result's pytree walks, its constant folding) costs about half the alias; the pipeline makes one per dense leaf
    (`run_functional`'s originals), and the node is dead code unless the graph reads that value. The plain call where
    no make_fx trace runs (or a pre-dispatch one), or where `t`'s value is untracked or a constant of the trace (make_fx
    folds those)."""
    traced = _traced_alias_source(t)
    if traced is None:
        plain: torch.Tensor = torch.ops.aten.alias.default(t)
        return plain
    tracer, source = traced
    with proxy_tensor.disable_proxy_modes_tracing():
        alias: torch.Tensor = torch.ops.aten.alias.default(t)
    inner = from_functional(alias)
    name = tracer.graph._target_to_str("alias")  # make_fx names a node after its op's overload packet
    proxy = tracer.create_proxy("call_function", torch.ops.aten.alias.default, (source.proxy,), {}, name=name)
    proxy_tensor.set_meta(proxy, inner)
    proxy_tensor.set_proxy_slot(inner, tracer, proxy_tensor._ProxyTensor(proxy, None))
    return alias


def _traced_alias_source(t: torch.Tensor) -> tuple[proxy_tensor._ProxyTracer, proxy_tensor._ProxyTensor] | None:
    """The make_fx tracer and the proxy of FunctionalTensor `t`'s value, where `functional_alias(t)` makes an alias
    node; None where it makes the plain call (no trace, a pre-dispatch one, or `t`'s value untracked or a constant)."""
    # (a pre-dispatch trace's mode is kept apart: it would see the op made here all the same, so the plain call)
    mode = cast(
        proxy_tensor.ProxyTorchDispatchMode | None, torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.PROXY)
    )
    # (`t`'s pending updates applied under the trace, as the op's own sync would)
    source = proxy_tensor.get_proxy_slot(from_functional(t), mode.tracer, None) if mode is not None else None
    if mode is None or source is None or source.constant is not None:
        return None
    return mode.tracer, source


def skip_alias_name(t: torch.Tensor) -> None:
    """Take the name `functional_alias(t)`'s node would take, making no alias: where the pipeline leaves an alias
    out that the graph would drop as dead code, every later node keeps its name. Nothing where no node would be made."""
    traced = _traced_alias_source(t)
    if traced is not None:
        graph = traced[0].graph
        graph._graph_namespace.create_name(graph._target_to_str("alias"), None)


def skip_node_name(op: str) -> None:
    """Under make_fx, take the name its dispatch would give a node of aten op `op` (its overload packet's name), as if
    that node were made: a node left out of the trace (a clone the graph would drop anyway) leaves every later node's
    name as it was. Nothing outside a make_fx trace."""
    mode = cast(
        proxy_tensor.ProxyTorchDispatchMode | None, torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.PROXY)
    )
    if mode is not None:
        graph = mode.tracer.graph
        graph._graph_namespace.create_name(graph._target_to_str(op), None)


def symint_expr(value: int | torch.SymInt) -> sympy.Expr | int:
    """An int stays an int; a SymInt becomes its sympy expression (simplified by its ShapeEnv)."""
    if isinstance(value, int):
        return value
    node = value.node
    nested = nested_int_id(value)
    if nested is not None:  # a plain nested int `c * j` (Note [Nested Int Dims]): equal exactly when it is the same
        from torch.utils._sympy.singleton_int import SingletonInt

        return cast(sympy.Expr, SingletonInt(nested, coeff=int(node.nested_int_coeff())))
    expr = cast(sympy.Expr, node.expr)
    simplified = node.shape_env.simplify(expr) if node.shape_env is not None else expr
    if isinstance(simplified, sympy.Integer):
        return int(simplified)
    return cast(sympy.Expr, simplified)


_PRINTER = PythonPrinter()


def python_source(expr: sympy.Expr | int) -> str:
    """Python source for a shape expression (FloorDiv, Mod and friends printed as Python integer ops)."""
    if isinstance(expr, int):
        return str(expr)
    return cast(str, _PRINTER.doprint(expr))


# ---------------------------------------------------------------------------------------------------------------
# Fakify: sources, symbols and symbolic contexts (owned by fakify.py; see Note [Fakify Through The Symbol Cache])
# ---------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PathSource(torch._guards.Source):
    """A source named by its path (`args[0].values`); what the ShapeEnv records for a symbol, without dynamo."""

    path: str

    @property
    def name(self) -> str:
        return self.path

    @property
    def guard_source(self) -> torch._guards.GuardSource:
        return torch._guards.GuardSource.LOCAL

    def is_ephemeral(self) -> bool:
        return False


def new_size_symbol(shape_env: ShapeEnv, value: int, source_name: str) -> sympy.Symbol:
    """A fresh backed symbol (never duck-shaped) for `value` at `source_name`, range [2, oo]."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    sym = shape_env.create_symbol(value, PathSource(source_name), dynamic_dim=DimDynamic.DYNAMIC)
    assert isinstance(sym, sympy.Symbol), (
        f"BUG: {source_name}={value} did not make a symbol (0/1 must be planned static)"
    )
    return sym


def reserve_symbol_name(shape_env: ShapeEnv, name: str) -> None:
    """Keep `name` (`s42`) from being handed out, as if its symbol had been created (replays creation order)."""
    if name[1:].isdigit():
        shape_env.unique_ids.add(int(name[1:]))


def constrain_range(shape_env: ShapeEnv, symbol: sympy.Symbol, lower: int | None, upper: int | None) -> None:
    """Narrow `symbol`'s value range (kept in `shape_env.var_to_range`); sizes stay >= 2."""
    from torch.utils._sympy.numbers import int_oo

    shape_env.constrain_symbol_range(
        symbol, compiler_min=max(2, lower or 2), compiler_max=int_oo if upper is None else upper
    )


def make_symint(shape_env: ShapeEnv, expr: sympy.Expr, hint: int) -> int | torch.SymInt:
    """An int for a constant expression, else a SymInt over `expr` whose hint is the real value."""
    out = shape_env.create_symintnode(expr, hint=hint)
    assert isinstance(out, int | torch.SymInt), f"BUG: create_symintnode gave {type(out).__name__}"
    return out


def floordiv_expr(expr: sympy.Expr, divisor: int) -> sympy.Expr:
    """`expr // divisor` in the form the ShapeEnv reasons about."""
    from torch.utils._sympy.functions import FloorDiv

    return cast(sympy.Expr, FloorDiv(expr, sympy.Integer(divisor)))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DimExprs:
    """The size, stride and storage offset expressions fakify decided for one tensor at `path`."""

    path: str
    sizes: tuple[sympy.Expr, ...]  # len = ndim
    strides: tuple[sympy.Expr, ...]  # len = ndim
    storage_offset: sympy.Expr
    inferred_strides: tuple[bool, ...]  # len = ndim; True where torch may infer the stride from the sizes


def _symbolic_context(shape_env: ShapeEnv, exprs: DimExprs, base: DimExprs | None) -> object:
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatefulSymbolicContext

    base_context = None if base is None else _symbolic_context(shape_env, base, None)
    context = StatefulSymbolicContext(
        dynamic_sizes=[DimDynamic.STATIC if e.is_number else DimDynamic.DYNAMIC for e in exprs.sizes],
        dynamic_strides=[DimDynamic.INFER_STRIDE if i else DimDynamic.DYNAMIC for i in exprs.inferred_strides],
        tensor_source=PathSource(exprs.path),
        view_base_context=cast("torch.fx.experimental.symbolic_shapes.SymbolicContext | None", base_context),
    )
    cache: dict[str, sympy.Expr] = {f"{exprs.path}.size()[{d}]": e for d, e in enumerate(exprs.sizes)}
    cache.update({f"{exprs.path}.stride()[{d}]": e for d, e in enumerate(exprs.strides)})
    cache[f"{exprs.path}.storage_offset()"] = exprs.storage_offset
    context.shape_env_to_source_to_symbol_cache[id(shape_env)] = cache
    return context


def fake_leaf(
    fake_mode: FakeTensorMode, t: torch.Tensor, exprs: DimExprs, base: DimExprs | None, *, static: bool
) -> torch.Tensor:
    """`fake_mode.from_tensor(t)` with exactly the given expressions (the ShapeEnv makes no symbols of its own).

    The converter memoises on the real tensor and its storage, so aliasing inputs become aliasing fakes. For a view,
    `base` gives the expressions of `t._base` under the source `<path>._base` (the name torch gives it). `static`:
    the caller's whole fakification has no symbol (every expression a number, `t`'s and its base's real layout), so
    the converter takes `t`'s layout as it is, without the ShapeEnv's size/stride/offset creation (which, given only
    numbers, creates nothing, records nothing and returns the same ints); but a 0-dim tensor keeps the ShapeEnv: the
    converter gives a 0-dim CPU integer or double tensor a backed symbol for its `item()` (the program's `.item()`
    reads it), which a fake made without the ShapeEnv lacks.
    """
    from torch.fx.experimental.symbolic_shapes import SymbolicContext

    if static and t.dim() != 0:
        return fake_mode.from_tensor(t, static_shapes=True)
    shape_env = shape_env_of(fake_mode)
    context = cast(SymbolicContext, _symbolic_context(shape_env, exprs, base))
    return fake_mode.from_tensor(t, source=PathSource(exprs.path), symbolic_context=context)


def try_expr_of(value: int | torch.SymInt) -> sympy.Expr | None:
    """The raw sympy expression of a size, stride or offset; None for one without (a jagged tensor's nested int)."""
    if isinstance(value, int):
        return sympy.Integer(value)
    if nested_int_id(value) is not None:
        return cast(sympy.Expr, symint_expr(value))
    expr = getattr(value.node, "expr", None)
    return cast(sympy.Expr, expr) if expr is not None else None


def nested_int_id(value: int | torch.SymInt) -> int | None:
    """The id of a real nested int (`j3` -> 3), None for anything else (a fake's nested int is a ShapeEnv symbol)."""
    found = value.node.nested_int() if isinstance(value, torch.SymInt) and value.node.is_nested_int() else None
    return None if found is None else int(found)


def nested_coeff(value: object) -> int | None:
    """The coefficient c of a plain nested int `c * j`; None for anything else (ints, symbols, other objects)."""
    if isinstance(value, torch.SymInt) and nested_int_id(value) is not None:
        return int(value.node.nested_int_coeff())
    return None


def is_nested_int(value: object) -> bool:
    """A nested int, plain (`j3`) or a ShapeEnv symbol standing for one (torch's fakification of an NJT)."""
    return isinstance(value, torch.SymInt) and bool(value.node.is_nested_int())


def is_nested_expr(expr: object) -> bool:
    """True for the expression `symint_expr` gives a plain nested int (a `SingletonInt`)."""
    from torch.utils._sympy.singleton_int import SingletonInt

    return isinstance(expr, SingletonInt)


def nested_int(nested_id: int, coeff: int) -> torch.SymInt:
    """The plain nested int `coeff * j<nested_id>`, for a fake subclass's outer size.

    torch's converter gives a fake offsets tensor a ShapeEnv symbol (hinted by the nested int); a symbol is a traced
    value, so every size computed from it inside `__tensor_unflatten__` would need a proxy, and no graph input
    carries it. A plain nested int is a constant of the trace: NJT's metadata arithmetic (`j * D`) and comparisons
    (`j == j`) run on it without tracing, as in eager, and NJT's unflatten memoises it on the fake offsets (see
    Note [Nested Int Dims]).
    """
    from torch.nested._internal.nested_int import NestedIntNode

    return torch.SymInt(NestedIntNode(nested_id, coeff))  # type: ignore[no-untyped-call]  # torch leaves it untyped


def symbolic_nested_int(fake_mode: FakeTensorMode, nested_id: int, coeff: int) -> torch.SymInt:
    """`coeff * j` as torch's fakification makes it: a ShapeEnv symbol hinted by the nested int (it can multiply
    other symbols, but a make_fx trace would need a proxy for it; the pipeline uses `nested_int`)."""
    with fake_mode:
        base = fake_mode.create_symbolic_nested_int(nt_tensor_id=nested_id)
    assert isinstance(base, torch.SymInt), f"BUG: a nested int symbol is a SymInt, got {type(base).__name__}"
    return base * coeff


def is_jagged_class(cls: type) -> bool:
    """Whether `cls` is NJT's class (whose unflatten `memoise_jagged_nested_int` serves)."""
    from torch.nested._internal.nested_tensor import NestedTensor

    return issubclass(cls, NestedTensor)


def memoise_jagged_nested_int(
    cls: type, inner: Mapping[str, torch.Tensor], ctx: object, outer_size: Sequence[int | torch.SymInt]
) -> None:
    """NJT's `__tensor_unflatten__` memoises `outer_size[ragged_idx]` on a fake offsets (or lengths) tensor so that
    the rebuilt tensor keeps that nested int; it skips a functional wrapper around a fake, which would then get a
    fresh nested int. Do the same for the fake under the wrapper (Note [Nested Int Dims])."""
    from torch.nested._internal.nested_tensor import NestedTensor

    if not issubclass(cls, NestedTensor) or not isinstance(ctx, dict):
        return
    ragged = ctx.get("ragged_idx")
    source = inner.get("_lengths") if inner.get("_lengths") is not None else inner.get("_offsets")
    if not isinstance(ragged, int) or not 0 <= ragged < len(outer_size) or source is None:
        return
    value = outer_size[ragged]
    if nested_int_id(value) is None or not isinstance(source, FunctionalTensor):
        return
    fake = torch._from_functional_tensor(source.elem)
    if isinstance(fake, FakeTensor):
        fake.nested_int_memo = value


def hint_of(value: int | torch.SymInt) -> int:
    """The real value behind a size or stride (its hint), read without a guard."""
    if not isinstance(value, torch.SymInt):
        return int(value)
    try:
        from torch.fx.experimental.symbolic_shapes import optimization_hint
    except ImportError:  # torch before 2.13 (the GPU machines' image): the shape env answers directly
        return int(value.node.shape_env.size_hint(value.node.expr))
    return int(optimization_hint(value))


def sym_min(a: int | torch.SymInt, b: int | torch.SymInt) -> int | torch.SymInt:
    """The smaller of two sizes, symbolic where either is (no guard)."""
    return cast("int | torch.SymInt", torch.sym_min(a, b))  # type: ignore[no-untyped-call]  # torch leaves it unannotated


def expr_of(value: int | torch.SymInt) -> sympy.Expr:
    """The raw (unsimplified) sympy expression of a size, stride or offset."""
    if isinstance(value, int):
        return sympy.Integer(value)
    if nested_int_id(value) is not None:
        return cast(sympy.Expr, symint_expr(value))
    return cast(sympy.Expr, value.node.expr)


def add_divisibility_guard(value: int | torch.SymInt, divisor: int) -> None:
    """Record `value % divisor == 0` in its ShapeEnv (as a guard, which also marks it divisible)."""
    if isinstance(value, torch.SymInt):
        holds = bool(value % divisor == 0)
        assert holds, f"BUG: divisibility by {divisor} is checked on the input before it is installed"


def set_to_tensor(x: torch.Tensor, src: torch.Tensor) -> None:
    """`x.set_(src)`: x takes src's storage, offset, size and stride (torch's stubs list only the storage overloads)."""
    x.set_(src)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)


def renew_grad_accumulator(x: torch.Tensor) -> None:
    """On a leaf that requires grad, what the program's `x.set_(x)` under no_grad did to autograd: a new gradient
    accumulator (Note [Gradient Accumulators Of Leaves]); the version counter is left as it was."""
    if not x.requires_grad or grad_fn_raises(x) or not x.is_leaf:
        # a multi-output view (x.unbind(0)[3]) the program's x.set_(x) wrote: its grad_fn raises when read, in eager
        # as here, so it has one and is no leaf
        return
    version = get_version(x)
    with torch.no_grad():
        set_to_self(x)
    set_version(x, version)


def set_to_self(x: torch.Tensor) -> None:
    """`x.set_(x)`, repeated by the runtime for its autograd effect only (a raising grad_fn, a new accumulator): x
    keeps the metadata it has. A wrapper subclass's set_ gives it its first inner tensor's, which a `.data =` the
    program made after its own set_ left unlike the wrapper's (`x.set_(x); x.data = x.reshape(12, -1)`);
    the epilogue has given the wrapper eager's metadata already."""
    size, stride, offset = list(x.shape), list(x.stride()), int(x.storage_offset())
    set_to_tensor(x, x)
    if list(x.shape) != size or list(x.stride()) != stride or x.storage_offset() != offset:
        assign_wrapper_metadata(x, size, stride, offset)


def wrapper_grad_accumulator(t: torch.Tensor) -> GradientEdge:
    """The gradient accumulator of wrapper subclass leaf `t` (made now, at t's own metadata, if none is alive),
    without dispatching to the subclass: autograd records an alias of the wrapper itself, whose edge is the
    accumulator (torch's get_gradient_edge would run the subclass's view op on its inner tensors)."""
    with torch.enable_grad(), torch.utils._mode_utils.no_dispatch():
        meta_in_tls = torch._C._meta_in_tls_dispatch_include()
        torch._C._set_meta_in_tls_dispatch_include(True)
        try:
            grad_fn = torch.ops.aten.alias.default(t).grad_fn
        finally:
            torch._C._set_meta_in_tls_dispatch_include(meta_in_tls)
    assert grad_fn is not None, "BUG: an alias of a leaf that requires grad records no grad_fn"
    node, output_nr = grad_fn.next_functions[0]
    return GradientEdge(node, output_nr)


def set_wrapper_metadata(
    t: torch.Tensor, size: Sequence[int], stride: Sequence[int], offset: int | torch.SymInt
) -> None:
    """Change a wrapper subclass's own size/stride/offset without dispatching to it (its inner tensors are done).
    Larger than its own storage, the storage grows in place (as eager's resize_ or set_ of a wrapper does)."""
    needed = (
        0 if any(s == 0 for s in size) else offset + 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True))
    )
    # An inference tensor's own metadata changes only inside inference_mode (eager's `.data =` of one made there
    # changes it anywhere: it sets no version counter and records nothing).
    inference = torch.inference_mode() if t.is_inference() else contextlib.nullcontext()
    with torch.utils._mode_utils.no_dispatch(), inference:
        meta_in_tls = torch._C._meta_in_tls_dispatch_include()
        torch._C._set_meta_in_tls_dispatch_include(True)
        try:
            if needed * t.element_size() > storage_nbytes(t.untyped_storage()):  # (the trace's own: unchecked)
                version = get_version(t)
                t.set_(t.untyped_storage(), offset, list(size), list(stride))
                set_version(t, version)  # the callers settle version counters
            else:
                torch.ops.aten.as_strided_.default(t, list(size), list(stride), offset)
        finally:
            torch._C._set_meta_in_tls_dispatch_include(meta_in_tls)


def assign_wrapper_metadata(t: torch.Tensor, size: Sequence[int], stride: Sequence[int], offset: int) -> None:
    """`t.data = shell`, shell an empty wrapper of t's class with this size/stride/offset: t's own metadata change as
    eager's `.data =` changes them (no autograd record, no version bump, inner tensors untouched). The shell is on t's
    own storage where that is large enough for them, else on a new one (the caller gives t its final storage)."""
    shell = torch.Tensor._make_wrapper_subclass(  # private API: a wrapper with no data and no inner tensors
        type(t), list(size), strides=list(stride), storage_offset=offset, dtype=t.dtype, device=t.device
    )
    extent = 0 if 0 in size else offset + 1 + sum((n - 1) * st for n, st in zip(size, stride, strict=True))
    if storage_nbytes(t.untyped_storage()) >= extent * t.element_size():
        torch._functionalize_unsafe_set(shell, t)  # changes the storage only
    with torch.no_grad():
        t.data = shell


def rebind_functional(
    x: torch.Tensor,
    src: torch.Tensor,
    meta: tuple[list[int], list[int], int | torch.SymInt] | None,
    wrapper_offset: int | torch.SymInt | None = None,
    *,
    own_bits: bool = True,
) -> None:
    """Make FunctionalTensor `x` an alias of `src` (or of `src`'s storage with `meta`), as eager's set_ does.

    See Note [Storage Swaps By Rebinding]. A FunctionalTensorMode must be active (below the caller).
    `wrapper_offset`: the offset x's wrapper reports, where meta's is in functionalization's frame and not eager's
    (Note [as_strided On Inputs]). `own_bits`: x reads the storage through its own conjugate and negative bits, as
    eager's set_() (and resize_(), as_strided_()) leaves it, not src's (`.data =` takes src's: False).
    """
    assert isinstance(x, FunctionalTensor) and isinstance(src, FunctionalTensor), "BUG: rebinding needs functionals"
    if meta is None:
        new = torch.ops.aten.alias.default(src)
    else:
        new = torch.ops.aten.as_strided.default(src, meta[0], meta[1], meta[2])
    if own_bits:  # (x.conj().set_(t) reads t's storage conjugated)
        new = with_bits_of(new, x)
    else:  # (the wrapper too: `x.data = y.conj()` leaves x reporting is_conj(), as the program may ask)
        torch._C._set_conj(x, src.is_conj())
        torch._C._set_neg(x, src.is_neg())
    assert isinstance(new, FunctionalTensor)
    x.elem = new.elem
    # The wrapper carries the user-visible layout: src's own (functionalization may have re-laid-out its value
    # after a write), or the one set_(storage, offset, size, stride) asked for.
    if meta is None:
        meta = (list(src.size()), list(src.stride()), int(src.storage_offset()))
    offset = meta[2] if wrapper_offset is None else wrapper_offset
    if x.dtype != src.dtype:  # a `.data =` of another dtype: Note [Storage Swaps By Rebinding]
        torch._functionalize_unsafe_set(x, _scratch(x))
        set_wrapper_metadata(x, meta[0], meta[1], offset)
        torch._functionalize_unsafe_set(x, new)  # (the storage only: x keeps its layout)
        return
    torch._functionalize_unsafe_set(x, new)
    set_wrapper_metadata(x, meta[0], meta[1], offset)


def _scratch(x: torch.Tensor) -> torch.Tensor:
    with no_dispatch():
        return torch.empty(0, dtype=x.dtype, device=x.device)


@contextlib.contextmanager
def wrapper_on_scratch(x: torch.Tensor) -> Iterator[None]:
    """FunctionalTensor `x`'s wrapper on a scratch storage that holds its layout while the block runs (an in-place
    view op that sets its metadata), and back on its own storage after, with the layout it then has (Note [Storage
    Swaps By Rebinding])."""
    holder = _scratch(x)
    torch._functionalize_unsafe_set(holder, x)  # (the storage only)
    torch._functionalize_unsafe_set(x, _scratch(x))
    set_wrapper_metadata(x, list(x.shape), list(x.stride()), x.storage_offset())  # (grows the scratch)
    try:
        yield
    finally:
        torch._functionalize_unsafe_set(x, holder)


def no_dispatch() -> contextlib.AbstractContextManager[None]:
    """Run ops below every Python mode (functionalization, fake tensors, ours): for meta-tensor arithmetic on
    layouts inside a functional run."""
    return cast("contextlib.AbstractContextManager[None]", torch.utils._mode_utils.no_dispatch())


def below_autograd() -> contextlib.AbstractContextManager[None]:
    """Run ops below the autograd kernels (their checks and their recording skipped): for an op whose autograd check
    sees a requires_grad flag the run's tensor has and eager's does not (Note [resize_ And requires_grad])."""
    return cast("contextlib.AbstractContextManager[None]", torch._C._AutoDispatchBelowAutograd())


def no_torch_function() -> contextlib.AbstractContextManager[None]:
    """Run Python code inside a dispatch mode without the torch-function modes seeing its tensor accesses: a check
    that raises there would otherwise raise inside a property getter called from C++ (a SystemError)."""
    return torch._C.DisableTorchFunction()


# ---------------------------------------------------------------------------------------------------------------
# Operators of our own (torch.library)
# ---------------------------------------------------------------------------------------------------------------

_LIBRARIES: dict[str, torch.library.Library] = {}  # (kept alive: an op lives as long as its library object)


def define_op(
    namespace: str, schema: str, kernel: Callable[..., object], *, keys: Sequence[str], tags: Sequence[torch.Tag]
) -> torch._ops.OpOverload:
    """Define `namespace::<schema>` (`name(arguments) -> returns`, one overload) with `kernel` for each dispatch key
    of `keys`; its default overload."""
    library = _LIBRARIES.get(namespace)
    if library is None:
        library = _LIBRARIES[namespace] = torch.library.Library(namespace, "FRAGMENT")  # type: ignore[no-untyped-call]  # untyped in torch
    name = schema.split("(", 1)[0]
    library.define(schema, tags=tuple(tags))  # type: ignore[no-untyped-call]  # untyped in torch
    for key in keys:
        library.impl(name, kernel, key)  # type: ignore[no-untyped-call]  # untyped in torch
    op = getattr(getattr(torch.ops, namespace), name).default
    assert isinstance(op, torch._ops.OpOverload), "BUG: torch.ops returns an OpOverload"
    return op


@functools.cache  # (one registry lookup an op; an op's effect is registered when torch loads it)
def has_ordered_effect(func: object) -> bool:
    """Does torch register `func` (an OpOverload) as having a side effect, which functionalization wraps in the
    `with_effects` higher-order op (Note [What A Backend Receives And Returns], "Ordered effects")?"""
    from torch._higher_order_ops.effects import has_effects

    return isinstance(func, torch._ops.OpOverload) and bool(has_effects(func))


def keep_in_graphs(op: torch._ops.OpOverload) -> None:
    """Make fx's dead-code elimination (which inductor runs) keep every node of `op`, read or not."""
    torch.fx.node.has_side_effect(op)


# ---------------------------------------------------------------------------------------------------------------
# Opaque objects (torch._library.opaque_object): non-tensor inner attributes of a subclass (DTensor's device_mesh)
# ---------------------------------------------------------------------------------------------------------------


def opaque_kind(value: object) -> str | None:
    """ "reference" or "value" for an instance of a registered opaque type (subclasses too), else None."""
    from torch._library import opaque_object

    cls = type(value)
    if not opaque_object.is_opaque_type(cls):
        return None
    return "reference" if opaque_object.is_opaque_reference_type(cls) else "value"


def opaque_guard_values(value: object) -> tuple[object, ...] | None:
    """What the opaque type's registered `guard_fn` says identifies `value` (None when it registered none)."""
    from torch._library import opaque_object

    info = opaque_object.get_opaque_obj_info(type(value))
    if info is None or info.guard_fn is None:
        return None
    return tuple(info.guard_fn(value))


def dispatches_in_cpp(cls: type) -> bool:
    """True for DTensor: torch 2.13 dispatches it in C++ (`dispatchDTensorOp`, github.com/pytorch/pytorch/issues/167051)
    when the dispatcher reaches its Python key; its Python `__torch_dispatch__` only re-calls the op, so calling that
    from a mode that is on the stack re-enters the mode forever. A mode lets such a class run by answering
    NotImplemented."""
    import sys

    api = sys.modules.get("torch.distributed.tensor._api")  # not imported: no DTensor can exist
    return api is not None and cls is getattr(api, "DTensor", None)


# ---------------------------------------------------------------------------------------------------------------
# Ambient mode stacks (Note [Ambient Modes])
# ---------------------------------------------------------------------------------------------------------------


def ambient_mode_stacks() -> tuple[tuple[object, ...], tuple[object, ...]]:
    """The user's modes on the stacks now, bottom first: (dispatch modes, torch-function modes). Infrastructure
    modes (fake tensors, functionalization, proxy tracing, subclassaot's own) are left out: not the caller's."""
    if torch._C._len_torch_dispatch_stack() == 0 and torch._C._len_torch_function_stack() == 0:
        return (), ()
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    dispatch = tuple(
        m
        for m in _get_current_dispatch_mode_stack()
        if not m.is_infra_mode() and not m.ignore_compile_internals() and not _pipeline_mode(m)
    )
    stack = torch.overrides._get_current_function_mode_stack()  # type: ignore[no-untyped-call]  # untyped in torch
    function = tuple(m for m in stack if not _pipeline_mode(m))
    return dispatch, function


def innermost_dispatch_mode() -> object:
    """The dispatch mode on top of the stack now (None: none). Inside a mode's own `__torch_dispatch__` it is the one
    below: code a mode runs inside an op tells itself apart from the program's calls so."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    return _get_current_dispatch_mode()


def _pipeline_mode(mode: object) -> bool:
    """One of subclassaot's own modes (a compiled function called while another is traced sees them)."""
    return type(mode).__module__.startswith("subclassaot.")


@contextlib.contextmanager
def function_modes_off() -> Iterator[tuple[object, ...]]:
    """Pop every torch-function mode for the duration (yielding them, bottom first) and push them back after."""
    popped: list[object] = []
    while torch._C._len_torch_function_stack() > 0:
        popped.append(torch._C._pop_torch_function_stack())
    try:
        yield tuple(reversed(popped))
    finally:
        for mode in reversed(popped):
            torch._C._push_on_torch_function_stack(mode)


@contextlib.contextmanager
def function_modes_on(modes: Sequence[object]) -> Iterator[None]:
    """Push `modes` (bottom first) on the torch-function stack for the duration."""
    for mode in modes:
        torch._C._push_on_torch_function_stack(mode)
    try:
        yield
    finally:
        for _ in modes:
            torch._C._pop_torch_function_stack()


def outside_current_modes() -> contextlib.AbstractContextManager[object]:
    """Every dispatch mode on the stack (a trace's fake and functional modes) set aside, restored after: for a run
    on fakes of its own made while a trace is in progress, which records nothing of it."""
    from torch.utils._python_dispatch import _disable_current_modes

    return cast("contextlib.AbstractContextManager[object]", _disable_current_modes())


def clone_keeps_structure(t: torch.Tensor) -> bool:
    """Does `t.clone()` return `t`'s own type with `t`'s flatten context, at every level of a nested subclass (a
    DTensor's Partial placement becomes Replicate in its clone; torch's ConstantExtraMetadataTensor gives the inner
    wrapper of a nested one its default constant): the program must see the input as given)? Asked outside every mode
    (a fake `t` runs in its own fake mode), so a trace in progress records nothing. A clone that raises, or a context
    that cannot be compared, counts as keeping the type (the caller's usual path)."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), torch.no_grad():
        try:
            return _same_structure(t.clone(), t)  # (no detach() first: it too may rebuild an inner wrapper)
        except Exception:  # any failure: leave the decision to the usual path, which reports it
            return True


def _same_structure(clone: object, given: object) -> bool:
    """`clone` has `given`'s type and flatten context, and so have its inner tensors, recursively."""
    if type(clone) is not type(given):
        return False
    flatten = getattr(type(given), "__tensor_flatten__", None)
    if flatten is None:
        return True
    if isinstance(clone, torch.Tensor) and isinstance(given, torch.Tensor) and clone.is_leaf:
        clone.requires_grad_(given.requires_grad)  # (a clone made under no_grad: a context naming the flag, NJT's)
    attrs, ctx = flatten(given)
    clone_attrs, clone_ctx = flatten(clone)
    if list(clone_attrs) != list(attrs) or not bool(clone_ctx == ctx):
        return False
    return all(_same_structure(getattr(clone, a), getattr(given, a)) for a in attrs)


# ---------------------------------------------------------------------------------------------------------------
# Ambient state (python_state)
# ---------------------------------------------------------------------------------------------------------------


# The C functions behind torch's public getters, bound directly: the per-call guards skip a Python frame each.
any_autocast_enabled: Callable[[], bool] = torch._C._is_any_autocast_enabled
deterministic_algorithms: Callable[[], bool] = torch._C._get_deterministic_algorithms
deterministic_warn_only: Callable[[], bool] = torch._C._get_deterministic_algorithms_warn_only
float32_matmul_precision: Callable[[], str] = torch._C._get_float32_matmul_precision
# view replay mode (`torch.autograd._force_original_view_tracking(True)`): a view taken under it keeps its view ops, and
# autograd regenerates its history after a write by them (SelectBackward0), not by as_strided (AsStridedBackward0)
view_replay_enabled: Callable[[], bool] = torch._C._is_view_replay_enabled


# The fields of Dynamo's GlobalStateGuard snapshot that the ambient check reads one by one: grad mode, default dtype,
# deterministic algorithms and their warn-only flag, and autocast's per-device flags (its devices include every device
# `_is_any_autocast_enabled` reads: tests/pipeline/test_python_state_guards.py). Its JSON names them; a torch whose
# snapshot lacks one gives no fields, and the guard is not used.
_GLOBAL_STATE_FIELDS = ("grad_mode", "default_dtype", "deterministic_algorithms", "deterministic_algorithms_warn_only")


def global_state_check() -> tuple[Callable[[], bool], tuple[object, ...]] | None:
    """A snapshot of the thread's global torch state as Dynamo guards it, in one C call: its `check` (True while the
    state is as snapshotted; it also compares the thread count, torch-function enablement, autocast's cache flag and
    TF32 flags) and the fields of it that the ambient check reads one by one (`_GLOBAL_STATE_FIELDS`, then whether any
    autocast flag is on); None where this torch's snapshot does not name them all."""
    try:
        guard = GlobalStateGuard()
        state = json.loads(cast(str, guard.__getstate__()))
        fields = tuple(state[name] for name in _GLOBAL_STATE_FIELDS)
        autocast = bool(any(state["autocast_state"]["enabled"]))
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError):
        return None
    return guard.check, (*fields, autocast)


# ---------------------------------------------------------------------------------------------------------------
# ctx.mark_dirty of a custom autograd.Function (Note [Custom Functions])
# ---------------------------------------------------------------------------------------------------------------

# A view marked dirty takes the Function's node as its grad_fn, but its base then holds that node inside a CopySlices
# node, out of reach, and the functionalized trace regenerates the view's own grad_fn from its base: what the
# program marked is only seen at the call. `FunctionCtx.mark_dirty` is wrapped once, for the process, as
# `UntypedStorage.resize_` is below; the wrapper tells this thread's listener (set while a program runs under the
# pipeline) the Function's class, the tensors marked, and whether the apply records a node: only then does the mark
# rebase their history (an apply under no_grad, or on no input that requires grad, leaves it as it was and returns a
# detach() of a marked input that requires grad). The ctx is that node; autograd gives it its edges, one per tensor
# input, before the forward runs, and none where the apply records nothing.
_mark_dirty_notes = threading.local()
_torch_mark_dirty = torch.autograd.function.FunctionCtx.mark_dirty


def _noted_mark_dirty(self: torch.autograd.function.FunctionCtx, *args: torch.Tensor) -> None:
    note = getattr(_mark_dirty_notes, "note", None)
    if note is not None:
        edges = getattr(self, "next_functions", ())  # (a ctx that is no node: a FunctionCtx a test made itself)
        note(getattr(self, "_forward_cls", type(self)), args, bool(edges))
    _torch_mark_dirty(self, *args)


@contextlib.contextmanager
def marks_dirty_noted(note: Callable[[type, tuple[torch.Tensor, ...], bool], None]) -> Iterator[None]:
    """Call `note(function_class, tensors, recorded)` at every `ctx.mark_dirty(*tensors)` this thread runs inside
    the block; `recorded`: the Function's apply records a node, which the marked tensors take as their grad_fn."""
    if torch.autograd.function.FunctionCtx.mark_dirty is not _noted_mark_dirty:
        torch.autograd.function.FunctionCtx.mark_dirty = _noted_mark_dirty  # type: ignore[method-assign]  # see above
    with _thread_note(_mark_dirty_notes, note):
        yield


@contextlib.contextmanager
def _thread_note(local: threading.local, note: object) -> Iterator[None]:
    """`local.note` is `note` inside the block, on this thread (the listener a patched method calls); as before
    after it (blocks nest)."""
    before = getattr(local, "note", None)
    local.note = note
    try:
        yield
    finally:
        local.note = before


# A custom Function's apply dispatches nothing itself (its forward's ops run with grad off), so no mode sees that it
# read its inputs with grad on, which is where eager makes a leaf's gradient accumulator (Note [Leaves Laid Out Anew
# Under no_grad]). `Function.apply` is wrapped once, for the process, the same way. The listener may hand back a
# function of the apply's result that the apply returns instead (Note [Custom Functions]: an input that requires grad
# in the run alone).
_function_apply_notes = threading.local()
_torch_function_apply = torch.autograd.Function.__dict__["apply"].__func__


def torch_method_patches() -> tuple[object, ...]:
    """The code objects of the process-wide wrappers of torch's own methods (`Function.apply`,
    `UntypedStorage.resize_`, `Module._maybe_warn_non_full_backward_hook`): pass-throughs outside a compile, so a frame of theirs on a stack is torch's method,
    not the pipeline."""
    return (
        _noted_function_apply.__code__,
        _handled_storage_resize.__code__,
        _noted_tensor_set.__code__,
        _noted_warn_non_full.__code__,
        _noted_saved_hooks_enter.__code__,
    )


# what a note of `function_applies_noted` returns: the arguments the apply takes, and the function of its result
FunctionApplyNoted = tuple[tuple[object, ...], dict[str, object], Callable[[object], object] | None]


def _noted_function_apply(cls: type[torch.autograd.Function], *args: object, **kwargs: object) -> object:
    note = getattr(_function_apply_notes, "note", None)
    noted = note(cls, args, kwargs) if note is not None else None
    if noted is None:
        return _torch_function_apply(cls, *args, **kwargs)
    args, kwargs, after = noted
    out = _torch_function_apply(cls, *args, **kwargs)
    return out if after is None else after(out)


def is_compiler_checkpoint_region(fn: object) -> bool:
    """Is `fn` the region that torch.compile's activation-checkpoint higher-order ops (torch._higher_order_ops.wrap)
    hand to torch.utils.checkpoint when their graph runs? They always pass preserve_rng_state=False, whatever the
    user passed: the compiler, not checkpoint, keeps the recomputation's random draws equal to the forward's."""
    if isinstance(getattr(fn, "__self__", None), torch.fx.Interpreter):
        return True
    return getattr(fn, "__module__", None) == "torch._higher_order_ops.wrap"


def module_with_backward_hooks_applying(cls: type) -> torch.nn.Module | None:
    """Where `cls` is the custom Function through which torch.nn wires a module's full backward hooks and backward
    pre-hooks into autograd (`BackwardHookFunction`, applied to the module's inputs and outputs by
    `torch.utils.hooks.BackwardHook`), the module whose hooks those are, read from that BackwardHook on the caller's
    stack; else None."""
    if cls is not torch.nn.modules._functions.BackwardHookFunction:
        return None
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, torch.utils.hooks.BackwardHook):
            return cast(torch.nn.Module, owner.module)
        frame = frame.f_back
    raise AssertionError("BUG: a BackwardHookFunction applied outside a module's BackwardHook")


# A module's non-full backward hooks (`register_backward_hook`, and the global `register_module_backward_hook`) go
# onto the grad_fn of its first output tensor (`grad_fn.register_hook`, a C method no mode sees) where that output has
# one; `Module._call_impl` then calls `_maybe_warn_non_full_backward_hook`, which is wrapped once, for the process, the
# same way, so that this thread's listener learns which module's hooks eager just wired into the program's graph.
_non_full_hook_notes = threading.local()
_torch_warn_non_full = torch.nn.Module._maybe_warn_non_full_backward_hook


def _noted_warn_non_full(self: torch.nn.Module, inputs: object, result: object, grad_fn: object) -> None:
    note = getattr(_non_full_hook_notes, "note", None)
    if note is not None:
        note(self)
    _torch_warn_non_full(self, inputs, result, grad_fn)


@contextlib.contextmanager
def non_full_backward_hooks_noted(note: Callable[[torch.nn.Module], None]) -> Iterator[None]:
    """Call `note(module)` wherever a module call this thread runs inside the block registers the module's non-full
    backward hooks on its output's grad_fn."""
    if torch.nn.Module._maybe_warn_non_full_backward_hook is not _noted_warn_non_full:
        torch.nn.Module._maybe_warn_non_full_backward_hook = _noted_warn_non_full  # type: ignore[method-assign]  # see above
    with _thread_note(_non_full_hook_notes, note):
        yield


# Saved-tensor hooks (`torch.autograd.graph.saved_tensors_hooks`) the program enters itself: a Python context manager
# whose `__enter__` pushes them onto autograd's stack, where no mode sees them; it is wrapped once, for the process,
# the same way, so that this thread's listener learns of every pair entered while the program runs.
_saved_hooks_notes = threading.local()
_torch_saved_hooks_enter = torch.autograd.graph.saved_tensors_hooks.__enter__


def _noted_saved_hooks_enter(self: torch.autograd.graph.saved_tensors_hooks) -> None:
    note = getattr(_saved_hooks_notes, "note", None)
    enabled = torch._C._autograd._saved_tensors_hooks_is_enabled()  # type: ignore[attr-defined]  # not in torch's stub
    if note is not None and enabled:  # (else torch's enter raises)
        note(self)
    _torch_saved_hooks_enter(self)


@contextlib.contextmanager
def saved_tensors_hooks_noted(note: Callable[[torch.autograd.graph.saved_tensors_hooks], None]) -> Iterator[None]:
    """Call `note(hooks)` wherever this thread enters a `saved_tensors_hooks` context (or a subclass's: save_on_cpu,
    checkpoint's) inside the block, where saved-tensor hooks are not disabled (entering them then raises)."""
    if torch.autograd.graph.saved_tensors_hooks.__enter__ is not _noted_saved_hooks_enter:
        torch.autograd.graph.saved_tensors_hooks.__enter__ = _noted_saved_hooks_enter  # type: ignore[method-assign]  # see above
    with _thread_note(_saved_hooks_notes, note):
        yield


@contextlib.contextmanager
def function_applies_noted(
    note: Callable[[type, tuple[object, ...], dict[str, object]], FunctionApplyNoted | None],
) -> Iterator[None]:
    """Call `note(cls, args, kwargs)` before every custom `cls.apply(*args, **kwargs)` this thread runs inside; where
    it returns `(args, kwargs, after)`, the apply takes those arguments instead and, `after` given, returns that
    function of its result."""
    if torch.autograd.Function.__dict__["apply"].__func__ is not _noted_function_apply:
        torch.autograd.Function.apply = classmethod(_noted_function_apply)  # type: ignore[method-assign,assignment,arg-type]  # see above
    with _thread_note(_function_apply_notes, note):
        yield


# ---------------------------------------------------------------------------------------------------------------
# Storage resize_ (Note [Storage Swaps By Rebinding])
# ---------------------------------------------------------------------------------------------------------------

# `UntypedStorage.resize_` is a C method that dispatches nothing, so no mode sees it. It is wrapped once, for the
# process: the wrapper hands the call to this thread's handler (set while a program runs under the pipeline), which
# either takes it (it returns True: the resize of a traced tensor's storage is a fact of the run, not a change of the
# functional tensor's storage, which has no bytes to resize) or leaves it to torch's method.
_storage_resize_handlers = threading.local()
_torch_storage_resize = torch.UntypedStorage.resize_


def _handled_storage_resize(self: torch.UntypedStorage, size: int) -> object:
    handle = getattr(_storage_resize_handlers, "handle", None)
    if handle is not None and handle(self, size):
        return self
    return _torch_storage_resize(self, size)


# `UntypedStorage.nbytes` likewise: the handler's `check_read` runs first (a storage the run resized answers the byte
# count it had before: Note [Storage Swaps By Rebinding]).
_torch_storage_nbytes = torch.UntypedStorage.nbytes


def _checked_storage_nbytes(self: torch.UntypedStorage) -> int:
    check = getattr(_storage_resize_handlers, "check_read", None)
    if check is not None:
        check(self)
    return _torch_storage_nbytes(self)


def storage_nbytes(storage: torch.UntypedStorage) -> int:
    """`storage.nbytes()`, unchecked."""
    return _torch_storage_nbytes(storage)


@contextlib.contextmanager
def storage_resizes_handled(
    handle: Callable[[torch.UntypedStorage, object], bool], check_read: Callable[[torch.UntypedStorage], None]
) -> Iterator[None]:
    """Hand every `UntypedStorage.resize_(size)` this thread calls inside the block to `handle(storage, size)`;
    torch's method runs where it returns False. Run `check_read(storage)` before every `UntypedStorage.nbytes()`."""
    if torch.UntypedStorage.resize_ is not _handled_storage_resize:
        torch.UntypedStorage.resize_ = _handled_storage_resize  # type: ignore[method-assign,assignment]  # see the comment above
        torch.UntypedStorage.nbytes = _checked_storage_nbytes  # type: ignore[method-assign,assignment]  # see above
    before = getattr(_storage_resize_handlers, "handle", None), getattr(_storage_resize_handlers, "check_read", None)
    _storage_resize_handlers.handle, _storage_resize_handlers.check_read = handle, check_read
    try:
        yield
    finally:
        _storage_resize_handlers.handle, _storage_resize_handlers.check_read = before


# ---------------------------------------------------------------------------------------------------------------
# Tensor.set_ (Note [Views That Raise After A Bump])
# ---------------------------------------------------------------------------------------------------------------

# `Tensor.set_` reaches no torch-function mode, and its autograd kernel reads the history of its tensors (where either
# requires grad) before it dispatches: no mode of the pipeline sees the call before that read. Unlike the wrappers
# above, this one is torch.Tensor's own attribute only while a block of this thread or another is open (a count of
# them), deleted after the last: Dynamo and FX graphs name torch's method, which the pipeline compares targets with.
# A subclass's __torch_function__, which torch hands `torch.Tensor.set_`, is given the wrapper inside the block.
_tensor_set_notes = threading.local()
_tensor_set_lock = threading.Lock()
_tensor_set_blocks = 0
_torch_tensor_set: Callable[..., object] = torch._C.TensorBase.set_


def _noted_tensor_set(self: torch.Tensor, *args: object, **kwargs: object) -> object:
    note = getattr(_tensor_set_notes, "note", None)
    if note is not None:
        note(self, args, kwargs)
    return _torch_tensor_set(self, *args, **kwargs)


_noted_tensor_set.__name__ = _noted_tensor_set.__qualname__ = "set_"


@contextlib.contextmanager
def tensor_sets_noted(note: Callable[[torch.Tensor, tuple[object, ...], dict[str, object]], None]) -> Iterator[None]:
    """Call `note(tensor, args, kwargs)` before every `tensor.set_(*args, **kwargs)` this thread calls inside the
    block (through torch.Tensor's method: not `torch._C.TensorBase.set_` named itself)."""
    global _tensor_set_blocks
    with _tensor_set_lock:
        if _tensor_set_blocks == 0:
            torch.Tensor.set_ = _noted_tensor_set  # type: ignore[assignment,method-assign]  # see the comment above
        _tensor_set_blocks += 1
    try:
        with _thread_note(_tensor_set_notes, note):
            yield
    finally:
        with _tensor_set_lock:
            _tensor_set_blocks -= 1
            if _tensor_set_blocks == 0:
                del torch.Tensor.set_


@contextlib.contextmanager
def compiling_session() -> Iterator[None]:
    """`torch.compiler.is_compiling()` is True inside, and Dynamo's frame hook is off (its stance `force_eager`):
    Note [Dynamo Captures, The Pipeline Compiles]."""
    import torch.compiler as compiler

    old = compiler._is_compiling_flag
    compiler._is_compiling_flag = True
    try:
        with compiler.set_stance("force_eager"):
            yield
    finally:
        compiler._is_compiling_flag = old


@functools.cache
def may_return_view(name: str, *, unknown: bool) -> bool:
    """May the torch function `name` (a method, a function or an operator dunder: `__rmul__` is `mul`'s) return a
    view of an argument: a view op (`t`, `reshape`, `contiguous`, indexing)? Not an `out=` overload's written
    result. `unknown`: the answer for a name no aten op has (`float`, `cuda`: they may return the tensor itself)."""
    op = name.strip("_") if name.startswith("__") else name
    if name.startswith("__") and op.startswith("r") and not hasattr(torch.ops.aten, op):
        op = op[1:]
    packet: Any = getattr(torch.ops.aten, op, None)
    if packet is None:
        return name in ("__getitem__", "view_as", "expand_as", "type_as", "reshape_as", "to", "type") or unknown
    returns = [r for o in packet.overloads() for r in getattr(packet, o)._schema.returns]
    return any(r.alias_info is not None and not r.alias_info.is_write for r in returns)
