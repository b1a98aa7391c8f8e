"""Autograd hooks around and inside compiled calls, against eager: saved-tensor hooks the program enters itself
(refused by `subclassaot.compile`, whose compiled call would call none of them; Dynamo runs them), and torch's own
(save_on_cpu) inside, which keep every value. Module backward hooks, retain_grad() and tensor hooks on inputs are in
test_module_features.py; anomaly mode in test_backward_errors.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch._dynamo

import subclassaot
from subclassaot.errors import UnsupportedError
from subclassaot.tools.dynamo_backend import subclassaot_backend
from tests.backends import RecordingBackend
from tests.oracle import assert_matches_eager

T = torch.Tensor
_PACKED: list[tuple[int, ...]] = []  # per pack hook call, the shape packed


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _pack_doubled(t: T) -> T:
    _PACKED.append(tuple(t.shape))
    return t * 2  # (breaks the hooks' contract on purpose: a lost hook shows in the gradients too)


def _unpack(t: T) -> T:
    return t


def _own_hooks(x: T, w: T) -> T:
    with torch.autograd.graph.saved_tensors_hooks(_pack_doubled, _unpack):
        y = (x @ w).tanh()
    return y * x.sum()


def _on_cpu(x: T, w: T) -> T:
    with torch.autograd.graph.save_on_cpu():
        return (x @ w).tanh() * x.sum()


def _xw() -> tuple[T, T]:
    return torch.randn(4, 5, requires_grad=True), torch.randn(5, 3, requires_grad=True)


def _packs_and_grads(fn: object) -> tuple[list[tuple[int, ...]], list[T | None]]:
    _PACKED.clear()
    torch.manual_seed(0)
    x, w = _xw()
    out = fn(x, w)  # type: ignore[operator]
    out.sum().backward()
    return list(_PACKED), [x.grad, w.grad]


@pytest.mark.parametrize("backend", ["eager", RecordingBackend()], ids=["eager", "function"])
def test_saved_tensors_hooks_entered_inside_the_program_are_refused(backend: str | RecordingBackend) -> None:
    """Eager calls the pack hook at every save of every call; before the refusal, the eager backend's compiled call
    called none (its gradients then missed the doubling), and the Function's only while it was traced."""
    with pytest.raises(UnsupportedError, match=r"enters torch.autograd.graph.saved_tensors_hooks\(_pack_doubled"):
        subclassaot.compile(_own_hooks, backend=backend)(*_xw())
    assert_matches_eager(_on_cpu, _xw, backend=backend)  # torch's own: every value kept
    want = _packs_and_grads(_own_hooks)
    compiled = torch.compile(_own_hooks, backend=subclassaot_backend)  # the fix the message names
    for _ in range(2):
        packs, grads = _packs_and_grads(compiled)
        assert packs == want[0]
        torch.testing.assert_close(grads, want[1])
