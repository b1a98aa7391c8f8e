"""The FP8 kernels against their pure-torch twins, at sizes that are not multiples of the block sizes.

Without a GPU the kernels run in Triton's interpreter (tests/conftest.py); the launchers must then match the
reference bit for bit, since both do the same fp32 arithmetic and torch does the final cast (see
Note [Narrow Casts In The Interpreter]). The matmul differs only by accumulation order.
"""

import dataclasses
import importlib.util
from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from subclasses.fp8 import kernels, reference
from subclasses.fp8.reference import Granularity, fp8_max
from subclasses.kernel_dispatch import KernelPath

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
CPU = torch.device("cpu")
gpu = pytest.mark.gpu
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _bits(t: Tensor) -> Tensor:
    return t.view(torch.uint8)


def _assert_quantize_matches(x: Tensor, fp8_dtype: torch.dtype, granularity: Granularity) -> tuple[Tensor, Tensor]:
    data, scale = kernels.quantize_op(x, fp8_dtype, granularity.value)
    ref_data, ref_scale = reference.quantize(x, fp8_dtype, granularity)
    assert data.dtype == fp8_dtype and data.shape == x.shape
    assert scale.dtype == torch.float32 and scale.shape == ref_scale.shape
    assert torch.equal(scale, ref_scale)
    assert torch.equal(_bits(data), _bits(ref_data))
    return data, scale


def test_kernel_path_says_which_implementation_runs() -> None:
    has_triton = importlib.util.find_spec("triton") is not None
    path = kernels.kernel_path(CPU)
    if has_triton and not torch.cuda.is_available():
        assert path is KernelPath.INTERPRETER  # conftest set TRITON_INTERPRET=1: the kernels themselves ran
    elif not has_triton:
        assert path is KernelPath.REFERENCE


def test_without_triton_the_reference_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "_HAS_TRITON", False)  # what an ImportError of triton leaves behind
    assert kernels.kernel_path(CPU) is KernelPath.REFERENCE
    _assert_quantize_matches(torch.randn(5, 7), torch.float8_e4m3fn, Granularity.ROWWISE)


def test_fp8_max() -> None:
    assert fp8_max(torch.float8_e4m3fn) == 448.0
    assert fp8_max(torch.float8_e5m2) == 57344.0
    with pytest.raises(ValueError, match=r"not a supported fp8 dtype.*float8_e4m3fn"):
        fp8_max(torch.float16)


@pytest.mark.parametrize("granularity", list(Granularity))
@pytest.mark.parametrize("fp8_dtype", FP8_DTYPES)
@pytest.mark.parametrize("hp_dtype", [torch.float32, torch.bfloat16])
def test_quantize_matches_reference(hp_dtype: torch.dtype, fp8_dtype: torch.dtype, granularity: Granularity) -> None:
    torch.manual_seed(0)
    x = (torch.randn(37, 53) * 10).to(hp_dtype)
    data, scale = _assert_quantize_matches(x, fp8_dtype, granularity)
    expected_scale_shape = (37, 1) if granularity is Granularity.ROWWISE else ()
    assert scale.shape == expected_scale_shape


@pytest.mark.parametrize("shape", [(5, 300), (3, 7, 11), (41,), ()])
@pytest.mark.parametrize("granularity", list(Granularity))
def test_quantize_shapes(shape: tuple[int, ...], granularity: Granularity) -> None:
    # (5, 300): several column blocks per row; (3, 7, 11) and (41,): leading dims flattened; (): tensorwise only.
    x = torch.randn(shape) * 3
    if granularity is Granularity.ROWWISE and not shape:
        with pytest.raises(ValueError, match="rowwise scaling needs a tensor with at least one dim"):
            kernels.quantize_op(x, torch.float8_e4m3fn, granularity.value)
        return
    _assert_quantize_matches(x, torch.float8_e4m3fn, granularity)


@pytest.mark.parametrize("granularity", list(Granularity))
def test_quantize_all_zero_gives_finite_scale(granularity: Granularity) -> None:
    data, scale = _assert_quantize_matches(torch.zeros(6, 9), torch.float8_e4m3fn, granularity)
    assert torch.isfinite(scale).all()
    assert (data.float() == 0).all()


