"""The checker's base rules: the protocol, ctx, round trips, nesting, fakification, aliasing, copies, autograd.

Purpose: each rule is one `Rule` whose check takes the factory and returns (PASS), or calls `fail` / `skip` with a
reason written for the subclass's author. See Note [Checker Rules And Whose Failure] in checker.py for how rules are run
and how to add one.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn, TypeAlias

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

from subclassaot.authoring.protocol import (
    LeafInfo,
    SubclassNode,
    check_ctx,
    flatten_subclass,
    is_traceable_subclass,
    unflatten_subclass,
)
from subclassaot.errors import ProtocolError
from subclassaot.torch_internals import (
    differentiable_dtype,
    is_nested_int,
    nested_coeff,
    nested_int,
    new_fake_mode,
    symbolic_nested_int,
)

Factory: TypeAlias = Callable[[], torch.Tensor]
aten = torch.ops.aten


class _RuleEnd(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class RuleFailed(_RuleEnd):
    pass


class RuleSkipped(_RuleEnd):
    pass


class CheckerError(_RuleEnd):
    """The checker's own code failed on this class: no verdict about the class (Note [Checker Rules And Whose
    Failure])."""


def fail(reason: str) -> NoReturn:
    """End the running rule with FAIL; `reason` says what was expected, what was got, and the fix."""
    raise RuleFailed(reason)


def skip(reason: str) -> NoReturn:
    """End the running rule with SKIP; `reason` says why the rule does not apply to this class."""
    raise RuleSkipped(reason)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One conformance rule: `check(factory)` returns to pass, or calls `fail` / `skip`."""

    name: str
    description: str
    check: Callable[[Factory], None]


def make_instance(factory: Factory) -> torch.Tensor:
    x = factory()
    if not is_traceable_subclass(x):
        skip(f"the factory gave a {type(x).__name__}, which has no flatten protocol (see rule 'protocol')")
    return x


def _derive(factory: Factory, op_name: str, op: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """Apply `op` to a fresh instance; an op the class does not implement SKIPs the rule, naming the op."""
    x = make_instance(factory)
    try:
        return op(x)
    except _RuleEnd:
        raise
    except (
        Exception
    ) as e:  # whatever the class raises for an op it does not support: See Note [Checker Rules And Whose Failure]
        skip(f"{type(x).__name__} does not support {op_name} ({error_line(e)}); support it to have this rule checked")


def error_line(e: BaseException) -> str:
    """`Type: first line of the message`."""
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def dims_text(dims: tuple[int | torch.SymInt, ...] | torch.Size) -> tuple[int | str, ...]:
    """Sizes or strides as compared by the checker: a nested int by structure, `c*j` (Note [Checker Rules And Whose
    Failure])."""
    out: list[int | str] = []
    for d in dims:
        coeff = nested_coeff(d)
        out.append(int(d) if coeff is None else ("j" if coeff == 1 else f"{coeff}*j"))
    return tuple(out)


def _leaves(x: torch.Tensor, path: str = "x") -> list[torch.Tensor]:
    if not is_traceable_subclass(x):
        return [x]
    try:
        return flatten_subclass(x, path)[1]
    except ProtocolError as e:
        fail(str(e))


def _same_values(x: torch.Tensor, y: torch.Tensor) -> bool:
    xs, ys = _leaves(x), _leaves(y)
    return len(xs) == len(ys) and all(
        a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(_comparable(a), _comparable(b)))
        for a, b in zip(xs, ys, strict=True)
    )


def _comparable(t: torch.Tensor) -> torch.Tensor:
    # torch.equal is not implemented for float8 on the CPU: compare their bits (exact equality is what we want).
    if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz):
        return t.view(torch.uint8)
    return t


# -- protocol and ctx ------------------------------------------------------------------------------------------
def check_protocol(factory: Factory) -> None:
    x = factory()
    name = type(x).__name__
    if not is_traceable_subclass(x):
        fail(
            f"expected a tensor subclass with __tensor_flatten__ and __tensor_unflatten__, got {name}. Fix: define "
            "both dunders, or derive from subclassaot.WrapperTensor and declare inner_names / ctx_names"
        )
    try:  # inner attrs: tensors, or registered opaque reference objects (Note [The Flatten Protocol])
        flatten_subclass(x, "x")
    except ProtocolError as e:
        fail(str(e))


