"""JaggedTensor in eager mode: every op against a per-row reference (a Python loop over plain row tensors)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from policies import DimKind, derive_policy, mark_dynamic, plan_input
from subclassaot import check_subclass
from subclassaot.errors import ProtocolError, UnsupportedError
from subclasses.nested import JaggedTensor, example, example_with_holes, from_padded, from_padded_like
from subclasses.nested.tensor import ragged_size_tensor_for

LENGTHS = (3, 0, 5, 1)  # an empty row and rows not a multiple of any block size
HOLES = (1, 2, 0, 1)  # extra slot entries after each row (rows with holes)


def make(
    lengths: Sequence[int] = LENGTHS,
    features: tuple[int, ...] = (3,),
    *,
    holes: Sequence[int] | None = None,
    seed: int = 0,
    requires_grad: bool = False,
) -> JaggedTensor:
    gen = torch.Generator().manual_seed(seed)
    slots = list(lengths) if holes is None else [n + h for n, h in zip(lengths, holes, strict=True)]
    values = torch.randn(sum(slots), *features, generator=gen)
    offsets = torch.tensor([0, *torch.tensor(slots).cumsum(0).tolist()])
    lens = None if holes is None else torch.tensor(lengths)
    return JaggedTensor(values, offsets, lengths=lens, requires_grad=requires_grad)


def rows_of(x: JaggedTensor) -> list[Tensor]:
    starts, lens = x.offsets[:-1].tolist(), x.row_lengths().tolist()
    return [x.flat_values[s : s + n] for s, n in zip(starts, lens, strict=True)]


def assert_rows(out: object, expected: Sequence[Tensor], *, atol: float = 1e-5) -> None:
    assert isinstance(out, JaggedTensor)
    got = rows_of(out)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g, e, atol=atol, rtol=1e-5)


# -- structure -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("holes", [None, HOLES])
def test_shape_is_batch_ragged_features(holes: Sequence[int] | None) -> None:
    x = make(features=(2, 3), holes=holes)
    assert x.shape == (4, 5, 2, 3) and x.stride() == (30, 6, 3, 1)
    assert x.ragged_size_tensor.shape == (5, 0) and x.max_length == 5
    assert x.row_lengths().tolist() == list(LENGTHS)


def test_unflatten_ignores_outer_size_and_accepts_minus_one() -> None:
    x = example()
    attrs, ctx = x.__tensor_flatten__()
    inner = {a: getattr(x, a) for a in attrs}
    y = JaggedTensor.__tensor_unflatten__(inner, ctx, (-1, -1, -1), (-1, -1, -1))
    assert y.shape == x.shape and y.stride() == x.stride()


def test_from_tensors_and_padded_roundtrip() -> None:
    rows = [torch.randn(n, 4) for n in (2, 5, 0, 3)]
    x = JaggedTensor.from_tensors(rows)
    assert x.shape == (4, 5, 4)
    padded = x.to_padded(-1.0)
    for i, r in enumerate(rows):
        torch.testing.assert_close(padded[i, : len(r)], r)
        assert bool((padded[i, len(r) :] == -1.0).all())
    assert_rows(from_padded(padded, torch.tensor([2, 5, 0, 3])), rows)
    assert_rows(from_padded_like(padded * 2, x), [r * 2 for r in rows])
    assert x.to_padded(output_size=7).shape == (4, 7, 4)


def test_to_padded_with_holes_pads_the_holes() -> None:
    x = make(holes=HOLES)
    padded = x.to_padded(9.0)
    for i, r in enumerate(rows_of(x)):
        torch.testing.assert_close(padded[i, : len(r)], r)
        assert bool((padded[i, len(r) :] == 9.0).all())


def test_from_padded_ragged_size_is_the_padded_width() -> None:
    y = from_padded(torch.randn(2, 6, 3), torch.tensor([1, 2]))
    assert y.shape == (2, 6, 3) and y.flat_values.shape == (3, 3)


def test_unbind_gives_views_of_the_values() -> None:
    x = make(holes=HOLES)
    rows = x.unbind()
    assert [r.shape[0] for r in rows] == list(LENGTHS)
    for r, e in zip(rows, rows_of(x), strict=True):
        torch.testing.assert_close(r, e)
        assert r.untyped_storage()._cdata == x.flat_values.untyped_storage()._cdata


# -- pointwise -----------------------------------------------------------------------------------------------------
UNARY: dict[str, Callable[[Tensor], Tensor]] = {
    "relu": torch.relu,
    "exp": torch.exp,
    "neg": lambda t: -t,
    "affine": lambda t: t * 2 + 1,
    "gelu": F.gelu,
    "sigmoid": torch.sigmoid,
    "gt": lambda t: t > 0,
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("holes", [None, HOLES])
def test_unary(name: str, holes: Sequence[int] | None) -> None:
    x = make(holes=holes)
    assert_rows(UNARY[name](x), [UNARY[name](r) for r in rows_of(x)])


def test_binary_jagged_jagged_same_rows() -> None:
    x = make()
    y = JaggedTensor(torch.randn_like(x.flat_values), x.offsets, x.ragged_size_tensor)
    assert_rows(x * y - x, [a * b - a for a, b in zip(rows_of(x), rows_of(y), strict=True)])
    z = JaggedTensor(torch.randn_like(x.flat_values), x.offsets.clone())  # equal offsets, another tensor
    assert_rows(x + z, [a + b for a, b in zip(rows_of(x), rows_of(z), strict=True)])


def test_binary_jagged_jagged_different_rows_raises() -> None:
    with pytest.raises(ValueError, match="different rows"):
        make() + make(lengths=(4, 0, 4, 1))


def test_binary_with_dense_broadcast() -> None:
    x = make(holes=HOLES)
    bias = torch.randn(3)
    assert_rows(x + bias, [r + bias for r in rows_of(x)])
    per_row = torch.randn(4, 1, 3)
    assert_rows(x * per_row, [r * per_row[i] for i, r in enumerate(rows_of(x))])


def test_binary_with_dense_of_outer_shape_raises() -> None:
    x = make()
    with pytest.raises(UnsupportedError, match="does not broadcast against the rows"):
        x + torch.randn(4, 5, 3)


# -- linear, layer norm, softmax ---------------------------------------------------------------------------------
def test_linear_and_matmul() -> None:
    x, w, b = make(), torch.randn(5, 3), torch.randn(5)
    assert_rows(F.linear(x, w, b), [F.linear(r, w, b) for r in rows_of(x)])
    assert_rows(x @ w.t(), [r @ w.t() for r in rows_of(x)])


def test_layer_norm() -> None:
    x, w, b = make(features=(6,)), torch.randn(6), torch.randn(6)
    assert_rows(F.layer_norm(x, (6,), w, b), [F.layer_norm(r, (6,), w, b) for r in rows_of(x)])


@pytest.mark.parametrize("holes", [None, HOLES])
def test_softmax_over_ragged_dim(holes: Sequence[int] | None) -> None:
    x = make(holes=holes)
    assert_rows(x.softmax(1), [r.softmax(0) for r in rows_of(x)])
    assert_rows(torch.softmax(x, dim=-1), [r.softmax(-1) for r in rows_of(x)])


# -- reductions ----------------------------------------------------------------------------------------------------
def _row_reduce(name: str, r: Tensor) -> Tensor:
    if r.shape[0] == 0:
        return torch.full(r.shape[1:], {"sum": 0.0, "mean": float("nan"), "amax": float("-inf")}[name])
    return {"sum": r.sum(0), "mean": r.mean(0), "amax": r.amax(0)}[name]


@pytest.mark.parametrize("name", ["sum", "mean", "amax"])
@pytest.mark.parametrize("holes", [None, HOLES])
def test_reduce_over_ragged_dim(name: str, holes: Sequence[int] | None) -> None:
    x = make(holes=holes)
    expected = torch.stack([_row_reduce(name, r) for r in rows_of(x)])
    out = getattr(x, name)(1)
    assert type(out) is torch.Tensor
    torch.testing.assert_close(out, expected, equal_nan=True)
    torch.testing.assert_close(getattr(torch, name)(x, 1, keepdim=True), expected[:, None], equal_nan=True)
    all_rows = torch.cat(rows_of(x))
    torch.testing.assert_close(getattr(x, name)((0, 1)), _row_reduce(name, all_rows))


def test_reduce_over_feature_dim_stays_jagged() -> None:
    x = make(features=(2, 3))
    assert_rows(x.sum(-1), [r.sum(-1) for r in rows_of(x)])
    torch.testing.assert_close(x.sum(), torch.cat(rows_of(x)).sum())
    torch.testing.assert_close(
        x.mean((1, 3)), torch.stack([_row_reduce("mean", r).mean(-1) for r in rows_of(x)]), equal_nan=True
    )


def test_reduce_over_batch_alone_raises() -> None:
    with pytest.raises(UnsupportedError, match="batch dim alone"):
        make().sum(0)


# -- in-place ops and views ----------------------------------------------------------------------------------------
def test_inplace_ops_write_the_values() -> None:
    x = make()
    values, expected = x.flat_values, [r * 3 + 1 for r in rows_of(x)]
    assert x.mul_(3).add_(1) is x
    assert_rows(x, expected)
    assert x.flat_values is values
    y = JaggedTensor(torch.ones_like(values), x.offsets, x.ragged_size_tensor)
    x.copy_(y)
    assert_rows(x, rows_of(y))
    x.zero_()
    assert bool((x.flat_values == 0).all())


def test_views_share_values_and_copies_do_not() -> None:
    x = make(features=(6,))
    v, detached, cloned = x.view(4, 5, 2, 3), x.detach(), x.clone()
    assert isinstance(v, JaggedTensor) and isinstance(detached, JaggedTensor) and isinstance(cloned, JaggedTensor)
    assert v.shape == (4, 5, 2, 3) and v._base is x
    storage = x.flat_values.untyped_storage()._cdata
    assert v.flat_values.untyped_storage()._cdata == storage
    assert detached.flat_values.untyped_storage()._cdata == storage
    assert cloned.flat_values.untyped_storage()._cdata != storage


def test_view_of_batch_or_ragged_dims_raises() -> None:
    with pytest.raises(UnsupportedError, match="only the feature dims"):
        make().view(20, 3)


# -- gradients -----------------------------------------------------------------------------------------------------
GRAD_FNS: dict[str, tuple[Callable[[JaggedTensor], Tensor], Callable[[Tensor], Tensor]]] = {
    "sum": (lambda x: x.sum(1).pow(2).sum(), lambda r: r.sum(0).pow(2).sum()),
    "mean": (lambda x: x.mean(1).pow(2).sum(), lambda r: r.mean(0).pow(2).sum()),
    "amax": (lambda x: x.amax(1).sum(), lambda r: r.amax(0).sum()),
    "softmax": (lambda x: (x.softmax(1) * x).sum(), lambda r: (r.softmax(0) * r).sum()),
    "pointwise": (lambda x: (x.relu() * torch.arange(3.0)).sum(), lambda r: (r.relu() * torch.arange(3.0)).sum()),
    "padded": (lambda x: x.to_padded().pow(2).sum(), lambda r: r.pow(2).sum()),
    "layer_norm": (lambda x: F.layer_norm(x, (3,)).pow(3).sum(), lambda r: F.layer_norm(r, (3,)).pow(3).sum()),
}


@pytest.mark.parametrize("name", sorted(GRAD_FNS))
@pytest.mark.parametrize("holes", [None, HOLES])
def test_gradients_through_values(name: str, holes: Sequence[int] | None) -> None:
    jagged_fn, row_fn = GRAD_FNS[name]
    lengths = (3, 2, 5, 1)  # no empty rows: their mean/amax gradients are NaN/undefined per row
    x = make(lengths, holes=holes, requires_grad=True)
    torch.autograd.backward(jagged_fn(x))
    rows = [r.detach().clone().requires_grad_(True) for r in rows_of(x)]
    torch.autograd.backward(torch.stack([row_fn(r) for r in rows]).sum())
    assert isinstance(x.grad, JaggedTensor)
    assert_rows(x.grad, [r.grad for r in rows if r.grad is not None])


def test_gradient_of_linear_weight_and_input() -> None:
    x, w = make(requires_grad=True), torch.randn(5, 3, requires_grad=True)
    torch.autograd.backward(F.linear(x, w).softmax(1).pow(2).sum())
    rows = [r.detach().clone().requires_grad_(True) for r in rows_of(x)]
    w2 = w.detach().clone().requires_grad_(True)
    torch.autograd.backward(torch.stack([F.linear(r, w2).softmax(0).pow(2).sum() for r in rows if r.shape[0]]).sum())
    torch.testing.assert_close(w.grad, w2.grad)
    assert isinstance(x.grad, JaggedTensor)
    assert_rows(x.grad, [torch.zeros_like(r) if r.grad is None else r.grad for r in rows])


# -- construction errors ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("offsets", "lengths", "match"),
    [
        ([1, 3, 7], None, "start at 0"),
        ([0, 5, 3, 7], None, "non-decreasing"),
        ([0, 3, 7], [4, 1], r"lengths\[i\] <= offsets"),
    ],
)
def test_bad_rows_raise(offsets: list[int], lengths: list[int] | None, match: str) -> None:
    lens = None if lengths is None else torch.tensor(lengths)
    with pytest.raises(ValueError, match=match):
        JaggedTensor(torch.randn(7, 2), torch.tensor(offsets), lengths=lens)


def test_bad_inner_tensors_raise() -> None:
    with pytest.raises(ProtocolError, match="offsets must be 1-D int64"):
        JaggedTensor(torch.randn(7, 2), torch.tensor([0, 7], dtype=torch.int32))
    with pytest.raises(UnsupportedError, match="only ragged_dim=1"):
        JaggedTensor(torch.randn(7, 2), torch.tensor([0, 7]), ragged_dim=2)
    with pytest.raises(UnsupportedError, match="only dim=0"):
        make().unbind(1)


# -- policy and conformance ------------------------------------------------------------------------------------------
def test_mark_dynamic_plans_the_ragged_size_as_its_own_symbol() -> None:
    x = make(holes=HOLES)
    mark_dynamic(x, 0)
    plan = plan_input(x, "x", derive_policy(x, "x", default=DimKind.STATIC))
    dims = {repr(d.address): d for d in plan.dims()}
    assert dims["x.size(0)"].needs_symbol
    assert dims["x.ragged_size_tensor.size(0)"].needs_symbol
    assert dims["x.flat_values.size(0)"].needs_symbol
    assert repr(dims["x.size(1)"].derived) == "x.ragged_size_tensor.size(0)"
    assert repr(dims["x.offsets.size(0)"].derived) == "x.size(0) + 1"
    assert repr(dims["x.lengths.size(0)"].derived) == "x.size(0)"
    assert repr(dims["x.flat_values.size(1)"].derived) == "x.size(2)"
    assert not dims["x.size(2)"].dynamic


def test_symbolic_policy_is_the_mark_dynamic_policy() -> None:
    x = example()
    assert x.symbolic_policy() == x.__tensor_mark_dynamic__((0,), None, None)


@pytest.mark.parametrize("factory", [example, example_with_holes])
def test_checker_passes(factory: Callable[[], JaggedTensor]) -> None:
    report = check_subclass(factory)
    failed = {r.name for r in report.failed()}
    # With holes, the checker's autograd rule expects 2 * x at hole positions too; their gradient is 0.
    assert failed <= ({"autograd"} if factory is example_with_holes else set()), str(report)


def test_ragged_size_tensor_is_zero_bytes() -> None:
    t = ragged_size_tensor_for(1000, torch.device("cpu"))
    assert t.shape == (1000, 0) and t.untyped_storage().nbytes() == 0
