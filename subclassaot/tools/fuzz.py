"""Property-based fuzzing of the pipeline against eager: random programs, a verdict per program, shrunk failures.

Input: a seed (or hypothesis draws), a `FuzzConfig` (input kinds, sizes), and a compile function (default:
`subclassaot.compile` on a backend).
Output: `generate(chooser, config) -> Program`; `programs(config)`, the same as a hypothesis strategy;
`check_program(program, compile_fn) -> Verdict` (PASS / DIVERGED / CRASHED / UNSUPPORTED, or DISCARDED when eager
itself raises; the runner adds HUNG for a check past its time limit); `shrink(program, still_fails)`;
`fuzz(...) -> FuzzReport`, the runner behind `python -m subclassaot fuzz`.
Invariants: only eager-legal programs are counted; every generated op was legal in eager on the tensors it was
drawn for (the generator runs each op as it draws it), and none is a write whose eager result depends on loop
order (Note [In-Place Ops As Eager Runs Them]); no program, generated or shrunk, reads a storage it freed
(subclassaot/tools/fuzz.py); `FuzzConfig.vocabulary` chooses the groups of ops drawn, and CORE alone draws
what the generator drew before the other groups existed; a verdict compares two fresh calls of one compiled function
(the second goes through the cached entry) with eager, through `subclassaot.tools.parity`.

Also here: Which storages a program being generated has freed, and which it may free: the fuzzer's storage-resize family.

Input: the generator's environment (variable id -> the real tensor it holds while the program is drawn) and each op
as it is run. Output: `StorageLiveness`, asked whether a tensor is dead (its storage holds 0 bytes since the
program freed it), whether a variable may be freed, and how to fill a freed storage again.
Invariants: eager PyTorch does not check a freed storage before it reads it (it segfaults), so a program never reads
one: no op, output, gradient or oracle check reaches a dead storage. Hence a storage is freed only where nothing else
can reach it: not an input's (the oracle reads inputs after the call), not a subclass's inner tensor, and not saved
for backward (recorded by a saved-tensors hook while the program is drawn); it is refilled only through a tensor
that covers every byte of it (a partial fill would leave uninitialized bytes that no two runs share). An input whose
base is freed on entry (FSDP2's sharded parameter) is refilled by the program, or at its end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import random
import re
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import torch

from subclassaot.authoring.protocol import dense_leaves
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.swap_record import element_offsets
from subclassaot.tools.fuzz_ops import (
    OPS,
    Chooser,
    Family,
    OpDef,
    Params,
    Vocabulary,
    batch_norm_fits,
    batch_norm_stats,
    unspecified_write,
)
from subclassaot.tools.fuzz_program import (
    COMPLEX_KINDS,
    NESTED_KINDS,
    BaseSpec,
    Grad,
    GradScope,
    InputSpec,
    Op,
    Program,
    ViewStep,
    as_function,
    get_input_kind,
    make_base,
    make_inputs,
    run_op,
)
from subclassaot.tools.parity import (
    EagerRaised,
    Versions,
    compare_with_eager,
    seed_rng,
    storage_key_or_none,
    write_outputs,
)

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn, SearchStrategy


CompileFn = Callable[[Callable[..., object]], Callable[..., object]]
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class FuzzConfig:
    kinds: tuple[str, ...] = ("plain",)  # input-kind keys ("plain", "MODULE:FACTORY") the bases are drawn from
    first_kind_always: bool = False  # base 0 is always kinds[0] (the checker fuzzes one subclass this way)
    max_inputs: int = 3
    max_ops: int = 6
    max_outputs: int = 3
    max_rank: int = 3
    max_size: int = 4
    # the groups of ops and flags drawn; with CORE alone a seed draws the programs it drew before the other groups
    vocabulary: frozenset[Vocabulary] = frozenset(Vocabulary)


DEFAULT_CONFIG = FuzzConfig()


class RandomChooser:
    """Decisions from `random.Random(seed)`: the runner's deterministic source of programs."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self._rng.randint(lo, hi)

    def chance(self, percent: int) -> bool:
        return self._rng.randrange(100) < percent


