"""The Python state a program reads besides its tensor inputs, snapshotted when it is compiled and checked per call.

Input: the compiled callable (a function or an nn.Module) and the nn.Modules among one call's arguments.
Output: `PythonState`: the watched containers with the values read from them at compile time, the ambient torch state,
and `check() -> str | None`, a generated function that returns None while everything is as compiled, else the first
change in words ("closure k[0]: expected 2.0, got 7.0"; "self.training: expected True, got False"); `rewinding`,
around one compile's runs of the program: each run starts from that state, and `Rewind.writes` are the plain values
the program assigns to it, which the entry makes after each call (else refused by name).
Invariants: every container is bound by reference and every compared value is a snapshot (Note [What The Guards
Compare]); a value that cannot be snapshotted is refused by name, never skipped; tensors are not compared here (they are
lifted to inputs and guarded there: Note [State The Program Reads]).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import dataclasses
import enum
import functools
import itertools
import math
import operator
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import cast

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.runtime.python_writes import PythonWrite, WriteHow, apply_writes
from subclassaot.runtime.straight_line import Checks, Fails, check_function
from subclassaot.torch_internals import (
    any_autocast_enabled,
    deterministic_algorithms,
    deterministic_warn_only,
    float32_matmul_precision,
    global_state_check,
    no_torch_function,
    outside_current_modes,
    view_replay_enabled,
)

# Note [State The Program Reads]
# Eager reads on every call what the program names: tensors and Python values alike. A compiled graph bakes in what its
# trace read, so each is either an input of the graph or a guard, or the graph goes stale.
# Tensors are inputs (inputs.py): a compiled module's parameters, buffers and tensor attributes; the tensors a
# function's closure cells and referenced globals hold (`closure.w`, `globals.model.weight`: rebinding the name is
# seen); and the state of modules passed as arguments (`args[0].bn.running_mean`, the module itself an argument leaf
# guarded by identity). Each is lifted to an input with a source path, read, written back and differentiated as in
# eager. A tensor reached twice is lifted once, under its first path; while tracing, a torch-function mode hands the
# stand-in to every op that receives the real tensor, and the outputs get it for one returned or put in a subclass the
# program built without an op (whose own ops, below the mode, would read the real one: refused). A real tensor reached
# some other way (an attribute of an object, a global of another module) is refused by name; a torch.func wrapper is
# judged by the tensor it wraps. torch.cond: a branch reading a tensor it does not take as an operand (any of the
# above, or a tensor the program computed before the call) has it lifted to an operand of the op, as Dynamo does for
# eager's torch.cond: each run of a branch meets such a tensor in its torch-function mode, stops, and the op is called
# again with it appended to the operands (by its stand-in), the branch's ops (and its outputs) given the branch's own
# tensor for it; its gradient is the op's, and a branch writing or returning it raises as torch's rule for an operand.
# Python values are guards: a module's `training` flag, a float attribute, a global, a closure's list element, which
# submodule sits at `seq[1]`, and ambient torch state (grad mode, autocast per device, default dtype, deterministic
# algorithms, matmul precision, view replay mode: the history autograd regenerates for a view written since). Python
# has no hook on reads of a plain attribute, a cell, a global or a list item, so recording them would mean analysing
# bytecode, as Dynamo does. We snapshot instead: at compile time we walk everything
# the program can name (the module tree's `__dict__`s, the closure cells and referenced globals of the function and of
# every user function reachable from it, and what those reach, recursively) and watch it. Over-approximation costs a
# spurious recompile, never a wrong result; what cannot be snapshotted is refused by name. Code (classes, modules,
# builtins, library functions, torch objects) is watched by identity only: monkeypatching a library is out of scope.
# Cheap on every call: the check compares, in C, the objects each container holds now with those it held
# (`all(map(is_, d.values(), V))`, plus keys and lengths); all whole dicts share one line. Identity implies equality for
# an immutable value; only when an identity differs does the slow path compare by value, name the change, and adopt an
# equal new object (`m.scale = 2.0` again) so later calls are fast again. A mutable container must stay the same object.
# Writes: eager's first call runs with the state it finds (the pre-state) and leaves the program's writes (the
# post-state); the next call runs with that. A compile runs the program several times (the analysis's runs, the probes,
# the traces), and each run starts from the pre-state: `rewinding` puts back what the previous run wrote before each run
# (inputs.flatten_call's `call`, where every run of the user's code starts) and after the compile, so no run reads
# another's writes and the guards, snapshotted after the compile, read the pre-state the graph was traced under. What
# one completed run changed is then one of:
#   * plain values (`is_atom`: a SymInt is none) assigned over plain values to the entries of watched containers
#     (attributes, dict and list items, closure cells, globals) or added at the end of a dict or `__dict__`, the same
#     in every run: the entry replays them after each call whose graph returned (runtime/python_writes.py: container
#     by reference, key, value bound as names, never as source text; in the generated runner before each `return`).
#     The next call fails the guard on the pre-state ("self.config.problem_type: expected None, got '...'") and
#     compiles from the post-state: a program that writes what it finds (Hugging Face's `config.problem_type`) then
#     changes nothing and runs one entry; a counter (`self.n += 1`) compiles per call up to `recompile_limit`, then
#     runs eagerly (which writes as eager does);
#   * anything else (an object stored, a list appended, a key removed, a tensor, a value that differs between the
#     compile's runs, over fake tensors or in another grad mode): refused by name, the graph cannot replay it.
# A call that raises makes no write (its error is eager's; eager leaves the writes it made before raising). Modules
# passed as arguments are walked like the compiled one. Under torch.compile Dynamo guards all of this itself, and
# CompileConfig.python_state_guards = False turns these guards off for that path.
# Ambient state in one call: five of the ambient reads (grad mode, any autocast on, default dtype, deterministic
# algorithms and their warn-only flag) are five C calls per call, each several times its cost alone inside a training
# step (the backward in between leaves them cold). Dynamo's GlobalStateGuard compares a snapshot of all of them in one
# C call; where no autocast is on at compile time it stands for the five: it compares grad mode, default dtype, both
# deterministic flags and every device's autocast flag (a superset of `_is_any_autocast_enabled`'s devices: tested),
# so its passing implies theirs. It compares more (the thread count, torch-function enablement, autocast's cache flag,
# the TF32 flags), so its failure is no failure of ours: the slow path reads the five (`describe_ambient`) and fails
# only where they differ; where they do not, it takes a new snapshot, adopted where its fields are the compiled ones
# (a changed thread count costs one slow call, not every call). Matmul precision (which the snapshot sees only as TF32
# on or off) is still read apart, and an entry compiled under autocast compares `read_ambient().autocast` as before.

_MISSING = object()
_MAX_VALUES = 50_000  # values walked per compile (a large model has tens of thousands); past it, refused by name
_LIBRARY_ROOTS = frozenset({"builtins", "subclassaot", "policies"}) | frozenset(sys.stdlib_module_names)
_MODULE_SKIP = frozenset({"_parameters", "_buffers"})  # lifted to inputs and guarded there
_ATOM_TYPES: tuple[type, ...] = (
    type(None),
    bool,
    int,
    float,
    complex,
    str,
    bytes,
    torch.dtype,
    torch.device,
    torch.layout,
    torch.memory_format,
    range,
    slice,
    type(Ellipsis),
    enum.Enum,
)


class WatchKind(enum.Enum):
    DICT = "dict"  # a whole dict: length, keys in order, values (a module's or an object's __dict__, a dict value)
    PARTIAL = "partial"  # some keys of a dict (the names a function reads from its globals)
    SEQ = "seq"  # a list's items
    CELLS = "cells"  # a function's closure cells, by index
    ATTRS = "attrs"  # named attributes of an object without a __dict__ (a slots dataclass)
    SET = "set"  # a set, compared by value


class Compare(enum.Enum):
    VALUE = "value"  # an immutable value: equal type and value
    SAME = "same"  # a mutable container, module or code: the very same object
    TENSOR = "tensor"  # lifted to an input and guarded there: only "still a tensor" here


@dataclass(frozen=True, slots=True, kw_only=True)
class Watched:
    label: str  # where the container is reached from ("self.lin", "closure cfg")
    kind: WatchKind
    obj: object  # the container read on every call (bound by reference)
    keys: tuple[object, ...]  # DICT/PARTIAL: keys in order; SEQ/CELLS: indices; ATTRS: names; SET: ()
    values: list[object]  # per key, the object read at compile time; replaced by an equal one on the slow path
    compares: tuple[Compare, ...]  # per key
    labels: tuple[str, ...]  # per key, the user-facing path of the value ("closure k[0]")
    frozen: frozenset[object] = frozenset()  # SET: the snapshot


@dataclass(frozen=True, slots=True, kw_only=True)
class Ambient:
    grad: bool
    autocast: tuple[tuple[str, bool, torch.dtype], ...]  # per device type: (device, enabled, dtype)
    default_dtype: torch.dtype
    deterministic: tuple[bool, bool]  # (enabled, warn_only)
    matmul_precision: str
    view_replay: bool  # torch._C._is_view_replay_enabled(): the history a view written since gets


@dataclass(frozen=True, slots=True, kw_only=True)
class PythonState:
    watched: tuple[Watched, ...]  # in walk order: a container before what it holds
    ambient: Ambient | None  # None: not guarded (CompileConfig.python_state_guards=False)
    source: str  # the generated check, printable
    check: Callable[[], str | None]
    checks: Checks  # `check`'s checks, a piece of one function (guards.with_python_state puts them first)
    slow: Callable[[int], str | None]  # where one fails (its code): the change in words, or None where none changed


_AUTOCAST_DEVICES = ("cpu", "cuda")


def read_ambient() -> Ambient:
    return Ambient(
        grad=torch.is_grad_enabled(),
        autocast=tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _AUTOCAST_DEVICES),
        default_dtype=torch.get_default_dtype(),
        deterministic=(
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        ),
        matmul_precision=torch.get_float32_matmul_precision(),
        view_replay=view_replay_enabled(),
    )


def describe_ambient(expected: Ambient) -> str | None:
    """The first ambient setting that differs from `expected`, in words; None when all are equal."""
    now = read_ambient()
    if now.grad != expected.grad:
        return f"torch.is_grad_enabled(): expected {expected.grad}, got {now.grad}"
    for (device, on, dtype), (_, on_now, dtype_now) in zip(expected.autocast, now.autocast, strict=True):
        if on != on_now:
            return f"torch.is_autocast_enabled({device!r}): expected {on}, got {on_now}"
        if on and dtype != dtype_now:
            return f"torch.get_autocast_dtype({device!r}): expected {dtype}, got {dtype_now}"
    if now.default_dtype != expected.default_dtype:
        return f"torch.get_default_dtype(): expected {expected.default_dtype}, got {now.default_dtype}"
    if now.deterministic != expected.deterministic:
        return f"torch.are_deterministic_algorithms_enabled() (warn_only): expected {expected.deterministic}, got {now.deterministic}"
    if now.matmul_precision != expected.matmul_precision:
        return (
            f"torch.get_float32_matmul_precision(): expected {expected.matmul_precision!r}, "
            f"got {now.matmul_precision!r}"
        )
    if now.view_replay != expected.view_replay:
        return f"torch._C._is_view_replay_enabled(): expected {expected.view_replay}, got {now.view_replay}"
    return None


# ---------------------------------------------------------------------------------------------------------------
# The walk: what the program can name, at compile time
# ---------------------------------------------------------------------------------------------------------------


def is_atom(value: object) -> bool:
    """An immutable value compared by value: scalars, strings, dtypes, devices, enums, tuples of them, and hashable
    standard-library values without attributes (a date, a Decimal, a Path, a compiled regex)."""
    if isinstance(value, _ATOM_TYPES):
        return True
    if isinstance(value, tuple | frozenset):  # a NamedTuple too: immutable, compared by value
        return all(is_atom(v) for v in cast(tuple[object, ...], value))
    if type(value).__module__.partition(".")[0] in sys.stdlib_module_names and not hasattr(value, "__dict__"):
        return getattr(type(value), "__hash__", None) is not None
    return False


def _is_library(obj: object) -> bool:
    """Code that ships in a package (stdlib, site-packages, torch, this library), as opposed to the user's."""
    name = getattr(obj, "__module__", None) if isinstance(obj, type | types.FunctionType) else type(obj).__module__
    top = (name or "builtins").partition(".")[0]
    if top in _LIBRARY_ROOTS or top == "torch":
        return True
    module = sys.modules.get(top)
    path = getattr(module, "__file__", None) or ""
    return "site-packages" in path or "dist-packages" in path


