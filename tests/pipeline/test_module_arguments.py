"""nn.Modules in the argument pytree (Note [State The Program Reads]): `step(model, x)`, the same module
twice, modules in lists, dicts and keyword arguments, an EMA of one module into another, BatchNorm in training with its
int64 `num_batches_tracked`, a step-counter buffer. Their parameters and buffers are lifted like a compiled module's:
written back, differentiated, guarded by the module's identity and its state's metadata. Checked through the parity
oracle (which compares an argument module's parameters, buffers and grads) and over a training loop on one model."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn

import subclassaot
from tests.oracle import Call, assert_matches_eager

T = torch.Tensor


class Net(nn.Module):
    steps: T

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))

    def forward(self, x: T) -> T:
        self.steps.add_(1)
        out: T = self.bn(self.lin(x)).relu()
        return out


def step(model: nn.Module, x: T) -> T:
    out: T = model(x).sum()
    return out


def same_module_twice(a: nn.Module, b: nn.Module, x: T) -> T:
    out: T = a(x).sum() + b(x).sum()
    return out


def modules_in_a_list(ms: list[nn.Module], x: T) -> T:
    out: T = ms[1](ms[0](x)).sum()
    return out


def module_in_a_dict(d: dict[str, nn.Module], x: T) -> T:
    out: T = d["enc"](x).sum() * 2
    return out


def ema_update(model: nn.Module, ema_model: nn.Module) -> T:
    with torch.no_grad():
        for p, e in zip(model.parameters(), ema_model.parameters(), strict=True):
            e.mul_(0.9).add_(p, alpha=0.1)
    return ema_model.get_parameter("lin.weight").sum()


def keyword_module(x: T, *, model: nn.Module) -> T:
    return model(x).mean()  # type: ignore[no-any-return]


def module_and_its_weight(model: nn.Module, w: T, x: T) -> T:
    return (model(x) * w.sum()).sum()  # type: ignore[no-any-return]


def _x() -> T:
    return torch.randn(3, 4)


def _twice() -> tuple[object, ...]:
    m = Net()
    return m, m, _x()


def _with_weight() -> tuple[object, ...]:
    m = Net()
    return m, m.lin.weight, _x()


PROGRAMS: dict[str, tuple[Callable[..., object], Callable[[], tuple[object, ...] | Call]]] = {
    "step": (step, lambda: (Net(), _x())),
    "step_eval": (step, lambda: (Net().eval(), _x())),
    "same_module_twice": (same_module_twice, _twice),
    "modules_in_a_list": (modules_in_a_list, lambda: ([Net(), Net()], _x())),
    "module_in_a_dict": (module_in_a_dict, lambda: ({"enc": Net()}, _x())),
    "ema_update": (ema_update, lambda: (Net(), Net())),
    "keyword_module": (keyword_module, lambda: Call(args=(_x(),), kwargs={"model": Net()})),
    "module_and_its_weight": (module_and_its_weight, _with_weight),
}


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_module_argument_matches_eager(name: str, grad: bool) -> None:
    fn, make = PROGRAMS[name]
    with torch.set_grad_enabled(grad):
        assert_matches_eager(fn, make)


def _train(fn: Callable[..., object], model: nn.Module, steps: int) -> list[T]:
    """`steps` SGD steps of `fn(model, x)` on one model object; the losses."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for k in range(steps):
        torch.manual_seed(k)
        loss = fn(model, torch.randn(3, 4))
        assert isinstance(loss, torch.Tensor)
        torch.autograd.backward(loss)
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())
    return losses


def test_training_loop_over_one_model_hits_the_cache() -> None:
    torch.manual_seed(0)
    eager_model = Net()
    model = copy.deepcopy(eager_model)
    compiled = subclassaot.compile(step, backend="eager")
    want = _train(step, eager_model, 3)
    got = _train(compiled, model, 3)
    torch.testing.assert_close(got, want)
    for (name, a), b in zip(model.state_dict().items(), eager_model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)
    tracked = model.get_buffer("bn.num_batches_tracked")
    assert int(tracked) == 3 and tracked.dtype == torch.int64
    assert compiled.compile_count == 1, compiled.recompile_reasons


def test_another_module_object_recompiles() -> None:
    compiled = subclassaot.compile(step, backend="eager")
    a, b = Net(), Net()
    b.load_state_dict(a.state_dict())
    x = torch.randn(3, 4)
    torch.testing.assert_close(compiled(a, x), step(copy.deepcopy(b), x))
    torch.testing.assert_close(compiled(b, x), step(copy.deepcopy(a), x))
    assert compiled.compile_count == 2
    assert "args[0]" in compiled.recompile_reasons[0]


def test_changed_parameter_metadata_recompiles() -> None:
    compiled = subclassaot.compile(step, backend="eager")
    model = Net()
    x = torch.randn(3, 4)
    compiled(model, x)
    model.double()
    want = step(copy.deepcopy(model), x.double())
    torch.testing.assert_close(compiled(model, x.double()), want)
    assert compiled.compile_count == 2
    assert "args[0].lin.weight" in compiled.recompile_reasons[0]


def test_added_buffer_recompiles() -> None:
    compiled = subclassaot.compile(step, backend="eager")
    model = Net()
    x = torch.randn(3, 4)
    compiled(model, x)
    model.register_buffer("extra", torch.zeros(2))
    compiled(model, x)
    assert compiled.compile_count == 2
    assert "structure" in compiled.recompile_reasons[0]


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 2)

    def forward(self, x: T, body: nn.Module) -> T:
        return self.head(body(x)).sum()  # type: ignore[no-any-return]


def test_compiled_module_taking_a_module_argument() -> None:
    with torch.enable_grad():
        assert_matches_eager(Outer(), lambda: (_x(), Net()))


def _with_grads() -> nn.Module:
    model = nn.Linear(3, 3)
    torch.autograd.backward(model(torch.randn(2, 3)).sum())
    return model


def sgd_update(model: nn.Module) -> T:
    with torch.no_grad():
        for p in model.parameters():
            assert p.grad is not None
            p.sub_(0.1 * p.grad)
    return model.get_parameter("weight").sum()


def zero_grad_inside(model: nn.Module) -> T:
    model.zero_grad()
    return model.get_parameter("weight") * 2


def set_grad_of_input(p: T) -> T:
    p.grad = None
    return p * 2


@pytest.mark.parametrize("fn", [sgd_update, zero_grad_inside], ids=lambda f: f.__name__)
def test_grad_of_an_argument_module_parameter_is_refused(fn: Callable[[nn.Module], T]) -> None:
    model = _with_grads()
    want = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    with pytest.raises(subclassaot.UnsupportedError, match=r"\.grad inside the compiled function"):
        subclassaot.compile(fn, backend="eager")(model)
    assert all(p.grad is not None for p in model.parameters())
    for p, g in zip(model.parameters(), want, strict=True):
        torch.testing.assert_close(p.grad, g)


def test_grad_assigned_to_an_input_is_refused() -> None:
    p = torch.randn(3, requires_grad=True)
    torch.autograd.backward((p * 2).sum())
    with pytest.raises(subclassaot.UnsupportedError, match=r"assigns a tensor's \.grad"):
        subclassaot.compile(set_grad_of_input, backend="eager")(p)
