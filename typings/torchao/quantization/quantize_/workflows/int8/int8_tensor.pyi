import torch
from torchao.quantization.granularity import Granularity

class Int8Tensor(torch.Tensor):
    @staticmethod
    def _normalize_granularity(
        granularity: Granularity | list[Granularity] | None,
    ) -> tuple[Granularity, Granularity]: ...