# ---------------------------------------------------------------------------------------------------------------
# Generation


def generate(choose: Chooser, config: FuzzConfig = DEFAULT_CONFIG) -> Program:
    """One program. Each op is run on real tensors as it is drawn; an op eager rejects is drawn again."""
    grad_mode = choose.chance(60)
    n_inputs = choose.integer(1, config.max_inputs)
    n_bases = choose.integer(1, n_inputs)
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        bases = tuple(_draw_base(choose, config, k, grad_mode) for k in range(n_bases))
        shadow_bases = [make_base(b) for b in bases]
        inputs: list[InputSpec] = []
        env: dict[int, torch.Tensor] = {}
        # inputs that share a base: views of it more often where set_() order is drawn (Note [set_ Under Grad])
        own, shared = (50, 80) if Vocabulary.SET_ORDER in config.vocabulary else (30, 30)
        for var in range(n_inputs):
            base = var if var < n_bases else choose.integer(0, n_bases - 1)
            chance = own if var < n_bases else shared
            # rarely a leaf of its own over a base that requires grad, beside the base's own input (var < n_bases)
            leaf = Vocabulary.REQUIRES_GRAD in config.vocabulary and var >= n_bases and bases[base].grad != "none"
            leaf = leaf and not bases[base].freed and choose.chance(15)
            spec, env[var] = _draw_input(choose, var, base, shadow_bases[base], bases[base].freed, chance, leaf)
            inputs.append(spec)
        storages = StorageLiveness(env, inputs, bases)
        with torch.set_grad_enabled(grad_mode), storages.recording_saved():
            ops = _draw_ops(choose, config, env, storages, next_var=n_inputs)
            ops += storages.refill_inputs(env)
    variables = [v for v in sorted(env) if not storages.dead(env[v])]
    outputs = tuple(
        variables[choose.integer(0, len(variables) - 1)] for _ in range(choose.integer(1, config.max_outputs))
    )
    return Program(bases=bases, inputs=tuple(inputs), ops=ops, outputs=outputs, grad_mode=grad_mode)


def _draw_base(choose: Chooser, config: FuzzConfig, index: int, grad_mode: bool) -> BaseSpec:
    k = 0 if index == 0 and config.first_kind_always else choose.integer(0, len(config.kinds) - 1)
    kind = get_input_kind(config.kinds[k])
    if Vocabulary.NESTED in config.vocabulary and choose.chance(2):
        kind = get_input_kind(NESTED_KINDS[choose.integer(0, len(NESTED_KINDS) - 1)])
    elif Vocabulary.COMPLEX in config.vocabulary and kind.key == "plain" and choose.chance(3):
        kind = get_input_kind(COMPLEX_KINDS[choose.integer(0, len(COMPLEX_KINDS) - 1)])
    if kind.fixed_shape is not None:
        shape = kind.fixed_shape
    else:
        shape = tuple(choose.integer(1, config.max_size) for _ in range(choose.integer(0, config.max_rank)))
    grads: tuple[Grad, ...] = ("none", "nonleaf", "leaf")
    # a program called under no_grad takes inputs that require grad too where its grad-mode scopes can turn grad on
    # again (Note [Grad Mode And Autograd Reads])
    wants_grad = grad_mode or Vocabulary.GRAD_MODE in config.vocabulary
    grad = grads[choose.integer(1, 2)] if wants_grad and choose.chance(50) else grads[0]
    freed = Vocabulary.STORAGE in config.vocabulary and kind.key == "plain" and choose.chance(10)
    spec = BaseSpec(kind=kind.key, shape=shape, grad=grad, freed=freed)
    if grad != "none":
        try:
            make_base(spec)
        except Exception:  # a subclass whose dtype cannot require grad (float8): the input does not
            return dataclasses.replace(spec, grad="none")
    return spec


_VIEW_OPS = tuple(op for op in OPS.values() if op.family is Family.VIEW and op.vocabulary is Vocabulary.CORE)


