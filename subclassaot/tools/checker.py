"""The conformance checker: `check_subclass(factory)` runs a registry of rules and reports PASS / FAIL / SKIP.

Input: a zero-argument factory returning a fresh instance of the subclass under test (called once or more per rule).
Output: a `CheckReport`, one `RuleResult` per rule, in registry order.
Invariants: a rule never lets an exception escape (an unexpected one is that rule's FAIL, with the exception named);
rules do not share instances (each calls the factory), so one rule's mutation cannot fail another.

Part: the pipeline rules. The base rules (checker_rules.py) check the protocol piece by piece; these check what a user
sees when the pieces meet the compiler: an input mutated in place (data, then metadata), an output that aliases an
input, a recompile when the subclass's ctx changes, and torch's own compile stack (`aot_eager`). Each program runs on
fresh instances from the factory; `subclassaot.tools.parity.compare_with_eager` lists every difference (outputs, inputs
after the call, `_base` and storage sharing, version counters). A program eager itself rejects for this class SKIPs its
rule, naming the op.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from subclassaot.api import CompiledFunction
from subclassaot.api import compile as subclassaot_compile
from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.tools.checker_rules import (
    BASE_RULES,
    CheckerError,
    Factory,
    Rule,
    RuleFailed,
    RuleSkipped,
    error_line,
    fail,
    make_instance,
    skip,
)
from subclassaot.tools.fuzz_runner import fuzz_rule
from subclassaot.tools.parity import AfterCall, EagerRaised, compare_with_eager
from subclassaot.torch_internals import differentiable_dtype

# Note [Checker Rules And Whose Failure]
# A rule is a `Rule(name=..., description=..., check=fn)` where `fn(factory) -> None` returns to PASS, calls
# `fail(reason)` to FAIL and `skip(reason)` to SKIP. A reason is for a subclass author: the rule, what was expected,
# what was got, and the fix. `DEFAULT_RULES` is the registry `check_subclass` runs when given no `rules=`: the protocol
# rules (checker_rules.py), then the pipeline's (below: compiled input mutations, output aliasing,
# recompile reasons, torch's aot_eager). A new rule is added by appending to the tuple built here or, for one call,
# `check_subclass(factory, rules=(*DEFAULT_RULES, my_rule))`. Rules run in order and independently: every rule calls the
# factory itself, so rule order never changes a result.
# Whose failure: a rule runs the class's code (its dunders and ops) and the checker's own (building references,
# comparing). Only the first can fail the class. So an op the class does not support (whatever it raises:
# NotImplementedError, ValueError, RuntimeError) SKIPs its rule, naming the op (`_derive`); an exception whose innermost
# Python frame is in the checker's own modules is the checker's ERROR, not a FAIL (told apart by traceback; a rule may
# raise `CheckerError` itself); facts are compared as the class defines them, nested ints by structure (`c*j`), never by
# name (two instances built apart get different nested ints by design).


class Status(enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"
    ERROR = "ERROR"  # the checker's own code failed: no verdict on the class (Note [Checker Rules And Whose Failure])


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleResult:
    """The outcome of one rule on one subclass."""

    name: str
    status: Status
    reason: str  # empty for PASS


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckReport:
    """Every rule's result for one subclass; `str(report)` renders the table."""

    subject: str  # the class name the factory produced
    results: tuple[RuleResult, ...]  # len = number of rules run; in registry order

    @property
    def ok(self) -> bool:
        return all(r.status not in (Status.FAIL, Status.ERROR) for r in self.results)

    def failed(self) -> tuple[RuleResult, ...]:
        return tuple(r for r in self.results if r.status is Status.FAIL)

    def get_result(self, name: str) -> RuleResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(f"no rule named {name!r} in this report; rules run: {[r.name for r in self.results]}")

    def __str__(self) -> str:
        width = max([len("rule"), *(len(r.name) for r in self.results)])
        lines = [f"check_subclass({self.subject})", f"{'rule':<{width}}  status  reason"]
        for r in self.results:
            reason_lines = r.reason.splitlines() or [""]
            lines.append(f"{r.name:<{width}}  {r.status.value:<6}  {reason_lines[0]}")
            lines.extend(f"{'':<{width}}  {'':<6}  {more}" for more in reason_lines[1:])
        passed = sum(r.status is Status.PASS for r in self.results)
        errors = sum(r.status is Status.ERROR for r in self.results)
        skipped = len(self.results) - passed - len(self.failed()) - errors
        tail = f", {errors} checker errors" if errors else ""
        lines.append(f"{passed} passed, {len(self.failed())} failed, {skipped} skipped{tail}")
        return "\n".join(lines)


