"""Stage `observe`: the eager record, the program run once in eager with its state logged after every op.

Input: a callable and the values of one call (real tensors, or static fakes made by `observe_on_fakes`).
Output: `EagerRecord`: one `Event` per torch-level call the program made (`x.add_(y)`, `torch.sin(x)`, `x.data = y`,
`x.set_(y)`, ...), each holding the `TensorFacts` of every tensor the call received or returned, read right after it;
the facts of every tensor the program touched at its end; the error eager raised in the forward, if any; and how a
backward through the outputs that require grad ends.
Invariants: eager answers, we record (Note [The Eager Record]): every fact is read off a tensor, none is derived.
Tensors and storages are numbered on first sight (`NodeId`, `StorageId`); the record keeps no tensor alive after the
run and holds no `id()`. A run on fakes draws no random number from the caller's generators and adds no guard.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NewType

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.eager.kernel_counts import custom_op_body_bumps, inference_read_counts
from subclassaot.schemas import FlatInputs
from subclassaot.torch_internals import (
    autograd_sequence_nr,
    composite_view_as_eager,
    function_modes_off,
    get_version,
    is_fake,
    outside_current_modes,
    set_version,
    static_fake_copies,
)

# Note [The Eager Record]
# Everything the epilogue must reproduce is eager's state at some point of the program: the storage and layout of
# each tensor over time, the view relation (`._base`), version counters, and autograd history (is_leaf,
# requires_grad, grad_fn and whether reading it raises). Rather than re-derive those with one rule per corner case,
# the compile runs the program once in eager on static fakes of the call's inputs (aliasing kept) under a
# torch-function mode that logs, after every torch-level call, the facts of each tensor the call received or
# returned. The mode sits above autograd and above a subclass's `__torch_dispatch__`, so it sees what the user's
# program sees: a wrapper's own version counter, `._base` and grad_fn, with its inner tensors logged beside it.
# Tensors are nodes numbered on first sight through a weak identity map (a tensor that dies frees its entry; no id
# is reused while a node is live), storages likewise through the storages the run holds until it ends. Fake
# tensors carry real storages, strides, offsets, version counters and autograd metadata, so the facts read on
# fakes are eager's facts; tests/eager checks that claim on the fuzzer's programs against a run on real tensors.
# Two facts differ by construction and are recorded so that they agree: a fake's version counter starts at 0, so the
# record keeps `bumps` (the version less its value at first sight; for a view of a tensor seen before, less its base's
# value then: the program's advances of the counter they share, and likewise for a detach() of a tensor seen before,
# whose counter is found shared by asking the counters; for a plain tensor a call made, on a storage not seen
# before, its version: a kernel may hand it back advanced; `Event.found`: the inputs' bumps as the call found them), and a fake of a non-leaf input carries no history (its
# grad_fn is an Error node that raises "Tried to backward() through example input" when reached). An inference
# tensor has no counter: its `bumps` are 0. Counters eager's kernels advance where no run under a mode does (a read of
# an inference tensor, a custom op's body writing its argument) are asked of eager (eager/kernel_counts.py). Under any dispatch mode (a fake's, the record's own) an in-place foreach op
# (`torch._foreach_add_([x, y], 1)`) advances no counter, where eager's advances each plain tensor of its first list
# once per place in it, unless a wrapper subclass is among its arguments (the op then reaches `__torch_dispatch__`, as
# under a mode, and no counter moves): the record advances them itself (`_foreach_bumps`), so that each of its runs,
# on fakes or on real tensors, counts as eager's.
# One more is made to agree where it is taken, for every static fake run (the record, the backward probes): inside
# inference_mode autograd's kernels are skipped, so a view op with no kernel of its own (CompositeImplicitAutograd:
# reshape(), mT, unflatten()) is decomposed by a plain tensor's backend kernel, whose view ops dispatch again from the
# top and make autograd views (creation meta INFERENCE_MODE, requiring grad as the base does), but at the Python key
# for a fake or under any dispatch mode, below ADInplaceOrView: no view, no grad. The static fake mode and the record's
# dispatch mode take such a view of a plain tensor again outside inference mode, under no_grad, with that creation meta
# (torch_internals.composite_view_as_eager); not where it copies (eager's is an inference tensor), nor for a wrapper or
# inside one's `__torch_dispatch__` (eager's makes no view there either).
# Facts that no static run can show (symbolic sizes, values of data-dependent ops) are not in the record.
# Calls that build no node: whether a call made an autograd node (and so read its arguments' history) is eager's to say,
# not a list of names: autograd numbers every node it makes (an op's grad_fn, a custom Function's, a view's history
# regenerated after a write) from one counter, which a call that made none leaves where it was. requires_grad_(), the
# `.requires_grad =` setter, detach(), contiguous() of a contiguous tensor and any call under no_grad make none. The
# eager record reads the counter around each call (`Event.built_node`). set_() is logged below autograd, which made its
# nodes before the record sees the call: it counts from the end of the call seen before; and the node set_() with grad
# records on a tensor that requires grad (or from a source that does), NotImplemented, takes no number (as
# AccumulateGrad and autograd's error nodes do), so that one is derived. The functionalized run reads its own autograd's
# counter around each call of the program (`SwapRecord.call_built_node`), which for a call handing back its arguments is
# eager's answer: grad_scope asks it whether such a call read the history of a view whose read raises in eager.
# Events are numbered by the program's torch-level calls, queries left out (`Event.call`), as the functional run numbers
# its own (`SwapRecord.call_seqs`): a rule asking mid-run what eager's state is after a call finds it there.
# Reading a fact (the pattern each rule moved onto the record follows): where a rule simulated a fact of eager's state,
# the functional run notes where in the program the fact lives, its place: the call index (the count of the program's
# calls begun so far, less one) and, for set_(), which shares the index of the call it follows with any set_() beside
# it, its rank among them (`SwapRecord.last_set`); it keeps its simulation beside it. The rule (a function of
# pipeline/rules/set_under_grad.py) asks `SwapRecord.eager` for the record after the run, finds the event at that place
# (`EagerRecord.try_get_event`), checks it is the call it expects, and reads the fact; where the record has no such
# event (eager raised before it, the call ran inside another, the fakes run failed) the simulation stands. The compile
# builds the record at most once per program it analyzes (`EagerAsk`, on api's `_Program`), the first time a rule asks,
# outside every mode, on the wrapped call the functional runs get: a call they hold back is counted (`held_call`), and
# a program no rule asks about costs no run. The first fact so read: the count of a set_() source's counter when a
# set_() under grad read its history (`LeafMutation.source_bumps_at_set`, from `Event.found`).

NodeId = NewType("NodeId", int)  # a tensor the program touched, numbered on first sight
StorageId = NewType("StorageId", int)  # a storage, numbered on first sight


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorFacts:
    """One tensor's state as eager has it at one point of the program."""

    node: NodeId
    type_name: str  # "Tensor", "PairTensor", ...
    storage: StorageId | None  # None for a wrapper subclass (its data lives in `inner`)
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    base: NodeId | None  # `._base`
    bumps: int  # `._version` less its value when the record first saw this tensor's counter (Note [The Eager Record])
    requires_grad: bool
    is_leaf: bool | None  # None where reading it raises (`autograd_error`)
    grad_fn: str | None  # the grad_fn's type name; None for a leaf, a tensor that needs no grad, or an error
    autograd_error: str | None  # the error reading `.grad_fn` or `.is_leaf` raises, if one does
    inner: tuple[tuple[str, NodeId], ...] = ()  # a traceable subclass's inner tensors, by attribute name


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One torch-level call of the program and the facts of the tensors it touched, read right after it."""

    op: str  # "Tensor.add_", "sin", "Tensor.data.__set__", ...
    call: int  # the program's torch-level call it is, queries not counted (SwapRecord.call_seqs); set_()'s: the one before
    grad_enabled: bool  # grad mode while the call ran
    inputs: tuple[NodeId, ...]  # the tensors among the call's arguments, in pytree order
    found: tuple[int, ...]  # per input: its `bumps` as the call found them (before the call's own advance)
    outputs: tuple[NodeId, ...]  # the tensors it returned, in pytree order
    facts: tuple[TensorFacts, ...]  # of inputs, outputs and their inner tensors and bases, each node once
    built_node: bool  # autograd made a node while it ran (Note [The Eager Record], calls that build no node)


@dataclass(frozen=True, slots=True, kw_only=True)
class BackwardEnd:
    """How eager's backward through every output that requires grad (tangents of ones) ends."""

    error: str | None  # the message of the error it raised, if it did
    grads: tuple[tuple[NodeId, tuple[int, ...] | None], ...]  # per input leaf that requires grad: its grad's size


