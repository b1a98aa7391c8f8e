"""Float8Tensor in eager mode against dequantize-then-op references; views and layouts; the checker; the pipeline.

Every computation must equal running the same op on `x.dequantize()` (matmuls up to fp32 accumulation order:
the kernel divides the fp8 product by both scales at the end, the reference divides each operand first).
See Note [Float8 Op Semantics] and Note [Float8 Scale Layouts].
"""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest
import torch
from torch import Tensor

import policies
import subclassaot
from subclassaot import check_subclass
from subclassaot.errors import ProtocolError, UnsupportedError
from subclassaot.tools import checker_rules as rules
from subclassaot.tools.checker import Status
from subclasses.fp8 import Float8Granularity, Float8Tensor, example, rowwise_example
from subclasses.fp8.reference import Granularity, amax_to_scale
from tests.oracle import assert_matches_eager

G = Float8Granularity
E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
MM_TOL = 1e-5  # atol and rtol of matmul comparisons


def _f8(*shape: int, granularity: G = G.TENSORWISE, seed: int = 0, dtype: torch.dtype = E4M3) -> Float8Tensor:
    torch.manual_seed(seed)
    return Float8Tensor.from_hp(torch.randn(*shape), fp8_dtype=dtype, granularity=granularity)


def _bits(t: Tensor) -> Tensor:
    return t.view(torch.uint8) if t.dtype in (E4M3, E5M2) else t


def _assert_same_f8(got: Tensor, expected: Float8Tensor) -> None:
    assert isinstance(got, Float8Tensor)
    assert got.__tensor_flatten__()[1] == expected.__tensor_flatten__()[1]
    assert got.shape == expected.shape and got.stride() == expected.stride()
    assert torch.equal(_bits(got.qdata), _bits(expected.qdata)) and torch.equal(got.scale, expected.scale)


LAYOUTS = [G.TENSORWISE, G.ROWWISE]

# name -> (op on the Float8Tensor, op on its dequantized value); results are plain tensors.
COMPUTE: dict[str, Callable[[Tensor], Tensor]] = {
    "add": lambda t: t + 1,
    "mul_self": lambda t: t * t,
    "sum": lambda t: t.sum(),
    "softmax": lambda t: torch.softmax(t, dim=-1),
    "gt": lambda t: t > 0,
    "to_f64": lambda t: t.to(torch.float64),
    "bmm": lambda t: torch.bmm(t.unsqueeze(0), t.t().unsqueeze(0)),
}


@pytest.mark.parametrize("granularity", LAYOUTS, ids=lambda g: g.value)
@pytest.mark.parametrize("name", sorted(COMPUTE))
def test_compute_ops_dequantize_then_run(name: str, granularity: G) -> None:
    x = _f8(4, 6, granularity=granularity)
    got, expected = COMPUTE[name](x), COMPUTE[name](x.dequantize())
    assert type(got) is torch.Tensor and got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, atol=MM_TOL, rtol=MM_TOL)


MATMULS: dict[str, Callable[[Tensor, Tensor, Tensor], Tensor]] = {
    "mm_f8_f8": lambda x, w, b: torch.mm(x, w.t()),
    "matmul_3d": lambda x, w, b: torch.matmul(x.view(2, 2, 6), w.t()),
    "linear_bias": torch.nn.functional.linear,
    "addmm_scaled": lambda x, w, b: torch.addmm(b, x, w.t(), beta=0.5, alpha=2.0),
}


@pytest.mark.parametrize("granularity", LAYOUTS, ids=lambda g: g.value)
@pytest.mark.parametrize("name", sorted(MATMULS))
def test_matmuls_match_dequantized(name: str, granularity: G) -> None:
    x, w, b = _f8(4, 6, granularity=granularity), _f8(5, 6, granularity=granularity, seed=1), torch.randn(5)
    got = MATMULS[name](x, w, b)
    expected = MATMULS[name](x.dequantize(), w.dequantize(), b)
    assert type(got) is torch.Tensor
    torch.testing.assert_close(got, expected, atol=MM_TOL, rtol=MM_TOL)


