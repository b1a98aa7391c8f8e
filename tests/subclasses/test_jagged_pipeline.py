"""JaggedTensor through `subclassaot.compile`: parity with eager, mutation, aliasing, dynamic batches."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

import subclassaot
from policies import mark_dynamic
from subclasses.nested import JaggedTensor, softmax_pool
from tests.backends import RecordingBackend
from tests.oracle import assert_matches_eager

D = 4


def _batch(lengths: list[int], *, seed: int = 0, holes: bool = False, requires_grad: bool = False) -> JaggedTensor:
    gen = torch.Generator().manual_seed(seed)
    slots = [n + (1 if holes else 0) for n in lengths]
    values = torch.randn(sum(slots), D, generator=gen)
    offsets = torch.tensor([0, *torch.tensor(slots).cumsum(0).tolist()])
    lens = torch.tensor(lengths) if holes else None
    return JaggedTensor(values, offsets, lengths=lens, requires_grad=requires_grad)


def block(x: JaggedTensor, w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The benchmark's block: linear -> softmax over the ragged dim -> sum over it, plus a padded view and amax."""
    y = F.linear(x, w).relu()
    assert isinstance(y, JaggedTensor)
    return (y.softmax(1) * y).sum(1), y.to_padded(), y.amax(1)


@pytest.mark.parametrize("holes", [False, True])
def test_inference_matches_eager(holes: bool) -> None:
    assert_matches_eager(block, lambda: (_batch([3, 1, 5], holes=holes), torch.randn(6, D)), atol=1e-5, rtol=1e-5)


def test_jagged_output_matches_eager() -> None:
    assert_matches_eager(lambda x: F.layer_norm(x * 2 + 1, (D,)), lambda: (_batch([2, 4, 3]),), atol=1e-5, rtol=1e-5)


def test_input_mutated_in_place() -> None:
    def fn(x: JaggedTensor) -> Tensor:
        x.mul_(2).add_(1)
        return x.sum(1)

    assert_matches_eager(fn, lambda: (_batch([3, 2, 4]),))


