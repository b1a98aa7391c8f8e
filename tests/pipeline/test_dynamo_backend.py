"""`torch.compile(fn, backend="subclassaot")`: Dynamo captures, each captured graph goes through our pipeline.

Every program is checked against eager with the parity oracle (`compile_fn` = torch.compile with our backend);
`recording()` checks that the graphs really ran through subclassaot (not a silent eager fallback).
See Note [Dynamo Captures, The Pipeline Compiles].
"""

from __future__ import annotations

import copy
import importlib.metadata
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch._dynamo
from torch.testing._internal.two_tensor import TwoTensor

import subclassaot
from subclassaot.errors import UnsupportedError
from subclassaot.tools.dynamo_backend import CapturedGraph, recording, subclassaot_backend
from subclassaot.tools.explain import CapturedExplanation
from subclassaot.tools.parity import write_outputs
from subclasses.pair import PairTensor
from tests.oracle import assert_call_matches_eager, assert_matches_eager

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def dynamo_compile(fn: Callable[..., object], *, backend: object = "eager", **options: int) -> Callable[..., object]:
    """The oracle's `compile_fn`: torch.compile with our backend (by function: the installed entry point is tested
    in a fresh process below), the oracle's backend as the inner backend."""
    compiled: Callable[..., object] = torch.compile(
        fn, backend=subclassaot_backend, options={"backend": str(backend), **options}
    )
    return compiled


def check(fn: Callable[..., object], make: Callable[[], tuple[object, ...]], *, graphs: int = 1, **kw: object) -> None:
    with recording() as calls:
        assert_matches_eager(fn, make, compile_fn=dynamo_compile, **kw)  # type: ignore[arg-type]
    assert len({id(g) for g, _ in calls}) >= graphs, "the program did not run through subclassaot"


# ----------------------------------------------------------------------------- what Dynamo brings