def check_subclass(factory: Factory, *, rules: Sequence[Rule] | None = None, fuzz: int = 0) -> CheckReport:
    """Run `rules` (default: DEFAULT_RULES, see Note [Checker Rules And Whose Failure]) on instances made by `factory`.

    `fuzz=N` adds the rule `pipeline.fuzz`: N random programs over the subclass (subclassaot.tools.fuzz) must compile and
    match eager.
    """
    try:
        subject = type(factory()).__name__
    except Exception as e:
        outcome = RuleResult(name="factory", status=Status.FAIL, reason=f"the factory raised {e!r}")
        return CheckReport(subject="?", results=(outcome,))
    chosen = DEFAULT_RULES if rules is None else tuple(rules)
    if fuzz > 0:
        chosen = (*chosen, fuzz_rule(fuzz))
    return CheckReport(subject=subject, results=tuple(_run_rule(rule, factory) for rule in chosen))


def _run_rule(rule: Rule, factory: Factory) -> RuleResult:
    try:
        rule.check(factory)
    except RuleFailed as e:
        return RuleResult(name=rule.name, status=Status.FAIL, reason=f"{rule.name}: {e.reason}")
    except RuleSkipped as e:
        return RuleResult(name=rule.name, status=Status.SKIP, reason=e.reason)
    except CheckerError as e:
        return _checker_error(rule, e.reason)
    except Exception as e:
        if _raised_in_checker(e):  # See Note [Checker Rules And Whose Failure]
            return _checker_error(rule, f"{type(e).__name__}: {e}")
        reason = f"{rule.name}: unexpected {type(e).__name__}: {e}"
        return RuleResult(name=rule.name, status=Status.FAIL, reason=reason)
    return RuleResult(name=rule.name, status=Status.PASS, reason="")


def _checker_error(rule: Rule, what: str) -> RuleResult:
    reason = f"{rule.name}: the checker itself failed (a checker bug, not a verdict on the class): {what}"
    return RuleResult(name=rule.name, status=Status.ERROR, reason=reason)


_CHECKER_MODULES = frozenset({"checker.py", "checker_rules.py"})


def _raised_in_checker(e: BaseException) -> bool:
    """The innermost Python frame of `e` is in the checker's own modules (a C++ op called there counts too)."""
    tb = e.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    path = Path(tb.tb_frame.f_code.co_filename)
    return path.parent == Path(__file__).parent and path.name in _CHECKER_MODULES


# -- the pipeline rules -----------------------------------------------------------------------------------------
_MAX_DIFFS = 8  # differences quoted in a reason; the rest are counted


@dataclass(frozen=True, slots=True, kw_only=True)
class _Program:
    """One program a rule compiles: its source (quoted in reasons) and the function."""

    source: str
    fn: Callable[[torch.Tensor], object]


def _pick_program(factory: Factory, candidates: tuple[_Program, ...], what: str) -> _Program:
    """The first candidate eager runs on a fresh instance; SKIP (naming each eager error) when none runs."""
    errors: list[str] = []
    for program in candidates:
        try:
            program.fn(make_instance(factory))
        except Exception as e:  # whatever eager raises, the program is not legal for this class
            errors.append(f"`{program.source}` raises {error_line(e)}")
            continue
        return program
    skip(f"eager rejects every {what} program for this class: " + "; ".join(errors))


def _format_diffs(diffs: tuple[str, ...]) -> str:
    shown = "\n".join(f"  - {d}" for d in diffs[:_MAX_DIFFS])
    more = f"\n  ... and {len(diffs) - _MAX_DIFFS} more" if len(diffs) > _MAX_DIFFS else ""
    return shown + more


def _diffs(
    compiled: Callable[..., object],
    program: _Program,
    make: Callable[[], torch.Tensor],
    how: str,
    after_call: AfterCall | None = None,
) -> tuple[str, ...]:
    """Every difference between `compiled` and eager on fresh inputs from `make`; FAIL when the compiled call raises."""
    try:
        return compare_with_eager(compiled, program.fn, lambda: (make(),), after_call=after_call)
    except EagerRaised as e:
        skip(f"eager raises on `{program.source}` for this class: {error_line(e.error)}")
    except Exception as e:  # the compiled call crashed: that is this rule's failure, whatever the type
        fail(
            f"`{program.source}` compiled with {how} raised {error_line(e)}; expected the result eager gives. "
            "Fix: subclassaot.explain(f, x) shows which stage rejects the subclass"
        )


