import torch
from torch import nn

class ToyTwoLinearModel(nn.Module):
    def __init__(
        self,
        input_dim: int,
        hidden_dim: int,
        output_dim: int,
        dtype: torch.dtype,
        device: str | torch.device,
        has_bias: bool = False,
    ) -> None: ...
