"""Which of the program's requires_grad_() calls making new autograd leaves a compile holds back (Note [Training
Without A Function]).

Input: the program's calls turning a tensor's requires_grad on, in call order, as the analysis run meets them.
Output: `NewLeafHold`, the places held back (decided by the first analysis run that completes), and the refusals the
program as called meets there.
"""

from __future__ import annotations

import contextlib
import enum
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, cast

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.schemas import OutputInfo, OutputKind
from subclassaot.torch_internals import may_return_view, storage_key, trace_without_history


@dataclass(frozen=True, slots=True)
class ShownLeaves:
    """The outputs (positions among the program's pytree leaves) through which the caller sees the new leaves held
    back by a flag alone: `own`, the leaves themselves; `bases`, views of a leaf taken before its flag, which read it
    through their `._base` (the leaf returned by none of the outputs). Empty: eager's run observes none of them."""

    own: frozenset[int] = frozenset()
    bases: frozenset[int] = frozenset()


class NewLeafKind(enum.Enum):
    """Why the compile of the program as called cannot make a new leaf."""

    PLAIN = "plain"  # a plain tensor, in a call with grad on: only the native path makes it
    SUBCLASS = "subclass"  # a tensor subclass: the graph, over its inner tensors, has no wrapper to mark


@dataclass(slots=True)
class NewLeafHold:
    """The places (in call order, among the program's calls turning a requires_grad on) of the calls making new
    leaves that a compile holds back. `held` None: undecided, and the next analysis run holds back each call making a
    new leaf, noting it (`noted`: its place -> its kind and the tensor's type name) and deciding `held` once it
    completes; a frozenset: decided (every later run holds back those calls, `backward_probe.holding_back_flags`)."""

    held: frozenset[int] | None = None
    noted: dict[int, tuple[NewLeafKind, str]] = field(default_factory=dict)
    asked: bool = False  # whether the driver asked eager's runs about `held`; then, `shown`: the positions among the
    # program's outputs (its pytree leaves) of the leaves held back that the caller sees by their flag alone (empty:
    # eager's run observes none of `held`), or None where it observes one otherwise
    shown: ShownLeaves | None = None
    calls: int | None = None  # the calls turning a flag on that the run deciding `held` counted

    def run_starts(self) -> None:
        """An analysis run begins: while undecided, it notes afresh (what a run that failed noted is dropped)."""
        if self.held is None:
            self.noted.clear()

    def run_completed(self, calls: int) -> None:
        """The analysis run completed, counting `calls` calls turning a flag on: while undecided, what it held back is
        decided."""
        if self.held is None:
            self.held, self.calls = frozenset(self.noted), calls

    @staticmethod
    def as_called() -> NewLeafHold:
        """Decided: nothing held back (the program compiled as called)."""
        return NewLeafHold(held=frozenset())

    def refusal(self) -> UnsupportedError | None:
        """The refusal the compile as called meets before the others, where a held-back call has one of its own (a
        subclass): the analysis run raises it; None for plain calls, which only the native path may make
        (`backward_probe.refuse_new_leaves`)."""
        kinds = [self.noted[p] for p in sorted(self.noted)]
        subclass = next((name for kind, name in kinds if kind is NewLeafKind.SUBCLASS), None)
        return None if subclass is None else subclass_new_leaf_refusal(subclass)


def turns_flag_on(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, bool]:
    """Whether a torch-function call turns a tensor's requires_grad on (`requires_grad_()` or the setter), and whether
    it is the setter."""
    owner = getattr(getattr(func, "__self__", None), "__name__", None)
    setter = owner == "requires_grad" and getattr(func, "__name__", "") == "__set__"
    flag = setter or func is torch.Tensor.requires_grad_
    return flag and bool(args[1] if len(args) > 1 else kwargs.get("requires_grad", True)), setter


def makes_leaf_itself(func: Any, kwargs: dict[str, Any]) -> bool:
    """Is a torch-function call a factory asked for requires_grad=True (`torch.zeros(..., requires_grad=True)`)? Eager's
    result is the factory's result given requires_grad_(), and the pipeline's modes take it as that call of the
    requires_grad_() form, counted among the calls turning a flag on (so held back alike)."""
    return kwargs.get("requires_grad") is True and func is not torch.Tensor.requires_grad_


