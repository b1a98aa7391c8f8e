"""The driver: `subclassaot.compile` and `CompiledFunction`, the only code that knows the stage order.

Input: a function or nn.Module and a `CompileConfig`. Output: a callable with a cache of compiled entries.
Invariants: each compile starts from fresh fake tensors made from the real inputs and the stored policies; a call
that fails every entry's guards recompiles and records why; past `recompile_limit` it runs eagerly and warns; the
cache is filled under a lock, so one CompiledFunction may be called from several threads.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import gc
import logging
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar, cast, overload

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils import _pytree as pytree

from policies import AutomaticDynamicState, Policy, TensorPolicy, static
from policies.marks import get_mark
from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass
from subclassaot.config import BackendFn, CompileConfig
from subclassaot.eager.record import EagerAsk
from subclassaot.errors import AliasedSubclassRefusal, SubclassAOTError, UnsupportedError, program_line
from subclassaot.pipeline import backends, guards, python_state
from subclassaot.pipeline.ambient_modes import (
    NO_MODES,
    NO_MODES_KEY,
    AmbientModes,
    ModesKey,
    TorchFunctionTrial,
    ambient_modes,
    check_trial,
    describe_modes,
    describe_modes_change,
    lost_subclasses,
    torch_function_trial,
    traced_under,
)
from subclassaot.pipeline.analyze import (
    analysis_of_run,
    analyze,
    check_gained_grad,
    check_sets_before_gaining_grad,
    check_written_inputs_gaining_grad,
    cloned_bases,
    grouped_own_leaves,
)
from subclassaot.pipeline.analyze_training import (
    check_multi_output_view_inputs,
    check_multi_output_view_outputs,
    multi_output_view_input_reads,
)
from subclassaot.pipeline.backward_probe import (
    eager_saves,
    holding_back_flags,
    native_counts,
    native_training_plan,
    records_as_eager,
    refuse_new_leaves,
    unobserved_new_leaves,
)
from subclassaot.pipeline.backward_trace import BackwardGraph, BackwardVariant, backward_plan, trace_backward
from subclassaot.pipeline.desugar import (
    DynamicAliasError,
    call_with_bases,
    dense_layout,
    dropping_bases,
    find_hidden_bases,
    hidden_base_guards,
)
from subclassaot.pipeline.fakify import FakifyResult, SymbolCache, fakify_inputs
from subclassaot.pipeline.functional_run import own_leaves_of
from subclassaot.pipeline.grad_scope import GradReenabledError, check_grad_reenabled
from subclassaot.pipeline.inputs import (
    CaptureRef,
    argument_modules,
    capture_refs,
    find_same_inputs,
    flatten_call,
    lifted_state,
    marked_call,
    refuse_transform_wrappers,
    same_input_guards,
    unmarking,
)
from subclassaot.pipeline.rng_calls import captured_generators_kept
from subclassaot.pipeline.rules.backward_errors import replays_before_call
from subclassaot.pipeline.rules.data_assignment import resimplified_data_metas
from subclassaot.pipeline.rules.hidden_layouts import refuse_stale_view_layouts
from subclassaot.pipeline.rules.new_leaves import NewLeafHold, ShownLeaves, outputs_given_their_flag
from subclassaot.pipeline.rules.storage_reach import StorageReachError
from subclassaot.pipeline.rules.strides_and_offsets import refuse_float8_arithmetic
from subclassaot.pipeline.rules.training_rules import (
    check_overlapping_plain_groups,
    check_swapped_storage_outputs,
    check_training_supported,
)
from subclassaot.pipeline.trace import TracedGraph, analyze_and_trace, trace_inference, untraced_inference
from subclassaot.runtime.autograd_function import training_call
from subclassaot.runtime.call import inference_call, make_runner, with_inference_copies
from subclassaot.runtime.plan import GraphCall, RuntimePlan, historyless_leaves, leaf_attr_paths
from subclassaot.runtime.python_writes import PythonWrite, replaying
from subclassaot.runtime.steps import own_accumulator_inputs
from subclassaot.runtime.straight_line import MISS, EntryFn, EntryRunner, entry_function, graph_writes, with_writes
from subclassaot.schemas import Analysis, DenseIndex, DenseLayout, FlatInputs, GraphOutputs
from subclassaot.torch_internals import (
    DATA_DEPENDENT_ERRORS,
    NO_FAKE_KERNEL_ERROR,
    compiling_session,
    function_modes_off,
    function_modes_on,
    get_version,
    new_fake_mode,
    shape_env_of,
    unbacked_symbols_made,
)

log = logging.getLogger(__name__)
P = ParamSpec("P")
R = TypeVar("R")
M = TypeVar("M", bound=torch.nn.Module)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledEntry:
    spec: pytree.TreeSpec
    # the call was `fn(*leaves)`: its flat inputs are the values of the lifted state named `lifted_names` (Note
    # [State The Program Reads]), then its positional args (the fast path of CompiledFunction.__call__)
    simple_arity: int | None
    guards: guards.Guards
    run: Callable[[Sequence[object], dict[str, int]], object]
    run_source: str | None  # the generated per-call path (Note [Straight-Line Runners]); None: the generic runner
    # Compile-time records kept for explain(); the per-call path above never touches them.
    flat: FlatInputs
    layout: DenseLayout
    analysis: Analysis
    traced: TracedGraph
    backward: torch.fx.GraphModule | None  # training: the backward graph (see Note [Training Through A Joint Graph])
    forward: torch.fx.GraphModule | None = None  # training: the forward partitioned from the joint graph
    modes: ModesKey = NO_MODES_KEY  # the ambient modes it was compiled under (Note [Ambient Modes])
    lifted_names: tuple[str, ...] = ()  # the lifted state's names, in order (FlatInputs.module_state_names)
    # a training entry whose backward is autograd's own, through the graph run with grad on (Note [Training Without A
    # Function]): no backward graph, no Function
    autograd_backward: bool = False
    runner: EntryRunner | None = None  # the runner `run` came from (it may wrap it)
    # the guards and the runner as one generated function, which a plain positional call runs (Note [Straight-Line
    # Runners], "one function per entry"); None where it calls them one after the other
    entry_source: str | None = None
    # the program's assignments of plain values to the Python state it reads, made after each call's graph returned
    # (Note [State The Program Reads], "Writes")
    python_writes: tuple[PythonWrite, ...] = ()


class CompiledFunction(Generic[P, R]):
    """A compiled function (or module): call it like the original."""

    def __init__(self, fn: Callable[P, R], config: CompileConfig) -> None:
        self.fn = fn
        self.config = config
        self._entries: list[CompiledEntry] = []
        # (arity, guards and run as one function or None, guards, run) of the entries a plain positional call can
        # take, in order (__call__'s first path)
        self._plain: tuple[
            tuple[
                int,
                Callable[[Sequence[object]], R] | None,
                guards.GuardFn,
                Callable[[Sequence[object], dict[str, int]], R],
            ],
            ...,
        ] = ()
        self._reasons: list[str] = []
        self._lock = threading.RLock()
        self._is_module = isinstance(fn, torch.nn.Module)
        self._captures = capture_refs(fn)  # See Note [State The Program Reads]
        self._state = AutomaticDynamicState()
        self._symbols = SymbolCache()
        # The name and docstring, not the function's `__dict__`: its attributes must not clobber ours (a module
        # is wrapped by CompiledModule instead: see its docstring).
        functools.update_wrapper(self, fn, updated=())

    def __reduce__(self) -> tuple[type[CompiledFunction[P, R]], tuple[Callable[P, R], CompileConfig]]:
        # deepcopy and pickle copy the function and compile it afresh: entries (and the lock) are not copied.
        return (type(self), (self.fn, self.config))

    @property
    def compile_config(self) -> CompileConfig:
        return self.config

    @property
    def recompile_reasons(self) -> tuple[str, ...]:
        return tuple(self._reasons)

    @property
    def compile_count(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> tuple[CompiledEntry, ...]:
        return tuple(self._entries)

    def entry_for(self, *args: object, **kwargs: object) -> CompiledEntry | None:
        """The compiled entry a call with these arguments would run (None: it would compile). For explain()."""
        state = lifted_state(self.fn, self._captures)
        values, spec = pytree.tree_flatten((state, args, kwargs))
        for entry in self.entries:
            if entry.spec == spec and isinstance(entry.guards.check(values), dict):
                return entry
        return None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            if not kwargs and not (_dispatch_modes() or _function_modes()):
                # A function that reads no lifted state, called with positional leaves only, outside any mode: its flat
                # inputs are `args` itself (the path below, its decisions taken when the entry was added).
                n = len(args)
                for arity, entry_fn, check, run in self._plain:
                    if arity == n:
                        if entry_fn is not None:  # (Note [Straight-Line Runners], "one function per entry")
                            out = entry_fn(args)
                            if out is not MISS:
                                return out
                            continue
                        bound = check(args)
                        if type(bound) is dict:
                            return run(args, bound)
            modes = NO_MODES
            if _dispatch_modes() or _function_modes():  # (the stacks' lengths: ambient_modes is the per-call cost)
                modes = ambient_modes()
                if modes:  # See Note [Ambient Modes]
                    return self._call_under(modes, args, kwargs)
            if not kwargs:
                # Fast path: called with positional leaves only; its flat inputs are the lifted state's values (a
                # module's, or what the function captures: the same names in the same order), then `args` itself. A
                # container where a tensor or constant was compiled fails a type guard, and a module passed as an
                # argument (whose state would be lifted too) fails one or changes the names: both take the full path
                # below. The Python state the function reads is checked inside `guards.check` on this path too:
                # See Note [State The Program Reads]
                state = lifted_state(self.fn, self._captures) if self._is_module or self._captures else {}
                names = tuple(state)
                values: Sequence[object] = [*state.values(), *args] if names else args
                for entry in tuple(self._entries):
                    if entry.simple_arity == len(args) and entry.lifted_names == names and entry.modes == NO_MODES_KEY:
                        bound = entry.guards.check(values)
                        if isinstance(bound, dict):
                            return cast(R, entry.run(values, bound))
            return self._lookup_or_compile(args, kwargs, modes)
        except NotImplementedError as e:  # (zero-cost until raised: the per-call path is unchanged)
            if not isinstance(e, SubclassAOTError):  # See Note [Compiled Functions Inside torch.func Transforms]
                refuse_transform_wrappers(args, kwargs)
            raise

    def _lookup_or_compile(self, args: tuple[object, ...], kwargs: Mapping[str, object], modes: AmbientModes) -> R:
        state = lifted_state(self.fn, self._captures, args, kwargs)
        values, spec = pytree.tree_flatten((state, args, kwargs))
        failures = []
        for entry in tuple(self._entries):
            if entry.modes != modes.key:
                failures.append(describe_modes_change(entry.modes, modes.key))
                continue
            if entry.spec != spec:
                failures.append("the structure of the arguments changed")
                continue
            bound = entry.guards.check(values)
            if isinstance(bound, dict):
                return cast(R, entry.run(values, bound))
            failures.append(bound)
        return self._compile_and_run(args, kwargs, values, failures, modes)

    def _call_under(self, modes: AmbientModes, args: tuple[object, ...], kwargs: Mapping[str, object]) -> R:
        """A call under the caller's modes: torch-function modes are traced and popped while the entry runs; under
        a dispatch mode the call runs eagerly (Note [Ambient Modes])."""
        if modes.dispatch:
            reason = f"called under {describe_modes(modes.key)}"
            with self._lock:
                if not self._reasons or self._reasons[-1] != reason:
                    self._reasons.append(reason)
            warnings.warn(
                f"subclassaot: {getattr(self.fn, '__name__', self.fn)} was {reason}, which the compiled graph cannot "
                "trace (a dispatch mode acts on real tensors below autograd); running eagerly. Call it outside the "
                "mode to use the compiled graph.",
                stacklevel=3,
            )
            eager: Callable[..., R] = self.fn
            return eager(*args, **kwargs)
        with function_modes_off():
            return self._lookup_or_compile(args, kwargs, modes)

    def _compile_and_run(
        self,
        args: tuple[object, ...],
        kwargs: Mapping[str, object],
        values: list[object],
        failures: list[str],
        modes: AmbientModes,
    ) -> R:
        with self._lock:
            if len(self._entries) >= self.config.recompile_limit:
                warnings.warn(
                    f"subclassaot: {getattr(self.fn, '__name__', self.fn)} hit recompile_limit="
                    f"{self.config.recompile_limit}; running eagerly. Last reason: {failures[-1] if failures else '?'}",
                    stacklevel=3,
                )
                eager: Callable[..., R] = self.fn
                with function_modes_on(modes.function):  # popped by _call_under: eager applies them
                    return eager(*args, **kwargs)
            if failures:
                reason = failures[-1] if len(failures) == 1 else "; ".join(dict.fromkeys(failures))
                self._reasons.append(reason)
                log.info("recompiling %s: %s", getattr(self.fn, "__name__", self.fn), reason)
            entry = compile_entry(
                self.fn, args, kwargs, self.config, self._state, self._symbols, self._captures, modes.function
            )
            entry = dataclasses.replace(entry, modes=modes.key)
            arity = entry.simple_arity
            if (
                arity is not None
                and not entry.lifted_names
                and entry.modes == NO_MODES_KEY
                and not (self._is_module or self._captures)
            ):
                joined = _entry_function(entry)
                entry = dataclasses.replace(entry, entry_source=joined[1] if joined is not None else None)
                # (the run's result typed once here, not by a `cast` call on every call)
                run = cast(Callable[[Sequence[object], dict[str, int]], R], entry.run)
                entry_fn = cast(Callable[[Sequence[object]], R] | None, joined[0] if joined else None)  # (`MISS` too)
                self._plain = (*self._plain, (arity, entry_fn, entry.guards.check, run))
            self._entries.append(entry)
        bound = entry.guards.check(values)
        if not isinstance(bound, dict):
            raise AssertionError(f"BUG: a freshly compiled entry rejects the inputs it was compiled for: {bound}")
        return cast(R, entry.run(values, bound))


class CompiledModule(torch.nn.Module, Generic[M]):
    """A compiled nn.Module: the module itself, except that calling it runs the compiled program.

    It shares the module's `__dict__` (parameters, buffers, submodules, hooks, `training`, and plain attributes such
    as a Hugging Face `config`), so `state_dict()`, `parameters()`, `train()`/`eval()`, `.to()`, `load_state_dict`,
    attribute reads and writes, and nesting it in a parent module act on the module itself, with the module's own
    names (no `_orig_mod.` prefix). What the module's class defines beyond nn.Module (methods, properties) is read off
    the module. The compiled object's own state (its cache, config, the module itself) lives in slots, outside that
    `__dict__`, so no module attribute can shadow it and nothing of ours leaks into the module; a deepcopy or pickle
    copies the module and compiles the copy afresh. Calling it, or its `forward`, runs the compiled program; the
    cache's facts are `compile_count`, `recompile_reasons`, `entries` and `compile_config` (`config` is the
    module's own attribute, if it has one).
    """

    __slots__ = ("_compiled", "_orig_mod")
    _compiled: CompiledFunction[..., object]
    _orig_mod: M

    def __init__(self, module: M, config: CompileConfig) -> None:
        # No nn.Module.__init__: it would reset the shared state.
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_compiled", CompiledFunction(module, config))
        object.__setattr__(self, "__dict__", module.__dict__)

    # Any, as nn.Module.__call__: a module's forward returns what it returns.
    def __call__(self, *args: object, **kwargs: object) -> Any:
        return self._compiled(*args, **kwargs)

    def forward(self, *args: object, **kwargs: object) -> Any:
        return self._compiled(*args, **kwargs)

    # Any: what the module's class defines is forwarded as it is, of whatever type it has.
    def __getattr__(self, name: str) -> Any:
        try:
            module = object.__getattribute__(self, "_orig_mod")
        except AttributeError:  # not initialised yet (unpickling, copying)
            raise AttributeError(name) from None
        return getattr(module, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._orig_mod!r})"

    def __reduce__(self) -> tuple[type[CompiledModule[M]], tuple[M, CompileConfig]]:
        # deepcopy and pickle copy the module and compile the copy afresh: entries are not copied.
        return (type(self), (self._orig_mod, self._compiled.config))

    @property
    def compile_config(self) -> CompileConfig:
        return self._compiled.config

    @property
    def recompile_reasons(self) -> tuple[str, ...]:
        return self._compiled.recompile_reasons

    @property
    def compile_count(self) -> int:
        return self._compiled.compile_count

    @property
    def entries(self) -> tuple[CompiledEntry, ...]:
        return self._compiled.entries


def _entry_function(entry: CompiledEntry) -> tuple[EntryFn, str] | None:
    """The entry's guards and straight-line runner as one function, and its source, where its `run` is that runner
    itself."""
    runner, g = entry.runner, entry.guards
    if runner is None or entry.run is not runner.run or not g.fast:
        return None
    checked = set(entry.flat.tensor_indices) <= g.one_call  # (every tensor input's dispatch keys checked)
    return entry_function(g.fast, g.slow, runner, checked)


_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._len_torch_function_stack


def _ambient_grad() -> contextlib.AbstractContextManager[object]:
    # See Note [Grad Mode And Autograd Reads]
    return torch.set_grad_enabled(torch.is_grad_enabled())


def compile_entry(
    fn: Callable[..., object],
    args: tuple[object, ...],
    kwargs: Mapping[str, object],
    config: CompileConfig,
    state: AutomaticDynamicState,
    symbols: SymbolCache,
    captures: tuple[CaptureRef, ...] | None = None,
    function_modes: tuple[object, ...] = (),
) -> CompiledEntry:
    """Compile one entry guarded by the Python state `fn` reads now (Note [State The Program
    Reads]): snapshot it, compile (every run of the program starting from it), replay the plain values the program
    assigns to it after each call (refuse any other change), and check it before the entry's guards."""
    before = python_state.watched_now(fn, args, dict(kwargs), guard=config.python_state_guards)
    with python_state.rewinding(before) as rewind:  # (the state as before once compiled: the guards read it)
        # See Note [Dynamo Captures, The Pipeline Compiles]
        with compiling_session(), _collection_paused(), _nan_checks_paused(), captured_generators_kept(before):
            entry = _compile_any(fn, args, kwargs, config, state, symbols, captures, function_modes)
        writes = rewind.writes(str(getattr(fn, "__qualname__", type(fn).__name__)))
    entry = _replaying(entry, writes)
    # (compiled now where with_python_state cannot merge it into the guards' fast body, and so calls it)
    merged = bool(entry.guards.fast)
    python = python_state.snapshot(fn, args, dict(kwargs), guard=config.python_state_guards, compiled=not merged)
    if not python.watched and python.ambient is None:
        return entry
    return dataclasses.replace(
        entry,
        guards=guards.with_python_state(
            entry.guards,
            python.check,
            python.source,
            python.checks,
            python.slow,
            python.ambient.grad if python.ambient is not None else None,  # (its checks read the grad mode)
        ),
    )


