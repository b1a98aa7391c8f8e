import enum

import torch

class MappingType(enum.Enum):
    SYMMETRIC = 1
    ASYMMETRIC = 3

_DTYPE_TO_QVALUE_BOUNDS: dict[torch.dtype, tuple[int, int]]

def choose_qparams_affine(
    input: torch.Tensor,
    mapping_type: MappingType,
    block_size: tuple[int, ...] | list[int],
    target_dtype: torch.dtype,
    quant_min: int | None = None,
    quant_max: int | None = None,
    eps: float | None = None,
    scale_dtype: torch.dtype | None = None,
    zero_point_dtype: torch.dtype | None = None,
    keepdim: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]: ...