@dataclass(frozen=True, slots=True, kw_only=True)
class EagerRecord:
    inputs: tuple[NodeId | None, ...]  # per call value (InputIndex order): its node, None for a non-tensor
    events: tuple[Event, ...]  # in program order
    calls: int  # the program's torch-level calls, queries not counted (Event.call)
    outputs: tuple[NodeId | None, ...]  # per output pytree leaf: its node, None for a non-tensor
    final: tuple[TensorFacts, ...]  # every node the program touched that is alive at its end, by NodeId
    error: str | None  # the error eager raised in the forward (the record ends at the call that raised)
    backward: BackwardEnd | None  # None: no output requires grad, or the forward raised

    def try_get_final(self, node: NodeId) -> TensorFacts | None:
        """The node's facts at the end of the program; None where its tensor died before the end."""
        return next((f for f in self.final if f.node == node), None)

    def try_get_event(self, op: str, call: int, k: int = 0) -> Event | None:
        """The `k`-th event of `op` logged at the program's call `call` (`Event.call`: set_(), logged below autograd,
        takes the call it follows, so several may share one); None where the record has none: eager raised before,
        or the call ran where the record does not log it (inside another call)."""
        found = [e for e in self.events if e.call == call and e.op == op]
        return found[k] if k < len(found) else None


