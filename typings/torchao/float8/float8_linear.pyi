from torch import nn

from torchao.float8 import Float8LinearConfig

class Float8Linear(nn.Linear):
    @classmethod
    def from_float(cls, mod: nn.Linear, config: Float8LinearConfig | None = None) -> Float8Linear: ...
