"""Every OpInfo of PyTorch's op_db (torch.testing._internal.common_methods_invocations) through subclassaot.compile.

The sweep torch runs over its own AOTAutograd (test/functorch/test_aotdispatch.py, `test_aot_autograd_exhaustive`),
written against our oracle: for each OpInfo that supports float32 on the CPU, its first sample input (three for ops
with an in-place variant) becomes `lambda *tensors: op(*tensors, *other_args, **kwargs)` (the tensors of the sample,
nested ones included, are the program's arguments; everything else is closed over), compiled with backend "eager"
and compared with eager by the parity oracle (outputs, inputs after the call, aliasing, version counters, gradients):
- `inference`: no input requires grad; `training`: the sample's differentiable tensors are leaves requiring grad;
- `inplace` / `inplace_training`: `op.inplace_variant` writing the first input (a clone of a leaf in training);
- `view_inplace` / `view_inplace_training`: the same, the first input given as a slice of a larger tensor;
- `two_tensor` / `two_tensor_training`: every float input wrapped in torch's TwoTensor (of it and twice it), for
  the ops in `TWO_TENSOR_OPS`.
A sample eager itself rejects (an in-place op whose result would broadcast or change the input's dtype) is skipped.
Random ops are compared value for value (the oracle seeds both calls alike); ops whose outputs are uninitialized
memory (`UNINITIALIZED`) by everything but their values. Each case that differs from eager is listed with what it
does and why: `REFUSED` (and `_SEEDED_OPS`) must raise UnsupportedError naming the rule, `XFAIL` are strict expected
failures. The case id is `op key-mode-sample index`.

The sweep is `slow` (run it with `pytest -m ''`); op_db is imported only when it runs (~4 s). CI runs `CI_CASES`, a
fixed slice of ops with in-place variants, as one test so that one worker pays that import.
"""

from __future__ import annotations

import enum
import functools
import importlib
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, cast

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils import _pytree as pytree

from subclassaot.errors import UnsupportedError
from tests.oracle import Call, assert_matches_eager


class _Sample(Protocol):
    input: object
    args: tuple[object, ...]
    kwargs: dict[str, object]


class _OpInfo(Protocol):
    """The part of torch's (untyped) OpInfo this file reads."""

    name: str
    variant_test_name: str
    op: Callable[..., object]
    inplace_variant: Callable[..., object] | None
    supports_autograd: bool

    def supported_dtypes(self, device_type: str) -> set[torch.dtype]: ...

    def sample_inputs(self, device: str, dtype: torch.dtype, requires_grad: bool = False) -> Iterable[_Sample]: ...


class Mode(enum.Enum):
    INFERENCE = "inference"
    TRAINING = "training"
    INPLACE = "inplace"
    INPLACE_TRAINING = "inplace_training"
    VIEW_INPLACE = "view_inplace"
    VIEW_INPLACE_TRAINING = "view_inplace_training"
    TWO_TENSOR = "two_tensor"
    TWO_TENSOR_TRAINING = "two_tensor_training"

    @property
    def training(self) -> bool:
        return self in (Mode.TRAINING, Mode.INPLACE_TRAINING, Mode.VIEW_INPLACE_TRAINING, Mode.TWO_TENSOR_TRAINING)

    @property
    def inplace(self) -> bool:
        return self in (Mode.INPLACE, Mode.INPLACE_TRAINING, Mode.VIEW_INPLACE, Mode.VIEW_INPLACE_TRAINING)

    @property
    def two_tensor(self) -> bool:
        return self in (Mode.TWO_TENSOR, Mode.TWO_TENSOR_TRAINING)

    @property
    def view(self) -> bool:
        return self in (Mode.VIEW_INPLACE, Mode.VIEW_INPLACE_TRAINING)


INPLACE_SAMPLES = 3  # samples per op with an in-place variant (the first one for the others)


@functools.cache
def _ops() -> dict[str, _OpInfo]:
    """op_db's float32 CPU OpInfos by key (`name` or `name.variant`)."""
    module = importlib.import_module("torch.testing._internal.common_methods_invocations")
    ops = cast(Sequence[_OpInfo], module.op_db)
    return {_key(op): op for op in ops if torch.float32 in op.supported_dtypes("cpu")}


