from triton.language import _Operand, tensor

# IEEE round-to-nearest fp32 division (Triton's `/` may be approximate on GPUs).
def div_rn(x: _Operand, y: _Operand) -> tensor: ...
