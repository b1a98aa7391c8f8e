"""Jagged nested tensors: Triton kernels (`kernels.py`) and their pure-torch oracle (`reference.py`)."""

# JaggedTensor (issue 7): the subclass, its op table (registered on import) and its examples.
# tensor.py first: it imports ops.py at its end, which registers the op table.
from subclasses.nested.tensor import JaggedTensor, example, example_with_holes, jagged_policy  # isort: skip
from subclasses.nested.ops import from_padded, from_padded_like, softmax_pool, to_padded  # isort: skip

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
