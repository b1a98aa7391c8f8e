"""What the sample subclasses' Triton kernels share: which implementation runs, and typed custom-op registration.

See Note [Kernel Dispatch] and Note [Narrow Casts In The Interpreter] in subclasses/fp8/kernels.py.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import ParamSpec, TypeVar, cast

import torch

_P = ParamSpec("_P")
_R = TypeVar("_R")


class KernelPath(enum.Enum):
    """Which implementation of a kernel ran; see Note [Kernel Dispatch]."""

    COMPILED = "compiled"
    INTERPRETER = "interpreter"
    REFERENCE = "reference"


def select_path(device: torch.device, *, has_triton: bool, interpreted: bool) -> KernelPath:
    """The path a launcher takes for tensors on `device`, given what importing Triton gave its module."""
    if not has_triton:
        return KernelPath.REFERENCE
    if interpreted:
        return KernelPath.INTERPRETER
    return KernelPath.COMPILED if device.type == "cuda" else KernelPath.REFERENCE


def kernel_out_dtype(dtype: torch.dtype, path: KernelPath) -> torch.dtype:
    """The dtype a kernel writes for an output of `dtype`; see Note [Narrow Casts In The Interpreter]."""
    return torch.float32 if path is KernelPath.INTERPRETER and dtype.itemsize < 4 else dtype


def custom_op(name: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """`torch.library.custom_op` with no mutated args, typed as the function it wraps.

    A CustomOpDef forwards calls to the registered op, whose schema is inferred from the function's signature, so
    typing the result as that function keeps callers type-checked (torch types it as CustomOpDef, returning Any).
    """

    def register(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        return cast("Callable[_P, _R]", torch.library.custom_op(name, mutates_args=())(fn))

    return register
