"""torch's DTensor (a subclass written for torch.compile) through subclassaot on a one-rank gloo group, in process:
every scenario of dtensor_scenarios against eager by the parity oracle, the mesh guard, and the checker (in process
and by the CLI). Our own ShardedTensor sample is tested beside it (test_distributed.py); the two-rank runs are in
test_dtensor_multiprocess.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

import subclassaot
from subclassaot.authoring.protocol import flatten_subclass
from tests.oracle import assert_call_matches_eager, assert_matches_eager
from tests.subclasses import dtensor_scenarios
from tests.subclasses.dtensor_factory import one_rank_mesh


@pytest.fixture(scope="module")
def mesh() -> Iterator[DeviceMesh]:
    # The one-rank group stays up for the worker's life: DTensors other test modules make afterwards
    # (dtensor_factory.one_rank_mesh) resolve their mesh's group by name, which a destroyed group's no longer is.
    one_rank_mesh()
    yield dtensor_scenarios.world_mesh()


@pytest.mark.parametrize("name", list(dtensor_scenarios.ALL))
def test_scenario_on_one_rank(mesh: DeviceMesh, name: str) -> None:
    dtensor_scenarios.ALL[name](mesh)


def test_device_mesh_is_an_opaque_inner_object_not_a_leaf(mesh: DeviceMesh) -> None:
    x = distribute_tensor(torch.randn(4, 6), mesh, [Shard(0)])
    node, leaves = flatten_subclass(x, "args[0]")
    assert node.attrs == ("_local_tensor",) and node.flatten_attrs() == ("_local_tensor", "device_mesh")
    assert len(leaves) == 1 and leaves[0] is x._local_tensor
    assert [o.value for o in node.opaques] == [mesh]


def test_another_mesh_object_recompiles_naming_the_mesh(mesh: DeviceMesh) -> None:
    def make() -> tuple[object, ...]:
        return (distribute_tensor(torch.randn(4, 6), mesh, [Shard(0)]),)

    compiled = assert_matches_eager(lambda x: x * 2, make)
    other = DeviceMesh("cpu", list(range(dist.get_world_size())))

    def make_other() -> tuple[object, ...]:
        return (distribute_tensor(torch.randn(4, 6), other, [Shard(0)]),)

    assert_call_matches_eager(compiled, lambda x: x * 2, make_other)
    reasons = compiled.recompile_reasons  # type: ignore[attr-defined]
    assert len(reasons) == 1 and reasons[0].startswith(
        "args[0].device_mesh: compiled for one DeviceMesh object, got another one equal to it"
    ), reasons
    out = compiled(*make_other())
    assert isinstance(out, DTensor) and out.device_mesh == other  # eager: the mesh its sharding cache holds


def test_partial_output_gets_a_replicate_tangent(mesh: DeviceMesh) -> None:
    """A sum over a sharded dim is Partial; its gradient is traced as Replicate (__coerce_tangent_metadata__)."""
    make = dtensor_scenarios._inputs(mesh, ((4, 6), Shard(1)), grad=True)
    compiled = assert_matches_eager(lambda x: (x * 3).sum(dim=1), make)
    (x,) = make()
    out = compiled(x)
    assert isinstance(out, DTensor) and isinstance(x, DTensor)
    torch.autograd.backward([out], [distribute_tensor(torch.ones(4), mesh, [Replicate()])])
    assert isinstance(x.grad, DTensor)
    torch.testing.assert_close(x.grad.full_tensor(), torch.full((4, 6), 3.0))


def test_check_subclass_passes_on_dtensor(mesh: DeviceMesh) -> None:
    from tests.subclasses.dtensor_factory import replicated

    report = subclassaot.check_subclass(replicated)
    assert report.ok, str(report)


@pytest.mark.slow
def test_check_cli_on_dtensor_factory() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "subclassaot", "check", "tests.subclasses.dtensor_factory:sharded"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failed" in proc.stdout and "protocol                    PASS" in proc.stdout, proc.stdout


def _computed_inside_inference_mode(x: torch.Tensor) -> object:
    with torch.inference_mode():
        y = x.sin() * 2
    return y, x + 1


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_dtensor_computed_inside_inference_mode_matches_eager(mesh: DeviceMesh, grad: bool) -> None:
    """An inference DTensor, its local tensor an inference tensor, as eager's."""
    with torch.set_grad_enabled(grad):
        assert_matches_eager(
            _computed_inside_inference_mode, lambda: (distribute_tensor(torch.randn(4, 6), mesh, [Shard(0)]),)
        )


def test_gradient_takes_the_tangents_placements_as_in_eager(mesh: DeviceMesh) -> None:
    # PyTorch's DTensor: a Replicate tangent for a Shard(1) output gives eager a Replicate gradient; converting the
    # tangent to the traced Shard(1) (its __coerce_same_metadata_as_tangent__, what AOTAutograd does) gave Shard(1)
    # with the same values. A tangent of other placements now gets a backward traced for them (Note [Tangent Retrace]).
    def step(x: torch.Tensor) -> torch.Tensor:
        return x * 2 + x

    grads = []
    for fn in (step, subclassaot.compile(step)):
        x = distribute_tensor(torch.arange(24.0).reshape(4, 6), mesh, [Shard(1)]).requires_grad_()
        out = fn(x)
        out.backward(distribute_tensor(torch.ones(4, 6), mesh, [Replicate()]))  # type: ignore[no-untyped-call]  # untyped in torch
        assert isinstance(x.grad, DTensor)
        grads.append(x.grad)
    assert grads[0].placements == (Replicate(),) and grads[1].placements == grads[0].placements
    torch.testing.assert_close(grads[1].full_tensor(), grads[0].full_tensor())