def broken_mutation(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.add_(1)
    torch._dynamo.graph_break()
    y.mul_(x)
    return x.view(-1)[:2]


def test_graph_break_keeps_mutations_and_aliases() -> None:
    check(broken_mutation, lambda: (torch.randn(2, 3), torch.randn(2, 3)), graphs=2)


def branchy(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)
    if x.sum() > 0:  # data-dependent: Dynamo breaks the graph here
        return x.t()
    return x + float(x.max().item())


def test_data_dependent_control_flow() -> None:
    check(branchy, lambda: (torch.randn(3, 3),), graphs=2)
    check(branchy, lambda: (-torch.rand(3, 3),), graphs=2)


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.bn = torch.nn.BatchNorm1d(4)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.get_buffer("calls").add_(1)
        out: torch.Tensor = self.bn(self.lin(x)).relu()
        return out


def test_module_state_parameters_and_buffers() -> None:
    check(Net(), lambda: (torch.randn(5, 4),))


def test_training_graph_gradients() -> None:
    def fn(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return (w * x).sin().sum(0)

    check(fn, lambda: (torch.randn(3, 2, requires_grad=True), torch.randn(3, 2)))


def make_pair() -> torch.Tensor:
    return PairTensor.from_tensor(torch.randn(2, 3))


def make_two() -> torch.Tensor:
    return make_two_sized(2, 3)


@pytest.mark.parametrize("make", [make_pair, make_two], ids=["PairTensor", "TwoTensor"])
def test_subclass_inputs(make: Callable[[], torch.Tensor]) -> None:
    def fn(p: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        p.add_(y)
        return p.view(-1) * 2

    check(fn, lambda: (make(), torch.randn(2, 3)))


@pytest.mark.parametrize("make", [make_pair, make_two], ids=["PairTensor", "TwoTensor"])
def test_subclass_inputs_training(make: Callable[[], torch.Tensor]) -> None:
    def fn(p: torch.Tensor) -> torch.Tensor:
        return (p * p).sum(0)

    check(fn, lambda: (make().requires_grad_(),))


def unsqueeze_in_place(p: torch.Tensor) -> tuple[()]:
    p.unsqueeze_(-1)
    return ()


def resize_in_place(p: torch.Tensor) -> tuple[()]:
    p.resize_((1, 1, 4))
    return ()


@pytest.mark.parametrize("fn", [unsqueeze_in_place, resize_in_place], ids=["unsqueeze_", "resize_"])
def test_in_place_metadata_op_of_a_wrapper_subclass_runs_its_dispatch_eagerly(fn: Callable[..., object]) -> None:
    """Dynamo breaks the graph at the op and ran it eagerly with its frame hook on: it compiled the subclass's
    __torch_dispatch__ as a frame and failed inside (fuzz seed 27 through torch.compile: an internal error and an
    IndexError in its guards). Note [Dynamo Captures, The Pipeline Compiles]."""
    with torch.no_grad():
        assert_matches_eager(fn, lambda: (PairTensor.from_tensor(torch.randn(3, 2, 4)),), compile_fn=dynamo_compile)


def make_two_sized(*size: int) -> torch.Tensor:
    out: torch.Tensor = TwoTensor(torch.randn(*size), torch.randn(*size))  # type: ignore[no-untyped-call]
    return out


@pytest.mark.parametrize("make", [torch.randn, make_two_sized], ids=["plain", "TwoTensor"])
def test_dynamic_shapes_from_dynamo_compile_once(make: Callable[..., torch.Tensor]) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x.view(-1) + x.size(0)

    compiled = torch.compile(fn, backend=subclassaot_backend, options={"backend": "eager"}, dynamic=True)
    with recording() as calls:
        for n in (3, 4, 6):
            assert_call_matches_eager(compiled, fn, lambda n=n: (make(n, 2),))  # type: ignore[misc]
    graphs = {id(g): g for g, _ in calls}
    assert len(graphs) == 1
    (graph,) = graphs.values()
    assert graph.compiled.compile_count == 1  # the sizes Dynamo made symbols stay symbols in our trace


# ----------------------------------------------------------------------------- a whole training step


def train_step(model: torch.nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> torch.Tensor:
    loss: torch.Tensor = model(x).pow(2).mean()
    loss.backward()  # type: ignore[no-untyped-call]
    opt.step()
    opt.zero_grad()
    return loss


def test_training_step_matches_eager_over_steps() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    eager_model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    eager_opt = torch.optim.SGD(eager_model.parameters(), lr=0.1, momentum=0.9)
    step = dynamo_compile(train_step)
    with recording() as calls:
        for _ in range(4):
            x = torch.randn(6, 4)
            torch.testing.assert_close(step(model, opt, x), train_step(eager_model, eager_opt, x))
            for (name, got), expected in zip(
                model.state_dict().items(), eager_model.state_dict().values(), strict=True
            ):
                torch.testing.assert_close(got, expected, msg=name)
            for p in model.parameters():
                assert p.grad is None
    assert any(isinstance(g, CapturedGraph) for g, _ in calls)


def test_direct_path_refuses_a_training_step_pointing_to_the_backend() -> None:
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(UnsupportedError, match=r'torch\.compile\(step, backend="subclassaot"\)'):
        subclassaot.compile(train_step, backend="eager")(model, opt, torch.randn(2, 4))

    def closure_step(x: torch.Tensor) -> torch.Tensor:
        loss: torch.Tensor = model(x).sum()
        loss.backward()  # type: ignore[no-untyped-call]
        return loss

    with pytest.raises(UnsupportedError, match=r"calls backward\(\).*backend=\"subclassaot\""):
        subclassaot.compile(closure_step, backend="eager")(torch.randn(2, 4))


# ----------------------------------------------------------------------------- guards, explain, options


def test_guards_dynamo_holds_are_not_repeated() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    compiled = dynamo_compile(fn)
    with recording() as calls:
        compiled(torch.randn(2, 3))
    ((_, entry),) = calls
    source = entry.guards.source
    assert ".dtype" not in source and "expected type" not in source and "size(0)" not in source
    assert "storage_offset()" in source  # Dynamo does not guard the offset: ours stays
    # A changed dtype fails Dynamo's guard: Dynamo recompiles and hands us a new graph, never the old one.
    assert_call_matches_eager(compiled, fn, lambda: (torch.randn(2, 3, dtype=torch.float64),))
    assert_call_matches_eager(compiled, fn, lambda: (torch.randn(5, 3)[1:],))  # offset 3: our guard recompiles


def test_explain_shows_each_captured_graph() -> None:
    compiled = dynamo_compile(broken_mutation)
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    before = x.clone()
    explanation = subclassaot.explain(compiled, x, y)
    assert isinstance(explanation, CapturedExplanation)
    assert len(explanation.graphs) == 2
    text = str(explanation)
    assert "captured graph 0 of 2" in text and "captured graph 1 of 2" in text
    assert "copy_ the new value" in text  # the first graph's epilogue writes x back
    assert "args[0] = L['x']" in text  # each graph's inputs in the user's words
    assert torch.equal(x, before)  # explained on copies


def test_explain_a_compiled_module_leaves_its_state_alone() -> None:
    net = Net()
    stats = net.bn.running_mean
    assert stats is not None
    running_mean = stats.clone()
    explanation = subclassaot.explain(dynamo_compile(net), torch.randn(5, 4))
    assert isinstance(explanation, CapturedExplanation)
    assert "_buffers['running_mean']" in str(explanation)
    assert "data mutated" in explanation.graphs[0].inputs_text()  # the running stats, written by the graph
    assert torch.equal(stats, running_mean)


def test_explain_refuses_a_function_compiled_with_another_backend() -> None:
    compiled = torch.compile(broken_mutation, backend="eager")
    with pytest.raises(ValueError, match="no graph captured by torch.compile ran through subclassaot"):
        subclassaot.explain(compiled, torch.randn(2), torch.randn(2))


def test_options() -> None:
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="unknown option.*'inner'"):
        torch.compile(lambda x: x + 1, backend=subclassaot_backend, options={"inner": 1})(torch.randn(2))
    torch._dynamo.reset()
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="mode='max-autotune'.*not supported"):
        torch.compile(lambda x: x + 1, backend=subclassaot_backend, mode="max-autotune")(torch.randn(2))
    torch._dynamo.reset()
    compiled = dynamo_compile(lambda x: x.mul_(2) + 1, recompile_limit=1, dynamic=False)
    assert_call_matches_eager(compiled, lambda x: x.mul_(2) + 1, lambda: (torch.randn(3),))


class _Triple(torch.autograd.Function):
    """A backward that is not the derivative of the forward: differentiating the forward would be wrong."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        x: torch.Tensor = ctx.saved_tensors[0]
        return g * x.cos() * 3


class _WithIndex(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        index = x.argmax()
        ctx.mark_non_differentiable(index)
        return x * 2, index

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor, _: torch.Tensor) -> torch.Tensor:
        return g * 5


class _Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 7


def _saves_input(x: torch.Tensor, y: torch.Tensor) -> object:
    return _Triple.apply(x * 2).sum() + y  # type: ignore[no-untyped-call]


def _non_differentiable_output(x: torch.Tensor, y: torch.Tensor) -> object:
    return _WithIndex.apply(x + y)  # type: ignore[no-untyped-call]


def _dirty_intermediate(x: torch.Tensor, y: torch.Tensor) -> object:
    return _Dirty.apply(x.clone()) * y  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("fn", [_saves_input, _non_differentiable_output, _dirty_intermediate])
def test_custom_function_in_a_training_graph_runs_its_own_backward(fn: Callable[..., object], backend: str) -> None:
    """Dynamo captures a custom autograd.Function as one `autograd_function_apply` node, whose call applies an
    autograd.Function running the captured forward and backward graphs: the pipeline takes it as it takes the
    program's own Functions (Note [Custom Functions]), with the Function's backward, as eager."""

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)

    with torch.enable_grad():
        assert_matches_eager(fn, make, compile_fn=lambda f, **_: dynamo_compile(f, backend=backend))


def _saved_input_written_after_the_apply(x0: torch.Tensor, x1: torch.Tensor) -> object:
    out = _Triple.apply(x0)  # type: ignore[no-untyped-call]
    with torch.no_grad():
        x1.view(1, -1).diagonal(0, 1, 0).mul_(3.0)  # x1 is x0: the saved input, written after the save
    return (out,)


def test_custom_function_saved_input_written_after_the_apply_raises_as_eager() -> None:
    """torch's captured Function hands saved values to its backward by closure (no version check); ours saves what
    the program saved with ctx.save_for_backward, so the backward raises as eager's does (fuzz 79600 #229)."""

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn((), requires_grad=True)
        return x, x

    with torch.enable_grad():
        assert_matches_eager(_saved_input_written_after_the_apply, make, compile_fn=lambda f, **_: dynamo_compile(f))


# ----------------------------------------------------------------------------- installed entry point


def test_entry_point_is_declared() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    section = re.search(r"^\[project\.entry-points\.torch_dynamo_backends\]\n(?P<body>(?:[^\[].*\n)*)", text, re.M)
    assert section is not None, "pyproject.toml declares no torch_dynamo_backends entry point"
    assert 'subclassaot = "subclassaot.tools.dynamo_backend:subclassaot_backend"' in section["body"]


def test_backend_by_name_in_a_fresh_process() -> None:
    installed = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="torch_dynamo_backends")}
    if "subclassaot" not in installed:
        pytest.skip("this environment's install of subclassaot predates the entry point: `pip install -e .` again")
    program = (
        "import sys, torch\n"
        "def f(x):\n    x.add_(1)\n    return x.view(-1)\n"
        "x = torch.ones(2, 2)\n"
        "out = torch.compile(f, backend='subclassaot', options={'backend': 'eager'})(x)\n"
        "assert 'subclassaot' in sys.modules, 'the backend did not load subclassaot'\n"
        "assert out._base is x and bool((x == 2).all()), (out, x)\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


def test_an_inference_tensor_handed_to_a_training_graph_runs_like_eager() -> None:
    # fuzz seed 76200 #372 (Dynamo entry, PairTensor inputs): Dynamo hands the graph an inference tensor the program
    # made inside an inference_mode block; the compiled Function read its version counter (it has none) to guard a
    # double backward's rerun
    def f(x0: torch.Tensor) -> tuple[()]:
        with torch.inference_mode():
            t0 = x0.mul(0.5)
        x0.transpose_(0, 0)
        t0.select(0, 0)
        x0.expand((-1, 4, 2))
        return ()

    @torch.enable_grad()
    def make() -> tuple[torch.Tensor]:
        b0 = PairTensor.from_tensor(torch.randn(2, 4, 2))
        b0.requires_grad_()
        return (b0.clone(),)

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=dynamo_compile)


