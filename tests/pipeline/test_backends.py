"""What backends see and what the pipeline does with what they return (see tests/backends.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Literal, cast

import pytest
import torch

import subclassaot
import subclassaot.api
from subclassaot.errors import BackendError, UnsupportedError
from subclasses.pair import PairTensor
from tests.backends import CountingBackend, MutatingBackend, RecordingBackend, mutating_nodes
from tests.oracle import assert_matches_eager


def mutates(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.mul_(2)
    y.t_()
    return x + y.t()


def make() -> tuple[object, ...]:
    return torch.randn(3, 3), torch.randn(3, 3)


def test_backend_sees_a_purely_functional_graph() -> None:
    recording = RecordingBackend()
    assert_matches_eager(mutates, make, backend=recording)
    assert recording.graphs
    for gm in recording.graphs:
        assert mutating_nodes(gm) == [], gm.code


def test_training_graphs_are_functional_too() -> None:
    recording = RecordingBackend()
    assert_matches_eager(
        mutates, lambda: (torch.randn(3, 3, requires_grad=True).clone(), torch.randn(3, 3)), backend=recording
    )
    assert len(recording.graphs) >= 1
    for gm in recording.graphs:
        assert mutating_nodes(gm) == [], gm.code


def test_keep_input_mutations_puts_the_copy_in_the_graph_and_stays_correct() -> None:
    # x.mul_(2): a data write of an input, kept in the user's graph as one copy_ into x's placeholder
    def writes(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x + y

    recording = RecordingBackend()
    assert_matches_eager(writes, make, backend=recording, compile_kwargs={"keep_input_mutations": True})
    assert recording.graphs
    for gm in recording.graphs:
        found = mutating_nodes(gm)
        assert len(found) == 1 and "copy_" in found[0], gm.code
        (write,) = (n for n in gm.graph.nodes if n.op == "call_function" and "copy_" in str(n.target))
        assert write.args[0] is next(n for n in gm.graph.nodes if n.op == "placeholder"), gm.code


@pytest.mark.parametrize("pair", [False, True])
def test_keep_input_mutations_with_views_of_the_written_input(pair: bool) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return x.view(-1) * 2

    def make_one() -> tuple[object, ...]:
        base = torch.randn(2, 3)
        return ((PairTensor(base, base.clone() + 1) if pair else base)[1],)

    recording = RecordingBackend()
    assert_matches_eager(f, make_one, backend=recording, compile_kwargs={"keep_input_mutations": True})
    assert recording.graphs


def test_keep_input_mutations_is_off_for_inputs_requiring_grad() -> None:
    # in training the write is autograd's to record: the epilogue's, whatever the option says
    recording = RecordingBackend()
    make_grad = lambda: (torch.randn(3, 3, requires_grad=True).clone(), torch.randn(3, 3))  # noqa: E731
    assert_matches_eager(mutates, make_grad, backend=recording, compile_kwargs={"keep_input_mutations": True})
    assert recording.graphs
    for gm in recording.graphs:
        assert mutating_nodes(gm) == [], gm.code


def test_counting_backend_counts_one_graph_per_inference_compile() -> None:
    counting = CountingBackend()
    c = subclassaot.api.compile(mutates, backend=counting)
    c(*make())  # type: ignore[arg-type]
    c(*make())  # type: ignore[arg-type]
    assert counting.count == 1
    c(torch.randn(3, 3, dtype=torch.float64), torch.randn(3, 3, dtype=torch.float64))
    assert counting.count == 2


def test_backend_that_mutates_its_inputs_is_rejected() -> None:
    broken = MutatingBackend()
    c = subclassaot.api.compile(mutates, backend=broken)
    with pytest.raises(BackendError, match=r"mutat|input"):
        c(*make())  # type: ignore[arg-type]


def test_double_backward_works_on_the_eager_backend() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * x * x).sum()

    x = torch.randn(3, requires_grad=True)
    (g,) = torch.autograd.grad(subclassaot.compile(f, backend="eager")(x), x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x)
    x2 = x.detach().requires_grad_(True)
    (e,) = torch.autograd.grad(f(x2), x2, create_graph=True)
    (ee,) = torch.autograd.grad(e.sum(), x2)
    torch.testing.assert_close(gg, ee)


def test_double_backward_through_inductor_is_refused_clearly() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x * x).sum()

    x = torch.randn(3, requires_grad=True)
    y = subclassaot.compile(f, backend="inductor")(x)
    with pytest.raises(UnsupportedError, match="double backward"):
        torch.autograd.grad(y, x, create_graph=True)


def _clone_into_pair(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor]:
    t0 = x0.clone()
    t2 = t0.view(()).unsqueeze(0)
    x1.copy_(t0)
    return (t2,)


def test_a_fresh_output_inductor_returns_over_an_input_is_copied() -> None:
    # Found by `fuzz --backend inductor --subclass subclasses.pair:example --seed 60000` (program 145): inductor
    # drops the clone of x0 as a no-op and returned t2 as a view of x0 (offset 2, sharing its storage) where eager's
    # is a new tensor (Note [What A Backend Receives And Returns]).
    from subclasses.pair import PairTensor

    def make() -> tuple[torch.Tensor, torch.Tensor]:
        with torch.enable_grad():
            b0 = torch.randn(4, requires_grad=True).clone()
        return b0.select(0, -2), PairTensor.from_tensor(torch.randn(1, 1))

    with torch.enable_grad():
        assert_matches_eager(_clone_into_pair, make, calls=2, backend="inductor")


def _one_tensor_for_aliasing_outputs(gm: torch.fx.GraphModule, example_inputs: object) -> Callable[..., object]:
    """A backend that returns, as inductor does, one tensor for two outputs that alias entirely (`alias(t)` and `t`)."""

    def run(*args: object) -> list[object]:
        outs = list(cast(list[object], gm(*args)))
        for k, o in enumerate(outs):
            if isinstance(o, torch.Tensor) and o._base is not None:
                same = [p for p in outs if p is o._base and p.shape == o.shape and p.stride() == o.stride()]
                outs[k] = same[0] if same else o
        return outs

    return run


def _data_assigned_its_sine(x0: torch.Tensor) -> tuple[torch.Tensor]:
    t0 = x0.sin()
    x0.data = t0  # x0's new value and the output t0: one buffer
    return (t0,)


@pytest.mark.parametrize("backend", [_one_tensor_for_aliasing_outputs, "inductor"], ids=["one tensor", "inductor"])
def test_one_tensor_a_backend_returns_for_two_outputs_keeps_the_fresh_outputs_history(backend: object) -> None:
    # The training Function marked the input's new value non-differentiable; the same tensor was the fresh output t0,
    # which then came back without history (eager's has sin's).
    def make() -> tuple[torch.Tensor]:
        return (torch.randn(2, 2, requires_grad=True).view(-1),)

    with torch.enable_grad():
        assert_matches_eager(_data_assigned_its_sine, make, backend=backend)


def test_inductor_gets_a_copy_of_the_graph() -> None:
    # inductor rewrites the graph it compiles in place; the entry keeps the pipeline's own (explain shows it)
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.clone().view(-1) * 2

    compiled = subclassaot.compile(f, backend="inductor")
    compiled(torch.randn(2, 2))
    (entry,) = compiled.entries
    assert entry.traced.graph is not None
    assert any(n.target is torch.ops.aten.view.default for n in entry.traced.graph.graph.nodes)


# Input writes kept in the eager backend's graph, as the in-place form of the op computing the value where nothing
# can tell (Note [What A Backend Receives And Returns]): the rewritten graph against the functional one plus a copy.


def _value_then_double(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    v = x + 1
    return v, v * 2


def _old_read_after(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    v = x + 1
    return v, x * 3  # x's old elements read after the value is computed


def _view_of_old_read_after(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    row = x[0]
    v = x.sin()
    return v, row * 3  # read through a view taken before the value


def _value_aliased_by_an_output(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    v = x * 2
    return v, v.view(-1)  # the view would alias the input after an in-place write


def _value_through_a_view(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return ((x.t() + 1).t(),)  # its last op is a view


def _value_with_itself(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (x.mul(x),)  # mul_(x, x): the other argument is the input


IN_PLACE = [
    ("value then double", _value_then_double, "add_"),
    ("old read after", _old_read_after, None),
    ("view of old read after", _view_of_old_read_after, None),
    ("value aliased by an output", _value_aliased_by_an_output, None),
    ("value through a view", _value_through_a_view, None),
    ("value with itself", _value_with_itself, None),
]


@pytest.mark.parametrize(("fn", "op"), [pytest.param(f, op, id=name) for name, f, op in IN_PLACE])
def test_input_writes_in_place_only_where_nothing_can_tell(fn: object, op: str | None) -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from subclassaot.pipeline import backends

    assert callable(fn)
    gm = make_fx(fn, tracing_mode="fake")(torch.randn(3, 3))
    rewritten, written = backends.with_input_writes(gm, [(0, 0)], in_place=True)
    assert written == frozenset({0})
    targets = [str(n.target) for n in rewritten.graph.nodes if n.op == "call_function"]
    copies = targets.count("aten.copy_.default")
    if op is None:
        assert copies == 1, rewritten.code
    else:
        assert copies == 0 and f"aten.{op}.Tensor" in targets, rewritten.code
    x = torch.randn(3, 3)
    expected = gm(x.clone())
    written_x = x.clone()
    got = rewritten(written_x)
    assert torch.equal(written_x, expected[0])
    for k in range(1, len(expected)):
        assert torch.equal(got[k], expected[k])
        assert got[k].untyped_storage().data_ptr() != written_x.untyped_storage().data_ptr()


# The eager backend's own straight-line code for a graph (backends._straight): the graph module's results, RNG draws
# included, on graphs with multi-output ops, keyword arguments, constants, tensor attributes and symbolic sizes.


def _many_kinds(x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    values, indices = torch.sort(x, 0)
    joined = torch.cat([values, y], dim=0).to(torch.float64)
    zeros = x.new_zeros((2, x.shape[1]), dtype=torch.int32)
    torch.rand(3)  # an unused draw still advances the generator
    quotient = torch.div(x, y + 2, rounding_mode="floor")  # a string argument, bound by reference
    return [joined.sum(), indices, zeros, x[1:2], quotient * torch.tensor([1.0, 2.0, 3.0]), torch.rand(2)]


@pytest.mark.parametrize("mode", ["real", "symbolic"])
def test_the_eager_backends_code_computes_what_the_graph_module_does(mode: Literal["real", "symbolic"]) -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from subclassaot.pipeline import backends

    gm = make_fx(_many_kinds, tracing_mode=mode)(torch.randn(2, 3), torch.randn(1, 3))
    run = backends.eager_backend(gm, [])
    assert run != gm.forward  # its own code, not fx's
    x, y = torch.randn(2, 3), torch.randn(1, 3)
    torch.manual_seed(0)
    expected = gm(x, y)
    after_expected = torch.rand(1)
    torch.manual_seed(0)
    got = cast(list[torch.Tensor], run(x, y))
    assert torch.equal(torch.rand(1), after_expected)
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert torch.equal(a, b) and a.stride() == b.stride() and a._is_view() == b._is_view()


def test_the_eager_backend_calls_a_binding_only_where_it_dispatches_the_node_itself() -> None:
    """A node's op is called through the tensor method or torch function that dispatches exactly that overload with
    exactly its arguments (checked on meta stand-ins); another overload, a decomposition or filled-in arguments keep
    the OpOverload's own call."""
    from subclassaot.pipeline import backends

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(2, 2)
    nodes = [
        graph.call_function(torch.ops.aten.mul.Tensor, (x, 2)),
        graph.call_function(torch.ops.aten.add.Scalar, (x, 2)),  # x.add(2) dispatches add.Tensor: not this node
        graph.call_function(torch.ops.aten.sum.dim_IntList, (x, [0])),
        graph.call_function(torch.ops.aten.view.default, (x, [-1])),
    ]
    graph.output(nodes)
    twins = [backends._twin(n) for n in nodes]
    assert twins == [torch._C.TensorBase.mul, None, torch._C.TensorBase.sum, torch._C.TensorBase.view]
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    t = torch.randn(2, 2)
    for a, b in zip(cast(list[torch.Tensor], backends.eager_backend(gm, [])(t)), gm(t), strict=True):
        assert torch.equal(a, b) and a.stride() == b.stride() and a._is_view() == b._is_view()


