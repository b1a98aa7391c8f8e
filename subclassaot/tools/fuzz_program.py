"""Fuzz programs as data: a frozen tree of inputs and ops, an interpreter that runs it, and a printer to Python source.

Input: a `Program` (built by `subclassaot.tools.fuzz`'s generator, or by hand in a test).
Output: `make_inputs(program)` (fresh inputs, aliasing rebuilt), `as_function(program)` (an interpreter closure the
pipeline can compile like any user function), `to_source(program)` (a `make_inputs()` and a `def f(...)` to paste
into a regression test).
Invariants: variables are named by ids that never change when a program is shrunk (an op's `out`, an input's
`var`); the printer renames them in order of appearance. The interpreter and the printed source do the same thing
(see subclassaot/tools/fuzz_ops.py).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from subclassaot.errors import tuple_text
from subclassaot.tools.fuzz_ops import OPS, OpName, Params

Grad = Literal["none", "leaf", "nonleaf"]  # nonleaf: `leaf.clone()`, so that in-place ops on it are legal
GradScope = Literal["no_grad", "enable_grad", "grad_off", "grad_on", "inference_mode"]  # a `with` around an op
_SCOPE_SOURCE: dict[GradScope, str] = {
    "no_grad": "torch.no_grad()",
    "enable_grad": "torch.enable_grad()",
    "grad_off": "torch.set_grad_enabled(False)",
    "grad_on": "torch.set_grad_enabled(True)",
    "inference_mode": "torch.inference_mode()",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewStep:
    """A view op applied to a base while building an input (inputs that are views of one base alias each other)."""

    name: OpName
    params: Params


@dataclass(frozen=True, slots=True, kw_only=True)
class BaseSpec:
    kind: str  # key into the input-kind registry: "plain" or "MODULE:FACTORY"
    shape: tuple[int, ...]
    grad: Grad
    freed: bool = False  # its storage is resized to 0 bytes before the call (FSDP2's sharded parameter); plain only


@dataclass(frozen=True, slots=True, kw_only=True)
class InputSpec:
    var: int  # the variable id the program uses for this input
    base: int  # index into Program.bases
    views: tuple[ViewStep, ...]  # applied to the base in order; () passes the base itself


@dataclass(frozen=True, slots=True, kw_only=True)
class Op:
    name: OpName
    src: int  # variable id the op applies to
    other: int | None = None  # second variable id (`x.copy_(y)`); None: the op's scalar params are used
    params: Params = ()
    outs: tuple[int, ...] = ()  # variable ids bound to the results, one per result; () for in-place ops, statements
    scopes: tuple[GradScope, ...] = ()  # the `with` blocks the op runs in, outermost first
    via_data: bool = False  # applied to `src.data`: a mutation hidden from autograd


@dataclass(frozen=True, slots=True, kw_only=True)
class Program:
    bases: tuple[BaseSpec, ...]  # len = number of distinct storages the inputs are made from
    inputs: tuple[InputSpec, ...]  # len = number of positional arguments, in argument order
    ops: tuple[Op, ...]  # in execution order
    outputs: tuple[int, ...]  # variable ids returned, in order (the function returns a tuple)
    grad_mode: bool  # whether the call runs with grad enabled (training) or under no_grad (inference)

    def size(self) -> int:
        """A measure that every shrinking step decreases."""
        flags = sum(len(op.scopes) + op.via_data for op in self.ops)
        flags += sum((b.grad != "none") + b.freed for b in self.bases)
        views = sum(len(i.views) for i in self.inputs)
        return 4 * len(self.ops) + 2 * len(self.inputs) + len(self.outputs) + views + flags + self.grad_mode


# ---------------------------------------------------------------------------------------------------------------
# Input kinds


@dataclass(frozen=True, slots=True, kw_only=True)
class InputKind:
    """How to build an input of some tensor type from a plain float tensor of the chosen shape."""

    key: str
    make: Callable[[torch.Tensor], torch.Tensor]
    source: Callable[[str], str]  # the Python expression of `make`, given the plain tensor's expression
    imports: tuple[str, ...]  # import lines that `source` needs
    fixed_shape: tuple[int, ...] | None  # None: any shape; else the only shape this kind makes


PLAIN = InputKind(key="plain", make=lambda t: t, source=lambda e: e, imports=(), fixed_shape=None)
_KINDS: dict[str, InputKind] = {PLAIN.key: PLAIN}


# Nested inputs (Vocabulary.NESTED): torch's TwoTensor of TwoTensors, over plain tensors whose sides differ, or over
# leaves that each require grad apart (PyTorch's test_nested_subclasses_complicated_inps: the outer wrapper's second
# side requires grad where its own inner tensors do not).
_TWO = "torch.testing._internal.two_tensor.TwoTensor"


def _two(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    from torch.testing._internal.two_tensor import TwoTensor  # (torch's test subclass, imported where drawn)

    out: torch.Tensor = TwoTensor(a, b)  # type: ignore[no-untyped-call]  # torch's test subclass is untyped
    return out


def _nested_over_leaves(t: torch.Tensor) -> torch.Tensor:
    t.requires_grad_()
    first = _two(t, t.detach().clone().requires_grad_())
    return _two(first, first.detach().clone().requires_grad_())


_NESTED = (
    InputKind(
        key="two_tensor_of_two_tensors",
        make=lambda t: _two(_two(t, t * 2), _two(-t, t + 1)),
        source=lambda e: f"(lambda t: {_TWO}({_TWO}(t, t * 2), {_TWO}(-t, t + 1)))({e})",
        imports=("import torch.testing._internal.two_tensor",),
        fixed_shape=None,
    ),
    InputKind(
        key="two_tensor_of_own_leaves",
        make=_nested_over_leaves,
        source=lambda e: (
            f"(lambda f: {_TWO}(f, f.detach().clone().requires_grad_()))((lambda a: {_TWO}(a, a.detach().clone()"
            f".requires_grad_()))({e}.requires_grad_()))"
        ),
        imports=("import torch.testing._internal.two_tensor",),
        fixed_shape=None,
    ),
)
# Complex inputs (Vocabulary.COMPLEX): a complex tensor passed as its lazy conj view (conj bit set), or that view's
# imag (a float view with the neg bit set); the ops eager rejects on them are drawn again.
_COMPLEX = (
    InputKind(
        key="conj_view",
        make=lambda t: (t * (1 + 0.5j)).conj(),
        source=lambda e: f"({e} * (1 + 0.5j)).conj()",
        imports=(),
        fixed_shape=None,
    ),
    InputKind(
        key="conj_view_imag",
        make=lambda t: (t * (1 + 0.5j)).conj().imag,
        source=lambda e: f"({e} * (1 + 0.5j)).conj().imag",
        imports=(),
        fixed_shape=None,
    ),
)
_KINDS.update((kind.key, kind) for kind in (*_NESTED, *_COMPLEX))
NESTED_KINDS = tuple(kind.key for kind in _NESTED)
COMPLEX_KINDS = tuple(kind.key for kind in _COMPLEX)


def register_input_kind(kind: InputKind) -> None:
    _KINDS[kind.key] = kind


def get_input_kind(key: str) -> InputKind:
    """A registered kind, or one resolved from `MODULE:FACTORY` (a zero-argument function returning an instance).

    If the factory has a `from_tensor(t)` attribute, or else the instance's class a `from_tensor(t)` classmethod, the
    kind makes instances of any shape with it; otherwise every input of this kind is `FACTORY()` itself, with that
    one shape.
    """
    if key in _KINDS:
        return _KINDS[key]
    module_name, sep, attr = key.partition(":")
    if not sep:
        raise ValueError(f"input kind {key!r}: expected 'plain' or MODULE:FACTORY (e.g. subclasses.pair:example)")
    factory = getattr(importlib.import_module(module_name), attr, None)
    if not callable(factory):
        raise ValueError(f"input kind {key!r}: {module_name} has no callable {attr!r}")
    kind = kind_from_factory(factory, key=key)
    register_input_kind(kind)
    return kind


def kind_from_factory(factory: Callable[[], torch.Tensor], *, key: str) -> InputKind:
    """The input kind of a zero-argument factory's instances (see `get_input_kind`); `key` names it in programs."""
    module_name, attr = factory.__module__, factory.__qualname__
    instance = factory()
    if not isinstance(instance, torch.Tensor):
        raise ValueError(f"input kind {key!r}: the factory returned a {type(instance).__name__}, not a tensor")
    cls = type(instance)
    # a factory's own from_tensor (for a class that has none: torch's TwoTensor), else the class's
    own = getattr(factory, "from_tensor", None)
    owner, holder = (module_name, f"{module_name}.{attr}") if callable(own) else (cls.__module__, "")
    from_tensor = own if callable(own) else getattr(cls, "from_tensor", None)
    if callable(from_tensor):
        where = holder or f"{cls.__module__}.{cls.__qualname__}"
        kind = InputKind(
            key=key,
            make=from_tensor,
            source=lambda e: f"{where}.from_tensor({e})",
            imports=(f"import {owner}",),
            fixed_shape=None,
        )
    else:
        kind = InputKind(
            key=key,
            make=lambda t: factory(),
            source=lambda e: f"{module_name}.{attr}()",
            imports=(f"import {module_name}",),
            fixed_shape=tuple(instance.shape),
        )
    return kind