_VIEWS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "slice": lambda x: x[0:0:1],
    "view": lambda x: x.view(2, 2),
    "select": lambda x: x.select(0, 1),
}


@pytest.mark.parametrize("write", [True, False], ids=["add_", "no_write"])
@pytest.mark.parametrize("view", sorted(_VIEWS))
@pytest.mark.parametrize(
    "make", [lambda: torch.randn(4), lambda: PairTensor.from_tensor(torch.randn(4))], ids=["plain", "PairTensor"]
)
def test_view_taken_before_the_input_requires_grad(make: Callable[[], torch.Tensor], view: str, write: bool) -> None:
    # fuzz seed 116100 #104 (Dynamo entry): Dynamo runs the requires_grad_() after our graph, whose output view of x0
    # was replayed after the epilogue's write, at x0's new counter: it stayed a leaf where eager's, made before the
    # write, is stale and rebuilds its grad_fn from x0 once x0 requires grad (Note [Views That Raise After A Bump]).
    # (The direct entry refuses this program: the input requires grad before its graph runs.)
    def f(x0: torch.Tensor) -> tuple[torch.Tensor]:
        t0 = _VIEWS[view](x0)
        if write:
            x0.add_(2.0)
        x0.requires_grad_()
        return (t0,)

    with torch.enable_grad():
        check(f, lambda: (make(),))
        check(f, lambda: (make(),), after_call=write_outputs)
