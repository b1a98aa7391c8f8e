"""Real subclasses (torch's test subclasses, torchao's) through subclassaot and torch.compile, side by side.

Run: `python benchmarks/real_subclasses.py [--quick]`. Subjects: torch's test subclasses, torch's jagged NestedTensor
(`torch.nested.nested_tensor(..., layout=torch.jagged)`, dim 0 the batch), torch's DTensor (sharded on dim 0 over a
one-rank gloo group on 127.0.0.1, started here and destroyed at the end) and torchao's tensors. Per subclass, one row per compiler: `subclassaot.compile
(backend="eager")` and `torch.compile(backend="aot_eager", fullgraph=True)` (`torch._dynamo.reset()` before each
compile). Columns: the checker (`check_subclass`: FAILs among its rules; the same for both rows), then four programs
compared with eager by the parity oracle on two fresh calls (inference, an input mutation, views returned, training):
`ok` = every output, input after the call, `._base`/storage sharing, version counter and gradient as eager;
`DIFF` = a difference (the first one is printed below the table); `refused` = a clear error at compile time
(subclassaot's UnsupportedError, or a torch.compile error); `crash` = any other exception; `-` = eager itself raises
on the program (the class does not support it). Recompiles: the inference program called at three sizes of dim 0
after marking it dynamic (`policies.mark_dynamic` / `torch._dynamo.mark_dynamic`): compiles after the first.
Per-call: the inference program's median time per call (microseconds) after warm-up; eager's is measured once
per subclass, before anything is compiled.
"""

from __future__ import annotations

import argparse
import copy
import logging
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch._dynamo
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Shard, distribute_tensor

import subclassaot
from policies import mark_dynamic
from subclassaot.errors import UnsupportedError
from subclassaot.tools.parity import EagerRaised, compare_with_eager

logging.getLogger("torchao").setLevel(logging.ERROR)

T = torch.Tensor
Fn = Callable[..., object]
MakeInputs = Callable[[], tuple[object, ...]]
Compiler = Callable[[Fn], Fn]


@dataclass(frozen=True, slots=True, kw_only=True)
class Subject:
    name: str
    factory: Callable[[int], T]  # rows -> a fresh instance with that many rows in dim 0
    inference: tuple[Fn, Callable[[T], tuple[object, ...]]]  # program, instance -> its arguments
    mutation: Fn
    views: Fn
    training: tuple[Fn, MakeInputs]


def _new(cls: type, *inner: T) -> T:
    ctor: Callable[..., T] = cls
    return ctor(*inner)


def _torch_subjects() -> list[Subject]:
    from torch.testing._internal.common_subclass import SubclassWithTensorFactory
    from torch.testing._internal.custom_tensor import ConstantExtraMetadataTensor, CustomTensorPlainOut
    from torch.testing._internal.subclasses import WrapperSubclass
    from torch.testing._internal.two_tensor import TwoTensor

    factories: dict[str, Callable[[int], T]] = {
        "TwoTensor": lambda n: _new(TwoTensor, torch.randn(n, 4), torch.randn(n, 4)),
        "CustomTensorPlainOut": lambda n: _new(CustomTensorPlainOut, torch.randn(n, 4), torch.randn(n, 4)),
        "ConstantExtraMetadataTensor": lambda n: _new(ConstantExtraMetadataTensor, torch.randn(n, 4)),
        "WrapperSubclass": lambda n: _new(WrapperSubclass, torch.randn(n, 4)),
        "SubclassWithTensorFactory": lambda n: _new(SubclassWithTensorFactory, torch.randn(n, 4)),
    }

    def mutate(x: T) -> object:
        x.mul_(2)
        return x + 1

    out = []
    for name, factory in factories.items():

        def make_training(factory: Callable[[int], T] = factory) -> tuple[object, ...]:
            return (factory(3).requires_grad_(True),)

        out.append(
            Subject(
                name=name,
                factory=factory,
                inference=(lambda x: x * 2 + 1, lambda x: (x,)),
                mutation=mutate,
                views=lambda x: (x.t(), x.view(-1)),
                training=(lambda x: (x * x).sum(), make_training),
            )
        )
    return out


def _njt_subjects() -> list[Subject]:
    """Programs from tests/subclasses/test_njt.py; batches of rows of lengths 2, 3, 4, ... (no row of length one:
    a seqlen of 1 is planned static, Note [Zero One Specialization])."""

    def njt(n: int, requires_grad: bool = False) -> T:
        rows = [torch.randn(2 + i % 3, 4) for i in range(n)]
        return torch.nested.nested_tensor(rows, layout=torch.jagged, requires_grad=requires_grad)

    def mutate(x: T) -> object:
        x.mul_(2)
        return x + 1

    return [
        Subject(
            name="NestedTensor (jagged)",
            factory=njt,
            inference=(lambda x: (x.sin() + 1).sum(dim=1), lambda x: (x,)),
            mutation=mutate,
            views=lambda x: (x.transpose(-1, -2), x.unsqueeze(-1), x.values()),
            training=(lambda x: (x.sin() * 2).sum(dim=1), lambda: (njt(3, requires_grad=True),)),
        )
    ]


