"""Everyday nn.Module features through both entry points (`subclassaot.compile` and `torch.compile(...,
backend="subclassaot")`), against eager: parametrizations (a custom one, weight_norm, spectral_norm, whose power
iteration writes the buffers `_u`/`_v` in training only, orthogonal), forward hooks and forward pre-hooks (with
kwargs, returning new values, added and removed between calls), module backward hooks (Dynamo runs them;
`subclassaot.compile` refuses them by name: its backward is one graph), `retain_grad()` on a returned intermediate (refused by `subclassaot.compile`: its
compiled backward keeps no gradient of it), tensor hooks on inputs,
`torch.func.functional_call` / `grad` / `vmap`, activation checkpointing under Dynamo, and tiny Hugging Face
decoders with a `DynamicCache` and `generate()` (slow)."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
import torch
import torch._dynamo
import torch.nn.utils.parametrize as parametrize
from torch import nn
from torch.nn.utils import parametrizations
from torch.utils.checkpoint import checkpoint

import subclassaot
from subclassaot.errors import UnsupportedError
from subclassaot.tools.dynamo_backend import recording, subclassaot_backend
from tests.backends import RecordingBackend
from tests.oracle import assert_matches_eager

T = torch.Tensor


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def dynamo_compile(fn: Callable[..., object], *, backend: object = "eager", **kwargs: Any) -> Callable[..., object]:
    options: dict[str, Any] = {"backend": str(backend)}
    compiled: Callable[..., object] = torch.compile(fn, backend=subclassaot_backend, options=options, **kwargs)
    return compiled


ENTRIES = {"subclassaot": None, "dynamo": dynamo_compile}


def _check(module: nn.Module, entry: str, train: bool, make: Callable[[], tuple[object, ...]]) -> None:
    module.train(train)
    with recording() as graphs:
        assert_matches_eager(module, make, calls=3, compile_fn=ENTRIES[entry])
    assert entry != "dynamo" or graphs, "the program did not run through subclassaot"


def _x() -> tuple[T]:
    return (torch.randn(4, 5, requires_grad=True),)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(5, 5)
        self.b = nn.Linear(5, 3)

    def forward(self, x: T, scale: float = 1.0) -> T:
        return self.b(self.a(x).tanh()) * scale  # type: ignore[no-any-return]


# ----------------------------------------------------------------------------- parametrizations


class Symmetric(nn.Module):
    def forward(self, w: T) -> T:
        return w.triu() + w.triu(1).transpose(-1, -2)


def _parametrized(kind: str) -> nn.Module:
    torch.manual_seed(0)
    net = Net()
    if kind == "custom":
        parametrize.register_parametrization(net.a, "weight", Symmetric())
    elif kind == "weight_norm":
        parametrizations.weight_norm(net.a)
    elif kind == "spectral_norm":
        parametrizations.spectral_norm(net.a)
    else:
        assert kind == "orthogonal"
        parametrizations.orthogonal(net.a)
    return net


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("kind", ["custom", "weight_norm", "spectral_norm", "orthogonal"])
def test_parametrized_weights_match_eager(kind: str, entry: str, train: bool) -> None:
    _check(_parametrized(kind), entry, train, _x)


def _power_iteration_u(net: nn.Module) -> T:
    u = net.get_submodule("a.parametrizations.weight.0")._u
    assert isinstance(u, torch.Tensor)
    return u


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_spectral_norm_power_iteration_writes_its_buffers_in_training_only(entry: str) -> None:
    eager = _parametrized("spectral_norm")
    compiled_module = copy.deepcopy(eager)
    # (eager backend: the buffer writes are the pipeline's; module buffers written on inductor: test_inference_mode's
    # batch norm running stats)
    direct = functools.partial(subclassaot.compile, backend="eager")
    compiled = dynamo_compile(compiled_module) if entry == "dynamo" else direct(compiled_module)
    for train in (True, True, False):
        eager.train(train)
        compiled_module.train(train)
        u = _power_iteration_u(compiled_module).clone()
        x = torch.randn(4, 5)
        torch.testing.assert_close(compiled(x), eager(x))
        now = _power_iteration_u(compiled_module)
        assert not torch.equal(now, u) if train else torch.equal(now, u)
        for (name, a), b in zip(compiled_module.state_dict().items(), eager.state_dict().values(), strict=True):
            torch.testing.assert_close(a, b, msg=name)


def test_hook_based_spectral_norm_rebinding_the_weight_is_refused_with_the_replacement() -> None:
    net = Net()
    torch.nn.utils.spectral_norm(net.a)  # (the old hook-based one)
    with pytest.raises(UnsupportedError, match=r"self\.a\.weight: .*torch\.nn\.utils\.parametrizations"):
        subclassaot.compile(net)(torch.randn(4, 5))


# ----------------------------------------------------------------------------- forward hooks


def _hooked(kind: str) -> nn.Module:
    torch.manual_seed(0)
    net = Net()
    if kind == "pre":
        net.a.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    elif kind == "pre_with_kwargs":
        net.register_forward_pre_hook(
            lambda mod, args, kwargs: ((args[0] + 1,), {**kwargs, "scale": 3.0}), with_kwargs=True
        )
    elif kind == "forward":
        net.a.register_forward_hook(lambda mod, args, out: out + 1)
    else:
        assert kind == "forward_with_kwargs"
        net.register_forward_hook(lambda mod, args, kwargs, out: out * kwargs.get("scale", 2.0), with_kwargs=True)
    return net


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("kind", ["pre", "pre_with_kwargs", "forward", "forward_with_kwargs"])
def test_forward_hooks_match_eager(kind: str, entry: str, train: bool) -> None:
    _check(_hooked(kind), entry, train, _x)


def test_forward_hook_added_and_removed_between_calls_recompiles() -> None:
    torch.manual_seed(0)
    eager = Net()
    compiled_module = copy.deepcopy(eager)
    compiled = subclassaot.compile(compiled_module)
    handles: list[torch.utils.hooks.RemovableHandle] = []
    for step in range(3):
        x = torch.randn(4, 5)
        torch.testing.assert_close(compiled(x), eager(x))
        if step == 0:
            handles = [m.a.register_forward_hook(lambda mod, args, out: out * 2) for m in (eager, compiled_module)]
        elif step == 1:
            for h in handles:
                h.remove()
    assert compiled.compile_count == 2, compiled.recompile_reasons


# ----------------------------------------------------------------------------- backward hooks


def _first(grads: object) -> T:
    first = cast(tuple[T, ...], grads)[0]
    return first


def _backward_hooked(kind: str) -> nn.Module:
    torch.manual_seed(0)
    net = Net()
    if kind == "full":
        net.a.register_full_backward_hook(lambda mod, grad_in, grad_out: (_first(grad_in) * 0.5,))
    elif kind == "full_pre":
        net.register_full_backward_pre_hook(lambda mod, grad_out: (_first(grad_out) * 3,))
    else:  # the legacy hook, which eager registers on the grad_fn of the module's output (its AddmmBackward)
        assert kind == "non_full"
        net.b.register_backward_hook(
            lambda mod, grad_in, grad_out: tuple(_halved(g) for g in cast(tuple[T | None, ...], grad_in))
        )
    return net


def _halved(grad: T | None) -> T | None:
    return None if grad is None else grad * 0.5


@pytest.mark.parametrize("kind", ["full", "full_pre", "non_full"])
def test_module_backward_hooks_run_as_eager_under_dynamo(kind: str) -> None:
    _check(_backward_hooked(kind), "dynamo", True, _x)


@pytest.mark.parametrize("kind", ["full", "full_pre", "global"])
def test_module_backward_hooks_are_refused_by_subclassaot_compile(kind: str) -> None:
    """Eager runs them inside the backward, where they replace the module's input gradients; the compiled backward
    is one graph: without the refusal they were silently skipped (wrong gradients)."""
    net: nn.Module
    if kind == "global":
        net = Net()
        handle = torch.nn.modules.module.register_module_full_backward_hook(lambda mod, gi, go: None)
    else:
        net, handle = _backward_hooked(kind), None
    try:
        with pytest.raises(UnsupportedError, match="full backward hooks or backward pre-hooks"):
            subclassaot.compile(net)(*_x())
    finally:
        if handle is not None:
            handle.remove()
    with torch.no_grad():  # no backward: no hook runs, nothing to refuse
        assert_matches_eager(net, _x)


@pytest.mark.parametrize("kind", ["non_full", "non_full_global"])
def test_non_full_module_backward_hooks_are_refused_by_subclassaot_compile(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`register_backward_hook` puts the hook on the grad_fn of the module's output inside the program, which the
    compiled backward does not have: without the refusal it was silently skipped (wrong gradients)."""
    net: nn.Module
    if kind == "non_full_global":
        net = Net()  # (torch keeps the global hooks' kind once set, even after their removal: a full one's test ran)
        monkeypatch.setattr(torch.nn.modules.module, "_global_is_full_backward_hook", None)
        handle = torch.nn.modules.module.register_module_backward_hook(lambda mod, gi, go: None)
    else:
        net, handle = _backward_hooked(kind), None
    try:
        with pytest.raises(UnsupportedError, match="class Linear.*non-full backward hooks"):
            subclassaot.compile(net)(*_x())
        with torch.no_grad():  # no grad_fn on the output: eager registers nothing, nothing to refuse
            assert_matches_eager(net, _x)
    finally:
        if handle is not None:
            handle.remove()


