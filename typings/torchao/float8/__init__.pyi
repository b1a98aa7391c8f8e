from collections.abc import Callable

from torch import nn

def convert_to_float8_training(
    module: nn.Module, *, module_filter_fn: Callable[[nn.Module, str], bool] | None = None, config: object = None
) -> nn.Module: ...

class Float8LinearConfig:
    def __init__(self, *, emulate: bool = ...) -> None: ...
    @classmethod
    def from_recipe_name(cls, recipe_name: str) -> Float8LinearConfig: ...