def _is_code(value: object) -> bool:
    """Watched by identity only (Note [State The Program Reads])."""
    if isinstance(value, type | types.ModuleType | types.BuiltinFunctionType | types.BuiltinMethodType):
        return True
    if isinstance(value, types.FunctionType | types.MethodType | functools.partial):
        return _is_library(value.__func__ if isinstance(value, types.MethodType) else value)
    # torch objects, loggers and locks, and compiled functions of ours (`model.forward = subclassaot.compile(
    # model.forward)` puts one in the module a bound method reaches; its cache of entries is no state the program
    # reads): they do not change what the program computes
    return type(value).__module__.partition(".")[0] in ("torch", "logging", "threading", "_thread", "subclassaot")


def _item_labels(label: str, keys: Sequence[object]) -> tuple[str, ...]:
    return tuple(f"{label}[{k!r}]" for k in keys)


def _attr_labels(label: str, keys: Sequence[object]) -> tuple[str, ...]:
    return tuple(f"{label}.{k}" for k in keys)


def slot_names(cls: type) -> list[str]:
    """The `__slots__` names `cls` and its bases declare (not `__dict__` or `__weakref__`), bases' after its own."""
    names: list[str] = []
    for klass in cls.__mro__:
        declared = vars(klass).get("__slots__", ())
        names += [declared] if isinstance(declared, str) else list(declared)
    return [n for n in dict.fromkeys(names) if not n.startswith("__")]


