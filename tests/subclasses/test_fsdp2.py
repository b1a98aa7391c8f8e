"""FSDP2 (`torch.distributed.fsdp.fully_shard`) through subclassaot on a one-rank gloo group, compared with eager.

FSDP2 shards each parameter into a DTensor, all-gathers it into a plain tensor in a forward pre-hook, frees that
tensor's storage (`resize_(0)`) after forward, re-allocates and refills it (`fsdp.copy_`) before backward, and
reduce-scatters the gradients. Its hooks are `torch._dynamo.disable`d Python: torch.compile runs them between its
graphs, so `torch.compile(model, backend="subclassaot")` (and `model.compile(...)`) trains a fully_shard-ed module; the
direct entry traces one program with no graph breaks, so it compiles what runs between the hooks (a function the
module calls with its unsharded parameters) and refuses the hooks themselves by rule. Programs ported from torch's
test/distributed/_composable/fsdp/test_fully_shard_compile.py and test_fully_shard_training.py, as written there
where they run on CPU with one rank: losses, gradients and parameters after several optimizer steps equal eager's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.fsdp._fully_shard._fsdp_common import TrainingState
from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup
from torch.distributed.tensor import DTensor, Shard

import subclassaot
from subclassaot.errors import UnsupportedError
from tests.oracle import CompileFn, assert_matches_eager
from tests.subclasses.dtensor_factory import one_rank_mesh

T = torch.Tensor


def _dynamo(fn: Callable[..., object], *, backend: object = "eager") -> Callable[..., object]:
    torch._dynamo.reset()
    compiled: Callable[..., object] = torch.compile(fn, backend="subclassaot", options={"backend": str(backend)})
    return compiled


ENTRIES: dict[str, CompileFn | None] = {"direct": None, "dynamo": _dynamo}


# --- torch.ops.fsdp.copy_: FSDP2's refill of an unsharded parameter (test_trace_fsdp_copy_) ------------------------
# Its own Functionalize kernel writes the unwrapped tensor, which functionalization never sees: the write fell out of
# the compiled graph and the input kept its old value (eager writes it).


@torch.library.custom_op("subclassaot_test_fsdp2::add_one_out", mutates_args={"out"})
def add_one_out(x: T, out: T) -> None:
    torch.add(x, 1, out=out)


def fsdp_copy_after_custom_op(x: T) -> None:  # test_trace_fsdp_copy_, as written
    buf = torch.zeros(2)
    buf_view = buf.view(-1)
    torch.ops.subclassaot_test_fsdp2.add_one_out(x, out=buf_view)
    buf_view2 = buf.view(-1)
    torch.ops.fsdp.copy_(x, buf_view2)


def fsdp_copy(x: T, y: T) -> None:
    torch.ops.fsdp.copy_(x, y)


def fsdp_copy_then_read(x: T, y: T) -> object:
    torch.ops.fsdp.copy_(x, y)
    return x * 2, x


def fsdp_copy_into_view(x: T, y: T) -> object:
    torch.ops.fsdp.copy_(x[1:], y[1:])
    return x.sum()


def read_then_fsdp_copy(x: T, y: T) -> object:
    z = x.sin()
    torch.ops.fsdp.copy_(x, y)
    return z + x


def fsdp_copy_under_no_grad(w: T, x: T) -> object:  # FSDP2 refills a parameter under no_grad, then computes with it
    with torch.no_grad():
        torch.ops.fsdp.copy_(w, x * 3)
    return (w * x).sum()


FSDP_COPY: dict[str, tuple[Callable[..., object], Callable[[], tuple[object, ...]]]] = {
    "after_custom_op": (fsdp_copy_after_custom_op, lambda: (torch.zeros(2),)),
    "plain": (fsdp_copy, lambda: (torch.zeros(2), torch.ones(2))),
    "then_read": (fsdp_copy_then_read, lambda: (torch.zeros(2), torch.randn(2))),
    "into_view": (fsdp_copy_into_view, lambda: (torch.zeros(3), torch.randn(3))),
    "read_before": (read_then_fsdp_copy, lambda: (torch.randn(3), torch.randn(3))),
    "under_no_grad": (
        fsdp_copy_under_no_grad,
        lambda: (torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)),
    ),
}


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("name", list(FSDP_COPY))
def test_fsdp_copy_writes_its_input_as_eager(name: str, entry: str) -> None:
    fn, make = FSDP_COPY[name]
    assert_matches_eager(fn, make, compile_fn=ENTRIES[entry])


_UNSET: Any = None  # (torch's test passes None for the mesh info and the policies)
_PARAM_GROUP = FSDPParamGroup([], (nn.Linear(1, 1),), _UNSET, None, torch.device("cpu"), None, _UNSET, _UNSET)


def use_training_state(x: T) -> T:  # test_dynamo_trace_use_training_state
    _PARAM_GROUP._training_state = TrainingState.IDLE
    with _PARAM_GROUP.use_training_state(TrainingState.FORWARD):
        if _PARAM_GROUP._training_state == TrainingState.FORWARD:
            return x + 1
        return x


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_param_group_training_state_context_matches_eager(entry: str) -> None:
    assert_matches_eager(use_training_state, lambda: (torch.zeros(1),), compile_fn=ENTRIES[entry])
    assert _PARAM_GROUP._training_state == TrainingState.IDLE


# --- training a fully_shard-ed module -----------------------------------------------------------------------------


def _shard(module: nn.Module, children: list[nn.Module], **kwargs: object) -> nn.Module:
    for child in children:
        fully_shard(child, mesh=one_rank_mesh(), **kwargs)  # type: ignore[call-overload]  # (kwargs typed per option)
    fully_shard(module, mesh=one_rank_mesh(), **kwargs)  # type: ignore[call-overload]
    return module


def _sequential_mlp(**kwargs: object) -> nn.Module:  # test_train_parity_single_group's model, its linears sharded
    torch.manual_seed(42)
    mlp = nn.Sequential(nn.Linear(16, 15), nn.ReLU(), nn.Linear(15, 8))
    return _shard(mlp, [mlp[0], mlp[2]], **kwargs)


class _MLP(nn.Module):  # torch.testing._internal.common_fsdp.MLP
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.in_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)

    def forward(self, x: T) -> T:
        out: T = self.out_proj(F.relu(self.in_proj(x)))
        return out


def _root_only_mlp(dtype: torch.dtype | None = None) -> nn.Module:  # test_param_registration_after_forward
    torch.manual_seed(42)
    mlp = _shard(_MLP(4), [])
    return mlp.to(dtype) if dtype is not None else mlp  # test_to_float64_after_init: cast after fully_shard


def _largest_dim(param: nn.Parameter) -> Shard:  # test_train_parity_single_group_shard_largest_dim
    return Shard(param.shape.index(max(param.shape)))


class _Block(nn.Module):
    """A pre-norm transformer block (causal attention, GELU MLP): common_dtensor's TransformerBlock, smaller."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x: T) -> T:
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d))
        out: T = x + self.fc2(F.gelu(self.fc1(self.norm2(x))))
        return out


