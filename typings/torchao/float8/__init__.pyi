from collections.abc import Callable

from torch import nn

def convert_to_float8_training(
    module: nn.Module, *, module_filter_fn: Callable[[nn.Module, str], bool] | None = None, config: object = None
) -> nn.Module: ...