def _replaying(entry: CompiledEntry, writes: tuple[PythonWrite, ...]) -> CompiledEntry:
    """The entry making the program's Python writes after its graph returned (Note [State The Program Reads],
    "Writes"): in its generated runner where its `run` is that runner, else around its `run`."""
    if not writes:
        return entry
    runner = entry.runner
    if runner is not None and entry.run is runner.run:
        runner = with_writes(runner, writes)
        return dataclasses.replace(entry, run=runner.run, runner=runner, run_source=runner.source, python_writes=writes)
    return dataclasses.replace(entry, run=replaying(entry.run, writes), python_writes=writes)


@contextlib.contextmanager
def _nan_checks_paused() -> Iterator[None]:
    """Anomaly mode's NaN checks off while a compile runs (as AOTAutograd's joint trace has them): they read the values
    of the gradients each autograd node returns, which a run over fake tensors does not have. The calls are checked by
    autograd itself: eager's own nodes where autograd is the compiled backward (Note [Training Without A Function]),
    else the gradients the compiled Function returns."""
    if not torch.is_anomaly_check_nan_enabled():
        yield
        return
    with torch.autograd.set_detect_anomaly(torch.is_anomaly_enabled(), check_nan=False):
        yield


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a compile runs: a compile makes hundreds of thousands of
    short-lived objects (fake tensors, fx nodes), which start full collections of the whole heap (a second or more
    on a process that holds a large model) that find little to free; they run once it is on again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _compile_any(
    fn: Callable[..., object],
    args: tuple[object, ...],
    kwargs: Mapping[str, object],
    config: CompileConfig,
    state: AutomaticDynamicState,
    symbols: SymbolCache,
    captures: tuple[CaptureRef, ...] | None = None,
    function_modes: tuple[object, ...] = (),
) -> CompiledEntry:
    """Compile one entry; if tracing with symbolic sizes fails (an op without symbolic support, a size the program
    branches on), compile it again with static sizes rather than fail a call eager completes. `function_modes`: the
    caller's torch-function modes, pushed around the user's code while it is traced (Note [Ambient Modes])."""
    refs = capture_refs(fn) if captures is None else captures
    # State lifted beside the arguments (Note [State The Program Reads]) keeps the arguments as they are.
    lifts = isinstance(fn, torch.nn.Module) or bool(refs) or bool(argument_modules(args, kwargs))
    # (a module among the arguments stays one through the marked call; the wrapper would hide fn's own captures)
    same = find_same_inputs(args, kwargs) if not (isinstance(fn, torch.nn.Module) or refs) else None
    if same is not None:  # See Note [Synthetic Bases]
        offset = len(flatten_call(fn, args, kwargs, ())[0].values) - len(pytree.tree_leaves((args, dict(kwargs))))
        marked_args, marked_kwargs = marked_call(same, args, kwargs, offset)
        inner = _compile_any(
            unmarking(fn, same), marked_args, marked_kwargs, config, state, symbols, (), function_modes
        )
        paths = [leaf.path for leaf in inner.flat.leaves]
        entry_guards, marked = same_input_guards(same, inner.guards, paths, offset)
        return dataclasses.replace(
            inner, guards=entry_guards, run=lambda values, bound: inner.run(marked(values), bound)
        )
    try:
        return _compile_entry_once(fn, args, kwargs, config, state, symbols, captures, function_modes)
    except AliasedSubclassRefusal as refusal:
        hidden = find_hidden_bases(args, kwargs) if not lifts else None
        if hidden is None:
            raise
        try:  # See Note [Aliased Inputs In Training]
            with_args, with_kwargs = call_with_bases(hidden, args, kwargs)
            inner = _compile_any(
                dropping_bases(fn, hidden), with_args, with_kwargs, config, state, symbols, (), function_modes
            )
        except Exception:
            raise refusal from None
    entry_guards, extended = hidden_base_guards(hidden, inner.guards, [leaf.path for leaf in inner.flat.leaves])
    _, spec = pytree.tree_flatten(({}, args, dict(kwargs)))
    return dataclasses.replace(
        inner,
        spec=spec,
        simple_arity=len(args) if not kwargs else None,
        guards=entry_guards,
        run=lambda values, bound: inner.run(extended(values), bound),
    )