@pytest.mark.parametrize("fp8_dtype", FP8_DTYPES)
@pytest.mark.parametrize("granularity", list(Granularity))
def test_quantize_saturates_at_fp8_max(fp8_dtype: torch.dtype, granularity: Granularity) -> None:
    # The element with |x| == amax lands on +-fp8_max exactly, never on NaN or inf, whatever the magnitude (as
    # long as amax >= EPS: below it the scale is capped and nothing saturates).
    x = torch.tensor([[3.0e38, -1.0, 0.5], [-1.0e-10, 2.0e-11, 0.0], [7.0, -7.0, 1.0]])
    data, _ = _assert_quantize_matches(x, fp8_dtype, granularity)
    values = data.float()
    assert torch.isfinite(values).all()
    assert values.abs().max() == fp8_max(fp8_dtype)
    if granularity is Granularity.ROWWISE:
        assert (values.abs().amax(dim=1) == fp8_max(fp8_dtype)).all()


def test_quantize_empty() -> None:
    data, scale = _assert_quantize_matches(torch.empty(0, 5), torch.float8_e5m2, Granularity.TENSORWISE)
    assert data.shape == (0, 5) and torch.isfinite(scale)
    _assert_quantize_matches(torch.empty(4, 0), torch.float8_e5m2, Granularity.ROWWISE)


def test_quantize_rejects_bad_arguments() -> None:
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match=r"granularity 'columnwise' is not one of \['tensorwise', 'rowwise'\]"):
        kernels.quantize_op(x, torch.float8_e4m3fn, "columnwise")
    with pytest.raises(ValueError, match="not a supported fp8 dtype"):
        kernels.quantize_op(x, torch.int8, "rowwise")
    with pytest.raises(TypeError, match=r"quantize: x has dtype torch.float64.*Cast first"):
        kernels.quantize_op(x.double(), torch.float8_e4m3fn, "rowwise")