@pytest.mark.parametrize("granularity", LAYOUTS, ids=lambda g: g.value)
def test_mm_with_a_high_precision_operand_quantizes_it(granularity: G) -> None:
    x, w = _f8(4, 6, granularity=granularity), torch.randn(5, 6)
    wanted = G.TENSORWISE if granularity is G.TENSORWISE else G.COLWISE
    w8 = Float8Tensor.from_hp(w.t(), granularity=wanted)
    torch.testing.assert_close(torch.mm(x, w.t()), x.dequantize() @ w8.dequantize(), atol=MM_TOL, rtol=MM_TOL)
    x8 = Float8Tensor.from_hp(x.dequantize(), granularity=G.TENSORWISE if granularity is G.TENSORWISE else G.ROWWISE)
    torch.testing.assert_close(
        torch.mm(x.dequantize(), w8), x8.dequantize() @ w8.dequantize(), atol=MM_TOL, rtol=MM_TOL
    )


def test_mm_rejects_mixed_outer_dtypes() -> None:
    a = Float8Tensor.from_hp(torch.randn(4, 6, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match=r"stand for torch.bfloat16 and torch.float32"):
        torch.mm(a, _f8(6, 3))


VIEWS: dict[str, tuple[Callable[[Tensor], Tensor], G, G]] = {
    # name: (view, layout of x, expected layout of the view)
    "t_tensorwise": (lambda t: t.t(), G.TENSORWISE, G.TENSORWISE),
    "t_rowwise": (lambda t: t.t(), G.ROWWISE, G.COLWISE),
    "t_t_rowwise": (lambda t: t.t().t(), G.ROWWISE, G.ROWWISE),
    "slice_rows": (lambda t: t[1:3], G.ROWWISE, G.ROWWISE),
    "slice_cols": (lambda t: t[:, 2:], G.ROWWISE, G.ROWWISE),
    "select_row": (lambda t: t[1], G.ROWWISE, G.ROWWISE),
    "select_col_of_colwise": (lambda t: t.t()[:, 1], G.ROWWISE, G.ROWWISE),
    "view_rows": (lambda t: t.view(2, 2, 6), G.ROWWISE, G.ROWWISE),
    "view_flat": (lambda t: t.view(-1), G.TENSORWISE, G.TENSORWISE),
    "unsqueeze": (lambda t: t.unsqueeze(0), G.ROWWISE, G.ROWWISE),
    "expand": (lambda t: t.unsqueeze(0).expand(3, 4, 6), G.ROWWISE, G.ROWWISE),
    "permute_3d": (lambda t: t.view(2, 2, 6).permute(1, 0, 2), G.ROWWISE, G.ROWWISE),
    "as_strided": (lambda t: t.as_strided((2, 2), (1, 6), 1), G.TENSORWISE, G.TENSORWISE),
    "detach": (lambda t: t.detach(), G.ROWWISE, G.ROWWISE),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_alias_and_keep_values(name: str) -> None:
    op, layout, expected_layout = VIEWS[name]
    x = _f8(4, 6, granularity=layout)
    v = op(x)
    assert isinstance(v, Float8Tensor) and v.granularity is expected_layout
    assert v.untyped_storage()._cdata == x.untyped_storage()._cdata
    assert v.qdata.untyped_storage().data_ptr() == x.qdata.untyped_storage().data_ptr()
    plain = op(torch.zeros(4, 6))
    assert v.shape == plain.shape and v.stride() == plain.stride()
    torch.testing.assert_close(v.dequantize(), op(x.dequantize()), rtol=0, atol=0)


UNSUPPORTED_VIEWS: dict[str, tuple[Callable[[Tensor], Tensor], str]] = {
    "view_changes_row_length": (lambda t: t.view(6, 4), r"changes the trailing dim"),
    "transpose_0_2": (lambda t: t.view(2, 2, 6).transpose(0, 2), r"neither rowwise .* nor colwise"),
    "select_along_row": (lambda t: t[:, 1], r"one element per scale"),
    "as_strided": (lambda t: t.as_strided((2, 2), (1, 6)), r"as_strided on a rowwise tensor"),
    "t_": (lambda t: t.t_(), r"would turn a rowwise tensor colwise"),
}


@pytest.mark.parametrize("name", sorted(UNSUPPORTED_VIEWS))
def test_views_no_layout_can_express_raise(name: str) -> None:
    op, message = UNSUPPORTED_VIEWS[name]
    with pytest.raises(UnsupportedError, match=message):
        op(_f8(4, 6, granularity=G.ROWWISE))


def test_inplace_views_on_tensorwise() -> None:
    x = _f8(4, 6)
    expected = x.dequantize().t()
    assert x.t_() is x and x.shape == (6, 4) and x.stride() == (1, 6)
    torch.testing.assert_close(x.dequantize(), expected, rtol=0, atol=0)
    x.unsqueeze_(0)
    assert x.size() == (1, 6, 4) and x.qdata.shape == (1, 6, 4)


@pytest.mark.parametrize("granularity", LAYOUTS, ids=lambda g: g.value)
def test_copies(granularity: G) -> None:
    x = _f8(4, 6, granularity=granularity)
    for y in (x.clone(), x.detach(), x.contiguous(), pickle.loads(pickle.dumps(x))):
        _assert_same_f8(y, x)
    clone = x.clone()
    assert isinstance(clone, Float8Tensor) and clone.qdata.data_ptr() != x.qdata.data_ptr()
    bf16 = x.to(torch.bfloat16)
    assert isinstance(bf16, Float8Tensor) and bf16.dtype == torch.bfloat16
    torch.testing.assert_close(bf16.dequantize(), x.dequantize().to(torch.bfloat16))
    assert type(x.to(torch.float64)) is torch.Tensor


@pytest.mark.parametrize("granularity", LAYOUTS, ids=lambda g: g.value)
def test_copy_from_float8_is_bit_exact(granularity: G) -> None:
    x, y = _f8(4, 6, granularity=granularity), _f8(4, 6, granularity=granularity, seed=1)
    assert x.copy_(y) is x
    _assert_same_f8(x, y)


@pytest.mark.parametrize("granularity", LAYOUTS, ids=lambda g: g.value)
def test_copy_from_high_precision_keeps_the_scale(granularity: G) -> None:
    x, h = _f8(4, 6, granularity=granularity), torch.randn(4, 6) * 0.5
    scale = x.scale.clone()
    x.copy_(h)
    assert torch.equal(x.scale, scale)
    expected = (h * scale).clamp(-448, 448).to(E4M3)
    assert torch.equal(_bits(x.qdata), _bits(expected))
    other = _f8(4, 6, granularity=granularity, dtype=E5M2)  # another ctx: converted through its values
    x.copy_(other)
    torch.testing.assert_close(x.dequantize(), other.dequantize(), atol=0.1, rtol=0.1)


@pytest.mark.parametrize("granularity", LAYOUTS, ids=lambda g: g.value)
def test_set_aliases_a_float8_source(granularity: G) -> None:
    x, y = _f8(4, 6, granularity=granularity), _f8(4, 6, granularity=granularity, seed=1)
    assert x.set_(y) is x  # type: ignore[call-overload]  # the stubs list only storage overloads
    _assert_same_f8(x, y)
    assert x.qdata.untyped_storage().data_ptr() == y.qdata.untyped_storage().data_ptr()
    assert x.scale.untyped_storage().data_ptr() == y.scale.untyped_storage().data_ptr()


def test_set_to_itself_writes_no_inner_tensor() -> None:
    x = _f8(4, 6)
    versions = x.qdata._version, x.scale._version
    assert x.set_(x) is x  # type: ignore[call-overload]  # the stubs list only storage overloads
    assert (x.qdata._version, x.scale._version) == versions


@pytest.mark.parametrize(
    "source",
    [lambda: torch.randn(4, 6), lambda: _f8(4, 6, dtype=E5M2), lambda: _f8(4, 6, granularity=G.ROWWISE)],
    ids=["plain", "other_fp8_dtype", "other_granularity"],
)
def test_set_refuses_a_source_it_cannot_alias(source: Callable[[], Tensor]) -> None:
    with pytest.raises(UnsupportedError, match="set_ takes a Float8Tensor of the same ctx"):
        _f8(4, 6).set_(source())  # type: ignore[call-overload]  # the stubs list only storage overloads


def test_inplace_pointwise_writes_back_with_the_current_scale() -> None:
    x = _f8(4, 6, granularity=G.ROWWISE)
    expected = ((x.dequantize() * 0.5) * x.scale).clamp(-448, 448).to(E4M3)
    assert x.mul_(0.5) is x
    assert torch.equal(_bits(x.qdata), _bits(expected))
    plain = torch.ones(4, 6)
    plain.add_(x)  # a plain destination: computed on the dequantized value
    torch.testing.assert_close(plain, 1 + x.dequantize())


def test_to_original_is_differentiable_straight_through() -> None:
    x = _f8(4, 6)
    x.requires_grad_(True)
    torch.autograd.backward((x.to_original() * 3).sum())
    assert x.grad is not None and type(x.grad) is torch.Tensor
    torch.testing.assert_close(x.grad, torch.full((4, 6), 3.0))


def test_quantization_error_is_bounded() -> None:
    # One fp8 quantization has relative error <= 2^-4 (e4m3: 3 mantissa bits) of the largest value per scale.
    torch.manual_seed(0)
    x = torch.randn(16, 24)
    for granularity in G:
        err = (Float8Tensor.from_hp(x, granularity=granularity).dequantize() - x).abs().max()
        assert err <= x.abs().max() * 2**-4


def test_delayed_scale_constructor() -> None:
    x = torch.randn(4, 6)
    scale = amax_to_scale(torch.tensor(10.0), E4M3)
    f = Float8Tensor.from_hp_with_scale(x, scale, fp8_dtype=E4M3)
    assert f.granularity is G.TENSORWISE and f.scale is scale
    torch.testing.assert_close(f.dequantize(), x, atol=10 * 2**-4, rtol=0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"orig_dtype": torch.int32}, r"orig_dtype must be one of"),
        ({"fp8_dtype": E5M2}, r"qdata has dtype torch.float8_e4m3fn and fp8_dtype is torch.float8_e5m2"),
        ({"granularity": Granularity.TENSORWISE}, r"granularity must be a Float8Granularity"),
        ({"granularity": G.ROWWISE}, r"a rowwise scale for 2-d data must be a 2-d float32 tensor, got 0-d"),
    ],
)
def test_constructor_errors(fields: dict[str, object], message: str) -> None:
    x = _f8(4, 6)
    kwargs: dict[str, object] = {
        "orig_dtype": torch.float32,
        "fp8_dtype": E4M3,
        "granularity": G.TENSORWISE,
        **fields,
    }
    with pytest.raises(ProtocolError, match=message):
        Float8Tensor(x.qdata, x.scale, **kwargs)