def check_ctx_rules(factory: Factory) -> None:
    x = make_instance(factory)
    node, _ = _flatten_or_fail(x)
    for sub in _nodes(node):
        try:
            check_ctx(sub.ctx, sub.path, sub.cls.__name__)
        except ProtocolError as e:
            fail(str(e))


def _flatten_or_fail(x: torch.Tensor) -> tuple[SubclassNode, list[torch.Tensor]]:
    try:
        return flatten_subclass(x, "x")
    except ProtocolError as e:
        fail(str(e))


def _nodes(node: SubclassNode) -> list[SubclassNode]:
    out = [node]
    for child in node.children:
        if isinstance(child, SubclassNode):
            out.extend(_nodes(child))
    return out


# -- round trips -----------------------------------------------------------------------------------------------
def _roundtrip(x: torch.Tensor, variant: str) -> None:
    node, leaves = _flatten_or_fail(x)
    try:
        y = unflatten_subclass(node, leaves, outer_size=tuple(x.size()), outer_stride=tuple(x.stride()))
    except ProtocolError as e:
        fail(
            f"rebuilding a {variant} instance (size {tuple(x.size())}, stride {x.stride()}) from its flattened "
            f"parts failed: {e}"
        )
    if not _same_values(x, y):
        fail(f"the {variant} instance rebuilt by __tensor_unflatten__ holds different inner tensors than the original")


def _transpose(x: torch.Tensor) -> torch.Tensor:
    if x.dim() < 2:
        skip(f"a {x.dim()}-d instance has no transpose to check; make the factory return a 2-d (or more) instance")
    return x.transpose(0, 1)


def _slice(x: torch.Tensor) -> torch.Tensor:
    if x.dim() < 1 or x.size(0) < 2:
        skip("the instance has no dim 0 of size >= 2 to slice; make the factory return a larger instance")
    return x[1:]


def _expand(x: torch.Tensor) -> torch.Tensor:
    return x.unsqueeze(0).expand(2, *x.shape)


_VARIANTS: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {
    "contiguous": ("(no op)", lambda x: x),
    "transposed": ("x.transpose(0, 1)", _transpose),
    "sliced": ("x[1:]", _slice),
    "expanded": ("x.unsqueeze(0).expand(2, ...)", _expand),
}


def _roundtrip_rule(variant: str) -> Rule:
    op_name, op = _VARIANTS[variant]

    def check(factory: Factory) -> None:
        _roundtrip(_derive(factory, op_name, op), variant)

    return Rule(
        name=f"roundtrip.{variant}",
        description=f"flatten -> unflatten of {op_name} gives back the same size, stride and inner tensors",
        check=check,
    )


def check_nested(factory: Factory) -> None:
    x = make_instance(factory)
    node, leaves = _flatten_or_fail(x)
    if not any(isinstance(child, SubclassNode) for child in node.children):
        skip("no inner tensor is itself a subclass; return a nested instance from a second factory to check it")
    for leaf, path in zip(leaves, node.leaf_paths(), strict=True):
        if is_traceable_subclass(leaf):
            fail(f"{path} is still a subclass after flattening; nested flatten must recurse to plain tensors")
    _roundtrip(x, "nested")


# -- fakification ----------------------------------------------------------------------------------------------
def _fake_context(t: torch.Tensor, dynamic: bool) -> StatelessSymbolicContext[..., object]:
    dim = DimDynamic.DYNAMIC if dynamic else DimDynamic.STATIC
    return StatelessSymbolicContext(dynamic_sizes=[dim] * t.dim())


def _fakify(node: SubclassNode, inner: list[torch.Tensor], mode: FakeTensorMode, dynamic: bool) -> torch.Tensor:
    """Rebuild `node` level by level from already-fake inner tensors, with (symbolic) outer size and stride; a nested
    int stays a nested int (it has no symbol: see Note [Nested Int Dims] in policies/plan.py)."""
    size, stride = _fake_outer(node, mode, dynamic)
    shallow = dataclasses.replace(
        node, children=tuple(LeafInfo(path=f"{node.path}.{a}") for a in node.attrs), num_leaves=len(node.attrs)
    )
    with mode:
        return unflatten_subclass(shallow, inner, outer_size=size, outer_stride=stride)


