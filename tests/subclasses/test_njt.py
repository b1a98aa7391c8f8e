"""torch's jagged NestedTensor (NJT) through `subclassaot.compile`: parity with eager (outputs, inputs after the call,
`._base` and storage sharing, grads, version counters; a second call through the cache), nested ints in policies
and guards, and refusals."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

import subclassaot
from policies import PolicyError, describe, mark_dynamic
from subclassaot.errors import PolicyError as PipelinePolicyError
from subclassaot.errors import UnsupportedError
from subclassaot.tools.explain import explain
from tests.oracle import assert_matches_eager

D = 4


def njt(lengths: list[int], *, requires_grad: bool = False, seed: int = 0) -> Tensor:
    """A jagged NestedTensor with rows of `lengths` and D features, built the way users build one."""
    gen = torch.Generator().manual_seed(seed)
    rows = [torch.randn(n, D, generator=gen) for n in lengths]
    return torch.nested.nested_tensor(rows, layout=torch.jagged, requires_grad=requires_grad)


def njt_from_values(lengths: list[int], *, seed: int = 0) -> Tensor:
    """An NJT that views a values buffer (`nested_tensor_from_jagged`): no min/max seqlen tensors."""
    gen = torch.Generator().manual_seed(seed)
    values = torch.randn(sum(lengths), D, generator=gen)
    offsets = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    return torch.nested.nested_tensor_from_jagged(values, offsets)


def offsets_of(x: Tensor) -> Tensor:
    offsets = x.offsets()  # type: ignore[attr-defined]  # NestedTensor's method; torch types its NJTs as Tensor
    assert isinstance(offsets, Tensor)
    return offsets


def inputs(*lengths: int) -> Callable[[], tuple[Tensor]]:
    return lambda: (njt(list(lengths)),)


# -- pointwise, reductions ---------------------------------------------------------------------------------------


def pointwise(x: Tensor) -> Tensor:
    return (x.sin() + 1) * x


def sum_over_ragged(x: Tensor) -> Tensor:
    return x.sum(dim=1)


def mean_over_features(x: Tensor) -> Tensor:
    return x.mean(dim=-1, keepdim=True)


def softmax_over_ragged(x: Tensor) -> Tensor:
    return x.softmax(dim=1)


def whole_sum(x: Tensor) -> Tensor:
    return x.values().sum()


@pytest.mark.parametrize(
    "fn", [pointwise, sum_over_ragged, mean_over_features, softmax_over_ragged, whole_sum], ids=lambda f: f.__name__
)
@pytest.mark.parametrize("dynamic", [None, False, True])
def test_pointwise_and_reductions_match_eager(fn: Callable[[Tensor], Tensor], dynamic: bool | None) -> None:
    assert_matches_eager(fn, inputs(2, 3), compile_kwargs={"dynamic": dynamic})


def test_binary_op_of_two_views_of_one_input_matches_eager() -> None:
    def fn(x: Tensor) -> Tensor:
        return x * x.cos() - x.exp()

    assert_matches_eager(fn, inputs(3, 1, 2))


def test_two_inputs_sharing_offsets_match_eager() -> None:
    def make() -> tuple[Tensor, Tensor]:
        a = njt_from_values([2, 3])
        b = torch.nested.nested_tensor_from_jagged(torch.randn(5, D), offsets_of(a))
        return a, b

    assert_matches_eager(torch.add, make)


# -- in-place ops and views --------------------------------------------------------------------------------------


def test_in_place_op_on_input_matches_eager() -> None:
    def fn(x: Tensor) -> Tensor:
        x.mul_(2)
        return x + 1

    assert_matches_eager(fn, inputs(2, 3))


def test_in_place_op_then_output_is_the_input() -> None:
    def fn(x: Tensor) -> Tensor:
        return x.add_(1)

    assert_matches_eager(fn, inputs(2, 3))


def test_values_view_shares_storage_and_base_with_input() -> None:
    def fn(x: Tensor) -> Tensor:
        return x.values()

    assert_matches_eager(fn, inputs(2, 3))


def test_write_through_values_view_reaches_input() -> None:
    def fn(x: Tensor) -> Tensor:
        v = x.values()
        v.add_(1)
        return v * 2

    assert_matches_eager(fn, lambda: (njt_from_values([2, 3]),))


@pytest.mark.parametrize(
    "view",
    [lambda x: x.transpose(-1, -2), lambda x: x.unsqueeze(-1), lambda x: x.unsqueeze(2)],
    ids=["transpose_features", "unsqueeze_last", "unsqueeze_2"],
)
def test_views_match_eager(view: Callable[[Tensor], Tensor]) -> None:
    assert_matches_eager(view, inputs(2, 3))


# -- training ----------------------------------------------------------------------------------------------------


def test_training_through_pointwise_and_reduction_matches_eager() -> None:
    def fn(x: Tensor) -> Tensor:
        return (x.sin() * 2).sum(dim=1)

    assert_matches_eager(fn, lambda: (njt([2, 3], requires_grad=True),))


def test_linear_over_njt_trains_like_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(D, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    assert_matches_eager(model, inputs(2, 3, 1))


def test_njt_requiring_grad_through_linear_matches_eager() -> None:
    w = torch.randn(3, D)

    def fn(x: Tensor) -> Tensor:
        return F.linear(x, w).relu()

    assert_matches_eager(fn, lambda: (njt([2, 3], requires_grad=True),))


# -- dynamic shapes, the cache and guards ------------------------------------------------------------------------


def test_batches_of_other_lengths_reuse_one_entry() -> None:
    compiled = subclassaot.compile(pointwise, backend="eager")
    for lengths in ([2, 3], [4, 2], [5, 7], [9, 3]):
        out = compiled(njt(lengths))
        torch.testing.assert_close(out.values(), pointwise(njt(lengths)).values())
    assert compiled.compile_count == 1, compiled.recompile_reasons


def test_a_shortest_row_of_length_one_compiles_one_more_entry() -> None:
    # NJT's min/max seqlen tensors have size (seqlen, 0); a seqlen of 1 is planned static (Note [Zero One
    # Specialization]), as torch.compile does: one more entry, which later batches with such a row reuse.
    compiled = subclassaot.compile(pointwise, backend="eager")
    for lengths in ([2, 3], [4, 1], [5, 7], [1, 6], [3, 3]):
        out = compiled(njt(lengths))
        torch.testing.assert_close(out.values(), pointwise(njt(lengths)).values())
    assert compiled.compile_count == 2, compiled.recompile_reasons
    assert "args[0]._min_seqlen_tensor.size(0) = 1 is below 2" in compiled.recompile_reasons[0]


def test_batch_size_changes_reuse_one_entry_with_mark_dynamic() -> None:
    compiled = subclassaot.compile(sum_over_ragged, backend="eager")
    for lengths in ([2, 3], [4, 2, 2], [5, 7, 2, 3], [3, 3, 3, 3, 3]):
        x = njt(lengths)
        mark_dynamic(x, 0)
        torch.testing.assert_close(compiled(x), sum_over_ragged(njt(lengths)))
    assert compiled.compile_count == 1, compiled.recompile_reasons


def test_batch_size_changes_recompile_once_under_automatic_dynamic() -> None:
    compiled = subclassaot.compile(sum_over_ragged, backend="eager")
    for lengths in ([2, 3], [4, 2, 2], [5, 7, 2, 3], [3, 3, 3, 3, 3]):
        torch.testing.assert_close(compiled(njt(lengths)), sum_over_ragged(njt(lengths)))
    assert compiled.compile_count == 2, compiled.recompile_reasons
    assert "args[0].size(0): expected 2, got 3" in compiled.recompile_reasons[0]


def test_feature_size_change_recompiles_with_a_reason() -> None:
    compiled = subclassaot.compile(pointwise, backend="eager", dynamic=False)
    compiled(njt([2, 3]))
    gen = torch.Generator().manual_seed(0)
    other = torch.nested.nested_tensor([torch.randn(2, D + 1, generator=gen)] * 2, layout=torch.jagged)
    out = compiled(other)
    torch.testing.assert_close(out.values(), pointwise(other).values())
    assert compiled.compile_count == 2
    assert "size(2): expected 4, got 5" in compiled.recompile_reasons[0]


def test_two_inputs_with_different_ragged_structure_recompile() -> None:
    # compiled for a and a deepcopy of it (one nested int over two offsets tensors); then called with two separately
    # built ones (two nested ints, storages as unshared as before), where eager raises
    def fn(a: Tensor, b: Tensor) -> Tensor:
        return a + b

    compiled = subclassaot.compile(fn, backend="eager")
    a = njt([2, 3])
    compiled(a, copy.deepcopy(a))
    with pytest.raises(RuntimeError, match="cannot call binary pointwise function"):
        compiled(njt([2, 3]), copy.deepcopy(njt([2, 3], seed=1)))
    assert "args[1].size(1): expected the same nested int as args[0].size(1)" in compiled.recompile_reasons[0]


def test_inputs_sharing_offsets_then_not_recompile() -> None:
    def fn(a: Tensor, b: Tensor) -> Tensor:
        return a + b

    compiled = subclassaot.compile(fn, backend="eager")
    a = njt_from_values([2, 3])
    compiled(a, torch.nested.nested_tensor_from_jagged(torch.randn(5, D), offsets_of(a)))
    with pytest.raises(RuntimeError, match="cannot call binary pointwise function"):
        compiled(njt_from_values([2, 3]), njt_from_values([2, 3], seed=1))
    assert "input aliasing changed" in compiled.recompile_reasons[0]


def test_deep_copied_njt_keeps_its_nested_int() -> None:
    # a deepcopy keeps the original's nested int over copied offsets: eager adds the two
    def make() -> tuple[Tensor, Tensor]:
        a = njt([2, 3])
        return a, copy.deepcopy(a)

    assert_matches_eager(torch.add, make)


def test_policy_describes_nested_ints_and_relations() -> None:
    text = describe(njt([2, 3]), "args[0]", dynamic=None)
    assert "size(1) = j: nested int j" in text
    assert "stride(0) = 4*j: nested int 4*j" in text
    assert "relation: _offsets.size(0) == size(0) + 1" in text
    assert "args[0]._values" in text and "size(0) = 5: dynamic" in text


def test_range_on_the_ragged_dim_is_a_policy_error() -> None:
    x = njt([2, 3])
    mark_dynamic(x, 1, min=2, max=8)
    with pytest.raises(PipelinePolicyError, match=r"args\[0\]\.size\(1\) is the nested int j"):
        subclassaot.compile(pointwise)(x)


def test_dynamic_feature_dim_is_a_policy_error() -> None:
    x = njt([2, 3])
    mark_dynamic(x, 2)
    with pytest.raises(PolicyError, match=r"args\[0\]\.size\(2\) is dynamic .* nested stride"):
        subclassaot.compile(pointwise)(x)


# -- inductor ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [pointwise, sum_over_ragged], ids=lambda f: f.__name__)
def test_inductor_matches_eager(fn: Callable[[Tensor], Tensor]) -> None:
    assert_matches_eager(fn, inputs(2, 3), backend="inductor")


def test_inductor_trains_like_eager() -> None:
    def fn(x: Tensor) -> Tensor:
        return (x.sin() * 2).sum(dim=1)

    assert_matches_eager(fn, lambda: (njt([2, 3], requires_grad=True),), backend="inductor")


def test_inductor_batch_size_changes_reuse_one_entry_with_mark_dynamic() -> None:
    # the batch lives only in `_offsets.size(0) == B + 1`: See Note [What A Backend Receives And Returns]
    compiled = subclassaot.compile(sum_over_ragged, backend="inductor")
    for lengths in ([2, 3], [4, 2, 2], [5, 7, 2, 3]):
        x = njt(lengths)
        mark_dynamic(x, 0)
        torch.testing.assert_close(compiled(x), sum_over_ragged(njt(lengths)))
    assert compiled.compile_count == 1, compiled.recompile_reasons


# -- refusals ----------------------------------------------------------------------------------------------------


def test_unbind_is_refused_as_data_dependent() -> None:
    # the rows' lengths are offsets' values: eager reads them, a trace cannot (torch.compile graph-breaks there)
    with pytest.raises(UnsupportedError, match="depends on tensor values while it is traced"):
        subclassaot.compile(lambda x: x.unbind(), backend="eager")(njt([2, 3]))


def test_njt_built_inside_and_returned_is_refused_naming_the_output() -> None:
    def fn(x: Tensor) -> Tensor:
        return torch.nested.nested_tensor_from_jagged(x.values() * 2, offsets_of(x))

    with pytest.raises(UnsupportedError, match=r"out is a NestedTensor the program built as a view of a plain tensor"):
        subclassaot.compile(fn, backend="eager")(njt([2, 3]))


def test_njt_built_inside_from_input_offsets_and_reduced_matches_eager() -> None:
    def fn(x: Tensor) -> Tensor:
        return torch.nested.nested_tensor_from_jagged(x.values() * 2, offsets_of(x)).sum(dim=1)

    assert_matches_eager(fn, inputs(2, 3))


def test_explain_shows_the_structural_guard_on_the_ragged_dim() -> None:
    text = str(explain(pointwise, njt([2, 3]), backend="eager"))
    assert "_nested_coeff(v0_size[1]) == 1" in text
    assert "args[0]._values.size(0)" in text


def njt_with_lengths() -> Tensor:
    """A non-contiguous NJT (`torch.nested.narrow` of a padded tensor): `_lengths` is its ragged source."""
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(3, 5, D, generator=gen)
    return torch.nested.narrow(base, 1, torch.tensor([0, 1, 2]), torch.tensor([2, 3, 1]), layout=torch.jagged)


@pytest.mark.parametrize("fn", [pointwise, mean_over_features], ids=lambda f: f.__name__)
def test_njt_with_lengths_matches_eager(fn: Callable[[Tensor], Tensor]) -> None:
    assert_matches_eager(fn, lambda: (njt_with_lengths(),))


def computed_inside_inference_mode(x: Tensor) -> object:
    with torch.inference_mode():
        y = x.sin() * 2
    return y, x + 1


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_njt_computed_inside_inference_mode_matches_eager(grad: bool) -> None:
    """Eager's result is an inference NJT whose values are inference tensors while its offsets stay the input's
    (normal tensors, shared); the runtime first copied every inner tensor into an inference one, offsets included
    (found checking real subclasses after the inference-output change): it copies only the leaves eager made."""
    with torch.set_grad_enabled(grad):
        assert_matches_eager(computed_inside_inference_mode, inputs(2, 3, 1))
