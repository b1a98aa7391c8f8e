import torch

class OptimState8bit(torch.Tensor):
    @classmethod
    def zeros(cls, shape: tuple[int, ...], **kwargs: object) -> OptimState8bit: ...
