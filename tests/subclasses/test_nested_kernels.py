"""The jagged kernels against their pure-torch twins, with ragged rows (empty ones included) and feature counts that
are not multiples of the block sizes (BLOCK_L = 16 positions, up to 64 features per program).

Without a GPU the kernels run in Triton's interpreter (tests/conftest.py). See Note [Empty Jagged Rows].
"""

import importlib.util
from collections.abc import Callable

import pytest
import torch
from torch import Tensor

from subclasses.kernel_dispatch import KernelPath
from subclasses.nested import kernels, reference

CPU = torch.device("cpu")
LENGTHS = (0, 3, 17, 1, 9)  # an empty row first, and a row longer than one BLOCK_L
D = 19

Op = Callable[[Tensor, Tensor], Tensor]
REDUCTIONS: list[tuple[Op, Op]] = [
    (kernels.jagged_sum_op, reference.jagged_sum),
    (kernels.jagged_mean_op, reference.jagged_mean),
    (kernels.jagged_amax_op, reference.jagged_amax),
]


def _jagged(lengths: tuple[int, ...], d: int, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    torch.manual_seed(0)
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.int64)
    offsets[1:] = torch.tensor(lengths, dtype=torch.int64).cumsum(0)
    return torch.randn(sum(lengths), d).to(dtype), offsets


def test_kernel_path_says_which_implementation_runs() -> None:
    has_triton = importlib.util.find_spec("triton") is not None
    path = kernels.kernel_path(CPU)
    if has_triton and not torch.cuda.is_available():
        assert path is KernelPath.INTERPRETER  # conftest set TRITON_INTERPRET=1: the kernels themselves ran
    elif not has_triton:
        assert path is KernelPath.REFERENCE


def test_without_triton_the_reference_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "_HAS_TRITON", False)  # what an ImportError of triton leaves behind
    assert kernels.kernel_path(CPU) is KernelPath.REFERENCE
    values, offsets = _jagged(LENGTHS, D)
    assert torch.equal(kernels.jagged_softmax_op(values, offsets), reference.jagged_softmax(values, offsets))


@pytest.mark.parametrize(("op", "twin"), REDUCTIONS)
@pytest.mark.parametrize("d", [D, 70])  # 70: two feature blocks, the second ragged
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_reductions_match_reference(op: Op, twin: Op, d: int, dtype: torch.dtype) -> None:
    values, offsets = _jagged(LENGTHS, d, dtype)
    out = op(values, offsets)
    assert out.shape == (len(LENGTHS), d) and out.dtype == dtype
    torch.testing.assert_close(out, twin(values, offsets), equal_nan=True)


def test_empty_rows_follow_the_padded_reduction() -> None:
    values, offsets = _jagged(LENGTHS, D)
    assert (kernels.jagged_sum_op(values, offsets)[0] == 0).all()
    assert kernels.jagged_mean_op(values, offsets)[0].isnan().all()
    assert (kernels.jagged_amax_op(values, offsets)[0] == float("-inf")).all()
    assert not kernels.jagged_mean_op(values, offsets)[1:].isnan().any()


@pytest.mark.parametrize("lengths", [(), (0, 0)])
def test_no_rows_or_only_empty_rows(lengths: tuple[int, ...]) -> None:
    values, offsets = _jagged(lengths, D)
    for op, twin in REDUCTIONS:
        torch.testing.assert_close(op(values, offsets), twin(values, offsets), equal_nan=True)
    assert kernels.jagged_softmax_op(values, offsets).shape == (0, D)
    assert kernels.jagged_to_padded_op(values, offsets, 0, 0.0).shape == (len(lengths), 0, D)


@pytest.mark.parametrize("d", [D, 70])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_matches_reference(d: int, dtype: torch.dtype) -> None:
    values, offsets = _jagged(LENGTHS, d, dtype)
    out = kernels.jagged_softmax_op(values, offsets)
    assert out.shape == values.shape and out.dtype == dtype
    torch.testing.assert_close(out, reference.jagged_softmax(values, offsets))
    row_sums = kernels.jagged_sum_op(out.float(), offsets)[1:]  # row 0 is empty
    torch.testing.assert_close(row_sums, torch.ones_like(row_sums), rtol=0, atol=1e-2)


@pytest.mark.parametrize("max_len", [17, 20, 10])  # exact, padded further, truncating the 17-long row
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_to_padded_and_back_match_reference(max_len: int, dtype: torch.dtype) -> None:
    values, offsets = _jagged(LENGTHS, D, dtype)
    padded = kernels.jagged_to_padded_op(values, offsets, max_len, -1.5)
    assert padded.shape == (len(LENGTHS), max_len, D)
    assert torch.equal(padded, reference.to_padded(values, offsets, max_len, -1.5))
    back = kernels.jagged_from_padded_op(padded, offsets, values.shape[0])
    assert torch.equal(back, reference.from_padded(padded, offsets, values.shape[0]))
    if max_len >= max(LENGTHS):
        assert torch.equal(back, values)


def test_padding_value_is_not_rounded_through_the_values_dtype() -> None:
    values, offsets = _jagged((2, 0), D, torch.float32)
    padded = kernels.jagged_to_padded_op(values, offsets, 3, float("-inf"))
    assert (padded[0, 2] == float("-inf")).all() and (padded[1] == float("-inf")).all()