def _fake_outer(
    node: SubclassNode, mode: FakeTensorMode, dynamic: bool
) -> tuple[tuple[int | torch.SymInt, ...], tuple[int | torch.SymInt, ...]]:
    nested = [nested_coeff(d) is not None for d in node.outer_size]
    try:  # a plain stand-in for the symbols: the checker's own step (Note [Checker Rules And Whose Failure])
        plain = [d for d, n in zip(node.outer_size, nested, strict=True) if not n]
        proxy = torch.empty(tuple(int(d) for d in plain), dtype=torch.uint8)
        context = _fake_context(proxy, dynamic)
        if any(nested_coeff(d) is not None for d in node.outer_stride):
            # See Note [Nested Int Dims] (policies/plan.py): the dims making a nested stride's coefficient are static
            context = StatelessSymbolicContext(
                dynamic_sizes=[context.dynamic_sizes[0], *([DimDynamic.STATIC] * (proxy.dim() - 1))]
            )
        fake_proxy = mode.from_tensor(proxy, symbolic_context=context)
    except Exception as e:
        raise CheckerError(f"could not make a fake stand-in for outer size {node.outer_size}: {e!r}") from e
    symbols = iter(fake_proxy.shape)
    size = tuple(
        _same_nested(d, mode, dynamic) if n else next(symbols) for d, n in zip(node.outer_size, nested, strict=True)
    )
    if any(nested):  # strides: the class derives them from the nested int (-1: not checked, torch's convention)
        return size, tuple(-1 if nested_coeff(d) is not None else d for d in node.outer_stride)
    return size, tuple(fake_proxy.stride())


def _same_nested(d: int | torch.SymInt, mode: FakeTensorMode, dynamic: bool) -> int | torch.SymInt:
    """A nested int with the id and coefficient of `d`: plain for static sizes, torch's symbol for symbolic ones
    (it then multiplies symbolic strides, as under torch's own fakification)."""
    coeff = nested_coeff(d)
    if coeff is None or not isinstance(d, torch.SymInt):
        return d
    nested_id = int(d.node.nested_int())
    return symbolic_nested_int(mode, nested_id, coeff) if dynamic else nested_int(nested_id, coeff)


def _fakify_tree(node: SubclassNode, leaves: list[torch.Tensor], mode: FakeTensorMode, dynamic: bool) -> torch.Tensor:
    inner: list[torch.Tensor] = []
    start = 0
    for child in node.children:
        if isinstance(child, SubclassNode):
            inner.append(_fakify_tree(child, leaves[start : start + child.num_leaves], mode, dynamic))
            start += child.num_leaves
        else:
            inner.append(mode.from_tensor(leaves[start], symbolic_context=_fake_context(leaves[start], dynamic)))
            start += 1
    return _fakify(node, inner, mode, dynamic)


def _fakify_rule(dynamic: bool) -> Callable[[Factory], None]:
    kind = "symbolic" if dynamic else "static"

    def check(factory: Factory) -> None:
        x = make_instance(factory)
        node, leaves = _flatten_or_fail(x)
        shape_env = ShapeEnv()
        mode = new_fake_mode(shape_env)
        try:
            fake = _fakify_tree(node, leaves, mode, dynamic)
        except ProtocolError as e:
            if e.__cause__ is None or isinstance(e.__cause__, ProtocolError):
                fail(f"rebuilding from fake inner tensors with {kind} outer sizes broke the contract: {e}")
            _fail_unflatten_raised(e.__cause__, kind)
        except Exception as e:
            _fail_unflatten_raised(e, kind)
        if dynamic:
            _check_not_specialized(fake, shape_env)

    return check


def _fail_unflatten_raised(e: BaseException, kind: str) -> NoReturn:
    first_line = str(e).splitlines()[0] if str(e) else ""
    fail(
        f"__tensor_unflatten__ raised {type(e).__name__}: {first_line} when given FakeTensors and {kind} outer "
        "sizes. Fix: unflatten must not read tensor data (.item(), .tolist(), bool(t)) or turn sizes into ints"
    )


