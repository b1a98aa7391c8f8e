from collections.abc import Callable

import torch

class Int8QuantizedTrainingLinearWeight(torch.Tensor):
    @classmethod
    def from_float(cls, tensor: torch.Tensor) -> Int8QuantizedTrainingLinearWeight: ...
    def dequantize(self) -> torch.Tensor: ...

def int8_weight_only_quantized_training() -> Callable[[torch.nn.Module], torch.nn.Module]: ...
