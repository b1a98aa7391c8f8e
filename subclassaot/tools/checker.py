"""The conformance checker: `check_subclass(factory)` runs a registry of rules and reports PASS / FAIL / SKIP.

Input: a zero-argument factory returning a fresh instance of the subclass under test (called once or more per rule).
Output: a `CheckReport`, one `RuleResult` per rule, in registry order.
Invariants: a rule never lets an exception escape (an unexpected one is that rule's FAIL, with the exception named);
rules do not share instances (each calls the factory), so one rule's mutation cannot fail another.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from subclassaot.tools.checker_pipeline import PIPELINE_RULES
from subclassaot.tools.checker_rules import BASE_RULES, CheckerError, Factory, Rule, RuleFailed, RuleSkipped, fail, skip
from subclassaot.tools.fuzz_runner import fuzz_rule

__all__ = [
    "DEFAULT_RULES",
    "CheckReport",
    "Factory",
    "Rule",
    "RuleResult",
    "Status",
    "check_subclass",
    "fail",
    "skip",
]

# Note [Checker Rules And Whose Failure]
# A rule is a `Rule(name=..., description=..., check=fn)` where `fn(factory) -> None` returns to PASS, calls
# `fail(reason)` to FAIL and `skip(reason)` to SKIP. A reason is for a subclass author: the rule, what was expected,
# what was got, and the fix. `DEFAULT_RULES` is the registry `check_subclass` runs when given no `rules=`: the protocol
# rules (checker_rules.py), then the pipeline's (checker_pipeline.py: compiled input mutations, output aliasing,
# recompile reasons, torch's aot_eager). A new rule is added by appending to the tuple built here or, for one call,
# `check_subclass(factory, rules=(*DEFAULT_RULES, my_rule))`. Rules run in order and independently: every rule calls the
# factory itself, so rule order never changes a result.
# Whose failure: a rule runs the class's code (its dunders and ops) and the checker's own (building references,
# comparing). Only the first can fail the class. So an op the class does not support (whatever it raises:
# NotImplementedError, ValueError, RuntimeError) SKIPs its rule, naming the op (`_derive`); an exception whose innermost
# Python frame is in the checker's own modules is the checker's ERROR, not a FAIL (told apart by traceback; a rule may
# raise `CheckerError` itself); facts are compared as the class defines them, nested ints by structure (`c*j`), never by
# name (two instances built apart get different nested ints by design).

DEFAULT_RULES: tuple[Rule, ...] = (*BASE_RULES, *PIPELINE_RULES)


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


_CHECKER_MODULES = frozenset({"checker.py", "checker_rules.py", "checker_pipeline.py"})


def _raised_in_checker(e: BaseException) -> bool:
    """The innermost Python frame of `e` is in the checker's own modules (a C++ op called there counts too)."""
    tb = e.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    path = Path(tb.tb_frame.f_code.co_filename)
    return path.parent == Path(__file__).parent and path.name in _CHECKER_MODULES