def test_the_eager_backends_graph_calls_reach_no_torch_function_override() -> None:
    """eager's backward, and an OpOverload's call, go past every `__torch_function__`: a mode the caller holds, or a
    torch-function subclass handed to the graph, sees none of the graph's ops."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch.overrides import TorchFunctionMode

    from subclassaot.pipeline import backends

    class Seen(TorchFunctionMode):
        calls: list[object] = []

        def __torch_function__(
            self, func: Callable[..., object], types: object, args: tuple[object, ...] = (), kwargs: object = None
        ) -> object:
            Seen.calls.append(func)
            return func(*args, **cast(dict[str, object], kwargs or {}))

    class Counting(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func: object, types: object, args: object = (), kwargs: object = None) -> object:
            Seen.calls.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})  # type: ignore[no-untyped-call]

    gm = make_fx(lambda a: (a * 2 + a).sin().sum())(torch.randn(2, 2))
    run = backends.eager_backend(gm, [])
    x = torch.randn(2, 2)
    with Seen():
        got = run(x)
    assert Seen.calls == [] and torch.equal(cast(torch.Tensor, got), gm(x))
    got = run(x.as_subclass(Counting))
    assert Seen.calls == [] and type(got) is torch.Tensor


class _Counting(torch.Tensor):
    """A torch-function subclass noting every call it is handed."""

    calls: list[object] = []

    @classmethod
    def __torch_function__(cls, func: object, types: object, args: object = (), kwargs: object = None) -> object:
        _Counting.calls.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})  # type: ignore[no-untyped-call]


class _Contexts:
    """torch's DisableTorchFunction, counting the times it is entered."""

    entered = 0

    def __enter__(self) -> None:
        _Contexts.entered += 1
        self._inner = torch._C.DisableTorchFunction()
        self._inner.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._inner.__exit__(None, None, None)