def flag_read_args(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    """The arguments of a torch-function call whose requires_grad its behaviour may depend on: all of them, but for the
    `.data` setter (`x.data = y`, set_data), which keeps x's own flag and history and reads none of y's: y's flag, a
    new leaf's or not, shows nowhere in what it does (Note [Training Without A Function])."""
    owner = getattr(getattr(func, "__self__", None), "__name__", None)
    if owner == "data" and getattr(func, "__name__", "") == "__set__":
        return args[:1]
    return (args, kwargs)


def subclass_new_leaf_refusal(type_name: str) -> UnsupportedError:
    return UnsupportedError(
        "the program calls requires_grad_() (or sets `.requires_grad = True`) on a tensor that is not an input, a "
        f"{type_name} (a tensor subclass; or builds one with requires_grad=True), and uses it after: eager makes it a "
        "new autograd leaf, which the outputs' histories end in, and the compiled graph, over the subclass's inner tensors, "
        "does not hold that wrapper to make it one. Call requires_grad_() on the input itself, on the output "
        'after the call, or use torch.compile(fn, backend="subclassaot"), which splits the program there'
    )


def outputs_given_their_flag(outputs: tuple[OutputInfo, ...], shown: ShownLeaves) -> tuple[OutputInfo, ...] | None:
    """`outputs` (one per output of the program with the held-back calls skipped) where those at `shown.own`, new
    leaves of eager's that the caller sees by their flag alone, are made to require grad once every output is built
    (OutputInfo.gains_grad, gains_grad_last), as a tensor flagged under no_grad is: nothing else of eager's leaf
    differs from the tensor the program returns without the call, and the other outputs, views of it among them, show
    the same either way (Note [Training Without A Function]). Those at `shown.bases`, views replayed after the graph
    ran, get the flag on their rebuilt `._base` (OutputInfo.base_gains_grad), a leaf as eager's is, once every output is
    built (an inference tensor, the leaf itself, takes it inside inference_mode, as eager's program gave it). None
    where one is no tensor the runtime can give the flag (for a base, a view the runtime does not replay, or an
    inference tensor)."""
    given = list(outputs)
    for k in sorted(shown.own | shown.bases):
        info = outputs[k] if k < len(outputs) else None
        if info is not None and info.kind is OutputKind.SAME_AS:
            continue  # (the same tensor as an earlier output, flagged there)
        if info is None or info.kind is not OutputKind.TENSOR:
            return None
        if k in shown.own:
            given[k] = replace(info, gains_grad=True, gains_grad_last=True)
        elif info.replay is None or info.base_gains_grad or info.gains_grad or info.inference or info.inference_leaves:
            return None
        else:
            given[k] = replace(info, base_gains_grad=True, gains_grad_last=True)
    return tuple(given)


# Parameters made in the program: `nn.Parameter(t)` of a plain tensor is `Tensor._make_subclass(Parameter, t, flag)`,
# a detached alias of `t` of class Parameter (a new leaf where the flag is on); of any other class, the one the
# pipeline's run hands the program (a functional or fake tensor, a subclass), it is `t.detach().requires_grad_(flag)`
# marked `_is_param`, which `isinstance(_, Parameter)` reads. So the run sees the detach() and the flag (a new leaf
# takes the path of the requires_grad_() form: Note [Training Without A Function]) and only the mark tells the output
# eager returns as a Parameter (OutputInfo.parameter). The runtime makes the output it built one where the program's
# carries the mark (torch_internals.as_parameter): a plain tensor takes the class in place, keeping the object the
# other outputs' histories end in and its accumulator (a new Parameter object made after the call would be a leaf
# nothing reads, with no grad after a backward); a subclass takes the mark, as eager's took it.


# A mark the program sets by hand (`t._is_param = True`) leaves eager's plain tensor of class Tensor: only the detach()
# that Parameter.__new__ itself calls is noted as a Parameter's (`note_parameter_detach`).
_MADE = weakref.WeakValueDictionary[int, torch.Tensor]()  # (by id: a tensor's == is elementwise)
_PARAMETER_NEW = torch.nn.Parameter.__new__.__code__


def note_parameter_detach(func: object, out: object) -> None:
    """After the program's torch call `func` returned `out`: note a detach() that Parameter.__new__ called."""
    if func is not torch.Tensor.detach or not isinstance(out, torch.Tensor):
        return
    frame = sys._getframe(1)
    for _ in range(6):  # (the mode's own frames between)
        if frame.f_code is _PARAMETER_NEW:
            _MADE[id(out)] = out
            return
        if frame.f_back is None:
            return
        frame = frame.f_back


def made_parameter(value: object) -> bool:
    """Does the program's output `value` carry the mark of a Parameter it made (the note above): set by
    Parameter.__new__, or by hand on a subclass (which eager's keeps, as the runtime's does)?"""
    if not isinstance(value, torch.Tensor) or getattr(value, "__dict__", {}).get("_is_param") is not True:
        return False
    return _MADE.get(id(value)) is value or is_traceable_subclass(value)


class ConstructorFlags:
    """The wrappers the running program built with `_make_wrapper_subclass(..., requires_grad=True)` (a traceable
    subclass's constructor, `PairTensor(a, b, requires_grad=True)`), built without the flag (Note [Training Without A
    Function], constructor flags). Each gets it before the first torch call that takes it (`flag_taken`) or once the
    program returned (`flag_all`): from the constructor itself (`as_built`, outside the modes) where that call is no
    view op, made with grad on in a call taking a tensor that requires grad (`grad_inputs`); else from a
    requires_grad_() call the pipeline's modes see as the program's own, under the grad and inference modes it was
    built in. `pending`: each wrapper (by weak reference) with those modes; one that died unflagged, dropped by the
    program or by the subclass's own dispatch (TwoTensor's in-place ops build a wrapper of their inner results and
    return their input), gets none: no one holds eager's leaf to see it."""

    def __init__(self) -> None:
        self.pending: list[tuple[weakref.ref[torch.Tensor], bool, bool]] = []
        self.grad_inputs = False
        self.as_built: list[torch.Tensor] = []
        self.read_only: list[torch.Tensor] = []  # flagged as built by a read, in a call taking none requiring grad

    def flag_taken(self, func: object, args: object) -> None:
        """Before the torch call `func` of the program's taking `args`: flag the pending wrappers among them."""
        taken = {id(t) for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor)}
        name = str(getattr(func, "__name__", ""))
        read = name == "__get__"
        if not read and any(id(t) in taken for t in self.read_only):
            raise subclass_new_leaf_refusal(type(next(t for t in self.read_only if id(t) in taken)).__name__)
        made = [p for p in self.pending if id(p[0]()) in taken]
        if read or (self.grad_inputs and not may_return_view(name, unknown=True)):
            for entry in [p for p in made if p[1] and not p[2] and torch.is_grad_enabled()]:
                made.remove(entry)
                self.pending.remove(entry)
                built = cast(torch.Tensor, entry[0]())  # (alive: taken by this call)
                with torch._C.DisableTorchFunction():
                    built.requires_grad_()
                self.as_built.append(built)
                if not self.grad_inputs:
                    self.read_only.append(built)
        self._flag(made)

    def flag_all(self) -> None:
        self._flag(list(self.pending))

    def refuse_returned(self, out: object) -> None:
        """A wrapper flagged as built reaching the caller as itself or as the base of a returned view: eager's new
        leaf, which the compiled step does not make (refused as the requires_grad_() form is)."""
        for t in pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and self.as_built:
                with torch._C.DisableTorchFunction():
                    base = t._base
                if any(t is w or base is w for w in self.as_built):
                    raise subclass_new_leaf_refusal(type(t if base is None else base).__name__)

    def _flag(self, made: list[tuple[weakref.ref[torch.Tensor], bool, bool]]) -> None:
        for entry in made:
            self.pending.remove(entry)
            ref, grad, inference = entry
            t = ref()
            if t is None:
                continue
            with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                t.requires_grad_()


