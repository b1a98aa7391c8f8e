import enum

import torch

class GemmInputRole(enum.Enum):
    INPUT = "input"
    WEIGHT = "weight"
    GRAD_OUTPUT = "grad_output"

class LinearMMConfig:
    def __init__(self) -> None: ...

class Float8TrainingTensor(torch.Tensor):
    def to_original_precision(self) -> torch.Tensor: ...

def hp_tensor_and_scale_to_float8(
    hp_tensor: torch.Tensor,
    s: torch.Tensor,
    float8_dtype: torch.dtype,
    linear_mm_config: LinearMMConfig | None = None,
    gemm_input_role: GemmInputRole | None = None,
    axiswise_dim: int | None = None,
) -> Float8TrainingTensor: ...