class EagerAsk:
    """The eager record of one compile's program, built the first time a rule asks for it and kept (Note [The Eager
    Record], reading a fact): a program no rule asks about costs no run. `build` runs the program on static fakes
    (`observe_on_fakes`); it is run outside every mode on the stack (a trace's, a functional run's), and a build that
    fails answers None, as the record missing the fact does."""

    def __init__(self, build: Callable[[], EagerRecord]) -> None:
        self._build: Callable[[], EagerRecord] | None = build
        self._record: EagerRecord | None = None

    @classmethod
    def of_call(cls, call: Callable[..., object], flat: FlatInputs) -> EagerAsk:
        """The record of `call` (the compile's program over the flat inputs, `call(state, args, kwargs)`, as each
        functional run calls it) on fakes of `flat.values`."""

        def run(*values: object) -> object:
            return call(*pytree.tree_unflatten(list(values), flat.spec))

        return cls(lambda: observe_on_fakes(run, flat.values))

    def record(self) -> EagerRecord | None:
        if self._build is not None:
            build, self._build = self._build, None
            with outside_current_modes(), function_modes_off():
                try:
                    self._record = build()
                except Exception:  # (fakes the record cannot copy, a failure of its own: the rule falls back)
                    self._record = None
        return self._record


_Pending = tuple[str, int, bool, list[torch.Tensor], tuple[int, ...], list[torch.Tensor], bool]


