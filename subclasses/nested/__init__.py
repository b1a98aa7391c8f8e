"""Jagged nested tensors: Triton kernels (`kernels.py`) and their pure-torch oracle (`reference.py`)."""