def _dtensor_subjects(mesh: DeviceMesh) -> list[Subject]:
    """Programs from tests/subclasses/dtensor_scenarios.py on a (rows, 6) DTensor sharded on dim 0."""

    def sharded(n: int) -> T:
        return distribute_tensor(torch.randn(n, 6), mesh, [Shard(0)])

    def mutate(x: T) -> object:
        x.mul_(2)
        return x + 1

    def training() -> tuple[object, ...]:
        return (distribute_tensor(torch.randn(4, 6), mesh, [Shard(1)]).requires_grad_(True),)

    return [
        Subject(
            name="DTensor (1 rank)",
            factory=sharded,
            inference=(lambda x: (x * 2).sum(dim=1), lambda x: (x,)),
            mutation=mutate,
            views=lambda x: (x.t(), x.unsqueeze(0)),
            training=(lambda x: (x * x).sum(), training),
        )
    ]


def _one_rank_mesh() -> DeviceMesh:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, 1, True)  # type: ignore[attr-defined]  # not re-exported in the stub
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    return DeviceMesh("cpu", [0])


def _torchao_subjects() -> list[Subject]:
    try:
        from torchao.float8 import convert_to_float8_training
        from torchao.float8.float8_training_tensor import GemmInputRole, LinearMMConfig, hp_tensor_and_scale_to_float8
        from torchao.quantization import Int8WeightOnlyConfig, quantize_
        from torchao.quantization.quantize_.workflows.nf4.nf4_tensor import linear_nf4, to_nf4
    except ImportError:
        return []

    def float8(n: int) -> T:
        return hp_tensor_and_scale_to_float8(
            torch.randn(n, 8), torch.tensor(2.0), torch.float8_e4m3fn, LinearMMConfig(), GemmInputRole.INPUT
        )

    torch.manual_seed(0)
    float8_mlp = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 16), nn.GELU())
    convert_to_float8_training(float8_mlp)

    def nf4(n: int) -> T:
        return to_nf4(torch.randn(n * 128, 128))  # a multiple of 64 * 256 elements (the default block sizes)

    def qlora() -> tuple[object, ...]:
        a, b = torch.randn(128, 8, requires_grad=True), torch.randn(8, 128, requires_grad=True)
        return torch.randn(4, 128, requires_grad=True), nf4(1), a, b

    def int8(n: int) -> T:
        linear = nn.Sequential(nn.Linear(64, n * 16))
        quantize_(linear, Int8WeightOnlyConfig(set_inductor_config=False))
        weight = linear.get_submodule("0").get_parameter("weight")
        return copy.deepcopy(weight.detach())

    def int8_training() -> tuple[object, ...]:
        return int8(2), torch.randn(4, 64, requires_grad=True), torch.randn(32, requires_grad=True)

    def mutate(x: T) -> object:
        x.mul_(2)
        return x

    return [
        Subject(
            name="Float8TrainingTensor",
            factory=float8,
            inference=(lambda a: a.to_original_precision() * 2, lambda a: (a,)),
            mutation=mutate,
            views=lambda a: (a.t(), a.view(-1), a[1:]),
            training=(float8_mlp, lambda: (torch.randn(8, 32, requires_grad=True),)),
        ),
        Subject(
            name="NF4Tensor",
            factory=nf4,
            inference=(lambda w, x: linear_nf4(x, w), lambda w: (w, torch.randn(4, 128))),
            mutation=mutate,
            views=lambda w: (w.t(), w.view(-1)),
            training=(lambda x, w, a, b: linear_nf4(x, w) + (x @ a) @ b, qlora),
        ),
        Subject(
            name="Int8Tensor",
            factory=int8,
            inference=(lambda w, x: torch.nn.functional.linear(x, w), lambda w: (w, torch.randn(4, 64))),
            mutation=mutate,
            views=lambda w: (w[0:8], w.dequantize()),
            training=(lambda w, x, b: torch.nn.functional.linear(x, w, b).relu().sum(), int8_training),
        ),
    ]


def ours(fn: Fn) -> Fn:
    return subclassaot.compile(fn, backend="eager")


def theirs(fn: Fn) -> Fn:
    torch._dynamo.reset()
    compiled: Fn = torch.compile(fn, backend="aot_eager", fullgraph=True)
    return compiled


def _first_line(e: BaseException) -> str:
    lines = str(e).splitlines()
    return lines[0][:120] if lines else ""