def test_module_backward_hook_added_after_a_call_is_refused() -> None:
    net = Net()
    compiled = subclassaot.compile(net)
    compiled(*_x())
    net.a.register_full_backward_hook(lambda mod, grad_in, grad_out: (_first(grad_in) * 2,))
    with pytest.raises(UnsupportedError, match="full backward hooks"):
        compiled(*_x())


# ----------------------------------------------------------------------------- tensor hooks, retain_grad


def _retained(x: T, w: T) -> tuple[T, T]:
    y = x @ w
    y.retain_grad()
    return y.tanh(), y


def _input_hooked(x: T, w: T) -> T:
    x.register_hook(lambda g: g * 2)  # type: ignore[no-untyped-call]
    return (x @ w).tanh()


def _xw() -> tuple[T, T]:
    return torch.randn(4, 5, requires_grad=True), torch.randn(5, 3, requires_grad=True)


def _retained_grads(fn: Callable[[T, T], tuple[T, T]]) -> list[T | None]:
    torch.manual_seed(0)
    x, w = _xw()
    out, y = fn(x, w)
    out.sum().backward()  # type: ignore[no-untyped-call]  # torch leaves backward untyped
    return [y.grad, x.grad, w.grad]


def test_retain_grad_on_a_returned_intermediate_under_dynamo() -> None:
    compiled = cast(Callable[[T, T], tuple[T, T]], dynamo_compile(_retained))
    want = _retained_grads(_retained)
    for _ in range(3):
        torch.testing.assert_close(_retained_grads(compiled), want)


