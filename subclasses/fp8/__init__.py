"""FP8-scaled tensors: Triton kernels (`kernels.py`) and their pure-torch oracle (`reference.py`)."""