def parity(compiler: Compiler, fn: Fn, make_inputs: MakeInputs, notes: list[str], label: str) -> str:
    """A module is deep-copied for each side; its parameters and buffers are compared as inputs."""
    eager_fn, target = (copy.deepcopy(fn), copy.deepcopy(fn)) if isinstance(fn, nn.Module) else (fn, fn)
    eager_module = eager_fn if isinstance(eager_fn, nn.Module) else None
    module = target if isinstance(target, nn.Module) else None
    try:
        compiled = compiler(target)
        for _ in range(2):
            errors = compare_with_eager(
                compiled, eager_fn, make_inputs, compiled_module=module, eager_module=eager_module
            )
            if errors:
                notes.append(f"{label}: {errors[0]}")
                return "DIFF"
    except EagerRaised:
        return "-"
    except UnsupportedError as e:
        notes.append(f"{label}: refused: {str(e).splitlines()[0][:160]}")
        return "refused"
    except Exception as e:  # any other failure of the compiler is reported as a crash
        inner = e.__cause__ or getattr(e, "inner_exception", None)  # torch's BackendCompilerFailed keeps it there
        cause = f" ({type(inner).__name__}: {_first_line(inner)})" if inner is not None else ""
        notes.append(f"{label}: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}{cause}")
        is_torch_refusal = compiler is theirs and type(e).__module__.startswith("torch._dynamo")
        return "refused" if is_torch_refusal else "crash"
    return "ok"


def recompiles(compiler: Compiler, subject: Subject, notes: list[str], label: str) -> str:
    fn, args_of = subject.inference
    compiled = compiler(fn)
    torch._dynamo.utils.counters.clear()
    try:
        for rows in (2, 3, 4):
            x = subject.factory(rows)
            if compiler is ours:
                mark_dynamic(x, 0)
            else:
                torch._dynamo.mark_dynamic(x, 0)
            compiled(*args_of(x))
    except Exception as e:  # a compile failure at a new size is reported, not raised
        notes.append(f"{label}: recompiles: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}")
        return "crash"
    if isinstance(compiled, subclassaot.CompiledFunction):
        return str(compiled.compile_count - 1)
    return str(torch._dynamo.utils.counters["stats"]["unique_graphs"] - 1)


def per_call_us(compiler: Compiler | None, subject: Subject, calls: int) -> str:
    """`compiler` None: eager."""
    fn, args_of = subject.inference
    args = args_of(subject.factory(2))
    try:
        compiled = fn if compiler is None else compiler(fn)
        for _ in range(3):
            compiled(*args)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            compiled(*args)
            times.append(time.perf_counter() - start)
    except Exception:  # reported as a missing figure; the parity columns say why
        return "-"
    return f"{statistics.median(times) * 1e6:.0f}"


def checker_cell(subject: Subject) -> str:
    report = subclassaot.check_subclass(lambda: subject.factory(3))
    failed = report.failed()
    return "ok" if not failed else f"{len(failed)} FAIL"


def _one(subject: Subject) -> MakeInputs:
    return lambda: (subject.factory(3),)


def _args(subject: Subject) -> MakeInputs:
    return lambda: subject.inference[1](subject.factory(3))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer timed calls")
    calls = 20 if parser.parse_args().quick else 200
    notes: list[str] = []
    header = (
        "| subclass | compiler | checker | inference | mutation | views | training | recompiles | per-call (us) "
        "| eager per-call (us) |"
    )
    rows = [header, "|" + "---|" * 10]
    mesh = _one_rank_mesh()
    try:
        subjects = _torch_subjects() + _njt_subjects() + _dtensor_subjects(mesh) + _torchao_subjects()
        _run(subjects, calls, rows, notes)
    finally:
        dist.destroy_process_group()
    print("\n".join(rows))
    if notes:
        print("\nFirst difference or error per cell:")
        print("\n".join(f"- {n}" for n in notes))


def _run(subjects: list[Subject], calls: int, rows: list[str], notes: list[str]) -> None:
    for subject in subjects:
        eager_us = per_call_us(None, subject, calls)  # first: a torch.compile may change global state after
        checker = checker_cell(subject)
        for label, compiler in (("subclassaot", ours), ("torch.compile", theirs)):
            where = f"{subject.name} / {label}"
            fn = subject.inference[0]
            one, args = _one(subject), _args(subject)
            cells = [
                parity(compiler, fn, args, notes, f"{where} inference"),
                parity(compiler, subject.mutation, one, notes, f"{where} mutation"),
                parity(compiler, subject.views, one, notes, f"{where} views"),
                parity(compiler, *subject.training, notes, f"{where} training"),
                recompiles(compiler, subject, notes, where),
                per_call_us(compiler, subject, calls),
                eager_us,
            ]
            rows.append(f"| {subject.name} | {label} | {checker} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