def _draw_input(
    choose: Chooser, var: int, base: int, t: torch.Tensor, freed: bool, chance: int, leaf: bool
) -> tuple[InputSpec, torch.Tensor]:
    """Input `var` over `base` (`t`): a chain of up to two views, each taken with `chance` percent; where `leaf`,
    `t.detach().requires_grad_()` instead."""
    if leaf:
        step = ViewStep(name="detached_leaf", params=())
        return InputSpec(var=var, base=base, views=(step,)), t.detach().requires_grad_()
    steps: list[ViewStep] = []
    while not freed and len(steps) < 2 and choose.chance(chance):  # a freed base is passed whole: it is filled whole
        op = _VIEW_OPS[choose.integer(0, len(_VIEW_OPS) - 1)]
        params = op.gen(choose, t)
        if params is None:
            continue
        try:
            with torch.enable_grad():
                result = op.apply(t, None, params)
        except Exception:  # an illegal view is simply not taken
            continue
        assert isinstance(result, torch.Tensor), f"BUG: view op {op.name} returned {result!r}"
        steps.append(ViewStep(name=op.name, params=params))
        t = result
    return InputSpec(var=var, base=base, views=tuple(steps)), t


def _draw_ops(
    choose: Chooser, config: FuzzConfig, env: dict[int, torch.Tensor], storages: StorageLiveness, next_var: int
) -> tuple[Op, ...]:
    ops: list[Op] = []
    weighted = _weighted(config.vocabulary)
    for _ in range(choose.integer(0, config.max_ops)):
        for _attempt in range(4):
            try:
                set_before = {o.src for o in ops if o.name in _SETS}
                made = {v for o in ops if o.name == "grad_factory" for v in o.outs}
                op = _draw_op(choose, config, weighted, env, storages, next_var, set_before, made)
            except Exception:  # reading the source's shape (`x.data` of a swapped subclass) can raise in eager
                continue
            if op is not None and _legal(op, env, storages):
                ops.append(op)
                next_var += len(op.outs)
                break
    return tuple(ops)


@functools.cache
def _weighted(vocabulary: frozenset[Vocabulary]) -> tuple[OpDef, ...]:
    return tuple(op for op in OPS.values() if op.vocabulary in vocabulary for _ in range(op.weight))


# Eager PyTorch segfaults on a plain tensor `set_` to a wrapper subclass (whose storage holds no data) once it is
# written to; `x.data = y` across types is the same swap. Such programs are never generated.
_SAME_TYPE_ONLY = frozenset({"set_", "data_assign"})
_SETS = frozenset({"set_", "set_self"})
_DIRTY_FUNCTIONS = frozenset({"DirtyScale", "DirtyAdd", "DirtyAddSaved"})  # (they mark their first input dirty)
_SCOPES: tuple[GradScope, ...] = ("no_grad", "enable_grad", "grad_off", "grad_on", "inference_mode")


def _draw_scopes(choose: Chooser, config: FuzzConfig) -> tuple[GradScope, ...]:
    if Vocabulary.GRAD_MODE not in config.vocabulary:
        return ("no_grad",) if choose.chance(15) else ()
    if not choose.chance(25):
        return ()
    depth = 1 if choose.chance(70) else 2
    return tuple(_SCOPES[choose.integer(0, len(_SCOPES) - 1)] for _ in range(depth))