_RUN = threading.local()  # `flags`: the ConstructorFlags of the program run on this thread, innermost
_PATCH_LOCK = threading.Lock()
_patched_runs = 0
_MAKE_WRAPPER: Callable[..., torch.Tensor] = torch._C.TensorBase._make_wrapper_subclass
_REQUIRES_GRAD_AT = 8  # requires_grad's position among `_make_wrapper_subclass`'s arguments after `cls`


def _made_without_flag(cls: type, *args: Any, **kwargs: Any) -> torch.Tensor:
    """`_make_wrapper_subclass` while a program runs: a traceable subclass asked with requires_grad=True is made
    without it, and noted in the run's ConstructorFlags."""
    flags: ConstructorFlags | None = getattr(_RUN, "flags", None)
    positional = len(args) > _REQUIRES_GRAD_AT
    given = args[_REQUIRES_GRAD_AT] if positional else kwargs.get("requires_grad", False)
    if flags is None or not given or not hasattr(cls, "__tensor_flatten__"):
        return _MAKE_WRAPPER(cls, *args, **kwargs)
    if positional:
        args = (*args[:_REQUIRES_GRAD_AT], False, *args[_REQUIRES_GRAD_AT + 1 :])
    else:
        kwargs = {**kwargs, "requires_grad": False}
    out = _MAKE_WRAPPER(cls, *args, **kwargs)
    flags.pending.append((weakref.ref(out), torch.is_grad_enabled(), torch.is_inference_mode_enabled()))
    return out


