"""Training without a Python autograd.Function (Note [Training Without A Function]): with the eager backend, a
program whose autograd graph running the traced forward records exactly is trained by autograd itself; every other
program keeps the joint graph and the Function. Both are checked against eager."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable

import pytest
import torch
from torch import nn

import subclassaot
from tests.oracle import assert_matches_eager
from tests.pipeline.program_helpers import pair

T = torch.Tensor


def _native(compiled: object) -> bool:
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    native: bool = entry.autograd_backward
    assert not native or (entry.backward is None and entry.forward is None)
    return native


def leaf(*shape: int) -> T:
    return torch.randn(*shape, requires_grad=True)


def mlp_loss(x: T, w1: T, w2: T) -> T:
    return torch.relu(x @ w1).mul(w2).sum()


def two_outputs(x: T, y: T) -> tuple[T, T]:
    z = (x * y).sin()
    return z, z.view(-1).cumsum(0)


def with_constant(x: T) -> tuple[T, int, T]:
    return x.exp(), 3, x


def views_of_inputs_returned(x: T, w: T) -> tuple[T, T, T]:
    # the views are replayed on the inputs after the graph ran, with grad on: eager's own view nodes
    return (x * w).sin().sum(), x.t(), w[0].unsqueeze(0)


def made_in_inference_mode(x: T) -> tuple[T, T]:
    with torch.inference_mode():
        a = x.sin()  # an inference tensor: no history in eager, nor in the runtime's copy of the graph's value
    return x.exp().sum(), a


NATIVE: list[tuple[str, Callable[..., object], Callable[[], tuple[object, ...]]]] = [
    ("mlp loss", mlp_loss, lambda: (torch.randn(4, 3), leaf(3, 5), leaf(5))),
    ("two outputs", two_outputs, lambda: (leaf(2, 3), torch.randn(2, 3))),
    ("constant and input returned", with_constant, lambda: (leaf(3),)),
    ("views of inputs returned", views_of_inputs_returned, lambda: (leaf(2, 3), torch.randn(2, 3))),
    ("made in inference mode", made_in_inference_mode, lambda: (leaf(3),)),
]


@pytest.mark.parametrize(("fn", "make"), [pytest.param(f, m, id=name) for name, f, m in NATIVE])
def test_programs_autograd_records_alike_train_without_a_function(
    fn: Callable[..., object], make: Callable[[], tuple[object, ...]]
) -> None:
    compiled = assert_matches_eager(fn, make, calls=3)
    assert _native(compiled)
    out = compiled(*make())
    first = out[0] if isinstance(out, tuple) else out
    eager = fn(*make())
    eager_first = eager[0] if isinstance(eager, tuple) else eager
    assert isinstance(first, T) and isinstance(eager_first, T)
    assert type(first.grad_fn).__name__ == type(eager_first.grad_fn).__name__  # eager's own nodes


class Doubler(torch.autograd.Function):
    @staticmethod
    def forward(ctx: object, x: T) -> T:
        return x * 2

    @staticmethod
    def backward(ctx: object, g: T) -> T:
        return g * 3  # not the derivative of the forward: only the Function's backward gives eager's gradient


def custom_function(x: T) -> T:
    doubled: T = Doubler.apply(x)  # type: ignore[no-untyped-call]  # untyped in torch
    return doubled.sum()


def no_grad_region(x: T) -> T:
    with torch.no_grad():
        y = x * 2
    return (y * x).sum()


def detached(x: T) -> T:
    return (x.detach() * x).sum()


def written_intermediate(x: T) -> T:
    y = x * 2
    y.add_(1.0)  # written before anything saves it
    return y.sin().sum()


def written_after_saved(x: T) -> T:
    y = x.exp()  # ExpBackward saves its result
    y.add_(1.0)  # ... which is then written: eager's backward raises, the functional graph's would not
    return y.sum()


def dropout(x: T) -> T:
    return torch.nn.functional.dropout(x * 2, 0.5, training=True).sum()  # its mask is written in place


def checkpointed(x: T) -> T:
    out: T = torch.utils.checkpoint.checkpoint(lambda t: t.sin() * 2, x, use_reentrant=False)
    return out.sum()


KEPT: list[tuple[str, Callable[..., object]]] = [
    ("custom Function", custom_function),
    ("no_grad region", no_grad_region),
    ("a saved tensor written", written_after_saved),
]


@pytest.mark.parametrize(
    ("fn"),
    [
        pytest.param(detached, id="detach"),
        pytest.param(checkpointed, id="checkpoint"),
        pytest.param(written_intermediate, id="written before saved"),
    ],
)
def test_programs_that_record_as_the_graph_does_train_without_a_function(fn: Callable[..., object]) -> None:
    # the graph has eager's detach; a non-reentrant checkpoint records eager's own nodes (it recomputes through
    # saved-tensor hooks, which changes memory, not the autograd graph); a write before anything saved the tensor
    # (dropout's mask) leaves eager's backward nothing to find: all train without a Function
    compiled = assert_matches_eager(fn, lambda: (leaf(3),), calls=2)
    assert _native(compiled)


@pytest.mark.parametrize(("fn"), [pytest.param(f, id=name) for name, f in KEPT])
def test_programs_whose_autograd_differs_from_the_graph_s_keep_the_function(fn: Callable[..., object]) -> None:
    compiled = assert_matches_eager(fn, lambda: (leaf(3),), calls=2)
    assert not _native(compiled)


def weighted_loss(w: T, x: T) -> T:
    return (x @ w).sin().sum()


def test_parameters_train_without_a_function_and_without_torch_functions_context_like_eager() -> None:
    """A Parameter (whose `__torch_function__` is torch's disabled one) and a plain input: the graph's ops run
    without the context that turns torch function off (backends._outside_torch_function), with eager's values, gradients
    and nodes."""
    compiled = assert_matches_eager(
        weighted_loss, lambda: (nn.Parameter(torch.randn(3, 2)), torch.randn(4, 3)), calls=3
    )
    assert _native(compiled)


def test_inductor_keeps_the_function() -> None:
    compiled = assert_matches_eager(mlp_loss, NATIVE[0][2], calls=2, backend="inductor")
    assert not _native(compiled)


def test_a_module_trains_without_a_function_over_several_steps_like_eager() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    eager = copy.deepcopy(model)
    compiled = subclassaot.compile(model, backend="eager")
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (model, eager)]
    for _ in range(3):
        x = torch.randn(5, 6)
        losses = []
        for m, opt in zip((compiled, eager), opts, strict=True):
            opt.zero_grad()
            loss = m(x).pow(2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[0], losses[1], rtol=0, atol=0)
    for p, q in zip(model.parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    assert _native(compiled)


def test_dropout_writes_its_mask_before_saving_it_and_trains_without_a_function() -> None:
    # (the oracle draws eager's and ours from different generator states: compared here with the same seed)
    x = torch.randn(6, requires_grad=True)
    compiled = subclassaot.compile(dropout, backend="eager")
    results: list[tuple[T, T, str]] = []
    for fn in (dropout, compiled, dropout, compiled):
        torch.manual_seed(7)
        x.grad = None
        out = fn(x)
        assert isinstance(out, T)
        torch.autograd.backward(out)
        assert x.grad is not None
        results.append((out.detach(), x.grad.clone(), type(out.grad_fn).__name__))
    for eager, ours in ((results[0], results[1]), (results[2], results[3])):
        torch.testing.assert_close(ours[0], eager[0], rtol=0, atol=0)
        torch.testing.assert_close(ours[1], eager[1], rtol=0, atol=0)
        assert ours[2] == eager[2]
    assert _native(compiled)


@pytest.mark.parametrize(
    ("name", "native"),
    [
        ("transformer_encoder_layer", True),
        ("transformer_decoder_layer", True),
        ("multihead_attention", True),
        ("embedding_lstm", True),
        ("conv_batchnorm", False),  # BatchNorm's running statistics: inputs written
    ],
)
def test_real_modules_train_without_a_function_like_eager(name: str, native: bool) -> None:
    # two SGD steps against eager (outputs, the RNG state after dropout, gradients, parameters, buffers), and which
    # path the entry took
    from tests.pipeline.test_model_zoo import ZOO, _build, _two_training_steps

    _two_training_steps(name, train=True, backend="eager")
    compiled = subclassaot.compile(_build(name, True), backend="eager")
    compiled(*ZOO[name][1]())
    assert _native(compiled) is native


def test_hugging_face_gpt2_trains_without_a_function_like_eager() -> None:
    transformers = pytest.importorskip("transformers")
    from tests.pipeline.test_compiled_module import _lm_call

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=1, n_head=2, n_embd=16, vocab_size=50, n_positions=16, attn_implementation="eager"
    )
    eager = transformers.GPT2LMHeadModel(config)
    compiled = subclassaot.compile(copy.deepcopy(eager), backend="eager")
    grads = []
    for model in (eager, compiled):
        torch.manual_seed(1)  # the same inputs and dropout draws on each side
        call = _lm_call(50, mask=True, cache=True)  # (cache=True: use_cache=False)
        torch.autograd.backward(model(*call.args, **call.kwargs).loss)
        grads.append([p.grad for p in model.parameters()])
    for want, got in zip(*grads, strict=True):
        torch.testing.assert_close(got, want)
    assert _native(compiled)


def _max_indices_written_from_the_input(x0: T) -> tuple[T]:
    t0, t1 = x0.max(0, keepdim=True)
    t1.data.copy_(x0)  # max's backward reads the written indices (1: out of bounds in eager's backward)
    return (t0,)


def _max_indices_zeroed(x0: T) -> tuple[T]:
    t0, t1 = x0.max(0, keepdim=True)
    t1.data.zero_()
    return (t0,)


def _sort_indices_zeroed(x0: T) -> tuple[T]:
    t0, t1 = x0.sort(1)
    t1.data.zero_()
    return (t0,)


def _saved_input_scaled(x0: T) -> tuple[T]:
    t = x0 * 1
    t0 = t.sin()
    t.data.mul_(2)  # sin's backward reads t as written
    return (t0,)


_HIDDEN_WRITES_AFTER_SAVE = {
    "max_indices_zeroed": (_max_indices_zeroed, (3, 2)),
    "sort_indices_zeroed": (_sort_indices_zeroed, (3, 2)),
    "saved_input_scaled": (_saved_input_scaled, (3, 2)),
}


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("name", list(_HIDDEN_WRITES_AFTER_SAVE))
def test_saved_tensor_written_through_data_keeps_the_function(name: str, kind: str) -> None:
    """Fuzz seed 117000 #400: a write through `.data` after a node saved the tensor moves no version counter of its,
    so eager's backward reads the written values; the traced forward's saves hold those before the write, so the
    program keeps the Function, whose traced backward reads them as written."""
    f, shape = _HIDDEN_WRITES_AFTER_SAVE[name]
    make = leaf if kind == "plain" else functools.partial(pair, requires_grad=True)
    with torch.enable_grad():
        compiled = assert_matches_eager(f, lambda: (make(*shape),))
    if kind == "plain":
        assert not _native(compiled)


def test_max_indices_written_out_of_bounds_fail_backward_as_eager() -> None:
    """Fuzz seed 117000 #400 itself: the written index is out of bounds, and eager's backward raises."""
    from subclassaot.tools.parity import write_outputs

    with torch.enable_grad():
        assert_matches_eager(_max_indices_written_from_the_input, lambda: (leaf(1, 1),))
        assert_matches_eager(_max_indices_written_from_the_input, lambda: (leaf(1, 1),), after_call=write_outputs)
