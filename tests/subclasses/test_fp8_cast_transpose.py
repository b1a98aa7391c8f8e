"""The fused cast-transpose kernel against its reference.py twin, and Float8Linear with and without it.

Without a GPU the kernels run in Triton's interpreter (tests/conftest.py) and must match the reference bit for
bit. Shapes are not multiples of the tiles (INTERPRETER_CONFIG 16 x 32, GPU_CONFIG 64 x 64).
See Note [Fused Cast Transpose].
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import Tensor, nn

import subclassaot
from policies import mark_dynamic
from subclasses.fp8 import Float8Linear, ScalingType, cast_transpose, kernels, reference, to_float8
from subclasses.fp8.reference import Granularity

FP8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
gpu = pytest.mark.gpu
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _bits(t: Tensor) -> Tensor:
    return t.view(torch.uint8) if t.element_size() == 1 else t


def _assert_same(got: tuple[Tensor, ...], want: tuple[Tensor, ...]) -> None:
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype and g.shape == w.shape, f"output {i}: {g.dtype} {g.shape} vs {w.dtype} {w.shape}"
        assert torch.equal(_bits(g), _bits(w)), f"output {i} differs from reference.py"


@pytest.mark.parametrize("granularity", list(Granularity))
@pytest.mark.parametrize("fp8_dtype", FP8_DTYPES)
@pytest.mark.parametrize("hp_dtype", [torch.float32, torch.bfloat16])
def test_cast_transpose_matches_reference(
    hp_dtype: torch.dtype, fp8_dtype: torch.dtype, granularity: Granularity
) -> None:
    torch.manual_seed(0)
    x = (torch.randn(37, 53) * 10).to(hp_dtype)
    got = cast_transpose.cast_transpose_op(x, fp8_dtype, granularity.value)
    _assert_same(got, reference.cast_transpose(x, fp8_dtype, granularity))
    data, data_t, _ = got
    assert data_t.is_contiguous() and torch.equal(_bits(data_t), _bits(data.t()))


@pytest.mark.parametrize("fp8_dtype", FP8_DTYPES)
@pytest.mark.parametrize("history_len", [1, 5])
def test_cast_transpose_delayed_matches_reference(fp8_dtype: torch.dtype, history_len: int) -> None:
    torch.manual_seed(1)
    x = torch.randn(37, 53, dtype=torch.bfloat16) * 3
    history = torch.rand(history_len) * 8  # some entries above amax(x), so the history decides the scale
    before = history.clone()
    got = cast_transpose.cast_transpose_delayed_op(x, history, fp8_dtype)
    _assert_same(got, reference.cast_transpose_delayed(x, history, fp8_dtype))
    assert torch.equal(history, before), "the op is functional: the caller copies new_history in"
    assert got[3][0] == reference.amax(x)


@pytest.mark.parametrize("granularity", [*Granularity, "delayed"], ids=str)
def test_gpu_config_tiles_match_reference(granularity: Granularity | str) -> None:
    # GPU_CONFIG's 64 x 64 tiles in the interpreter, with ragged last tiles on both axes and a strided input.
    torch.manual_seed(2)
    x = (torch.randn(130, 70) * 5).t()
    cfg = kernels.GPU_CONFIG
    if isinstance(granularity, Granularity):
        got = cast_transpose.cast_transpose(x, torch.float8_e4m3fn, granularity, config=cfg)
        _assert_same(got, reference.cast_transpose(x, torch.float8_e4m3fn, granularity))
    else:
        history = torch.rand(16)
        got_d = cast_transpose.cast_transpose_delayed(x, history, torch.float8_e4m3fn, config=cfg)
        _assert_same(got_d, reference.cast_transpose_delayed(x, history, torch.float8_e4m3fn))


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (1, 1)])
@pytest.mark.parametrize("granularity", list(Granularity))
def test_cast_transpose_edge_shapes(shape: tuple[int, int], granularity: Granularity) -> None:
    x = torch.randn(shape)
    got = cast_transpose.cast_transpose_op(x, torch.float8_e4m3fn, granularity.value)
    _assert_same(got, reference.cast_transpose(x, torch.float8_e4m3fn, granularity))
    history = torch.tensor([2.0, 1.0])
    got_d = cast_transpose.cast_transpose_delayed_op(x, history, torch.float8_e5m2)
    _assert_same(got_d, reference.cast_transpose_delayed(x, history, torch.float8_e5m2))


def test_cast_transpose_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match=r"x must be a 2-D fp32 / bf16 / fp16 tensor; got 3-D.*reshape\(-1"):
        cast_transpose.cast_transpose_op(torch.randn(2, 3, 4), torch.float8_e4m3fn, "tensorwise")
    with pytest.raises(ValueError, match=r"granularity 'colwise' is not one of"):
        cast_transpose.cast_transpose_op(torch.randn(2, 3), torch.float8_e4m3fn, "colwise")
    with pytest.raises(ValueError, match=r"not a supported fp8 dtype"):
        cast_transpose.cast_transpose_op(torch.randn(2, 3), torch.float16, "tensorwise")
    with pytest.raises(ValueError, match=r"history has shape \(0,\).*length >= 1"):
        cast_transpose.cast_transpose_delayed_op(torch.randn(2, 3), torch.zeros(0), torch.float8_e4m3fn)


def test_opcheck() -> None:
    x = torch.randn(5, 7)
    for granularity in Granularity:
        args = (x, torch.float8_e4m3fn, granularity.value)
        torch.library.opcheck(torch.ops.subclassaot_fp8.cast_transpose.default, args)
    args_d = (x, torch.rand(4), torch.float8_e5m2)
    torch.library.opcheck(torch.ops.subclassaot_fp8.cast_transpose_delayed.default, args_d)


# -- Float8Linear: fused casts against the unfused baseline (see Note [Float8 Linear Recipe]) --------------------


def _model(scaling: ScalingType, *, fused_cast: bool, dtype: torch.dtype) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(24, 20), nn.ReLU(), nn.Linear(20, 9, bias=False)).to(dtype)
    return to_float8(model, scaling=scaling, history_len=4, fused_cast=fused_cast)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("scaling", list(ScalingType), ids=lambda s: s.value)
def test_fused_training_steps_match_the_unfused_path(scaling: ScalingType, dtype: torch.dtype) -> None:
    fused, baseline = _model(scaling, fused_cast=True, dtype=dtype), _model(scaling, fused_cast=False, dtype=dtype)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (fused, baseline)]
    for step in range(3):
        torch.manual_seed(100 + step)
        x = torch.randn(11, 24, dtype=dtype)
        x_fused, x_base = x.clone().requires_grad_(), x.clone().requires_grad_()
        out, out_base = fused(x_fused), baseline(x_base)
        assert torch.equal(out, out_base), f"step {step}: outputs differ"
        g = torch.randn_like(out)
        out.backward(g)
        out_base.backward(g)
        assert x_fused.grad is not None and x_base.grad is not None
        assert torch.equal(x_fused.grad, x_base.grad), f"step {step}: input grads differ"
        for (name, p), p_base in zip(fused.named_parameters(), baseline.parameters(), strict=True):
            assert p.grad is not None and p_base.grad is not None
            assert torch.equal(p.grad, p_base.grad), f"step {step}: {name}.grad differs"
        for (name, b), b_base in zip(fused.named_buffers(), baseline.buffers(), strict=True):
            assert torch.equal(b, b_base), f"step {step}: buffer {name} differs"
        for opt in optimizers:
            opt.step()
            opt.zero_grad()


def test_fused_backward_needs_no_transposed_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    # The scaled-matmul launcher copies an operand that is not K-major; with the fused casts none is.
    seen: list[tuple[bool, bool]] = []
    launcher = kernels.scaled_mm

    def recording(a: Tensor, b: Tensor, *args: object, **kwargs: object) -> Tensor:
        seen.append((a.stride(1) == 1, b.stride(0) == 1))
        return launcher(a, b, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kernels, "scaled_mm", recording)
    linear = Float8Linear(24, 20)
    x = torch.randn(11, 24, requires_grad=True)
    linear(x).sum().backward()
    assert seen == [(True, True)] * 3


def test_compiled_fused_linear_with_a_dynamic_batch() -> None:
    # The fake impls give data_t's shape from x's symbolic sizes: one compile serves every batch size.
    model = _model(ScalingType.DELAYED, fused_cast=True, dtype=torch.float32)
    eager = copy.deepcopy(model)
    compiled = subclassaot.compile(model, backend="eager")
    for batch in (5, 9, 13):
        x = torch.randn(batch, 24)
        mark_dynamic(x, 0)
        out, want = compiled(x), eager(x)
        assert torch.equal(out, want), batch
        torch.autograd.backward([out, want], [torch.ones_like(out), torch.ones_like(want)])
        for b, b_eager in zip(model.buffers(), eager.buffers(), strict=True):
            assert torch.equal(b, b_eager), batch
    assert compiled.compile_count == 1, compiled.recompile_reasons


def test_extra_repr_names_the_baseline() -> None:
    assert "fused_cast=False" in repr(Float8Linear(4, 4, fused_cast=False))
    assert "fused_cast" not in repr(Float8Linear(4, 4))


@gpu
@requires_cuda
@pytest.mark.parametrize("granularity", list(Granularity))
@pytest.mark.parametrize("shape", [(1031, 515), (64, 4096), (3, 20000)], ids=str)
def test_compiled_cast_transpose_matches_reference_on_cuda(granularity: Granularity, shape: tuple[int, int]) -> None:
    # Compiled Triton, GPU_CONFIG's tiles, sizes that are and are not multiples of them (a column count that is a
    # multiple of 16 once made a one-launch rowwise kernel write wrong data_t bytes on an H200 only); the reference
    # runs on the GPU too, and the kernels must match it to the bit.
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16) * 10
    assert kernels.kernel_path(x.device).value == "compiled"
    got = cast_transpose.cast_transpose_op(x, torch.float8_e4m3fn, granularity.value)
    want = reference.cast_transpose(x, torch.float8_e4m3fn, granularity)
    for g, w in zip(got, want, strict=True):
        assert torch.equal(_bits(g), _bits(w))
    history = torch.rand(16, device="cuda")
    got_d = cast_transpose.cast_transpose_delayed_op(x, history, torch.float8_e5m2)
    want_d = reference.cast_transpose_delayed(x, history, torch.float8_e5m2)
    for g, w in zip(got_d, want_d, strict=True):
        assert torch.equal(_bits(g), _bits(w))


@gpu
@requires_cuda
@pytest.mark.parametrize("scaling", list(ScalingType), ids=lambda s: s.value)
def test_fused_training_step_matches_unfused_on_cuda(scaling: ScalingType) -> None:
    # Compiled kernels: the fused casts give the unfused step's outputs and gradients to the bit (speed is
    # benchmarks/fp8.py's training table, not a test's).
    base = nn.Linear(4096, 4096, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)

    def step(module: nn.Module) -> list[torch.Tensor]:
        xi = x.clone().requires_grad_()
        out = module(xi)
        out.sum().backward()
        return [out, xi.grad, *(p.grad for p in module.parameters())]

    fused = Float8Linear.from_linear(copy.deepcopy(base), scaling=scaling)
    unfused = Float8Linear.from_linear(copy.deepcopy(base), scaling=scaling, fused_cast=False)
    for got, want in zip(step(fused), step(unfused), strict=True):
        assert torch.equal(got, want)