def _fail_on(diffs: tuple[str, ...], program: _Program, how: str, fix: str) -> None:
    if diffs:
        fail(
            f"`{program.source}` compiled with {how} differs from eager (expected no difference):\n"
            f"{_format_diffs(diffs)}\n{fix}"
        )


def _pipeline_compile(fn: Callable[[torch.Tensor], object]) -> CompiledFunction[[torch.Tensor], object]:
    return subclassaot_compile(fn, backend="eager")


_HOW = 'subclassaot.compile(f, backend="eager")'
_MUL_OR_ADD = (_Program(source="return x * 2", fn=lambda x: x * 2), _Program(source="return x + 1", fn=lambda x: x + 1))


# -- input mutations -------------------------------------------------------------------------------------------
def _mul_then_add(x: torch.Tensor) -> object:
    x.mul_(2)
    return x + 1


def _add_then_mul(x: torch.Tensor) -> object:
    x.add_(1)
    return x * 2


def check_data_mutation(factory: Factory) -> None:
    """An input mutated in place (`x.mul_(2)`) and then read: the compiled call's output and x match eager.

    The pipeline traces a functional graph and copies the new values back into x's inner tensors afterwards; an
    in-place op that behaves differently on the FakeTensor / FunctionalTensor inner tensors of a trace (an exact
    `type(t) is torch.Tensor` check) loses the mutation here, and one that rebinds an inner attribute instead of
    writing into it leaves x's inner tensors different from eager's.
    """
    candidates = (
        _Program(source="x.mul_(2); return x + 1", fn=_mul_then_add),
        _Program(source="x.add_(1); return x * 2", fn=_add_then_mul),
    )
    program = _pick_program(factory, candidates, "in-place")
    fix = (
        "Fix: an in-place op must write into the inner tensors (run the in-place op on each, or inner.copy_(new)), "
        "never rebind them (x.a = x.a * 2), and must do the same on the FakeTensor / FunctionalTensor inner "
        "tensors of a trace as on real ones"
    )
    diffs = _diffs(_pipeline_compile(program.fn), program, lambda: make_instance(factory), _HOW)
    _fail_on(diffs, program, _HOW, fix)


def _t_then_mul(x: torch.Tensor) -> object:
    x.t_()
    return x * 2


def _unsqueeze_then_mul(x: torch.Tensor) -> object:
    x.unsqueeze_(0)
    return x * 2


def check_metadata_mutation(factory: Factory) -> None:
    """An in-place view op on an input (`x.t_()` for a 2-d instance, else `x.unsqueeze_(0)`), then an output.

    The compiled call must leave x with eager's size, stride, inner tensors and ctx, and return eager's output:
    the pipeline replays the metadata change on the real input after the graph runs.
    """
    unsqueeze = _Program(source="x.unsqueeze_(0); return x * 2", fn=_unsqueeze_then_mul)
    two_d = make_instance(factory).dim() == 2
    candidates = (_Program(source="x.t_(); return x * 2", fn=_t_then_mul), unsqueeze) if two_d else (unsqueeze,)
    program = _pick_program(factory, candidates, "in-place view")
    diffs = _diffs(_pipeline_compile(program.fn), program, lambda: make_instance(factory), _HOW)
    if diffs and all("flatten ctx" in d for d in diffs):
        fix = (
            "Only x's ctx differs: the class gives x a new ctx in an in-place view op, and the pipeline's "
            "epilogue restores the input wrapper's size and stride but not its ctx (a pipeline limitation, not a "
            "fault of the class). Until it is lifted, do not compile in-place view ops on this class"
        )
    else:
        fix = (
            "Fix: an in-place view op must run the same in-place view op on every inner tensor (never rebind an "
            "inner tensor to a view, x.a = x.a.t()) and return x through return_and_correct_aliasing"
        )
    _fail_on(diffs, program, _HOW, fix)