class _Recorder(TorchFunctionMode):
    """Numbers tensors and storages on first sight and logs an Event after each torch-level call."""

    def __init__(self) -> None:
        super().__init__()
        self.nodes: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.first_version: list[int] = []  # by NodeId
        self.tensors: list[weakref.ref[torch.Tensor]] = []  # by NodeId; weak: holding a tensor would keep its
        # autograd graph (and a leaf's AccumulateGrad) alive longer than eager does
        self.storages: dict[int, StorageId] = {}
        self.held_storages: list[torch.UntypedStorage] = []  # keep `_cdata` from being reused during the run
        self.events: list[Event] = []
        self.calls = 0  # torch-level calls of the program seen so far (Event.call)
        self.depth = 0  # logged calls running now
        self.pending: _Pending | None = None  # the call to log
        self.mark = autograd_sequence_nr()  # autograd's counter after the last call the record saw

    def node(self, t: torch.Tensor, *, born: bool = False) -> NodeId:
        """t's node; numbered now if unseen, counting its bumps from its version now, or from 0 where `born`, or
        from where its `._base`'s count starts (the counter they share) where the record has seen the base."""
        found: int | None = self.nodes.get(t)  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        if found is None:
            base = t._base
            # (WeakIdKeyDictionary.get: torch leaves it unannotated)
            seen: int | None = None if born or base is None else self.nodes.get(base)  # type: ignore[no-untyped-call]
            found = NodeId(len(self.tensors))
            self.nodes[t] = found
            self.tensors.append(weakref.ref(t))
            self.first_version.append(0 if born else get_version(t) if seen is None else self.first_version[seen])
        return NodeId(found)

    def number_born(self, t: torch.Tensor) -> None:
        """A plain tensor a call returned, unseen, on a storage the record has not seen (and its bases likewise): the
        call made it, and its `bumps` are its `._version` (Note [The Eager Record])."""
        if t in self.nodes or is_traceable_subclass(t) or t.untyped_storage()._cdata in self.storages:
            return
        self.node(t, born=True)
        if t._base is not None:
            self.number_born(t._base)

    def number_sharing(self, t: torch.Tensor, received: Sequence[torch.Tensor]) -> None:
        """A plain tensor a call returned, unseen, no view, sharing the version counter of a tensor the call received
        (a detach()): its `bumps` count from where that one's start, as a view's from its base's (Note [The Eager
        Record]). Whether two tensors share a counter is asked of the counters: one advanced, the other read."""
        if t in self.nodes or t._base is not None or is_traceable_subclass(t):
            return
        for r in received:
            if r in self.nodes and not is_traceable_subclass(r) and _share_counter(r, t):
                found = NodeId(len(self.tensors))
                self.nodes[t] = found
                self.tensors.append(weakref.ref(t))
                self.first_version.append(self.first_version[self.node(r)])
                return

    def storage(self, t: torch.Tensor) -> StorageId:
        s = t.untyped_storage()
        key = s._cdata
        found = self.storages.get(key)
        if found is None:
            found = StorageId(len(self.storages))
            self.storages[key] = found
            self.held_storages.append(s)
        return found

    def facts(self, t: torch.Tensor) -> TensorFacts:
        grad_fn: str | None = None
        is_leaf: bool | None = None
        error: str | None = None
        try:
            is_leaf = t.is_leaf
            fn = t.grad_fn
            grad_fn = type(fn).__name__ if fn is not None else None
        except RuntimeError as e:  # a view of a multi-output view op written in place, ...
            error = str(e)
        subclass = is_traceable_subclass(t)
        base = t._base
        node = self.node(t)
        return TensorFacts(
            node=node,
            type_name="Tensor" if is_fake(t) else type(t).__name__,
            storage=None if subclass else self.storage(t),
            size=tuple(t.shape),
            stride=tuple(t.stride()),
            offset=int(t.storage_offset()),
            base=self.node(base) if base is not None else None,
            bumps=get_version(t) - self.first_version[node],
            requires_grad=t.requires_grad,
            is_leaf=is_leaf,
            grad_fn=grad_fn,
            autograd_error=error,
            inner=tuple((name, self.node(getattr(t, name))) for name in _inner_names(t)) if subclass else (),
        )

    def all_facts(self, tensors: Sequence[torch.Tensor]) -> tuple[TensorFacts, ...]:
        """Facts of `tensors`, their inner tensors and their bases, each node once, in first-seen order."""
        seen: dict[NodeId, TensorFacts] = {}
        todo = list(tensors)
        while todo:
            t = todo.pop(0)
            if self.node(t) in seen:
                continue
            f = self.facts(t)
            seen[f.node] = f
            if t._base is not None:
                todo.append(t._base)
            todo.extend(getattr(t, name) for name, _ in f.inner)
        return tuple(seen.values())

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: object,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        op = _op_name(func)
        if is_query(func):
            out = func(*args, **(kwargs or {}))  # reads no state changes: not an event
            if not self.depth:  # (a grad_fn read may regenerate a view's history: a node of no event's)
                self.mark = autograd_sequence_nr()
            return out
        return self.logged(op, func, args, kwargs or {})

    def held_call(self) -> None:
        """A mode above held back one of the program's calls (backward_probe.holding_back_flags): counted as the
        functional run counts it (SwapRecord.call_seqs), so that the events after it keep their `call`."""
        if not self.depth:
            self.calls += 1

    def logged(
        self, op: str, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], *, below: bool = False
    ) -> Any:
        """Run `func` and log it, unless a logged call is already running (calls its implementation makes, a fake
        tensor's metadata reads among them, are not the program's). `below`: called from under autograd, where
        reading autograd facts of the op's own tensors can deadlock: their facts are read at the next call above."""
        if self.depth:
            return func(*args, **kwargs)
        self.calls += 0 if below else 1
        mark, before = self.mark, autograd_sequence_nr()
        self.flush()
        own = autograd_sequence_nr() - before  # (nodes the flush's reads made: regenerated histories)
        received = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        for t in received:  # numbered before the call: an input seen first here keeps its pre-call identity
            self.node(t)
        grad_enabled = torch.is_grad_enabled()
        # (below autograd, the call's node, if any, was made before it reached here: Note [The Eager Record])
        start = mark + own if below else autograd_sequence_nr()
        self.depth += 1  # the facts' own reads (`.grad_fn`, `.stride()`) are not logged either
        try:
            found = tuple(get_version(t) - self.first_version[self.node(t)] for t in received)
            counted = _foreach_bumps(op, args)
            out = func(*args, **kwargs)
            counted()
            returned = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
            self.mark = autograd_sequence_nr()
            # (set_() with grad records a NotImplemented node, which takes no number)
            unnumbered = below and grad_enabled and any(t.requires_grad for t in received)
            call = self.calls - 1  # (set_(), no torch function, takes the call it follows: as the functional run)
            self.pending = (op, call, grad_enabled, received, found, returned, self.mark != start or unnumbered)
            if not below:
                self.flush()
        finally:
            self.depth -= 1
        return out

    def flush(self) -> None:
        """Log the call that ran last, reading its tensors' facts now."""
        if self.pending is None:
            return
        op, call, grad_enabled, received, found, returned, built = self.pending
        self.pending = None
        for t in returned:
            self.number_sharing(t, received)
            self.number_born(t)
        self.depth += 1
        try:
            facts = self.all_facts(received + returned)
        finally:
            self.depth -= 1
        inputs, outputs = tuple(self.node(t) for t in received), tuple(self.node(t) for t in returned)
        event = Event(
            op=op,
            call=call,
            grad_enabled=grad_enabled,
            inputs=inputs,
            found=found,
            outputs=outputs,
            facts=facts,
            built_node=built,
        )
        self.events.append(event)