class _Walk:
    def __init__(self) -> None:
        self.watched: list[Watched] = []
        self.modules: list[torch.nn.Module] = []
        self.module_labels: list[str] = []
        self.empties: list[object] = []
        self.empty_labels: list[str] = []
        self.seen: set[int] = set()
        self.keep: list[object] = []  # keeps walked objects alive so their ids stay unique during the walk
        self.count = 0
        self.code_words: set[str] = set()  # the names and string constants of the user code walked

    def value(self, value: object, label: str) -> Compare:
        """Classify one value read from a watched container, and watch what it holds."""
        self.count += 1
        if self.count > _MAX_VALUES:
            raise UnsupportedError(
                f"{label}: the program reaches more than {_MAX_VALUES} Python values (through closures, globals and "
                "module attributes); subclassaot watches every value a compiled program can read, so that a change "
                "recompiles instead of reusing a stale graph, and refuses to watch this many. Pass large data as "
                "arguments, or keep it out of the function's globals and closures"
            )
        if isinstance(value, torch.Tensor):
            return Compare.TENSOR
        if is_atom(value):
            return Compare.VALUE
        if isinstance(value, torch.nn.Module):
            self.module(value, label)
        elif _is_code(value):
            pass
        elif isinstance(value, types.FunctionType):
            self.function(value, label)
        elif isinstance(value, types.MethodType):
            self.value(value.__self__, f"{label}.__self__")
            self.value(value.__func__, label)
        elif isinstance(value, functools.partial):
            self.value(value.func, label)
            self.value(value.args, f"{label}.args")
            self.value(value.keywords, f"{label}.keywords")
        elif isinstance(value, tuple):  # a NamedTuple too: its items are what can change
            for i, item in enumerate(cast(tuple[object, ...], value)):
                self.value(item, f"{label}[{i}]")
        elif isinstance(value, dict):
            self.container(WatchKind.DICT, value, label, _item_labels(label, tuple(value)), tuple(value.values()))
        elif isinstance(value, list | collections.deque):
            keys = tuple(range(len(value)))
            self.container(WatchKind.SEQ, value, label, _item_labels(label, keys), tuple(value))
        elif isinstance(value, set | frozenset):
            self.set_(value, label)
        else:
            self.instance(value, label)
        return Compare.SAME

    def instance(self, value: object, label: str) -> None:
        attrs = getattr(value, "__dict__", None)
        slots = [f.name for f in dataclasses.fields(value)] if dataclasses.is_dataclass(value) else []
        slots = [
            s
            for s in dict.fromkeys(slots + slot_names(type(value)))
            if (attrs is None or s not in attrs) and not s.startswith("__")
        ]
        if attrs is None and not slots:
            raise UnsupportedError(
                f"{label}: the program can read this {type(value).__qualname__} object, which has no attributes "
                "subclassaot can snapshot, so it cannot tell whether it changed between calls (a compiled graph "
                "bakes in what the trace read). Pass what the program needs from it as an argument (a tensor or a "
                "Python scalar), or keep it out of the function's closures and globals"
            )
        if isinstance(attrs, dict):
            self.container(WatchKind.DICT, attrs, label, _attr_labels(label, tuple(attrs)), tuple(attrs.values()))
        if slots:
            got = tuple(getattr(value, s, _MISSING) for s in slots)
            self.container(WatchKind.ATTRS, value, label, _attr_labels(label, slots), got, keys=tuple(slots))

    def set_(self, value: set[object] | frozenset[object], label: str) -> None:
        if id(value) in self.seen:
            return
        self.seen.add(id(value))
        self.keep.append(value)
        if not all(is_atom(v) for v in value):
            raise UnsupportedError(
                f"{label}: a set holding objects other than plain values; subclassaot cannot snapshot it to tell "
                "whether it changed between calls. Use a tuple or pass the values as arguments"
            )
        self.watched.append(
            Watched(
                label=label,
                kind=WatchKind.SET,
                obj=value,
                keys=(),
                values=[],
                compares=(),
                labels=(),
                frozen=frozenset(value),
            )
        )

    def container(
        self,
        kind: WatchKind,
        obj: object,
        label: str,
        labels: tuple[str, ...],
        values: tuple[object, ...],
        *,
        keys: tuple[object, ...] | None = None,
    ) -> None:
        """Watch one container: its entries' identities per call, and (recursively) what they hold."""
        if id(obj) in self.seen:
            return
        self.seen.add(id(obj))
        self.keep.append(obj)
        if keys is None:
            keys = tuple(cast(dict[object, object], obj)) if kind is WatchKind.DICT else tuple(range(len(values)))
        index = len(self.watched)
        self.watched.append(Watched(label=label, kind=kind, obj=obj, keys=(), values=[], compares=(), labels=()))
        compares = tuple(self.value(v, lab) for v, lab in zip(values, labels, strict=True))
        self.watched[index] = Watched(
            label=label,
            kind=kind,
            obj=obj,
            keys=keys,
            values=list(values),
            compares=compares,
            labels=labels,
        )

    def module(self, module: torch.nn.Module, label: str) -> None:
        if id(module) in self.seen:
            return
        self.seen.add(id(module))
        self.modules.append(module)
        self.module_labels.append(label)
        attrs = vars(module)
        index = len(self.watched)  # the module's own line before its children's, so a change reads top-down
        self.watched.append(
            Watched(label=label, kind=WatchKind.DICT, obj=attrs, keys=(), values=[], compares=(), labels=())
        )
        keys, values, compares, labels = [], [], [], []
        for key, value in attrs.items():
            keys.append(key)
            values.append(value)
            if key in _MODULE_SKIP:
                compares.append(Compare.SAME)
                labels.append(f"{label}.{key}")
            elif key == "_modules":
                self.submodules(value, label)
                compares.append(Compare.SAME)
                labels.append(f"{label}.{key}")
            elif key.startswith("_") and isinstance(value, dict | set) and not value:
                self.empties.append(value)  # a hook dict or name set, empty as usual: one check for all
                self.empty_labels.append(f"{label}.{key}")
                compares.append(Compare.SAME)
                labels.append(f"{label}.{key}")
            else:
                labels.append(f"{label}.{key}")
                compares.append(self.value(value, labels[-1]))
        self.watched[index] = Watched(
            label=label,
            kind=WatchKind.DICT,
            obj=attrs,
            keys=tuple(keys),
            values=values,
            compares=tuple(compares),
            labels=tuple(labels),
        )
        for cls in type(module).__mro__:
            if _is_library(cls):
                break
            for member in vars(cls).values():
                inner = member.__func__ if isinstance(member, staticmethod | classmethod) else member
                if isinstance(inner, types.FunctionType):
                    self.function(inner, f"{cls.__qualname__}.{inner.__name__}")

    def submodules(self, children: dict[str, torch.nn.Module | None], label: str) -> None:
        self.seen.add(id(children))
        labels = tuple(f"{label}[{k}]" if k.isdigit() else f"{label}.{k}" for k in children)
        compares = tuple(self.value(v, lab) for v, lab in zip(children.values(), labels, strict=True))
        self.watched.append(
            Watched(
                label=label,
                kind=WatchKind.DICT,
                obj=children,
                keys=tuple(children),
                values=list(children.values()),
                compares=compares,
                labels=labels,
            )
        )

    def function(self, fn: types.FunctionType, label: str) -> None:
        """A user function: its closure cells and the globals its code names (helpers it calls are walked too)."""
        if id(fn) in self.seen:
            return
        self.seen.add(id(fn))
        self.keep.append(fn)
        self.code_words.update(code_words(fn.__code__))
        cells = fn.__closure__ or ()
        if cells:
            got = tuple(_cell_value(c) for c in cells)
            self.watched.append(
                Watched(label=label, kind=WatchKind.CELLS, obj=cells, keys=(), values=[], compares=(), labels=())
            )
            index = len(self.watched) - 1
            labels = tuple(f"closure {name}" for name in fn.__code__.co_freevars)
            compares = tuple(
                Compare.SAME if v is _MISSING else self.value(v, lab) for v, lab in zip(got, labels, strict=True)
            )
            self.watched[index] = Watched(
                label=label,
                kind=WatchKind.CELLS,
                obj=cells,
                keys=tuple(range(len(cells))),
                values=list(got),
                compares=compares,
                labels=labels,
            )
        fn_globals = fn.__globals__
        names = tuple(n for n in dict.fromkeys(global_names(fn.__code__)) if n in fn_globals)
        if names and id(fn_globals) not in self.seen:
            self.partial_globals(fn_globals, names, label)
        elif names:
            self.extend_globals(fn_globals, names)

    def partial_globals(self, fn_globals: dict[str, object], names: tuple[str, ...], label: str) -> None:
        self.seen.add(id(fn_globals))
        self.watched.append(
            Watched(label=label, kind=WatchKind.PARTIAL, obj=fn_globals, keys=(), values=[], compares=(), labels=())
        )
        self.extend_globals(fn_globals, names)

    def extend_globals(self, fn_globals: dict[str, object], names: tuple[str, ...]) -> None:
        """Add names to the PARTIAL watch of this globals dict (one watch per module's globals). The entries are
        in place before their values are walked: walking a helper may add names to this same watch."""
        index = next(i for i, w in enumerate(self.watched) if w.obj is fn_globals)
        old = self.watched[index]
        new = tuple(n for n in names if n not in old.keys)
        labels = tuple(f"globals.{n}" for n in new)
        start = len(old.keys)
        self.watched[index] = dataclasses.replace(
            old,
            keys=old.keys + new,
            values=[*old.values, *(fn_globals[n] for n in new)],
            compares=old.compares + (Compare.SAME,) * len(new),
            labels=old.labels + labels,
        )
        compares = [self.value(fn_globals[n], lab) for n, lab in zip(new, labels, strict=True)]
        current = self.watched[index]
        merged = list(current.compares)
        merged[start : start + len(new)] = compares
        self.watched[index] = dataclasses.replace(current, compares=tuple(merged))