def _draw_op(
    choose: Chooser,
    config: FuzzConfig,
    weighted: tuple[OpDef, ...],
    env: dict[int, torch.Tensor],
    storages: StorageLiveness,
    next_var: int,
    set_before: Collection[int] = frozenset(),
    made: Collection[int] = frozenset(),
) -> Op | None:
    """One op; `set_before`: the variables an earlier op set_(); `made`: the leaves factories made, which later ops
    take as their source often (viewed, written, combined with another variable)."""
    op_def = weighted[choose.integer(0, len(weighted) - 1)]
    refill = op_def.name == "storage_refill"
    variables = [v for v in sorted(env) if storages.dead(env[v]) == refill]
    if op_def.name == "storage_free":
        variables = [v for v in variables if storages.may_free(v, env)]
    if op_def.name == "batch_norm":
        variables = [v for v in variables if batch_norm_stats(env[v])]
    # an input's set_ node mostly (Note [set_ Under Grad]); an input's running statistics mostly
    if op_def.name in ("set_self", "batch_norm") and choose.chance(60):
        variables = [v for v in variables if storages.is_input(v)] or variables
    if op_def.name in _DIRTY_FUNCTIONS and set_before and choose.chance(50):
        # a write the Function's node records over a set_ node, though its forward runs with grad off (Note [Epilogue
        # Nodes In Eager's Order]): rare where the Function draws any variable
        variables = [v for v in variables if v in set_before] or variables
    if made and choose.chance(40):
        variables = [v for v in variables if v in made] or variables
    live = variables if not refill else [v for v in sorted(env) if not storages.dead(env[v])]
    if not variables:
        return None
    src = variables[choose.integer(0, len(variables) - 1)]
    mutates = op_def.family is Family.INPLACE
    via_data = mutates and choose.chance(10)
    scopes = _draw_scopes(choose, config)
    other = None
    if op_def.other == "always" or (op_def.other == "maybe" and choose.chance(40)):
        if op_def.name == "batch_norm":
            live = [v for v in live if batch_norm_fits(env[src], env[v])]
        if not live:
            return None
        other = live[choose.integer(0, len(live) - 1)]
    params = op_def.gen(choose, env[src].data if via_data else env[src])
    same_type = other is None or type(env[src]) is type(env[other])
    if params is None or (op_def.name in _SAME_TYPE_ONLY and not same_type):
        return None
    if refill and (params := storages.refill_params(env[src], params)) is None:
        return None
    if other is not None and op_def.other == "maybe":
        params = params[:1] if refill else ()
    return Op(
        name=op_def.name,
        src=src,
        other=other,
        params=params,
        outs=tuple(range(next_var, next_var + op_def.outs(params))),
        scopes=scopes,
        via_data=via_data,
    )


def _legal(op: Op, env: dict[int, torch.Tensor], storages: StorageLiveness) -> bool:
    src = env[op.src].data if op.via_data else env[op.src]
    if unspecified_write(op.name, src, None if op.other is None else env[op.other]):
        return False  # Note [In-Place Ops As Eager Runs Them]
    if not storages.allows(op, env):
        return False
    try:
        storages.run(op, env)
    except Exception:  # eager rejected it: draw another op (env may be partly updated; the final check decides)
        return False
    return True


def programs(config: FuzzConfig = DEFAULT_CONFIG) -> SearchStrategy[Program]:
    """A hypothesis strategy of programs (hypothesis is imported here only: it is a test-time dependency)."""
    from hypothesis import strategies as st

    @st.composite
    def strategy(draw: DrawFn) -> Program:
        return generate(_DrawChooser(draw), config)

    return strategy()


class _DrawChooser:
    def __init__(self, draw: DrawFn) -> None:
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        from hypothesis import strategies as st

        return self._draw(st.integers(lo, hi))

    def chance(self, percent: int) -> bool:
        return self.integer(0, 99) >= 100 - percent  # hypothesis shrinks toward 0, i.e. toward False


# ---------------------------------------------------------------------------------------------------------------
# Verdicts


class Outcome(enum.Enum):
    PASS = "PASS"
    DIVERGED = "DIVERGED"  # a compiled call is observably different from eager
    CRASHED = "CRASHED"  # compiling or calling raised an unexpected exception
    HUNG = "HUNG"  # no verdict within the run's time limit: the process checking it was killed (fuzz_runner)
    UNSUPPORTED = "UNSUPPORTED"  # the pipeline refused on purpose (UnsupportedError)
    DISCARDED = "DISCARDED"  # eager itself raised: not a legal program, not counted


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    outcome: Outcome
    detail: str  # the differences, or the exception; empty for PASS
    signatures: tuple[str, ...]  # normalized differences (first = the program's rule/bug class); () for PASS

    @property
    def signature(self) -> str:
        return self.signatures[0] if self.signatures else ""