# Autograd regenerating a view's grad_fn (after its base was written) resets the view's Python `_backward_hooks`
# while it holds the view's lock: reading that tensor's grad_fn from the handler would wait on the lock forever.
_HOOK_RESET = "Tensor._backward_hooks.__set__"

_QUERIES = frozenset(
    f"Tensor.{name}"
    for name in (
        "dim", "size", "stride", "storage_offset", "is_contiguous", "untyped_storage", "numel", "element_size",
        "data_ptr", "is_conj", "is_neg", "is_inference", "__len__", "__format__", "__repr__", "is_floating_point",
        "is_complex", "__hash__", "_is_view",
    )
)  # fmt: skip


class _Unseen(TorchDispatchMode):  # type: ignore[no-untyped-call]  # untyped __init_subclass__
    """`Tensor.set_` has no torch-function handling: it is logged here, at the dispatcher, by the same recorder."""

    def __init__(self, recorder: _Recorder) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # TorchDispatchMode.__init__ is untyped
        self.recorder = recorder

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload,
        types: object,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        if func.overloadpacket is torch.ops.aten.set_:
            return self.recorder.logged("Tensor.set_", func, args, kwargs or {}, below=True)
        # (a dispatch mode takes an op with no kernel of its own as a fake does: Note [The Eager Record]). An op that
        # reaches here outside any logged call is autograd's own (a view replayed to renew a grad_fn): not an event.
        self.recorder.depth += 1
        try:
            retaken, view = composite_view_as_eager(func, args, kwargs or {})
            return view if retaken else _as_eager_counts(func, args, kwargs or {})
        finally:
            self.recorder.depth -= 1


