"""ShardedTensor scenarios, each `fn(mesh)`: raise on failure. Run on a world of 2 (distributed_worker) or of 1.

Every scenario seeds torch identically on every rank, so the single-process reference (plain tensors) is the same
everywhere and each rank checks its own view of the result against it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F

import subclassaot
from policies import mark_dynamic
from subclasses.distributed import MeshSpec, Partial, Placement, Replicate, Shard, ShardedTensor, distribute_tensor

aten = torch.ops.aten
PLACEMENTS: tuple[Placement, ...] = (Replicate(), Shard(0), Shard(1), Partial())


def _close(got: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    full = got.full_tensor() if isinstance(got, ShardedTensor) else got
    torch.testing.assert_close(full, expected, msg=lambda m: f"{what}: {m}")


def _sharded(t: torch.Tensor) -> ShardedTensor:
    assert isinstance(t, ShardedTensor), f"expected a ShardedTensor, got {type(t).__name__}"
    return t


def _dist(t: torch.Tensor, mesh: MeshSpec, p: Placement) -> ShardedTensor:
    return distribute_tensor(t, mesh, (p,))


def redistribute_all_pairs(mesh: MeshSpec) -> None:
    """Every (src, dst) pair, on an even (4, 6) and an uneven (5, 3) tensor; values and gradients."""
    torch.manual_seed(0)
    for shape in ((4, 6), (5, 3)):
        full = torch.randn(shape)
        weight = torch.randn(shape)
        for src, dst in itertools.product(PLACEMENTS, PLACEMENTS):
            x = _dist(full, mesh, src).requires_grad_(True)
            y = _sharded(x).redistribute((dst,))
            _close(y, full, f"{src} -> {dst} on {shape}")
            loss = _sharded((y * weight).sum()).full_tensor()
            torch.autograd.backward(loss)
            assert x.grad is not None
            _close(x.grad, weight, f"grad of {src} -> {dst} on {shape}")


def _binary_cases() -> list[tuple[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]]]:
    return [
        ("add", torch.add),
        ("sub", torch.sub),
        ("mul", torch.mul),
        ("div", lambda a, b: a / (b.abs() + 1)),
        ("relu(a)+b", lambda a, b: torch.relu(a) + b),
        ("a*2+b", lambda a, b: a * 2 + b),
        ("a+1", lambda a, b: a + 1),
    ]


def pointwise_parity(mesh: MeshSpec) -> None:
    """Binary pointwise ops over every pair of placements, and broadcasting against a plain row."""
    torch.manual_seed(1)
    a, b, row = torch.randn(4, 6), torch.randn(4, 6), torch.randn(6)
    for (name, op), pa, pb in itertools.product(_binary_cases(), PLACEMENTS, PLACEMENTS):
        out = op(_dist(a, mesh, pa), _dist(b, mesh, pb))
        _close(out, op(a, b), f"{name}({pa}, {pb})")
    for p in PLACEMENTS:
        _close(_dist(a, mesh, p) * row, a * row, f"{p} * plain row")
        _close(_dist(a, mesh, p) + _dist(row, mesh, Shard(0)), a + row, f"{p} + Shard(0) row")


def matmul_parity(mesh: MeshSpec) -> None:
    """mm over every pair of placements, linear (column and row parallel), bmm."""
    torch.manual_seed(2)
    a, b = torch.randn(4, 6), torch.randn(6, 8)
    for pa, pb in itertools.product(PLACEMENTS, PLACEMENTS):
        _close(_dist(a, mesh, pa) @ _dist(b, mesh, pb), a @ b, f"mm({pa}, {pb})")
    w, bias = torch.randn(8, 6), torch.randn(8)
    col = F.linear(_dist(a, mesh, Replicate()), _dist(w, mesh, Shard(0)), _dist(bias, mesh, Shard(0)))
    assert _sharded(col).placements == (Shard(1),)
    _close(col, F.linear(a, w, bias), "column-parallel linear")
    w2 = torch.randn(3, 8)
    row = F.linear(col, _dist(w2, mesh, Shard(1)))
    assert _sharded(row).placements == (Partial(),)
    _close(row, F.linear(F.linear(a, w, bias), w2), "row-parallel linear")
    x3, y3 = torch.randn(4, 3, 6), torch.randn(4, 6, 5)
    for p in (Replicate(), Shard(0)):
        _close(torch.bmm(_dist(x3, mesh, p), _dist(y3, mesh, p)), torch.bmm(x3, y3), f"bmm({p})")
    _close(F.linear(_dist(x3, mesh, Shard(0)), _dist(w, mesh, Replicate())), F.linear(x3, w), "3-d linear")


def reduction_parity(mesh: MeshSpec) -> None:
    """sum / mean over every dim set, keepdim or not; a reduced Shard dim gives Partial."""
    torch.manual_seed(3)
    full = torch.randn(4, 6)
    for p in PLACEMENTS:
        x = _dist(full, mesh, p)
        _close(x.sum(), full.sum(), f"sum({p})")
        _close(x.mean(), full.mean(), f"mean({p})")
        for dims, keep in itertools.product(((0,), (1,), (0, 1)), (False, True)):
            _close(x.sum(dims, keepdim=keep), full.sum(dims, keepdim=keep), f"sum({p}, {dims}, {keep})")
            _close(x.mean(dims, keepdim=keep), full.mean(dims, keepdim=keep), f"mean({p}, {dims}, {keep})")
    reduced = _dist(full, mesh, Shard(1)).sum(1)
    assert _sharded(reduced).placements == (Partial(),)
    kept = _dist(full, mesh, Shard(1)).sum(0)
    assert _sharded(kept).placements == (Shard(0),)


def view_parity(mesh: MeshSpec) -> None:
    """view / reshape / transpose / t / permute / unsqueeze / expand / slicing, sharded dim kept where possible."""
    torch.manual_seed(4)
    full = torch.randn(4, 3, 6)
    cases: Sequence[tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = [
        ("view(12, 6)", lambda t: t.view(12, 6)),
        ("reshape(4, 18)", lambda t: t.reshape(4, 18)),
        ("view(-1)", lambda t: t.reshape(-1)),
        ("transpose(0, 2)", lambda t: t.transpose(0, 2)),
        ("permute(2, 0, 1)", lambda t: t.permute(2, 0, 1)),
        ("unsqueeze(1)", lambda t: t.unsqueeze(1)),
        ("slice dim 1", lambda t: t[:, 1:]),
        ("expand", lambda t: t.unsqueeze(0).expand(2, 4, 3, 6)),
        ("view then back", lambda t: t.view(12, 6).view(4, 3, 6)),
    ]
    placements: tuple[Placement, ...] = (Replicate(), Shard(0), Shard(1), Shard(2), Partial())
    for (name, op), p in itertools.product(cases, placements):
        _close(op(_dist(full, mesh, p)), op(full), f"{name} on {p}")
    merged = _dist(full, mesh, Shard(0)).view(12, 6)
    assert _sharded(merged).placements == (Shard(0),)
    assert _sharded(_dist(full, mesh, Shard(2)).transpose(0, 2)).placements == (Shard(0),)
    matrix = _dist(torch.randn(4, 6), mesh, Shard(0))
    assert _sharded(matrix.t()).placements == (Shard(1),) and matrix.t().stride() == (1, 6), matrix.t().stride()


# -- tensor-parallel MLP -------------------------------------------------------------------------------------------
class TPMLP(torch.nn.Module):
    """Column-parallel Linear -> GELU -> row-parallel Linear, parameters as ShardedTensors."""

    def __init__(self, ref: torch.nn.Module, mesh: MeshSpec) -> None:
        super().__init__()
        fc1, fc2 = ref.fc1, ref.fc2
        assert isinstance(fc1, torch.nn.Linear) and isinstance(fc2, torch.nn.Linear)
        self.w1 = torch.nn.Parameter(_dist(fc1.weight.detach(), mesh, Shard(0)))
        self.b1 = torch.nn.Parameter(_dist(fc1.bias.detach(), mesh, Shard(0)))
        self.w2 = torch.nn.Parameter(_dist(fc2.weight.detach(), mesh, Shard(1)))
        self.b2 = torch.nn.Parameter(_dist(fc2.bias.detach(), mesh, Replicate()))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.gelu(F.linear(x, self.w1, self.b1))  # Shard(1): column parallel
        y = _sharded(F.linear(h, self.w2)).redistribute((Replicate(),)) + self.b2  # Partial -> all_reduce -> Replicate
        return y, (y * y).mean()


class RefMLP(torch.nn.Module):
    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(d, h)
        self.fc2 = torch.nn.Linear(h, d)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.fc2(F.gelu(self.fc1(x)))
        return y, (y * y).mean()


def _sgd_step(params: Sequence[torch.nn.Parameter], lr: float) -> None:
    with torch.no_grad():
        for p in params:
            assert p.grad is not None
            p.add_(p.grad, alpha=-lr)
            p.grad = None


def train_tp_mlp(mesh: MeshSpec, backend: str = "eager", steps: int = 3) -> subclassaot.CompiledModule[TPMLP]:
    """A few SGD steps of the compiled TP MLP against the plain single-process reference (outputs, grads, params)."""
    torch.manual_seed(5)
    ref = RefMLP(8, 16)
    tp = TPMLP(ref, mesh)
    compiled = subclassaot.compile(tp, backend=backend)
    for step in range(steps):
        x = torch.randn(4, 8)
        y_ref, loss_ref = ref(x)
        loss_ref.backward()
        y, loss = compiled(_dist(x, mesh, Replicate()))
        _close(y, y_ref, f"step {step} output")
        _close(loss, loss_ref, f"step {step} loss")
        torch.autograd.backward(loss)
        for (name, p), p_ref in zip(tp.named_parameters(), ref.parameters(), strict=True):
            assert p.grad is not None and isinstance(p.grad, ShardedTensor), name
            assert p.grad.placements == _sharded(p).placements, (name, p.grad.placements)
            assert p_ref.grad is not None
            _close(p.grad, p_ref.grad, f"step {step} grad {name}")
        _sgd_step(list(tp.parameters()), 0.1)
        _sgd_step(list(ref.parameters()), 0.1)
        for (name, p), p_ref in zip(tp.named_parameters(), ref.parameters(), strict=True):
            _close(p, p_ref.detach(), f"step {step} param {name} after SGD")
    assert compiled.compile_count == 1, compiled.recompile_reasons
    return compiled


def tp_mlp_compiled(mesh: MeshSpec) -> None:
    compiled = train_tp_mlp(mesh)
    entry = compiled.entries[0]
    forward = entry.forward if entry.forward is not None else entry.traced.graph
    assert forward is not None
    code = forward.code
    if mesh.world_size > 1:
        assert "_c10d_functional.all_reduce" in code and "wait_tensor" in code, code


def copy_into_input_training(mesh: MeshSpec) -> None:
    """An input ShardedTensor (Shard(0)) is written by copy_ from another one (Replicate) in a training step."""

    def step(state: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        state.copy_(x * 2)
        # A Replicate ShardedTensor loss: .full_tensor() here would hit test_to_local_output_keeps_grad, and a
        # Partial loss would hit partial_output_tangent (both pipeline issues).
        return _sharded((x * w).sum()).redistribute((Replicate(),))

    torch.manual_seed(6)
    full_x, full_w = torch.randn(4, 6), torch.randn(4, 6)
    compiled = subclassaot.compile(step, backend="eager")
    for i in range(2):
        state = _dist(torch.zeros(4, 6), mesh, Shard(0))
        w = _dist(full_w, mesh, Shard(1)).requires_grad_(True)
        loss = compiled(state, _dist(full_x + i, mesh, Replicate()), w)
        assert _sharded(state).placements == (Shard(0),)
        _close(state, (full_x + i) * 2, f"call {i}: state after copy_")
        _close(loss, (full_x + i).mul(full_w).sum(), f"call {i}: loss")
        torch.autograd.backward(loss)
        assert w.grad is not None
        _close(w.grad, full_x + i, f"call {i}: grad of w")
    assert compiled.compile_count == 1, compiled.recompile_reasons


def partial_output_tangent(mesh: MeshSpec) -> None:
    """A Partial output: autograd's tangent (ones_like) is Replicate, so the pipeline must not read it as Partial."""
    full_w = torch.randn(4, 6)
    w = _dist(full_w, mesh, Shard(1)).requires_grad_(True)
    loss = subclassaot.compile(lambda w: (w * 3).sum(), backend="eager")(w)
    assert _sharded(loss).placements == (Partial(),)
    torch.autograd.backward(loss)
    assert w.grad is not None
    _close(w.grad, torch.full_like(full_w, 3.0), "grad through a Partial output")


