"""torchao 0.18's prototype CPU subclasses through both entries, compared with eager by the parity oracle:
prototype.mx_formats' MXTensor and NVFP4Tensor, prototype.quantization's Int4OpaqueTensor, GGUFQuantizedTensor and
CodebookQuantizedTensor, prototype.quantized_training's Int8MixedPrecisionTrainingLinearWeight and
BitNetTrainingLinearWeight, after their tests (test_mx_tensor.py, test_nvfp4_tensor.py, test_int4_opaque_tensor.py,
test_gguf.py, test_codebook_quantized_tensor.py, test_quantized_training.py): quantize_ on a small MLP, and the
tensors' own ops (quantize, dequantize, views, clone, copy_, mm and linear).

MXTensor.to_mx with float8 elements leaves out its saturating clamp when `torch.compiler.is_compiling()` (it expects
Triton's saturating cast): our trace takes that branch as torch.compile does, so on CPU an overflowing element is
inf where eager saturates; torch.compile(backend="aot_eager") gives the same (tested as that, not as eager).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import cast

import pytest
import torch
import torch._dynamo
from torch import nn

pytest.importorskip("torchao")

# torchao logs (harmless) load failures of its optional _C_mxfp8 / cutlass kernels on CPU builds.
logging.getLogger("torchao").setLevel(logging.ERROR)

from torchao.prototype.mx_formats.inference_workflow import NVFP4WeightOnlyConfig  # noqa: E402
from torchao.prototype.mx_formats.mx_tensor import MXTensor  # noqa: E402
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor  # noqa: E402
from torchao.prototype.quantization.codebook.codebook_quantized_tensor import CodebookWeightOnlyConfig  # noqa: E402
from torchao.prototype.quantization.gguf.api import GGUFWeightOnlyConfig  # noqa: E402
from torchao.prototype.quantization.int4.inference_workflow import PrototypeInt4WeightOnlyConfig  # noqa: E402
from torchao.prototype.quantized_training.bitnet import BitNetTrainingConfig  # noqa: E402
from torchao.prototype.quantized_training.int8_mixed_precision import Int8MixedPrecisionTrainingConfig  # noqa: E402
from torchao.quantization import quantize_  # noqa: E402

import subclassaot  # noqa: E402
from subclassaot.errors import UnsupportedError  # noqa: E402
from tests.oracle import CompileFn, assert_matches_eager  # noqa: E402

T = torch.Tensor
_BF16 = torch.bfloat16
_Program = tuple[Callable[..., object], Callable[[], tuple[object, ...]]]


def _dynamo_compile(fn: Callable[..., object], *, backend: object = "eager") -> Callable[..., object]:
    torch._dynamo.reset()
    compiled: Callable[..., object] = torch.compile(fn, backend="subclassaot", options={"backend": str(backend)})
    return compiled


ENTRIES: dict[str, CompileFn | None] = {"direct": None, "dynamo": _dynamo_compile}


def _other_mlp(config: Callable[[], object], dtype: torch.dtype = torch.float32) -> nn.Module:
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 128)).to(dtype)
    quantize_(mlp, config())
    return mlp


def _mlp_program(config: Callable[[], object], dtype: torch.dtype, training: bool) -> _Program:
    return _other_mlp(config, dtype), lambda: (torch.randn(4, 256, dtype=dtype, requires_grad=training),)


def _mx(hp: torch.dtype = torch.float32, elem: torch.dtype = torch.float8_e4m3fn) -> T:
    return MXTensor.to_mx(torch.randn(64, 64, dtype=hp), elem, 32)


_FP4 = torch.float4_e2m1fn_x2


def _nvfp4(hp: torch.dtype = torch.float32) -> T:
    return NVFP4Tensor.to_nvfp4(torch.randn(64, 64, dtype=hp))


def mx_views(m: T) -> object:  # test_mx_tensor's view/slice/select/t
    return m.t(), m[0:32], m.view(64, 64), m[1]


def nvfp4_row_views(m: T) -> object:  # test_nvfp4_tensor's view semantics (rows: views of the inner tensors)
    return m.t(), m[0:32], m.view(64, 64)


_OTHER: dict[str, Callable[[], _Program]] = {
    "nvfp4_weight_only_mlp_bf16": lambda: _mlp_program(NVFP4WeightOnlyConfig, _BF16, False),
    "int4_opaque_tinygemm_mlp_bf16": lambda: _mlp_program(
        lambda: PrototypeInt4WeightOnlyConfig(set_inductor_config=False), _BF16, False
    ),
    "int4_opaque_hqq_mlp_bf16": lambda: _mlp_program(
        lambda: PrototypeInt4WeightOnlyConfig(int4_choose_qparams_algorithm="hqq", set_inductor_config=False),
        _BF16,
        False,
    ),
    "gguf_weight_only_mlp": lambda: _mlp_program(GGUFWeightOnlyConfig, torch.float32, False),
    "codebook_weight_only_mlp": lambda: _mlp_program(CodebookWeightOnlyConfig, torch.float32, False),
    "int8_mixed_precision_training": lambda: _mlp_program(Int8MixedPrecisionTrainingConfig, torch.float32, True),
    "bitnet_training": lambda: _mlp_program(BitNetTrainingConfig, torch.float32, True),
    "mx_to_mx_from_mx_e4m3": lambda: (
        lambda x: MXTensor.to_mx(x, torch.float8_e4m3fn, 32).dequantize(torch.float32),
        lambda: (torch.randn(64, 64),),
    ),
    "mx_to_mx_fp4": lambda: (lambda x: MXTensor.to_mx(x, _FP4, 32), lambda: (torch.randn(64, 64),)),
    "mx_to_mx_bf16_input": lambda: (
        lambda x: MXTensor.to_mx(x, torch.float8_e4m3fn, 32),
        lambda: (torch.randn(64, 64, dtype=_BF16),),
    ),
    "mx_fp4_views": lambda: (lambda m: (m.t(), m[0:32]), lambda: (_mx(elem=_FP4),)),
    "mx_fp4_dequantize": lambda: (lambda m: m.dequantize(torch.float32), lambda: (_mx(elem=_FP4),)),
    "mx_select_dequantized": lambda: (lambda m: m[3].dequantize(torch.float32), lambda: (_mx(),)),
    "mx_dequantize_bf16": lambda: (lambda m: m.dequantize(_BF16), lambda: (_mx(),)),
    "mx_views": lambda: (mx_views, lambda: (_mx(),)),
    "mx_clone_and_sum": lambda: (lambda m: (m.clone(), m.dequantize(torch.float32).sum()), lambda: (_mx(),)),
    "mx_mm_emulated_bf16": lambda: (lambda a, b: torch.mm(a, b.t()), lambda: (_mx(_BF16), _mx(_BF16))),
    "nvfp4_to_nvfp4": lambda: (NVFP4Tensor.to_nvfp4, lambda: (torch.randn(64, 64),)),
    "nvfp4_round_trip_per_tensor_scale": lambda: (
        lambda x, s: NVFP4Tensor.to_nvfp4(x, per_tensor_scale=s).dequantize(torch.float32),
        lambda: (torch.randn(64, 64), torch.tensor(0.01)),
    ),
    "nvfp4_row_views": lambda: (nvfp4_row_views, lambda: (_nvfp4(),)),
    "nvfp4_column_slice_dequantized": lambda: (lambda m: m[:, 0:32].dequantize(torch.float32), lambda: (_nvfp4(),)),
    "nvfp4_to_copy": lambda: (lambda m: m.to(_BF16), lambda: (_nvfp4(),)),
    "nvfp4_t_dequantized": lambda: (lambda m: m.t().dequantize(torch.float32), lambda: (_nvfp4(),)),
    "nvfp4_clone": lambda: (lambda m: m.clone(), lambda: (_nvfp4(),)),
    "nvfp4_copy_": lambda: (lambda a, b: a.copy_(b), lambda: (_nvfp4(), _nvfp4())),
    "nvfp4_weight_only_static_scale_mlp_bf16": lambda: _mlp_program(
        lambda: NVFP4WeightOnlyConfig(use_dynamic_per_tensor_scale=False), _BF16, False
    ),
    "nvfp4_linear_bf16": lambda: (
        nn.functional.linear,
        lambda: (torch.randn(8, 64, dtype=_BF16), _nvfp4(_BF16)),
    ),
}
_OTHER_IN_CI = {"int4_opaque_tinygemm_mlp_bf16", "bitnet_training", "mx_views", "nvfp4_row_views"}


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("name", [n if n in _OTHER_IN_CI else pytest.param(n, marks=pytest.mark.slow) for n in _OTHER])
def test_other_torchao_subclass_program_matches_eager(name: str, entry: str) -> None:
    fn, make = _OTHER[name]()
    with torch.set_grad_enabled(name.endswith("training")):
        assert_matches_eager(fn, make, compile_fn=ENTRIES[entry])


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_nvfp4_column_slice_returned_is_refused(entry: str) -> None:
    """NVFP4Tensor's column slice is a wrapper-level view of its input (return_and_correct_aliasing) whose scale is
    a copy (`flatten()` of a column slice) and whose data a view: no replay of the view chain rebuilds it, so it is
    refused, naming the op that copied where its schema declares a view (it was refused as a view of an intermediate
    that `.data =` or set_() moved). torch.compile itself fails on it: the class lacks the as_strided it calls."""
    compile_fn = ENTRIES[entry] or functools.partial(subclassaot.compile, backend="eager")
    compiled = compile_fn(lambda m: m[:, 0:32])
    with pytest.raises(UnsupportedError, match=r"out\[0\] is a view whose .*__torch_dispatch__ .* by aten\.flatten"):
        compiled(_nvfp4())


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_mx_float8_e5m2_takes_torch_compiles_unclamped_branch(entry: str) -> None:
    """to_mx leaves out its clamp under `torch.compiler.is_compiling()`: an element that overflows e5m2 after
    scaling is inf, as under torch.compile(backend="aot_eager"), where eager saturates it to 57344."""

    def fn(x: T) -> T:
        return MXTensor.to_mx(x, torch.float8_e5m2, 32).dequantize(torch.float32)

    compile_fn = ENTRIES[entry] or functools.partial(subclassaot.compile, backend="eager")
    x = torch.full((1, 32), 1.95)  # (scaled to 1.95 * 2**15, past e5m2's largest finite 57344)
    torch._dynamo.reset()
    theirs = torch.compile(fn, backend="aot_eager")(x)
    assert torch.equal(fn(x), torch.full((1, 32), 1.75))
    assert torch.equal(cast(T, compile_fn(fn)(x)), theirs) and bool(theirs.isinf().all())
