"""Pure-torch twins of the jagged kernels: the oracle the kernels are tested against, and the fallback without Triton.

Input: a jagged tensor as `values` (total_length, D) and `offsets` (B + 1,) int64; row i is
`values[offsets[i]:offsets[i + 1]]`. Output: what the kernels in `kernels.py` compute.
Invariants: every function returns fresh tensors; reductions and softmax are defined through the padded form
(pad, reduce over the length dim, which is what the kernels' masking amounts to). See Note [Empty Jagged Rows].
"""

import torch
from torch import Tensor

# Note [Empty Jagged Rows]
# A reduction over a row is the padded reduction with padding = the reduction's identity, so an empty row gives:
#   sum  -> 0      (identity of +)
#   amax -> -inf   (identity of max)
#   mean -> NaN    (0 / 0: the sum over no elements divided by a count of zero, as torch.mean of an empty tensor)
# softmax writes nothing for an empty row (it has no positions). Rows longer than `max_len` in to_padded are
# truncated; from_padded gives 0 at positions >= max_len, so each is the other's backward.


def lengths(offsets: Tensor) -> Tensor:
    """Row lengths, (B,)."""
    return offsets[1:] - offsets[:-1]


def max_length(offsets: Tensor) -> int:
    """The longest row's length (0 when there are no rows); reads the offsets, so it syncs on a GPU."""
    return int(lengths(offsets).max()) if offsets.numel() > 1 else 0


def _rows_and_positions(offsets: Tensor, total_length: int) -> tuple[Tensor, Tensor]:
    """For each value: its row index and its position in that row, both (total_length,)."""
    n_rows = offsets.numel() - 1
    rows = torch.repeat_interleave(
        torch.arange(n_rows, device=offsets.device), lengths(offsets), output_size=total_length
    )
    positions = torch.arange(total_length, device=offsets.device) - offsets[rows]
    return rows, positions


def to_padded(values: Tensor, offsets: Tensor, max_len: int, padding_value: float) -> Tensor:
    """(B, max_len, D): row i in padded[i, :len_i], `padding_value` after it; rows longer than max_len truncated."""
    padded = values.new_full((offsets.numel() - 1, max_len, values.shape[1]), padding_value)
    rows, positions = _rows_and_positions(offsets, values.shape[0])
    keep = positions < max_len
    padded[rows[keep], positions[keep]] = values[keep]
    return padded


def from_padded(padded: Tensor, offsets: Tensor, total_length: int) -> Tensor:
    """(total_length, D): the inverse of to_padded; positions >= padded.shape[1] get 0."""
    values = padded.new_zeros((total_length, padded.shape[2]))
    rows, positions = _rows_and_positions(offsets, total_length)
    keep = positions < padded.shape[1]
    values[keep] = padded[rows[keep], positions[keep]]
    return values


def _padded32(values: Tensor, offsets: Tensor, padding_value: float) -> Tensor:
    # At least one padded position, so that reductions over the length dim are defined when every row is empty.
    return to_padded(values.to(torch.float32), offsets, max(max_length(offsets), 1), padding_value)


def jagged_sum(values: Tensor, offsets: Tensor) -> Tensor:
    """(B, D): the sum of each row, accumulated in fp32."""
    return _padded32(values, offsets, 0.0).sum(dim=1).to(values.dtype)


def jagged_mean(values: Tensor, offsets: Tensor) -> Tensor:
    """(B, D): the mean of each row, NaN for an empty row; see Note [Empty Jagged Rows]."""
    total = _padded32(values, offsets, 0.0).sum(dim=1)
    return (total / lengths(offsets).to(torch.float32)[:, None]).to(values.dtype)


def jagged_amax(values: Tensor, offsets: Tensor) -> Tensor:
    """(B, D): the max of each row, -inf for an empty row; see Note [Empty Jagged Rows]."""
    return _padded32(values, offsets, float("-inf")).amax(dim=1).to(values.dtype)


def jagged_softmax(values: Tensor, offsets: Tensor) -> Tensor:
    """(total_length, D): softmax over each row's positions, per feature."""
    probs = torch.softmax(_padded32(values, offsets, float("-inf")), dim=1)
    return from_padded(probs, offsets, values.shape[0]).to(values.dtype)


def jagged_softmax_pool(values: Tensor, offsets: Tensor) -> Tensor:
    """(B, D): sum over each row of softmax(row) * row, per feature, in fp32; 0 for an empty row.

    The jagged block's `(y.softmax(1) * y).sum(1)`, written through the twins above (an empty row has no positions,
    so its sum is 0, Note [Empty Jagged Rows]).
    """
    values32 = values.to(torch.float32)
    return jagged_sum(jagged_softmax(values32, offsets) * values32, offsets).to(values.dtype)