@pytest.mark.parametrize("case", ["plain", "parameter", "mode", "subclass input", "subclass constant", "no inputs"])
def test_the_eager_backends_graph_turns_torch_function_off_only_where_something_could_take_a_call(case: str) -> None:
    """backends._outside_torch_function: the graph's code enters the context where a mode is on the stack or an input or a
    tensor constant overrides `__torch_function__` (no call reaches either), and runs the same ops without it where
    nothing would take a call (a Parameter's disabled override is none)."""
    from torch.overrides import TorchFunctionMode

    from subclassaot.pipeline import backends

    class Seen(TorchFunctionMode):
        def __torch_function__(
            self, func: Callable[..., object], types: object, args: tuple[object, ...] = (), kwargs: object = None
        ) -> object:
            _Counting.calls.append(func)
            return func(*args, **cast(dict[str, object], kwargs or {}))

    root = torch.nn.Module()
    root.c = torch.nn.Buffer(
        torch.randn(2, 2).as_subclass(_Counting) if case == "subclass constant" else torch.ones(2, 2)
    )
    graph = torch.fx.Graph()
    inputs: list[torch.fx.Node] = []
    if case != "no inputs":
        inputs.append(graph.placeholder("x"))
        inputs[0].meta["val"] = torch.empty(2, 2)
    c = graph.get_attr("c")
    c.meta["val"] = torch.empty(2, 2)
    product = graph.call_function(torch.ops.aten.mul.Tensor, (inputs[0] if inputs else c, c))
    product.meta["val"] = torch.empty(2, 2)
    graph.output([graph.call_function(torch.ops.aten.sin.default, (product,))])
    gm = torch.fx.GraphModule(root, graph)
    run = backends.eager_backend(gm, [])
    run.__globals__["_tf_off"] = _Contexts
    x = torch.randn(2, 2)
    args: tuple[torch.Tensor, ...] = {
        "parameter": (torch.nn.Parameter(x),),
        "subclass input": (x.as_subclass(_Counting),),
        "no inputs": (),
    }.get(case, (x,))
    with torch._C.DisableTorchFunction():
        expected = ((args[0] if args else root.c) * root.c).sin()
    _Counting.calls, _Contexts.entered = [], 0
    if case in ("mode", "no inputs"):
        with Seen():
            got = run(*args)
    else:
        got = run(*args)
    (value,) = cast(list[torch.Tensor], got)
    assert _Counting.calls == [] and type(value) is torch.Tensor and torch.equal(value, expected)
    assert _Contexts.entered == (0 if case in ("plain", "parameter") else 1)