@dataclass(slots=True)
class _Attempt:
    """What one compile attempt has seen: whether any of its fake inputs had a symbolic size or stride (else a
    compile with static shapes is the very same compile), and the inference trace it put off (Note [Training Through
    A Joint Graph])."""

    symbolic: bool = False
    deferred_trace: Callable[[], TracedGraph] | None = None
    # a call under no_grad whose program turns grad on inside: compiled for training over no_grad(program) (Note
    # [Grad Mode And Autograd Reads])
    within_no_grad: bool = False
    # the program's requires_grad_() calls making new leaves held back (Note [Training Without A Function]): decided
    # by the first analysis run that completes, or as called once eager's run shows that a held-back leaf is observed
    hold: NewLeafHold = dataclasses.field(default_factory=NewLeafHold)


def _compile_entry_once(
    fn: Callable[..., object],
    args: tuple[object, ...],
    kwargs: Mapping[str, object],
    config: CompileConfig,
    state: AutomaticDynamicState,
    symbols: SymbolCache,
    captures: tuple[CaptureRef, ...] | None,
    function_modes: tuple[object, ...],
) -> CompiledEntry:
    name = getattr(fn, "__name__", fn)
    attempt = _Attempt()
    try:
        try:
            return _compile_entry(fn, args, kwargs, config, state, symbols, captures, function_modes, attempt)
        except SubclassAOTError:
            raise
        except Exception as e:  # any failure of the symbolic trace; the static compile decides
            if config.dynamic is False or not attempt.symbolic:
                raise  # (a compile over static fakes already: the same compile again fails the same way)
            log.info("symbolic trace of %s failed (%s); compiling with static shapes", name, e)
            # (a user's policy stands; one Dynamo's adapter derived from its own symbols does not: our guards then
            # check the sizes it left unguarded, as for aliased inputs in _fakify_and_desugar)
            derived = config.caller_guarded
            policies = {p: policy for p, policy in config.policies.items() if p not in derived}
            static = dataclasses.replace(config, dynamic=False, policies=policies)
            return _compile_entry(fn, args, kwargs, static, state, symbols, captures, function_modes)
    except DATA_DEPENDENT_ERRORS as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UnsupportedError(
            f"{name}: the program depends on tensor values while it is traced ({type(e).__name__}: {first}). "
            "subclassaot compiles a whole program into one graph, without graph breaks, so it cannot read a "
            "tensor's value into Python (.item(), .tolist(), `if t.sum() > 0:`) or make a size out of tensor "
            "values (nonzero, unique, masked_select). Compute that value outside the compiled function and pass "
            "it in, or use a data-independent op (torch.where(cond, a, b) instead of an if)"
            + ("" if (where := program_line(e.__traceback__)) is None else f". The read: {where}")
        ) from e
    except NO_FAKE_KERNEL_ERROR as e:
        raise UnsupportedError(
            f"{name}: the program calls {e.func}, which has no fake (meta) kernel, so it cannot be traced: torch's "
            "strided-layout NestedTensors have none (a jagged NestedTensor's scaled_dot_product_attention on CPU "
            "runs its math fallback through one). Call it outside the compiled function, or use "
            'torch.compile(fn, backend="subclassaot"), which runs it eagerly between two graphs'
        ) from e