def normalize(text: str) -> str:
    """A message without the names, numbers and values that vary between programs hitting the same bug."""
    text = text.splitlines()[0] if text else text
    text = re.sub(r"(values differ from eager).*", r"\1", text)
    text = re.sub(r"\(([^()]*)\)", "(...)", text)
    text = re.sub(r"\d+", "#", text)
    return text[:140]


def diverged(call: str, diffs: Sequence[str]) -> Verdict:
    """The verdict for a call (`call`: how the report names it) whose differences from eager are `diffs`."""
    return Verdict(
        outcome=Outcome.DIVERGED,
        detail="\n".join(f"{call}: {d}" for d in diffs),
        signatures=tuple(dict.fromkeys(normalize(d) for d in diffs)),
    )


def exception_verdict(e: Exception) -> Verdict:
    message = f"{type(e).__name__}: {e}"
    if isinstance(e, UnsupportedError):
        rule = normalize(str(e).split(";")[0])
        rule = re.sub(r"^(args\[#\]|inputs? [^:]*?)(\.\w+)*:? ", "", rule)
        return Verdict(outcome=Outcome.UNSUPPORTED, detail=message, signatures=(rule,))
    return Verdict(outcome=Outcome.CRASHED, detail=message, signatures=(normalize(message)[:100],))


def verdict_of(grad_mode: bool, run: Callable[[], Verdict | None]) -> Verdict:
    """`run()`'s verdict (None: PASS) under `grad_mode`, warnings silenced; an exception it raises is classified:
    eager raising discards the program, any other is the compiled side's failure."""
    with warnings.catch_warnings(), torch.set_grad_enabled(grad_mode):
        warnings.simplefilter("ignore")
        try:
            verdict = run()
        except EagerRaised as e:
            return Verdict(outcome=Outcome.DISCARDED, detail=repr(e.error), signatures=())
        except Exception as e:  # classify every failure of the compiled side, whatever its type
            return exception_verdict(e)
    return verdict if verdict is not None else Verdict(outcome=Outcome.PASS, detail="", signatures=())


def check_program(program: Program, compile_fn: CompileFn, *, versions: Versions = "moved") -> Verdict:
    """Compile `program` once and compare two calls, each on fresh inputs, with eager; in training, the second
    with every output written after the call (`write_outputs`: eager's backward raises where it saved one).
    `versions`: how version counters are compared (subclassaot.tools.parity.Versions)."""
    fn = as_function(program)

    def run() -> Verdict | None:
        compiled = compile_fn(fn)
        for index in range(2):
            after = write_outputs if program.grad_mode and index == 1 else None
            diffs = compare_with_eager(compiled, fn, lambda: make_inputs(program), after_call=after, versions=versions)
            if diffs:
                return diverged(f"call {index}", diffs)
        count = getattr(compiled, "compile_count", 1)
        if isinstance(count, int) and count > 1:
            reasons = getattr(compiled, "recompile_reasons", ())
            return Verdict(
                outcome=Outcome.DIVERGED,
                detail=f"recompiled on a second call with identical inputs: {reasons}",
                signatures=("recompiled on identical inputs",),
            )
        return None

    return verdict_of(program.grad_mode, run)


def same_failure(want: Verdict) -> Callable[[Verdict], bool]:
    """The shrinking predicate: same outcome, and the original's first signature is among the candidate's."""

    def check(got: Verdict) -> bool:
        if got.outcome is not want.outcome:
            return False
        if want.outcome is Outcome.CRASHED:
            return got.detail.split(":")[0] == want.detail.split(":")[0]
        return want.signature in got.signatures

    return check


# ---------------------------------------------------------------------------------------------------------------
# Shrinking (delta debugging over the program's data)