@pytest.mark.parametrize("backend", ["eager", RecordingBackend()], ids=["eager", "function"])
def test_retain_grad_on_a_returned_intermediate_is_refused_by_subclassaot_compile(
    backend: str | RecordingBackend,
) -> None:
    """Eager's y.grad holds the gradient reaching y through the program's own tanh; the compiled output's stayed
    None (silently) before the refusal."""
    with pytest.raises(UnsupportedError, match=r"out\[1\]: the program calls retain_grad\(\) on this output"):
        _retained_grads(subclassaot.compile(_retained, backend=backend))
    # retained but not returned: no one can read its .grad, nothing to refuse
    assert_matches_eager(_retained_unreturned, _xw, backend=backend)


def _retained_unreturned(x: T, w: T) -> T:
    return _retained(x, w)[0]


def test_input_hook_scaling_the_gradient_under_dynamo() -> None:
    assert_matches_eager(_input_hooked, _xw, calls=3, compile_fn=dynamo_compile)


# ----------------------------------------------------------------------------- torch.func, checkpoint

_LINEAR = nn.Linear(5, 3)


def _functional_call(x: T, w: T, b: T) -> T:
    return torch.func.functional_call(_LINEAR, {"weight": w, "bias": b}, (x,)).relu()  # type: ignore[no-any-return]


class ScaledInner(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(5, 3)

    def forward(self, x: T) -> T:
        params = {k: v * 2 for k, v in self.inner.named_parameters()}
        return torch.func.functional_call(self.inner, params, (x,))  # type: ignore[no-any-return]


def _func_grad(x: T, w: T) -> T:
    return torch.func.grad(lambda w: (x @ w).sin().sum())(w) * 2  # type: ignore[no-any-return]


def _vmapped(x: T, w: T) -> T:
    return torch.vmap(lambda row: (row @ w).cos())(x)  # type: ignore[no-any-return]


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_functional_call_and_func_transforms(entry: str) -> None:
    compile_fn = ENTRIES[entry]
    fc_inputs = (torch.randn(4, 5, requires_grad=True), torch.randn(3, 5, requires_grad=True), torch.randn(3))
    assert_matches_eager(_functional_call, lambda: fc_inputs, calls=3, compile_fn=compile_fn)
    _check(ScaledInner(), entry, True, _x)
    assert_matches_eager(_func_grad, _xw, calls=3, compile_fn=compile_fn)
    assert_matches_eager(_vmapped, _xw, calls=3, compile_fn=compile_fn)


class Checkpointed(nn.Module):
    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(5, 5), nn.Dropout(0.3), nn.GELU())
        self.out = nn.Linear(5, 2)
        self.reentrant = reentrant

    def forward(self, x: T) -> T:
        return self.out(checkpoint(self.block, x, use_reentrant=self.reentrant))  # type: ignore[no-any-return]


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_block_with_dropout_under_dynamo(reentrant: bool, train: bool) -> None:
    """Dynamo's checkpoint higher-order op always passes preserve_rng_state=False (the compiler keeps the draws):
    that is no user's request for fresh draws in the backward, and the region runs inline as on the direct path."""
    _check(Checkpointed(reentrant), "dynamo", train, _x)