def _compile_entry(
    fn: Callable[..., object],
    args: tuple[object, ...],
    kwargs: Mapping[str, object],
    config: CompileConfig,
    state: AutomaticDynamicState,
    symbols: SymbolCache,
    captures: tuple[CaptureRef, ...] | None,
    function_modes: tuple[object, ...],
    attempt: _Attempt | None = None,
) -> CompiledEntry:
    """Compile; where a trace finds the program reaching storage elements outside an input that is its own graph
    input, compile again with that input's whole storage as a synthetic base (Note [as_strided On Inputs])."""
    whole_storage: frozenset[DenseIndex] = frozenset()
    attempt = _Attempt() if attempt is None else attempt
    while True:
        try:
            try:
                with torch.enable_grad() if attempt.within_no_grad else contextlib.nullcontext():
                    entry = _compile_over(
                        fn, args, kwargs, config, state, symbols, captures, whole_storage, function_modes, attempt
                    )
                if entry is not None:
                    return entry
                continue  # (the program as called: Note [Training Without A Function])
            except Exception:
                if attempt.deferred_trace is not None:  # Note [Training Through A Joint Graph]
                    _raised_alone(attempt.deferred_trace)  # its own error first
                raise
        except StorageReachError as e:
            if e.leaf in whole_storage:
                raise
            whole_storage |= {e.leaf}
        except GradReenabledError as e:
            if torch.is_grad_enabled() and not attempt.within_no_grad:
                # called with grad: the error comes from a trace a training compile runs under no_grad (the forward's
                # values), whose grad-enabled regions eager never runs so; "called under no_grad" would mislead
                cause: BaseException = e.__cause__ or e.__context__ or e  # the trace's own error, where it raised one
                raise UnsupportedError(
                    "the program turns grad mode on inside (torch.enable_grad() / set_grad_enabled(True)); a training "
                    "compile traces the forward's values under no_grad, where that region fails "
                    f"({type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}) though eager, "
                    "called with grad, runs it (Note [Grad Mode And Autograd Reads]); not supported yet. Compute "
                    "that region without the torch.enable_grad() block (grad is on already)"
                ) from e
            if attempt.within_no_grad:
                raise
            attempt.within_no_grad = True  # Note [Grad Mode And Autograd Reads]
            attempt.hold = NewLeafHold()  # (the run starts with grad off: which calls make new leaves is decided anew)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Program:
    """One compile attempt's program over fresh fakes of its inputs: what each of its traces takes."""

    call: Callable[..., object]  # the program over the flat inputs (ambient modes and grad mode set around it)
    flat: FlatInputs
    tensors: list[torch.Tensor]  # per tensor input (FlatInputs.tensor_indices): the real tensor
    fake_mode: FakeTensorMode
    fakified: FakifyResult
    fakes: list[torch.Tensor]  # per tensor input: its fake, requiring grad where the real tensor does
    dense_fakes: list[torch.Tensor]  # per dense leaf (DenseIndex): its fake
    nonleaf: frozenset[int]  # tensor inputs: subclass non-leaves that require grad (analyze's `nonleaf`)
    decompositions: Mapping[torch._ops.OperatorBase, Callable[..., object]] | None
    hold: NewLeafHold  # the calls making new leaves held back (Note [Training Without A Function])
    eager: EagerAsk  # the program's eager record, built where a rule asks (Note [The Eager Record], reading a fact)

    def analyze(
        self,
        layout: DenseLayout,
        replay_reads: tuple[object, ...] | None = None,
        own_leaves: frozenset[int] | None = None,
    ) -> Analysis:
        """`own_leaves`: pipeline.analyze's (None in the first analysis, which finds them)."""
        return analyze(
            self.call,
            self.flat,
            layout,
            self.dense_fakes,
            self.fakes,
            self.fake_mode,
            self.nonleaf,
            replay_reads,
            hold=self.hold,
            own_leaves=own_leaves,
            eager=self.eager,
        )

    def analyze_and_trace(
        self, layout: DenseLayout, traces: Callable[[Analysis], bool]
    ) -> tuple[Analysis, TracedGraph | None]:
        analysis_of = functools.partial(
            analysis_of_run, self.call, self.flat, layout, user_fakes=self.fakes, eager=self.eager
        )
        return analyze_and_trace(
            self.call,
            self.flat,
            layout,
            self.dense_fakes,
            self.fakes,
            self.fake_mode,
            self.decompositions,
            analysis_of,
            traces,
            hold=self.hold,
        )


def _compile_over(
    fn: Callable[..., object],
    args: tuple[object, ...],
    kwargs: Mapping[str, object],
    config: CompileConfig,
    state: AutomaticDynamicState,
    symbols: SymbolCache,
    captures: tuple[CaptureRef, ...] | None,
    whole_storage: frozenset[DenseIndex],
    function_modes: tuple[object, ...],
    attempt: _Attempt,
) -> CompiledEntry | None:
    """inputs -> fakify -> desugar -> analyze -> trace (training: joint -> partition) -> backend -> guards -> runtime.
    None: the analysis held back a call making a new leaf that eager's run observes; compile again as called (Note
    [Training Without A Function])."""
    attempt.deferred_trace = None
    flat, as_called = flatten_call(fn, args, kwargs, captures)
    call = holding_back_flags(lost_subclasses(as_called, flat), attempt.hold)  # See Note [Training Without A Function]
    call = traced_under(function_modes, call)  # See Note [Ambient Modes]
    # See Note [Grad Mode And Autograd Reads]: the grad mode the program starts in, and the one it leaves
    caller_grad = False if attempt.within_no_grad else torch.is_grad_enabled()
    grad_at_end: list[bool] = []
    call = _in_grad_mode(call, False if attempt.within_no_grad else None, grad_at_end)
    unobserved = functools.partial(_held_leaves_unobserved, attempt.hold, as_called, flat, function_modes, caller_grad)
    analyzed = _analyzed_holding_back(call, flat, config, state, symbols, whole_storage, attempt, unobserved)
    if analyzed is None:
        return None
    prog, layout, analysis, training, traced_once = analyzed
    inference, kept = _inference_graphs(training, prog, layout, analysis, traced_once)
    backend = backends.get_backend(config.backend)
    new_leaves = any(analysis.new_leaves)
    native = (training or new_leaves) and _trains_natively(prog, layout, analysis, backend, kept, attempt)
    if native:  # runtime/steps.py: Version Counters As Eager's
        analysis = native_counts(analysis)
        inference = kept
    if new_leaves and not native:
        refuse_new_leaves(flat, analysis, backend is backends.eager_backend and not attempt.within_no_grad)
    if training and not native and not prog.fakified.symbol_bindings:  # Note [Training Through A Joint Graph]
        traced = untraced_inference(layout, analysis, prog.dense_fakes)
        attempt.deferred_trace = inference
    else:
        traced = inference()
    analysis = resimplified_data_metas(analysis, shape_env_of(prog.fake_mode))
    # See Note [Grad Mode And Autograd Reads]: compiled for the grad a call under no_grad turns on inside, an entry
    # without an input that requires grad (a new leaf the program made) is one for calls under no_grad too
    grad_mode = None if training else caller_grad
    trial = torch_function_trial(call, flat)  # See Note [Ambient Modes]
    plan = _runtime_plan(flat, layout, analysis, traced, prog, trial)
    backward_graph = forward_graph = None
    if training and not native:
        plan, traced, graph_call, bw_meta = _training_graph_call(
            prog, plan, traced, inference, backend, config, attempt
        )
        backward_graph, forward_graph = bw_meta.graph, bw_meta.forward
    else:
        graph_call = _inference_graph_call(plan, traced, backend, config, native)
    entry_guards = _entry_guards(flat, layout, prog, analysis, config, grad_mode)
    runner = make_runner(plan, graph_call)
    left = grad_at_end[0] if grad_at_end and grad_at_end[0] != caller_grad else None
    run = _with_grad_mode(runner.run, attempt.within_no_grad, left)
    if trial is not None:
        check_trial(trial, lambda values: _run_checked(entry_guards, run, values))
    _, spec = pytree.tree_flatten(pytree.tree_unflatten(list(flat.values), flat.spec))
    simple = len(flat.leaves) == len(flat.module_state_names) + len(args) and not kwargs
    return CompiledEntry(
        spec=spec,
        simple_arity=len(args) if simple else None,
        lifted_names=flat.module_state_names,
        guards=entry_guards,
        run=run,
        run_source=runner.source,
        runner=runner,
        flat=flat,
        layout=layout,
        analysis=analysis,
        traced=traced,
        backward=backward_graph,
        forward=forward_graph,
        autograd_backward=native,
    )