def _cell_value(cell: types.CellType) -> object:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell (assigned later in the enclosing function)
        return _MISSING


def global_names(code: types.CodeType) -> Iterator[str]:
    """The names `code` and the code objects nested in it look up (globals and attributes among them)."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from global_names(const)


def code_words(code: types.CodeType) -> Iterator[str]:
    """The names `code` and the code objects nested in it look up, and their string constants (`x.attr`,
    `hasattr(x, "attr")`)."""
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, str):
            yield const
        elif isinstance(const, types.CodeType):
            yield from code_words(const)


def snapshot(
    fn: Callable[..., object],
    args: Sequence[object],
    kwargs: dict[str, object],
    *,
    guard: bool = True,
    compiled: bool = True,
) -> PythonState:
    """Walk the state `fn` can read (the module tree, closures and globals, modules among the arguments) now.
    `compiled=False`: its `check` is compiled when first called."""
    walk = _walked(fn, args, kwargs, guard)
    ambient = read_ambient() if guard else None
    return _generate(walk, ambient, compiled)


def watched_now(
    fn: Callable[..., object], args: Sequence[object], kwargs: dict[str, object], *, guard: bool = True
) -> tuple[Watched, ...]:
    """What `snapshot` watches, without the check it generates (for `check_unchanged`)."""
    return tuple(_walked(fn, args, kwargs, guard).watched)


def _walked(fn: Callable[..., object], args: Sequence[object], kwargs: dict[str, object], guard: bool) -> _Walk:
    walk = _Walk()
    if guard:
        if isinstance(fn, torch.nn.Module):
            walk.module(fn, "self")
        elif isinstance(fn, types.FunctionType):
            walk.function(fn, getattr(fn, "__qualname__", "fn"))
        elif isinstance(fn, types.MethodType | functools.partial):
            walk.value(fn, getattr(fn, "__qualname__", "fn"))
        leaves, _ = pytree.tree_flatten_with_path((tuple(args), kwargs))
        labelled = [
            (("args", "kwargs")[cast(pytree.SequenceKey[object], path[0]).idx], path[1:], leaf) for path, leaf in leaves
        ]
        for root, rest, leaf in labelled:
            if isinstance(leaf, torch.nn.Module):
                walk.module(leaf, root + pytree.keystr(tuple(rest)))
        for root, rest, leaf in labelled:
            if attrs := _attributes_set_by_caller(leaf, walk.code_words):
                # the trace's stand-in lacks them (hasattr(x, "test") answered False), and the guards compare no
                # tensor input's attribute: refused where the user code walked names one (under torch.compile,
                # Dynamo reads and guards them itself); attributes no code names (library code reads none of a
                # caller's public ones) are left as they are
                raise UnsupportedError(
                    f"{root}{pytree.keystr(tuple(rest))}: this tensor argument carries Python attributes "
                    f"({', '.join(sorted(attrs))}) that the compiled program could read (hasattr, x.attr) but the "
                    "trace does not see; pass their values as arguments instead"
                )
    return walk


def tensor_attributes(t: object) -> frozenset[str]:
    """The public Python attributes set on a tensor object (`x.test = None`), not those a library marks privately."""
    return frozenset(k for k in getattr(t, "__dict__", {}) if not k.startswith("_"))


def attributes_set_in_trace(t: object) -> frozenset[str]:
    """The public Python attributes the program set on a tensor it traced (`out.flag = 1`): a tracer's stand-in (a
    FunctionalTensor, a FakeTensor) carries its own (`elem`, `fake_mode`, ...), the same names on every one."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    if isinstance(t, FunctionalTensor):
        return tensor_attributes(t) - {"elem"}
    tracers = {"fake_mode", "constant", "pytype", "dispatch_keys", "real_tensor", "fake_device"}
    if isinstance(t, FakeTensor):
        return tensor_attributes(t) - tracers
    if not (tensor_attributes(t) - tracers):
        return frozenset()  # (a subclass traced with only the tracer's own: none set, no wrapper rebuilt)
    return _attributes_set_by_caller(t, set(tensor_attributes(t) - tracers))