def _check_not_specialized(fake: torch.Tensor, shape_env: ShapeEnv) -> None:
    dims: tuple[int | torch.SymInt, ...] = tuple(fake.shape)
    nested_strides = any(is_nested_int(d) for d in fake.stride())
    for i, dim in enumerate(dims):
        if is_nested_int(dim) or (nested_strides and i > 0):
            continue  # a nested int, or a static feature dim beside one (Note [Nested Int Dims], policies/plan.py)
        expr = shape_env.simplify(dim.node.expr) if isinstance(dim, torch.SymInt) else None
        if expr is None or expr.is_number:
            fail(
                f"outer dim {i} was given as a symbol but came back as the constant {dim}: __tensor_unflatten__ "
                "specialized it (int(s), a comparison with a literal, a Python loop over a size). Fix: pass "
                "outer_size/outer_stride through to _make_wrapper_subclass unchanged"
            )


# -- views and in-place ops ------------------------------------------------------------------------------------
def check_views_alias(factory: Factory) -> None:
    x = make_instance(factory)
    v = _derive(lambda: x, "aten.view", lambda t: t.view(t.shape))
    if type(v) is not type(x):
        fail(f"x.view(x.shape) returned a {type(v).__name__}, expected a {type(x).__name__}")
    if v._base is not x:
        fail("x.view(x.shape)._base is not x: a view's _base must be its input (autograd's view tracking)")
    if v.untyped_storage()._cdata != x.untyped_storage()._cdata:
        fail(
            "x.view(x.shape) does not share x's storage, so AOT analysis cannot see the alias. Fix: return "
            "torch.utils._python_dispatch.return_and_correct_aliasing(func, args, kwargs, out) from "
            "__torch_dispatch__ (WrapperTensor does this for every op)"
        )


def check_inplace_mutates(factory: Factory) -> None:
    x = make_instance(factory)
    before = [leaf.clone() for leaf in _leaves(x)]
    # Autograd's in-place kernels return `self` whatever the subclass returned, so ask __torch_dispatch__ directly:
    # below autograd (make_fx, functionalization) its result is what the traced program sees.
    dispatch = type(x).__torch_dispatch__
    out = _derive(lambda: x, "aten.add_", lambda t: dispatch(aten.add_.Tensor, (type(t),), (t, 1), {}))
    if out is not x:
        fail(
            f"__torch_dispatch__(aten.add_.Tensor, (x, 1)) returned a new {type(out).__name__} object, expected x "
            "itself. Fix: return return_and_correct_aliasing(func, args, kwargs, out) from __torch_dispatch__"
        )
    after = _leaves(x)
    if all(bool(torch.equal(a, b)) for a, b in zip(before, after, strict=True)):
        fail("x.add_(1) left every inner tensor of x unchanged; an in-place op must write into x's inner tensors")


def _check_inplace_view(factory: Factory, op_name: str, op: Callable[[torch.Tensor], torch.Tensor]) -> None:
    x = make_instance(factory)
    size, stride = tuple(x.size()), tuple(x.stride())
    out = _derive(lambda: x, op_name, op)
    if out is not x:
        fail(f"x.{op_name}() returned a new object, expected x itself")
    if any(nested_coeff(d) is not None for d in (*size, *stride)):
        skip(f"x has nested int sizes {dims_text(size)}: the checker has no plain tensor to compute {op_name}'s result")
    reference = op(torch.empty_strided(size, stride, dtype=torch.uint8))
    got, expected = (tuple(x.shape), x.stride()), (tuple(reference.shape), reference.stride())
    if got != expected:
        fail(
            f"after x.{op_name}() the wrapper has (size, stride) {got}, a plain tensor would have {expected}. Fix: "
            "return return_and_correct_aliasing(...) from __torch_dispatch__; it replays inplace_view ops on the "
            "wrapper's own metadata"
        )


def check_t_(factory: Factory) -> None:
    x = factory()
    if x.dim() > 2:
        skip("t_ needs an instance with at most 2 dims")
    _check_inplace_view(factory, "t_", lambda t: t.t_())


def check_unsqueeze_(factory: Factory) -> None:
    _check_inplace_view(factory, "unsqueeze_", lambda t: t.unsqueeze_(0))


