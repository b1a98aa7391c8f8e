"""The checker's pipeline rules: PairTensor passes them; each has a small broken subclass that fails it, and only it."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch._subclasses.fake_tensor import is_fake

from subclassaot.authoring.wrapper_tensor import WrapperTensor, implements
from subclassaot.tools.checker import DEFAULT_RULES, PIPELINE_RULES, CheckReport, Status, check_subclass
from subclasses.pair import PairTensor, example, nested_example

aten = torch.ops.aten
PIPELINE_NAMES = (
    "pipeline.data_mutation",
    "pipeline.metadata_mutation",
    "pipeline.output_aliasing",
    "pipeline.recompile_reason",
    "pipeline.training",
    "torch.compile.aot_eager",
)


def _failed(report: CheckReport) -> set[str]:
    return {r.name for r in report.failed()}


def _pair_factory(cls: type[PairTensor]) -> Callable[[], torch.Tensor]:
    def factory() -> torch.Tensor:
        x = example()
        return cls(x.a, x.b)

    return factory


def _assert_fails_only(factory: Callable[[], torch.Tensor], rule: str, *patterns: str) -> None:
    """Every default rule runs; exactly `rule` fails, and its reason matches each pattern."""
    report = check_subclass(factory)
    assert _failed(report) == {rule}, str(report)
    reason = report.get_result(rule).reason
    for pattern in patterns:
        assert re.search(pattern, reason), reason


def test_pipeline_rules_are_registered_in_order() -> None:
    assert tuple(r.name for r in PIPELINE_RULES) == PIPELINE_NAMES
    assert DEFAULT_RULES[-len(PIPELINE_RULES) :] == PIPELINE_RULES
    assert all(r.check.__doc__ for r in PIPELINE_RULES)


def test_pair_passes_every_pipeline_rule() -> None:
    report = check_subclass(example, rules=PIPELINE_RULES)
    assert all(r.status is Status.PASS for r in report.results), str(report)


def test_nested_pair_passes_every_pipeline_rule() -> None:
    report = check_subclass(nested_example, rules=PIPELINE_RULES)
    assert all(r.status is Status.PASS for r in report.results), str(report)


# Pipeline bugs the rules found, now fixed: in-place view ops on a subclass input are replayed on the real input,
# so nested wrappers and a ctx that the op changes (ShardedTensor.t_() moves Shard(1) to Shard(0)) end as in eager.
_METADATA_RULE = next(r for r in PIPELINE_RULES if r.name == "pipeline.metadata_mutation")


def test_inplace_view_op_on_nested_wrappers() -> None:
    report = check_subclass(nested_example, rules=(_METADATA_RULE,))
    assert report.ok, str(report)


def test_ctx_changed_by_inplace_view_op() -> None:
    from subclasses.distributed import example as sharded_example

    report = check_subclass(sharded_example, rules=(_METADATA_RULE,))
    assert report.ok, str(report)


# -- pipeline.data_mutation --------------------------------------------------------------------------------------
class ExactTypeMul_(PairTensor):
    """mul_ writes in place only into inner tensors whose type is exactly torch.Tensor, else into a copy.

    Eager looks right; under a trace the inner tensors are FakeTensors / FunctionalTensors, so the compiled program
    never sees the write: x is left unchanged and `x + 1` reads the old values.
    """

    @implements(aten.mul_.Tensor)
    def _mul_(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x, other = args
        for inner in (x.a, x.b):
            (inner if type(inner) is torch.Tensor else inner.clone()).mul_(other)
        return x


def test_data_mutation_rule() -> None:
    _assert_fails_only(
        _pair_factory(ExactTypeMul_),
        "pipeline.data_mutation",
        r"x\.mul_\(2\); return x \+ 1",
        r"args\[0\] after the call: version counter|args\[0\]\.a after the call: values differ",
        r"output\.a: values differ from eager",
        r"FakeTensor / FunctionalTensor",
    )


class NoInplace(PairTensor):
    @implements(aten.mul_, aten.add_)
    def _no(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        raise NotImplementedError(f"{func} is not supported")


def test_data_mutation_skips_without_inplace_ops() -> None:
    rule = next(r for r in PIPELINE_RULES if r.name == "pipeline.data_mutation")
    result = check_subclass(_pair_factory(NoInplace), rules=(rule,)).results[0]
    assert result.status is Status.SKIP
    assert "x.mul_(2)" in result.reason and "x.add_(1)" in result.reason and "not supported" in result.reason


# -- pipeline.metadata_mutation ----------------------------------------------------------------------------------
class ExactTypeT_(PairTensor):
    """t_ transposes the inner tensors only when their type is exactly torch.Tensor.

    Eager looks right; under a trace the inner tensors are FakeTensors / FunctionalTensors, so the traced program
    computes `x * 2` from untransposed inner tensors and its output has the wrong shape.
    """

    @implements(aten.t_)
    def _t_(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x = args[0]
        if type(x.a) is torch.Tensor:
            x.a.t_()
            x.b.t_()
        return x  # the base class corrects the wrapper's own metadata (return_and_correct_aliasing)


def test_metadata_mutation_rule() -> None:
    _assert_fails_only(
        _pair_factory(ExactTypeT_),
        "pipeline.metadata_mutation",
        r"x\.t_\(\); return x \* 2",
        r"output.a: (shape|stride|values)",
        r"never rebind an inner tensor",
    )


# -- pipeline.output_aliasing ------------------------------------------------------------------------------------
class PartialViewAlias(PairTensor):
    """view views `a` but copies `b`: the wrapper claims to alias x (return_and_correct_aliasing), b does not."""

    @implements(aten.view)
    def _view(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x, *rest = args
        return PartialViewAlias(func(x.a, *rest), func(x.b.clone(), *rest))


def test_output_aliasing_rule() -> None:
    _assert_fails_only(
        _pair_factory(PartialViewAlias),
        "pipeline.output_aliasing",
        r"return x\.view\(x\.shape\)",
        r"output\._base: not a view vs eager a view of args\[0\]",
        r"never clone one",
    )


# -- pipeline.recompile_reason -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Scale:
    # The bug: the ops read `factor`, but == ignores it, so guards cannot see it change.
    factor: float = dataclasses.field(compare=False)


class HiddenScale(PairTensor):
    """A PairTensor whose `x * other` also multiplies by its ctx's `scale.factor`."""

    ctx_names: ClassVar[tuple[str, ...]] = ("scale",)
    scale: Scale

    def __init__(self, a: torch.Tensor, b: torch.Tensor, scale: Scale, **kwargs: Any) -> None:
        super().__init__()

    @implements(aten.mul.Tensor)
    def _mul(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x, other = args
        a, b = (other.a, other.b) if isinstance(other, HiddenScale) else (other, other)
        f = x.scale.factor
        return HiddenScale(func(x.a, a) * f, func(x.b, b) * f, x.scale)


def hidden_scale_factory() -> torch.Tensor:
    x = example()
    return HiddenScale(x.a, x.b, Scale(1.0))


def test_recompile_reason_rule() -> None:
    _assert_fails_only(
        hidden_scale_factory,
        "pipeline.recompile_reason",
        r"ctx field \[0\]\.factor: 1\.0 -> 3\.0",
        r"reused the first compiled entry \(compile_count 1",
        r"differs from eager",
        r"field\(compare=False\)",
    )


def test_recompile_reason_names_the_ctx_field() -> None:
    class Tagged(PairTensor):
        ctx_names: ClassVar[tuple[str, ...]] = ("tag",)

        def __init__(self, a: torch.Tensor, b: torch.Tensor, tag: str, **kwargs: Any) -> None:
            super().__init__()

    rule = next(r for r in PIPELINE_RULES if r.name == "pipeline.recompile_reason")
    report = check_subclass(lambda: Tagged(example().a, example().b, "t"), rules=(rule,))
    assert report.ok and report.results[0].status is Status.PASS, str(report)


# -- pipeline.training -------------------------------------------------------------------------------------------
class UnflattenNeedsGradMode(PairTensor):
    """__tensor_unflatten__ refuses real inner tensors under no_grad: eager never calls it (ops build wrappers with
    the constructor), inference compiles pass, but the compiled backward rebuilds the gradient wrapper from dense
    gradients there, and crashes."""

    @classmethod
    def __tensor_unflatten__(
        cls, inner: dict[str, torch.Tensor], ctx: object, outer_size: Any, outer_stride: Any
    ) -> WrapperTensor:
        if not torch.is_grad_enabled() and not any(is_fake(t) for t in inner.values()):
            raise RuntimeError("UnflattenNeedsGradMode cannot be rebuilt under no_grad")
        return super().__tensor_unflatten__(inner, ctx, outer_size, outer_stride)


def test_training_rule_fails_a_class_whose_compiled_backward_crashes() -> None:
    report = check_subclass(_pair_factory(UnflattenNeedsGradMode), rules=PIPELINE_RULES)
    ours = {name for name in PIPELINE_NAMES if name.startswith("pipeline.")}
    assert _failed(report) & ours == {"pipeline.training"}, str(report)
    reason = report.get_result("pipeline.training").reason
    assert re.search(r"x \* 2.*backward raised ProtocolError.*cannot be rebuilt under no_grad", reason), reason


# -- torch.compile.aot_eager ---------------------------------------------------------------------------------------
class CompileOnlyFastPath(PairTensor):
    """mul takes a "fast path" that skips `b` when torch's compiler is tracing it: results differ from eager."""

    @implements(aten.mul.Tensor)
    def _mul(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x, other = args
        a, b = (other.a, other.b) if isinstance(other, PairTensor) else (other, other)
        if torch.compiler.is_compiling():
            return CompileOnlyFastPath(func(x.a, a), x.b.clone())
        return CompileOnlyFastPath(func(x.a, a), func(x.b, b))


def test_aot_eager_rule() -> None:
    """A class that branches on torch.compiler.is_compiling() fails the aot_eager rule; the pipeline's own rules that
    multiply fail too, since our trace runs as a compile (Note [Dynamo Captures, The Pipeline Compiles])."""
    report = check_subclass(_pair_factory(CompileOnlyFastPath))
    failed = _failed(report)
    assert "torch.compile.aot_eager" in failed, str(report)
    assert all(r == "torch.compile.aot_eager" or r.startswith("pipeline.") for r in failed), str(report)
    reason = report.get_result("torch.compile.aot_eager").reason
    for pattern in (r"x \* 2 \+ 1", r"aot_eager", r"output\.b", r"is_compiling"):
        assert re.search(pattern, reason), reason
