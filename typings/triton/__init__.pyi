# Stubs for the parts of Triton that subclassaot uses (Triton ships no py.typed). Only the symbols we call.
from collections.abc import Callable

from triton import language as language
from triton import runtime as runtime
from triton.runtime.jit import KernelInterface

__version__: str

def jit(fn: Callable[..., None]) -> KernelInterface: ...
def cdiv(x: int, y: int) -> int: ...
def next_power_of_2(n: int) -> int: ...