# ---------------------------------------------------------------------------------------------------------------
# The interpreter


def make_base(spec: BaseSpec) -> torch.Tensor:
    kind = get_input_kind(spec.kind)
    # A fixed-shape kind's factory makes its own values: drawing from the RNG for it would desync the printed source.
    t = kind.make(torch.randn(spec.shape) if kind.fixed_shape is None else torch.empty(0))
    with torch.enable_grad():
        if spec.grad != "none":
            t.requires_grad_()
        if spec.grad == "nonleaf":
            t = t.clone()
    if spec.freed:
        t.untyped_storage().resize_(0)
    return t


def make_inputs(program: Program) -> tuple[torch.Tensor, ...]:
    """Fresh inputs; the caller fixes the RNG seed (subclassaot.tools.parity.fresh_call does)."""
    bases = [make_base(b) for b in program.bases]
    out = []
    with torch.enable_grad():
        for spec in program.inputs:
            t = bases[spec.base]
            for step in spec.views:
                t = _apply_view(step, t)
            out.append(t)
    return tuple(out)


def _apply_view(step: ViewStep, t: torch.Tensor) -> torch.Tensor:
    result = OPS[step.name].apply(t, None, step.params)
    assert isinstance(result, torch.Tensor), f"BUG: view step {step.name} returned {result!r}"
    return result


