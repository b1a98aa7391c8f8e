"""Test-wide setup, run by pytest before any test module is imported."""

import os

import torch

# Without a GPU, Triton kernels run in Triton's CPU interpreter, which is how CI tests them. Triton decides between
# compiling and interpreting when a kernel is decorated, i.e. when a kernels module is imported, so the variable
# must be set here, before any test imports one. `setdefault` leaves an explicit TRITON_INTERPRET=0 alone. The
# library never reads it; see Note [Kernel Dispatch].
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
