"""Generated per-call runners (Note [Straight-Line Runners]): which entries get one, that they run like eager, and
that their source holds no caller text."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, cast

import pytest
import torch

import subclassaot
from subclassaot.authoring.wrapper_tensor import WrapperTensor, plain_unflattener
from subclassaot.runtime import straight_line
from subclasses.pair import PairTensor
from tests.backends import RecordingBackend
from tests.oracle import assert_matches_eager

T = torch.Tensor


def pair(*shape: int, requires_grad: bool = False) -> PairTensor:
    return PairTensor.from_tensor(torch.randn(*shape), requires_grad=requires_grad)


def mul(x: T) -> T:
    return x * 2


def sin_of_two(x: T, y: T) -> T:
    return (x * y + x).sin()


def write_then_fresh(x: T, y: T) -> T:
    x.add_(y)
    return x.view(-1) * 2


def write_then_view(x: T) -> T:
    x.add_(1)
    return x.view(-1)


def intermediate_and_view(x: T) -> tuple[T, T]:
    y = x * 2
    return y, y.view(-1)


def views_of_an_intermediate(x: T) -> tuple[T, T]:
    y = x * 2
    return y.view(-1), y.t()


def views_of_the_input(x: T) -> tuple[T, T, T]:
    return x.view(-1), x.t(), x


def transpose_in_place(x: T) -> T:
    x.t_()
    return x * 2


GENERATED: list[tuple[str, Callable[..., object], Callable[[], tuple[object, ...]]]] = [
    ("plain", mul, lambda: (torch.randn(2, 3),)),
    ("pair", mul, lambda: (pair(2, 3),)),
    ("two pairs", sin_of_two, lambda: (pair(2, 3), pair(2, 3))),
    ("write then fresh", write_then_fresh, lambda: (pair(2, 3), pair(2, 3))),
    ("write then view", write_then_view, lambda: (pair(2, 3),)),
    ("plain write then view", write_then_view, lambda: (torch.randn(2, 3),)),
    ("intermediate and view", intermediate_and_view, lambda: (pair(2, 3),)),
    ("views of an intermediate", views_of_an_intermediate, lambda: (pair(2, 3),)),
    ("views of the input", views_of_the_input, lambda: (pair(2, 3),)),
    ("training", sin_of_two, lambda: (pair(2, 3, requires_grad=True), pair(2, 3))),
    ("training views", views_of_an_intermediate, lambda: (pair(2, 3, requires_grad=True),)),
]


@pytest.mark.parametrize(("fn", "make"), [pytest.param(f, m, id=name) for name, f, m in GENERATED])
def test_common_programs_run_a_generated_runner_like_eager(
    fn: Callable[..., object], make: Callable[[], tuple[object, ...]]
) -> None:
    compiled = assert_matches_eager(fn, make, calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is not None and entry.run_source.startswith("def run(L, symbols):")


def test_a_metadata_change_runs_the_generic_runner_like_eager() -> None:
    compiled = assert_matches_eager(transpose_in_place, lambda: (pair(2, 3),), calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is None


def test_a_module_runs_a_generated_runner_and_reads_its_parameters_on_every_call() -> None:
    module = torch.nn.Linear(3, 2)
    compiled = subclassaot.compile(module, backend="eager")
    x = torch.randn(4, 3)
    assert torch.equal(compiled(x), module(x))
    with torch.no_grad():
        module.weight = torch.nn.Parameter(torch.randn(2, 3))  # rebound: the next call reads the new one
    assert torch.equal(compiled(x), module(x))
    (entry,) = compiled.entries
    assert entry.run_source is not None


def test_the_runner_source_holds_no_caller_text() -> None:
    text = "'); raise SystemExit('caller text ran') #\n\"\"\""

    def outputs_constants(x: T) -> dict[str, object]:
        return {text: x + 1, "other": text}

    compiled = subclassaot.compile(outputs_constants, backend="eager")
    x = torch.randn(3)
    out = compiled(x)
    value = out[text]
    assert isinstance(value, torch.Tensor) and torch.equal(value, x + 1)
    assert out["other"] == text
    (entry,) = compiled.entries
    assert entry.run_source is not None
    assert text not in entry.run_source and "caller text" not in entry.run_source


class Scaled(WrapperTensor):
    """A wrapper with a ctx field and the base class's construction: its outputs are built plainly."""

    inner_names = ("payload",)
    ctx_names = ("scale",)
    apply_to_inner_by_default = True
    payload: torch.Tensor
    scale: float


class OwnInit(WrapperTensor):
    inner_names = ("payload",)
    apply_to_inner_by_default = True

    def __init__(self, payload: torch.Tensor, **kwargs: object) -> None:
        super().__init__()
        self.built_by_init = True