def _inference_graphs(
    training: bool, prog: _Program, layout: DenseLayout, analysis: Analysis, traced_once: TracedGraph | None
) -> tuple[Callable[[], TracedGraph], Callable[[], TracedGraph]]:
    """The inference graph, and the graph of the native path (Note [Training Without A Function]): the one the
    analysis's run traced, where it traced one (Note [Training Through A Joint Graph]: one run); but a training
    compile's, traced with grad on, is the native path's alone: the Function's inference graph is traced under
    no_grad."""
    traced = functools.cache(functools.partial(_trace_inference, training, prog, layout, analysis))
    if traced_once is None:
        return traced, traced
    kept = functools.cache(lambda: traced_once)
    return (traced if training else kept), kept


def _analyzed_holding_back(
    call: Callable[..., object],
    flat: FlatInputs,
    config: CompileConfig,
    state: AutomaticDynamicState,
    symbols: SymbolCache,
    whole_storage: frozenset[DenseIndex],
    attempt: _Attempt,
    unobserved: Callable[[], ShownLeaves | None],
) -> tuple[_Program, DenseLayout, Analysis, bool, TracedGraph | None] | None:
    """The program fakified and analyzed (`_analyzed`, with the graph its run traced where it did), with the calls
    making new leaves its analysis held back where eager's run observes none of them but by the flag of outputs that
    are those leaves (given it once built); None where it observes one otherwise and the program as called is to be
    compiled instead (`attempt.hold` then says so); the refusal of the compile as called where that is certain (Note
    [Training Without A Function])."""
    try:
        prog, layout = _fakify_and_desugar(call, flat, config, state, symbols, whole_storage, attempt)
        layout, analysis, training, traced_once = _analyzed(
            prog, layout, whole_storage, _may_train_natively(flat, config, attempt)
        )
    except (StorageReachError, GradReenabledError):
        raise  # (the driver's own compile again: what the run noted is noted again)
    except Exception:
        # the program with the calls held back fails where the program as called may not: eager's run decides
        # which of the two is the program's
        if not attempt.hold.noted or unobserved() == ShownLeaves():
            raise
        attempt.hold = NewLeafHold.as_called()
        return None
    if attempt.hold.noted:
        shown = unobserved()
        outputs = None if shown is None else outputs_given_their_flag(analysis.outputs, shown)
        if outputs is None:
            refusal = attempt.hold.refusal()
            if refusal is not None:
                raise refusal
            attempt.hold = NewLeafHold.as_called()
            return None
        analysis = dataclasses.replace(analysis, outputs=outputs)
    return prog, layout, analysis, training, traced_once


def _may_train_natively(flat: FlatInputs, config: CompileConfig, attempt: _Attempt) -> bool:
    """Whether a training compile may train without a Function (Note [Training Without A Function]: the eager backend,
    called with grad on), as far as the call tells before its analysis; and whether it likely will: a module holding
    state that requires no grad (buffers: a training-mode BatchNorm writes its running statistics, which leaves the
    Function path) likely trains through the Function, whose compile has no use for a graph traced by the analysis's
    run (Note [Training Through A Joint Graph]: one run). A guess that costs time only, where wrong."""
    state = flat.values[: len(flat.module_state_names)]
    return (
        backends.get_backend(config.backend) is backends.eager_backend
        and not attempt.within_no_grad
        and all(t.requires_grad for t in state if isinstance(t, torch.Tensor))
    )


def _held_leaves_unobserved(
    hold: NewLeafHold,
    as_called: Callable[..., object],
    flat: FlatInputs,
    function_modes: tuple[object, ...],
    caller_grad: bool,
) -> ShownLeaves | None:
    """Does holding back the calls the analysis noted change nothing eager's run shows, run under the caller's grad
    mode, but the flag of outputs that are those leaves or views of them (their positions; None: observed otherwise; Note [Training
    Without A Function])? Asked once per decision (a compile again over an input's whole storage keeps it); a run
    that failed before deciding is asked about what it noted."""
    if hold.held is not None and hold.asked:
        return hold.shown
    held = hold.held if hold.held is not None else frozenset(hold.noted)
    wrap = functools.partial(traced_under, function_modes)
    with torch.set_grad_enabled(caller_grad):
        found = unobserved_new_leaves(wrap, as_called, flat, held, hold.calls if hold.held is not None else None)
    if hold.held is not None:
        hold.asked, hold.shown = True, found
    return found


def _runtime_plan(
    flat: FlatInputs,
    layout: DenseLayout,
    analysis: Analysis,
    traced: TracedGraph,
    prog: _Program,
    trial: TorchFunctionTrial | None,
) -> RuntimePlan:
    """The plan the runtime follows, from the analysis and the inference trace (training adds its own)."""
    plan = RuntimePlan(
        flat=flat,
        layout=layout,
        analysis=analysis,
        graph_outputs=traced.outputs,
        leaf_attr_paths=leaf_attr_paths(layout),
        input_requires_grad=tuple(t.requires_grad for t in prog.tensors),
        own_accumulators=own_accumulator_inputs(layout, prog.tensors),
        output_types=trial.output_types if trial is not None else (),
        historyless_leaves=historyless_leaves(flat, layout, analysis),
    )
    return with_inference_copies(plan, prog.tensors)


def _entry_guards(
    flat: FlatInputs,
    layout: DenseLayout,
    prog: _Program,
    analysis: Analysis,
    config: CompileConfig,
    grad_mode: bool | None,
) -> guards.Guards:
    """The entry's guards, built after every trace: the joint and backward traces add guards too (a backward that
    branches on a size); the symbols they replaced stay bound for the plan's records."""
    return guards.build_guards(
        flat,
        layout,
        prog.fakes,
        shape_env_of(prog.fake_mode),
        analysis.base_reads,
        config.caller_guarded,
        grad_mode,
        state_first=config.python_state_guards,
        # Note [What The Guards Compare]
        creation_meta_reads=analysis.creation_meta_reads
        + (multi_output_view_input_reads(flat, layout, analysis) if grad_mode is None else ()),
        apart=tuple(DenseIndex(j) for j, m in enumerate(analysis.mutations) if m.history_of_its_own),
        base_flag_reads=analysis.base_flag_reads,
        unbumped_view_reads=analysis.unbumped_view_reads,
        grad_fn_type_reads=analysis.grad_fn_type_reads,
        written=[j for j, m in enumerate(analysis.mutations) if m.data or m.metadata or m.swapped],
    )


def _trains_natively(
    prog: _Program,
    layout: DenseLayout,
    analysis: Analysis,
    backend: BackendFn,
    inference: Callable[[], TracedGraph],
    attempt: _Attempt,
) -> bool:
    """Note [Training Without A Function]: whether autograd, recording the graph's run, is the compiled backward (not
    in a call under no_grad compiled for the grad it turns on inside, whose graph marks no input)."""
    return (
        backend is backends.eager_backend
        and not (attempt.within_no_grad and any(analysis.leaf_marked))
        and native_training_plan(prog.flat, layout, analysis)
        and records_as_eager(prog.call, prog.flat, layout, analysis, functools.partial(_eager_run_of, inference))
    )