def _attributes_set_by_caller(t: object, words: set[str] | None = None) -> frozenset[str]:
    """A tensor argument's public attributes that the user code names (`words`) and its type does not carry: all of a
    plain tensor's; of a subclass, those a copy rebuilt from its flattening lacks (its inner tensors and context carry
    the rest; a subclass whose flattening fails is the protocol check's to name, which runs later). `words` None:
    every attribute."""
    attrs = tensor_attributes(t) if words is None else tensor_attributes(t) & words
    if not attrs or type(t) in (torch.Tensor, torch.nn.Parameter):
        return attrs
    if not is_traceable_subclass(t):
        return frozenset()
    try:  # (outside the trace's modes and grad: a rebuilt wrapper is the pipeline's, no op or leaf of the program's)
        names, ctx = t.__tensor_flatten__()
        if not (attrs := attrs - set(names)):
            return attrs  # (its inner tensors' names alone: no wrapper rebuilt)
        with outside_current_modes(), no_torch_function(), torch.no_grad():
            inner = {n: getattr(t, n) for n in names}
            size, stride = cast(torch.Tensor, t).size(), cast(torch.Tensor, t).stride()
            rebuilt = type(t).__tensor_unflatten__(inner, ctx, size, stride)
    except Exception:
        return frozenset()
    return attrs - tensor_attributes(rebuilt)


# ---------------------------------------------------------------------------------------------------------------
# The per-call check: generated, one line per watched container; the slow path names the change
# ---------------------------------------------------------------------------------------------------------------