@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("context", ["none", "mode", "torch function off", "subclass functions off under a mode"])
def test_the_graph_code_s_torch_function_test_answers_as_torch_s_own(count: int, context: str) -> None:
    """The graph's code tests its inputs and tensor constants with `_has_tf(a, b)` (backends._has_torch_function:
    has_torch_function's unary or variadic form, no tuple built): for every kind of argument and context it answers
    as `torch.overrides.has_torch_function` on their tuple."""
    from torch.overrides import TorchFunctionMode

    from subclassaot.pipeline import backends

    class Mode(TorchFunctionMode):
        pass

    x = torch.randn(2)
    kinds = [x, torch.nn.Parameter(x), x.as_subclass(_Counting), PairTensor.from_tensor(x), 2]
    contexts: dict[str, Callable[[], contextlib.AbstractContextManager[object]]] = {
        "none": contextlib.nullcontext,
        "mode": Mode,
        "torch function off": torch._C.DisableTorchFunction,
        "subclass functions off under a mode": lambda: _both(Mode(), torch._C.DisableTorchFunctionSubclass()),
    }
    test = backends._has_torch_function(tuple(f"_i{k}" for k in range(count)))
    for first in kinds:
        for second in kinds if count == 2 else [None]:
            args = (first,) if second is None else (first, second)
            with contexts[context]():
                assert test(*args) is torch.overrides.has_torch_function(args)