def _eager_run_of(inference: Callable[[], TracedGraph]) -> tuple[Callable[..., object], GraphOutputs]:
    """The native path's graph as the eager backend runs it, made once (the compile's own: Note [What A Backend
    Receives And Returns], Graph Modules Generate Their Code When Run), and where its outputs start."""
    traced = inference()
    return backends.eager_backend(_graph_of(traced), traced.example_inputs), traced.outputs


def _analyzed(
    prog: _Program, layout: DenseLayout, whole_storage: frozenset[DenseIndex], native: bool
) -> tuple[DenseLayout, Analysis, bool, TracedGraph | None]:
    """The program analyzed over `layout`, and again where it gains grad on an input or leaves aliases untouched;
    the layout it was last analyzed over, whether the compile is for training, and the inference graph where the run
    that analyzed it traced it too (Note [Training Through A Joint Graph]: one run; `native`: a training compile may
    train without a Function). Refuses what it cannot compile."""
    flat, fakes = prog.flat, prog.fakes
    training = torch.is_grad_enabled() and any(t.requires_grad for t in prog.tensors)
    traced: TracedGraph | None = None
    apart = _analyzed_apart(prog, layout, whole_storage, training, native)
    if apart is not None:
        layout, analysis, traced = apart
    else:
        once = _analyzed_once(prog, layout, training) if _runs_once(prog, layout, training, native) else None
        if once is not None:
            analysis, traced = once
        else:
            with torch.enable_grad() if training else _ambient_grad():
                analysis = prog.analyze(layout)
        gains_grad = _gaining_grad(prog, analysis)
        # (the leaves of their own beside an alias, which only the first analysis finds: every later one is given
        # them, functional_run.own_leaf_inputs)
        own_leaves = own_leaves_of(analysis)
        if gains_grad and torch.is_grad_enabled():
            traced = None  # (the analysis below decides the graph: `_keeps_trace` kept none)
            # The program calls requires_grad_() on an input: compile for training with it requiring grad from the
            # start (the runtime sets it on the real input before running, as eager's program would).
            check_written_inputs_gaining_grad(flat, layout, analysis, gains_grad)
            for i in gains_grad:
                fakes[i].requires_grad_(True)
            training = True
            before = analysis
            # its reads answer as eager's did, before the flag (Note [Grad Mode And Autograd Reads])
            with torch.enable_grad():
                analysis = prog.analyze(layout, before.autograd_reads, own_leaves)
            check_sets_before_gaining_grad(flat, layout, (before, analysis), gains_grad)
        # (an input gaining grad last, after a read of another over its storage: apart, that read would be no read of
        # its, Note [Grad Mode And Autograd Reads])
        untraced = _untouched_groups(layout, analysis) if not any(analysis.gains_last) else frozenset()
        if untraced:
            # See Note [Synthetic Bases]: trace the untouched aliases as separate inputs.
            layout = _apart_layout(prog, untraced, whole_storage)
            replay = analysis.autograd_reads if gains_grad else None  # (eager's, before the flag: as above)
            with torch.enable_grad() if training else _ambient_grad():
                analysis = prog.analyze(layout, replay, own_leaves)
            traced = None
    check_grad_reenabled(analysis.grad_reenabled, training=training)
    if training:
        check_gained_grad(flat, layout, analysis, fakes)
        check_training_supported(flat, layout, analysis, fakes)
        check_swapped_storage_outputs(flat, layout, analysis)
        check_overlapping_plain_groups(flat, layout, analysis, fakes)
        check_multi_output_view_inputs(flat, layout, analysis)
        check_multi_output_view_outputs(flat, layout, analysis)
        refuse_stale_view_layouts(list(analysis.views_read_after_own_set))  # Note [Stale View Functions]
    return layout, analysis, training, traced


def _runs_once(prog: _Program, layout: DenseLayout, training: bool, native: bool) -> bool:
    """Whether the analysis's run may trace the inference graph too (Note [Training Through A Joint Graph]: one
    run; training: where the compile may train without a Function, `native`)."""
    return (
        (native or not training)
        and not layout.groups
        and not prog.nonleaf
        and torch._C._len_torch_dispatch_stack() == 0
    )


def _analyzed_once(prog: _Program, layout: DenseLayout, training: bool) -> tuple[Analysis, TracedGraph | None] | None:
    """The analysis, and the inference graph traced by its run where `_keeps_trace`; None where that run raised
    (the analysis alone decides: Note [Training Through A Joint Graph]: one run)."""
    made = unbacked_symbols_made(prog.fake_mode)
    try:
        with torch.enable_grad() if training else _ambient_grad():
            once = prog.analyze_and_trace(layout, functools.partial(_keeps_trace, prog, layout, training))
    except Exception:
        return None
    # (a tensor's value read as a number: make_fx binds the symbol to the node that made it, the analysis leaves it
    # pending for the trace to refuse, as before)
    return once if unbacked_symbols_made(prog.fake_mode) == made else None


def _keeps_trace(prog: _Program, layout: DenseLayout, training: bool, analysis: Analysis) -> bool:
    """Whether the graph the analysis's run traced may be the compile's (Note [Training Through A Joint Graph]: one
    run; training: the graph of the native path, where the analysis allows one: Note [Training Without A Function])."""
    if any(analysis.new_leaves) or (_gaining_grad(prog, analysis) and torch.is_grad_enabled()):
        return False
    return not training or native_training_plan(prog.flat, layout, analysis)


def _gaining_grad(prog: _Program, analysis: Analysis) -> list[int]:
    """Tensor inputs on which the program calls requires_grad_() (not marked: Note [Training Without A Function]; nor
    gaining it last: Note [Grad Mode And Autograd Reads])."""
    last = analysis.gains_last or (False,) * len(prog.tensors)
    return [
        i
        for i, (t, after, marked, late) in enumerate(
            zip(prog.tensors, analysis.requires_grad_set, analysis.leaf_marked, last, strict=True)
        )
        if after and not t.requires_grad and not marked and not late
    ]


def _untouched_groups(layout: DenseLayout, analysis: Analysis) -> frozenset[DenseIndex]:
    """The first members of the alias groups the program leaves untouched (Note [Synthetic Bases])."""
    # Untouched: no member written or changed, and no in-place view op or `.data =` on one (t_(); t_() cancel out,
    # but on the same object passed twice they must stay one object), and no member's version counter advanced (an
    # in-place view op on a view of one: the others' unbind() views check that counter). A
    # group over a whole storage stays (the program reads outside its members).
    reshaped = {
        j
        for t, (ops, data) in enumerate(zip(analysis.inplace_view_ops, analysis.wrapper_data, strict=True))
        if ops or data is not None
        for j in layout.leaves_of_input[t]
    }
    return frozenset(
        g.members[0]
        for g in layout.groups
        if not g.whole_storage
        and not any(
            analysis.mutations[m].any or analysis.mutations[m].version_bumped or m in reshaped for m in g.members
        )
    )


def _apart_layout(prog: _Program, untraced: frozenset[DenseIndex], whole_storage: frozenset[DenseIndex]) -> DenseLayout:
    paths = [prog.flat.leaves[i].path for i in prog.flat.tensor_indices]
    return dense_layout(
        list(prog.fakified.fakes),
        paths,
        prog.flat.tensor_indices,
        prog.tensors,
        untraced=untraced,
        whole_storage=whole_storage,
    )


def _analyzed_apart(
    prog: _Program, layout: DenseLayout, whole_storage: frozenset[DenseIndex], training: bool, native: bool
) -> tuple[DenseLayout, Analysis, TracedGraph | None] | None:
    """The layout with every alias group apart and the program analyzed over it, where that analysis shows every
    group untouched and no input gaining grad: the pair the grouped analysis would lead to (Note [Synthetic Bases]),
    with the inference graph where its run traced it too, as `_analyzed_once` over a layout with no group (Note
    [Training Through A Joint Graph]: one run); else None, and the grouped analysis decides."""
    candidates = frozenset(g.members[0] for g in layout.groups if not g.whole_storage)
    if not candidates:
        return None
    apart = _apart_layout(prog, candidates, whole_storage)
    traced: TracedGraph | None = None
    made = unbacked_symbols_made(prog.fake_mode)
    once = _runs_once(prog, apart, training, native)
    try:
        with torch.enable_grad() if training else _ambient_grad():
            keeps = functools.partial(_keeps_trace, prog, apart, training)
            analysis, traced = prog.analyze_and_trace(apart, keeps) if once else (prog.analyze(apart), None)
            if once and unbacked_symbols_made(prog.fake_mode) != made:
                # (a tensor's value read as a number: make_fx bound the symbol to the node that made it, where the
                # analysis alone leaves it pending for the trace to refuse, as `_analyzed_once` does)
                analysis, traced = prog.analyze(apart), None
    except Exception:  # the grouped analysis decides: its own error, or this one again once it finds them untouched
        return None
    if (_gaining_grad(prog, analysis) and torch.is_grad_enabled()) or _untouched_groups(layout, analysis) != candidates:
        return None
    return apart, analysis, traced