@pytest.mark.parametrize("fp8_dtype", FP8_DTYPES)
@pytest.mark.parametrize("shape", [(37, 53), (2049,), (3, 0)])
def test_cast_with_scale_matches_reference(fp8_dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    # Delayed scaling's cast: a given scale, values beyond fp8_max / scale saturate.
    x = torch.randn(shape) * 30
    scale = torch.tensor(fp8_max(fp8_dtype) / 40.0)
    data = kernels.cast_with_scale_op(x, scale, fp8_dtype)
    assert data.dtype == fp8_dtype and data.shape == x.shape
    assert torch.equal(_bits(data), _bits(reference.cast_with_scale(x, scale, fp8_dtype)))
    with pytest.raises(ValueError, match=r"cast_with_scale: scale has shape \(37, 1\).*expected an fp32 scalar"):
        kernels.cast_with_scale_op(torch.randn(37, 53), torch.ones(37, 1), fp8_dtype)


def test_opcheck_cast_with_scale() -> None:
    args = (torch.randn(5, 7), torch.tensor(3.0), torch.float8_e4m3fn)
    torch.library.opcheck(torch.ops.subclassaot_fp8.cast_with_scale.default, args, test_utils=WITHOUT_SCHEMA)


def test_amax_matches_reference() -> None:
    torch.manual_seed(0)
    x = torch.randn(3001)  # three blocks of 1024, the last one ragged
    x[2999] = -50.0
    assert torch.equal(kernels.amax_op(x), reference.amax(x))
    assert kernels.amax_op(x).item() == 50.0
    assert kernels.amax_op(torch.zeros(0)).item() == 0.0


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("granularity", list(Granularity))
def test_dequantize_matches_reference(granularity: Granularity, out_dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    data, scale = reference.quantize(torch.randn(37, 53), torch.float8_e4m3fn, granularity)
    out = kernels.dequantize_op(data, scale, out_dtype)
    assert out.dtype == out_dtype
    assert torch.equal(out, reference.dequantize(data, scale, out_dtype))


def test_dequantize_rejects_a_scale_of_the_wrong_shape() -> None:
    data = torch.zeros(4, 5).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match=r"scale has shape \(4,\) for data of shape \(4, 5\); expected \(\)"):
        kernels.dequantize_op(data, torch.ones(4), torch.float32)


def test_dequantize_gradient_matches_reference() -> None:
    torch.manual_seed(0)
    data, scale = reference.quantize(torch.randn(6, 9), torch.float8_e4m3fn, Granularity.ROWWISE)
    grad_out = torch.randn(6, 9)
    scale_k = scale.clone().requires_grad_()
    scale_r = scale.clone().requires_grad_()
    (grad_k,) = torch.autograd.grad(kernels.dequantize_op(data, scale_k, torch.float32), scale_k, grad_out)
    (grad_r,) = torch.autograd.grad(reference.dequantize(data, scale_r, torch.float32), scale_r, grad_out)
    torch.testing.assert_close(grad_k, grad_r)


def _mm_scales(m: int, n: int, a_rowwise: bool, b_colwise: bool) -> tuple[Tensor, Tensor]:
    scale_a = torch.rand(m, 1) + 0.5 if a_rowwise else torch.tensor(1.7)
    scale_b = torch.rand(1, n) + 0.5 if b_colwise else torch.tensor(0.3)
    return scale_a, scale_b


@pytest.mark.parametrize("fp8_dot", [False, True])
@pytest.mark.parametrize(("a_rowwise", "b_colwise"), [(False, False), (True, True), (True, False)])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
def test_scaled_mm_matches_reference(a_rowwise: bool, b_colwise: bool, fp8_dot: bool, out_dtype: torch.dtype) -> None:
    # 70 x 53 @ 53 x 29 against 64 x 64 x 32 tiles: ragged in every dim. fp8_dot=True runs the GPU's fp8 tile
    # product through the interpreter too.
    torch.manual_seed(0)
    a = torch.randn(70, 53).to(torch.float8_e4m3fn)
    b = torch.randn(53, 29).to(torch.float8_e5m2)
    scale_a, scale_b = _mm_scales(70, 29, a_rowwise, b_colwise)
    out = kernels.scaled_mm(a, b, scale_a, scale_b, out_dtype, fp8_dot=fp8_dot)
    expected = reference.scaled_mm(a, b, scale_a, scale_b, out_dtype)
    assert out.dtype == out_dtype
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_scaled_mm_rejects_mismatched_shapes() -> None:
    a = torch.zeros(4, 5).to(torch.float8_e4m3fn)
    b = torch.zeros(6, 3).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match=r"a.shape\[1\] != b.shape\[0\]"):
        kernels.scaled_mm_op(a, b, torch.tensor(1.0), torch.tensor(1.0), torch.float32)
    with pytest.raises(ValueError, match=r"scale_b has shape \(5,\).*expected fp32 of shape \(\) or \(1, 3\)"):
        kernels.scaled_mm_op(a, b[:5], torch.tensor(1.0), torch.ones(5), torch.float32)


def test_opcheck_amax_and_quantize() -> None:
    x = torch.randn(5, 7)
    torch.library.opcheck(torch.ops.subclassaot_fp8.amax.default, (x,))
    for granularity in Granularity:
        torch.library.opcheck(torch.ops.subclassaot_fp8.quantize.default, (x, torch.float8_e4m3fn, granularity.value))


# opcheck's test_schema (SchemaCheckMode) compares inputs before and after the call with arithmetic that torch does
# not implement for fp8 on the CPU ("mul_cpu_reduced_float" not implemented for 'Float8_e5m2'), so ops taking fp8
# inputs skip it and `_assert_pure` checks the same two properties: no input mutated, no output aliasing an input.
WITHOUT_SCHEMA = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


def _assert_pure(op: Callable[..., Tensor], *inputs: Tensor) -> None:
    before = [t.view(torch.uint8).clone() if t.element_size() == 1 else t.clone() for t in inputs]
    out = op(*inputs, torch.float32)
    for t, saved in zip(inputs, before, strict=True):
        assert torch.equal(t.view(saved.dtype), saved)
        assert out.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()