# -- copies ----------------------------------------------------------------------------------------------------
def _check_copy(x: torch.Tensor, what: str, op: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    try:
        y = op(x)
    except NotImplementedError as e:
        fail(f"{what} is not implemented ({e}); every subclass needs it (WrapperTensor provides it)")
    except Exception as e:
        fail(f"{what} raised {type(e).__name__}: {e}. Fix: derive from WrapperTensor or define it from flatten")
    if type(y) is not type(x) or dims_text(y.shape) != dims_text(x.shape) or y.dtype != x.dtype:
        fail(
            f"{what} gave {type(y).__name__}{dims_text(y.shape)} {y.dtype}, expected {type(x).__name__}"
            f"{dims_text(x.shape)} {x.dtype}"
        )
    if not _same_values(x, y):
        fail(f"{what} changed the values of the inner tensors; it must copy them exactly")
    return y


def check_detach(factory: Factory) -> None:
    _check_copy(make_instance(factory), "x.detach()", lambda t: t.detach())


def check_clone(factory: Factory) -> None:
    x = make_instance(factory)
    y = _check_copy(x, "x.clone()", lambda t: t.clone())
    pairs = zip(_leaves(x), _leaves(y), strict=True)
    if any(a.untyped_storage()._cdata == b.untyped_storage()._cdata for a, b in pairs):
        fail("x.clone() shares an inner tensor's storage with x; clone must copy every inner tensor")


def check_deepcopy(factory: Factory) -> None:
    _check_copy(make_instance(factory), "copy.deepcopy(x)", copy.deepcopy)


def check_pickle(factory: Factory) -> None:
    _check_copy(make_instance(factory), "pickle.loads(pickle.dumps(x))", lambda t: pickle.loads(pickle.dumps(t)))


# -- autograd --------------------------------------------------------------------------------------------------
def check_autograd(factory: Factory) -> None:
    x = make_instance(factory)
    if not differentiable_dtype(x.dtype):
        skip(f"dtype {x.dtype} cannot require grad")
    x = x.detach().requires_grad_(True)
    expected = _derive(x.detach, "aten.mul", lambda t: t * 2)
    try:
        torch.autograd.backward((x * x).sum())
    except NotImplementedError as e:
        skip(f"the class does not implement an op that (x * x).sum().backward() needs: {e}")
    grad = x.grad
    if grad is None:
        fail("x.grad is None after (x * x).sum().backward(); a wrapper with requires_grad=True is an autograd leaf")
    if type(grad) is not type(expected):
        # The gradient has the type the class's own arithmetic gives (x * 2): a wrapper for most classes, a plain
        # tensor for classes whose ops compute in high precision (an FP8 tensor's gradient is not quantized).
        fail(
            f"x.grad is a {type(grad).__name__}, expected a {type(expected).__name__} (what x * 2 gives for this "
            "class): autograd through the subclass loses its type"
        )
    if not _same_values(grad, expected):
        fail("the gradient of (x * x).sum() is not 2 * x (compared inner tensor by inner tensor)")


BASE_RULES: tuple[Rule, ...] = (
    Rule(name="protocol", description="both dunders exist; attrs name Tensor attributes", check=check_protocol),
    Rule(name="ctx", description="ctx: ==, deepcopy, no tensors/SymInts, deterministic pickle", check=check_ctx_rules),
    *(_roundtrip_rule(v) for v in _VARIANTS),
    Rule(name="nested", description="inner subclasses flatten and rebuild recursively", check=check_nested),
    Rule(name="fakify.static", description="rebuilds from fake inner tensors, static sizes", check=_fakify_rule(False)),
    Rule(name="fakify.symbolic", description="rebuilds with symbolic sizes, unspecialized", check=_fakify_rule(True)),
    Rule(name="views.alias", description="a view shares storage with its input, _base set", check=check_views_alias),
    Rule(name="inplace.mutates", description="add_ returns its input and changes it", check=check_inplace_mutates),
    Rule(name="inplace_view.t_", description="t_ leaves the wrapper's size/stride right", check=check_t_),
    Rule(name="inplace_view.unsqueeze_", description="unsqueeze_ updates the wrapper", check=check_unsqueeze_),
    Rule(name="detach", description="detach keeps type and values", check=check_detach),
    Rule(name="clone", description="clone copies every inner tensor", check=check_clone),
    Rule(name="deepcopy", description="copy.deepcopy round trip", check=check_deepcopy),
    Rule(name="pickle", description="pickle round trip", check=check_pickle),
    Rule(name="autograd", description="grad of sum(x * x) is 2 * x", check=check_autograd),
)
