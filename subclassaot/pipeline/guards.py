"""Guards: what a compiled entry assumes about its inputs, compiled to one straight-line Python function.

Input: `FlatInputs`, `DenseLayout`, the fake inputs (user-level and dense) and the ShapeEnv after tracing.
Output: `Guards`: the generated source and the function it defines, `check(values) -> dict[str, int] | str`: the
symbol values (for the epilogue) when every guard holds, else the first failure in words
("args[0].size(0): expected 8, got 16").
Invariants: guards cover the pytree structure (checked by the cache before this), each leaf's type, each constant's
value, each tensor's dtype, device, requires_grad (and is_leaf where it requires grad: training rules differ for
autograd leaves), negative and conjugate bits (dense ones), sizes, strides and offset (static, a symbol bound here,
or an expression checked here), each subclass's type, attrs and ctx (by ==, reported field by field), recursively; the
autograd creation meta of each input the compile decided on by it; the pattern of storage sharing between dense
leaves; and the ShapeEnv's own guards and symbol ranges.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import sympy
import torch

from subclassaot.authoring.protocol import SubclassNode, dense_leaves
from subclassaot.authoring.wrapper_tensor import plain_ctx_names
from subclassaot.config import CallerGuarded
from subclassaot.pipeline.rules.overlapping_reads import guard_description
from subclassaot.pipeline.rules.view_bases import apart_guards, own_base_guards
from subclassaot.runtime.straight_line import Checks, Fails, SlowPath, attribute_source, check_function
from subclassaot.schemas import DenseIndex, DenseLayout, FlatInputs, LeafKind
from subclassaot.torch_internals import (
    creation_meta_of,
    describe_creation_meta,
    flagless_no_grad_view,
    is_fake,
    is_no_grad_view,
    nested_coeff,
    nested_int_id,
    opaque_guard_values,
    property_check,
    python_source,
    rebuilt_view_node,
    storage_address,
    symint_expr,
)

GuardFn = Callable[[Sequence[object]], "dict[str, int] | str"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Guards:
    source: str  # the generated Python, printable for users: each check with its message
    check: GuardFn
    symbols: tuple[str, ...]  # names bound by the guards, in binding order
    # the fast check, which `check` runs, printable: its pieces' checks, and on a failure their slow paths (Note [What
    # The Guards Compare]); "" where there is none
    fast_source: str = ""
    # the fast check's pieces in order (the Python state's first), each with its slow path where one of its checks
    # fails: one function with the runner (Note [Straight-Line Runners]); () where `check` is no such function (a
    # wrapper of another entry's guards)
    fast: tuple[Checks, ...] = ()
    slow: tuple[SlowPath, ...] = ()
    grad_mode: bool | None = None  # where not None, `fast[0]` checks that grad mode is this, and nothing else
    # the flat inputs whose type, dispatch keys, dtype, device, requires_grad, sizes and strides the fast body checks
    # in one C call (`_one_call_check`): dispatch keys under the thread's include set
    one_call: frozenset[int] = frozenset()


def with_python_state(
    inner: Guards,
    state: Callable[[], str | None],
    state_source: str,
    state_checks: Checks,
    state_slow: Callable[[int], str | None],
    state_grad: bool | None = None,
) -> Guards:
    """`inner` preceded by the Python-state check (Note [State The Program Reads]): one generated function, the
    state's checks (`state_checks`) before the tensor guards' fast ones (a frame per check costs more in a training
    step than alone), the state's slow path (`state_slow`) where one fails. Where `inner` has no pieces (a wrapper),
    `state` (the state's own check) and then `inner`'s. `state_grad`: the grad mode the state's checks require
    (None: any); where it is the one `inner`'s grad-mode check requires, that check is left out of the fast one."""
    inner_check = inner.check

    def then(values: Sequence[object], failed: int) -> dict[str, int] | str:
        reason = state_slow(failed)
        return reason if reason is not None else inner_check(values)

    def check(values: Sequence[object]) -> dict[str, int] | str:
        reason = state()
        if reason is not None:
            return reason
        return inner_check(values)

    if not inner.fast:
        return dataclasses.replace(inner, source=state_source + "\n" + inner.source, check=check)
    inner_fast, inner_slow = inner.fast, inner.slow
    if inner.grad_mode is not None and inner.grad_mode == state_grad:  # (a call that passes the state's has it)
        inner_fast, inner_slow = inner_fast[1:], inner_slow[1:]
    fast, slow = (state_checks, *inner_fast), (then, *inner_slow)
    fast_source, names = _fast_check(fast, slow)
    return dataclasses.replace(
        inner,
        source=state_source + "\n" + inner.source,
        check=_compiled(fast_source, names, "<subclassaot guards, fast, with the Python state>"),
        fast_source=fast_source,
        fast=fast,
        slow=slow,
        grad_mode=None,
    )


def _fast_check(pieces: Sequence[Checks], slow: Sequence[SlowPath]) -> tuple[str, dict[str, object]]:
    """The fast check of `pieces` (each piece's slow path where one of its checks fails): its source and globals."""
    source, names = check_function("check", "L", pieces, lambda p, code: f"return _slow{p}(L, {code})")
    return source, {**names, **{f"_slow{p}": path for p, path in enumerate(slow)}}


def describe_ctx_change(path: str, old: object, new: object) -> str:
    """Name the ctx fields that changed (dataclasses, tuples, dicts are compared field by field)."""
    changes = _ctx_diff(old, new, "")
    if not changes:
        return f"{path} ctx changed: {old!r} -> {new!r}"
    return "; ".join(f"{path} ctx field {name or 'value'!s} changed: {a!r} -> {b!r}" for name, a, b in changes)


def _ctx_diff(old: object, new: object, prefix: str) -> list[tuple[str, object, object]]:
    if old is ANY_SIZE:
        return []
    if type(old) is not type(new):
        return [(prefix, old, new)]
    fields = getattr(old, "_fields", None)
    if isinstance(old, tuple) and isinstance(new, tuple) and isinstance(fields, tuple):  # a NamedTuple: by name
        out = []
        for name, a, b in zip(fields, old, new, strict=True):
            out += _ctx_diff(a, b, f"{prefix}.{name}".lstrip("."))
        return out
    if dataclasses.is_dataclass(old) and not isinstance(old, type):
        out = []
        for f in dataclasses.fields(old):
            out += _ctx_diff(getattr(old, f.name), getattr(new, f.name), f"{prefix}.{f.name}".lstrip("."))
        return out
    if isinstance(old, dict) and isinstance(new, dict) and old.keys() == new.keys():
        out = []
        for k in old:
            out += _ctx_diff(old[k], new[k], f"{prefix}[{k!r}]".lstrip("."))
        return out
    if isinstance(old, tuple | list) and isinstance(new, tuple | list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out += _ctx_diff(a, b, f"{prefix}[{i}]")
        return out
    try:
        equal = bool(old == new)
    except Exception:
        equal = False
    return [] if equal else [(prefix, old, new)]


class _AnySize:
    """Stands for a symbolic size inside a guarded ctx (Note [What The Guards Compare])."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return 0

    def __deepcopy__(self, memo: dict[int, object]) -> _AnySize:
        return self

    def __repr__(self) -> str:
        return "<symbolic size>"


ANY_SIZE = _AnySize()


def ctx_for_guard(ctx: object) -> object:
    """`ctx` with every SymInt replaced by `ANY_SIZE` (tuples, NamedTuples, lists and dicts searched)."""
    if isinstance(ctx, torch.SymInt):
        return ANY_SIZE
    if isinstance(ctx, tuple):
        items: list[object] = [ctx_for_guard(v) for v in ctx]
        if isinstance(getattr(ctx, "_fields", None), tuple):
            make_named = cast("Callable[..., object]", type(ctx))  # a NamedTuple's constructor takes its fields
            return make_named(*items)
        return tuple(items)  # a torch.Size becomes a tuple: they compare equal
    if isinstance(ctx, list):
        return [ctx_for_guard(v) for v in ctx]
    if isinstance(ctx, dict):
        return {k: ctx_for_guard(v) for k, v in ctx.items()}
    return ctx


def describe_opaque_change(path: str, old: object, new: object) -> str:
    """Why an opaque inner object fails its identity guard (Note [The Flatten Protocol]), field by field."""
    head = f"{path}: compiled for one {type(old).__name__} object, got "
    if type(new) is not type(old):
        return head + f"a {type(new).__name__}"
    old_fields, new_fields = opaque_guard_values(old), opaque_guard_values(new)
    if old_fields is None or new_fields is None or len(old_fields) != len(new_fields):
        return head + "another one"
    changed = [
        f"field [{i}] {a!r} -> {b!r}" for i, (a, b) in enumerate(zip(old_fields, new_fields, strict=True)) if a != b
    ]
    if not changed:
        return head + "another one equal to it by its registered guard_fn (outputs would hold the old one)"
    return head + "another one: its registered guard_fn " + "; ".join(changed)


# Note [What The Guards Compare]
# Each guard compares a fact of the call with the value it had at compile time, and that comparison is shaped so that it
# holds for every call the entry is right for, and for no other:
# - Sizes are guarded as sizes: static, a symbol bound here, or an expression checked here. Some subclasses keep their
#   outer size and stride in ctx as well (DTensor's TensorMeta); compiled with a dynamic dim, that ctx holds SymInts,
#   and comparing it with == would pin every call to the compile-time sizes or trace a comparison. So in the ctx guard
#   every SymInt is a wildcard equal to anything, as torch's own TENSOR_SUBCLASS_METADATA_MATCH does: only what the
#   sizes cannot say is compared there.
# - Sharing is guarded as a pattern. Which dense leaves share a storage is compared, not which storage. Likewise a
#   nested int names the row structure of one offsets (or lengths) tensor, and eager lets two jagged tensors meet (`a +
#   b`) only when they carry the same one; which offsets tensor backs it is not the rule (a deepcopy of a jagged tensor
#   keeps the original's nested int over copied offsets). So the ragged sizes of the inputs that were equal when
#   compiling must be equal, the others not (one comparison per nested size against the first size of each nested int
#   seen before it).
# - Opaque inner objects are compared by identity (Note [The Flatten Protocol]); other values by type and == against a
#   snapshot taken at compile time, so a mutable object changed in place after the compile does not equal itself.
# - The guard source holds no caller text. The guards are generated Python, so any text spliced into that source is
#   code. A call's values (a string argument, a dict key that ends up in a path like args[0]['k'], a ctx field, an
#   attribute name) are caller data: every value a guard compares against and every piece of a failure message is bound
#   by reference, as a global of the generated function (`_c3`); the source holds only our own variable names, integer
#   literals we produce, and expressions over the ShapeEnv's symbol names. A failure message is assembled at run time by
#   `_msg(...)` from bound text and the guard's locals, so a quote, brace or newline in a value can neither break the
#   source nor run.
# - Fast, then explain. A failure names the one fact that changed ("args[0].size(1): expected 4, got 8"), so the guards
#   are generated twice: as the checks one by one, each with its message, and as a fast body, the same predicate in the
#   same order binding the same symbols, where a tensor's static sizes (and its static strides) are one comparison,
#   `v0.shape == (2, 4)`, and a WrapperTensor whose `__tensor_flatten__` is the base class's is not flattened: its
#   inner names are its class's (its type is checked first) and its ctx is its ctx fields, compared as one tuple.
#   Most calls pass and run only the fast body; where one of its checks fails it calls the first body, which finds
#   the failing fact and returns its message. In the fast body consecutive checks are one conjunction (one `if`), a
#   dtype and a bool are compared by identity and a CPU device by `is_cpu` (the same predicates, cheaper), and where
#   every subclass input reads its properties as a plain tensor does (its `__torch_function__` is torch's disabled
#   one or Tensor's default, which returns what the property returns) the body runs with subclass torch functions
#   off, so that a wrapper's `.shape` or `.dtype` skips the torch-function check. The first body is compiled (Python's
#   `compile`, a few ms for a few inputs: most of a tiny compile's guard cost) the first time the fast body fails,
#   not with the entry: most entries never fail a guard.
# - One C call a tensor. Where a tensor's sizes and strides are all static and checked here, and its class reads
#   its properties as a plain tensor does, the fast body tests its type, dtype, device, requires_grad, sizes and
#   strides in one call of torch's TensorGuards (C++, the per-tensor part of Dynamo's guards; ~0.15 us against ~0.4
#   us for the six reads in Python), made from the compile's own tensor where that tensor has exactly the values
#   the guards expect. It compares the tensor's dispatch keys as well (under the call's thread-local key sets), the
#   conjugate and negative bits among them (guarded anyway: `_bit_guards`): a stricter predicate, whose extra
#   failures (a key set excluded around the call) go to the first body, which decides them as before, so what an
#   entry accepts is unchanged.
# - Inference-ness where the compile decided on it: each dense leaf the program writes (and each member of a written
#   alias group), or that is an inference tensor, is one or not as the compile's, and so is each written subclass
#   input's wrapper (the run raises eager's error for an in-place write of one, and the epilogue writes it inside
#   inference_mode where the plan says: Note [Input Updates]).
# - Creation meta where the compile read it. Autograd's creation meta of a view says what reading its grad_fn does once
#   the counter it shares with its base moved: a view of the default kind (select(), view()) rebuilds its history; an
#   output of unbind(), split() or chunk(), a view taken under no_grad or inside inference_mode and one a custom
#   Function returned raise. Nothing else guarded tells `b.select(1, 1)` from `b.unbind(1)[1]`, nor a leaf requiring
#   grad from a view of one taken under no_grad. A compile decides on it where the program moves an input's counter
#   and then reads the input with grad (grad_scope.check_raising_view_input_reads: eager's error, or none) and for a
#   subclass view input whose base another input writes (analyze_training.check_multi_output_view_inputs): each input
#   those read that requires grad has its creation meta guarded (a non-view: that it stays one, `not v._is_view()` in
#   the fast body). Only those: autograd's reader costs microseconds (a pybind enum made per read), more than a small
#   entry's other guards, and no other decision of the compile depends on it: the run lays the inputs out anew (no
#   stand-in is such a view), and the runtime's writes into inputs and its view replays run on the call's own
#   tensors, where autograd applies their creation meta itself.
# - The node type of a non-leaf input whose grad_fn the program read: the read answers the real input's node, a
#   constant of the entry, so an input made by another op (AddBackward0 for MulBackward0) compiles anew. For a view
#   input, also the node autograd rebuilds after a write of its base: a view taken under view replay mode keeps its view
#   ops and rebuilds by them (SliceBackward0), one taken outside by as_strided (AsStridedBackward0).


class Src(str):
    """A piece of guard source over the guard's own locals (`v0_size[1]`), as opposed to message text to bind."""


def _msg(*parts: object) -> str:
    return "".join(map(str, parts))


def describe_aliasing(paths: Sequence[str], storages: Sequence[object]) -> str:
    """Which inputs share storage, in words ("args[0] ~ args[1]"; "none")."""
    groups: dict[object, list[str]] = {}
    for path, storage in zip(paths, storages, strict=True):
        groups.setdefault(storage, []).append(path)
    return "; ".join(" ~ ".join(g) for g in groups.values() if len(g) > 1) or "none"


class _Writer:
    """Accumulates guard lines; checks return a message, bindings assign symbols. Two bodies: `lines`, the checks
    one by one, each with its message, and `fast`, the same predicate with some checks combined, which hands a
    failure to the first for its message (Note [What The Guards Compare])."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.fast: list[str | Fails] = []  # the fast body's steps (Note [Straight-Line Runners])
        self.pending: list[str] = []  # fast checks not yet written: consecutive ones become one `if`
        self.detail_only = False  # what is emitted now goes to `lines` only (a combined check stands for it)
        self.one_call: set[str] = set()  # the tensors (their variables) the fast body checks in one C call
        self.globals: dict[str, object] = {
            "describe_ctx_change": describe_ctx_change,
            "describe_opaque_change": describe_opaque_change,
            "describe_aliasing": describe_aliasing,
            "_storage_id": storage_address,
            "torch": torch,
            "_msg": _msg,
            "_nested_coeff": nested_coeff,
            "_creation_meta_of": creation_meta_of,
            "_describe_creation_meta": describe_creation_meta,
        }
        self.bound: dict[str, str] = {}  # symbol name -> the access expression it was read from
        self.bound_label: dict[str, str] = {}  # symbol name -> the user-facing path it was read from
        self.deferred: list[tuple[str, str, str]] = []  # (access, expected expr source, label) checked after binding
        self.nested: list[tuple[str, str, int]] = []  # (access, label, nested int id) of every nested size

    def constant(self, value: object) -> str:
        name = f"_g{len(self.globals)}"  # (the guards' own names: Note [Straight-Line Runners])
        self.globals[name] = value
        return name

    def msg(self, *parts: str) -> str:
        """Source for a failure message: `Src` parts are guard expressions, plain text is bound by reference."""
        args: list[str] = []
        text = ""
        for part in parts:
            if isinstance(part, Src):
                if text:
                    args.append(self.constant(text))
                    text = ""
                args.append(str(part))
            else:
                text += part
        if text:
            args.append(self.constant(text))
        return f"_msg({', '.join(args)})"

    def line(self, text: str) -> None:
        """A statement (one line) of both bodies."""
        self.lines.append("    " + text)
        if not self.detail_only:
            self.flush()
            self.fast.append(text)

    def check(self, cond: str, message: str, fast: str | None = None) -> None:
        """`fast`: the same predicate, cheaper to evaluate, for the fast body (`cond` where None)."""
        self.lines.append(f"    if not ({cond}):\n        return {message}")
        if not self.detail_only:
            self.fast_check(cond if fast is None else fast)

    def fast_check(self, cond: str) -> None:
        """A check of the fast body only, which stands for checks of `lines` emitted with `detail_only` set."""
        self.pending.append(cond)

    def flush(self) -> None:
        """The pending fast checks, as one conjunction in their order (Note [What The Guards Compare])."""
        if self.pending:
            conds = " and ".join(f"({c})" for c in self.pending)
            self.fast.append(Fails(f"not ({conds})"))
            self.pending = []

    def expect(self, cond: str, label: str, expected: object, got: str | None = None, fast: str | None = None) -> None:
        """`label: expected E, got G` when `cond` fails; `got` is a guard expression, shown with str()."""
        tail: tuple[str, ...] = (", got ", Src(got)) if got is not None else ()
        self.check(cond, self.msg(f"{label}: expected {expected}", *tail), fast)

    def dim(self, access: str, label: str, value: int | torch.SymInt) -> None:
        coeff = nested_coeff(value)
        if coeff is not None:  # See Note [Nested Int Dims]: checked by structure, its value is the inner tensors'
            text = "j" if coeff == 1 else f"{coeff}*j"
            self.expect(f"_nested_coeff({access}) == {coeff}", label, f"a nested int {text}", Src(access))
            nested_id = nested_int_id(value)
            if coeff == 1 and nested_id is not None:
                self.nested.append((access, label, nested_id))
            return
        expr = symint_expr(value)
        if isinstance(expr, int):
            self.expect(f"{access} == {expr}", label, expr, access)
        elif isinstance(expr, sympy.Symbol) and expr.name not in self.bound:
            self.bound[expr.name] = access
            self.bound_label[expr.name] = label
            self.line(f"{expr.name} = {access}")
        else:
            self.deferred.append((access, python_source(expr), label))


def build_guards(
    flat: FlatInputs,
    layout: DenseLayout,
    user_fakes: Sequence[torch.Tensor],
    shape_env: torch.fx.experimental.symbolic_shapes.ShapeEnv,
    base_reads: Sequence[tuple[int, int | None]] = (),
    caller_guarded: Mapping[str, CallerGuarded] | None = None,
    grad_mode: bool | None = None,
    state_first: bool = False,
    creation_meta_reads: Sequence[int] = (),
    apart: Collection[DenseIndex] = (),
    base_flag_reads: Sequence[int] = (),
    unbumped_view_reads: Sequence[int] = (),
    grad_fn_type_reads: Sequence[int] = (),
    written: Collection[int] = (),
) -> Guards:
    """`caller_guarded`: facts the caller guards already, by input path (Note [Dynamo Captures, The Pipeline
    Compiles]). `grad_mode`: the grad mode an inference entry was analyzed in (Note [Grad Mode And Autograd
    Reads]); None for training entries. `state_first`: the caller puts the Python-state check in front
    (`with_python_state`), which compiles the fast body with it; the fast body alone is then compiled when first
    called. `creation_meta_reads`: the tensor positions whose autograd creation meta the compile decided on (Note
    [What The Guards Compare]). `apart`: dense leaves whose runs rely on `view_bases.autograd_apart`
    (LeafMutation.history_of_its_own). `base_flag_reads`: the tensor positions whose `._base`'s requires_grad the
    compile decided on (Note [Views That Raise After A Bump]). `unbumped_view_reads`: the tensor positions of view
    inputs the compile read as views without history, their version counters at 0 (Note [Grad Mode And Autograd
    Reads]). `grad_fn_type_reads`: the tensor positions of non-leaf inputs whose grad_fn the program read (Note [What
    The Guards Compare]). `written`: the dense leaves the program writes (whether each is an inference tensor is
    guarded)."""
    w = _Writer()
    one_call: set[int] = set()
    grouped = {m for group in layout.groups for m in group.members}
    if grad_mode is not None:  # (the fast check's own piece, which the Python state's check may stand for)
        w.detail_only = True
        w.expect(
            f"torch.is_grad_enabled() is {grad_mode}", "torch.is_grad_enabled()", grad_mode, "torch.is_grad_enabled()"
        )
        w.detail_only = False
    for leaf in flat.leaves:
        w.line(f"v{leaf.index} = L[{leaf.index}]")
        if leaf.kind is LeafKind.CONSTANT:
            value = flat.values[leaf.index]
            w.expect(constant_condition(w, f"v{leaf.index}", value), leaf.path, repr(value), f"repr(v{leaf.index})")
    for t_index, (tree, fake) in enumerate(zip(layout.trees, user_fakes, strict=True)):
        index = flat.tensor_indices[t_index]
        real = flat.values[index]
        assert isinstance(real, torch.Tensor)
        path = flat.leaves[index].path
        if _tensor_guards(w, f"v{index}", path, fake, tree, real, real.requires_grad, caller_guarded or {}):
            one_call.add(index)
        if tree is not None:  # Note [Stale View Functions]
            c = w.constant(real._is_view())
            w.expect(
                f"v{index}._is_view() == {c}",
                f"{path}._is_view()",
                real._is_view(),
                f"v{index}._is_view()",
                f"v{index}._is_view() is {c}",
            )
        if real.requires_grad:
            _autograd_guards(w, index, path, real, tree, any(j in grouped for j in layout.leaves_of_input[t_index]))
    _base_read_guards(w, flat, base_reads)
    _creation_meta_guards(w, flat, creation_meta_reads)
    _base_flag_guards(w, flat, base_flag_reads)
    _grad_fn_type_guards(w, flat, grad_fn_type_reads)
    _unbumped_guards(w, flat, unbumped_view_reads)
    _inference_guards(w, layout, flat, written)
    _alias_guards(w, layout, flat, apart)
    _nested_int_guards(w)
    for access, expected, label in w.deferred:
        w.check(
            f"{access} == {expected}", w.msg(f"{label}: expected {expected} = ", Src(expected), ", got ", Src(access))
        )
    _shape_env_guards(w, shape_env)
    _replaced_symbols(w, shape_env)
    return _finished(w, layout, frozenset(one_call), state_first, grad_mode)


def _autograd_guards(
    w: _Writer, index: int, path: str, real: torch.Tensor, tree: SubclassNode | None, grouped: bool
) -> None:
    """An input that requires grad: compile-time rules differ for autograd leaves and non-leaves (in-place writes,
    layout changes), and for no_grad views over a shared storage (`grouped`) with a flag of their own or none."""
    c = w.constant(real.is_leaf)
    w.expect(f"v{index}.is_leaf == {c}", f"{path}.is_leaf", real.is_leaf, f"v{index}.is_leaf")
    if tree is None and not real.is_leaf:
        # See Note [Input Updates]
        c = w.constant(real._is_view())
        w.expect(f"v{index}._is_view() == {c}", f"{path}._is_view()", real._is_view(), f"v{index}._is_view()")
    if grouped and is_no_grad_view(real):
        # a no_grad view over a shared storage without a flag of its own is traced as one, taken again under
        # no_grad; one with a flag of its own is refused (Note [Aliased Inputs In Training])
        flagless = flagless_no_grad_view(real)
        c, fn = w.constant(flagless), w.constant(flagless_no_grad_view)
        label = f"{path} (a view taken under no_grad) has no requires_grad flag of its own"
        w.expect(f"{fn}(v{index}) == {c}", label, flagless, f"{fn}(v{index})")


def _base_read_guards(w: _Writer, flat: FlatInputs, base_reads: Sequence[tuple[int, int | None]]) -> None:
    """Note [Grad Mode And Autograd Reads]: whether each input whose `._base` the program read is a view, and of
    which other input."""
    for position, base in dict.fromkeys(base_reads):
        index = flat.tensor_indices[position]
        path = flat.leaves[index].path
        if base is None or base == -1:
            w.expect(f"v{index}._is_view() == {base == -1}", f"{path}._is_view()", base == -1)
        else:
            other = flat.tensor_indices[base]
            w.expect(f"v{index}._base is v{other}", f"{path}._base", f"argument {other}")


def _inputs_at(flat: FlatInputs, positions: Sequence[int]) -> Iterator[tuple[int, torch.Tensor]]:
    """Each tensor input at `positions` once, in their order: its flat index and its value."""
    for position in dict.fromkeys(positions):
        index = flat.tensor_indices[position]
        real = flat.values[index]
        assert isinstance(real, torch.Tensor)
        yield index, real


def _base_flag_guards(w: _Writer, flat: FlatInputs, positions: Sequence[int]) -> None:
    """Whether the `._base` of each view input at `positions` requires grad, as the compile's (Note [Views That Raise
    After A Bump]: a stale view's history is regenerated from it)."""
    for index, real in _inputs_at(flat, positions):
        flag = real._base is not None and real._base.requires_grad
        w.expect(
            f"(v{index}._base is not None and v{index}._base.requires_grad) == {flag}",
            f"{flat.leaves[index].path}._base.requires_grad",
            flag,
        )


def _unbumped_guards(w: _Writer, flat: FlatInputs, positions: Sequence[int]) -> None:
    """That no write moved the version counter of each view input at `positions`, as none had at the compile: one
    moved since the view was taken leaves its history to be regenerated from its base (Note [Grad Mode And Autograd
    Reads], views of gained bases)."""
    for index, _ in _inputs_at(flat, positions):
        w.expect(f"v{index}._version == 0", f"{flat.leaves[index].path}._version", 0, f"v{index}._version")


def _grad_fn_type_guards(w: _Writer, flat: FlatInputs, positions: Sequence[int]) -> None:
    """The type of the grad_fn of each tensor input at `positions`, as the compile's (Note [What The Guards
    Compare])."""
    for index, real in _inputs_at(flat, positions):
        node = type(real.grad_fn)
        c = w.constant(node)
        w.expect(
            f"type(v{index}.grad_fn) is {c}",
            f"{flat.leaves[index].path}: type(grad_fn)",
            node.__name__,
            f"type(v{index}.grad_fn).__name__",
        )
        if real._base is None:
            continue
        # a view input's history rebuilt after a write: its view ops' node where it was taken under view replay mode
        rebuilt = type(rebuilt_view_node(real))
        c, fn = w.constant(rebuilt), w.constant(rebuilt_view_node)
        w.expect(
            f"type({fn}(v{index})) is {c}",
            f"{flat.leaves[index].path}: type of the grad_fn autograd rebuilds after a write",
            rebuilt.__name__,
            f"type({fn}(v{index})).__name__",
        )


def _creation_meta_guards(w: _Writer, flat: FlatInputs, positions: Sequence[int]) -> None:
    """The creation meta of each tensor input at `positions`, as the compile's (Note [What The Guards Compare])."""
    for index, real in _inputs_at(flat, positions):
        meta = creation_meta_of(real)
        c = w.constant(meta)
        w.check(
            f"_creation_meta_of(v{index}) == {c}",
            w.msg(
                f"{flat.leaves[index].path}: compiled for {describe_creation_meta(meta)}, got ",
                Src(f"_describe_creation_meta(_creation_meta_of(v{index}))"),
                " (autograd's creation meta: whether its grad_fn raises once its base is written)",
            ),
            None if meta is not None else f"not v{index}._is_view()",
        )


def _finished(
    w: _Writer, layout: DenseLayout, one_call: frozenset[int], state_first: bool, grad_mode: bool | None
) -> Guards:
    """The guards `w` wrote, compiled: the detailed body when first called, the fast body now (when first called
    where the Python state's check goes in front: `build_guards`' `state_first`). `grad_mode`: the grad mode the
    call must have (None: any), checked first, apart."""
    symbols = tuple(w.bound)
    w.flush()
    w.lines.append("    return {" + ", ".join(f"{s!r}: {s}" for s in symbols) + "}")
    source = "def check(L):\n" + "\n".join(w.lines) + "\n"
    namespace = dict(w.globals)
    detail = _on_first_call(lambda: _compiled(source, namespace, "<subclassaot guards>"))

    def slow(values: Sequence[object], code: int) -> dict[str, int] | str:
        return detail(values)

    # (with subclass torch functions off where every subclass input reads its properties as a plain tensor does)
    fast = Checks(
        steps=tuple(w.fast), names=w.globals, symbols=symbols, subclass_functions_off=_plain_properties(layout.trees)
    )
    pieces, slows = [fast], [slow]
    if grad_mode is not None:
        pieces.insert(0, Checks(steps=(Fails(f"torch.is_grad_enabled() is not {grad_mode}"),), names={"torch": torch}))
        slows.insert(0, slow)
    fast_source, names = _fast_check(pieces, slows)
    if state_first:
        check = _on_first_call(lambda: _compiled(fast_source, names, "<subclassaot guards, fast>"))
    else:
        check = _compiled(fast_source, names, "<subclassaot guards, fast>")
    return Guards(
        source=source,
        check=check,
        symbols=symbols,
        fast_source=fast_source,
        fast=tuple(pieces),
        slow=tuple(slows),
        grad_mode=grad_mode,
        one_call=one_call,
    )


def _compiled(source: str, namespace: dict[str, object], filename: str) -> GuardFn:
    """The `check` that `source` defines, run with globals `namespace`."""
    exec(compile(source, filename, "exec"), namespace)
    return cast(GuardFn, namespace["check"])


def _on_first_call(make: Callable[[], GuardFn]) -> GuardFn:
    """The check `make` compiles, compiled when first called (Note [What The Guards Compare])."""
    made: list[GuardFn] = []

    def check(values: Sequence[object]) -> dict[str, int] | str:
        if not made:
            made.append(make())
        return made[0](values)

    return check


_DISABLED_FUNCTIONS = (torch._C._disabled_torch_function_impl, vars(torch.Tensor)["__torch_function__"].__func__)


def _plain_properties_class(cls: type[torch.Tensor]) -> bool:
    """`cls` reads its properties (dtype, shape, ...) as a plain tensor does (see `_plain_properties`)."""
    return getattr(cls.__torch_function__, "__func__", cls.__torch_function__) in _DISABLED_FUNCTIONS


def _plain_properties(trees: Sequence[SubclassNode | None]) -> bool:
    """Some input is a tensor subclass, and every subclass among them reads its properties (dtype, shape, ...) as a
    plain tensor does: its `__torch_function__` is torch's disabled one or Tensor's default (which returns what the
    property returns)."""
    classes: list[type[torch.Tensor]] = []
    todo = [tree for tree in trees if tree is not None]
    while todo:
        node = todo.pop()
        classes.append(node.cls)
        todo.extend(c for c in node.children if isinstance(c, SubclassNode))
    return bool(classes) and all(_plain_properties_class(cls) for cls in classes)


def _tensor_guards(
    w: _Writer,
    var: str,
    path: str,
    fake: torch.Tensor,
    tree: SubclassNode | None,
    real: torch.Tensor,
    requires_grad: bool | None = None,
    caller: Mapping[str, CallerGuarded] | None = None,
) -> bool:
    """`real`: the compile's tensor at `path` (`fake` traced it). True where the fast body checks it in one C call
    (`_one_call_check`)."""
    known = caller.get(path) if caller else None
    one_call = _one_call_check(w, var, real, fake, requires_grad) if known is None else None
    if one_call is not None:
        w.fast_check(one_call)
        w.one_call.add(var)
    w.detail_only = one_call is not None  # the one call stands for the checks of type, fields, sizes and strides
    if known is None or known.type is not type(real):
        cls = w.constant(type(real))
        w.expect(f"type({var}) is {cls}", path, f"type {type(real).__name__}", f"type({var}).__name__")
    for field in ("dtype", "device", "requires_grad"):
        expected = getattr(fake, field)
        if field == "requires_grad" and requires_grad is not None:
            expected = requires_grad  # the real input's: a compile may give the fake requires_grad on purpose
        if field == "device":
            expected = torch.device(expected)
        if known is not None and getattr(known, field) == expected:
            continue  # See Note [Dynamo Captures, The Pipeline Compiles]
        c = w.constant(expected)
        w.expect(
            f"{var}.{field} == {c}", f"{path}.{field}", expected, f"{var}.{field}", _fast_field(var, field, c, expected)
        )
    if tree is None:
        _bit_guards(w, var, path, real)
    sizes, strides = fake.size(), fake.stride()
    if known is None or len(known.sizes) != fake.dim():
        combined = _static_dims(sizes)  # Note [What The Guards Compare]
        if combined is not None and one_call is None:
            w.fast_check(f"{var}.shape == {combined}")
        w.detail_only = combined is not None or one_call is not None
        w.expect(f"{var}.dim() == {fake.dim()}", f"{path}.dim()", fake.dim(), f"{var}.dim()")
        known = None
    size_dims = [d for d, s in enumerate(sizes) if known is None or not _held(known.sizes[d], s)]
    stride_dims = [d for d, s in enumerate(strides) if known is None or not _held(known.strides[d], s)]
    if size_dims:
        w.line(f"{var}_size = {var}.shape")
    for d in size_dims:
        w.dim(f"{var}_size[{d}]", f"{path}.size({d})", sizes[d])
    w.detail_only = False
    if tree is not None:
        flatten_guarded = known is not None and known.flatten_guarded
        _subclass_guards(w, var, path, tree, fake, real, caller, flatten_guarded, one_call is None)
        return one_call is not None
    _stride_guards(w, var, path, strides, stride_dims, known is None, one_call is None)
    w.dim(f"{var}.storage_offset()", f"{path}.storage_offset()", fake.storage_offset())
    return one_call is not None


def _bit_guards(w: _Writer, var: str, path: str, real: torch.Tensor) -> None:
    """A dense tensor's negative bit (and a complex one's conjugate bit), as the compile's: a backend may compile
    for the bits it was shown (inductor reads the storage as it is), so a changed bit compiles anew. In the fast
    body only where no one-call check (whose dispatch keys hold the bits) stands for them."""
    bits = ("is_neg", "is_conj") if real.is_complex() else ("is_neg",)
    for bit in bits:
        value = bool(getattr(real, bit)())
        c = w.constant(value)
        w.expect(f"{var}.{bit}() == {c}", f"{path}.{bit}()", value, f"{var}.{bit}()", f"{var}.{bit}() is {c}")


def _one_call_check(
    w: _Writer, var: str, real: torch.Tensor, fake: torch.Tensor, requires_grad: bool | None
) -> str | None:
    """The fast body's test of a tensor's type, dtype, device, requires_grad, sizes and strides in one C call, where
    every one of them is static and the compile's tensor has the values the guards expect (then the one call is the
    same predicate, and stricter only in the dispatch keys, a failure of which the detailed body judges); else None
    (Note [What The Guards Compare])."""
    rg = fake.requires_grad if requires_grad is None else requires_grad
    static = _static_dims(fake.size()) is not None and _static_dims(fake.stride()) is not None
    if not static or is_fake(real) or real.layout != torch.strided or not _plain_properties_class(type(real)):
        return None
    same = (real.dtype, real.device, real.requires_grad, real.size(), real.stride()) == (
        fake.dtype,
        torch.device(fake.device),
        rg,
        fake.size(),
        fake.stride(),
    )
    if not same:
        return None
    check = property_check(real)
    return f"{w.constant(check)}({var})" if check(real) else None


def _fast_field(var: str, field: str, c: str, expected: object) -> str:
    """The fast body's test of a tensor's dtype, device or requires_grad: by identity (dtypes and bools are
    singletons), a CPU device by `is_cpu` (a CPU tensor's device has no index); the same predicate as `==`."""
    if field == "device":
        return f"{var}.is_cpu" if expected == torch.device("cpu") else f"{var}.device == {c}"
    return f"{var}.{field} is {c}"


def _static_dims(dims: Sequence[int | torch.SymInt]) -> str | None:
    """`(2, 4)`: source for the tuple of these dims, where every one is a static int; else None."""
    exprs = [symint_expr(d) for d in dims]
    if any(nested_coeff(d) is not None for d in dims) or not all(isinstance(e, int) for e in exprs):
        return None
    return "(" + "".join(f"{int(cast(int, e))}, " for e in exprs) + ")"


def _stride_guards(
    w: _Writer,
    var: str,
    path: str,
    strides: Sequence[int | torch.SymInt],
    stride_dims: Sequence[int],
    every_dim: bool,
    in_fast: bool = True,
) -> None:
    """Each dim's stride checked (or bound), and where every one is static and checked here, all of them at once
    in the fast body (none there: `in_fast` False, a one-call check stands for them; Note [What The Guards
    Compare])."""
    combined = _static_dims(strides) if every_dim else None
    if combined is not None and in_fast:
        w.fast_check(f"{var}.stride() == {combined}")
    w.detail_only = combined is not None
    if stride_dims:
        w.line(f"{var}_stride = {var}.stride()")
    for d in stride_dims:
        w.dim(f"{var}_stride[{d}]", f"{path}.stride({d})", strides[d])
    w.detail_only = False


def _held(guarded: int | None, value: int | torch.SymInt) -> bool:
    """The caller guards this dim to exactly the static value our guard would check."""
    expr = symint_expr(value)
    return guarded is not None and isinstance(expr, int) and expr == guarded


def _subclass_guards(
    w: _Writer,
    var: str,
    path: str,
    tree: SubclassNode,
    fake: torch.Tensor,
    real: torch.Tensor,
    caller: Mapping[str, CallerGuarded] | None = None,
    flatten_guarded: bool = False,
    strides_in_fast: bool = True,
) -> None:
    """`strides_in_fast`: the fast body checks the outer strides here (else a one-call check has)."""
    if not flatten_guarded:  # See Note [Dynamo Captures, The Pipeline Compiles]
        names = tree.flatten_attrs()
        attrs = w.constant(list(names))
        ctx_value = copy.deepcopy(ctx_for_guard(tree.ctx))
        ctx = w.constant(ctx_value)  # Note [What The Guards Compare]
        ctx_names = plain_ctx_names(tree.cls, names)
        # the fast body reads the ctx fields themselves (Note [What The Guards Compare]); none, and an empty ctx:
        # nothing to compare per call
        if ctx_names is not None and (ctx_names or ctx_value != ()):
            fields = "".join(f"{attribute_source(w.constant, var, n)}, " for n in ctx_names)
            w.fast_check(f"({fields}) == {ctx}")
        w.detail_only = ctx_names is not None
        w.line(f"{var}_flat = {var}.__tensor_flatten__()")
        w.check(
            f"list({var}_flat[0]) == {attrs}",
            w.msg(f"{path}: inner tensors expected {' '.join(names)}, got ", Src(f"list({var}_flat[0])")),
        )
        w.check(f"{var}_flat[1] == {ctx}", f"describe_ctx_change({w.constant(path)}, {ctx}, {var}_flat[1])")
        w.detail_only = False
    for k, opaque in enumerate(tree.opaques):  # Note [The Flatten Protocol]: by identity
        opaque_var, expected = f"{var}_o{k}", w.constant(opaque.value)
        w.line(f"{opaque_var} = {attribute_source(w.constant, var, opaque.name)}")
        where = w.constant(f"{path}.{opaque.name}")
        w.check(f"{opaque_var} is {expected}", f"describe_opaque_change({where}, {expected}, {opaque_var})")
    known = caller.get(path) if caller else None
    strides = fake.stride()
    stride_dims = [d for d, s in enumerate(strides) if known is None or not _held(known.strides[d], s)]
    _stride_guards(w, var, path, strides, stride_dims, known is None, strides_in_fast)
    for i, (attr, child) in enumerate(zip(tree.attrs, tree.children, strict=True)):
        inner_var = f"{var}_{i}"
        w.line(f"{inner_var} = {attribute_source(w.constant, var, attr)}")
        inner_fake = getattr(fake, attr)
        inner_tree = child if isinstance(child, SubclassNode) else None
        inner_real = getattr(real, attr)
        _tensor_guards(w, inner_var, child.path, inner_fake, inner_tree, inner_real, None, caller)


def _inference_guards(w: _Writer, layout: DenseLayout, flat: FlatInputs, written: Collection[int]) -> None:
    """Whether each dense leaf the program writes (or that shares a written leaf's alias group: the synthetic base's
    copy is decided by its members), or that is an inference tensor, is one, as the compile's, and so the wrapper of
    each written subclass input (RuntimePlan.inference_wrappers; Note [What The Guards Compare]). A tensor the one C
    call checks (an input or an inner tensor) has it in its dispatch keys already."""
    given = set(written)
    pinned = given.union(*(g.members for g in layout.groups if not given.isdisjoint(g.members)))
    for t, index in enumerate(flat.tensor_indices):
        wrapper = cast(torch.Tensor, flat.values[index])
        if layout.trees[t] is None or given.isdisjoint(layout.leaves_of_input[t]):
            continue
        c, path = w.constant(wrapper.is_inference()), flat.leaves[index].path
        w.detail_only = f"v{index}" in w.one_call
        w.expect(
            f"v{index}.is_inference() == {c}",
            f"{path}.is_inference()",
            wrapper.is_inference(),
            f"v{index}.is_inference()",
        )
        w.detail_only = False
    reals = [leaf for i in flat.tensor_indices for leaf in dense_leaves(cast(torch.Tensor, flat.values[i]))]
    for j, real in enumerate(reals):
        if j not in pinned and not real.is_inference():
            continue
        c = w.constant(real.is_inference())
        leaf, access = layout.leaves[j], _dense_access(layout, flat, j)
        w.detail_only = access in w.one_call  # (its dispatch keys: an inner tensor's too)
        w.expect(
            f"{access}.is_inference() == {c}",
            f"{leaf.path}.is_inference()",
            real.is_inference(),
            f"{access}.is_inference()",
        )
        w.detail_only = False


def _alias_guards(w: _Writer, layout: DenseLayout, flat: FlatInputs, apart: Collection[DenseIndex]) -> None:
    accesses = [_dense_access(layout, flat, j) for j in range(len(layout.leaves))]
    for g in layout.groups:
        if g.whole_storage:
            # The program reaches the whole storage (Note [as_strided On Inputs]): its size decides what it sees.
            leaf, path = accesses[g.members[0]], layout.leaves[g.members[0]].path
            # (freed: fewer bytes than its members' elements, Note [Storage Swaps By Rebinding])
            relation, fewer = ("<", "fewer than ") if g.freed else ("==", "")
            w.check(
                f"{leaf}.untyped_storage().nbytes() {relation} {g.base_numel} * {leaf}.element_size()",
                w.msg(
                    f"{path}: storage of {fewer}{g.base_numel} elements expected, got ",
                    Src(f"{leaf}.untyped_storage().nbytes() // {leaf}.element_size()"),
                ),
            )
    if len(layout.leaves) < 2:
        return
    # (the address of each leaf's StorageImpl: `untyped_storage()._cdata` without making a storage object)
    ids = [f"_storage_id({a})" for a in accesses]
    groups = layout.observed_groups
    # Where no two leaves share storage, the fast body compares the addresses without the list `_st` (which only the
    # groups' checks and the message read): two by `!=`, more as one set display.
    w.detail_only = not groups
    w.line("_st = [" + ", ".join(ids) + "]")
    w.detail_only = False
    distinct = len(layout.leaves) - sum(len(g.members) - 1 for g in groups)
    pattern = "; ".join(" ~ ".join(layout.leaves[m].path for m in g.members) for g in groups) or "none"
    conds = [f"len(set(_st)) == {distinct}"]
    fast = [" != ".join(ids) if len(ids) == 2 else f"len({{{', '.join(ids)}}}) == {distinct}"]
    for g in groups:
        conds += [f"_st[{g.members[0]}] == _st[{m}]" for m in g.members[1:]]
        # Which members are the very same tensor (f(x, x)) is part of the pattern too.
        for i, m in enumerate(g.members):
            for k in range(i):
                same = g.same_as[i] == k or (g.same_as[i] is not None and g.same_as[i] == g.same_as[k])
                conds.append(f"({accesses[m]} is {accesses[g.members[k]]}) == {same}")
    for i, first in enumerate(layout.same_wrapper):
        for k in range(i):
            if layout.trees[i] is not None and layout.trees[k] is not None:
                a, b = f"v{flat.tensor_indices[i]}", f"v{flat.tensor_indices[k]}"
                is_same = first == k or (first is not None and first == layout.same_wrapper[k])
                conds.append(f"({a} is {b}) == {is_same}")
    for i, base in enumerate(layout.view_of):
        if base is not None:  # Note [Aliased Inputs In Training]
            conds.append(f"v{flat.tensor_indices[i]}._base is v{flat.tensor_indices[base]}")
    conds += own_base_guards(layout, flat, accesses)  # Note [Aliased Inputs In Training]
    conds += apart_guards(layout, accesses, apart)  # Note [Inputs Written In Training]
    paths = w.constant(tuple(leaf.path for leaf in layout.leaves))
    w.check(
        " and ".join(conds),
        w.msg(
            f"input aliasing changed: compiled for shared storages [{pattern}], got [",
            Src(f"describe_aliasing({paths}, _st)"),
            "]",
        ),
        None if groups else " and ".join(fast + conds[1:]),
    )


def _nested_int_guards(w: _Writer) -> None:
    # See Note [What The Guards Compare]: nested ints as a pattern.
    firsts: list[tuple[str, str, int]] = []
    for access, label, nested_id in w.nested:
        for first_access, first_label, first_id in firsts:
            same = nested_id == first_id
            relation = "the same nested int as" if same else "a different nested int from"
            w.check(
                f"({access} == {first_access}) == {same}",
                w.msg(f"{label}: expected {relation} {first_label} (the ragged structure of the inputs changed)"),
            )
        if all(nested_id != first_id for _, _, first_id in firsts):
            firsts.append((access, label, nested_id))


def constant_condition(w: _Writer, var: str, value: object) -> str:
    """Guard source that holds when `var` is a value equal to `value`, of the same type. The value is bound as a
    snapshot: a mutable object changed in place after this compile must not equal itself (Note [What The Guards
    Compare])."""
    if isinstance(value, torch.nn.Module):  # Note [State The Program Reads]: the same module object
        return f"{var} is {w.constant(value)}"
    kind = w.constant(type(value))
    if isinstance(value, float) and math.isnan(value):
        return f"type({var}) is {kind} and {var} != {var}"
    try:
        snapshot = copy.deepcopy(value)
    except Exception:  # an object that cannot be copied is compared with itself
        snapshot = value
    return f"type({var}) is {kind} and {var} == {w.constant(snapshot)}"


def _dense_access(layout: DenseLayout, flat: FlatInputs, j: int) -> str:
    leaf = layout.leaves[j]
    t_index = flat.tensor_indices.index(leaf.owner)
    tree = layout.trees[t_index]
    var = f"v{leaf.owner}"
    if tree is None:
        return var
    # Walk the tree to the leaf's position, naming the same locals _subclass_guards assigned.
    return _leaf_var(tree, var, leaf.position)


def _leaf_var(node: SubclassNode, var: str, position: int) -> str:
    for i, child in enumerate(node.children):
        width = child.num_leaves if isinstance(child, SubclassNode) else 1
        if position < width:
            return _leaf_var(child, f"{var}_{i}", position) if isinstance(child, SubclassNode) else f"{var}_{i}"
        position -= width
    raise AssertionError("BUG: leaf position out of range")


def _finite_int(value: object) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, sympy.Integer):
        return int(value)
    return None