class _Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(64, 16)
        self.layers = nn.ModuleList([_Block(), _Block()])
        self.norm = nn.LayerNorm(16)
        self.out = nn.Linear(16, 64, bias=False)

    def forward(self, ids: T) -> T:
        h = self.emb(ids)
        for layer in self.layers:
            h = layer(h)
        out: T = self.out(self.norm(h))
        return out


def _transformer(**kwargs: object) -> nn.Module:  # test_train_parity_multi_group's sharding: each block, then root
    torch.manual_seed(42)
    model = _Transformer()
    return _shard(model, list(model.layers), **kwargs)


def _randn(*shape: int, dtype: torch.dtype = torch.float32) -> Callable[[int], tuple[T]]:
    return lambda step: (torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(step)),)


_Workload = tuple[Callable[[], nn.Module], Callable[[int], tuple[T, ...]]]
WORKLOADS: dict[str, _Workload] = {
    "single_group_shard_dim0": (_sequential_mlp, _randn(4, 16)),
    "single_group_largest_dim": (lambda: _sequential_mlp(shard_placement_fn=_largest_dim), _randn(4, 16)),
    "no_reshard_after_forward": (lambda: _sequential_mlp(reshard_after_forward=False), _randn(4, 16)),
    "bf16_params": (
        lambda: _sequential_mlp(mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16)),
        _randn(4, 16),
    ),
    "root_only": (_root_only_mlp, _randn(2, 4)),
    "float64_after_init": (lambda: _root_only_mlp(torch.float64), _randn(2, 4, dtype=torch.float64)),
    "transformer": (
        _transformer,
        lambda step: (torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(step)),),
    ),
}
IN_CI = {"single_group_largest_dim"}  # (conftest slices the sweep too: it keeps this one)


def _full(t: T) -> T:
    return t.full_tensor() if isinstance(t, DTensor) else t.detach()