def grad_scopes(scopes: Sequence[GradScope]) -> contextlib.ExitStack:
    """The `with` blocks of an op, entered outermost first."""
    stack = contextlib.ExitStack()
    for scope in scopes:
        stack.enter_context(_SCOPE_CONTEXTS[scope]())
    return stack


_SCOPE_CONTEXTS: dict[GradScope, Callable[[], contextlib.AbstractContextManager[object]]] = {
    "no_grad": torch.no_grad,
    "enable_grad": torch.enable_grad,
    "grad_off": lambda: torch.set_grad_enabled(False),
    "grad_on": lambda: torch.set_grad_enabled(True),
    "inference_mode": torch.inference_mode,
}


def run_op(op: Op, env: dict[int, torch.Tensor]) -> None:
    """Run one op on `env` (variable id -> tensor), binding its results if it has any."""
    src = env[op.src]
    if op.via_data:
        src = src.data
    other = None if op.other is None else env[op.other]
    with grad_scopes(op.scopes):
        result = OPS[op.name].apply(src, other, op.params)
    if not op.outs:
        return
    results = result if isinstance(result, tuple) else (result,)
    assert len(results) == len(op.outs), f"BUG: {op.name} returned {len(results)} results for {len(op.outs)}"
    for var, value in zip(op.outs, results, strict=True):
        assert value is not None, f"BUG: {op.name} returned nothing to bind"
        env[var] = value