def _as_eager_counts(func: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run `func`, then give the counters its eager kernel advances, and the run under a mode did not, eager's
    counts (eager/kernel_counts.py: a read of an inference tensor, a custom op's body writing its argument)."""
    written = custom_op_body_bumps(func, args, kwargs, _is_inference)
    before = [get_version(t) for t, _ in written]
    out = func(*args, **kwargs)
    for (t, n), v in zip(written, before, strict=True):
        set_version(t, max(get_version(t), v + n))  # (a body that ran and wrote has moved it itself)
    results = [r for r in pytree.tree_leaves(out) if isinstance(r, torch.Tensor)]
    counts = inference_read_counts(func, args, kwargs, out, _is_inference)
    for r, n in zip(results, counts, strict=True) if counts else ():
        set_version(r, max(get_version(r), n))
    return out


def _share_counter(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Do `a` and `b` share one version counter (`a` moved on once and back, `b` read)?"""
    version = get_version(a)
    if a.is_inference() or b.is_inference() or get_version(b) != version:
        return False
    set_version(a, version + 1)
    shared = get_version(b) == version + 1
    set_version(a, version)
    return shared


def _is_inference(t: torch.Tensor) -> bool:
    return t.is_inference()


def is_query(func: Callable[..., Any]) -> bool:
    """Is a torch-level call one that reads no state it changes (a property's getter, `.size()`, ...): no event of
    the record's, and no call `Event.call` and the functional run's `SwapRecord.call_seqs` count."""
    op = _op_name(func)
    return op.endswith(".__get__") or op.startswith("prim::") or op in _QUERIES or op == _HOOK_RESET


def _foreach_bumps(op: str, args: tuple[Any, ...]) -> Callable[[], None]:
    """For an in-place foreach op of plain tensors: after it, advance the counter of each tensor of its first list as
    eager's op does, where the call moved none (Note [The Eager Record]); for any other op, nothing."""
    if not (op.startswith("torch._foreach_") and op.endswith("_")) or not args or not isinstance(args[0], list | tuple):
        return lambda: None
    if any(is_traceable_subclass(t) for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor)):
        return lambda: None
    plain = [t for t in args[0] if isinstance(t, torch.Tensor)]
    before = {id(t): get_version(t) for t in plain}

    def advance() -> None:
        if all(get_version(t) == before[id(t)] for t in plain):  # (a counter shared or held twice moves per place)
            for t in plain:
                set_version(t, get_version(t) + 1)

    return advance


def _inner_names(t: torch.Tensor) -> list[str]:
    names, _ = t.__tensor_flatten__()  # type: ignore[attr-defined]  # a traceable subclass (checked by the caller)
    return [n for n in names if isinstance(getattr(t, n), torch.Tensor)]


def _op_name(func: Callable[..., Any]) -> str:
    descriptor = getattr(func, "__self__", None)
    if type(descriptor).__name__ == "getset_descriptor":  # a property's __get__/__set__ (`x.data = y`)
        return f"Tensor.{getattr(descriptor, '__name__', '?')}.{getattr(func, '__name__', '?')}"
    name = str(getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func))
    return name.replace("TensorBase.", "Tensor.").replace("_VariableFunctionsClass.", "torch.")


def observe(fn: Callable[..., object], values: Sequence[object]) -> EagerRecord:
    """Run `fn` once in eager on `values` (its positional arguments) and record it (Note [The Eager Record])."""
    rec = _Recorder()
    leaves = list(values)
    inputs = tuple(rec.node(v) if isinstance(v, torch.Tensor) else None for v in leaves)
    for v in leaves:
        if isinstance(v, torch.Tensor):
            rec.all_facts([v])
    error: str | None = None
    outs: list[object] = []
    with rec, _Unseen(rec):
        try:
            outs = pytree.tree_leaves(fn(*leaves))
        except Exception as e:  # eager raising is a fact of the program
            error = f"{type(e).__name__}: {e}"
    rec.flush()
    out_nodes = tuple(rec.node(o) if isinstance(o, torch.Tensor) else None for o in outs)
    end = _backward(rec, leaves, outs) if error is None else None
    final = tuple(rec.facts(t) for ref in rec.tensors if (t := ref()) is not None)
    return EagerRecord(
        inputs=inputs,
        events=tuple(rec.events),
        calls=rec.calls,
        outputs=out_nodes,
        final=final,
        error=error,
        backward=end,
    )


def _backward(rec: _Recorder, leaves: Sequence[object], outs: Sequence[object]) -> BackwardEnd | None:
    roots = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    if not roots:
        return None
    watched = [v for v in leaves if isinstance(v, torch.Tensor) and v.requires_grad and _is_leaf(v)]
    before = [v.grad for v in watched]
    error: str | None = None
    try:
        torch.autograd.backward(roots, [torch.ones_like(r) for r in roots])
    except Exception as e:  # eager's backward raising is a fact of the program
        error = f"{type(e).__name__}: {e}"
    grads = tuple(
        (rec.node(v), tuple(v.grad.shape) if v.grad is not None and v.grad is not old else None)
        for v, old in zip(watched, before, strict=True)
    )
    return BackwardEnd(error=error, grads=grads)


def _is_leaf(t: torch.Tensor) -> bool:
    try:
        return t.is_leaf
    except RuntimeError:  # reading it raises: a view, so not a leaf
        return False


def observe_on_fakes(fn: Callable[..., object], values: Sequence[object]) -> EagerRecord:
    """`observe` on static fakes of `values` in a fresh fake mode (aliasing kept): the compile's way to ask eager."""
    mode, fakes = static_fake_copies(values)
    with torch.random.fork_rng(devices=[]), mode:
        return observe(fn, fakes)
