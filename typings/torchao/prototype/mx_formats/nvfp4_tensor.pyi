import torch

class NVFP4Tensor(torch.Tensor):
    @staticmethod
    def to_nvfp4(
        data_hp: torch.Tensor, block_size: int = 16, per_tensor_scale: torch.Tensor | None = None
    ) -> NVFP4Tensor: ...
    def dequantize(self, output_dtype: torch.dtype | None = None) -> torch.Tensor: ...