# -- policies ----------------------------------------------------------------------------------------------------
def _plan_lines(x: Float8Tensor) -> str:
    return policies.describe(x, "x")


def test_mark_dynamic_tensorwise_scale_stays_static() -> None:
    x = _f8(4, 6)
    policies.mark_dynamic(x, 0, min=2, max=64)
    text = _plan_lines(x)
    assert "x.qdata (Tensor" in text and "x.scale (Tensor" in text
    plan = policies.plan_input(x, "x", policies.policy_for(x, "x"))
    outer, qdata, scale = plan.nodes()
    assert outer.sizes[0].dynamic and not outer.sizes[1].dynamic
    assert qdata.sizes[0].derived is not None and qdata.sizes[0].derived.source == outer.sizes[0].address
    assert scale.sizes == ()


def test_mark_dynamic_rowwise_scale_follows_rows() -> None:
    x = _f8(4, 6, granularity=G.ROWWISE)
    policies.mark_dynamic(x, (0, 1))
    plan = policies.plan_input(x, "x", policies.policy_for(x, "x"))
    outer, qdata, scale = plan.nodes()
    assert all(
        d.derived is not None and d.derived.source == o.address for d, o in zip(qdata.sizes, outer.sizes, strict=True)
    )
    row, reduced = scale.sizes
    assert row.derived is not None and row.derived.source == outer.sizes[0].address
    assert not reduced.dynamic and reduced.hint == 1


