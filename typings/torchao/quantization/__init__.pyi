import torch
from torch import nn

class Int8WeightOnlyConfig:
    def __init__(self, *, granularity: object = ..., set_inductor_config: bool = True, version: int = ...) -> None: ...

class Int8DynamicActivationInt8WeightConfig:
    def __init__(
        self,
        *,
        act_mapping_type: object = ...,
        granularity: object = ...,
        set_inductor_config: bool = True,
        version: int = ...,
    ) -> None: ...

class Int8StaticActivationInt8WeightConfig:
    def __init__(
        self,
        *,
        act_quant_scale: torch.Tensor | None = None,
        act_quant_zero_point: torch.Tensor | None = None,
        granularity: object = ...,
        act_mapping_type: object = ...,
    ) -> None: ...

class Float8WeightOnlyConfig:
    def __init__(self, *, set_inductor_config: bool = True) -> None: ...

class PerGroup:
    def __init__(self, group_size: int) -> None: ...

class IntxWeightOnlyConfig:
    def __init__(self, *, weight_dtype: torch.dtype = ..., granularity: object = ...) -> None: ...

class Int8DynamicActivationIntxWeightConfig:
    def __init__(self, *, weight_dtype: torch.dtype = ..., weight_granularity: object = ...) -> None: ...

def quantize_(model: nn.Module, config: object) -> None: ...