def _generate(walk: _Walk, ambient: Ambient | None, compiled: bool = True) -> PythonState:
    watched = tuple(walk.watched)
    names: dict[str, object] = {
        "torch": torch,
        "is_": operator.is_,
        "_cell": operator.attrgetter("cell_contents"),
        "chain": itertools.chain,
    }

    def bind(value: object) -> str:
        name = f"_s{len(names)}"  # (the state's own names: Note [Straight-Line Runners])
        names[name] = value
        return name

    # Each check fails with the index of what it reads (-1 the ambient state, -2 anything else): `_slow`'s `failed`.
    steps: list[Fails] = []
    one_call = _global_state(ambient)
    if ambient is not None:
        steps += _ambient_checks(ambient, bind, one_call)
    if walk.modules:
        mods, types_ = bind(tuple(walk.modules)), bind(tuple(type(m) for m in walk.modules))
        steps.append(Fails(f"not all(map(is_, map(type, {mods}), {types_}))", -2))
    if walk.empties:
        steps.append(Fails(f"any({bind(tuple(walk.empties))})", -2))
    dicts = [w for w in watched if w.kind is WatchKind.DICT]
    batch = _dict_batch(dicts)
    if dicts:
        # Every whole dict at once (Note [State The Program Reads]): lengths, values, keys.
        d, lens = bind(tuple(w.obj for w in dicts)), bind(tuple(len(w.keys) for w in dicts))
        v, k = bind(batch), bind([key for w in dicts for key in w.keys])
        steps.append(
            Fails(
                f"tuple(map(len, {d})) != {lens} or not all(map(is_, chain(*map(dict.values, {d})), {v})) "
                f"or not all(map(is_, chain(*{d}), {k}))",
                -2,
            )
        )
    for i, w in enumerate(watched):
        o, v = bind(w.obj), bind(w.values)
        if w.kind is WatchKind.DICT:
            continue
        steps.append(Fails(f"not ({_watch_condition(w, o, v, bind)})", i))
    checks = Checks(steps=tuple(steps), names=names, catch=True)
    source, namespace = check_function(
        "check", "", [checks], lambda _, code: f"return _slow({code})", ["    return None"], bind_symbols=False
    )
    modules, module_types = tuple(walk.modules), tuple(type(m) for m in walk.modules)
    labels, empties, empty_labels = tuple(walk.module_labels), tuple(walk.empties), tuple(walk.empty_labels)

    def slow(failed: int) -> str | None:
        reason = _slow(watched, modules, module_types, labels, empties, empty_labels, ambient, failed=failed)
        if reason is None:  # equal new objects were adopted: the batched identity list follows them
            batch[:] = _dict_batch(dicts)
            if one_call is not None and failed == -1 and not one_call[0][0]():
                _adopt_global_state(one_call)
        return reason

    namespace["_slow"] = slow

    def compiled_check() -> Callable[[], str | None]:
        if "check" not in namespace:
            exec(compile(source, "<subclassaot python state guards>", "exec"), namespace)
        return cast(Callable[[], "str | None"], namespace["check"])

    def check_on_first_call() -> str | None:
        return compiled_check()()

    check = compiled_check() if compiled else check_on_first_call
    return PythonState(watched=watched, ambient=ambient, source=source, check=check, checks=checks, slow=slow)


def _global_state(ambient: Ambient | None) -> tuple[list[Callable[[], bool]], tuple[object, ...]] | None:
    """The one-call check of the ambient state (Note [State The Program Reads]), in a list the slow path may replace
    it in, with the snapshot's fields; None where it cannot stand for the five reads of `ambient` (autocast on,
    another torch)."""
    if ambient is None or any(on for _, on, _ in ambient.autocast):
        return None
    made = global_state_check()
    if made is None or read_ambient() != ambient:  # (the snapshot and `ambient` taken apart: not the same state)
        return None
    check, fields = made
    grad, _, enabled, warn_only, autocast = fields
    if (grad, enabled, warn_only, autocast) != (ambient.grad, *ambient.deterministic, False):
        return None
    return [check], fields


def _adopt_global_state(one_call: tuple[list[Callable[[], bool]], tuple[object, ...]]) -> None:
    """After the five reads passed where the one-call check failed: a new snapshot, adopted where its fields are the
    compiled ones (Note [State The Program Reads])."""
    made = global_state_check()
    if made is not None and made[1] == one_call[1]:
        one_call[0][0] = made[0]


def _ambient_checks(
    ambient: Ambient,
    bind: Callable[[object], str],
    one_call: tuple[list[Callable[[], bool]], tuple[object, ...]] | None = None,
) -> list[Fails]:
    """The generated checks of the ambient state (grad mode, autocast, default dtype, determinism, matmul
    precision): each fails with -1. `one_call`: the five reads in one call (Note [State The Program Reads])."""
    precision = bind(ambient.matmul_precision)
    replay = Fails(f"{bind(view_replay_enabled)}() is not {bind(ambient.view_replay)}", -1)
    if one_call is not None:
        return [
            Fails(f"not {bind(one_call[0])}[0]()", -1),
            Fails(f"{bind(float32_matmul_precision)}() != {precision}", -1),
            replay,
        ]
    checks = [Fails(f"torch.is_grad_enabled() is not {bind(ambient.grad)}", -1)]
    if not any(on for _, on, _ in ambient.autocast):
        checks.append(Fails(f"{bind(any_autocast_enabled)}()", -1))
    else:
        checks.append(Fails(f"{bind(read_ambient)}().autocast != {bind(ambient.autocast)}", -1))
    checks.append(Fails(f"torch.get_default_dtype() is not {bind(ambient.default_dtype)}", -1))
    enabled, warn_only = ambient.deterministic
    checks.append(
        Fails(
            f"{bind(deterministic_algorithms)}() is not {bind(enabled)} or "
            f"{bind(deterministic_warn_only)}() is not {bind(warn_only)}",
            -1,
        )
    )
    checks.append(Fails(f"{bind(float32_matmul_precision)}() != {precision}", -1))
    checks.append(replay)
    return checks


def _watch_condition(w: Watched, o: str, v: str, bind: Callable[[object], str]) -> str:
    """The generated condition that `w` (bound as `o`, its values as `v`) is unchanged; a DICT is checked batched."""
    if w.kind is WatchKind.PARTIAL:
        missing = bind((_MISSING,) * len(w.keys))
        return f"all(map(is_, map({o}.get, {bind(w.keys)}, {missing}), {v}))"
    if w.kind is WatchKind.SEQ:
        return f"len({o}) == {len(w.keys)} and all(map(is_, {o}, {v}))"
    if w.kind is WatchKind.CELLS:
        return f"all(map(is_, map(_cell, {o}), {v}))"
    if w.kind is WatchKind.ATTRS:
        return f"all(map(is_, map(getattr, {bind((w.obj,) * len(w.keys))}, {bind(w.keys)}), {v}))"
    return f"{o} == {bind(w.frozen)}"


def _dict_batch(dicts: Sequence[Watched]) -> list[object]:
    return [value for w in dicts for value in w.values]


