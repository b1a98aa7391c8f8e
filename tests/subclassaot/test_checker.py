"""check_subclass: the sample passes every rule; each rule has a small broken subclass that fails it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
import torch

from subclassaot.__main__ import main
from subclassaot.authoring.wrapper_tensor import WrapperTensor, implements
from subclassaot.tools.checker import DEFAULT_RULES, CheckReport, Status, check_subclass
from subclassaot.tools.checker_rules import BASE_RULES, Rule, fail, skip
from subclasses.pair import PairTensor, example, nested_example

aten = torch.ops.aten
ROUNDTRIPS = {"roundtrip.contiguous", "roundtrip.transposed", "roundtrip.sliced", "roundtrip.expanded"}


def _failed(report: CheckReport) -> set[str]:
    return {r.name for r in report.failed()}


def _pair_factory(cls: type[PairTensor]) -> Callable[[], torch.Tensor]:
    def factory() -> torch.Tensor:
        x = example()
        return cls(x.a, x.b)

    return factory


def _assert_fails(cls: type[PairTensor], expected: set[str], match: str, *, rule: str | None = None) -> None:
    # Only the base rules: a class broken at the protocol level fails the pipeline's rules too, which have their
    # own broken classes in test_checker_pipeline.py.
    report = check_subclass(_pair_factory(cls), rules=BASE_RULES)
    assert _failed(report) == expected, str(report)
    reason = report.get_result(rule if rule is not None else sorted(expected)[0]).reason
    assert re.search(match, reason), reason


def test_sample_passes_every_rule() -> None:
    report = check_subclass(example)
    assert report.ok, str(report)
    assert {r.status for r in report.results} <= {Status.PASS, Status.SKIP}
    assert report.get_result("nested").status is Status.SKIP
    nested = check_subclass(nested_example)
    assert all(r.status is Status.PASS for r in nested.results), str(nested)


def test_cli_check_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "subclasses.pair:example"]) == 0
    out = capsys.readouterr().out
    assert "roundtrip.transposed" in out and "PASS" in out and "0 failed" in out


def test_cli_check_fails_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "tests.subclassaot.test_checker:no_protocol_factory"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_cli_rejects_malformed_spec() -> None:
    with pytest.raises(SystemExit, match="MODULE:FACTORY"):
        main(["check", "subclasses.pair"])
    with pytest.raises(SystemExit, match="no callable 'nope'"):
        main(["check", "subclasses.pair:nope"])


class NoProtocol(torch.Tensor):
    pass


def no_protocol_factory() -> torch.Tensor:
    return torch.ones(3, 4).as_subclass(NoProtocol)


def test_protocol_rule() -> None:
    report = check_subclass(no_protocol_factory)
    assert _failed(report) == {"protocol"}
    assert "derive from subclassaot.WrapperTensor" in report.get_result("protocol").reason
    assert report.get_result("ctx").status is Status.SKIP


class SetCtx(PairTensor):
    ctx_names: ClassVar[tuple[str, ...]] = ("tags",)

    def __init__(self, a: torch.Tensor, b: torch.Tensor, tags: object = None, **kwargs: Any) -> None:
        super().__init__()


def test_ctx_rule() -> None:
    def factory() -> torch.Tensor:
        x = example()
        return SetCtx(x.a, x.b, frozenset({"x", "y"}))

    report = check_subclass(factory)
    assert _failed(report) == {"ctx"}
    assert "frozenset" in report.get_result("ctx").reason and "sorted tuple" in report.get_result("ctx").reason


class SwapsOnUnflatten(PairTensor):
    @classmethod
    def __tensor_unflatten__(cls, inner: dict[str, torch.Tensor], ctx: object, size: Any, stride: Any) -> PairTensor:
        return cls(inner["b"], inner["a"], outer_size=size, outer_stride=stride)


def test_roundtrip_contiguous_rule() -> None:
    # deepcopy and pickle rebuild through __tensor_unflatten__ too, so they fail with it.
    _assert_fails(
        SwapsOnUnflatten,
        ROUNDTRIPS | {"deepcopy", "pickle"},
        "holds different inner tensors",
        rule="roundtrip.contiguous",
    )


class ContiguousStridesOnly(PairTensor):
    @classmethod
    def __tensor_unflatten__(cls, inner: dict[str, torch.Tensor], ctx: object, size: Any, stride: Any) -> PairTensor:
        contiguous = torch.empty(tuple(size), device="meta").stride()
        return cls(inner["a"], inner["b"], outer_size=size, outer_stride=contiguous)


def test_roundtrip_transposed_and_expanded_rules() -> None:
    _assert_fails(
        ContiguousStridesOnly,
        {"roundtrip.transposed", "roundtrip.expanded"},
        rule="roundtrip.expanded",
        match=r"expected stride \(0, 4, 1\), got \(12, 4, 1\)",
    )


class AssumesZeroOffset(PairTensor):
    @classmethod
    def __tensor_unflatten__(cls, inner: dict[str, torch.Tensor], ctx: object, size: Any, stride: Any) -> PairTensor:
        if inner["a"].storage_offset() != 0:
            raise ValueError("inner tensors must start at offset 0")
        return cls(inner["a"], inner["b"], outer_size=size, outer_stride=stride)


def test_roundtrip_sliced_rule() -> None:
    _assert_fails(AssumesZeroOffset, {"roundtrip.sliced"}, "sliced instance .* must start at offset 0")


class NoBroadcastStrides(PairTensor):
    @classmethod
    def __tensor_unflatten__(cls, inner: dict[str, torch.Tensor], ctx: object, size: Any, stride: Any) -> PairTensor:
        if 0 in inner["a"].stride():
            raise ValueError("expanded inner tensors are not supported")
        return cls(inner["a"], inner["b"], outer_size=size, outer_stride=stride)


def test_roundtrip_expanded_rule() -> None:
    _assert_fails(NoBroadcastStrides, {"roundtrip.expanded"}, "expanded instance")


def test_nested_rule() -> None:
    def factory() -> torch.Tensor:
        inner = ContiguousStridesOnly(*[t.transpose(0, 1) for t in (example().a, example().b)])
        return PairTensor(inner, PairTensor.from_tensor(inner.a.clone()))

    report = check_subclass(factory)
    assert "nested" in _failed(report), str(report)
    assert "stride" in report.get_result("nested").reason


class ReadsDataOnUnflatten(PairTensor):
    @classmethod
    def __tensor_unflatten__(cls, inner: dict[str, torch.Tensor], ctx: object, size: Any, stride: Any) -> PairTensor:
        if not bool(torch.isfinite(inner["a"]).all()):
            raise ValueError("non-finite data")
        return cls(inner["a"], inner["b"], outer_size=size, outer_stride=stride)


def test_fakify_static_rule() -> None:
    # Reading data fails under any fake mode, so the symbolic rule fails with it.
    _assert_fails(ReadsDataOnUnflatten, {"fakify.static", "fakify.symbolic"}, "must not read tensor data")


class SpecializesSizes(PairTensor):
    @classmethod
    def __tensor_unflatten__(cls, inner: dict[str, torch.Tensor], ctx: object, size: Any, stride: Any) -> PairTensor:
        return cls(inner["a"], inner["b"], outer_size=[int(d) for d in size], outer_stride=[int(s) for s in stride])


def test_fakify_symbolic_rule() -> None:
    _assert_fails(SpecializesSizes, {"fakify.symbolic"}, "specialized it")


class _NoCorrection(PairTensor):
    """Skips return_and_correct_aliasing for the ops in `packets` (the bug the aliasing rules catch)."""

    packets: ClassVar[tuple[Any, ...]] = ()

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        if func.overloadpacket in cls.packets:
            return cls.apply_to_inner(func, args, kwargs or {})
        return super().__torch_dispatch__(func, types, args, kwargs)


class NoViewAlias(_NoCorrection):
    packets = (aten.view,)


class NoInplaceReturn(_NoCorrection):
    packets = (aten.add_,)


class NoTMetadata(_NoCorrection):
    packets = (aten.t_,)


class NoUnsqueezeMetadata(_NoCorrection):
    packets = (aten.unsqueeze_,)


def test_views_alias_rule() -> None:
    _assert_fails(NoViewAlias, {"views.alias"}, "does not share x's storage")


def test_inplace_mutates_rule() -> None:
    _assert_fails(NoInplaceReturn, {"inplace.mutates"}, "returned a new .* expected x itself")


def test_inplace_view_t_rule() -> None:
    _assert_fails(NoTMetadata, {"inplace_view.t_"}, r"a plain tensor would have \(\(4, 3\), \(1, 4\)\)")


def test_inplace_view_unsqueeze_rule() -> None:
    _assert_fails(NoUnsqueezeMetadata, {"inplace_view.unsqueeze_"}, r"\(1, 3, 4\)")


class BadDetach(PairTensor):
    @implements(aten.detach)
    def _detach(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x = args[0]
        return BadDetach(x.a.detach(), x.a.detach())


def test_detach_rule() -> None:
    _assert_fails(BadDetach, {"detach"}, "changed the values")


class SharedClone(PairTensor):
    @implements(aten.clone)
    def _clone(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return SharedClone(args[0].a, args[0].b)


def test_clone_rule() -> None:
    _assert_fails(SharedClone, {"clone"}, "shares an inner tensor's storage")


class PlainDeepcopy(PairTensor):
    def __deepcopy__(self, memo: dict[int, Any]) -> torch.Tensor:  # type: ignore[override]
        return self.a.clone()


def test_deepcopy_rule() -> None:
    _assert_fails(PlainDeepcopy, {"deepcopy"}, "gave Tensor")


class LossyPickle(PairTensor):
    def __reduce_ex__(self, proto: Any) -> Any:
        return (LossyPickle, (self.a, self.a))


def test_pickle_rule() -> None:
    _assert_fails(LossyPickle, {"pickle"}, r"pickle.loads\(pickle.dumps\(x\)\) changed the values")


class HalfMul(PairTensor):
    @implements(aten.mul.Tensor)
    def _mul(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        x, other = args
        other_a = other.a if isinstance(other, HalfMul) else other
        return HalfMul(func(x.a, other_a), x.b.clone())


def test_autograd_rule() -> None:
    _assert_fails(HalfMul, {"autograd"}, r"not 2 \* x")


def test_registry_accepts_new_rules() -> None:
    def always_fails(factory: Callable[[], torch.Tensor]) -> None:
        fail("expected something, got nothing; fix: do something")

    def always_skips(factory: Callable[[], torch.Tensor]) -> None:
        skip("not applicable")

    rules = (
        *DEFAULT_RULES[:1],
        Rule(name="custom.fail", description="", check=always_fails),
        Rule(name="custom.skip", description="", check=always_skips),
    )
    report = check_subclass(example, rules=rules)
    assert not report.ok
    assert [r.status for r in report.results] == [Status.PASS, Status.FAIL, Status.SKIP]
    assert "custom.fail: expected something" in str(report)


def test_factory_that_raises_is_reported() -> None:
    def broken() -> torch.Tensor:
        raise RuntimeError("boom")

    report = check_subclass(broken)
    assert not report.ok and "boom" in report.results[0].reason


def test_unexpected_exception_in_rule_is_a_fail() -> None:
    def crashes(factory: Callable[[], torch.Tensor]) -> None:
        raise KeyError("oops")

    report = check_subclass(example, rules=(Rule(name="crash", description="", check=crashes),))
    assert report.results[0].status is Status.FAIL and "KeyError" in report.results[0].reason


class Scaled(WrapperTensor):
    inner_names: ClassVar[tuple[str, ...]] = ("payload",)
    ctx_names: ClassVar[tuple[str, ...]] = ("label",)
    apply_to_inner_by_default: ClassVar[bool] = True


def test_wrapper_tensor_without_pair_is_checked() -> None:
    report = check_subclass(lambda: Scaled(torch.randn(3, 4), "s"))
    assert report.ok, str(report)


# -- classes the checker did not see written (See Note [Checker Rules And Whose Failure])
# ------------------------------------------
class TransposeRaisesValueError(PairTensor):
    """Does not support transpose, and says so with a ValueError (as torch's jagged tensor does for dim 0)."""

    @implements(aten.transpose.int)
    def _transpose(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        raise ValueError("transpose is not supported by this class")


def test_unsupported_op_is_a_skip_naming_the_op_whatever_it_raises() -> None:
    report = check_subclass(_pair_factory(TransposeRaisesValueError), rules=BASE_RULES)
    result = report.get_result("roundtrip.transposed")
    assert result.status is Status.SKIP, str(report)
    assert "does not support x.transpose(0, 1) (ValueError: transpose is not supported" in result.reason


def test_failure_in_the_checkers_own_code_is_a_checker_error() -> None:
    from subclassaot.tools.checker_rules import dims_text

    def crashes_in_checker(factory: Callable[[], torch.Tensor]) -> None:
        dims_text(("not a size",))  # type: ignore[arg-type]  # a checker bug, simulated

    rule = Rule(name="buggy", description="a rule whose own code fails", check=crashes_in_checker)
    report = check_subclass(example, rules=(rule,))
    result = report.results[0]
    assert result.status is Status.ERROR, str(report)
    assert "the checker itself failed (a checker bug, not a verdict on the class)" in result.reason
    assert not report.ok and not report.failed()
    assert "1 checker errors" in str(report)


def test_njt_check_fails_only_real_properties_of_the_class(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "tests.subclasses.njt_samples:example"]) == 1
    out = capsys.readouterr().out
    statuses = {line.split()[0]: line.split()[1] for line in out.splitlines()[2:-1] if len(line.split()) > 1}
    # each FAIL is true of torch's NJT in eager: x.view(x.shape)._base is another NJT, its dispatch of add_ returns
    # a new wrapper, and clone() keeps the offsets (they carry the nested int)
    assert {name for name, status in statuses.items() if status == "FAIL"} == {
        "views.alias",
        "inplace.mutates",
        "clone",
    }
    for rule in ("fakify.static", "fakify.symbolic", "pickle", "deepcopy", "autograd", "torch.compile.aot_eager"):
        assert statuses[rule] == "PASS", out
    for rule in (
        "pipeline.data_mutation",
        "pipeline.output_aliasing",
        "pipeline.recompile_reason",
        "pipeline.training",
    ):
        assert statuses[rule] == "PASS", out
    assert "does not support x.transpose(0, 1) (ValueError: Transpose is not supported on the batch dimension" in out
    assert "does not support x[1:] (RuntimeError: slice(): not supported for NestedTensor on dim=0)" in out
    assert "ERROR" not in out