def shrink(program: Program, still_fails: Callable[[Program], bool], *, max_checks: int = 300) -> Program:
    """Greedily take the first smaller candidate that still fails, until none does (or `max_checks` runs out)."""
    current, checks = program, 0
    improved = True
    while improved and checks < max_checks:
        improved = False
        for candidate in _candidates(current):
            if candidate.size() >= current.size() or not storage_safe(candidate):
                continue
            checks += 1
            if still_fails(candidate):
                current, improved = candidate, True
                break
            if checks >= max_checks:
                break
    return current


def _candidates(p: Program) -> Iterator[Program]:
    for i in reversed(range(len(p.ops))):
        yield _drop(p, ops={i})
    for i in range(len(p.outputs)):
        yield dataclasses.replace(p, outputs=p.outputs[:i] + p.outputs[i + 1 :])
    if len(p.inputs) > 1:
        for spec in p.inputs:
            yield _drop(p, variables={spec.var})
    for k, spec in enumerate(p.inputs):
        for j in range(len(spec.views)):
            views = spec.views[:j] + spec.views[j + 1 :]
            yield dataclasses.replace(p, inputs=_replace_at(p.inputs, k, dataclasses.replace(spec, views=views)))
    for i, op in enumerate(p.ops):
        if op.scopes:
            yield dataclasses.replace(p, ops=_replace_at(p.ops, i, dataclasses.replace(op, scopes=op.scopes[1:])))
            yield dataclasses.replace(p, ops=_replace_at(p.ops, i, dataclasses.replace(op, scopes=op.scopes[:-1])))
        if op.via_data:
            yield dataclasses.replace(p, ops=_replace_at(p.ops, i, dataclasses.replace(op, via_data=False)))
    for k, base in enumerate(p.bases):
        if base.grad != "none":
            yield dataclasses.replace(p, bases=_replace_at(p.bases, k, dataclasses.replace(base, grad="none")))
        if base.freed:
            yield dataclasses.replace(p, bases=_replace_at(p.bases, k, dataclasses.replace(base, freed=False)))
    if p.grad_mode:
        yield dataclasses.replace(p, grad_mode=False)


def _replace_at(items: tuple[T, ...], index: int, value: T) -> tuple[T, ...]:
    return (*items[:index], value, *items[index + 1 :])


def _drop(p: Program, *, ops: Iterable[int] = (), variables: Iterable[int] = ()) -> Program:
    """Remove ops (by index) and inputs (by variable id), then everything that uses what they defined."""
    dropped_ops, removed = set(ops), set(variables)
    kept: list[Op] = []
    for i, op in enumerate(p.ops):
        if i in dropped_ops or op.src in removed or op.other in removed:
            removed.update(op.outs)
            continue
        kept.append(op)
    inputs = tuple(spec for spec in p.inputs if spec.var not in removed)
    used = sorted({spec.base for spec in inputs})
    renumber = {old: new for new, old in enumerate(used)}
    return Program(
        bases=tuple(p.bases[b] for b in used),
        inputs=tuple(dataclasses.replace(spec, base=renumber[spec.base]) for spec in inputs),
        ops=tuple(kept),
        outputs=tuple(v for v in p.outputs if v not in removed),
        grad_mode=p.grad_mode,
    )


_REFILL_VALUE = 0.5  # what an input left freed by the program is filled with at its end


def _keys(t: torch.Tensor) -> set[int]:
    return {k for u in dense_leaves(t) if (k := storage_key_or_none(u)) is not None}