def _slow(
    watched: tuple[Watched, ...],
    modules: Sequence[torch.nn.Module],
    module_types: Sequence[type],
    module_labels: Sequence[str],
    empties: Sequence[object],
    empty_labels: Sequence[str],
    ambient: Ambient | None,
    *,
    failed: int,
) -> str | None:
    """The change in words, or None when every value from the failed check on is equal to its snapshot (equal new
    objects are adopted). `failed`: the watched index whose identity check failed; -1 ambient, -2 anything else."""
    if ambient is not None and failed < 0:
        reason = describe_ambient(ambient)
        if reason is not None:
            return reason
    for module, cls, label in zip(modules, module_types, module_labels, strict=True):
        if type(module) is not cls:
            return f"{label}: expected {cls.__qualname__}, got {type(module).__qualname__}"
    for w in watched[max(failed, 0) :]:
        reason = describe_watched(w)
        if reason is not None:
            return reason
    for container, label in zip(empties, empty_labels, strict=True):
        if container:
            return f"{label}: expected no entries (no hooks), got {len(cast(dict[object, object], container))}"
    return None


def describe_watched(w: Watched, *, after_trace: bool = False) -> str | None:
    """Compare one container with its snapshot by value; adopt equal new immutable values; else name the change.
    `after_trace`: the check after a compile, which lets the trace's own bookkeeping pass (an import it ran, a
    container rebuilt with the same items)."""
    if w.kind is WatchKind.SET:
        now = frozenset(cast(set[object], w.obj))
        return None if now == w.frozen else f"{w.label}: expected {set(w.frozen)!r}, got {set(now)!r}"
    now_keys, now_values = _read(w)
    if now_keys != w.keys:
        if w.kind is WatchKind.SEQ:
            return f"{w.label}: expected length {len(w.keys)}, got {len(now_keys)}"
        added = [k for k in now_keys if k not in w.keys]
        removed = [k for k in w.keys if k not in now_keys]
        if added or removed:
            return f"{w.label}: names added {added}, removed {removed}"
        return f"{w.label}: the order of its entries changed"
    adopted = list(w.values)
    for i, (old, new, how, label) in enumerate(zip(w.values, now_values, w.compares, w.labels, strict=True)):
        if new is old or (after_trace and types.ModuleType in (type(new), type(old))):
            continue
        reason = _differs(old, new, how, label, after_trace)
        if reason is not None:
            return reason
        adopted[i] = new
    w.values[:] = adopted  # equal new objects: later calls pass the identity check (a race only costs a slow call)
    return None


def _read(w: Watched) -> tuple[tuple[object, ...], tuple[object, ...]]:
    obj = w.obj
    if w.kind is WatchKind.DICT:
        d = cast(dict[object, object], obj)
        return tuple(d), tuple(d.values())
    if w.kind is WatchKind.PARTIAL:
        d = cast(dict[object, object], obj)
        return w.keys, tuple(d.get(k, _MISSING) for k in w.keys)
    if w.kind is WatchKind.SEQ:
        seq = cast(list[object], obj)
        return tuple(range(len(seq))), tuple(seq)
    if w.kind is WatchKind.CELLS:
        return w.keys, tuple(_cell_value(c) for c in cast(tuple[types.CellType, ...], obj))
    return w.keys, tuple(getattr(obj, cast(str, k), _MISSING) for k in w.keys)


def _show(value: object) -> str:
    if value is _MISSING:
        return "<unset>"
    if isinstance(value, torch.nn.Module) or not is_atom(value):
        return type(value).__qualname__
    return repr(value)


def _same_items(old: object, new: object) -> bool:
    """A list, tuple or dict rebuilt with the very same items (an RNN's `_flat_weights`, rebuilt when its weights
    are set): while tracing, this is no change the program made to the state it reads."""
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() == new.keys() and all(old[k] is new[k] for k in old)
    if isinstance(old, list | tuple) and isinstance(new, list | tuple):
        return len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True))
    return False


def _differs(old: object, new: object, how: Compare, label: str, lenient: bool = False) -> str | None:
    if how is Compare.TENSOR:
        return None if isinstance(new, torch.Tensor) else f"{label}: expected a tensor, got {_show(new)}"
    if how is Compare.VALUE and type(new) is type(old):
        if isinstance(old, float) and math.isnan(old) and math.isnan(cast(float, new)):
            return None
        try:
            if bool(old == new):
                return None
        except Exception:  # an __eq__ that raises: not equal
            pass
        return f"{label}: expected {_show(old)}, got {_show(new)}"
    if how is Compare.SAME and type(new) is type(old):
        if lenient and _same_items(old, new):
            return None
        return f"{label}: expected the {_show(old)} object compiled for, got another {_show(new)}"
    return f"{label}: expected {_show(old)}, got {_show(new)}"


# ---------------------------------------------------------------------------------------------------------------
# Writes: the program's assignments of plain values, rewound before each run of a compile and replayed per call
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Change:
    watched: Watched
    key: object
    old: object  # _MISSING: a key added at the end of a dict
    new: object
    plain: bool  # a plain value (an atom) written over a plain value or added: the entry replays it


@dataclass(frozen=True, slots=True, kw_only=True)
class _Changes:
    entries: list[_Change]  # per entry, in walk order
    reshaped: list[Watched]  # containers changed otherwise (items removed, reordered; a set changed): put back whole
    others: list[str]  # every change but a plain one, in words (the graph cannot replay it)

    def writes(self) -> list[_Change]:
        return [c for c in self.entries if c.plain]


