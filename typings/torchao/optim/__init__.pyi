from collections.abc import Iterable

import torch

class AdamW8bit(torch.optim.Optimizer):
    def __init__(self, params: Iterable[torch.Tensor], lr: float = ...) -> None: ...

class AdamW4bit(torch.optim.Optimizer):
    def __init__(self, params: Iterable[torch.Tensor], lr: float = ...) -> None: ...

class AdamWFp8(torch.optim.Optimizer):
    def __init__(self, params: Iterable[torch.Tensor], lr: float = ...) -> None: ...
