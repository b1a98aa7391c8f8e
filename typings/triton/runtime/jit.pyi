from collections.abc import Callable

# A launch grid: the number of programs along each axis (1 to 3 axes).
Grid = tuple[int] | tuple[int, int] | tuple[int, int, int]

class KernelInterface:
    # `kernel[grid](*args, **constexprs)` launches the kernel; arguments are tensors, scalars and constexprs.
    def __getitem__(self, grid: Grid) -> Callable[..., None]: ...

class JITFunction(KernelInterface): ...
