"""torch's DTensor through subclassaot, each scenario `fn(mesh)` over a real gloo DeviceMesh: raise on failure.

Run in-process on a world of 1 (tests/subclasses/test_dtensor.py) and on a world of 2 in spawned ranks
(distributed_worker, tests/subclasses/test_dtensor_multiprocess.py). Every program is compared with eager by the
parity oracle (outputs, inputs after the call, aliasing, grads, version counters), on a second call through the
cache as well. Ranks run the same programs in the same order, so the collectives of eager and compiled code pair up.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Placement, Replicate, Shard, distribute_tensor

import subclassaot
from policies import mark_dynamic
from subclassaot.api import CompiledFunction
from tests.backends import CountingBackend, RecordingBackend
from tests.oracle import assert_call_matches_eager, assert_matches_eager

Scenario = Callable[[DeviceMesh], None]


def world_mesh() -> DeviceMesh:
    """A one-dimensional CPU mesh over every rank of the default (gloo) group."""
    return DeviceMesh("cpu", list(range(dist.get_world_size())))


def _inputs(
    mesh: DeviceMesh, *specs: tuple[tuple[int, ...], Placement], grad: bool = False
) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        out = []
        for shape, placement in specs:
            d = distribute_tensor(torch.randn(shape), mesh, [placement])
            out.append(d.requires_grad_(True) if grad else d)
        return tuple(out)

    return make


def pointwise(mesh: DeviceMesh) -> None:
    for placement in (Shard(0), Shard(1), Replicate()):
        make = _inputs(mesh, ((4, 6), placement), ((4, 6), placement))
        assert_matches_eager(lambda x, y: x * 2 + y.sin(), make)
        assert_matches_eager(
            lambda x, y: torch.relu(x) * y, _inputs(mesh, ((4, 6), placement), ((4, 6), placement), grad=True)
        )


def reductions(mesh: DeviceMesh) -> None:
    make = _inputs(mesh, ((4, 6), Shard(0)))
    assert_matches_eager(lambda x: x.sum(), make)
    assert_matches_eager(lambda x: x.sum(dim=1), make)
    assert_matches_eager(lambda x: x.mean(dim=0), make)
    assert_matches_eager(lambda x: (x * x).sum(), _inputs(mesh, ((4, 6), Shard(1)), grad=True))


def in_place(mesh: DeviceMesh) -> None:
    def scale(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        x.add_(y)
        return x + 1

    assert_matches_eager(scale, _inputs(mesh, ((4, 6), Shard(0)), ((4, 6), Shard(0))))


def to_local(mesh: DeviceMesh) -> None:
    def local(x: torch.Tensor) -> torch.Tensor:
        assert isinstance(x, DTensor)
        y = x * 3
        assert isinstance(y, DTensor)
        return y.to_local() + 1

    assert_matches_eager(local, _inputs(mesh, ((4, 6), Shard(0))))
    assert_matches_eager(local, _inputs(mesh, ((4, 6), Shard(0)), grad=True))


def redistribute(mesh: DeviceMesh) -> None:
    """Shard -> Replicate is an all_gather in the graph (functional collectives), run at run time."""

    def gather(x: torch.Tensor) -> torch.Tensor:
        assert isinstance(x, DTensor)
        return x.redistribute(mesh, [Replicate()]) * 2

    def reshard(x: torch.Tensor) -> torch.Tensor:
        assert isinstance(x, DTensor)
        return x.redistribute(mesh, [Shard(1)]) + 1

    backend = RecordingBackend()
    assert_matches_eager(gather, _inputs(mesh, ((4, 6), Shard(0))), backend=backend)
    targets = [str(n.target) for gm in backend.graphs for n in gm.graph.nodes if n.op == "call_function"]
    if mesh.size() > 1:  # one rank: redistribution is local, no collective
        assert any("all_gather_into_tensor" in t for t in targets), targets
        assert any("wait_tensor" in t for t in targets), targets
    assert_matches_eager(gather, _inputs(mesh, ((4, 6), Shard(1)), grad=True))
    assert_matches_eager(reshard, _inputs(mesh, ((4, 6), Shard(0))))


def views(mesh: DeviceMesh) -> None:
    make = _inputs(mesh, ((4, 6), Shard(0)))
    assert_matches_eager(lambda x: x.t(), make)
    assert_matches_eager(lambda x: x.view(4, 2, 3), make)
    assert_matches_eager(lambda x: x.unsqueeze(0) * 2, make)
    assert_matches_eager(lambda x: x.transpose(0, 1).sum(dim=0), _inputs(mesh, ((4, 6), Shard(0)), grad=True))


class _MLP(torch.nn.Module):
    def __init__(self, mesh: DeviceMesh) -> None:
        super().__init__()
        torch.manual_seed(5)
        up, down = torch.randn(8, 6) * 0.3, torch.randn(6, 8) * 0.3
        # Column-parallel up projection (weight rows sharded), row-parallel down projection (columns sharded).
        self.up = torch.nn.Parameter(distribute_tensor(up, mesh, [Shard(0)]))
        self.down = torch.nn.Parameter(distribute_tensor(down, mesh, [Shard(1)]))
        self.bias = torch.nn.Parameter(distribute_tensor(torch.zeros(6), mesh, [Replicate()]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(torch.nn.functional.linear(x, self.up))
        out = torch.nn.functional.linear(h, self.down) + self.bias
        assert isinstance(out, DTensor)
        return out.redistribute(out.device_mesh, [Replicate()]).to_local()


def tensor_parallel_mlp(mesh: DeviceMesh) -> None:
    """A tensor-parallel MLP with DTensor parameters: forward and grads by the oracle, then 3 SGD steps = eager."""

    def make() -> tuple[object, ...]:
        return (distribute_tensor(torch.randn(5, 6), mesh, [Replicate()]),)

    assert_matches_eager(_MLP(mesh), make, check_grads=True)
    eager, compiled_model = _MLP(mesh), _MLP(mesh)
    compiled = subclassaot.compile(compiled_model)
    for step in range(3):
        (x,) = make()
        losses = []
        for fn, model in ((eager, eager), (compiled, compiled_model)):
            loss = (fn(x) ** 2).sum()
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    assert p.grad is not None
                    p.sub_(0.1 * p.grad)
                    p.grad = None
            losses.append(loss.detach())
        torch.testing.assert_close(losses[1], losses[0], msg=f"step {step}: compiled loss differs from eager")
        for (name, p), q in zip(eager.named_parameters(), compiled_model.parameters(), strict=True):
            assert isinstance(p, DTensor) and isinstance(q, DTensor) and p.placements == q.placements, name
            torch.testing.assert_close(q.full_tensor(), p.full_tensor(), msg=f"step {step}: {name} differs from eager")
    assert compiled.compile_count == 1


def dynamic_batch(mesh: DeviceMesh) -> None:
    """mark_dynamic on the batch dim, sharded or replicated: one compile serves every batch size (a sharded dim is
    `local * world`: policies.dtensor)."""
    for placement in (Shard(0), Replicate()):
        _one_compile_for_every_batch(mesh, placement)
        _automatic_dynamic_batch(mesh, placement)
    _uneven_batches_stay_static(mesh)


def _uneven_batches_stay_static(mesh: DeviceMesh) -> None:
    """Rows 5, 7, 9 sharded over the ranks: uneven on two ranks, so each size is its own static entry there."""
    compiled = None
    for rows in (5, 7, 9):

        def make(rows: int = rows) -> tuple[object, ...]:
            return (distribute_tensor(torch.randn(rows, 3), mesh, [Shard(0)]),)

        if compiled is None:
            compiled = assert_matches_eager(lambda x: (x * 2).sum(dim=1), make)
        else:
            assert_call_matches_eager(compiled, lambda x: (x * 2).sum(dim=1), make)
    assert isinstance(compiled, CompiledFunction)
    assert compiled.compile_count == (3 if mesh.size() > 1 else 2), compiled.recompile_reasons


def _automatic_dynamic_batch(mesh: DeviceMesh, placement: Placement) -> None:
    """Without marks: the second batch size recompiles with the dim dynamic, the third reuses that entry."""
    compiled = None
    for batch in (4, 6, 8):

        def make(batch: int = batch) -> tuple[object, ...]:
            return (distribute_tensor(torch.randn(batch * mesh.size(), 3), mesh, [placement]),)

        if compiled is None:
            compiled = assert_matches_eager(lambda x: (x * 2).sum(dim=1), make)
        else:
            assert_call_matches_eager(compiled, lambda x: (x * 2).sum(dim=1), make)
    assert isinstance(compiled, CompiledFunction)
    assert compiled.compile_count == 2, compiled.recompile_reasons


def _one_compile_for_every_batch(mesh: DeviceMesh, placement: Placement) -> None:
    backend = CountingBackend()
    compiled = None
    for batch in (4, 6, 8):

        def make(batch: int = batch) -> tuple[object, ...]:
            x = distribute_tensor(torch.randn(batch * mesh.size(), 3), mesh, [placement])
            mark_dynamic(x, 0)
            return (x,)

        if compiled is None:
            compiled = assert_matches_eager(lambda x: (x * 2).sum(dim=1), make, backend=backend)
        else:
            assert_call_matches_eager(compiled, lambda x: (x * 2).sum(dim=1), make)
    assert isinstance(compiled, CompiledFunction)
    assert compiled.compile_count == 1, compiled.recompile_reasons


def placement_change_recompiles(mesh: DeviceMesh) -> None:
    """Another placement is another ctx: the entry's guard fails, naming the ctx field and both values."""
    compiled = assert_matches_eager(lambda x: x + 1, _inputs(mesh, ((4, 6), Shard(0))))

    assert_call_matches_eager(compiled, lambda x: x + 1, _inputs(mesh, ((4, 6), Replicate())))
    reasons = compiled.recompile_reasons  # type: ignore[attr-defined]
    assert len(reasons) == 1 and "ctx field [0][0] changed: Shard(dim=0) -> Replicate()" in reasons[0], reasons


ALL: dict[str, Scenario] = {
    f.__name__: f
    for f in (
        pointwise,
        reductions,
        in_place,
        to_local,
        redistribute,
        views,
        tensor_parallel_mlp,
        dynamic_batch,
        placement_change_recompiles,
    )
}