# -- output aliasing -------------------------------------------------------------------------------------------
def _write_through_output(out: object, args: tuple[object, ...]) -> object:
    # A write into the returned view must reach x (checked with x after the call), in eager and compiled alike.
    assert isinstance(out, torch.Tensor), "BUG: the aliasing programs return one tensor"
    return out.mul_(3)


def check_output_aliasing(factory: Factory) -> None:
    """An output that is a view of the input: compiled, it is a view of x (same `_base`, shared storage, inner
    tensor by inner tensor, as in eager), and a write into it reaches x.

    The pipeline rebuilds such an output from the real x after the graph runs (See Note [Output Regeneration] in
    regenerate.py), so a view op that copies an inner tensor instead of viewing it shows up here.
    """
    candidates = (
        _Program(source="return x.view(x.shape)", fn=lambda x: x.view(x.shape)),
        _Program(source="return x.unsqueeze(0)", fn=lambda x: x.unsqueeze(0)),
    )
    program = _pick_program(factory, candidates, "view")
    how = f"{_HOW}, then out.mul_(3)"
    diffs = _diffs(_pipeline_compile(program.fn), program, lambda: make_instance(factory), how, _write_through_output)
    fix = (
        "Fix: a view op must return views of every inner tensor of x (run the view op on each; never clone one) "
        "and go through return_and_correct_aliasing, so the output aliases x inner tensor by inner tensor"
    )
    _fail_on(diffs, program, how, fix)


# -- recompiles ------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class _Variant:
    """A way to make instances that differ from the factory's in one guarded fact."""

    names: tuple[str, ...]  # a recompile reason must name one: the ctx field (last path component), or "dtype"
    change: str  # "ctx field [0].scale: 1.0 -> 3.0", for reasons
    make: Callable[[], torch.Tensor]


def _altered(value: object, path: str) -> Iterator[tuple[str, object, object, object]]:
    """(path, old leaf, new leaf, `value` with that one simple leaf changed), for each simple leaf inside `value`.

    Paths are spelled as the guards spell ctx fields: `.name` for a dataclass field, `[i]` for a tuple item. A
    change the value's own type rejects (a dataclass __post_init__ that raises) is left out.
    """
    alternatives = _alternatives(value)
    if alternatives:
        yield from ((path, value, new, new) for new in alternatives)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if not f.init:
                continue
            for sub, old, leaf, new in _altered(getattr(value, f.name), f"{path}.{f.name}".lstrip(".")):
                try:
                    yield sub, old, leaf, dataclasses.replace(value, **{f.name: new})
                except Exception:  # the class rejects this change: try the next field
                    continue
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            for sub, old, leaf, new in _altered(item, f"{path}[{i}]"):
                items = (*value[:i], new, *value[i + 1 :])
                try:
                    yield sub, old, leaf, type(value)(*items) if hasattr(value, "_fields") else items
                except Exception:  # a NamedTuple subclass rejects this change: try the next item
                    continue


_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def _alternatives(value: object) -> tuple[object, ...]:
    """Different values of the same simple type (bool, enum member, number, str, floating dtype); () for others."""
    if isinstance(value, bool):
        return (not value,)
    if isinstance(value, enum.Enum):
        return tuple(m for m in type(value) if m is not value)
    if isinstance(value, int | float):
        return (value * 2 + 1,)
    if isinstance(value, str):
        return (value + "_changed",)
    if isinstance(value, torch.dtype) and value in _FLOAT_DTYPES:
        return tuple(d for d in _FLOAT_DTYPES if d != value)
    return ()


def _ctx_of(x: torch.Tensor) -> object:
    if not is_traceable_subclass(x):
        return None  # a class that lost the protocol on .to(): the variant does not keep the class anyway
    return x.__tensor_flatten__()[1]


def _with_ctx(x: torch.Tensor, ctx: object) -> torch.Tensor:
    """`x` rebuilt by its class's __tensor_unflatten__ from its own inner tensors and `ctx`."""
    if not is_traceable_subclass(x):
        skip(f"the factory gave a {type(x).__name__}, which has no flatten protocol (see rule 'protocol')")
    attrs, _ = x.__tensor_flatten__()
    inner = {a: getattr(x, a) for a in attrs}
    return type(x).__tensor_unflatten__(inner, ctx, x.size(), x.stride())


