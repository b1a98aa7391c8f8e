"""One run of the program both analyzes and traces an inference compile, and a training compile without a Function
(Note [Training Through A Joint Graph]: one run): where nothing the analysis finds changes what the trace runs, the
compile runs the program over fakes once, and the compiled call matches eager's as the two-run compile did; elsewhere
the compile runs it as before."""

from __future__ import annotations

import collections
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import pytest
import torch
from torch import nn
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.experimental import proxy_tensor
from torch.utils import _pytree as pytree

import subclassaot
import subclassaot.pipeline.analyze
import subclassaot.pipeline.joint
import subclassaot.pipeline.trace
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline import backward_probe, functional_run
from subclassaot.pipeline.backward_probe import eager_saves
from subclassaot.pipeline.functional_run import run_functional
from subclassaot.pipeline.inputs import unflatten_call
from subclassaot.pipeline.rules import swap_record
from subclassaot.tools.parity import write_outputs
from subclassaot.torch_internals import functional_alias, static_fake_copies, tensors_in
from tests.oracle import assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import nonleaf, pair, pair_nonleaf

T = torch.Tensor


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The functional runs of the program a compile makes, by the stage module that made each."""
    made: list[str] = []
    for module in (subclassaot.pipeline.analyze, subclassaot.pipeline.trace, subclassaot.pipeline.joint):

        def counted(*args: object, _name: str = module.__name__, **kwargs: object) -> object:
            made.append(_name.rsplit(".", 1)[1])
            return run_functional(*args, **kwargs)  # type: ignore[arg-type]  # the pipeline's own arguments

        monkeypatch.setattr(module, "run_functional", counted)
    yield made


def _read(x: T, y: T) -> object:
    return (x * 2 + y).sin()


def _write(x: T, y: T) -> object:
    x.add_(y)
    return x.view(-1) * 2


def _returned_view(x: T, y: T) -> object:
    x.add_(1)
    return x.view(-1), y.t()


def _inplace_view_op(x: T, y: T) -> object:
    x.t_()
    return x + y.t()


def _intermediate_views(x: T, y: T) -> object:
    z = x + y
    return z, z[0], z.t(), x.shape[0] * 2


def _set_onto_other(x: T, y: T) -> object:
    set_to(x, y)
    return x * 2


_PROGRAMS: dict[str, Callable[[T, T], object]] = {
    "read": _read,
    "write": _write,
    "returned_view": _returned_view,
    "inplace_view_op": _inplace_view_op,
    "intermediate_views": _intermediate_views,
    "set_onto_other": _set_onto_other,
}


def _inputs(kind: str) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        if kind == "pair":
            return pair(2, 2), pair(2, 2)
        return torch.randn(2, 2), torch.randn(2, 2)

    return make


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("program", list(_PROGRAMS))
@pytest.mark.parametrize("grad", [False, True])
def test_inference_compile_runs_the_program_once(runs: list[str], program: str, kind: str, grad: bool) -> None:
    # (with grad on and no input requiring grad, the compile is for inference too)
    with torch.enable_grad() if grad else torch.no_grad():
        assert_matches_eager(_PROGRAMS[program], _inputs(kind), calls=2, versions="exact")
    assert runs == ["trace"]


class _Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.1, batch_first=True)

    def forward(self, x: T) -> T:
        return self.layer(x)  # type: ignore[no-any-return]


def test_model_in_eval_runs_once(runs: list[str]) -> None:
    # parameters that require grad, called under no_grad: an inference compile
    torch.manual_seed(0)
    with torch.no_grad():
        assert_matches_eager(_Encoder().eval(), lambda: (torch.randn(2, 5, 16),), calls=2)
    assert runs == ["trace"]


def _gains_grad(x: T, y: T) -> object:
    x.requires_grad_()
    return x * y


def _new_leaf(x: T, y: T) -> object:
    z = (x * 2).requires_grad_()
    return z * y


@pytest.mark.parametrize(
    ("name", "program", "expected"),
    [
        # an input gaining grad: analyzed again, for training, with the flag set
        ("gains_grad", _gains_grad, ["trace", "analyze"]),
        # a new autograd leaf: the trace's run marks it
        ("new_leaf", _new_leaf, ["trace", "trace"]),
    ],
)
def test_analysis_that_changes_the_trace_traces_again(
    runs: list[str], name: str, program: Callable[[T, T], object], expected: list[str]
) -> None:
    with torch.enable_grad():
        assert_matches_eager(program, _inputs("plain"), calls=2)
    assert runs[: len(expected)] == expected


def _grad_inputs(kind: str) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        x, y = _inputs(kind)()
        return cast(T, x).requires_grad_(), y

    return make


def _no_grad_region(x: T, y: T) -> object:
    with torch.no_grad():
        z = x * 2
    return z + x * y


def _native(compiled: Callable[..., object]) -> bool:
    (entry,) = cast(subclassaot.CompiledFunction[..., object], compiled).entries
    return entry.autograd_backward


def _batched_matmul(x: T, y: T) -> object:
    # (matmul folds a batched operand into one mm, or not, by whether the operands require grad)
    return torch.relu(x @ y).sum(0), x.shape[0] * 2


def _matmul_inputs() -> tuple[object, ...]:
    return torch.randn(2, 3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)


@pytest.mark.parametrize(
    ("program", "make_inputs"),
    [(_read, _grad_inputs("plain")), (_batched_matmul, _matmul_inputs)],
    ids=["read", "batched_matmul"],
)
def test_native_training_compile_runs_the_program_once(
    runs: list[str], program: Callable[[T, T], object], make_inputs: Callable[[], tuple[object, ...]]
) -> None:
    # a training compile that trains without a Function: its graph is the one the analysis's run traced, with grad on
    with torch.enable_grad():
        compiled = assert_matches_eager(program, make_inputs, calls=2, versions="exact")
    assert runs == ["trace"] and _native(compiled)


def test_model_in_training_runs_once(runs: list[str]) -> None:
    # parameters that require grad, dropout drawn in the graph: one functional run, gradients as eager's
    torch.manual_seed(0)
    with torch.enable_grad():
        compiled = assert_matches_eager(_Encoder().train(), lambda: (torch.randn(2, 5, 16),), calls=2)
    assert runs == ["trace"] and cast(subclassaot.CompiledModule[_Encoder], compiled).entries[0].autograd_backward


def _written_intermediate(x: T, y: T) -> object:
    z = x * y
    z.relu_()  # (a write, of no input's storage)
    return z.sin()


@pytest.mark.parametrize("program", [_read, _written_intermediate], ids=["read", "written_intermediate"])
def test_the_native_check_copies_the_inputs_once_and_makes_no_fx_code(
    monkeypatch: pytest.MonkeyPatch, program: Callable[[T, T], object]
) -> None:
    # backward_probe.records_as_eager: eager's run leaves the inputs as it found them, so the graph runs on the same
    # fakes (one static copy of the inputs); it runs as the eager backend's callable, which the compile reuses, so fx
    # never generates the graph module's own code
    copies: list[int] = []

    def counted(values: Sequence[object]) -> tuple[object, list[object]]:
        copies.append(len(values))
        return static_fake_copies(values)

    monkeypatch.setattr(backward_probe, "static_fake_copies", counted)
    with torch.enable_grad():
        compiled = assert_matches_eager(program, _grad_inputs("plain"), calls=2, versions="exact")
    (entry,) = cast(subclassaot.CompiledFunction[..., object], compiled).entries
    graph = entry.traced.graph
    assert entry.autograd_backward and copies == [2]
    assert isinstance(graph, _LazyGraphModule) and graph._needs_recompile()


def test_training_through_the_function_traces_as_before(runs: list[str]) -> None:
    # a no_grad region: the graph's run records history eager's lacks, so the Function trains it, whose joint
    # trace gives the forward (the graph the analysis's run traced, with grad on, is dropped)
    with torch.enable_grad():
        compiled = assert_matches_eager(_no_grad_region, _grad_inputs("plain"), calls=2)
    assert runs == ["trace", "joint", "joint"] and not _native(compiled)
    runs.clear()
    # a written input, or subclass inputs: the plan rules the native path out after the analysis's run
    with torch.enable_grad():
        assert_matches_eager(_write, lambda: (torch.randn(2, 2), torch.randn(2, 2, requires_grad=True)), calls=2)
        assert_matches_eager(_read, _grad_inputs("pair"), calls=2)
    assert runs == ["trace", "joint", "joint"] * 2


def test_module_with_buffers_in_training_takes_its_tangents_from_the_analysis(runs: list[str]) -> None:
    # a training-mode BatchNorm writes its running statistics: the Function path, guessed from the module's state
    # that requires no grad before the analysis, which then runs alone; the joint trace's tangents are the analysis's
    # (Note [Training Through A Joint Graph], bullet "Tangents"): no forward example run before the joint trace
    torch.manual_seed(0)
    with torch.enable_grad():
        assert_matches_eager(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4)).train(), lambda: (torch.randn(3, 4),))
    assert runs == ["analyze", "joint"]


def _buffer_written_with_grad(x: T, w: T, buf: T) -> object:
    buf.copy_(x * w)  # (buf requires no grad: after the call it does, through the write)
    return (x * w).sum(1), buf.detach() * 2


def _grad_input_written(x: T, w: T, buf: T) -> object:
    with torch.no_grad():
        w.mul_(2)  # (the forward example runs w as a clone)
    return x * w, buf + 1


def _grad_input_returned(x: T, w: T, buf: T) -> object:
    return x * w, w, buf


def _grad_input_view_returned(x: T, w: T, buf: T) -> object:
    buf.add_(1)
    return x * w, w.view(-1)


def _three_inputs(kind: str) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        if kind == "pair":
            return pair(2, 2), pair(2, 2).requires_grad_(), pair(2, 2)
        return torch.randn(2, 2), torch.randn(2, 2, requires_grad=True), torch.randn(2, 2)

    return make


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize(
    ("program", "from_analysis"),
    [
        (_read, True),
        (_buffer_written_with_grad, True),
        (_grad_input_written, False),
        (_grad_input_returned, False),
        (_grad_input_view_returned, False),
    ],
)
def test_function_training_takes_its_tangents_from_the_analysis(
    runs: list[str], program: Callable[..., object], from_analysis: bool, kind: str
) -> None:
    # Through the Function (another backend than eager: no native path), through the oracle with gradients and the
    # inputs after the call: the joint trace's tangents are read from the analysis's run where that run is the
    # forward example's (plain inputs, none that requires grad written; every forward output fresh or an update),
    # else the forward example runs as before (an input that requires grad written or returned: its clone there)
    make = _grad_inputs(kind) if program is _read else _three_inputs(kind)
    with torch.enable_grad():
        assert_matches_eager(program, make, calls=2, backend=_graph_as_is)
    if from_analysis and kind == "plain":
        assert runs == ["analyze", "joint"], runs
    else:  # (subclass inputs: the example, then the joint trace, and its retraces for the subclass's tangents)
        assert runs[:3] == ["analyze", "joint", "joint"], runs


def _graph_as_is(gm: torch.fx.GraphModule, example_inputs: object) -> Callable[..., object]:
    return gm


def test_training_with_another_backend_runs_the_analysis_alone(runs: list[str]) -> None:
    # (no native path off the eager backend: the analysis runs alone)
    with torch.enable_grad():
        assert_matches_eager(_read, _grad_inputs("plain"), calls=2, backend=_graph_as_is)
    assert runs[0] == "analyze"


def _read_aliases(x: T, y: T) -> object:
    return x * 2 + y.view(2, 2)


def _write_aliases(x: T, y: T) -> object:
    x.add_(1)
    return x * 2 + y.view(2, 2)


def _aliased_inputs() -> tuple[object, ...]:
    base = torch.randn(4)
    return base.view(2, 2), base


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        # aliased inputs the program leaves untouched, analyzed apart (Note [Synthetic Bases]): that analysis's run
        # traces the graph too
        (_read_aliases, ["trace"]),
        # written: the run apart finds a group touched, and the grouped analysis decides, then the trace
        (_write_aliases, ["trace", "analyze", "trace"]),
    ],
    ids=["read", "written"],
)
def test_aliased_inputs_left_untouched_run_once(
    runs: list[str], program: Callable[[T, T], object], expected: list[str]
) -> None:
    with torch.no_grad():
        assert_matches_eager(program, _aliased_inputs, calls=2, versions="exact")
    assert runs == expected, runs


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 4, bias=False)
        self.head = nn.Linear(4, 4, bias=False)
        self.head.weight = self.embed.weight  # (one parameter under two names: an alias group of the module's state)

    def forward(self, x: T) -> T:
        return self.head(self.embed(x).relu())  # type: ignore[no-any-return]


def test_a_tied_weight_in_training_runs_once(runs: list[str]) -> None:
    # a parameter the module holds twice (GPT-2's tied embedding), only read: the analysis apart traces the graph of
    # the native path too; gradients as eager's
    torch.manual_seed(0)
    with torch.enable_grad():
        compiled = assert_matches_eager(_Tied(), lambda: (torch.randn(3, 4),), calls=2)
    assert runs == ["trace"], runs
    assert cast(subclassaot.CompiledModule[_Tied], compiled).entries[0].autograd_backward


def _view_set_under_grad(x: T) -> object:
    t = x.reshape((1, 3, 1))
    set_to(t, t.mul(2.0))  # (the graph reads the input's original: its value before the set_())
    return (t,)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_input_originals_are_traced_without_make_fx_dispatch(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    # Each dense leaf's original (an alias of it as the program got it, `run_functional`'s) gets the graph node
    # make_fx would give it, made directly rather than by make_fx's dispatch of the op (compile time, issue 29): a
    # program that reads its inputs has make_fx dispatch no alias, in inference and in training (plain: natively;
    # pair: through the Function's joint trace), and a graph that reads an original computes eager's values
    traced: list[object] = []  # the alias ops make_fx's proxy mode dispatched
    proxy_call = proxy_tensor.proxy_call

    def counted(mode: Any, func: Any, *args: Any) -> object:
        if func is torch.ops.aten.alias.default:
            traced.append(func)
        return proxy_call(mode, func, *args)

    monkeypatch.setattr(proxy_tensor, "proxy_call", counted)
    with torch.no_grad():
        assert_matches_eager(_read, _inputs(kind), calls=2)
    with torch.enable_grad():
        assert_matches_eager(_read, _grad_inputs(kind), calls=2)
    assert traced == []
    made = pair_nonleaf if kind == "pair" else nonleaf
    with torch.enable_grad():
        assert_matches_eager(_view_set_under_grad, lambda: (made(3, 4, 1).diagonal(0, 0, 1),), calls=2)


def _returns_its_input(x: T, y: T) -> object:
    return x, (x * 2 + y).sin()


@pytest.mark.parametrize(
    ("program", "make", "clones", "aliases"),
    [
        (_read, _grad_inputs("plain"), 0, 1),  # x only read: run as itself, its own original (y's an alias)
        (_read, lambda: (torch.randn(2, 2).requires_grad_(), torch.randn(2, 2).requires_grad_()), 0, 0),
        (_returns_its_input, _grad_inputs("plain"), 1, 2),  # x returned: its clone makes the output a fresh tensor
        (_write, lambda: (nonleaf(2, 2), torch.randn(2, 2).requires_grad_()), 1, 1),  # x written (y read: itself)
    ],
    ids=["read", "two_read", "returned", "written"],
)
def test_the_joint_trace_runs_read_only_leaves_without_their_clones(
    monkeypatch: pytest.MonkeyPatch,
    program: Callable[..., object],
    make: Callable[[], tuple[object, ...]],
    clones: int,
    aliases: int,
) -> None:
    # The joint trace runs each input gradients are taken for as a clone (Note [Training Through A Joint Graph]) but a
    # plain leaf the program only reads, in a program returning no input nor a view of one: that clone was a copy the
    # partition dropped (compile time, issue 29); such a leaf is its own original too, where every other dense leaf's
    # is an alias the graph drops. The clones make_fx traces and the aliases the joint trace makes, the same graphs'
    # values as eager's
    traced: list[object] = []
    proxy_call = proxy_tensor.proxy_call

    def counted(mode: Any, func: Any, *args: Any) -> object:
        if func is torch.ops.aten.clone.default:
            traced.append(func)
        return proxy_call(mode, func, *args)

    made: list[str] = []  # the originals' aliases, by the run that made them (the joint trace's, or another's)
    trace_joint = subclassaot.pipeline.joint.trace_joint
    in_joint = [False]

    def counted_alias(t: T) -> T:
        made.append("joint" if in_joint[0] else "other")
        return functional_alias(t)

    def joint_traced(*args: Any, **kwargs: Any) -> object:
        in_joint[0] = True
        try:
            return trace_joint(*args, **kwargs)
        finally:
            in_joint[0] = False

    monkeypatch.setattr(proxy_tensor, "proxy_call", counted)
    monkeypatch.setattr(functional_run, "functional_alias", counted_alias)
    monkeypatch.setattr(subclassaot.pipeline.joint, "trace_joint", joint_traced)
    with torch.enable_grad():
        assert_matches_eager(program, make, calls=1, backend=_graph_as_is)
    assert len(traced) == clones
    assert made.count("joint") == aliases


def _item(x: T, y: T) -> object:
    return x * y.sum().item()


def test_a_run_failing_inside_the_trace_refuses_as_the_analysis(runs: list[str]) -> None:
    # (`.item()` raises another error under make_fx than over fakes alone: the analysis's refusal is the compile's)
    with torch.no_grad(), pytest.raises(UnsupportedError, match="depends on tensor values"):
        subclassaot.compile(_item)(torch.randn(2, 2), torch.randn(2, 2))
    assert runs[:2] == ["trace", "analyze"]


def test_function_training_probes_its_saves_in_one_backward(monkeypatch: pytest.MonkeyPatch) -> None:
    # The Function's probe of which leaves eager grades before a written save's node raises (the comment on
    # `_UnpackOrder`): the program's runs on the probe's fakes, one (the saves found and graded on the same run: the
    # inputs are leaves, `_shares_its_run`; two before), and one backward for the one output, where a backward per
    # save ran before (one per weight the block saves)
    runs: list[int] = []  # per compile: the program's runs on the probe's static fakes
    backwards: list[int] = []  # per compile: the probe's backwards
    saves = eager_saves
    unflatten = unflatten_call
    backward = torch.autograd.backward

    probing: list[bool] = [False]

    def probed(*args: Any) -> object:
        runs.append(0)
        backwards.append(0)
        probing[0] = True
        try:
            return saves(*args)
        finally:
            probing[0] = False

    def counted_run(*args: Any) -> Any:
        if probing[0]:
            runs[-1] += 1
        return unflatten(*args)

    def counted_backward(*args: Any, **kwargs: Any) -> None:
        if probing[0]:
            backwards[-1] += 1
        backward(*args, **kwargs)

    monkeypatch.setattr(subclassaot.api, "eager_saves", probed)
    monkeypatch.setattr(backward_probe, "unflatten_call", counted_run)
    monkeypatch.setattr(torch.autograd, "backward", counted_backward)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(64, 2))
    with torch.enable_grad():
        compiled = assert_matches_eager(model.train(), lambda: (torch.randn(2, 3, 4, 4),), calls=2)
    assert not cast(subclassaot.CompiledModule[nn.Sequential], compiled).entries[0].autograd_backward
    assert runs == [1] and backwards == [1], (runs, backwards)


def _inner_of_view_written(x: Any) -> object:
    a = x[1:].a  # (PairTensor's dispatch makes the view's inner tensor below autograd: a counter of its own)
    a[0].mul_(2)
    return a, x.t().b


def test_the_per_op_walks_read_what_pytree_reads_and_skip_what_no_rule_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    # Compile time (issue 29): the swap mode's per-op rules find an op's tensors by `tensors_in` (exact tuples, lists
    # and dicts walked directly, any other pytree node by pytree), in pytree's order; and the walk for plain tensors a
    # subclass's dispatch took out (SwapRecord.note_taken_out) runs only once such a view was made, the compiled call
    # matching eager's either way
    a, b, c = torch.ones(1), torch.zeros(2), nn.Parameter(torch.ones(3))
    point = collections.namedtuple("point", "x y")
    trees = [(), a, None, 3, ((a, 1, None), {"x": b, "y": [c, 2.0]}), {"k": point(a, (b,))}, torch.ones(2, 3).max(1)]
    trees += [collections.OrderedDict(z=a, y=b), {2: a, 1: b}, (torch.float32, [None, {"q": (c, pair(2))}])]
    for tree in trees:
        expected = [t for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]
        found = tensors_in(tree)
        assert len(found) == len(expected) and all(f is e for f, e in zip(found, expected, strict=True)), tree
    walks: list[str] = []

    def walked(tree: object) -> list[torch.Tensor]:
        walks.append(sys._getframe(1).f_code.co_name)
        return tensors_in(tree)

    monkeypatch.setattr(swap_record, "tensors_in", walked)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            assert_matches_eager(_write, lambda: (torch.randn(2, 2), torch.randn(2, 2)), calls=2)
        assert "pin" in walks and "note_taken_out" not in walks, walks
        walks.clear()
        with torch.set_grad_enabled(grad):
            assert_matches_eager(_inner_of_view_written, lambda: (pair(3, 2),), after_call=write_outputs)
        assert "note_taken_out" in walks
        walks.clear()