def _replaced_symbols(w: _Writer, shape_env: torch.fx.experimental.symbolic_shapes.ShapeEnv) -> None:
    """Bind each symbol a later trace replaced (a backward's `s7 == s3` makes s7 `s3`; a size it branched on makes
    it a constant) by its replacement over the bound symbols: the plan's records, written before, still name it."""
    pending = {s.name: e for s, e in shape_env.replacements.items() if s.name not in w.bound}
    while pending:
        ready = {
            name: expr
            for name, expr in pending.items()
            if {s.name for s in sympy.sympify(expr).free_symbols} <= set(w.bound)
        }
        if not ready:
            return  # replaced by symbols no input binds (unbacked): nothing the plan can read
        for name, expr in ready.items():
            w.bound[name] = python_source(expr)
            w.line(f"{name} = {w.bound[name]}")
            del pending[name]


def _shape_env_guards(w: _Writer, shape_env: torch.fx.experimental.symbolic_shapes.ShapeEnv) -> None:
    ranges = {symbol.name: value_range for symbol, value_range in shape_env.var_to_range.items()}
    for name in list(w.bound):
        value_range = ranges.get(name)
        if value_range is None:
            continue
        lower, upper = _finite_int(value_range.lower), _finite_int(value_range.upper)
        where = w.bound_label[name]
        if lower is not None:
            w.check(
                f"{name} >= {lower}", w.msg(f"{where} = ", Src(name), f" is below {lower}, the least value of {name}")
            )
        if upper is not None:
            w.check(
                f"{name} <= {upper}", w.msg(f"{where} = ", Src(name), f" is above {upper}, the largest value of {name}")
            )
    for guard in shape_env.guards:
        expr = shape_env.simplify(guard.expr)
        if expr == sympy.true:
            continue
        unbound = {s.name for s in expr.free_symbols} - set(w.bound)
        if unbound:
            raise AssertionError(f"BUG: shape guard {expr} uses symbols {sorted(unbound)} no input binds")
        src = python_source(expr)
        words = guard_description(shape_env, guard.expr)
        w.check(src, w.msg(f"shape guard {src} failed" + (f" ({words})" if words else "")))
