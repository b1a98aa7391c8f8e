"""torch's DTensor (a subclass written for torch.compile) through subclassaot on a one-rank gloo group, in process:
every scenario of dtensor_scenarios against eager by the parity oracle, the mesh guard, and the checker (in process
and by the CLI). Our own ShardedTensor sample is tested beside it (test_distributed.py); the two-rank runs are in
test_dtensor_multiprocess.py."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
import torch
import torch._dynamo
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Placement, Replicate, Shard, distribute_tensor

import subclassaot
from subclassaot.authoring.protocol import flatten_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.tools.dynamo_backend import recording, subclassaot_backend
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


# -- torch's own DTensor compile programs (test/distributed/tensor/test_dtensor_compile.py), on both entries -------
# Each is the body of the torch test named beside it, with its inputs (DTensor.from_local, run_check=False, on the
# one-rank mesh), written afresh; compared with eager through `subclassaot.compile` and through
# `torch.compile(fn, backend=subclassaot)`.

Make = Callable[[], tuple[object, ...]]


def _local(mesh: DeviceMesh, shape: tuple[int, ...], placement: Placement, *, grad: bool = False) -> Make:
    return lambda: (DTensor.from_local(torch.randn(shape, requires_grad=grad), mesh, [placement], run_check=False),)


def _noncontiguous_inputs(mesh: DeviceMesh) -> Make:  # test_dtensor_noncontiguous_output
    def make() -> tuple[object, ...]:
        x, y, z = (torch.randn(s, requires_grad=True) for s in ((4, 16, 4), (4, 16), (4,)))
        return tuple(
            DTensor.from_local(t, mesh, [p], run_check=False)
            for t, p in ((x, Shard(1)), (y, Shard(1)), (z, Replicate()))
        )

    return make


def _permute_linear_permute(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    return torch._C._nn.linear(x.permute(0, 2, 1).contiguous(), y, z).permute(0, 2, 1)


def _branch_on_placement(x: torch.Tensor) -> torch.Tensor:  # test_dtensor_attribute_access_on_intermediate
    tmp = x * 2
    assert isinstance(tmp, DTensor)
    return tmp._local_tensor + (2 if tmp.placements[0].is_shard() else 3)


def _branch_on_mesh(x: torch.Tensor) -> torch.Tensor:  # test_dtensor_dynamo_device_mesh_attrs
    assert isinstance(x, DTensor)
    return x + (1 if x.device_mesh.device_type == "cuda" else 2)


def _gathered_row(x: torch.Tensor) -> torch.Tensor:  # test_dtensor_dynamic
    squared = torch.mul(x, x)
    assert isinstance(squared, DTensor)
    return squared.redistribute(device_mesh=squared.device_mesh, placements=[Replicate()]).to_local()[0]


def _made_inside(mesh: DeviceMesh, kind: str) -> Callable[..., torch.Tensor]:
    """test_dynamo_dtensor_from_local (kwargs too), test_dynamo_dtensor_from_local_dynamic_shapes,
    test_dynamo_dtensor_from_local_redistribute (kwargs too), test_placement_compile's placements as arguments."""

    def fn(x: torch.Tensor, *placements: Placement) -> torch.Tensor:
        if kind == "kwargs":
            d = DTensor.from_local(x, device_mesh=mesh, placements=[Replicate()], run_check=False)
        elif kind == "shape_stride":
            d = DTensor.from_local(x, mesh, [Replicate()], run_check=False, shape=x.shape, stride=x.stride())
        elif kind in ("redistribute", "placements"):
            tripled = DTensor.from_local(x, mesh, list(placements) or [Shard(0)], run_check=False) * 3
            assert isinstance(tripled, DTensor)
            d = tripled.redistribute(device_mesh=mesh, placements=[Replicate()])
        else:
            d = DTensor.from_local(x, mesh, [Replicate()], run_check=False)
        return d.to_local() + 2

    return fn


def _to_local_grad_placements(d: torch.Tensor) -> torch.Tensor:  # test_dynamo_to_local_kwargs
    assert isinstance(d, DTensor)
    return d.to_local(grad_placements=[Shard(0)]) + 2


def _from_local_of_computed(mesh: DeviceMesh) -> Callable[[torch.Tensor], torch.Tensor]:
    def fn(x: torch.Tensor) -> torch.Tensor:  # test_dynamo_to_local_kwargs_forward_hook's output
        return DTensor.from_local(x + 1, mesh, [Replicate()], run_check=False)

    return fn


def _from_local_of_input(mesh: DeviceMesh) -> Callable[[torch.Tensor], torch.Tensor]:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return DTensor.from_local(x, mesh, [Replicate()], run_check=False)

    return fn


def _redistribute_async(mesh: DeviceMesh) -> Callable[[torch.Tensor], torch.Tensor]:
    from torch.distributed._functional_collectives import AsyncCollectiveTensor

    def fn(x: torch.Tensor) -> torch.Tensor:  # test_dynamo_dtensor_from_local_redistribute_async
        d = DTensor.from_local(x, mesh, [Shard(0)], run_check=False)
        out = d.redistribute(mesh, [Replicate()], async_op=True).to_local()
        return out.wait() if isinstance(out, AsyncCollectiveTensor) else out

    return fn


def _in_place_then_views(x: torch.Tensor) -> object:
    x.mul_(2).add_(1)
    return x.view(2, 2, 6), x.t()


class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(5)
        self.net1, self.net2 = torch.nn.Linear(10, 16), torch.nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net2(torch.relu(self.net1(x)))
        return out