class Normed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(5, 5)
        self.bn = nn.BatchNorm1d(5)

    def forward(self, x: T) -> T:
        return self.bn(self.a(x)).relu()  # type: ignore[no-any-return]


def _compile_forward(module: nn.Module, *, backend: object = "eager") -> nn.Module:
    module.forward = subclassaot.compile(module.forward, backend=cast(str, backend))
    return module


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_compiled_bound_forward_lifts_the_modules_state(train: bool) -> None:
    """`model.forward = subclassaot.compile(model.forward)`, as Hugging Face users write it: the bound method's module
    is captured state (its parameters and buffers lifted to inputs), and the compiled function it now holds is no
    state the program reads."""
    assert_matches_eager(Normed().train(train), _x, calls=3, compile_fn=_compile_forward)


# ----------------------------------------------------------------------------- Hugging Face decoders

transformers = pytest.importorskip("transformers")


@pytest.mark.slow
def test_gpt2_cache_and_generate_under_dynamo() -> None:
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=32)
    eager = transformers.GPT2LMHeadModel(config).eval()
    compiled: Any = dynamo_compile(copy.deepcopy(eager))
    ids = torch.randint(0, 100, (1, 5))
    with torch.no_grad():
        first, expected = compiled(ids, use_cache=True), eager(ids, use_cache=True)
        assert isinstance(first.past_key_values, transformers.DynamicCache)
        torch.testing.assert_close(first.logits, expected.logits)
        step, expected_step = (
            model(ids[:, -1:], past_key_values=out.past_key_values, use_cache=True)
            for model, out in ((compiled, first), (eager, expected))
        )
        torch.testing.assert_close(step.logits, expected_step.logits)
        tokens = compiled.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0)
        assert torch.equal(tokens, eager.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0))


def test_returned_dynamic_cache_is_refused_with_the_registration_hint() -> None:
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16)
    model = _compile_forward(transformers.GPT2LMHeadModel(config).eval())
    with torch.no_grad(), pytest.raises(UnsupportedError, match="returns a DynamicCache.*register_dynamic_cache"):
        model(torch.randint(0, 50, (1, 4)), use_cache=True)


# -- held-out: test_aotdispatch's module programs (TestAOTModuleSimplified, test_aot_export_*), as modules ----------


class _LinearPlusY(nn.Module):  # test_aot_module_simplified (and _dynamic)
    def __init__(self, relu: bool = False) -> None:
        super().__init__()
        self.linear, self.relu = nn.Linear(20, 30), relu

    def forward(self, x: T, y: T) -> tuple[T]:
        z = self.linear(x) + y
        return (z.relu() if self.relu else z,)


def _fx_traced() -> nn.Module:  # test_aot_module_simplified_preserves_stack_trace: an fx.GraphModule
    tracer = torch.fx.Tracer()
    tracer.record_stack_traces = True
    graph = tracer.trace(_LinearPlusY(relu=True))
    return torch.fx.GraphModule(tracer.root, graph)


class _BufferAndInputWritten(nn.Module):  # test_aot_export_forward_mutation_multiple_mut
    buffer1: T

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buffer1", torch.ones(6, 4))

    def forward(self, x: T, y: T) -> tuple[T, T]:
        y.add_(4)
        self.buffer1.add_(5)
        return (x.cos().sum() + y.sin().sum(), self.buffer1.sum())


class _TestMod(nn.Module):  # test_aotdispatch's TestMod: fn(self.p, *args)
    def __init__(self, fn: Callable[..., tuple[T, ...]], requires_grad: bool = True) -> None:
        super().__init__()
        self.p, self.fn = nn.Parameter(torch.ones(2), requires_grad=requires_grad), fn

    def forward(self, *args: T) -> tuple[T, ...]:
        return self.fn(self.p, *args)


