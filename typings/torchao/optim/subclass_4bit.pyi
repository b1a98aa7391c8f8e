import torch

class OptimState4bit(torch.Tensor):
    @classmethod
    def zeros(cls, shape: tuple[int, ...], **kwargs: object) -> OptimState4bit: ...
