"""Straight-line runners: the per-call path of one compiled entry as one generated Python function.

Input: a `RuntimePlan`, its `EpiloguePlan` and the entry's `GraphCall`. Output: `EntryRunner` (the source, printable,
its body and the names it reads, and `run(values, symbols) -> output pytree`), or None where the plan needs a step
only the generic runner (call.make_runner) takes; `with_writes`, the runner making the program's Python writes after
the graph returned (runtime/python_writes.py). Then, for a plain call, the entry's checks (`Checks`, typed pieces
the guards and the Python state emit) and its runner as one function of the flat inputs (`entry_function`, its
failures `MISS`). Invariants: Note [Straight-Line Runners].
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import keyword
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

import sympy
import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import LeafInfo, SubclassNode, Unflattener, unflattener
from subclassaot.authoring.wrapper_tensor import WrapperTensor, plain_fields, plain_unflattener
from subclassaot.runtime.plan import (
    GraphCall,
    GraphRunResult,
    MetaEvaluator,
    RuntimePlan,
    SettlingCall,
    graph_code,
    last_gains,
    non_view_alias,
    requires_grad_changes,
)
from subclassaot.runtime.python_writes import PythonWrite, replaying, write_lines
from subclassaot.runtime.regenerate import (
    has_size_spec,
    intermediate_base,
    own_bumps,
    regenerate_alias,
    unflatten_output,
)
from subclassaot.runtime.steps import EpiloguePlan, build_order, bumped_input_sources, epilogue_plan, once_per_location
from subclassaot.schemas import (
    AliasGroupRef,
    InputArg,
    LeafMutation,
    LeafSource,
    Meta,
    OutputInfo,
    OutputKind,
    Replay,
    ReplaySource,
    SourceSize,
    ViewStep,
)
from subclassaot.torch_internals import get_version, public_twin, set_version

# Note [Straight-Line Runners]
# The generic runner (call.make_runner) walks the plan on every call, asking of each output and each input what the
# program did to it. Most entries need few of its steps: unwrap the inputs, run the graph, copy the new values of
# written inputs back and settle version counters, build the outputs (fresh tensors, wrapped in their subclass; views
# of inputs, replayed by their view ops). For such an entry the per-call path is generated once, as one straight-line
# Python function: the steps the generic runner takes for this plan, in its order, with every per-entry decision
# (which outputs are fresh, which leaves go into which class with which ctx, which inputs are written and how, which
# version counters are read) made at compile time, and no loop over a structure that is fixed per entry. It does what
# the generic runner does and nothing else, so the result is the same object graph: outputs, aliasing, `._base`,
# version counters, autograd history. `_unsupported` names the plans it leaves to the generic runner: any step
# beyond those above (metadata changes, set_(), `.data =`, accumulators, early replays, wrapper storages, ...).
# What is cheaper written out is written out: version counters read and set inline (read once before the call inside
# one `try`: an inference tensor has none, and such a call goes to the generic runner before anything ran; the
# written leaves' counters set back in one call after the copies, whatever the copies did to them), a copy into an
# input that cannot require grad (guarded; a direct call for inference has no graph input that does) made without
# no_grad where the value does not either, and the outputs of a WrapperTensor that constructs as the base class does
# built as `plain_unflattener` builds them, its steps written out (`_make_wrapper_subclass` and the fields: the same
# object its `__tensor_unflatten__` returns; a field no class defines written to the instance's dict, where
# object.__setattr__ would put it, and the traced dtype and a CPU device bound as constants).
# A view of a WrapperTensor input made by one view op (`x.view(-1)`, `x.t()`, `x[1]`) costs most through the class's
# `__torch_dispatch__` (a Python dispatch, an unwrap, the op per inner tensor, a rewrap). Eager's result is fixed by
# what the trace saw: inner tensors that are aliases (not views) of the input's inner tensors, with the traced sizes,
# strides and offsets, in a wrapper that shares the input's wrapper storage (return_and_correct_aliasing), which
# autograd and ADInplaceOrView, above the Python key, make a view of the input (`._base`, the shared counter, the
# view's autograd metadata and grad_fn). So the runner builds that wrapper itself and calls the view op with a
# one-shot dispatch mode (`_Give`) that hands it over at the Python key: everything above the Python key runs as in
# eager; the class's dispatch, which the compiled graph already stands for, does not (`_handed_view`: one step, a
# plain construction, every inner tensor an alias of an input's; else the op runs through the class). The op is called
# through its public binding (`Tensor.view`) where no `__torch_function__` would take the call (`_handed_call`).
# As for the guards (Note [What The Guards Compare]), the source holds no caller text: every value it uses (a
# subclass, its ctx, an attribute name that is no plain identifier, an op, a constant output) is bound by reference
# as a global of the function (`_c3`); the source holds only our own names and integer literals we produce.
#
# Plain Steps:
# Most training steps need little of CompiledStep: plain tensor inputs, each its own graph input; outputs that are
# fresh plain tensors of the graph, in graph order, all of the graph's outputs; no input written (an empty epilogue), no
# alias group, no deferred error, no backward that writes or reshapes, a backward graph of our own
# (not one that reruns the joint graph for double backward). For such a step the choices the forward and backward make
# per call are made once (`_PlainStep`): the forward runs the graph, saves what the backward reads and returns the
# outputs; the backward gives plain tangents the traced strides, runs the backward graph and hands each gradient to
# its input. A tangent that is no plain tensor, and a backward with grad on (create_graph), take the general path,
# which the plain forward leaves what it reads. The straight-line runner applies such a step to the tensor inputs
# directly (GraphCall.apply; outside functorch's transforms the Function's C apply itself, as torch's
# `Function.apply` calls it). Per call it keeps no more than the backward reads: a missing tangent's zeros come from
# the node's own record of its output, and the graphs are called without a wrapper their first call found needless.
# A lone step (one differentiable output, one gradient, nothing saved, no counts or saved-tensor checks: a loss)
# keeps only the step on its context, and the engine's call of its node (the backward class's `apply`, which
# BackwardCFunction defines as two Python frames finding `backward`) runs the backward graph itself for a plain
# tangent with grad off; anything else goes on to `backward` as before.
#
# One function per entry: a plain positional call (CompiledFunction.__call__'s first path) runs the entry's checks and
# its runner as one generated function (`entry_function`), emitted whole from typed pieces: the Python state's checks
# and the guards' fast checks (`Checks`: statements and `Fails` conditions, the names they read, the symbols they
# bind), then the runner's body (`EntryRunner.body`: its lines, the names they read). Each emitter binds its values
# under its own names (the guards' `_g3`, the state's `_s3`, the runner's `_c3`), so one namespace holds them all;
# the function's locals are checked apart from every name it reads as a global (a clash: no joined function). An
# inference entry's grad-mode guard is a piece of its own, left out where the Python state's checks require the same
# grad mode (their one-call check or their own read stands for it: guards.with_python_state). Where a
# check fails, its piece's slow path decides (`fails`: the detailed guards, the Python state's slow path), and the
# runner runs where that passes, else the function returns `MISS` (the next entry, then the full lookup). Where every
# tensor input passed the guards' one-call check, which compares dispatch keys under the thread's include set (a
# functorch transform being active, or a dead functorch wrapper, fails it), the Function is applied without
# `_transforms()` and `_dead` (`EntryRunner.checked`): the call that fails it takes the runner, which tests both. A
# graph call whose wrapper settles rebinds the function's name as the runner's. Where the two cannot be joined (a
# wrapped runner or guards), the guards and the runner are called one after the other.
#
# The graph written in: the eager backend's callable is a function made from the graph's own straight-line code
# (GraphCode, backends._straight: our source, over our own names, every op and constant bound by reference). A runner
# whose direct graph call is such a function writes that code into its own body instead of calling it, as it is: no
# text of it is rewritten. The runner first binds the code's inputs to its dense inputs as plain locals (`_i0 = d3`,
# what the call's parameters were), and reads each output by the code's own name where the outputs are a flat display
# of names (no list built): the same ops on the same tensors in the same order, under the same torch-function test,
# without the call's frame, its arguments and the list of outputs. Its names are its own: globals `_e3`, `_tf_off`,
# `_has_tf`, and locals `_i<k>` and `_x<k>`, a family no other emitter binds (the runner's `d0`, `b0`, `w0`, `r0`,
# `r0_1`, `B0`, `s0`, `c0`, `h0`, `_m3`, `_fd`, `_give`, `_p`, `x`, `v`, `outs`, `pre`; the guards' `v0...` and the
# symbols; the Python state's checks none); where one of its globals would stand for another value in the runner, or
# one of its locals is a global there, the runner calls the function as before. The code drops no input: the runner
# reads its inputs after the graph's last use.

Runner = Callable[[Sequence[object], dict[str, int]], object]


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryRunner:
    run: Runner
    source: str | None  # the generated Python, printable for users; None: the generic runner (call.make_runner)
    body: tuple[str, ...] = ()  # `source`'s body, lines at depth 1 over `L` and `symbols`; () for the generic runner
    # `body` for a call whose tensor inputs all passed the guards' one-call check, which compares dispatch keys
    # under the thread's include set (no functorch transform active, no dead functorch wrapper among them): the
    # Function's C apply without those two tests (Note [Straight-Line Runners]); None where `body` has none
    checked: tuple[str, ...] | None = None
    names: Mapping[str, object] = dataclasses.field(default_factory=dict)  # the globals `body` reads
    reads_symbols: bool = False  # `body` reads `symbols`
    # the graph call whose wrapper leaves the path once needless, and the name `body` calls it by
    settling: tuple[SettlingCall, str] | None = None


def straight_line(plan: RuntimePlan, epilogue: EpiloguePlan, call: GraphCall, generic: Runner) -> EntryRunner | None:
    """The generated runner of this entry, or None where its plan needs the generic runner. `generic`: that runner,
    for a call the generated one leaves to it (an inference tensor among the counters it settles)."""
    if _unsupported(plan, epilogue, call) is not None:
        return None
    w = _Writer()
    w.globals["_generic"] = generic
    _unwrap(w, plan)
    _versions_before(w, plan, epilogue)
    _graph(w, plan, call)
    if not epilogue.empty:
        _epilogue(w, plan, call, epilogue)
    _outputs(w, plan, call)
    source = "def run(L, symbols):\n" + "\n".join(w.lines) + "\n"
    checked = None
    if w.outside is not None:
        at, line = w.outside
        checked = (*w.lines[:at], line, *w.lines[at + 4 :])
    names = dict(w.globals)
    namespace = dict(names)
    exec(compile(source, "<subclassaot runner>", "exec"), namespace)
    settling = None
    if isinstance(call.direct, SettlingCall) and w.direct is not None:  # its wrapper leaves the path once needless
        call.direct.when_settled(functools.partial(namespace.__setitem__, w.direct))
        settling = (call.direct, w.direct)
    return EntryRunner(
        source=source,
        run=namespace["run"],  # type: ignore[arg-type]  # exec'd
        body=tuple(w.lines),
        checked=checked,
        names=names,
        reads_symbols=w.reads_symbols,
        settling=settling,
    )


def with_writes(runner: EntryRunner, writes: Sequence[PythonWrite]) -> EntryRunner:
    """`runner`, making the program's Python writes after the graph returned (runtime/python_writes.py): in its
    generated body, before each `return`; its `run` the same. The generic runner is wrapped (`replaying`)."""
    if not writes:
        return runner
    if not runner.body:
        return dataclasses.replace(runner, run=replaying(runner.run, writes))
    names = dict(runner.names)

    def bind(value: object) -> str:
        name = f"_pw{len(names)}"
        names[name] = value
        return name

    lines = write_lines(writes, bind)

    def rewritten(body: Sequence[str]) -> tuple[str, ...]:
        out: list[str] = []
        for line in body:
            code = line.lstrip(" ")
            if not code.startswith("return "):
                out.append(line)
                continue
            indent = line[: len(line) - len(code)]
            out += [
                f"{indent}_written = {code[len('return ') :]}",
                *(indent + w for w in lines),
                f"{indent}return _written",
            ]
        return tuple(out)

    body = rewritten(runner.body)
    source = "def run(L, symbols):\n" + "\n".join(body) + "\n"
    namespace = dict(names)
    exec(compile(source, "<subclassaot runner>", "exec"), namespace)
    if runner.settling is not None:  # (as straight_line: this namespace's graph call rebound once settled too)
        runner.settling[0].when_settled(functools.partial(namespace.__setitem__, runner.settling[1]))
    return dataclasses.replace(
        runner,
        run=namespace["run"],  # type: ignore[arg-type]  # exec'd
        source=source,
        body=body,
        checked=rewritten(runner.checked) if runner.checked is not None else None,
        names=names,
    )


# One function per entry: the checks as typed pieces, and the function they and the runner make (Note [Straight-Line
# Runners]).


class _Miss:
    """The result of an entry function whose checks fail (no entry's result is this object)."""

    def __repr__(self) -> str:
        return "MISS"


MISS: Final = _Miss()
EntryFn = Callable[[Sequence[object]], object]
# a piece's slow path where one of its checks fails: (the flat inputs, the failure's code) -> the call's symbols
# where the call passes after all (this piece's checks and those after it), else the reason it does not
SlowPath = Callable[[Sequence[object], int], "dict[str, int] | str"]


@dataclass(frozen=True, slots=True)
class Fails:
    """A generated check: where `condition` (source over the function's locals and its piece's names) holds, the
    check fails, with `code` (its piece's own: the Python state's index of what changed)."""

    condition: str
    code: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Checks:
    """Generated checks as a piece of one function of the flat inputs `L`: its steps in order (a statement, one line
    at the piece's top level, or a check), the names they read, each bound by reference (no caller text in the
    source), and the symbols they bind."""

    steps: tuple[str | Fails, ...]
    names: Mapping[str, object]
    symbols: tuple[str, ...] = ()  # the locals the steps bind: the piece's result, `{name: value}`, where all pass
    catch: bool = False  # an exception raised by a step is a failure with code -2 (the Python state's reads)
    # the steps run with subclass torch functions off (guards.py: Note [What The Guards Compare]); every code 0
    subclass_functions_off: bool = False


_CHECK_NAMES: Final[Mapping[str, object]] = {"_no_subclass_functions": torch._C.DisableTorchFunctionSubclass}


def check_function(
    name: str,
    params: str,
    pieces: Sequence[Checks],
    fail: Callable[[int, int], str],
    then: Sequence[str] | None = None,
    *,
    bind_symbols: bool = True,
) -> tuple[str, dict[str, object]]:
    """The source of one function `name(params)` that runs `pieces`' checks in order, and `fail(piece, code)` (a
    statement that leaves the function) where one fails; where all pass, it returns the last piece's symbols
    (`then` None) or binds them as `symbols` (`bind_symbols`) and runs `then` (lines at depth 1). With the names the
    source reads but the statements `fail` makes (each piece's and its own: a name two pieces bind to different
    values is a bug)."""
    names = _merged([*(piece.names for piece in pieces), _CHECK_NAMES])
    if names is None:
        raise AssertionError("BUG: two generated checks bind one name to different values")
    lines = [f"def {name}({params}):"]
    for p, piece in enumerate(pieces):
        last = p == len(pieces) - 1
        symbols = "{" + ", ".join(f"{s!r}: {s}" for s in piece.symbols) + "}"  # (the ShapeEnv's names)
        assert not (piece.symbols and not last) and not (piece.catch and piece.subclass_functions_off)
        if piece.subclass_functions_off:
            # Once through a `while True:` inside the `with`, whose `break` is a failure (which leaves the context
            # before the slow path runs): no second frame per call.
            assert all(step.code == 0 for step in piece.steps if isinstance(step, Fails))
            inner = _steps(piece.steps, lambda code: "break", 3)
            if last and then is None:
                lines += ["    with _no_subclass_functions():", "        while True:", *inner]
                lines += [f"            return {symbols}", f"    {fail(p, 0)}"]
                return "\n".join(lines) + "\n", names
            flag = "symbols" if last else f"_passed{p}"
            lines += [f"    {flag} = None", "    with _no_subclass_functions():", "        while True:", *inner]
            lines += [f"            {flag} = {symbols if last else 'True'}", "            break"]
            lines += [f"    if {flag} is None:", f"        {fail(p, 0)}"]
        elif piece.catch:
            inner = _steps(piece.steps, functools.partial(fail, p), 2)
            lines += ["    try:", *(inner or ["        pass"]), "    except Exception:", f"        {fail(p, -2)}"]
        else:
            lines += _steps(piece.steps, functools.partial(fail, p), 1)
        if last and not piece.subclass_functions_off:
            if then is None:
                lines.append(f"    return {symbols}")
            elif bind_symbols:
                lines.append(f"    symbols = {symbols}")
    return "\n".join([*lines, *(then or ())]) + "\n", names


def _steps(steps: Sequence[str | Fails], fail: Callable[[int], str], depth: int) -> list[str]:
    pad = "    " * depth
    lines = []
    for step in steps:
        if isinstance(step, Fails):
            lines += [f"{pad}if {step.condition}:", f"{pad}    {fail(step.code)}"]
        else:
            lines.append(pad + step)
    return lines


def _merged(namespaces: Sequence[Mapping[str, object]]) -> dict[str, object] | None:
    """One namespace of several: None where two bind one name to different values."""
    merged: dict[str, object] = {}
    for namespace in namespaces:
        for name, value in namespace.items():
            if merged.setdefault(name, value) is not value:
                return None
    return merged


def entry_function(
    pieces: Sequence[Checks], slow: Sequence[SlowPath], runner: EntryRunner, checked: bool
) -> tuple[EntryFn, str] | None:
    """The entry's checks (`pieces`, each with its slow path) and then `runner`'s body as one function of the flat
    inputs, and its source (Note [Straight-Line Runners], "one function per entry"); None where the runner is the
    generic one or a local of the function has the name of a global it reads. `checked`: every tensor input is
    checked in one call (`EntryRunner.checked`)."""
    if not pieces or not runner.body:
        return None
    body = runner.checked if checked and runner.checked is not None else runner.body
    misses = {f"_miss{p}": _missed(path, runner.run) for p, path in enumerate(slow)}
    source, check_names = check_function(
        "entry", "L", pieces, lambda p, code: f"return _miss{p}(L, {code})", body, bind_symbols=runner.reads_symbols
    )
    names = _merged([check_names, runner.names, misses])
    if names is None or "entry" in names:
        return None
    exec(compile(source, "<subclassaot entry>", "exec"), names)
    fn = cast(EntryFn, names.pop("entry"))
    if not set(fn.__code__.co_varnames).isdisjoint({*names, *vars(builtins)}):
        return None  # (a local would stand for a global the pieces read)
    if runner.settling is not None:  # the graph called without its wrapper once needless, as by the runner
        runner.settling[0].when_settled(functools.partial(names.__setitem__, runner.settling[1]))
    return fn, source


def _missed(slow: SlowPath, run: Runner) -> Callable[[Sequence[object], int], object]:
    """Where a piece's check fails: its slow path, then the runner where the call passes after all, else `MISS`."""

    def miss(values: Sequence[object], code: int) -> object:
        bound = slow(values, code)
        return run(values, bound) if type(bound) is dict else MISS

    return miss


# The input writes a backend may keep in its graph: Note [What A Backend Receives And Returns].


def graph_writes(plan: RuntimePlan) -> tuple[tuple[int, int], ...]:
    """(graph input, graph output) for each input write the compiled graph may make itself (Note [What A Backend
    Receives And Returns]); () where none or the entry needs the generic runner."""
    epilogue = epilogue_plan(plan)
    if _unsupported(plan, epilogue, GraphCall(run=_no_run)) is not None:
        return ()
    finals = {j for j, _ in epilogue.final_copies}
    mutations, inputs = plan.analysis.mutations, plan.layout.graph_inputs
    writes = []
    for j, k in epilogue.original_copies:
        m = mutations[j]
        if j in finals or m.metadata or m.storage_changed or j not in inputs:
            continue
        if any(plan.analysis.new_leaves) and _hidden_write(m, final=False):
            continue  # (autograd records the graph's run: its write would give the input the value's history)
        if not all(type(s) is int and s != 0 for s in m.final_meta[1]):
            continue
        writes.append((inputs.index(j), k))
    return tuple(writes)


def _no_run(
    values: Sequence[object], graph_in: list[torch.Tensor], dense: list[torch.Tensor], symbols: dict[str, int]
) -> GraphRunResult:
    raise AssertionError("BUG: graph_writes' probe call ran")


def _unsupported(plan: RuntimePlan, epilogue: EpiloguePlan, call: GraphCall) -> str | None:
    """Why this plan needs the generic runner (a step the generated one does not take), or None."""
    analysis, layout = plan.analysis, plan.layout
    before_call = {
        "requires_grad changed on an input": any(requires_grad_changes(plan)) or bool(last_gains(plan)),
        "x.set_(x) on an input": any(analysis.self_set) or any(analysis.self_set_first),
        "a write after `.data =` held back": any(analysis.raising_write_blocks),
        "accumulators kept or made": any(analysis.kept_accumulators)
        or any(s is not None for s in (*analysis.accumulator_sizes, *analysis.releaf_sizes)),
        "early replays": any(
            info.kind is OutputKind.TENSOR and info.replay is not None and info.replay.before_epilogue
            for info in analysis.outputs
        ),
        "wrapper storages": bool(analysis.wrapper_storage or analysis.inner_wrapper_storage),
        "storage resizes": bool(analysis.storage_resizes),
        "inputs' counters kept at entry": bool(bumped_input_sources(analysis.outputs)),
        "view inputs' histories rebuilt before the graph reads them": bool(analysis.rebuilt_before_read),
        "aliased inputs": any(isinstance(g, AliasGroupRef) for g in layout.graph_inputs),
        "subclass inputs written in training": bool(call.wrapper_updates),
    }
    epilogue_steps = {
        "metadata changes": bool(epilogue.metadata or epilogue.reshaped or epilogue.copy_points),
        "set_() under grad": bool(epilogue.grad_sets or epilogue.grad_swaps or epilogue.early_grad_sets),
        "base copies": bool(epilogue.base_copies),
        "wrapper metadata": any(analysis.wrapper_meta_after[t] is not None for t in epilogue.wrappers),
    }
    for reason, found in (*before_call.items(), *epilogue_steps.items()):
        if found:
            return reason
    if any(cls is not None for cls in plan.output_types):
        return "torch-function subclass outputs"
    if any(info.parameter for info in analysis.outputs):
        return "Parameters the program made"  # (regenerate._retyped)
    tokens = [token for info in analysis.outputs if info.replay is not None for _, token in info.replay.marks]
    if len(set(tokens)) != len(tokens):
        return "views sharing an intermediate"  # Note [Output Regeneration]
    steps = [step for info in analysis.outputs if info.replay is not None for step in info.replay.steps]
    if not torch.is_grad_enabled() and any(step.grad_enabled for step in steps):
        return "a view taken with grad on, called under no_grad"  # (the generated steps only turn grad off)
    if any(step.without_history for step in steps):
        return "a view taken with grad on, without history"  # (given its creation meta: regenerate.replay_steps)
    if any(step.makes_leaf for step in steps):
        return "a view made a new leaf mid-chain"  # (flagged as it is made: regenerate.replay_steps)
    if any(step.inference_mode for step in steps):
        return "a view taken inside inference_mode"  # (replayed inside one: regenerate.replay_steps)
    if any(step.from_root for step in steps):
        return "a view whose history autograd regenerates from its root"  # (taken stale: regenerate.replay_steps)
    calls = [step.call for step in steps if step.call is not None]
    if len(set(calls)) != len(calls):
        return "outputs of one multi-output view"  # (one call for all: regenerate.replay_steps)
    for o, info in enumerate(analysis.outputs):
        why = _unsupported_output(info, o in call.prewraps)
        if why is not None:
            return f"{info.path}: {why}"
    return None


def _unsupported_output(info: OutputInfo, prewrapped: bool) -> str | None:
    first = info.leaves[0] if info.leaves else None
    if info.set_under_grad or info.base_gains_grad or info.data_from is not None or info.data_meta is not None:
        return "set_() or .data = on it"
    if first is not None and (first.onto_input is not None or first.storage_of is not None):
        return "set_() onto an input"
    if info.gains_grad or info.flag_kept:
        return "requires_grad_() on it"
    if info.inference_view:
        return "a view taken inside inference_mode"  # (given its creation meta: regenerate.build_outputs)
    if info.inference or info.inference_leaves or info.counterless:
        return "an inference tensor"
    replay = info.replay
    if replay is not None and replay.source is ReplaySource.WRAPPER and min(replay.root_bases, default=0) < 0:
        return "a view of an intermediate holding an input's inner tensor"  # (regenerate.root_leaf_values)
    if prewrapped or info.kind is not OutputKind.TENSOR:
        return None
    if replay is None:
        for leaf in info.leaves:
            if leaf.source is not LeafSource.GRAPH and (
                leaf.foreign_base is not None
                or leaf.hidden_base is not None
                or leaf.input_layout
                or leaf.set_steps is not None
            ):
                return "an alias on another storage"
            if leaf.from_base:
                return "a stale view of a view input, rebuilt from its base"
            if leaf.layout_probe is not None:
                return "a view of an intermediate laid out as a stride probe"  # (regenerate._probed_layouts)
        return None
    if replay.source is ReplaySource.INPUT_ROOT:
        return "a view of an intermediate set_() onto inputs"
    if replay.bump_after or replay.then_set or replay.base_after or replay.root_data_meta is not None:
        return "a view changed after it was taken"
    if any(step.op is torch.ops.aten.resize_.default for step in replay.steps):
        return "a resize_() replayed (inside inference_mode where it requires grad: regenerate.replay_steps)"
    return None


class _Writer:
    """Accumulates the body's lines; every value the source uses is bound as a global (Note [Straight-Line
    Runners])."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.globals: dict[str, object] = {
            "_usv": torch._C._autograd._unsafe_set_version_counter,
            "_ige": torch.is_grad_enabled,
            "_sg": torch._C._set_grad_enabled,
            "_alias": non_view_alias,
            "_base": intermediate_base,
            "_regen": regenerate_alias,
            "_once": once_per_location,
            "_ev": MetaEvaluator(),
            "_mws": torch.Tensor._make_wrapper_subclass,
            "_osa": object.__setattr__,
            "_fus": torch._functionalize_unsafe_set,
            "_Give": _Give,
            "_push": torch._C._push_on_torch_dispatch_stack,
            "_pop": torch._C._pop_torch_dispatch_stack,
            "_below": torch._C._AutoDispatchBelowADInplaceOrView,
            "_no_tf": torch._C.DisableTorchFunctionSubclass,
            "_htf": torch._C._has_torch_function_unary,
            "_transforms": torch._C._are_functorch_transforms_active,
            "_dead": torch._C._functorch.unwrap_if_dead,
        }
        self.given = False  # the graph call returns intermediate subclass roots (`given`)
        self.counted: set[int] = set()  # dense leaves whose counter was read before the call: no inference tensor
        self.roots: set[str] = set()  # the roots built so far (Note [Output Regeneration])
        self.direct: str | None = None  # the global the graph's direct callable is bound to
        # (line index, line) of the Function's apply outside functorch's transforms (EntryRunner.checked)
        self.outside: tuple[int, str] | None = None
        self.reads_symbols = False  # a line reads `symbols`
        self.outputs: tuple[str, ...] | None = None  # the graph's outputs, where its code is written in (GraphCode)

    def constant(self, value: object) -> str:
        name = f"_c{len(self.globals)}"
        self.globals[name] = value
        return name

    def out(self, k: int) -> str:
        """Source for the graph's output k: the value itself where the graph's code is written in, else `outs[k]`."""
        return self.outputs[k] if self.outputs is not None else f"outs[{k}]"

    def line(self, text: str, depth: int = 1) -> None:
        self.lines.append("    " * depth + text)

    def meta(self, meta: Meta, depth: int = 1) -> tuple[str, str, str]:
        """Source for (size, stride, offset): lists bound once where static, else evaluated over the symbols."""
        size, stride, offset = meta
        if all(type(d) is int for d in (*size, *stride, offset)):
            return self.constant(list(size)), self.constant(list(stride)), str(offset)
        name = f"_m{len(self.lines)}"
        self.line(f"{name} = _ev.meta({self.constant(meta)}, {self.symbols()})", depth)
        return f"{name}[0]", f"{name}[1]", f"{name}[2]"

    def symbols(self) -> str:
        """Source for the symbols' dict (the function reads it)."""
        self.reads_symbols = True
        return "symbols"

    def without_grad(self, statement: str, depth: int = 1) -> None:
        """`statement` under no_grad (torch.no_grad()'s own steps, without the context-manager object)."""
        self.line("_p = _ige()", depth)
        self.line("_sg(False)", depth)
        self.line("try:", depth)
        self.line(statement, depth + 1)
        self.line("finally:", depth)
        self.line("_sg(_p)", depth + 1)


def attribute_source(constant: Callable[[object], str], var: str, attr: str) -> str:
    """`var.attr` where `attr` is a plain name; otherwise `getattr(var, <bound name>)` (`constant` binds it): an
    attribute name is a subclass author's text, and text never enters the source (Note [What The Guards Compare])."""
    if attr.isidentifier() and not keyword.iskeyword(attr):
        return f"{var}.{attr}"
    return f"getattr({var}, {constant(attr)})"


def _unwrap(w: _Writer, plan: RuntimePlan) -> None:
    """The dense leaves, by attribute path from their owner input (call.make_runner's `dense_of`)."""
    for j, (leaf, attrs) in enumerate(zip(plan.layout.leaves, plan.leaf_attr_paths, strict=True)):
        access = f"L[{leaf.owner}]"
        for attr in attrs:
            access = attribute_source(w.constant, access, attr)
        w.line(f"d{j} = {access}")


def _versions_before(w: _Writer, plan: RuntimePlan, epilogue: EpiloguePlan) -> None:
    """The counters the epilogue settles, as the inputs came (call._versions), wrappers first. An inference tensor
    has none (reading it raises, before anything ran): such a call takes the generic runner, so every counter step
    below reads and sets counters that exist."""
    if not epilogue.wrappers and not epilogue.versions:
        return
    w.line("try:")
    for t in epilogue.wrappers:
        w.line(f"w{t} = L[{plan.flat.tensor_indices[t]}]._version", 2)
    for j in epilogue.versions:
        w.line(f"b{j} = d{j}._version", 2)
    w.counted.update(epilogue.versions)
    w.line("except RuntimeError:")
    w.line(f"return _generic(L, {w.symbols()})", 2)


def _graph(w: _Writer, plan: RuntimePlan, call: GraphCall) -> None:
    graph_in = ", ".join(f"d{g}" for g in plan.layout.graph_inputs)
    code = graph_code(call.direct)
    names = None if code is None else _merged([w.globals, code.names])
    if code is not None and names is not None and code.locals().isdisjoint(names):  # Note [Straight-Line Runners]
        assert code.arity == len(plan.layout.graph_inputs), "BUG: the graph's code takes other inputs"
        w.globals = names
        for k, g in enumerate(plan.layout.graph_inputs):
            w.line(f"_i{k} = d{g}")  # (the code's inputs bound to the runner's: its text is written as it is)
        w.outputs = code.items  # (each output read as itself: no list of them built)
        for line in code.lines("outs = " if w.outputs is None else None):
            w.line(line)
        return
    if call.direct is not None:
        w.direct = w.constant(call.direct)
        w.line(f"outs = {w.direct}({graph_in})")  # (a list or tuple: only indexed)
        return
    if call.apply is not None:  # Note [Straight-Line Runners]
        tensors = [f"L[{i}]" for i in plan.flat.tensor_indices]
        if call.apply_outside_transforms is None:
            w.line(f"pre = {w.constant(call.apply)}({''.join(f'{t}, ' for t in tensors)})")
            return
        w.line("if _transforms():")
        w.line(f"pre = {w.constant(call.apply)}({''.join(f'{t}, ' for t in tensors)})", 2)
        w.line("else:")
        outside = w.constant(call.apply_outside_transforms)
        w.line(f"pre = {outside}({''.join(f'_dead({t}), ' for t in tensors)})", 2)
        w.outside = (len(w.lines) - 4, f"    pre = {outside}({''.join(f'{t}, ' for t in tensors)})")
        return
    dense = ", ".join(f"d{j}" for j in range(len(plan.layout.leaves)))
    w.line(f"outs, pre, _, given, after = {w.constant(call.run)}(L, [{graph_in}], [{dense}], {w.symbols()})")
    w.given = True


def _epilogue(w: _Writer, plan: RuntimePlan, call: GraphCall, epilogue: EpiloguePlan) -> None:
    """call._epilogue for the plans `_unsupported` lets through: copies, counters, wrappers' counters."""
    for j, k in epilogue.original_copies:
        if k not in call.written:  # Note [What A Backend Receives And Returns]
            _copy(w, plan, call, j, k, final=False)
    for j, k in epilogue.final_copies:
        _copy(w, plan, call, j, k, final=True)
    mutations = plan.analysis.mutations
    assert {j for j, _ in (*epilogue.original_copies, *epilogue.final_copies)} <= set(epilogue.versions)
    # epilogue_plan.settle_version: every counter the epilogue settles is set to eager's count in one call, whatever
    # happened to it (runtime/steps.py: Version Counters As Eager's)
    counters = [(f"d{j}", f"b{j}", mutations[j].version_bumps) for j in epilogue.versions]
    # call._fix_wrappers without metadata: only wrappers whose counter eager advances
    counters += [
        (f"L[{plan.flat.tensor_indices[t]}]", f"w{t}", plan.analysis.wrapper_version_bumps[t])
        for t in epilogue.wrappers
    ]
    if counters:
        targets = "".join(f"{before} + {n}, " if n else f"{before}, " for _, before, n in counters)
        w.line(f"_usv(({''.join(f'{t}, ' for t, _, _ in counters)}), ({targets}))")


def _hidden_write(m: LeafMutation, *, final: bool) -> bool:
    """Is the epilogue's copy of this write one autograd must not record (eager's write was hidden from it: under
    no_grad, through `.data`, a storage swap)?"""
    hidden = not m.autograd_visible or m.hidden_from_autograd or m.storage_changed or not m.visible_through_self
    return hidden and not (final and m.written_after_data)


def _copy(w: _Writer, plan: RuntimePlan, call: GraphCall, j: int, k: int, *, final: bool) -> None:
    """epilogue_plan.copy_into, its decisions taken here. Its version-counter steps are left out: the settle step
    after the copies (every written leaf is in `EpiloguePlan.versions`) sets the counter from the one read before the
    call, whatever the copy did to it, and nothing between reads it."""
    m = plan.analysis.mutations[j]
    owner = plan.flat.tensor_indices.index(plan.layout.leaves[j].owner)
    hidden = _hidden_write(m, final=final) or j in plan.historyless_leaves  # (RuntimePlan.historyless_leaves)
    size, stride, _ = m.final_meta
    # No metadata change: the leaf has the layout its guards checked, and no repeated location where its strides
    # are nonzero numbers.
    if all(type(s) is int and s != 0 for s in stride):
        w.line(f"x, v = d{j}, {w.out(k)}")
    else:
        w.line(f"x, v = _once(d{j}, {w.out(k)})")
    if not hidden:  # (where neither requires grad, a copy under grad mode records nothing, as under no_grad)
        w.line("x.copy_(v)")
        return
    # A direct call for inference has no graph input that requires grad (guarded): then x does not, and where v does
    # not either a copy under grad mode records nothing, so it needs no no_grad (which costs as much as the copy). One
    # that trains natively (Note [Training Without A Function]) may take an input that requires grad throughout and is
    # written hidden from autograd: a copy into it with grad mode on would raise.
    if call.direct is not None and j in plan.layout.graph_inputs and not plan.input_requires_grad[owner]:
        w.line("if v.requires_grad:")
        w.without_grad("x.copy_(v)", 2)
        w.line("else:")
        w.line("x.copy_(v)", 2)
    else:
        w.without_grad("x.copy_(v)")


def _outputs(w: _Writer, plan: RuntimePlan, call: GraphCall) -> None:
    """regenerate.build_outputs for the plans `_unsupported` lets through, in its build order."""
    gout, infos = plan.graph_outputs, plan.analysis.outputs
    base_start = len(gout.updates) + gout.num_fresh
    for i in range(gout.num_bases):
        w.line(f"B{i} = _base({w.out(base_start + i)})")
    # before any view is replayed from them (runtime/steps.py: Version Counters As Eager's; the training Function gave
    # those that require grad theirs)
    given = [(b, count) for b, count, graded in plan.analysis.base_versions if not graded]
    if given:
        w.line(f"_usv(({''.join(f'B{b}, ' for b, _ in given)}), ({''.join(f'{c}, ' for _, c in given)}))")
    done: set[int] = set()

    def emit(o: int) -> None:
        if o in done:
            return
        done.add(o)
        info = infos[o]
        if o in call.prewraps:
            # (GraphCall.apply hands them back in order, a tuple)
            w.line(f"r{o} = pre[{sorted(call.prewraps).index(o) if call.apply is not None else o}]")
        elif info.kind is OutputKind.CONSTANT:
            w.line(f"r{o} = {w.constant(info.constant)}")
        elif info.kind is OutputKind.SYMINT:
            position = [p for p, other in enumerate(infos) if other.kind is OutputKind.SYMINT].index(o)
            w.line(f"r{o} = {w.out(base_start + gout.num_bases + position)}")
        elif info.kind is OutputKind.IS_INPUT:
            w.line(f"r{o} = L[{info.input_index}]")
        elif info.kind is OutputKind.SAME_AS:
            assert info.input_index is not None
            emit(info.input_index)
            w.line(f"r{o} = r{info.input_index}")
        elif info.replay is not None:
            _replayed(w, plan, o, info, emit)
        else:
            _from_leaves(w, plan, call, o, info)
            if o in input_counters:  # a detach() of the input: runtime/steps.py: Version Counters As Eager's
                w.line(f"{w.constant(set_version)}(r{o}, {w.constant(get_version)}(L[{input_counters[o]}]))")
            if o in counts:  # before any view of it (runtime/steps.py: Version Counters As Eager's)
                w.line(f"_usv((r{o},), ({counts[o]},))")

    input_counters = dict(plan.analysis.output_input_counters)
    counts = dict(plan.analysis.output_versions)
    for o in build_order(infos):
        emit(o)
    results = [f"r{o}" for o in range(len(infos))]
    if call.direct is None and call.apply is None:  # (GraphRun's last result)
        w.line("if after is not None:")
        w.line(f"after([{', '.join(results)}])", 2)
    spec = plan.analysis.output_spec
    if has_size_spec(spec):
        w.line(f"return {w.constant(unflatten_output)}([{', '.join(results)}], {w.constant(spec)}, True)")
    elif spec.is_leaf():
        w.line(f"return {results[0]}")
    elif spec.type in (tuple, list) and all(child.is_leaf() for child in spec.children()):
        items = "".join(f"{r}, " for r in results)
        w.line(f"return ({items})" if spec.type is tuple else f"return [{items}]")
    else:
        w.line(f"return {w.constant(pytree.tree_unflatten)}([{', '.join(results)}], {w.constant(spec)})")


def _from_leaves(w: _Writer, plan: RuntimePlan, call: GraphCall, o: int, info: OutputInfo) -> None:
    """regenerate._from_leaves: fresh leaves, and aliases of inputs and intermediates on their own storage."""
    fresh_start = len(plan.graph_outputs.updates)
    leaves = []
    for n, leaf in enumerate(info.leaves):
        var = f"r{o}_{n}" if info.tree is not None else f"r{o}"
        leaves.append(var)
        if leaf.source is LeafSource.GRAPH:  # plan.fresh_output
            w.line(f"{var} = {w.out(fresh_start + leaf.index)}")
            if fresh_start + leaf.index not in call.no_views:
                w.line(f"if {var}._is_view() and not {var}.requires_grad:")
                w.line(f"{var} = _alias({var})", 2)
            continue
        source = f"d{leaf.index}" if leaf.source is LeafSource.INPUT_ALIAS else f"B{leaf.index}"
        if leaf.base_layout:  # the real base's layout, not the trace's (Note [Strides The Kernels Choose])
            size, stride, offset = f"list({source}.shape)", f"list({source}.stride())", f"{source}.storage_offset()"
        else:
            size, stride, offset = w.meta(leaf.meta)
        bits = "" if leaf.bits is None else f", {leaf.bits}"
        w.line(f"{var} = _regen({source}, ({size}, {stride}, {offset}), {leaf.is_view}, {leaf.same_object}{bits})")
    if info.tree is None:
        return
    assert info.outer_meta is not None
    size, stride, _ = w.meta(info.outer_meta)
    k = info.outer_stride_leaf
    if k is not None:  # regenerate.fresh_outer_stride: Note [Strides The Kernels Choose]
        static = type(info.outer_meta[0]) is tuple and all(type(d) is int for d in info.outer_meta[0])
        shape = w.constant(tuple(info.outer_meta[0])) if static else f"tuple({size})"
        w.line(f"s{o} = list({leaves[k]}.stride()) if {leaves[k]}.shape == {shape} else {stride}")
        stride = f"s{o}"
    _build(w, f"r{o}", info.tree, leaves, size, stride)


def _build(
    w: _Writer, var: str, node: SubclassNode, leaves: Sequence[str], size: str, stride: str, depth: int = 1
) -> None:
    """`var` = the subclass `node` over `leaves`: a WrapperTensor that constructs as the base class does, written
    out (`_plain_wrapper`'s steps, where its sizes are static and have no -1: `plain_fields`); else `_builder`'s."""
    fields = None
    if not node.opaques and all(isinstance(c, LeafInfo) for c in node.children):
        fields = plain_fields(node.cls, node.attrs, node.ctx)
    static = size in w.globals and -1 not in cast(list[object], w.globals[size])
    if fields is None or not static:
        w.line(f"{var} = {w.constant(_builder(node))}([{', '.join(leaves)}], {size}, {stride})", depth)
        return
    first = leaves[0]
    cls = w.constant(node.cls)
    if _MWS_POSITIONAL:  # (keyword arguments cost ~0.3 us a call more: _positional_mws)
        # The first leaf's dtype is the traced wrapper's (the class's outer metadata is its first leaf's, and a
        # graph's outputs have the dtypes of its trace); a CPU device has no index: both bound as constants (a
        # `.device` read makes a new object that the call parses again: ~0.15 us).
        dtype = w.constant(node.dtype)
        device = w.constant(node.device) if node.device.type == "cpu" else f"{first}.device"
        w.line(
            f"{var} = _mws({cls}, {size}, {stride}, {first}.storage_offset(), None, {dtype}, {first}.layout, "
            f"{device}, False, False)",
            depth,
        )
    else:
        w.line(
            f"{var} = _mws({cls}, {size}, strides={stride}, storage_offset={first}.storage_offset(), "
            f"dtype={first}.dtype, device={first}.device, layout={first}.layout, requires_grad=False)",
            depth,
        )
    values = [*leaves, *(w.constant(c) for c in cast(tuple[object, ...], node.ctx))]
    if any(name in vars(k) for name in fields for k in node.cls.__mro__):  # (a descriptor takes the write)
        for name, value in zip(fields, values, strict=True):
            w.line(f"_osa({var}, {w.constant(name)}, {value})", depth)
        return
    # no class defines a field: object.__setattr__ puts each in the instance's dict, written directly (~0.1 us a field)
    w.line(f"_fd = {var}.__dict__", depth)
    for name, value in zip(fields, values, strict=True):
        w.line(f"_fd[{w.constant(name)}] = {value}", depth)


def _positional_mws() -> bool:
    """`_make_wrapper_subclass` takes (cls, size, strides, storage_offset, memory_format, dtype, layout, device,
    pin_memory, requires_grad) in this order, as positional arguments: checked once, on a wrapper built both ways
    (its signature is torch's, private)."""
    args = ([2, 3], [1, 2], 1, None, torch.float64, torch.strided, torch.device("cpu"), False, True)
    try:
        got = torch.Tensor._make_wrapper_subclass(WrapperTensor, *args)
    except (TypeError, RuntimeError):
        return False
    want = torch.Tensor._make_wrapper_subclass(
        WrapperTensor, [2, 3], strides=[1, 2], storage_offset=1, dtype=torch.float64, requires_grad=True
    )
    facts = ("shape", "stride", "storage_offset", "dtype", "layout", "device", "requires_grad")
    return all(
        (getattr(got, f)() if f in ("stride", "storage_offset") else getattr(got, f))
        == (getattr(want, f)() if f in ("stride", "storage_offset") else getattr(want, f))
        for f in facts
    )


_MWS_POSITIONAL = _positional_mws()


def _builder(node: SubclassNode) -> Unflattener:
    """The subclass's own plain construction where it has one (a WrapperTensor that constructs as the base class
    does: `_make_wrapper_subclass` and its fields, no `__tensor_unflatten__` call), else its `__tensor_unflatten__`."""
    plain = None
    if not node.opaques and all(isinstance(c, LeafInfo) for c in node.children):
        plain = plain_unflattener(node.cls, node.attrs, node.ctx)
    return plain if plain is not None else unflattener(node)


def _replayed(w: _Writer, plan: RuntimePlan, o: int, info: OutputInfo, emit: Callable[[int], None]) -> None:
    """regenerate.replay_view from an input, an intermediate base or subclass, or an earlier output (each chain
    object is made once: no memo)."""
    replay = info.replay
    assert replay is not None
    var = f"r{o}"
    if _handed_view(w, plan, o, info):
        return
    if replay.source is ReplaySource.INPUT:
        w.line(f"{var} = L[{replay.index}]")
    elif replay.source is ReplaySource.BASE:
        w.line(f"{var} = B{replay.index}")
    elif replay.source is ReplaySource.OUTPUT:
        emit(replay.index)  # built first, as regenerate's `get` does on demand
        w.line(f"{var} = r{replay.index}")
    else:
        w.line(f"{var} = {_root(w, replay, plan.analysis.root_versions)}")
    if replay.source_meta is not None and replay.source is not ReplaySource.BASE:  # regenerate._as_then
        size, stride, offset = w.meta(replay.source_meta)
        w.line(f"{var} = {var}.as_strided({size}, {stride}, {offset})")
    if replay.keeps_counter:  # runtime/steps.py: Version Counters As Eager's
        w.line(f"c{o} = {w.constant(get_version)}(L[{replay.index}])")
        if own := own_bumps(replay):  # (regenerate.py: a view with history is made at the count less its own bumps)
            w.line(f"if L[{replay.index}].requires_grad:")
            w.line(f"{w.constant(set_version)}(L[{replay.index}], c{o} - {own})", 2)
    for step in replay.steps:
        _step(w, var, step)
    if replay.keeps_counter:
        w.line(f"if not {var}.requires_grad:")
        w.line(f"{w.constant(set_version)}(L[{replay.index}], c{o})", 2)


def _handed_view(w: _Writer, plan: RuntimePlan, o: int, info: OutputInfo) -> bool:
    """A one-step view of a WrapperTensor input, where every inner tensor of eager's result is an alias of an inner
    tensor of the input's, as traced: the view op runs, and autograd and ADInplaceOrView make its result a view of
    the input as in eager, but the wrapper they are handed comes from here, not from the class's
    `__torch_dispatch__` (Note [Straight-Line Runners]). False (nothing written) where that does not hold."""
    replay, tree = info.replay, info.tree
    assert replay is not None
    if replay.source is not ReplaySource.INPUT or replay.source_meta is not None or len(replay.steps) != 1:
        return False
    step = replay.steps[0]
    if step.index is not None or step.own_version or not isinstance(step.op, torch._ops.OpOverload):
        return False
    returns = step.op._schema.returns
    if len(returns) != 1 or returns[0].alias_info is None or returns[0].alias_info.is_write:
        return False  # (return_and_correct_aliasing shares the input's wrapper storage with such an output)
    if tree is None or tree.opaques or not all(isinstance(c, LeafInfo) for c in tree.children):
        return False
    source = plan.layout.trees[plan.flat.tensor_indices.index(replay.index)]
    if source is None or source.cls is not tree.cls or not issubclass(tree.cls, WrapperTensor):
        return False
    if info.outer_stride_leaf is not None or plain_fields(tree.cls, tree.attrs, tree.ctx) is None:
        return False
    metas = [leaf.meta for leaf in info.leaves]
    if not all(
        leaf.source is LeafSource.INPUT_ALIAS
        and leaf.hidden_base is None
        and leaf.foreign_base is None
        and not leaf.input_layout
        and leaf.set_steps is None
        and leaf.passthrough is None
        and not leaf.function_view
        and leaf.bits is None
        for leaf in info.leaves
    ) or not all(type(d) is int for meta in (*metas, info.outer_meta) if meta is not None for d in _ints(meta)):
        return False
    assert info.outer_meta is not None
    leaves = [f"r{o}_{n}" for n in range(len(info.leaves))]
    if all(not leaf.is_view and not leaf.same_object and leaf.index in w.counted for leaf in info.leaves):
        # plan.non_view_alias of each, under one pair of guards (no inference tensor: its counter was read)
        w.line("with _below(), _no_tf():")
        for var, leaf in zip(leaves, info.leaves, strict=True):
            w.line(f"{var} = d{leaf.index}.as_strided({', '.join(w.meta(leaf.meta))})", 2)
    else:
        for var, leaf in zip(leaves, info.leaves, strict=True):
            size, stride, offset = w.meta(leaf.meta)
            w.line(f"{var} = _regen(d{leaf.index}, ({size}, {stride}, {offset}), {leaf.is_view}, {leaf.same_object})")
    size, stride, _ = w.meta(info.outer_meta)
    _build(w, f"h{o}", tree, leaves, size, stride)
    w.line(f"_fus(h{o}, L[{replay.index}])")
    w.line(f"_give = _Give(h{o}, {w.constant(step.op)})")
    w.line("_push(_give)")
    w.line("try:")
    depth = 2
    statement = f"r{o} = {_handed_call(w, step, f'L[{replay.index}]')}"
    if step.grad_enabled:
        w.line(statement, depth)
    else:
        w.without_grad(statement, depth)
    w.line("finally:")
    w.line("_pop(None)", 2)
    w.line("if _give.result is not None:")
    w.line("raise AssertionError('BUG: a handed view was not taken')", 2)
    return True


def _handed_call(w: _Writer, step: ViewStep, src: str) -> str:
    """Source for `_handed_view`'s call of the view op on `src`. Where no `__torch_function__` would take the call (no
    override on `src`'s class, no torch function mode: the test the binding itself makes first), the op's public
    binding where one dispatches exactly it with exactly these arguments (torch_internals.public_twin: ~1.2 us a call
    less than the OpOverload's), else the OpOverload; the same dispatch below either."""
    args = ", ".join([src, *_arguments(w, step, src)])
    call = f"{w.constant(step.op)}({args})"
    values = (*step.args, *(v for _, v in step.kwargs))
    if type(step.op) is not torch._ops.OpOverload or not all(_same_every_call(a) for a in values):
        return call
    twin = public_twin(step.op, [torch.empty(0, device="meta"), *step.args], dict(step.kwargs))
    return call if twin is None else f"{call} if _htf({src}) else {w.constant(twin)}({args})"


def _same_every_call(a: object) -> bool:
    """An argument `_argument` passes as the same value on every call: no input, no symbol, no size of the source."""
    if (type(a) is list or type(a) is tuple) and all(type(x) is int for x in a):
        return True
    return not isinstance(a, InputArg | list | tuple | sympy.Expr | SourceSize | torch.SymInt)


def _ints(meta: Meta) -> tuple[object, ...]:
    size, stride, offset = meta
    return (*size, *stride, offset)


class _Give:
    """A dispatch mode for one call: hands `result` to the one op it expects, at the Python key (below autograd and
    ADInplaceOrView, which then make it a view of the op's input); `_handed_view`'s."""

    __slots__ = ("op", "result")

    def __init__(self, result: torch.Tensor, op: torch._ops.OpOverload[..., object]) -> None:
        self.result: torch.Tensor | None = result
        self.op = op

    def __torch_dispatch__(
        self,
        func: torch._ops.OpOverload[..., object],
        types: object,
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        result = self.result
        if func is not self.op or result is None:
            # any other op (a size query of a wrapper with Python sizes): as without the mode, which torch pops while
            # its handler runs
            return func(*args, **(kwargs or {}))
        self.result = None
        return result


def _root(w: _Writer, replay: Replay, counts: Sequence[tuple[tuple[int, ...], int, bool]]) -> str:
    """The intermediate subclass a WRAPPER replay views, built once per call from its bases where the graph call
    did not give it (regenerate._replay_source, Note [Output Regeneration]), with its count where it requires no grad
    from the graph (Analysis.root_versions; runtime/steps.py: Version Counters As Eager's)."""
    name = "R" + "_".join(map(str, replay.root_bases))
    if name in w.roots:
        return name
    w.roots.add(name)
    depth = 1
    if w.given:
        key = "(" + "".join(f"{b}, " for b in replay.root_bases) + ")"
        w.line(f"{name} = given.get({key})")
        w.line(f"if {name} is None:")
        depth = 2
    assert replay.root_tree is not None and replay.root_meta is not None
    leaves = [f"B{b}" for b in replay.root_bases]
    size, stride, _ = w.meta(replay.root_meta, depth)
    k = replay.root_stride_leaf
    if k is not None:  # regenerate.root_outer_stride: Note [Strides The Kernels Choose]
        w.line(f"{name}_s = list({leaves[k]}.stride()) if list({leaves[k]}.shape) == {size} else {stride}", depth)
        stride = f"{name}_s"
    _build(w, name, replay.root_tree, leaves, size, stride, depth)
    count = next((c for bases, c, graded in counts if bases == replay.root_bases and not graded), None)
    if count is not None:
        w.line(f"_usv(({name},), ({count},))", depth)
    return name


def _arguments(w: _Writer, step: ViewStep, src: str) -> list[str]:
    """Source for a step's arguments after its input, `src`."""
    args = [_argument(w, a, src) for a in step.args]
    if step.kwargs:
        # (an InputArg names an input among the positional arguments only, as replay_steps reads them)
        kwargs = ", ".join(f"{w.constant(k)}: {_argument(w, v, src, inputs=False)}" for k, v in step.kwargs)
        args.append(f"**{{{kwargs}}}")
    return args


def _step(w: _Writer, var: str, step: ViewStep) -> None:
    """One step of regenerate.replay_steps, under the grad mode the program had."""
    args = [var, *_arguments(w, step, var)]
    statement = f"{var} = {w.constant(step.op)}({', '.join(args)})"
    if step.grad_enabled:
        w.line(statement)
    else:
        w.without_grad(statement)
    if step.index is not None:
        w.line(f"{var} = {var}[{step.index}]")
    if step.own_version:
        w.line(f"{var} = {var}.data")


def _argument(w: _Writer, a: object, src: str, *, inputs: bool = True) -> str:
    """A view op's argument as regenerate.replay_steps passes it: an input, or `MetaEvaluator.arg` of it (a new
    list or tuple on every call, its symbols evaluated, its SourceSizes sizes of `src`)."""
    if inputs and isinstance(a, InputArg):
        return f"L[{a.index}]"
    if type(a) is int:
        return str(a)
    if (type(a) is list or type(a) is tuple) and all(type(x) is int for x in a):
        items = "".join(f"{x}, " for x in a)
        return f"[{items}]" if type(a) is list else f"({items})"
    if isinstance(a, list | tuple | sympy.Expr | SourceSize):
        return f"_ev.arg({w.constant(a)}, {w.symbols()}, {src})"
    return w.constant(a)