def _parameter_doubled(p: T, x: T) -> tuple[T]:  # test_aot_export_input_mutation_on_parameter (frozen p)
    p.mul_(2)
    return (p + x,)


def _product_and_sum(p: T, x: T) -> tuple[T, T]:  # test_aot_export_multiple_outputs_require_grad
    out = p * x
    return out, out.sum()


class _Doubled(nn.Module):  # test_aot_export_simplified_input_mutations
    def forward(self, x: T) -> tuple[T]:
        x.mul_(2)
        return (x + x,)


class _PairSum(nn.Module):  # test_aot_export_simplified_pytrees: a list argument
    def forward(self, inps: list[T]) -> tuple[T]:
        return (inps[0] + inps[1],)


class _RowDoubled(nn.Module):  # test_aot_module_simplified_preserves_stack_trace_from_mutation
    def forward(self, x: T) -> tuple[T]:
        x[0].mul_(2)
        return (x + x,)


class _Upsampled(nn.Module):  # test_inference_python_dispatcher
    def __init__(self) -> None:
        super().__init__()
        self.upsample = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)

    def forward(self, x: T) -> tuple[T]:
        return (self.upsample(x),)


class _NonPersistentCounter(nn.Module):  # register_buffer(persistent=False), written in forward
    count: T

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(()), persistent=False)
        self.lin = nn.Linear(3, 3)

    def forward(self, x: T) -> T:
        self.count.add_(1)
        out: T = self.lin(x) * self.count
        return out


class _FrozenParameterWritten(nn.Module):  # a parameter with requires_grad=False, written in forward
    def __init__(self) -> None:
        super().__init__()
        self.w, self.lin = nn.Parameter(torch.ones(3), requires_grad=False), nn.Linear(3, 3)
        self.lin.bias.requires_grad_(False)

    def forward(self, x: T) -> T:
        self.w.add_(1)
        out: T = self.lin(x) + self.w
        return out


class _BatchNorm(nn.Module):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(3, **kwargs)

    def forward(self, x: T) -> T:
        out: T = self.bn(x)
        return out


class _ConvBatchnormRelu(nn.Module):  # test_aot_export_module_joint's module, in train and eval
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.bn = nn.Conv2d(1, 3, 1, 1), nn.BatchNorm2d(3)

    def forward(self, x: T) -> tuple[T, T]:
        user_out = torch.nn.functional.relu(self.bn(self.conv(x)))
        return user_out.sum(), user_out.detach()