def _tensor_parallel_mlp(mesh: DeviceMesh) -> torch.nn.Module:  # test_tp_compile_fullgraph (not sequence parallel)
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    return parallelize_module(_Mlp(), mesh, {"net1": ColwiseParallel(), "net2": RowwiseParallel()})


def _plain(*shape: int) -> Make:
    return lambda: (torch.randn(shape, requires_grad=True),)


def _dtensor_programs(mesh: DeviceMesh) -> dict[str, tuple[Callable[..., object], Make]]:
    return {
        "dtensor_basic": (lambda x: x * x + 2, _local(mesh, (4, 4), Shard(0), grad=True)),
        "fakify_dtensor": (lambda x: x, _local(mesh, (1,), Shard(0))),
        "dtensor_dynamic": (_gathered_row, _local(mesh, (4, 4), Shard(0))),
        "dtensor_attribute_access_on_intermediate": (_branch_on_placement, _local(mesh, (4,), Shard(0))),
        "dtensor_noncontiguous_output": (_permute_linear_permute, _noncontiguous_inputs(mesh)),
        "dynamo_dtensor_from_local": (_made_inside(mesh, "positional"), _plain(1)),
        "dynamo_dtensor_from_local_kwargs": (_made_inside(mesh, "kwargs"), _plain(1)),
        "dynamo_dtensor_from_local_dynamic_shapes": (_made_inside(mesh, "shape_stride"), _plain(4, 6)),
        "dynamo_to_local_kwargs": (_to_local_grad_placements, _local(mesh, (4,), Replicate(), grad=True)),
        "dynamo_dtensor_from_local_redistribute": (_made_inside(mesh, "redistribute"), _plain(2)),
        "dynamo_dtensor_from_local_redistribute_async": (_redistribute_async(mesh), lambda: (torch.ones(2),)),
        "dtensor_dynamo_device_mesh_attrs": (_branch_on_mesh, _local(mesh, (4, 4), Shard(0))),
        "placement_compile_as_arguments": (
            _made_inside(mesh, "placements"),
            lambda: (torch.randn(4, 4, requires_grad=True), Shard(1)),
        ),
        "in_place_then_views": (_in_place_then_views, _local(mesh, (4, 6), Shard(0))),
        "tp_compile_fullgraph": (_tensor_parallel_mlp(mesh), lambda: (torch.rand(20, 10),)),
        # a non-leaf Partial input: the run's clone of it was Replicate (DTensor's clone() of a Partial is)
        "dtensor_partial_placement_graph_output": (lambda x: x * 2, _local(mesh, (4, 4), Partial(), grad=True)),
        "dynamo_to_local_kwargs_forward_hook": (_from_local_of_computed(mesh), _plain(4, 4)),
        "from_local_of_input_returned": (_from_local_of_input(mesh), _plain(4, 4)),
    }


DTENSOR_PROGRAMS = [
    "dtensor_basic",
    "fakify_dtensor",
    "dtensor_dynamic",
    "dtensor_attribute_access_on_intermediate",
    "dtensor_noncontiguous_output",
    "dynamo_dtensor_from_local",
    "dynamo_dtensor_from_local_kwargs",
    "dynamo_dtensor_from_local_dynamic_shapes",
    "dynamo_to_local_kwargs",
    "dynamo_dtensor_from_local_redistribute",
    "dynamo_dtensor_from_local_redistribute_async",
    "dtensor_dynamo_device_mesh_attrs",
    "placement_compile_as_arguments",
    "in_place_then_views",
    "tp_compile_fullgraph",
    "dtensor_partial_placement_graph_output",
    "dynamo_to_local_kwargs_forward_hook",
    "from_local_of_input_returned",
]
# name -> the refusal's pattern (both entries); every other program matches eager.
DTENSOR_REFUSALS = {
    # eager's local tensor is a no_grad view of x + 1 that requires grad; the compiled one came back a view (of a
    # DTensor base eager does not have) whose local tensor required no grad
    # (the wrapper-over-history rule, Note [Autograd Sees The Wrapper], names it first since session 50)
    "dynamo_to_local_kwargs_forward_hook": r"inner tensor 0 \(DTensor\) requires grad in eager|a DTensor the program "
    r"built around inner tensors with autograd history",
    # the output came back a leaf DTensor over x's storage: no gradient reached x
    "from_local_of_input_returned": r"is a DTensor a custom autograd.Function built around a view of an input",
}
NO_GRAPH = {"fakify_dtensor"}  # Dynamo returns its input without a graph


def _dynamo_compile(fn: Callable[..., object], *, backend: object = "eager") -> Callable[..., object]:
    compiled: Callable[..., object] = torch.compile(fn, backend=subclassaot_backend, options={"backend": str(backend)})
    return compiled


@pytest.mark.parametrize("entry", ["direct", "dynamo"])
@pytest.mark.parametrize("name", DTENSOR_PROGRAMS)
def test_torch_dtensor_program_matches_eager(mesh: DeviceMesh, name: str, entry: str) -> None:
    fn, make = _dtensor_programs(mesh)[name]
    torch._dynamo.reset()
    compile_fn = _dynamo_compile if entry == "dynamo" else None
    if name in DTENSOR_REFUSALS:
        with torch.enable_grad(), pytest.raises(UnsupportedError, match=DTENSOR_REFUSALS[name]):
            assert_matches_eager(fn, make, compile_fn=compile_fn)
        return
    with torch.enable_grad(), recording() as graphs:
        assert_matches_eager(fn, make, compile_fn=compile_fn)
    assert entry == "direct" or name in NO_GRAPH or graphs, "no graph captured by Dynamo ran through subclassaot"