class OwnUnflatten(WrapperTensor):
    inner_names = ("payload",)
    apply_to_inner_by_default = True

    @classmethod
    def __tensor_unflatten__(
        cls, inner: dict[str, torch.Tensor], ctx: object, size: object, stride: object
    ) -> WrapperTensor:
        out = super().__tensor_unflatten__(inner, ctx, size, stride)  # type: ignore[arg-type]
        out.unflattened = True  # type: ignore[attr-defined]
        return out


def test_plain_construction_builds_what_tensor_unflatten_builds() -> None:
    data = torch.randn(4, 6)[:, ::2]
    build = plain_unflattener(Scaled, ("payload",), (0.5,))
    assert build is not None
    out = build([data], [4, 3], [1, 4])
    ref = Scaled.__tensor_unflatten__({"payload": data}, (0.5,), (4, 3), (1, 4))
    for t in (out, ref):
        assert type(t) is Scaled and t.payload is data and t.scale == 0.5
    assert (out.shape, out.stride(), out.storage_offset(), out.dtype, out.requires_grad) == (
        ref.shape,
        ref.stride(),
        ref.storage_offset(),
        ref.dtype,
        ref.requires_grad,
    )
    # -1 stands for a dim only the inner tensors know: the general path decides it, as before
    assert build([data], [-1, 3], [1, 4]).shape == (4, 3)


def test_plain_construction_is_not_taken_for_a_class_that_constructs_its_own_way() -> None:
    assert plain_unflattener(OwnInit, ("payload",), ()) is None
    assert plain_unflattener(OwnUnflatten, ("payload",), ()) is None
    assert plain_unflattener(Scaled, ("payload",), ()) is None  # ctx of another length: the class's own check
    assert plain_unflattener(PairTensor, ("b", "a"), ()) is None

    def double(x: T) -> T:
        return x * 2

    x = OwnUnflatten(torch.randn(3))
    out = subclassaot.compile(double, backend="eager")(x)
    assert getattr(out, "unflattened", False)  # the class's __tensor_unflatten__ built the output


def test_a_ctx_change_of_a_plain_wrapper_fails_the_fast_guard_with_its_message() -> None:
    def double(x: T) -> T:
        return x * 2

    compiled = subclassaot.compile(double, backend="eager")
    out = compiled(Scaled(torch.randn(3), 0.5))
    assert isinstance(out, Scaled) and out.scale == 0.5
    out = compiled(Scaled(torch.randn(3), 2.0))
    assert isinstance(out, Scaled) and out.scale == 2.0 and compiled.compile_count == 2
    assert compiled.recompile_reasons == ("args[0] ctx field [0] changed: 0.5 -> 2.0",)
    (first, _) = compiled.entries
    assert "__tensor_flatten__" not in first.guards.fast_source  # read as fields
    assert "__tensor_flatten__" in first.guards.source  # the message still names the ctx field


def scale_in_place(x: T) -> T:
    x.mul_(3)
    return x.sum()


def write_through_a_row(x: T, y: T) -> T:
    x[0].add_(y)
    return x * 2


def write_and_return_the_value(x: T) -> T:
    y = x + 1
    x.copy_(y)
    return y


KEPT_WRITES: list[tuple[str, Callable[..., object], Callable[[], tuple[object, ...]]]] = [
    ("plain", scale_in_place, lambda: (torch.randn(3),)),
    ("through a row", write_through_a_row, lambda: (torch.randn(3, 2), torch.randn(2))),
    ("the value returned", write_and_return_the_value, lambda: (torch.randn(3),)),
    ("two pairs", write_then_fresh, lambda: (pair(2, 3), pair(2, 3))),
    ("pair and its view", write_then_view, lambda: (pair(2, 3),)),
]


@pytest.mark.parametrize("backend", ["inductor", "eager"])
@pytest.mark.parametrize(("fn", "make"), [pytest.param(f, m, id=name) for name, f, m in KEPT_WRITES])
def test_the_graph_writes_the_inputs_like_eager(
    fn: Callable[..., object], make: Callable[[], tuple[object, ...]], backend: str
) -> None:
    # Note [What A Backend Receives And Returns]: values, version counters and aliasing as eager's, no copy in the
    # runner (inductor: a store of its kernel; the eager backend: the op's in-place form, or a copy_ in the graph)
    compiled = assert_matches_eager(fn, make, calls=3, backend=backend)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is not None and "copy_" not in entry.run_source


class RunningScale(torch.nn.Module):
    """A buffer the forward writes in place (a running statistic): lifted to an input the graph writes."""

    total: T

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x: T) -> T:
        self.total.add_(x.sum(0))
        return x * self.total