class _LinearDropout(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin, self.drop = nn.Linear(4, 4), nn.Dropout(0.5)

    def forward(self, x: T) -> T:
        out: T = self.drop(self.lin(x))
        return out


class _RReLU(nn.Module):  # test_rrelu: random slopes in training only
    def forward(self, x: T) -> T:
        return torch.nn.functional.rrelu(x, training=self.training)


class _BufferRebound(nn.Module):
    b: T

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b", torch.zeros(3))

    def forward(self, x: T) -> T:
        self.b = self.b + x.detach()
        return x * self.b


class _NonPersistentReturned(nn.Module):
    b: T

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b", torch.zeros(3), persistent=False)

    def forward(self, x: T) -> tuple[T, T]:
        self.b.copy_(x.detach())
        return self.b, x * 2


def _randn(*shapes: tuple[int, ...], grad: bool = False) -> Callable[[], tuple[T, ...]]:
    return lambda: tuple(torch.randn(s, requires_grad=grad) for s in shapes)


_MakeModule = Callable[[], nn.Module]
# name -> (module factory, inputs, compile kwargs, modes: True = train)
HELD_OUT_MODULES: dict[
    str, tuple[_MakeModule, Callable[[], tuple[object, ...]], dict[str, object], tuple[bool, ...]]
] = {
    "aot_module_simplified": (_LinearPlusY, _randn((128, 20), (128, 30), grad=True), {}, (True,)),
    "aot_module_simplified_dynamic": (
        _LinearPlusY,
        _randn((128, 20), (128, 30), grad=True),
        {"dynamic": True},
        (True,),
    ),
    "aot_module_simplified_preserves_stack_trace": (_fx_traced, _randn((128, 20), (128, 30), grad=True), {}, (True,)),
    "aot_export_forward_mutation_multiple_mut": (
        _BufferAndInputWritten,
        lambda: (torch.ones(6, 4), torch.zeros(6, 4)),
        {},
        (True, False),
    ),
    "aot_export_input_mutation_on_frozen_parameter": (
        lambda: _TestMod(_parameter_doubled, requires_grad=False),
        _randn((2,)),
        {},
        (True,),
    ),
    "aot_export_multiple_outputs_require_grad": (lambda: _TestMod(_product_and_sum), _randn((2,)), {}, (True,)),
    "aot_export_simplified_input_mutations": (_Doubled, _randn((2,)), {}, (True,)),
    "aot_export_simplified_pytrees": (
        _PairSum,
        lambda: ([torch.randn(2), torch.randn(2, requires_grad=True)],),
        {},
        (True,),
    ),
    "aot_export_functionalized_rng": (lambda: _TestMod(lambda p, x: (p + x,)), _randn((2,)), {}, (True,)),
    "aot_module_simplified_preserves_stack_trace_from_mutation": (_RowDoubled, _randn((4, 4)), {}, (True,)),
    "inference_python_dispatcher": (_Upsampled, _randn((1, 2, 3, 3)), {}, (True, False)),
    "non_persistent_buffer_written": (_NonPersistentCounter, _randn((2, 3), grad=True), {}, (True, False)),
    "non_persistent_buffer_returned": (_NonPersistentReturned, _randn((3,), grad=True), {}, (True,)),
    "frozen_parameters_written": (_FrozenParameterWritten, _randn((2, 3), grad=True), {}, (True,)),
    "batch_norm_cumulative_average": (lambda: _BatchNorm(momentum=None), _randn((4, 3), grad=True), {}, (True, False)),
    "batch_norm_without_running_stats": (
        lambda: _BatchNorm(track_running_stats=False),
        _randn((4, 3), grad=True),
        {},
        (True, False),
    ),
    "batch_norm_without_affine": (lambda: _BatchNorm(affine=False), _randn((4, 3), grad=True), {}, (True, False)),
    "aot_export_module_joint_train_and_eval": (_ConvBatchnormRelu, _randn((1, 1, 3, 3)), {}, (True, False)),
    "dropout_train_and_eval": (_LinearDropout, _randn((3, 4), grad=True), {}, (True, False)),
    "rrelu": (_RReLU, _randn((3, 4), grad=True), {}, (True, False)),
    "buffer_rebound_in_forward": (_BufferRebound, _randn((3,), grad=True), {}, (True,)),
}
# (name, entry, train) -> the refusal's pattern
HELD_OUT_MODULE_REFUSALS = {
    # one graph: BatchNorm's 1 / float(num_batches_tracked) reads a value as a Python number (Dynamo breaks the graph)
    ("batch_norm_cumulative_average", "subclassaot", True): r"reads a tensor's value as a Python number",
    ("buffer_rebound_in_forward", "subclassaot", True): r"self\.b: the forward assigns a new tensor to this parameter",
}
# Dynamo's graph break (float(num_batches_tracked)) leaves it running the module eagerly
HELD_OUT_MODULES_NO_GRAPH = {"batch_norm_cumulative_average"}


def _held_out_module_params() -> list[Any]:
    """Every (program, entry, mode); CI runs conftest's slice of them."""
    params = []
    for name, (_, _, _, modes) in HELD_OUT_MODULES.items():
        for entry in ENTRIES:
            for train in modes:
                mode = "train" if train else "eval"
                params.append(pytest.param(name, entry, train, id=f"{name}-{entry}-{mode}"))
    return params


@pytest.mark.parametrize(("name", "entry", "train"), _held_out_module_params())
def test_held_out_module_program_matches_eager_or_is_refused(name: str, entry: str, train: bool) -> None:
    make_module, make, kwargs, _ = HELD_OUT_MODULES[name]
    torch.manual_seed(0)
    module = make_module().train(train)
    refusal = HELD_OUT_MODULE_REFUSALS.get((name, entry, train))
    if refusal is not None:
        with torch.enable_grad(), pytest.raises(UnsupportedError, match=refusal):
            assert_matches_eager(module, make, calls=3, compile_fn=ENTRIES[entry], compile_kwargs=kwargs)
        return
    with torch.enable_grad(), recording() as graphs:
        assert_matches_eager(module, make, calls=3, compile_fn=ENTRIES[entry], compile_kwargs=kwargs)
    assert entry != "dynamo" or name in HELD_OUT_MODULES_NO_GRAPH or graphs, (
        "the program did not run through subclassaot"
    )