@contextlib.contextmanager
def _both(
    outer: contextlib.AbstractContextManager[object], inner: contextlib.AbstractContextManager[object]
) -> Iterator[None]:
    with outer, inner:
        yield


def test_input_write_kept_as_a_copy_for_an_input_inside_a_larger_storage() -> None:
    """An input at an offset of a larger storage: an op addressing storage (as_strided at an absolute offset) would
    find other elements in it than in the fresh value the functional graph computed, so the write stays a copy."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from subclassaot.pipeline import backends

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        v = x + 1
        return v, v.as_strided((2,), (1,), 1) * 2

    gm = make_fx(fn, tracing_mode="fake")(torch.randn(3, 4)[1])
    rewritten, written = backends.with_input_writes(gm, [(0, 0)], in_place=True)
    targets = [str(n.target) for n in rewritten.graph.nodes if n.op == "call_function"]
    assert written == frozenset({0}) and "aten.copy_.default" in targets and "aten.add_.Tensor" not in targets
    base = torch.randn(3, 4)
    expected = gm(base[1].clone())
    got = rewritten(base[1])
    assert torch.equal(base[1], expected[0]) and torch.equal(got[1], expected[1])


def _njt() -> tuple[object, ...]:
    return (torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)], layout=torch.jagged),)


def _dtensor() -> tuple[object, ...]:
    from torch.distributed.tensor import Replicate, distribute_tensor

    from tests.subclasses.dtensor_factory import one_rank_mesh

    return (distribute_tensor(torch.randn(4, 4), one_rank_mesh(), [Replicate()]),)


def _write_then_read(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)
    return x.sin()


@pytest.mark.parametrize("make", [_njt, _dtensor], ids=["njt", "dtensor"])
def test_input_writes_in_the_eager_graph_on_torch_subclasses(make: Callable[[], tuple[object, ...]]) -> None:
    """PyTorch's own subclasses written in place, and a module's buffers (BatchNorm's running statistics): the eager
    backend's graph writes them itself (Note [What A Backend Receives And Returns]), as eager leaves them."""
    with torch.no_grad():
        assert_matches_eager(_write_then_read, make, backend="eager")
        assert_matches_eager(torch.nn.BatchNorm1d(4), lambda: (torch.randn(8, 4),), backend="eager", calls=3)


def test_keep_input_mutations_on_torchs_two_tensor() -> None:
    # a subclass we did not write (torch's TwoTensor): each inner tensor's write kept in the user's graph
    from torch.testing._internal.two_tensor import TwoTensor

    def writes(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x + y

    def make_two() -> tuple[object, ...]:
        return tuple(TwoTensor(torch.randn(3, 3), torch.randn(3, 3)) for _ in range(2))  # type: ignore[no-untyped-call]  # untyped in torch

    recording = RecordingBackend()
    with torch.no_grad():
        assert_matches_eager(writes, make_two, backend=recording, compile_kwargs={"keep_input_mutations": True})
    assert recording.graphs
    for gm in recording.graphs:
        found = mutating_nodes(gm)
        assert len(found) == 2 and all("copy_" in n for n in found), gm.code


# The backend's callable on the per-call path (Note [What A Backend Receives And Returns]): a first call that finds
# no output to fix takes the fixing wrapper off the generated runner's path; one that finds a fix keeps it.


def _other_layout(gm: torch.fx.GraphModule, example_inputs: object) -> Callable[..., object]:
    """A backend whose 2-d tensor outputs come back column-major (same values, other strides than eager's)."""

    def run(*args: object) -> list[object]:
        outs = cast(list[object], gm(*args))
        return [o.t().contiguous().t() if isinstance(o, torch.Tensor) and o.dim() == 2 else o for o in outs]

    return run


def _double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@pytest.mark.parametrize("backend", [RecordingBackend(), _other_layout], ids=["eager strides", "other strides"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_the_output_fixes_leave_the_runner_only_where_the_first_call_needs_none(backend: object, kind: str) -> None:
    from subclassaot.runtime.plan import SettlingCall

    def make() -> tuple[torch.Tensor]:
        x = torch.randn(2, 3)
        return (PairTensor.from_tensor(x) if kind == "pair" else x,)

    compiled = assert_matches_eager(_double, make, calls=3, backend=backend)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is not None
    wrappers = [v for v in entry.run.__globals__.values() if isinstance(v, SettlingCall)]
    assert len(wrappers) == (0 if isinstance(backend, RecordingBackend) else 1)


def test_inductor_runs_its_generated_module_directly_after_the_first_call(monkeypatch: pytest.MonkeyPatch) -> None:
    # CompiledFxGraph.__call__'s per-call bookkeeping costs about what a small graph's call does; the first call
    # (which ends the autotune cache's compile) and calls under the profiler go through it
    from torch._inductor.output_code import CompiledFxGraph

    through: list[int] = []
    original = CompiledFxGraph.__call__

    def counting(self: CompiledFxGraph, inputs: list[object]) -> object:
        through.append(1)
        return original(self, inputs)

    monkeypatch.setattr(CompiledFxGraph, "__call__", counting)
    compiled = assert_matches_eager(_double, lambda: (torch.randn(2, 3),), calls=3, backend="inductor")
    assert len(through) == 1
    compiled(torch.randn(2, 3))
    assert len(through) == 1
    with torch.autograd.profiler.profile():
        compiled(torch.randn(2, 3))
    assert len(through) == 2