class StorageLiveness:
    """The storages freed so far (with their size before) and those autograd saved, for one program."""

    def __init__(self, env: dict[int, torch.Tensor], inputs: Sequence[InputSpec], bases: Sequence[BaseSpec]) -> None:
        """`env`: the inputs' tensors; those passed whole from a base freed on entry (contiguous: its bytes are its
        elements') start freed."""
        self._inputs = frozenset(s.var for s in inputs)  # the variable ids of the program's inputs
        self._freed: dict[int, int] = {}  # storage key -> its bytes before it was freed
        self._saved: set[int] = set()  # storage keys of tensors saved for backward
        for var in (s.var for s in inputs if bases[s.base].freed):
            key = storage_key_or_none(env[var])
            assert key is not None, "BUG: a freed input is a plain tensor"
            self._freed[key] = env[var].numel() * env[var].element_size()

    def dead(self, t: torch.Tensor) -> bool:
        return not self._freed.keys().isdisjoint(_keys(t))

    def is_input(self, var: int) -> bool:
        return var in self._inputs

    @contextlib.contextmanager
    def recording_saved(self) -> Iterator[None]:
        def pack(t: torch.Tensor) -> torch.Tensor:
            self._saved.update(_keys(t))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield

    def may_free(self, var: int, env: dict[int, torch.Tensor]) -> bool:
        """A plain intermediate whose storage no input, subclass or saved tensor reaches."""
        t = env[var]
        key = storage_key_or_none(t)
        if var in self._inputs or type(t) is not torch.Tensor or key is None or key in self._saved:
            return False
        return not any(key in _keys(u) and (v in self._inputs or type(u) is not torch.Tensor) for v, u in env.items())

    def allows(self, op: Op, env: dict[int, torch.Tensor]) -> bool:
        """Does `op` read only live storages, free only what `may_free` allows and refill a whole storage?"""
        if op.other is not None and self.dead(env[op.other]):
            return False
        if op.name == "storage_refill":
            params = self.refill_params(env[op.src], op.params)
            return params is not None and params[0] == op.params[0]
        if self.dead(env[op.src]):
            return False
        return op.name != "storage_free" or self.may_free(op.src, env)

    def refill_params(self, t: torch.Tensor, params: Params) -> Params | None:
        """`(bytes, *params)` when `t` covers every byte of its freed storage exactly once; else None."""
        nbytes = self._freed.get(storage_key_or_none(t) or -1)
        size = t.element_size()
        if nbytes is None or nbytes % size:
            return None
        offsets = element_offsets(t)
        if offsets is None or sorted(offsets) != list(range(nbytes // size)):
            return None
        return (nbytes, *params[1:])

    def run(self, op: Op, env: dict[int, torch.Tensor]) -> None:
        """Run `op` (raising as eager does) and track what it freed or refilled."""
        key = storage_key_or_none(env[op.src])
        nbytes = env[op.src].untyped_storage().nbytes() if key is not None else 0
        run_op(op, env)
        if key is None:
            return
        if op.name == "storage_free":
            self._freed[key] = nbytes
        elif op.name == "storage_refill":
            del self._freed[key]

    def refill_inputs(self, env: dict[int, torch.Tensor]) -> tuple[Op, ...]:
        """Ops that fill the inputs still freed at the end of the program (the oracle reads every input)."""
        ops = []
        for var in sorted(self._inputs):
            if self.dead(env[var]):
                params = self.refill_params(env[var], (0, _REFILL_VALUE))
                assert params is not None, "BUG: a freed input covers its storage"
                op = Op(name="storage_refill", src=var, params=params, scopes=("no_grad",))
                self.run(op, env)
                ops.append(op)
        return tuple(ops)


def storage_safe(program: Program) -> bool:
    """Does `program` keep the rules above? The generator keeps them as it draws; a shrunk program may not (it can
    lose the op that refilled a storage, or the `set_` that made a freed variable an intermediate's), and running
    one that reads a freed storage would crash the process, so the shrinker asks first."""
    if not any(b.freed for b in program.bases) and not any(op.name.startswith("storage_") for op in program.ops):
        return True
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        seed_rng(0)
        env = dict(zip((s.var for s in program.inputs), make_inputs(program), strict=True))
        storages = StorageLiveness(env, program.inputs, program.bases)
        with torch.set_grad_enabled(program.grad_mode), storages.recording_saved():
            for op in program.ops:
                if not storages.allows(op, env):
                    return False
                try:
                    storages.run(op, env)
                except Exception:  # eager raises here, so the oracle runs nothing after it
                    return True
        return not any(storages.dead(env[v]) for v in (*(s.var for s in program.inputs), *program.outputs))