def test_inductor_writes_a_module_buffer_in_its_kernel_like_eager() -> None:
    """A module's buffer written by its forward, on inductor: the write happens in the kernel (Note [What A Backend
    Receives And Returns]); values, the buffer and its version counter as eager's over several calls."""
    import copy

    eager = RunningScale()
    module = copy.deepcopy(eager)
    compiled = subclassaot.compile(module, backend="inductor")
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(4, 3)
            before = (eager.total._version, module.total._version)
            assert torch.allclose(compiled(x), eager(x))
            assert torch.allclose(module.total, eager.total)
            assert module.total._version - before[1] == eager.total._version - before[0]
    (entry,) = compiled.entries
    assert entry.run_source is not None and "copy_" not in entry.run_source


HANDED_VIEWS: list[tuple[str, Callable[[T], T]]] = [
    ("view", lambda x: x.view(-1)),
    ("t", lambda x: x.t()),
    ("transpose", lambda x: x.transpose(0, 1)),
    ("select", lambda x: x[1]),
    ("slice", lambda x: x[:, 1:]),
    ("narrow", lambda x: x.narrow(1, 1, 2)),
    ("unsqueeze", lambda x: x.unsqueeze(0)),
    ("expand", lambda x: x.expand(2, 2, 3)),
    ("diagonal", lambda x: x.diagonal()),
    ("as_strided", lambda x: x.as_strided((2, 2), (1, 2), 1)),
    ("permute", lambda x: x.permute(1, 0)),
    ("alias", torch.ops.aten.alias.default),
]


def _written_then(view: Callable[[T], T]) -> Callable[[T], T]:
    def program(x: T) -> T:
        x.mul_(2)
        return view(x)

    return program


def _under_no_grad(view: Callable[[T], T]) -> Callable[[T], T]:
    def program(x: T) -> T:
        with torch.no_grad():
            return view(x)

    return program


