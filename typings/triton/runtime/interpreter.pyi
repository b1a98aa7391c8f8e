from triton.runtime.jit import KernelInterface

# What `triton.jit` returns instead of a JITFunction when TRITON_INTERPRET=1 was set at decoration time.
class InterpretedFunction(KernelInterface): ...