def placements_recompile(mesh: MeshSpec) -> None:
    """Changing an input's placements recompiles, with a reason naming the ctx field."""
    compiled = subclassaot.compile(lambda x: (x * 2).full_tensor(), backend="eager")
    full = torch.randn(4, 6)
    _close(compiled(_dist(full, mesh, Shard(0))), full * 2, "Shard(0)")
    _close(compiled(_dist(full, mesh, Replicate())), full * 2, "Replicate")
    assert compiled.compile_count == 2, compiled.recompile_reasons
    reason = compiled.recompile_reasons[0]
    assert "ctx field placements[0] changed: Shard(dim=0) -> Replicate()" in reason, reason


def dynamic_batch(mesh: MeshSpec) -> None:
    """mark_dynamic on the batch dim of a batch-sharded activation: new batch sizes reuse one compiled entry."""
    torch.manual_seed(7)
    w = torch.randn(6, 5)
    compiled = subclassaot.compile(lambda x, w: (x @ w).relu().sum(1).full_tensor(), backend="eager")
    for batch in (4, 6, 8):
        full = torch.randn(batch * mesh.world_size, 6)
        x = _dist(full, mesh, Shard(0))
        mark_dynamic(x, 0)
        _close(compiled(x, _dist(w, mesh, Replicate())), (full @ w).relu().sum(1), f"batch {batch}")
    assert compiled.compile_count == 1, compiled.recompile_reasons


ALL = [
    "redistribute_all_pairs",
    "pointwise_parity",
    "matmul_parity",
    "reduction_parity",
    "view_parity",
    "tp_mlp_compiled",
    "copy_into_input_training",
    "partial_output_tangent",
    "placements_recompile",
    "dynamic_batch",
]