@contextlib.contextmanager
def constructor_flags_as_calls(flags: ConstructorFlags) -> Iterator[None]:
    """Within (one run of the program, on this thread): wrappers made with requires_grad=True go to `flags`
    (ConstructorFlags). Patches `torch.Tensor._make_wrapper_subclass` while any run is inside; calls on other threads
    go through to torch's as they came."""
    global _patched_runs
    with _PATCH_LOCK:
        if _patched_runs == 0:
            setattr(torch.Tensor, "_make_wrapper_subclass", staticmethod(_made_without_flag))  # noqa: B010  # (typed as torch's)
        _patched_runs += 1
    outer, _RUN.flags = getattr(_RUN, "flags", None), flags
    try:
        yield
    finally:
        _RUN.flags = outer
        with _PATCH_LOCK:
            _patched_runs -= 1
            if _patched_runs == 0:
                delattr(torch.Tensor, "_make_wrapper_subclass")


class _CallRecord(Protocol):
    """What `note_no_history_results` reads and writes of a SwapRecord (which imports this module)."""

    dispatching: int
    calls: int
    replayed_new_leaves: tuple[bool, ...] | None
    no_history_calls: list[int]
    replayed_no_history_calls: frozenset[int]


def note_no_history_results(
    record: _CallRecord, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: object
) -> None:
    """A call of the program's that ran with grad off (not inside inference_mode) and returned fresh plain tensors
    (no view, in-place or `out=` result: none over an argument's storage): eager's autograd recorded no history of
    them, where the native path's graph, run with grad on throughout, would record theirs from a new leaf (Note
    [Training Without A Function]). The analysis run notes the call by its count (`record.calls`, the same in every
    run of the program); the trace's run gives each result a `without_history` node, so that what the graph computes
    from them has eager's history. A grad mode the trace's run may not share (a training compile traces under
    no_grad throughout), so the analysis run's, whose grad modes are the program's, decides."""
    if record.dispatching or torch.is_inference_mode_enabled():
        return
    if record.replayed_new_leaves is not None:
        if record.calls in record.replayed_no_history_calls:
            for t in pytree.tree_leaves(out):
                trace_without_history(t)
        return
    if torch.is_grad_enabled() or "out" in kwargs or getattr(func, "__name__", "_").endswith("_"):
        return
    if makes_leaf_itself(func, kwargs):
        return  # (a factory's requires_grad=True makes eager's new leaf under no_grad too: its flag is its history)
    results = pytree.tree_leaves(out)
    if not results or not all(_plain(t) and not t._is_view() for t in results):
        return
    read = {storage_key(a) for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)}
    if all(storage_key(t) not in read for t in results):
        record.no_history_calls.append(record.calls)


def _plain(t: object) -> bool:
    return isinstance(t, torch.Tensor) and not is_traceable_subclass(t)