def test_rejects_bad_offsets() -> None:
    values, offsets = _jagged(LENGTHS, D)
    with pytest.raises(TypeError, match=r"offsets must be 1-D int64 of length B \+ 1 >= 1; got 1-D torch.int32"):
        kernels.jagged_sum_op(values, offsets.int())
    with pytest.raises(TypeError, match=r"expected a 2-D tensor of .*; got 3-D"):
        kernels.jagged_softmax_op(values[None], offsets)


def _grads(fn: Callable[[Tensor], Tensor], values: Tensor, grad_out: Tensor) -> Tensor:
    leaf = values.clone().requires_grad_()
    (grad,) = torch.autograd.grad(fn(leaf), leaf, grad_out)
    return grad


@pytest.mark.parametrize(
    ("op", "twin"),
    [
        (kernels.jagged_sum_op, reference.jagged_sum),
        (kernels.jagged_mean_op, reference.jagged_mean),
        (kernels.jagged_softmax_op, reference.jagged_softmax),
    ],
)
def test_gradients_match_reference(op: Op, twin: Op) -> None:
    values, offsets = _jagged(LENGTHS, D)
    grad_out = torch.randn_like(op(values, offsets))
    torch.testing.assert_close(
        _grads(lambda v: op(v, offsets), values, grad_out), _grads(lambda v: twin(v, offsets), values, grad_out)
    )


@pytest.mark.parametrize("max_len", [17, 10])
def test_padding_gradients_match_reference(max_len: int) -> None:
    values, offsets = _jagged(LENGTHS, D)
    grad_padded = torch.randn(len(LENGTHS), max_len, D)
    torch.testing.assert_close(
        _grads(lambda v: kernels.jagged_to_padded_op(v, offsets, max_len, 0.0), values, grad_padded),
        _grads(lambda v: reference.to_padded(v, offsets, max_len, 0.0), values, grad_padded),
    )
    padded = reference.to_padded(values, offsets, max_len, 0.0)
    grad_values = torch.randn_like(values)
    total = values.shape[0]
    torch.testing.assert_close(
        _grads(lambda p: kernels.jagged_from_padded_op(p, offsets, total), padded, grad_values),
        _grads(lambda p: reference.from_padded(p, offsets, total), padded, grad_values),
    )


def test_opcheck() -> None:
    # Small inputs: opcheck runs each op several times, in the interpreter.
    values, offsets = _jagged((0, 3, 5), 6)
    values.requires_grad_()
    for op in (torch.ops.subclassaot_jagged.sum.default, torch.ops.subclassaot_jagged.softmax.default):
        torch.library.opcheck(op, (values, offsets))
    # opcheck compares outputs without equal_nan, and the mean of an empty row is NaN: no empty row here.
    full_values, full_offsets = _jagged((2, 3, 5), 6)
    torch.library.opcheck(torch.ops.subclassaot_jagged.mean.default, (full_values.requires_grad_(), full_offsets))
    torch.library.opcheck(torch.ops.subclassaot_jagged.amax.default, (values.detach(), offsets))
    torch.library.opcheck(torch.ops.subclassaot_jagged.to_padded.default, (values, offsets, 5, -1.0))
    padded = reference.to_padded(values.detach(), offsets, 5, 0.0).requires_grad_()
    torch.library.opcheck(torch.ops.subclassaot_jagged.from_padded.default, (padded, offsets, 8))


# -- the fused softmax pool (See Note [Fused Softmax Pool]) --------------------------------------------------------
POOL_LENGTHS = (0, 3, 70, 1, 9)  # an empty row, and one row longer than BLOCK_L (64) with a ragged last block


@pytest.mark.parametrize("d", [19, 40])  # 40: one full and one partial feature block (BLOCK_D 32)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_pool_matches_reference(d: int, dtype: torch.dtype) -> None:
    values, offsets = _jagged(POOL_LENGTHS, d, dtype)
    values = values * 4  # a spread of logits, so the running max changes between blocks
    got, want = kernels.jagged_softmax_pool_op(values, offsets), reference.jagged_softmax_pool(values, offsets)
    assert got.dtype == dtype and got.shape == (len(POOL_LENGTHS), d)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(got, want, atol=tol, rtol=tol)
    assert torch.equal(got[0], torch.zeros(d, dtype=dtype)), "an empty row sums to 0 (Note [Empty Jagged Rows])"


def test_softmax_pool_gradient_matches_reference() -> None:
    values, offsets = _jagged(POOL_LENGTHS, D)
    grad_out = torch.randn(len(POOL_LENGTHS), D)
    torch.testing.assert_close(
        _grads(lambda v: kernels.jagged_softmax_pool_op(v, offsets), values, grad_out),
        _grads(lambda v: reference.jagged_softmax_pool(v, offsets), values, grad_out),
    )


def test_softmax_pool_opcheck() -> None:
    values, offsets = _jagged((0, 3, 5), 6)
    torch.library.opcheck(torch.ops.subclassaot_jagged.softmax_pool.default, (values.requires_grad_(), offsets))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_compiled_softmax_pool_matches_reference_on_cuda() -> None:
    values, offsets = _jagged((0, 1, 17, 1030, 3, 0, 64), 67)
    values, offsets = values.cuda(), offsets.cuda()
    assert kernels.kernel_path(values.device) is KernelPath.COMPILED
    got, want = kernels.jagged_softmax_pool_op(values, offsets), reference.jagged_softmax_pool(values, offsets)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