# -- the checker -------------------------------------------------------------------------------------------------
def _bitwise_same_values(x: Tensor, y: Tensor) -> bool:
    xs, ys = rules._leaves(x), rules._leaves(y)
    return len(xs) == len(ys) and all(
        a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(_bits(a), _bits(b)))
        for a, b in zip(xs, ys, strict=True)
    )


@pytest.mark.parametrize("factory", [example, rowwise_example], ids=["tensorwise", "rowwise"])
def test_checker_rules_pass(factory: Callable[[], Tensor]) -> None:
    report = check_subclass(factory)
    allowed = {"nested": Status.SKIP}
    if factory is rowwise_example:
        allowed["inplace_view.t_"] = Status.SKIP  # t_ would turn it colwise: UnsupportedError, by design
    for result in report.results:
        assert result.status is allowed.get(result.name, Status.PASS), str(report)
    assert check_subclass(example).ok


# -- the pipeline ------------------------------------------------------------------------------------------------
def _copy_and_matmul(x: Tensor, y: Tensor, w: Tensor) -> object:
    x.copy_(y)
    return torch.mm(x, w.t()), x.dequantize() * 2


@pytest.mark.parametrize("granularity", LAYOUTS, ids=lambda g: g.value)
def test_pipeline_input_mutated_by_copy(granularity: G) -> None:
    def make() -> tuple[Tensor, ...]:
        x, y = _f8(4, 6, granularity=granularity), _f8(4, 6, granularity=granularity, seed=1)
        return x, y, _f8(5, 6, granularity=granularity, seed=2)

    assert_matches_eager(_copy_and_matmul, make)


