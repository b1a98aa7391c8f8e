from triton.runtime import interpreter as interpreter
from triton.runtime import jit as jit