def _training_graph_call(
    prog: _Program,
    plan: RuntimePlan,
    traced: TracedGraph,
    inference: Callable[[], TracedGraph],
    backend: BackendFn,
    config: CompileConfig,
    attempt: _Attempt,
) -> tuple[RuntimePlan, TracedGraph, GraphCall, BackwardGraph]:
    """Training through a joint graph: the backward traced and partitioned, forward and backward compiled by
    `backend`, the plan (with the views replayed before the call), the inference trace where the joint trace failed,
    the compiled Function's call, and the backward's records."""
    layout, analysis = plan.layout, plan.analysis
    bw_meta = trace_backward(
        prog.call,
        prog.flat,
        layout,
        analysis,
        traced,
        prog.dense_fakes,
        prog.fakes,
        prog.fake_mode,
        prog.decompositions,
    )
    if bw_meta.early_views:  # Note [Backward Errors Are Deferred]
        plan = dataclasses.replace(plan, analysis=replays_before_call(analysis, bw_meta.early_views))
    # The partitioned forward (Note [Training Through A Joint Graph]); the inference graph where the joint
    # trace failed (the backward then raises the program's own error: Note [Backward Errors Are Deferred]).
    forward = bw_meta.forward
    if forward is None:
        attempt.deferred_trace = None  # (run here: its error, if it has one, is raised here)
        traced = inference()
        forward = _graph_of(traced)
    backends.verify_functional(forward)
    refuse_float8_arithmetic(forward)
    compiled = _compile_graph(backend, forward, traced.example_inputs, config)
    bw: Callable[..., object] | None = None
    if bw_meta.graph is not None:
        backends.verify_functional(bw_meta.graph)
        bw = backend(bw_meta.graph, bw_meta.example_inputs)
    graph_call = training_call(
        plan,
        compiled,
        bw,
        backward_plan(bw_meta, functools.partial(_compile_variant, backend)),
        differentiable_backward=config.backend == "eager",
        eager_saves=eager_saves(prog.call, prog.flat, analysis),
    )
    return plan, traced, graph_call, bw_meta


def _inference_graph_call(
    plan: RuntimePlan, traced: TracedGraph, backend: BackendFn, config: CompileConfig, native: bool
) -> GraphCall:
    """The inference graph (or, `native`, the forward autograd records as eager's: Note [Training Without A Function])
    compiled by `backend`, and its call."""
    backends.verify_functional(_graph_of(traced))
    refuse_float8_arithmetic(_graph_of(traced))
    # (native training: the graph runs with grad on, and autograd records it as eager's program)
    inputs_grad = any(t.requires_grad for t in traced.example_inputs) and not native
    functional = gm = _graph_of(traced)
    written = frozenset[int]()
    # Note [What A Backend Receives And Returns]
    writes: list[tuple[int, int]] = []
    # ours take the writes they can; a user's backend only when asked (`keep_input_mutations`: it must then keep them)
    if (backends.is_own(backend) or config.keep_input_mutations) and not any(
        t.requires_grad for t in traced.example_inputs
    ):
        in_place = backend is backends.eager_backend
        # (not into an inference tensor: outside inference_mode only the epilogue's copy inside one writes it; nor one
        # with a negative bit, which inductor reads as a resolved copy; nor one with a conjugate bit, whose copy_
        # inductor may run before the fallback kernels writing the value: `x.as_strided(...).add_(1)` of `c.conj()`)
        examples = traced.example_inputs
        writes = [(p, k) for p, k in graph_writes(plan) if not _bit_or_inference(examples[p])]
        gm, written = backends.with_input_writes(gm, writes, in_place=in_place)
    kept = frozenset(p for p, k in writes if k in written)  # the graph inputs the backend's callable may write
    compiled = _compile_graph(backend, gm, traced.example_inputs, config, functional, written, kept)
    no_views = backends.never_views(gm) if backend is backends.eager_backend else frozenset[int]()
    return inference_call(compiled, inputs_grad, written, no_views)


def _bit_or_inference(t: torch.Tensor) -> bool:
    return t.is_inference() or t.is_neg() or t.is_conj()


def _in_grad_mode(call: Callable[..., object], start: bool | None, ends: list[bool]) -> Callable[..., object]:
    """`call`, run from grad mode `start` (None: the one it finds); the mode it leaves is appended to `ends` and undone,
    so that a program switching it for good (`torch.set_grad_enabled(False)` as a call) does not switch the compile's
    (Note [Grad Mode And Autograd Reads])."""

    def run(*args: object, **kwargs: object) -> object:
        before = torch.is_grad_enabled()
        with torch._C.DisableTorchFunction():  # (the compile's switch, no call of the program's: SwapRecord.call_seqs)
            torch._C._set_grad_enabled(before if start is None else start)
        try:
            out = call(*args, **kwargs)
            ends.append(torch.is_grad_enabled())
            return out
        finally:
            with torch._C.DisableTorchFunction():
                torch._C._set_grad_enabled(before)

    return run


Run = Callable[[Sequence[object], dict[str, int]], object]


def _with_grad_mode(run: Run, grad_on: bool, left: bool | None) -> Run:
    """An entry's `run`: with grad mode on around it where `grad_on`, leaving the grad mode `left` behind where the
    program leaves one other than its caller's (None: the caller's stays; Note [Grad Mode And Autograd Reads])."""
    if not grad_on and left is None:
        return run

    def in_mode(values: Sequence[object], symbols: dict[str, int]) -> object:
        with torch.enable_grad() if grad_on else contextlib.nullcontext():
            out = run(values, symbols)
        if left is not None:
            torch._C._set_grad_enabled(left)
        return out

    return in_mode


def _raised_alone(trace: Callable[[], object]) -> None:
    """Run `trace`; its error, if it raises, is raised without the one being handled as its context (the error
    it raised when it ran first)."""
    try:
        trace()
    except Exception as e:
        raise e from None


def _trace_inference(training: bool, prog: _Program, layout: DenseLayout, analysis: Analysis) -> TracedGraph:
    """The inference graph; of a training compile, traced under no_grad, and where the program turns grad on inside
    and fails so, traced again with grad on, as eager runs it (Note [Grad Mode And Autograd Reads])."""
    if not training:
        with _ambient_grad():
            return _inference_of(prog, layout, analysis)
    try:
        with torch.no_grad():
            return _inference_of(prog, layout, analysis)
    except GradReenabledError as e:
        no_grad_error = e
    # (as the analysis ran it: its non-leaf inputs, subclasses and synthetic bases that require grad, run as clones)
    bases = cloned_bases(prog.flat, layout, prog.fakes, grouped_own_leaves(prog.flat, layout, own_leaves_of(analysis)))
    try:
        with torch.enable_grad():
            return _inference_of(prog, layout, analysis, (prog.nonleaf, bases))
    except Exception:
        raise no_grad_error from no_grad_error.__cause__  # (the refusal names the no_grad trace's error)


def _inference_of(
    prog: _Program, layout: DenseLayout, analysis: Analysis, clones: tuple[frozenset[int], frozenset[int]] | None = None
) -> TracedGraph:
    return trace_inference(
        *(prog.call, prog.flat, layout, analysis, prog.dense_fakes, prog.fakes, prog.fake_mode, prog.decompositions),
        clones=clones,
    )


def _graph_of(traced: TracedGraph) -> torch.fx.GraphModule:
    if traced.graph is None:
        raise AssertionError("BUG: the inference graph was needed but not traced")
    return traced.graph


def _run_checked(
    entry_guards: guards.Guards, runner: Callable[[Sequence[object], dict[str, int]], object], values: Sequence[object]
) -> object:
    bound = entry_guards.check(values)
    if not isinstance(bound, dict):
        raise AssertionError(f"BUG: a fresh entry rejects clones of the inputs it was compiled for: {bound}")
    return runner(values, bound)