def run_program(program: Program, args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    env = {spec.var: a for spec, a in zip(program.inputs, args, strict=True)}
    for op in program.ops:
        run_op(op, env)
    return tuple(env[v] for v in program.outputs)


def as_function(program: Program) -> Callable[..., tuple[torch.Tensor, ...]]:
    def f(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return run_program(program, args)

    f.__name__ = "fuzz_program"
    return f


# ---------------------------------------------------------------------------------------------------------------
# The printer


def _names(program: Program) -> dict[int, str]:
    names = {spec.var: f"x{k}" for k, spec in enumerate(program.inputs)}
    for op in program.ops:
        for var in op.outs:
            names[var] = f"t{len(names) - len(program.inputs)}"
    return names


def _op_line(op: Op, names: dict[int, str]) -> str:
    src = names[op.src] + (".data" if op.via_data else "")
    text = OPS[op.name].expr(src, None if op.other is None else names[op.other], op.params)
    return f"{', '.join(names[v] for v in op.outs)} = {text}" if op.outs else text


def _body(program: Program, names: dict[int, str]) -> Iterator[str]:
    """Consecutive ops in the same scopes share one nest of `with` blocks."""
    open_scopes: tuple[GradScope, ...] = ()
    for op in program.ops:
        if op.scopes != open_scopes:
            for depth, scope in enumerate(op.scopes):
                yield "    " * (depth + 1) + f"with {_SCOPE_SOURCE[scope]}:"
            open_scopes = op.scopes
        yield "    " * (len(op.scopes) + 1) + _op_line(op, names)
    outs = ", ".join(names[v] for v in program.outputs)
    yield f"    return ({outs}{',' if len(program.outputs) == 1 else ''})"


def _make_inputs_source(program: Program) -> list[str]:
    lines = ["@torch.enable_grad()", "def make_inputs():"]
    for k, base in enumerate(program.bases):
        kind = get_input_kind(base.kind)
        made = f"b{k} = {kind.source(f'torch.randn({tuple_text(base.shape)})')}"
        # (`make_base` makes it under the call's grad mode: a view kind made under no_grad is a no_grad view)
        lines.extend([f"    {made}"] if program.grad_mode else ["    with torch.no_grad():", f"        {made}"])
        if base.grad != "none":
            lines.append(f"    b{k}.requires_grad_()")
        if base.grad == "nonleaf":
            lines.append(f"    b{k} = b{k}.clone()")
        if base.freed:
            lines.append(f"    b{k}.untyped_storage().resize_(0)")
    exprs = []
    for spec in program.inputs:
        expr = f"b{spec.base}"
        for step in spec.views:
            expr = OPS[step.name].expr(expr, None, step.params)
        exprs.append(expr)
    lines.append(f"    return ({', '.join(exprs)}{',' if len(exprs) == 1 else ''})")
    return lines


def to_source(program: Program) -> str:
    """`import`s, `make_inputs()` (call it under a fixed seed; it makes its bases under the program's grad mode, as
    the fuzz's `make_inputs` does, called under it) and `f(...)`."""
    names = _names(program)
    imports = sorted({"import torch", *(i for b in program.bases for i in get_input_kind(b.kind).imports)})
    params = ", ".join(names[spec.var] for spec in program.inputs)
    mode = "training: call f with grad enabled" if program.grad_mode else "inference: call f under torch.no_grad()"
    preambles = dict.fromkeys(OPS[op.name].preamble for op in program.ops if OPS[op.name].preamble)
    lines = [
        *imports,
        "",
        "",
        *_make_inputs_source(program),
        "",
        "",
        *(line for text in preambles for line in [*text.rstrip().splitlines(), "", ""]),
        f"# {mode}",
        f"def f({params}):",
        *_body(program, names),
    ]
    return "\n".join(lines) + "\n"