@pytest.mark.parametrize("wrap", [lambda v: v, _written_then, _under_no_grad], ids=["view", "written", "no_grad"])
@pytest.mark.parametrize(("name", "view"), HANDED_VIEWS, ids=[n for n, _ in HANDED_VIEWS])
@pytest.mark.parametrize("make", [lambda: pair(2, 3), lambda: Scaled(torch.randn(2, 3), 0.5)], ids=["pair", "ctx"])
def test_a_view_of_a_wrapper_input_is_handed_to_autograd_like_eager(
    name: str,
    view: Callable[[T], T],
    wrap: Callable[[Callable[[T], T]], Callable[[T], T]],
    make: Callable[[], T],
) -> None:
    # Note [Straight-Line Runners]: the wrapper built from the traced inner aliases, made a view of the input by the
    # view op itself; `._base`, the counter it shares, storages (the wrapper's too) and values as eager's
    program = wrap(view)
    compiled = assert_matches_eager(program, lambda: (make(),), calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is not None and "_Give(" in entry.run_source
    x = make()
    out = compiled(x)
    assert isinstance(out, torch.Tensor)
    assert out._base is x and out.untyped_storage()._cdata == x.untyped_storage()._cdata
    if name == "expand":
        return  # (a write to an expanded view raises, in eager too)
    before = x._version
    out.add_(1)  # written through the view: the input's counter and values follow, as in eager
    assert x._version == before + 1
    first = "a" if isinstance(x, PairTensor) else "payload"
    assert torch.equal(getattr(view(x), first), getattr(out, first))  # the input's inner tensor took the write


def test_a_handed_view_is_called_through_its_public_binding_where_no_torch_function_takes_the_call() -> None:
    # Note [Straight-Line Runners]: `x.view(-1)`'s method binding (~1.2 us a call less than the OpOverload's call),
    # where no `__torch_function__` would take the call; the same dispatch below either
    compiled = assert_matches_eager(_written_then(lambda x: x.view(-1)), lambda: (pair(2, 3),), calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.runner is not None and entry.run_source is not None
    assert "if _htf(L[0]) else" in entry.run_source and torch._C.TensorBase.view in entry.runner.names.values()
    # where one would (a torch function mode on the stack), the OpOverload, as before
    seen: list[object] = []

    class Recording(torch.overrides.TorchFunctionMode):
        def __torch_function__(
            self, func: object, types: object, args: tuple[object, ...] = (), kwargs: dict[str, object] | None = None
        ) -> object:
            seen.append(func)
            return func(*args, **(kwargs or {}))  # type: ignore[operator]

    x = pair(2, 3)
    with Recording():
        out = entry.runner.run((x,), {})
    assert torch.ops.aten.view.default in seen and torch._C.TensorBase.view not in seen
    assert isinstance(out, PairTensor) and out._base is x and torch.equal(out.a, x.a.view(-1))
    # an op without a public binding (aten.slice): the OpOverload
    compiled = assert_matches_eager(lambda x: x[:, 1:], lambda: (pair(2, 3),), calls=2)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is not None and "_Give(" in entry.run_source and "_htf(" not in entry.run_source


def test_a_chain_of_views_of_a_wrapper_input_is_replayed_through_the_class() -> None:
    def two_steps(x: T) -> T:
        return x.t().unsqueeze(0)

    compiled = assert_matches_eager(two_steps, lambda: (pair(2, 3),), calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is not None and "_Give(" not in entry.run_source


def test_a_handed_view_of_an_input_that_requires_grad_called_under_no_grad_is_eager_s() -> None:
    def view_and_t(x: T) -> tuple[T, T]:
        return x.view(-1), x.t()

    def call(fn: Callable[..., object]) -> Callable[..., object]:
        def under_no_grad(*args: object) -> object:
            with torch.no_grad():
                return fn(*args)

        return under_no_grad

    compiled = subclassaot.compile(view_and_t, backend="eager")
    assert_matches_eager(
        call(view_and_t), lambda: (pair(2, 3, requires_grad=True),), calls=2, compile_fn=lambda f, **k: call(compiled)
    )
    (entry,) = compiled.entries
    assert entry.run_source is not None and "_Give(" in entry.run_source


def test_the_one_shot_mode_hands_over_only_its_op_and_lets_others_through() -> None:
    from subclassaot.runtime.straight_line import _Give

    x = pair(2, 3)
    handed = PairTensor(x.a.t(), x.b.t())  # a fresh wrapper: no autograd metadata yet
    give = _Give(handed, torch.ops.aten.t.default)
    torch._C._push_on_torch_dispatch_stack(give)  # type: ignore[arg-type]  # (torch calls its __torch_dispatch__ only)
    try:
        doubled = x * 2  # another op: through the class, as without the mode
        out = torch.ops.aten.t.default(x)
        again = torch.ops.aten.t.default(x)  # handed once: the second call goes through the class
    finally:
        torch._C._pop_torch_dispatch_stack(None)
    assert isinstance(doubled, PairTensor) and torch.equal(doubled.a, x.a * 2)
    assert out is handed and out._base is x  # autograd and ADInplaceOrView made the handed wrapper a view of x
    assert give.result is None and again is not handed and torch.equal(again.a, x.a.t())


# Plain training steps (Note [Straight-Line Runners]): a backend other than eager trains through the compiled Function,
# whose
# per-call choices for plain inputs and fresh plain outputs are made once and which the runner applies directly.


def loss_of(x: T) -> T:
    return (x * 2).sum()


def two_outputs(x: T, y: T) -> tuple[T, T]:
    return x * y, x.sin()


def sum_of_two(x: T, y: T) -> T:
    return (x + 2 * y).sum()


def saves_an_input(x: T, w: T) -> T:
    return (x @ w).relu()


PLAIN_STEPS: list[tuple[str, Callable[..., object], Callable[[], tuple[object, ...]]]] = [
    ("a loss", loss_of, lambda: (torch.randn(2, 2, requires_grad=True),)),
    (
        "two outputs, one input without grad",
        two_outputs,
        lambda: (torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)),
    ),
    ("saved values", saves_an_input, lambda: (torch.randn(4, 3), torch.randn(3, 2, requires_grad=True))),
    (
        "one output, one of two inputs with grad",
        sum_of_two,
        lambda: (torch.randn(2, 3), torch.randn(2, 3, requires_grad=True)),
    ),
]


def _recording() -> RecordingBackend:
    return RecordingBackend()


@pytest.mark.parametrize(("fn", "make"), [pytest.param(f, m, id=name) for name, f, m in PLAIN_STEPS])
def test_a_plain_training_step_is_applied_directly_and_trains_like_eager(
    fn: Callable[..., object], make: Callable[[], tuple[object, ...]]
) -> None:
    compiled = assert_matches_eager(fn, make, backend=_recording(), calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is not None and "pre = _c" in entry.run_source and "outs, pre" not in entry.run_source


def test_a_plain_step_given_some_tangents_gives_eager_s_gradients() -> None:
    """A backward through one of two outputs (the other's tangent None), and a tangent of another layout."""
    compiled = subclassaot.compile(two_outputs, backend=_recording())
    for through in (0, 1):
        x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3, requires_grad=True)
        xe, ye = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
        got, want = compiled(x, y), two_outputs(xe, ye)
        tangent = torch.randn(3, 2).t()  # (not the output's strides: the backward gets them)
        torch.autograd.backward(got[through], tangent)
        torch.autograd.backward(want[through], tangent)
        for a, b in ((x, xe), (y, ye)):
            assert (a.grad is None) == (b.grad is None)
            if a.grad is not None:
                assert b.grad is not None and torch.allclose(a.grad, b.grad)


def _python_calls_of(run: Callable[[], object]) -> list[str]:
    """The names of the Python functions `run` calls, in order."""
    import sys

    names: list[str] = []

    def profile(frame: object, event: str, arg: object) -> None:
        if event == "call":
            names.append(frame.f_code.co_name)  # type: ignore[attr-defined]

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return names


@pytest.mark.parametrize(
    ("fn", "make", "tangent"),
    [
        pytest.param(loss_of, lambda: (torch.randn(2, 2, requires_grad=True),), None, id="a loss"),
        pytest.param(mul, lambda: (torch.randn(2, 3, requires_grad=True),), lambda: torch.randn(3, 2).t(), id="layout"),
        pytest.param(
            sum_of_two, lambda: (torch.randn(2, 3), torch.randn(2, 3, requires_grad=True)), None, id="two inputs"
        ),
    ],
)
def test_a_lone_plain_step_runs_its_backward_in_its_node_s_apply_like_eager(
    fn: Callable[..., T], make: Callable[[], tuple[T, ...]], tangent: Callable[..., T] | None
) -> None:
    """One output, one gradient, nothing saved (`_PlainStep.lone`): the engine's call of the node runs the backward
    graph itself, without BackwardCFunction.apply's frames or the plain backward's, and gives eager's gradients (a
    tangent of another layout given the traced strides; the input without grad given None)."""
    compiled = subclassaot.compile(fn, backend="inductor")
    for call in range(3):
        torch.manual_seed(call)
        got_in, want_in = make(), make()
        for a, b in zip(got_in, want_in, strict=True):
            with torch.no_grad():
                b.copy_(a)
        got, want = compiled(*got_in), fn(*want_in)
        g = None if tangent is None else tangent()
        calls = _python_calls_of(lambda: torch.autograd.backward(got, g))  # noqa: B023
        torch.autograd.backward(want, g)
        for a, b in zip(got_in, want_in, strict=True):
            assert (a.grad is None) == (b.grad is None)
            if a.grad is not None and b.grad is not None:
                assert torch.allclose(a.grad, b.grad) and a.grad.stride() == b.grad.stride()
        if call:  # (the first call settles the graphs' wrappers)
            node = calls[calls.index("engine_node_apply") :]
            assert not {"_get_user_fn", "backward", "_plain_backward"}.intersection(node), node


def test_a_plain_step_refuses_double_backward_through_a_compiled_backward() -> None:
    compiled = subclassaot.compile(loss_of, backend=_recording())
    x = torch.randn(2, 2, requires_grad=True)
    (grad,) = torch.autograd.grad(compiled(x), x)  # a first backward runs the plain path
    assert torch.equal(grad, torch.full((2, 2), 2.0))
    with pytest.raises(subclassaot.UnsupportedError, match="double backward"):
        torch.autograd.grad(compiled(x), x, create_graph=True)


def test_a_plain_step_raises_eager_s_error_for_a_saved_input_written_after_the_call() -> None:
    """x * y saves y for x's gradient in eager: y written after the call fails that backward, in both."""
    compiled = subclassaot.compile(two_outputs, backend=_recording())
    for fn in (two_outputs, compiled):
        x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)
        out, _ = fn(x, y)
        with torch.no_grad():
            y.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            torch.autograd.backward(out.sum())


def outputs_of_two_kinds(x: T, y: T) -> tuple[T, T]:
    return x * y, (x.sin().sum() * 2).double()


@pytest.mark.parametrize(
    ("through", "tangent_type"),
    [
        pytest.param(0, torch.Tensor, id="first output, plain backward"),
        pytest.param(1, torch.Tensor, id="second output, plain backward"),
        pytest.param(0, PairTensor, id="first output, a subclass tangent: general backward"),
        pytest.param(1, torch.nn.Parameter, id="second output, a Tensor subclass tangent: general backward"),
    ],
)
def test_a_plain_step_s_absent_tangent_is_zeros_of_its_own_output(through: int, tangent_type: type) -> None:
    """A backward through one of two outputs of other sizes and dtypes: the other's tangent is absent, and the zeros
    that stand for it (from the node's record of that output, none kept per call) have that output's size and dtype,
    on the plain backward and on the general one a tangent of another type hands over to."""
    compiled = subclassaot.compile(outputs_of_two_kinds, backend=_recording())
    grads = []
    for fn in (outputs_of_two_kinds, compiled):
        torch.manual_seed(0)
        x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3, requires_grad=True)
        out = fn(x, y)[through]
        tangent = torch.randn(out.shape, dtype=out.dtype)
        if tangent_type is PairTensor:
            tangent = PairTensor.from_tensor(tangent)
        elif tangent_type is torch.nn.Parameter:
            tangent = torch.nn.Parameter(tangent, requires_grad=False)
        torch.autograd.backward(out, tangent)
        grads.append((x.grad, y.grad))
    (entry,) = compiled.entries
    assert entry.run_source is not None and "outs, pre" not in entry.run_source  # (a plain step)
    for want, got in zip(*grads, strict=True):
        assert (want is None) == (got is None)
        if want is not None and got is not None:
            assert type(got) is type(want)
            if isinstance(want, PairTensor) and isinstance(got, PairTensor):
                assert torch.allclose(got.a, want.a) and torch.allclose(got.b, want.b)
            else:
                assert torch.allclose(got, want)