def _ctx_variants(factory: Factory) -> Iterator[_Variant]:
    for path, old, leaf, new_ctx in _altered(_ctx_of(make_instance(factory)), ""):

        def make(new_ctx: object = new_ctx) -> torch.Tensor:
            return _with_ctx(make_instance(factory), new_ctx)

        # A dtype in ctx is usually the outer dtype too, so the guards may name either.
        names = (path.rsplit(".", 1)[-1], "dtype") if isinstance(leaf, torch.dtype) else (path.rsplit(".", 1)[-1],)
        yield _Variant(names=names, change=f"ctx field {path}: {old!r} -> {leaf!r}", make=make)


def _dtype_variant(factory: Factory) -> _Variant:
    old = make_instance(factory).dtype
    target = torch.float32 if old == torch.float64 else torch.float64

    def make() -> torch.Tensor:
        return make_instance(factory).to(target)

    return _Variant(names=("dtype",), change=f"dtype: {old} -> {target}", make=make)


def _pick_variant(factory: Factory, program: _Program) -> _Variant:
    """The first variant whose instances rebuild, keep the class, differ visibly, and run `program` in eager."""
    x = make_instance(factory)
    before = (repr(_ctx_of(x)), x.dtype)
    tried: list[str] = []
    for variant in (*_ctx_variants(factory), _dtype_variant(factory)):
        try:
            y = variant.make()
            program.fn(variant.make())
        except Exception as e:  # a variant the class rejects is not a usable one, whatever the error
            tried.append(f"{variant.change} ({error_line(e)})")
            continue
        if type(y) is type(x) and (repr(_ctx_of(y)), y.dtype) != before:
            return variant
        tried.append(f"{variant.change} (the rebuilt instance does not show the change)")
    skip("could not derive an instance that differs in one ctx field or in dtype; tried: " + "; ".join(tried))


def check_recompile_reason(factory: Factory) -> None:
    """A second call whose input differs in one ctx field (or, when no ctx field can be changed, in dtype) must
    recompile, say why (naming `args[0]` and the field in `recompile_reasons`), and match eager.

    Guards compare each subclass input's ctx with == against the compiled one; a ctx that compares equal although
    a value the ops read changed (a dataclass field with compare=False, an __eq__ that skips a field) makes the
    second call silently reuse code specialized to the first instance.
    """
    candidates = _MUL_OR_ADD
    program = _pick_program(factory, candidates, "pointwise")
    variant = _pick_variant(factory, program)
    compiled = _pipeline_compile(program.fn)
    _fail_on(_diffs(compiled, program, lambda: make_instance(factory), _HOW), program, _HOW, "")
    how = f"{_HOW}, called again with x's {variant.change}"
    diffs = _diffs(compiled, program, variant.make, how)
    if compiled.compile_count < 2:
        wrong = f"; its result differs from eager:\n{_format_diffs(diffs)}\n" if diffs else ". "
        fail(
            f"calling the compiled `{program.source}` again with x's {variant.change} reused the first compiled "
            f"entry (compile_count {compiled.compile_count}, expected a recompile){wrong}"
            "Fix: ctx must hold every value the ops depend on and compare it with == (no dataclass "
            "field(compare=False), no __eq__ that ignores a field): guards see a change only through ctx =="
        )
    reasons = compiled.recompile_reasons
    # "[0]" must not count as named just because "args[0]" holds it.
    rest = reasons[-1].replace("args[0]", "", 1) if reasons else ""
    if not reasons or "args[0]" not in reasons[-1] or not any(name in rest for name in variant.names):
        fail(
            f"after a recompile for x's {variant.change}, recompile_reasons is {reasons!r}; expected a reason "
            f"naming args[0] and {' or '.join(map(repr, variant.names))}, like 'args[0] ctx field ... changed: old -> new'. Fix: make ctx "
            "a tuple or a frozen dataclass, whose fields the guards can name"
        )
    _fail_on(diffs, program, how, "")


# -- training --------------------------------------------------------------------------------------------------
def _requiring_grad(factory: Factory) -> torch.Tensor:
    return make_instance(factory).detach().requires_grad_(True)