def _changes(before: Sequence[Watched]) -> _Changes:
    """What the program changed in `before`'s containers. The trace's own bookkeeping is no change (an import it
    ran, a container rebuilt with the same items)."""
    out = _Changes(entries=[], reshaped=[], others=[])
    for w in before:
        if w.kind is WatchKind.SET:
            reason = describe_watched(w)
            if reason is not None:
                out.reshaped.append(w)
                out.others.append(reason)
            continue
        now_keys, now_values = _read(w)
        n = len(w.keys)
        if now_keys != w.keys:
            if w.kind is not WatchKind.DICT or now_keys[:n] != w.keys:
                out.reshaped.append(w)
                out.others.append(cast(str, describe_watched(w, after_trace=True)))
                continue
            for key, value in zip(now_keys[n:], now_values[n:], strict=True):
                plain = is_atom(value)
                out.entries.append(_Change(watched=w, key=key, old=_MISSING, new=value, plain=plain))
                if not plain:
                    out.others.append(f"{_new_label(w, key)}: added, holding a {type(value).__qualname__}")
        for key, old, new, how, label in zip(w.keys, w.values, now_values[:n], w.compares, w.labels, strict=True):
            if new is old or types.ModuleType in (type(new), type(old)):
                continue
            reason = _differs(old, new, how, label, lenient=True)
            if reason is None and how is Compare.TENSOR:  # a lifted tensor rebound by the run: the graph cannot
                reason = f"{label}: rebound to another {_show(new)}"  # rebind it (eager's name holds the new one)
            if reason is None:
                continue
            plain = how is Compare.VALUE and new is not _MISSING and is_atom(new)
            out.entries.append(_Change(watched=w, key=key, old=old, new=new, plain=plain))
            if not plain:
                out.others.append(reason)
    return out


def _new_label(w: Watched, key: object) -> str:
    attrs = any(label == f"{w.label}.{k}" for label, k in zip(w.labels, w.keys, strict=True)) or not w.keys
    return f"{w.label}.{key}" if attrs and isinstance(key, str) else f"{w.label}[{key!r}]"


def _write(change: _Change, value: object) -> PythonWrite:
    """Setting the changed entry to `value`, as the runtime makes it."""
    w, key = change.watched, change.key
    label = w.labels[w.keys.index(key)] if change.old is not _MISSING else _new_label(w, key)
    if w.kind is WatchKind.CELLS:
        cell = cast(tuple[types.CellType, ...], w.obj)[cast(int, key)]
        return PythonWrite(container=cell, how=WriteHow.CELL, key=None, value=value, label=label)
    how = WriteHow.SETATTR if w.kind is WatchKind.ATTRS else WriteHow.SETITEM
    return PythonWrite(container=w.obj, how=how, key=key, value=value, label=label)


def _undo(changes: _Changes) -> None:
    """Back to the state the compile started from: each changed entry its old value, each added key removed, each
    container changed otherwise rebuilt in place with its old items."""
    for c in changes.entries:
        if c.old is _MISSING:  # (an added key; or a global, slot or cell the program deleted: set again below)
            if c.watched.kind is WatchKind.DICT:
                del cast(dict[object, object], c.watched.obj)[c.key]
        else:
            apply_writes([_write(c, c.old)])
    for w in changes.reshaped:
        if w.kind is WatchKind.SET:
            items = cast(set[object], w.obj)
            items.clear()
            items.update(w.frozen)
        elif w.kind is WatchKind.SEQ:
            seq = cast(list[object], w.obj)  # (a list or a deque)
            seq.clear()
            seq.extend(w.values)
        else:
            d = cast(dict[object, object], w.obj)
            d.clear()
            d.update(zip(w.keys, w.values, strict=True))


def _same_atom(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a) and math.isnan(cast(float, b)):
        return True
    try:
        return bool(a == b)
    except Exception:  # an __eq__ that raises: not equal
        return False


@dataclass(slots=True)
class Rewind:
    """One compile's runs of the program: each starts from the state the compile started from (`before`); what each
    completed run changed is recorded (Note [State The Program Reads], "Writes")."""

    before: tuple[Watched, ...]
    runs: list[_Changes] = dataclasses.field(default_factory=list)

    def writes(self, name: str) -> tuple[PythonWrite, ...]:
        """The writes the entry replays after each call: the changes the runs made, which must be plain values and
        the same in every run; else refused by name."""
        runs = self.runs or [_changes(self.before)]
        for run in runs:
            if run.others:
                raise UnsupportedError(
                    f"{name}: the program changes Python state while it runs ({run.others[0]}); a compiled graph runs "
                    "tensor ops only, and replays after each call only plain values (None, numbers, strings, dtypes, "
                    "enums, tuples of them) assigned to attributes, dict and list items, closure cells or globals "
                    "it reads, so it would not repeat that change on later calls. Keep Python side effects (caches, "
                    "objects stored, items added or removed) outside the compiled function, or keep that value in a "
                    "tensor buffer updated in place"
                )
        last = runs[-1].writes()
        for run in runs[:-1]:
            for a, b in itertools.zip_longest(run.writes(), last):
                if (
                    a is None
                    or b is None
                    or a.watched is not b.watched
                    or a.key != b.key
                    or not _same_atom(a.new, b.new)
                ):
                    c = cast(_Change, b if a is None else a)
                    label = _write(c, c.new).label
                    raise UnsupportedError(
                        f"{name}: the program changes Python state while it runs ({label}), and writes another value "
                        "in another of the runs its compile makes (over fake tensors, with other grad modes or "
                        "requires_grad flags): the value depends on something the compiled graph does not fix, so "
                        "the graph cannot replay it. Keep that assignment outside the compiled function"
                    )
        return tuple(_write(c, c.new) for c in last)


_REWIND: contextvars.ContextVar[Rewind | None] = contextvars.ContextVar("subclassaot_python_rewind", default=None)


@contextlib.contextmanager
def rewinding(before: Sequence[Watched]) -> Iterator[Rewind]:
    """While a compile runs the program: each run starts from the state `before` (`run_starts`); after it, the state
    is that again (Note [State The Program Reads], "Writes")."""
    rewind = Rewind(before=tuple(before))
    token = _REWIND.set(rewind)
    try:
        yield rewind
    finally:
        _REWIND.reset(token)
        _undo(_changes(rewind.before))


def run_starts() -> None:
    """A run of the program inside a compile starts (inputs.flatten_call): back to the state the compile started
    from, so every run reads what the first did."""
    rewind = _REWIND.get()
    if rewind is not None:
        _undo(_changes(rewind.before))


def run_completed() -> None:
    """A run of the program inside a compile returned: record what it changed."""
    rewind = _REWIND.get()
    if rewind is not None:
        rewind.runs.append(_changes(rewind.before))
