"""torchao 0.18's tensor subclasses through subclassaot.compile and check_subclass, compared with eager on CPU.

Float8 training (`convert_to_float8_training`: Float8TrainingTensor intermediates, torch._scaled_mm, which eager runs
on CPU), NF4Tensor (QLoRA's `linear_nf4`, frozen NF4 weight, trainable activations and adapters) and Int8Tensor
(`quantize_(m, Int8WeightOnlyConfig())`): outputs and their types, inputs after the call, `._base` of views, and
gradients, by the parity oracle, on a first call and through the cache.
"""

from __future__ import annotations

import copy
import logging

import pytest
import torch
from torch import nn

pytest.importorskip("torchao")

# torchao logs (harmless) load failures of its optional _C_mxfp8 / cutlass kernels on CPU builds.
logging.getLogger("torchao").setLevel(logging.ERROR)

from torchao.float8 import convert_to_float8_training  # noqa: E402
from torchao.float8.float8_training_tensor import (  # noqa: E402
    Float8TrainingTensor,
    GemmInputRole,
    LinearMMConfig,
    hp_tensor_and_scale_to_float8,
)
from torchao.quantization import Int8WeightOnlyConfig, quantize_  # noqa: E402
from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import NF4Tensor, linear_nf4, to_nf4  # noqa: E402

import subclassaot  # noqa: E402
from subclassaot.tools.checker import CheckReport, Status  # noqa: E402
from tests.oracle import assert_matches_eager  # noqa: E402

T = torch.Tensor


def _no_pipeline_failures(report: CheckReport) -> None:
    """The pipeline's own rules (compiled mutations, aliasing, recompiles, torch's aot_eager) never FAIL; protocol
    rules may (torchao does not use return_and_correct_aliasing), and ops the class lacks are SKIPs."""
    failed = [r for r in report.failed() if r.name.startswith(("pipeline.", "torch.compile."))]
    assert failed == [], str(report)


# --- Float8 training ----------------------------------------------------------------------------------------------


def _float8_mlp() -> nn.Module:
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16), nn.GELU())
    convert_to_float8_training(mlp)
    assert type(mlp[0]).__name__ == "Float8Linear"
    return mlp


def test_float8_mlp_three_training_steps_match_eager() -> None:
    # Three calls, gradients accumulating on both sides: parameters and their .grad compared after each.
    compiled = assert_matches_eager(
        _float8_mlp(), lambda: (torch.randn(8, 32, requires_grad=True),), calls=3, backend="eager"
    )
    assert isinstance(compiled, subclassaot.CompiledModule) and compiled.compile_count == 1


def test_float8_mlp_inference_matches_eager() -> None:
    with torch.no_grad():
        assert_matches_eager(_float8_mlp(), lambda: (torch.randn(8, 32),), calls=2)


def test_float8_linear_output_view_keeps_eager_base_in_training() -> None:
    # Float8Linear's Function returns a reshape of its own mm result: a view in eager (Note [Output Regeneration]).
    torch.manual_seed(0)
    linear = convert_to_float8_training(nn.Sequential(nn.Linear(32, 16, bias=False)))
    assert_matches_eager(linear, lambda: (torch.randn(8, 32, requires_grad=True),), calls=1)


def _float8_tensor() -> T:
    hp = torch.randn(4, 8)
    return hp_tensor_and_scale_to_float8(
        hp, torch.tensor(2.0), torch.float8_e4m3fn, LinearMMConfig(), GemmInputRole.INPUT
    )


def float8_views(a: T) -> object:
    return a.t(), a.view(8, 4), a[1:]


def test_float8_tensor_views_keep_eager_base() -> None:
    # torch.compile loses `._base` of these views; eager and subclassaot keep it (views of the input).
    compiled = assert_matches_eager(float8_views, lambda: (_float8_tensor(),), calls=2)
    out = compiled(a := _float8_tensor())
    assert isinstance(out, tuple) and all(type(v) is Float8TrainingTensor and v._base is a for v in out)


def test_float8_tensor_to_original_precision_matches_eager() -> None:
    assert_matches_eager(lambda a: a.to_original_precision() * 2, lambda: (_float8_tensor(),), calls=2)


def test_float8_tensor_checker_pipeline_rules_hold() -> None:
    _no_pipeline_failures(subclassaot.check_subclass(_float8_tensor))


# --- NF4 (QLoRA) --------------------------------------------------------------------------------------------------


def _nf4() -> T:
    return to_nf4(torch.randn(128, 128))  # default block sizes (64, 256): 128 * 128 / 64 scalers, a multiple of 256


def qlora(x: T, w: T, a: T, b: T) -> object:
    return linear_nf4(x, w) + (x @ a) @ b


def _qlora_inputs() -> tuple[object, ...]:
    return (
        torch.randn(4, 128, requires_grad=True),
        _nf4(),
        torch.randn(128, 8, requires_grad=True),
        torch.randn(8, 128, requires_grad=True),
    )


def test_nf4_qlora_training_matches_eager() -> None:
    assert_matches_eager(qlora, _qlora_inputs, calls=2)


def test_nf4_linear_inference_matches_eager() -> None:
    assert_matches_eager(linear_nf4, lambda: (torch.randn(4, 128), _nf4()), calls=2)


def nf4_views(w: T) -> object:
    return w.t(), w.view(128, 128)


def test_nf4_views_keep_eager_base() -> None:
    compiled = assert_matches_eager(nf4_views, lambda: (_nf4(),), calls=2)
    out = compiled(w := _nf4())
    assert isinstance(out, tuple) and all(type(v) is NF4Tensor and v._base is w for v in out)


def test_nf4_dequantized_weight_matches_eager() -> None:
    assert_matches_eager(lambda w: w.get_original_weight() + 1, lambda: (_nf4(),), calls=2)


def test_nf4_checker_pipeline_rules_hold() -> None:
    _no_pipeline_failures(subclassaot.check_subclass(_nf4))


# --- Int8 weight-only ---------------------------------------------------------------------------------------------


def _int8_mlp() -> nn.Module:
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 16))
    quantize_(mlp, Int8WeightOnlyConfig(set_inductor_config=False))  # (True flips global inductor settings)
    assert type(mlp.get_submodule("0").get_parameter("weight")).__name__ == "Int8Tensor"
    return mlp


@pytest.mark.parametrize("requires_grad", [False, True], ids=["inference", "training"])
def test_int8_weight_only_mlp_matches_eager(requires_grad: bool) -> None:
    # Training: the input and the (plain) biases get gradients; the Int8Tensor weights are frozen.
    assert_matches_eager(_int8_mlp(), lambda: (torch.randn(4, 64, requires_grad=requires_grad),), calls=2)


def _int8_weight() -> T:
    first = _int8_mlp().get_submodule("0")
    assert isinstance(first, nn.Linear)
    return copy.deepcopy(first.weight.detach())


def test_int8_slice_and_dequantize_match_eager() -> None:
    assert_matches_eager(lambda t: (t[0:8], t.dequantize()), lambda: (_int8_weight(),), calls=2)


def test_int8_checker_passes() -> None:
    report = subclassaot.check_subclass(_int8_weight)
    assert report.ok, str(report)
    assert report.get_result("pipeline.data_mutation").status is Status.SKIP  # Int8Tensor has no in-place ops
