"""Jagged nested tensors: Triton kernels (`kernels.py`) and their pure-torch oracle (`reference.py`)."""

# JaggedTensor: the subclass and its conversions (tensor.py), its op table (ops.py, registered on import: importing
# any module of this package runs this file first) and its examples.
from subclasses.nested import ops as ops
from subclasses.nested.ops import softmax_pool
from subclasses.nested.tensor import (
    JaggedTensor,
    example,
    example_with_holes,
    from_padded,
    from_padded_like,
    jagged_policy,
    to_padded,
)

__all__ = [
    "JaggedTensor",
    "example",
    "example_with_holes",
    "from_padded",
    "from_padded_like",
    "jagged_policy",
    "softmax_pool",
    "to_padded",
]