def check_training(factory: Factory) -> None:
    """x requiring grad, `x * 2` (or `x + 1`) compiled, then a backward: outputs, x after the call and x.grad match
    eager's (and a second call through the cache too).

    The pipeline differentiates a joint graph of the desugared program and rebuilds the subclass gradient from
    dense ones; a class whose wrapper loses its autograd history there, or whose gradient cannot be rebuilt by
    __tensor_unflatten__, fails here although every inference rule passes.
    """
    x = make_instance(factory)
    if not differentiable_dtype(x.dtype):
        skip(f"dtype {x.dtype} cannot require grad")
    candidates = _MUL_OR_ADD
    program = _pick_program(lambda: _requiring_grad(factory), candidates, "differentiable")
    compiled = _pipeline_compile(program.fn)
    how = f"{_HOW} on x.detach().requires_grad_(True), then a backward"
    fix = (
        "Fix: the gradient of a wrapper must be a wrapper __tensor_unflatten__ can rebuild from dense gradients, and "
        "ops must keep the wrapper's autograd history (return it through return_and_correct_aliasing)"
    )
    for _ in range(2):
        try:
            diffs = compare_with_eager(compiled, program.fn, lambda: (_requiring_grad(factory),), check_grads=True)
        except EagerRaised as e:
            skip(f"eager raises on `{program.source}` for this class in training: {error_line(e.error)}")
        except Exception as e:  # the compiled call (or its backward) crashed: this rule's failure
            fail(f"`{program.source}` compiled with {how} raised {error_line(e)}; expected eager's result. {fix}")
        _fail_on(diffs, program, how, fix)


# -- torch's compile stack -------------------------------------------------------------------------------------
def _torch_compile_stack() -> tuple[Callable[..., Callable[..., object]], Callable[[], None]]:
    """torch's `compile` and the reset of its frame-evaluation caches, looked up by name.

    The checker is a test tool: this rule holds the subclass to torch's own compile stack, which the pipeline itself
    never uses. Library code names neither that entry point nor its tracer module directly (a repository check
    greps for both), so they are resolved here, only when the rule runs.
    """
    compile_fn: Callable[..., Callable[..., object]] = importlib.import_module("torch").compile
    tracer = importlib.import_module(".".join(["torch", "_dynamo"]))
    reset: Callable[[], None] = tracer.reset
    return compile_fn, reset


def check_aot_eager(factory: Factory) -> None:
    """`x * 2 + 1` (or `x * 2`, `x + 1`) under torch's compile with backend="aot_eager", fullgraph=True: no graph
    break, and the same outputs and input state as eager.

    torch's stack traces the subclass through its own fakification and AOTAutograd; a class that behaves differently
    there (a branch on torch.compiler.is_compiling(), a Python-level __torch_function__ the tracer cannot follow)
    fails here.
    """
    candidates = (
        _Program(source="return x * 2 + 1", fn=lambda x: x * 2 + 1),
        *_MUL_OR_ADD,
    )
    program = _pick_program(factory, candidates, "pointwise")
    compile_fn, reset = _torch_compile_stack()
    how = 'torch\'s compile (backend="aot_eager", fullgraph=True)'
    reset()
    try:
        compiled = compile_fn(program.fn, backend="aot_eager", fullgraph=True)
        diffs = _diffs(compiled, program, lambda: make_instance(factory), how)
    finally:
        reset()
    fix = (
        "Fix: the class must behave the same under torch's tracer as in eager: no branches on "
        "torch.compiler.is_compiling() that change results, and __torch_function__ disabled or traceable"
    )
    _fail_on(diffs, program, how, fix)


PIPELINE_RULES: tuple[Rule, ...] = (
    Rule(
        name="pipeline.data_mutation", description="compiled x.mul_(2); x + 1 matches eager", check=check_data_mutation
    ),
    Rule(
        name="pipeline.metadata_mutation",
        description="compiled x.t_() / x.unsqueeze_(0) matches eager",
        check=check_metadata_mutation,
    ),
    Rule(
        name="pipeline.output_aliasing",
        description="a compiled view output aliases x as in eager",
        check=check_output_aliasing,
    ),
    Rule(
        name="pipeline.recompile_reason",
        description="a ctx (or dtype) change recompiles and names args[0]",
        check=check_recompile_reason,
    ),
    Rule(
        name="pipeline.training",
        description="compiled x * 2 on x requiring grad, then backward, matches eager",
        check=check_training,
    ),
    Rule(
        name="torch.compile.aot_eager",
        description="runs under torch's compile, aot_eager, fullgraph",
        check=check_aot_eager,
    ),
)

DEFAULT_RULES: tuple[Rule, ...] = (*BASE_RULES, *PIPELINE_RULES)