def _copy_hp_then_add(x: Tensor, h: Tensor) -> object:
    x.copy_(h)
    x.add_(1)
    return x.sum(dim=1)


def test_pipeline_input_mutated_from_high_precision() -> None:
    assert_matches_eager(_copy_hp_then_add, lambda: (_f8(4, 6, granularity=G.ROWWISE), torch.randn(4, 6)))


def _output_aliases_input(x: Tensor, y: Tensor) -> object:
    x.copy_(y)
    return x.t(), x[1:]


def test_pipeline_output_aliases_input() -> None:
    assert_matches_eager(_output_aliases_input, lambda: (_f8(4, 6), _f8(4, 6, seed=1)))


def _matmul_and_reduce(x: Tensor, w: Tensor) -> object:
    return torch.mm(x, w.t()), x.sum(dim=1)


def test_pipeline_mark_dynamic_rows_compiles_once() -> None:
    # __tensor_mark_dynamic__ ties qdata's rows and the rowwise scale's rows to the outer row symbol.
    compiled = subclassaot.compile(_matmul_and_reduce, backend="eager")
    w = _f8(5, 6, granularity=G.ROWWISE, seed=1)
    for rows in (4, 7, 9):
        x = _f8(rows, 6, granularity=G.ROWWISE)
        policies.mark_dynamic(x, 0)
        got, expected = compiled(x, w), _matmul_and_reduce(x, w)
        assert isinstance(got, tuple) and isinstance(expected, tuple)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e, atol=MM_TOL, rtol=MM_TOL)
    assert compiled.compile_count == 1


def test_strided_view_input_in_training_matches_eager() -> None:
    """A view input whose strides are not dense is run on a clone laid out like it; Float8Tensor's op table makes
    new_empty_strided a plain tensor, so its clone is a plain clone() (was a ProtocolError: fuzz seed 2711 #26)."""

    def f(x: Tensor) -> tuple[Tensor, ...]:
        return (x * 2,)

    def make() -> tuple[Tensor, ...]:
        base = example().requires_grad_()
        return (base.clone()[:, 1:2:2],)

    with torch.enable_grad():
        assert_matches_eager(f, make)
        assert_matches_eager(lambda x: (), make)