def _train(
    make: Callable[[], nn.Module],
    inputs: Callable[[int], tuple[T, ...]],
    compile_fn: CompileFn,
    make_compiled: Callable[[], nn.Module] | None = None,
) -> None:
    """Three Adam steps on two identically built modules, one called eagerly, one compiled (`make_compiled` builds
    it where it differs): the outputs, each parameter's type after forward, its gradient after backward (FSDP2's
    reduce-scattered DTensor) and its value after the steps equal eager's."""
    eager, model = make(), (make_compiled or make)()
    compiled = compile_fn(model)
    optims = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (eager, model)]
    for step in range(3):
        x = inputs(step)
        expected, got = eager(*x), compiled(*x)
        assert [type(p) for p in model.parameters()] == [type(p) for p in eager.parameters()], step
        torch.testing.assert_close(got, expected)
        for out in (expected, got):
            torch.autograd.backward(cast(T, out).float().square().mean())
        for (name, p), q in zip(eager.named_parameters(), model.parameters(), strict=True):
            assert p.grad is not None and q.grad is not None, name
            torch.testing.assert_close(_full(q.grad), _full(p.grad), msg=f"step {step}: {name}.grad")
        for optim in optims:
            optim.step()
            optim.zero_grad(set_to_none=step % 2 == 0)
    for (name, p), q in zip(eager.named_parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(_full(q), _full(p), msg=name)


def _module_compile(model: Callable[..., object]) -> Callable[..., object]:  # test_disable_compiling_hooks
    torch._dynamo.reset()
    cast(nn.Module, model).compile(backend="subclassaot")
    return model


TRAINING_ENTRIES: dict[str, CompileFn] = {"dynamo": _dynamo, "module_compile": _module_compile}


@pytest.mark.parametrize("entry", ["dynamo", pytest.param("module_compile", marks=pytest.mark.slow)])
@pytest.mark.parametrize("workload", [w if w in IN_CI else pytest.param(w, marks=pytest.mark.slow) for w in WORKLOADS])
def test_fully_shard_training_steps_through_torch_compile_match_eager(workload: str, entry: str) -> None:
    make, inputs = WORKLOADS[workload]
    _train(make, inputs, TRAINING_ENTRIES[entry])


@pytest.mark.parametrize(
    "workload",
    ["single_group_shard_dim0", *(pytest.param(w, marks=pytest.mark.slow) for w in ("root_only", "transformer"))],
)
def test_direct_entry_refuses_fsdp2_hooks_by_rule(workload: str) -> None:
    # The direct entry traces the module's call, hooks included, as one program: FSDP2's pre-forward hook reads the
    # sharded parameter's padded storage (its FSDPParam's, no attribute of the module), which a graph would freeze.
    model = WORKLOADS[workload][0]()
    x = WORKLOADS[workload][1](0)
    assert isinstance(model, FSDPModule)
    with pytest.raises(UnsupportedError, match=r"uses a tensor of shape \(\d+,\) .* not a parameter, buffer or tensor"):
        subclassaot.compile(model)(*x)


# --- the direct entry between the hooks: the module calls a compiled function with its unsharded parameters --------


def mlp_body(x: T, w1: T, b1: T, w2: T, b2: T) -> T:
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)


class _CompiledBody(nn.Module):
    def __init__(self, compile_body: bool) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 16)
        self.body: Callable[..., T] = subclassaot.compile(mlp_body) if compile_body else mlp_body

    def forward(self, x: T) -> T:
        return x + self.body(x, self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias)


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({}, id="reshard"),
        pytest.param({"reshard_after_forward": False}, id="no_reshard", marks=pytest.mark.slow),
        pytest.param(
            {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16)}, id="bf16_params", marks=pytest.mark.slow
        ),
    ],
)
def test_compiled_function_between_fsdp2_hooks_trains_as_eager(options: dict[str, object]) -> None:
    # After forward FSDP2 frees the unsharded parameters' storage (resize_(0)); backward re-allocates and refills it
    # before the compiled backward reads what it saved: gradients and parameters after three steps equal eager's.
    def make(compile_body: bool) -> Callable[[], nn.Module]:
        def build() -> nn.Module:
            torch.manual_seed(0)
            model = nn.Sequential(_CompiledBody(compile_body), _CompiledBody(compile_body))
            return _shard(model, list(model), **options)

        return build

    bodies: list[object] = []

    def no_compile(model: Callable[..., object]) -> Callable[..., object]:
        bodies.append(cast(nn.Sequential, model)[0].body)
        return model

    _train(make(False), _randn(4, 16), no_compile, make_compiled=make(True))
    (body,) = bodies
    assert isinstance(body, subclassaot.CompiledFunction) and body.compile_count == 1