def test_opcheck_dequantize() -> None:
    data, scale = reference.quantize(torch.randn(5, 7), torch.float8_e5m2, Granularity.ROWWISE)
    torch.library.opcheck(
        torch.ops.subclassaot_fp8.dequantize.default,
        (data, scale.requires_grad_(), torch.bfloat16),
        test_utils=WITHOUT_SCHEMA,
    )
    _assert_pure(kernels.dequantize_op, data, scale)


def test_opcheck_scaled_mm() -> None:
    a = torch.randn(5, 7).to(torch.float8_e4m3fn)
    b = torch.randn(7, 3).to(torch.float8_e4m3fn)
    scale_a, scale_b = _mm_scales(5, 3, True, True)
    args = (a, b, scale_a, scale_b, torch.float32)
    torch.library.opcheck(torch.ops.subclassaot_fp8.scaled_mm.default, args, test_utils=WITHOUT_SCHEMA)
    _assert_pure(kernels.scaled_mm_op, a, b, scale_a, scale_b)


@gpu
@requires_cuda
@pytest.mark.parametrize("granularity", list(Granularity))
def test_compiled_quantize_matches_reference_on_cuda(granularity: Granularity) -> None:
    # The GPU's division and cast may differ from the CPU reference by an ulp, so compare the dequantized values.
    x = torch.randn(37, 53, device="cuda") * 10
    assert kernels.kernel_path(x.device) is KernelPath.COMPILED
    data, scale = kernels.quantize_op(x, torch.float8_e4m3fn, granularity.value)
    ref_data, ref_scale = reference.quantize(x, torch.float8_e4m3fn, granularity)
    torch.testing.assert_close(scale, ref_scale)
    torch.testing.assert_close(data.float() / scale, ref_data.float() / ref_scale, rtol=0.07, atol=1e-6)


# GPU_CONFIG's tiles in the interpreter: its one-pass rowwise quantize (several rows per program, columns not a
# power of two), its K tiles with and without a ragged last one (EVEN_K), grouped tile order, the tensorwise
# tile shape and the reversed tensorwise cast compute what the reference computes. See Note [FP8 Launch Configs].
@pytest.mark.parametrize("granularity", list(Granularity))
def test_gpu_config_quantize_matches_reference(granularity: Granularity) -> None:
    x = torch.randn(19, 300) * 7
    data, scale = kernels.quantize(x, torch.float8_e4m3fn, granularity, config=kernels.GPU_CONFIG)
    ref_data, ref_scale = reference.quantize(x, torch.float8_e4m3fn, granularity)
    assert torch.equal(scale, ref_scale) and torch.equal(_bits(data), _bits(ref_data))


@pytest.mark.parametrize("k", [256, 200])
@pytest.mark.parametrize(("a_rowwise", "b_colwise"), [(False, False), (True, True)])
def test_gpu_config_scaled_mm_matches_reference(k: int, a_rowwise: bool, b_colwise: bool) -> None:
    torch.manual_seed(1)
    a = torch.randn(130, k).to(torch.float8_e4m3fn)
    b = torch.randn(k, 270).to(torch.float8_e4m3fn)  # row-major: the launcher makes it K-major first
    scale_a, scale_b = _mm_scales(130, 270, a_rowwise, b_colwise)
    out = kernels.scaled_mm(a, b, scale_a, scale_b, torch.float32, config=kernels.GPU_CONFIG)
    torch.testing.assert_close(out, reference.scaled_mm(a, b, scale_a, scale_b, torch.float32), rtol=1e-5, atol=1e-5)


def test_launch_config_rejects_imprecise_accumulation_beyond_a_tile() -> None:
    with pytest.raises(ValueError, match=r"mm_max_imprecise_acc=256 must be None or in \[1, mm_block_k=128\]"):
        dataclasses.replace(kernels.GPU_CONFIG, mm_max_imprecise_acc=256)