def test_a_plain_step_calls_the_backend_s_graphs_themselves_once_their_wrappers_settle() -> None:
    # inductor's graphs are wrapped (backends.keep_eager_outputs) until their first call finds no output to fix
    import functools

    from subclassaot.runtime.plan import SettlingCall

    compiled = assert_matches_eager(loss_of, lambda: (torch.randn(2, 2, requires_grad=True),), backend="inductor")
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    (applies,) = [v for v in entry.run.__globals__.values() if isinstance(v, functools.partial)]
    step = applies.args[0][0]
    assert step.plain is not None and isinstance(step.fw, SettlingCall)
    assert not isinstance(step.plain_fw, SettlingCall) and not isinstance(step.plain_bw, SettlingCall)


def select_row(x: T) -> T:
    return x[1]


def pair64(*shape: int) -> PairTensor:
    return PairTensor.from_tensor(torch.randn(*shape, dtype=torch.float64))


@pytest.mark.parametrize(
    ("fn", "make"),
    [
        pytest.param(mul, lambda: (pair64(2, 3),), id="fresh float64"),
        pytest.param(select_row, lambda: (pair64(2, 3),), id="handed view at an offset"),
        pytest.param(write_then_fresh, lambda: (pair64(2, 3), pair64(2, 3)), id="write then fresh float64"),
    ],
)
def test_the_runner_builds_wrappers_with_positional_arguments_like_eager(
    fn: Callable[..., object], make: Callable[[], tuple[object, ...]]
) -> None:
    # _make_wrapper_subclass is called with positional arguments where a probe at import finds its order as
    # expected (straight_line._positional_mws); the wrapper's offset, dtype, device and layout are the first leaf's
    assert straight_line._MWS_POSITIONAL
    compiled = assert_matches_eager(fn, make, calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is not None and ".storage_offset(), None, " in entry.run_source
    out = compiled(*make())
    assert isinstance(out, PairTensor)
    assert out.dtype == torch.float64 and out.storage_offset() == out.a.storage_offset()


class SetCounted(WrapperTensor):
    """A plain wrapper whose ctx field is a data descriptor counting its sets: the runner must set it through the
    class, as `__tensor_unflatten__` does, not write the instance's dict."""

    inner_names = ("payload",)
    ctx_names = ("scale",)
    apply_to_inner_by_default = True
    payload: torch.Tensor
    sets: ClassVar[list[float]] = []

    @property
    def scale(self) -> float:
        return cast(float, self.__dict__["_scale"])

    @scale.setter
    def scale(self, value: float) -> None:
        SetCounted.sets.append(value)
        self.__dict__["_scale"] = value


@pytest.mark.parametrize(
    ("make", "written"),
    [
        pytest.param(lambda: (pair(2, 3),), "_fd[", id="pair: the dict"),
        pytest.param(lambda: (Scaled(torch.randn(2, 3), 0.5),), "_fd[", id="ctx field: the dict"),
        pytest.param(lambda: (SetCounted(torch.randn(2, 3), 0.5),), "_osa(", id="descriptor: through the class"),
    ],
)
def test_the_runner_sets_a_wrappers_fields_as_tensor_unflatten_does(
    make: Callable[[], tuple[object, ...]], written: str
) -> None:
    # a field no class defines is written to the instance's dict directly (what object.__setattr__ does there)
    compiled = assert_matches_eager(mul, make, calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is not None and written in entry.run_source
    x = cast(T, make()[0])
    want = mul(x)
    sets = len(SetCounted.sets)
    out = compiled(x)
    assert type(out) is type(want) and out.__dict__.keys() == want.__dict__.keys()
    if isinstance(x, SetCounted):
        assert isinstance(out, SetCounted) and out.scale == 0.5 and len(SetCounted.sets) > sets  # its setter ran


# One function per entry (Note [Straight-Line Runners]): a plain positional call runs the entry's guards and its
# runner as one generated function; a failed guard hands the call to the detailed check and the next entry.


def _sized(make: Callable[[int], tuple[object, ...]], *rows: int) -> Callable[[], tuple[object, ...]]:
    """Inputs of `rows[k]` rows for the k-th call (the oracle makes each call's inputs twice: eager's, then ours)."""
    made = [0]

    def inputs() -> tuple[object, ...]:
        made[0] += 1
        return make(rows[(made[0] - 1) // 2])

    return inputs


ONE_FUNCTION: list[tuple[str, Callable[..., object], Callable[[int], tuple[object, ...]], str]] = [
    ("the Function", loss_of, lambda n: (torch.randn(n, 2, requires_grad=True),), "recording"),
    ("native training", loss_of, lambda n: (torch.randn(n, 2, requires_grad=True),), "eager"),
    ("a written PairTensor's view", write_then_view, lambda n: (pair(n, 3),), "eager"),
    ("a PairTensor's product", mul, lambda n: (pair(n, 3),), "eager"),
    (
        "two outputs of the Function",
        two_outputs,
        lambda n: (torch.randn(n, 3, requires_grad=True), torch.randn(n, 3)),
        "recording",
    ),
]


@pytest.mark.parametrize(("fn", "make", "backend"), [pytest.param(f, m, b, id=name) for name, f, m, b in ONE_FUNCTION])
def test_a_plain_call_runs_guards_and_runner_as_one_function_like_eager(
    fn: Callable[..., object], make: Callable[[int], tuple[object, ...]], backend: str
) -> None:
    """Five calls: a static entry, then sizes that fail its guards (a dynamic entry, whose runner reads the symbols
    the joined guards bind), then the first entry's sizes again."""
    inputs = _sized(make, 2, 4, 6, 2, 6)
    compiled = assert_matches_eager(
        fn, inputs, backend=RecordingBackend() if backend == "recording" else backend, calls=5
    )
    plain = compiled._plain  # type: ignore[attr-defined]
    assert len(plain) == 2 and all(entry_fn is not None for _, entry_fn, _, _ in plain)
    assert compiled.compile_count == 2  # type: ignore[attr-defined]


def test_a_checked_step_calls_the_function_without_the_transform_tests_and_refuses_a_transform_like_before() -> None:
    """Every tensor input's dispatch keys checked in one call: the Function's C apply without `_transforms()` and
    `_dead`; under a transform that check fails, and the call takes the runner that refuses it."""
    compiled = assert_matches_eager(loss_of, lambda: (torch.randn(2, 2, requires_grad=True),), backend=_recording())
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    entry_fn = compiled._plain[0][1]  # type: ignore[attr-defined]
    assert "_transforms" in entry.run_source and entry.runner.checked is not None
    assert "_transforms" not in entry_fn.__code__.co_names and "_dead" not in entry_fn.__code__.co_names
    x = torch.randn(2, 2, requires_grad=True)
    with pytest.raises(subclassaot.UnsupportedError, match="inside torch.func.grad"):
        torch.func.grad(lambda y: compiled(x) * y.sum())(torch.randn(2))
    assert compiled.compile_count == 1  # type: ignore[attr-defined]


def test_the_entry_function_reads_each_emitter_s_values_under_that_emitter_s_names() -> None:
    """The guards bind their values as `_g<n>`, the Python state's checks as `_s<n>`, the runner as `_c<n>`: the one
    function's namespace holds them all, each name with its own emitter's value."""
    compiled = assert_matches_eager(write_then_view, lambda: (pair(2, 3),), calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    entry_fn = compiled._plain[0][1]  # type: ignore[attr-defined]
    assert entry.runner is not None and entry.entry_source is not None
    read = {n: entry_fn.__globals__[n] for n in entry_fn.__code__.co_names if n in entry_fn.__globals__}
    emitters = [*(piece.names for piece in entry.guards.fast), entry.runner.names]
    assert all(read[n] is names[n] for names in emitters for n in names if n in read)
    assert all(any(n.startswith(prefix) for n in read) for prefix in ("_g", "_s", "_c"))


def test_a_plain_call_calls_the_backend_s_graph_itself_once_its_wrapper_settles() -> None:
    """inductor's inference graph is wrapped (backends.keep_eager_outputs) until its first call finds no output to
    fix; the joined function then calls the graph itself, as the runner does."""
    from subclassaot.runtime.plan import SettlingCall

    compiled = assert_matches_eager(mul, lambda: (torch.randn(2, 3),), backend="inductor", calls=3)
    entry_fn = compiled._plain[0][1]  # type: ignore[attr-defined]
    used = [entry_fn.__globals__[n] for n in entry_fn.__code__.co_names if n in entry_fn.__globals__]
    assert used and not any(isinstance(f, SettlingCall) for f in used)


class _Noting(torch.Tensor):
    """A torch-function subclass noting every call it is handed (the graph's ops must reach none)."""

    calls: ClassVar[list[object]] = []

    @classmethod
    def __torch_function__(cls, func: object, types: object, args: object = (), kwargs: object = None) -> object:
        _Noting.calls.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})  # type: ignore[no-untyped-call]


def scaled_by_a_constant(x: T) -> T:
    return (x * torch.tensor([1.0, 2.0, 3.0])).sum(0)


def returns_its_input_and_a_value(x: T) -> tuple[T, T]:
    return x, (x + 1).sin()


WRITTEN_IN: list[tuple[str, Callable[..., object], Callable[[], tuple[object, ...]]]] = [
    *((name, f, m) for name, f, m in GENERATED if not name.startswith("training")),
    ("plain training", loss_of, lambda: (torch.randn(2, 3, requires_grad=True),)),
    ("a tensor constant", scaled_by_a_constant, lambda: (torch.randn(2, 3),)),
    ("an input returned", returns_its_input_and_a_value, lambda: (torch.randn(2, 3),)),
    ("a torch-function subclass", returns_its_input_and_a_value, lambda: (torch.randn(2, 3).as_subclass(_Noting),)),
    ("write and return the value", write_and_return_the_value, lambda: (torch.randn(2, 3),)),
]


@pytest.mark.parametrize(("fn", "make"), [pytest.param(f, m, id=name) for name, f, m in WRITTEN_IN])
def test_the_eager_backends_graph_is_written_into_the_runner_like_eager(
    fn: Callable[..., object], make: Callable[[], tuple[object, ...]]
) -> None:
    """The eager backend's graph code is written into the generated runner and the entry function (GraphCode): neither
    calls the function made from it, and every call matches eager (the ops reach no `__torch_function__`)."""
    from subclassaot.runtime.plan import graph_code

    compiled = assert_matches_eager(fn, make, calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    run = entry.runner.run if entry.runner is not None else None
    functions = [f for f in (run, *(plain[1] for plain in compiled._plain)) if f is not None]  # type: ignore[attr-defined]
    assert functions and run is not None
    for f in functions:
        read = [f.__globals__[n] for n in f.__code__.co_names if n in f.__globals__]
        assert not any(graph_code(v) is not None for v in read)
    _Noting.calls = []
    compiled(*make())
    assert not [c for c in _Noting.calls if getattr(c, "__name__", None) in ("add", "mul", "sin", "sum")]


class NamedLikeTheGraph(WrapperTensor):
    """A wrapper whose inner tensors are named like the graph code's inputs, in the other order."""

    inner_names: ClassVar[tuple[str, ...]] = ("_i1", "_i0")
    apply_to_inner_by_default: ClassVar[bool] = True
    _i1: torch.Tensor
    _i0: torch.Tensor


class ScaledByI1(torch.nn.Module):
    """A module whose buffer is named `_i1` (lifted to the graph's first input, the code's `_i0`)."""

    _i1: T

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("_i1", torch.tensor([1.0, 2.0, 3.0]))

    def forward(self, x: T, how: str) -> tuple[T, T]:
        x.mul_(len(how))
        return (x * self._i1 + x).sin(), x.view(-1)


def named_like_the_graph(x: T, how: str) -> tuple[T, T]:
    x.add_(len(how))
    return (x * 2).sin(), x.view(-1)


@pytest.mark.parametrize(
    ("fn", "make"),
    [
        pytest.param(ScaledByI1(), lambda: (torch.randn(2, 3), "_i1"), id="module attribute _i1, string _i1"),
        pytest.param(ScaledByI1(), lambda: (pair(2, 3), "_i0 = d0"), id="PairTensor, string _i0 = d0"),
        pytest.param(
            named_like_the_graph,
            lambda: (NamedLikeTheGraph(torch.randn(2, 3), torch.randn(2, 3)), "_i1"),
            id="inner tensors _i1 and _i0, string _i1",
        ),
    ],
)
def test_the_graph_code_is_written_in_as_it_is_over_inputs_it_binds(
    fn: Callable[..., object], make: Callable[[], tuple[object, ...]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner writes the eager backend's graph code in as it is (Note [Straight-Line Runners], "the graph
    written in"): it binds the code's inputs `_i<k>` to its own dense inputs and rewrites no text of it, so a name
    like `_i1` elsewhere (a module's buffer, a wrapper's inner tensors, a string argument) is only data, and every
    call matches eager."""
    from subclassaot.pipeline import backends
    from subclassaot.runtime.plan import GraphCode, made_from

    made: list[GraphCode] = []

    def noting(code: GraphCode) -> Callable[..., object]:
        made.append(code)
        return made_from(code)

    monkeypatch.setattr(backends, "made_from", noting)
    compiled = assert_matches_eager(fn, make, calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    (code,) = made
    assert entry.runner is not None and entry.runner.source is not None
    sources = [s for s in (entry.runner.source, entry.entry_source) if s is not None]
    for source in sources:
        lines = source.splitlines()
        bindings = [f"    _i{k} = d{g}" for k, g in enumerate(entry.layout.graph_inputs)]
        at = lines.index(bindings[0])
        assert lines[at : at + code.arity] == bindings
        written = code.lines(None if code.items is not None else "outs = ")
        after = at + code.arity
        assert lines[after : after + len(written)] == [f"    {line}" for line in written]  # (as the code has it)
        assert [line for line in lines if line.lstrip().startswith(("_i", "_x"))] == [
            *bindings,
            *(f"    {line}" for line in written if line.lstrip().startswith(("_i", "_x"))),
        ]  # (no other line binds the code's locals)
        assert "'_i" not in source and '"_i' not in source  # (the string argument is data)
