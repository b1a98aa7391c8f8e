import torch

class OptimStateFp8(torch.Tensor):
    @classmethod
    def zeros(cls, shape: tuple[int, ...], **kwargs: object) -> OptimStateFp8: ...