def _compile_graph(
    backend: BackendFn,
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[torch.Tensor],
    config: CompileConfig,
    functional: torch.fx.GraphModule | None = None,
    written: frozenset[int] = frozenset(),
    kept: frozenset[int] = frozenset(),
) -> Callable[..., object]:
    """`functional`: the graph without the input writes `gm` makes to its outputs `written` (Note [What A Backend
    Receives And Returns]), which the stride reference runs; `kept`: the graph inputs those writes go to."""
    if backend is backends.eager_backend:  # runs the graph's own aten ops: eager's strides and fresh outputs already
        return backend(gm, example_inputs)
    # Another backend may rewrite the graph it is given (inductor does, in place): it gets a copy, and ours stays the
    # reference for its outputs (Note [What A Backend Receives And Returns])
    private = functional is not None and gm is not functional  # (with_input_writes made it: no one else holds it)
    compiled = backend(gm if private else torch.fx.GraphModule(gm, copy.deepcopy(gm.graph)), example_inputs)
    if not backends.is_own(backend):  # ours run the functional graph as it is: nothing to check per call
        compiled = _checked_first_call(compiled, config.backend, kept)
    return backends.keep_eager_outputs(compiled, functional if functional is not None else gm, written)


def _compile_variant(backend: BackendFn, variant: BackwardVariant) -> Callable[..., object]:
    """A backward retraced for new tangent types (Note [Tangent Retrace]), through the entry's backend."""
    backends.verify_functional(variant.graph)
    return backend(variant.graph, variant.example_inputs)


def _fakify_and_desugar(
    call: Callable[..., object],
    flat: FlatInputs,
    config: CompileConfig,
    state: AutomaticDynamicState,
    symbols: SymbolCache,
    whole_storage: frozenset[DenseIndex],
    attempt: _Attempt,
) -> tuple[_Program, DenseLayout]:
    """Fresh fakes from the real inputs and the policies; aliased inputs fall back to static shapes. Records in
    `attempt` whether a fake has a symbolic size or stride."""
    tensors = [cast(torch.Tensor, flat.values[i]) for i in flat.tensor_indices]
    paths = [flat.leaves[i].path for i in flat.tensor_indices]
    dynamic, policies = config.dynamic, dict(config.policies)
    while True:
        fake_mode = new_fake_mode()
        fakified = fakify_inputs(
            tensors,
            paths,
            fake_mode=fake_mode,
            dynamic=dynamic,
            policies=policies,
            state=state,
            symbol_cache=symbols,
        )
        try:
            layout = dense_layout(
                list(fakified.fakes), paths, flat.tensor_indices, tensors, whole_storage=whole_storage
            )
        except DynamicAliasError as e:
            # (a user's policy or mark stands; one Dynamo's adapter derived from its own symbols does not: our guards
            # then check the sizes it left unguarded)
            forced = {
                p: TensorPolicy(sizes=(static(),) * n)
                for p, n in e.members.items()
                if (p not in config.policies or p in config.caller_guarded) and not _user_marked(p, paths, tensors)
            }
            if dynamic is False and all(policies.get(p) == f for p, f in forced.items()):
                raise
            # See Note [Synthetic Bases]: aliased inputs compile with static shapes, those torch marks dynamic too
            # (an NJT's `_values` passed beside it: torch marks its packed dim, and so the plain tensor, dynamic).
            dynamic = False
            policies.update(forced)
            continue
        attempt.symbolic |= bool(fakified.symbol_bindings)
        fakes = list(fakified.fakes)
        for real, fake in zip(tensors, fakes, strict=True):
            if real.requires_grad and not fake.requires_grad and fake.is_leaf:
                fake.requires_grad_(True)  # a wrapper rebuilt by __tensor_unflatten__ may not carry it
        dense_fakes = _dense(fakes, paths)
        decompositions = backends.decompositions_for(config.backend)
        nonleaf = frozenset(
            i
            for i, t in enumerate(tensors)
            if torch.is_grad_enabled() and is_traceable_subclass(t) and t.requires_grad and not t.is_leaf
        )
        prog = _Program(
            call=call,
            flat=flat,
            tensors=tensors,
            fake_mode=fake_mode,
            fakified=fakified,
            fakes=fakes,
            dense_fakes=dense_fakes,
            nonleaf=nonleaf,
            decompositions=decompositions,
            hold=attempt.hold,
            eager=EagerAsk.of_call(call, flat),
        )
        return prog, layout


def _user_marked(path: str, paths: Sequence[str], tensors: Sequence[torch.Tensor]) -> bool:
    """Does the tensor at `path` (an input's, or an inner tensor of one: `args[0]._values`) carry a user's mark?"""
    for top, t in zip(paths, tensors, strict=True):
        if path == top or path.startswith(top + "."):
            found: object = t
            for attr in path[len(top) :].split(".")[1:]:
                found = getattr(found, attr, None)
            return isinstance(found, torch.Tensor) and get_mark(found) is not None
    return False


def _dense(fakes: Sequence[torch.Tensor], paths: Sequence[str]) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    for fake, path in zip(fakes, paths, strict=True):
        out.extend(flatten_subclass(fake, path)[1] if is_traceable_subclass(fake) else [fake])
    return out


def _checked_first_call(
    compiled: Callable[..., object], backend: str | BackendFn, kept: frozenset[int] = frozenset()
) -> Callable[..., object]:
    """Check, on the first call only, that the backend's callable leaves its inputs unwritten (but the graph inputs
    `kept`, which the graph it was given writes)."""
    checked = threading.Event()
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))

    def run(*graph_inputs: torch.Tensor) -> object:
        if checked.is_set():
            return compiled(*graph_inputs)
        before = [get_version(t) for t in graph_inputs]
        out = compiled(*graph_inputs)
        backends.check_inputs_untouched(before, graph_inputs, name, kept)
        checked.set()
        return out

    return run


# A module is also a Callable: the first overload, which gives it the nn.Module type, wins (mypy flags the overlap).
@overload
def compile(  # type: ignore[overload-overlap]
    fn: M,
    *,
    backend: str | BackendFn = ...,
    dynamic: bool | None = ...,
    policies: Mapping[str, Policy] | None = ...,
    recompile_limit: int = ...,
    keep_input_mutations: bool = ...,
    python_state_guards: bool = ...,
) -> CompiledModule[M]: ...
@overload
def compile(
    fn: Callable[P, R],
    *,
    backend: str | BackendFn = ...,
    dynamic: bool | None = ...,
    policies: Mapping[str, Policy] | None = ...,
    recompile_limit: int = ...,
    keep_input_mutations: bool = ...,
    python_state_guards: bool = ...,
) -> CompiledFunction[P, R]: ...
@overload
def compile(
    fn: None = None,
    *,
    backend: str | BackendFn = ...,
    dynamic: bool | None = ...,
    policies: Mapping[str, Policy] | None = ...,
    recompile_limit: int = ...,
    keep_input_mutations: bool = ...,
    python_state_guards: bool = ...,
) -> Callable[[Callable[P, R]], CompiledFunction[P, R]]: ...
def compile(
    fn: Callable[P, R] | None = None,
    *,
    backend: str | BackendFn = "inductor",
    dynamic: bool | None = None,
    policies: Mapping[str, Policy] | None = None,
    recompile_limit: int = 8,
    keep_input_mutations: bool = False,
    python_state_guards: bool = True,
) -> CompiledModule[M] | CompiledFunction[P, R] | Callable[[Callable[P, R]], CompiledFunction[P, R]]:
    """Compile `fn` (a function or nn.Module) over pytrees of tensors, tensor subclasses and Python scalars; a
    module gives a CompiledModule (the module itself, but for calling it)."""
    config = CompileConfig(
        backend=backend,
        dynamic=dynamic,
        policies=dict(policies or {}),
        recompile_limit=recompile_limit,
        keep_input_mutations=keep_input_mutations,
        python_state_guards=python_state_guards,
    )
    if fn is None:
        return lambda f: cast(CompiledFunction[P, R], _compiled(f, config))
    return _compiled(fn, config)


def _compiled(fn: Callable[P, R], config: CompileConfig) -> CompiledModule[Any] | CompiledFunction[P, R]:
    if isinstance(fn, CompiledModule):  # compiling a compiled module compiles its module anew
        return CompiledModule(fn._orig_mod, config)
    if isinstance(fn, CompiledFunction):  # ... and a compiled function its function
        return CompiledFunction(fn.fn, config)
    if isinstance(fn, torch.nn.Module):
        return CompiledModule(fn, config)
    return CompiledFunction(fn, config)