@pytest.mark.parametrize("holes", [False, True])
def test_training_gradients_through_values(holes: bool) -> None:
    def make() -> tuple[JaggedTensor, Tensor]:
        return _batch([3, 2, 4], holes=holes, requires_grad=True), torch.randn(6, D, requires_grad=True)

    assert_matches_eager(lambda x, w: block(x, w)[0], make, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("op", ["view", "detach", "view_features"])
def test_output_shares_values_with_input(op: str) -> None:
    def fn(x: JaggedTensor) -> tuple[Tensor, Tensor]:
        if op == "view":
            return x.view(x.shape), x.sum(1)
        if op == "detach":
            return x.detach(), x.sum(1)
        return x.view(x.shape[0], x.shape[1], 2, 2), x.sum(1)

    assert_matches_eager(fn, lambda: (_batch([3, 2, 4]),))


def _random_batch(i: int) -> JaggedTensor:
    gen = torch.Generator().manual_seed(100 + i)
    batch = int(torch.randint(2, 9, (), generator=gen))
    lengths = torch.randint(2, 20, (batch,), generator=gen).tolist()
    return _batch(lengths, seed=i)


def _check_batch(out: tuple[Tensor, Tensor, Tensor], x: JaggedTensor, w: Tensor) -> None:
    # Against a per-row loop, so that a result computed with a stale ragged size cannot pass.
    rows = x.unbind()
    ys = [F.linear(r, w).relu() for r in rows]
    width = max(r.shape[0] for r in rows)
    assert out[1].shape == (len(rows), width, w.shape[0]), "to_padded used a stale ragged size"
    torch.testing.assert_close(out[0], torch.stack([(y.softmax(0) * y).sum(0) for y in ys]), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[2], torch.stack([y.amax(0) for y in ys]))
    for i, y in enumerate(ys):
        torch.testing.assert_close(out[1][i, : y.shape[0]], y, atol=1e-5, rtol=1e-5)


def test_ten_batches_one_compile_with_mark_dynamic() -> None:
    w = torch.randn(6, D)
    compiled = subclassaot.compile(block, backend="eager")
    for i in range(10):
        x = _random_batch(i)
        mark_dynamic(x, 0)
        _check_batch(compiled(x, w), x, w)
    assert compiled.compile_count == 1, compiled.recompile_reasons


def test_ten_batches_automatic_dynamic_at_most_two_compiles() -> None:
    w = torch.randn(6, D)
    compiled = subclassaot.compile(block, backend="eager")
    for i in range(10):
        x = _random_batch(i)
        _check_batch(compiled(x, w), x, w)
    assert compiled.compile_count <= 2, compiled.recompile_reasons


def test_static_compile_guards_the_ragged_size() -> None:
    w = torch.randn(6, D)
    compiled = subclassaot.compile(block, backend="eager", dynamic=False)
    for lengths in ([3, 4], [3, 6]):
        x = _batch(lengths)
        _check_batch(compiled(x, w), x, w)
    assert compiled.compile_count == 2
    assert "args[0].size(1): expected 4, got 6" in compiled.recompile_reasons[0]


def _unfused_pool(x: JaggedTensor, w: Tensor) -> Tensor:
    y = F.linear(x, w).relu()
    return (y.softmax(1) * y).sum(1)


def _fused_pool(x: JaggedTensor, w: Tensor) -> Tensor:
    y = F.linear(x, w).relu()
    assert isinstance(y, JaggedTensor)
    return softmax_pool(y)


@pytest.mark.parametrize("holes", [False, True])
def test_softmax_pool_matches_the_unfused_block(holes: bool) -> None:
    x, x2 = (_batch([3, 1, 5, 2], holes=holes, requires_grad=True) for _ in range(2))
    w = torch.randn(6, D, requires_grad=True)
    w2 = w.detach().clone().requires_grad_()
    out, want = _fused_pool(x, w), _unfused_pool(x2, w2)
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
    g = torch.randn_like(out)
    torch.autograd.backward([out, want], [g, g])
    assert isinstance(x.grad, JaggedTensor) and isinstance(x2.grad, JaggedTensor) and w.grad is not None
    torch.testing.assert_close(x.grad.flat_values, x2.grad.flat_values, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(w.grad, w2.grad, atol=1e-5, rtol=1e-5)


def test_softmax_pool_training_matches_eager() -> None:
    def make() -> tuple[JaggedTensor, Tensor]:
        return _batch([3, 2, 4], requires_grad=True), torch.randn(6, D, requires_grad=True)

    assert_matches_eager(_fused_pool, make, atol=1e-5, rtol=1e-5)


def _graph_ops(fn: Callable[[JaggedTensor, Tensor], Tensor]) -> list[str]:
    backend = RecordingBackend()
    subclassaot.compile(fn, backend=backend)(_batch([3, 1, 5]), torch.randn(6, D))
    (gm,) = backend.graphs
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_compiled_softmax_pool_is_one_kernel_where_the_block_had_three() -> None:
    # The host-bound block's time is its launch count (Note [Fused Softmax Pool]).
    fused, unfused = _graph_ops(_fused_pool), _graph_ops(_unfused_pool)
    assert sum("subclassaot_jagged" in t for t in fused) == 1
    assert sum("subclassaot_jagged" in t for t in unfused) == 2
    assert len(fused) <= len(unfused) - 2, (fused, unfused)


def _cuda_batch() -> tuple[JaggedTensor, Tensor]:
    from benchmarks.jagged import FEATURES, lengths

    lens = lengths().cuda()
    values = torch.randn(int(lens.sum()), FEATURES, device="cuda")
    return JaggedTensor.from_lengths(values, lens), torch.randn(FEATURES, FEATURES, device="cuda") / FEATURES**0.5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_compiled_fused_block_matches_unfused_on_cuda() -> None:
    # Compiled kernels on the GPU (the launch counts are checked above; the time is benchmarks/jagged.py's).
    x, w = _cuda_batch()
    with torch.no_grad():
        fused = subclassaot.compile(_fused_pool)
        unfused = subclassaot.compile(_unfused_pool)
        torch.testing.assert_close(fused(x, w), unfused(x, w), atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_compiled_fused_block_matches_inductor_padded_on_cuda() -> None:
    # The jagged block (default backend) against the padded block compiled by Inductor: the same numbers (which is
    # faster is benchmarks/jagged.py's table).
    from benchmarks.jagged import MAX_LEN, padded_block

    x, w = _cuda_batch()
    lens = x.row_lengths()
    padded = x.to_padded(0.0)
    mask = (torch.arange(MAX_LEN, device="cuda")[None, :] < lens[:, None])[:, :, None]
    with torch.no_grad():
        fused = subclassaot.compile(_fused_pool)
        padded_inductor = subclassaot.compile(padded_block, backend="inductor")
        torch.testing.assert_close(fused(x, w), padded_inductor(padded, mask, w), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("op", ["sin", "contiguous_mul"])
def test_output_from_inputs_without_grad_has_no_history_in_a_training_call(op: str) -> None:
    # found by the fuzzer (sample subclass inputs, seeds 2712 #28 and 75000 #40/#42): in a training call (another
    # input requires grad), a JaggedTensor output computed only from an input that does not require grad shares
    # that input's offsets, so it is rebuilt beside the compiled autograd.Function; its values came out of the
    # Function with its history (grad_fn CompiledStepBackward), eager's have none.
    def f(x: Tensor, j: Tensor) -> tuple[Tensor, ...]:
        return (j.sin(),) if op == "sin" else (j.contiguous().mul(3.0),)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (torch.randn(3, requires_grad=True), _batch([2, 0, 3])))
        out = subclassaot.compile(f)(torch.randn(3, requires_grad=True), _batch([2, 0, 3]))[0]
    assert isinstance(out, JaggedTensor) and not out.flat_values.requires_grad and out.flat_values.grad_fn is None


def test_output_beside_an_inputs_offsets_and_a_fresh_output_in_a_training_call() -> None:
    # found by the fuzzer (JaggedTensor inputs, seed 75100 #740): the first output shares x's offsets (rebuilt
    # beside the compiled Function), the second is wholly fresh; the Function read the fresh output's inner tensors
    # from the graph's first fresh leaves (the first output's values), so its flat_values came out a JaggedTensor
    def f(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
        return x.contiguous().mul(x), y.mul(y)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (_batch([2, 0, 3]), _batch([2, 0, 3], seed=1, requires_grad=True).clone()))


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("grad", [False, True])
def test_same_shape_view_of_a_computed_batch_replays_from_it(grad: bool, requires_grad: bool) -> None:
    # found by the fuzzer (JaggedTensor inputs, seed 75100 #478): eager's output is a view of the unreturned sum (the
    # wrapper is what autograd sees); its values alias the sum's and its offsets are the input's. Refused before
    # (the compiled output came out as no view); the sum is rebuilt around the input's offsets (Note [Output
    # Regeneration])
    def f(x: Tensor) -> Tensor:
        t = x.add(2.0)
        return t.view(t.shape)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, lambda: (_batch([2, 0, 3], requires_grad=requires_grad),))