def _key(op: _OpInfo) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _sample(op: _OpInfo, index: int, requires_grad: bool) -> _Sample | None:
    """The op's `index`th float32 CPU sample, drawn under a fixed seed (None where it has fewer)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for i, sample in enumerate(op.sample_inputs("cpu", torch.float32, requires_grad=requires_grad)):
            if i == index:
                return sample
    return None


def _copy(t: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """A fresh leaf with `t`'s values, shape and strides (a sparse one: its values)."""
    if t.layout != torch.strided:
        return t.detach().clone().requires_grad_(requires_grad and t.requires_grad)
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    with torch.no_grad():
        out.copy_(t)
    return out.requires_grad_(requires_grad and t.requires_grad)


def _as_view(t: torch.Tensor) -> torch.Tensor:
    """`t`'s values as a slice of a larger tensor made from it (a non-leaf where `t` requires grad)."""
    if t.dim() == 0:
        return torch.stack([torch.zeros_like(t), t])[1]
    return torch.cat([t.new_zeros((1, *t.shape[1:])), t])[1:]


def _two(t: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """A float tensor as torch's TwoTensor of it and twice it (a leaf where `t` is one that requires grad)."""
    if not t.is_floating_point():
        return t
    ctor: Callable[..., torch.Tensor] = TwoTensor
    return ctor(t.detach(), t.detach() * 2).requires_grad_(requires_grad and t.requires_grad)


def _program(op: _OpInfo, sample: _Sample, mode: Mode) -> tuple[Callable[..., object], Callable[[], Call]]:
    """The program `lambda *tensors: op(*tensors, *args, **kwargs)` and its fresh inputs, as `mode` makes them."""
    leaves, spec = pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    where = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    target = op.inplace_variant if mode.inplace else op.op
    assert target is not None, "BUG: an in-place mode for an op without an in-place variant"

    def program(*tensors: torch.Tensor) -> object:
        filled = list(leaves)
        for i, t in zip(where, tensors, strict=True):
            filled[i] = t
        first, args, kwargs = pytree.tree_unflatten(filled, spec)
        return target(first, *args, **kwargs)

    def make_inputs() -> Call:
        tensors = [_copy(cast(torch.Tensor, leaves[i]), mode.training) for i in where]
        if mode.inplace and tensors and tensors[0].requires_grad:
            tensors[0] = tensors[0].clone()  # eager forbids writing a leaf that requires grad
        if mode.view and tensors:
            tensors[0] = _as_view(tensors[0])
        if mode.two_tensor:
            tensors = [_two(t, mode.training) for t in tensors]
        return Call(args=tuple(tensors))

    return program, make_inputs


def _eager_rejects(program: Callable[..., object], make_inputs: Callable[[], Call]) -> BaseException | None:
    call = make_inputs()
    try:
        program(*call.args, **call.kwargs)
    except Exception as e:  # any eager failure: the program is not legal, nothing to compare
        return e
    return None


def _zero_outputs(outputs: object, args: tuple[object, ...]) -> None:
    """An `after_call` for ops whose outputs are uninitialized memory: compare everything but their values."""
    with torch.no_grad():
        for o in pytree.tree_leaves(outputs):
            if isinstance(o, torch.Tensor):
                o.zero_()


def check_case(case: str) -> None:
    """Compile the case's program and compare it with eager (skips where eager rejects the sample)."""
    key, mode_name, index = case.rsplit("-", 2)
    op, mode = _ops()[key], Mode(mode_name)
    sample = _sample(op, int(index), mode.training)
    if sample is None:
        pytest.skip(f"{key} has no sample {index}")
    program, make_inputs = _program(op, sample, mode)
    rejected = _eager_rejects(program, make_inputs)
    if rejected is not None:
        pytest.skip(f"eager rejects this sample: {rejected!r}"[:200])
    after_call = _zero_outputs if key in UNINITIALIZED else None
    refusal = _refusal(case)
    if refusal is None:
        assert_matches_eager(program, make_inputs, calls=1, after_call=after_call)
        return
    with pytest.raises(UnsupportedError, match=refusal):
        assert_matches_eager(program, make_inputs, calls=1, after_call=after_call)


# ops whose outputs are uninitialized memory (their metadata and aliasing are compared, not their values)
UNINITIALIZED = frozenset(("empty", "empty_like", "new_empty", "new_empty_strided", "empty_permuted", "empty_strided"))


def _both(*keys: str) -> tuple[str, ...]:
    """The inference and training cases of each op's first sample."""
    return tuple(f"{key}-{mode}-0" for key in keys for mode in ("inference", "training"))


_VALUES = r"depends on tensor values while it is traced"
# case id -> the UnsupportedError message the pipeline must give (and `_SEEDED_OPS` below)
REFUSED: dict[str, str] = {
    # a Python bool of tensor values (equal: corrcoef and cov call it), or an output whose size is made of them
    **dict.fromkeys(("allclose-inference-0", "equal-inference-0", *_both("corrcoef", "cov")), _VALUES),
    **dict.fromkeys(_both("combinations", "masked_select", "nn.functional.ctc_loss", "linalg.lstsq"), _VALUES),
    **dict.fromkeys(_both("linalg.lstsq.grad_oriented"), _VALUES),
    **dict.fromkeys(_both("tensor_split"), r"reads a tensor's data pointer \(data_ptr\(\)\) or its values"),
    **dict.fromkeys(_both("nn.functional.gaussian_nll_loss"), r"reads a tensor's value as a Python number"),
    **dict.fromkeys(_both("sparse.sampled_addmm", "sparse.mm.reduce"), r"layout torch.sparse_csr"),
}
# OpInfos whose op runs in torch.testing's wrapper_set_seed (freeze_rng_state, then manual_seed(42)): the program
# seeds the generator, refused by name (rng_calls.py); the in-place variants of `_SEEDED_OP_ONLY` are the plain
# Tensor methods (cauchy_, uniform_, ...), whose compiled draws match eager's element for element
_SEEDED = r"calls torch\.get_rng_state inside the compiled function"
_SEEDED_OP_ONLY = ("cauchy", "exponential", "geometric", "log_normal", "normal.in_place", "uniform")
_SEEDED_OPS = (
    *_SEEDED_OP_ONLY, "bernoulli", "empty_strided", "item", "multinomial", "normal", "normal.number_mean",
    "pca_lowrank", "svd_lowrank", "rand_like", "randint", "randint_like", "randn", "randn_like",
    "nn.functional.alpha_dropout", "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.feature_alpha_dropout.with_train", "nn.functional.feature_alpha_dropout.without_train",
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d", "nn.functional.rrelu",
    "nn.functional.multi_head_attention_forward", "nn.functional.scaled_dot_product_attention",
)  # fmt: skip

_IN_PLACE = (  # the in-place modes' cases of an op (three samples; one as a view)
    *(f"inplace-{i}" for i in range(INPLACE_SAMPLES)),
    *(f"inplace_training-{i}" for i in range(INPLACE_SAMPLES)),
    "view_inplace-0",
    "view_inplace_training-0",
)
# case id -> what differs from eager and why (strict xfail)
XFAIL: dict[str, str] = {}
# torch's functionalization has no functional variant of aten::polygamma_(Tensor(a!) self, int n) (polygamma takes n
# first; torch.compile's aot_eager raises too), eager's addbmm_ resizes a (1,) self to the (5, 10) result, and square_
# of a (1, 0, 3) leaf clone in training reaches aten::pow.Scalar with a traced tensor: refused by name, as is
# to_sparse's sparse COO output (as sparse inputs are)
REFUSED.update(
    {
        **{
            f"polygamma.polygamma_n_{n}-{mode}": r"an in-place op with no functional variant \(aten\.polygamma_\)"
            for n in range(5)
            for mode in _IN_PLACE
        },
        **dict.fromkeys(
            ("addbmm-inplace-1", "addbmm-inplace_training-1", "square-inplace_training-1"),
            r"an op of the program does not run on the trace's functional tensors as it runs eagerly",
        ),
        **dict.fromkeys(_both("to_sparse"), r"out is a tensor of layout torch\.sparse_coo"),
    }
)


def _refusal(case: str) -> str | None:
    key, mode, _ = case.rsplit("-", 2)
    if key in _SEEDED_OPS and not (key in _SEEDED_OP_ONLY and Mode(mode).inplace):
        return _SEEDED
    return REFUSED.get(case)


# ops run with TwoTensor inputs too (every float tensor of the sample wrapped), inference and training
TWO_TENSOR_OPS = frozenset(
    (
        "abs", "add", "mul", "sub", "div.no_rounding_mode", "sin", "exp", "tanh", "sigmoid", "neg", "clamp", "where",
        "sum", "mean", "amax", "matmul", "mm", "bmm", "addmm", "addcmul", "lerp", "pow", "cumsum", "t", "transpose",
        "permute", "view", "reshape", "expand", "squeeze", "unsqueeze", "flatten", "narrow", "select", "cat",
        "stack", "split", "chunk", "unbind", "diagonal", "as_strided", "index_select", "gather", "masked_fill",
        "index_add", "scatter", "clone", "contiguous", "softmax", "nn.functional.relu", "nn.functional.gelu",
        "nn.functional.linear", "nn.functional.layer_norm", "max.reduction_with_dim", "sort", "topk",
    )
)  # fmt: skip


def _case_ids(key: str, op: _OpInfo) -> list[str]:
    samples = INPLACE_SAMPLES if op.inplace_variant is not None else 1
    modes = [(Mode.INFERENCE, i) for i in range(samples)]
    if op.supports_autograd:
        modes += [(Mode.TRAINING, i) for i in range(samples)]
    if op.inplace_variant is not None:
        modes += [(Mode.INPLACE, i) for i in range(samples)] + [(Mode.VIEW_INPLACE, 0)]
        if op.supports_autograd:
            modes += [(Mode.INPLACE_TRAINING, i) for i in range(samples)] + [(Mode.VIEW_INPLACE_TRAINING, 0)]
    if key in TWO_TENSOR_OPS:
        modes += [(Mode.TWO_TENSOR, 0)] + ([(Mode.TWO_TENSOR_TRAINING, 0)] if op.supports_autograd else [])
    return [f"{key}-{mode.value}-{i}" for mode, i in modes]


def all_cases() -> list[str]:
    return [case for key, op in _ops().items() for case in _case_ids(key, op)]


# CI's share (one test, so that one worker imports op_db): ops with in-place variants, written as a program input
# and as a view of one, with gradients; a few TwoTensor programs; a random op and five refusals
CI_OPS = (
    "add", "mul", "div.no_rounding_mode", "clamp", "addcmul", "lerp", "index_add", "index_copy", "index_fill",
    "scatter", "masked_fill", "tril", "transpose", "squeeze", "unsqueeze", "t", "sigmoid", "pow", "atan2", "addmm",
    "nn.functional.leaky_relu", "cumsum",
)  # fmt: skip
CI_CASES = (
    *(f"{key}-{mode}-0" for key in CI_OPS for mode in ("inplace_training", "view_inplace_training")),
    "add-two_tensor_training-0",
    "transpose-two_tensor-0",
    "cauchy-inference-0",  # (refused: seeds the generator)
    "cauchy-inplace-0",  # (the compiled draws are eager's)
    "tensor_split-inference-0",  # (refused: aten's kernel reads a tensor of indices)
    "polygamma.polygamma_n_0-inplace-0",  # (refused: functionalization has no aten.polygamma_)
    "addbmm-inplace-1",  # (refused: addbmm_ resizes its input)
    "to_sparse-inference-0",  # (refused: a sparse output)
)


def _sweep_selected(config: pytest.Config) -> bool:
    """Whether `-m` may select the slow sweep (CI's `not slow` does not: op_db is not imported to collect it)."""
    return str(config.getoption("markexpr")).replace(" ", "") != "notslow"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" not in metafunc.fixturenames:
        return
    cases = [c for c in all_cases() if c not in CI_CASES] if _sweep_selected(metafunc.config) else []
    marks = {c: pytest.mark.xfail(reason=XFAIL[c], strict=True) for c in cases if c in XFAIL}
    metafunc.parametrize("case", [pytest.param(c, id=c, marks=marks.get(c, ())) for c in cases])


@pytest.mark.slow
def test_opinfo_case_matches_eager_or_is_refused(case: str) -> None:
    check_case(case)


def test_opinfo_ci_slice_matches_eager() -> None:
    failures: list[str] = []
    for case in CI_CASES:
        try:
            check_case(case)
        except (Exception, pytest.skip.Exception) as e:  # every case's failure at once (a skip too: eager runs them)
            failures.append(f"{case}: {type(e).__name__}: {e}")
    assert not failures, "\n".join(failures)
