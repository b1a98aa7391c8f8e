"""FP8-scaled tensors: Triton kernels (`kernels.py`, `cast_transpose.py`) and their pure-torch oracle (`reference.py`)."""

# The subclass and its module side (tensor.py, ops.py, linear.py). Importing ops registers the op table (importing any
# module of this package runs this file first).
from subclasses.fp8 import ops as ops
from subclasses.fp8.linear import Float8Linear, ScalingType, to_float8
from subclasses.fp8.tensor import Float8Granularity, Float8Tensor, example, rowwise_example

__all__ = [
    "Float8Granularity",
    "Float8Linear",
    "Float8Tensor",
    "ScalingType",
    "example",
    "rowwise_example",
    "to_float8",
]