def test_write_through_an_expand_to_its_own_size_matches_eager() -> None:
    """Functionalization writes an expanded view back as base + sum_to(view - base), which float8 data has no
    kernels for (fuzz seed 2731, program 68: NotImplementedError "add_stub" on both entry points; then refused by
    name). An expand to the tensor's own size is traced as an alias, whose write-back is the written value itself
    (the comment above torch_internals._expands_to_itself): it now matches eager."""
    from tests.oracle import assert_matches_eager

    def f(x: Tensor) -> tuple[Tensor, ...]:
        x.expand(-1, 3, 4).unsqueeze(-2).zero_()
        return ()

    with torch.no_grad():
        assert_matches_eager(f, lambda: (example().reshape(2, 3, 4),))


@pytest.mark.parametrize("reference", [True, False], ids=["reference", "kernels"])
def test_dequantized_result_of_a_transposed_input_is_laid_out_as_the_fake_says(
    reference: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # found by the fuzzer (Float8Tensor inputs, seed 75200 #71): the reference dequantize kept a transposed input's
    # strides where the fake impl (and the Triton kernel) give a contiguous result; a compiled reshape traced as a
    # view of the fake then failed on the real result ("view size is not compatible")
    from subclasses.fp8 import kernels
    from subclasses.fp8.tensor import example
    from tests.oracle import assert_matches_eager

    if reference:
        monkeypatch.setattr(kernels, "_HAS_TRITON", False)  # the pure-torch twins run, as without Triton

    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * 3).reshape(2, 1, 12)[0:1]

    with torch.no_grad():
        assert_matches_eager(f, lambda: (example().transpose(1, 0),))


def _pair_example() -> Tensor:
    from subclasses.pair import example as pair_example

    return pair_example()


def _view_set_to_itself_then_viewed(x0: Tensor) -> tuple[Tensor]:
    t0 = x0.view((1, 2, 2))
    t0.set_(t0)  # type: ignore[call-overload]  # the stubs list only storage overloads
    return (t0.select(2, -1),)


@pytest.mark.parametrize(
    "factory",
    [example, lambda: torch.linspace(-3.0, 3.0, 24).reshape(4, 6), _pair_example],
    ids=["float8", "plain", "pair"],
)
def test_pipeline_view_set_to_itself_then_viewed(factory: Callable[[], Tensor]) -> None:
    # found by the fuzzer (Float8Tensor inputs, seed 123058 #147): Float8Tensor's set_ wrote the source's values back
    # instead of aliasing it, and the runtime's rebuild of the output (an alias of its base set_() to its own leaves,
    # Note [Output Regeneration]) then failed on the shape; a view of an input, viewed, set_() to itself, viewed again
    def make() -> tuple[Tensor]:
        with torch.enable_grad():
            return (factory()[0:2, 0:4:2],)

    with torch.no_grad():
        assert_matches_eager(_view_set_to_itself_then_viewed, make)


def _input_set_to_another(x: Tensor, y: Tensor) -> object:
    x.set_(y)  # type: ignore[call-overload]  # the stubs list only storage overloads
    return x.t(), y[1:]


def _view_kept_across_set(x: Tensor, y: Tensor) -> object:
    v = x[1:3]
    x.set_(y)  # type: ignore[call-overload]  # the stubs list only storage overloads
    return v, x


@pytest.mark.parametrize("f", [_input_set_to_another, _view_kept_across_set])
@pytest.mark.parametrize("granularity", LAYOUTS, ids=lambda g: g.value)
def test_pipeline_input_set_to_another_float8(granularity: G, f: Callable[[Tensor, Tensor], object]) -> None:
    # set_ aliases (a tensorwise scale, one object among the views, is set_() as every WrapperTensor's inner tensors)
    with torch.no_grad():
        assert_matches_eager(
            f, lambda: (_f8(4, 6, granularity=granularity), _f8(4, 6, granularity=granularity, seed=1))
        )
