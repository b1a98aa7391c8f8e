"""PairTensor in eager mode: every op matches running it on `a` and `b` separately; aliasing as a plain tensor."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from subclasses.pair import PairTensor, example, nested_example

Op = Callable[[torch.Tensor], object]

OPS: dict[str, Op] = {
    "add": lambda t: t + 1,
    "mul_plain": lambda t: t * torch.arange(4.0),
    "sum": lambda t: t.sum(),
    "sum_dim": lambda t: t.sum(0),
    "matmul": lambda t: t @ torch.ones(4, 2),
    "t": lambda t: t.t(),
    "transpose": lambda t: t.transpose(0, 1),
    "view": lambda t: t.view(12),
    "view_as_2_6": lambda t: t.view(2, 6),
    "reshape_t": lambda t: t.t().reshape(12),
    "slice": lambda t: t[1:],
    "select": lambda t: t[1],
    "narrow": lambda t: t.narrow(1, 1, 2),
    "expand": lambda t: t.unsqueeze(0).expand(2, 3, 4),
    "as_strided": lambda t: t.as_strided((2, 2), (1, 4), 1),
    "unbind": lambda t: t.unbind(0),
    "split": lambda t: torch.split(t, 2, dim=1),
    "chunk": lambda t: t.chunk(3, dim=0),
    "cat": lambda t: torch.cat([t, t], 0),
    "to_f64": lambda t: t.to(torch.float64),
    "contiguous_t": lambda t: t.t().contiguous(),
    "where": lambda t: torch.where(t > 0, t, torch.zeros(())),
    "max_dim": lambda t: t.max(dim=1),
}


def _sides(out: object) -> tuple[object, object]:
    if isinstance(out, PairTensor):
        return out.a, out.b
    if isinstance(out, tuple | list):
        pairs = [_sides(o) for o in out]
        return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
    return out, out


def _assert_same(got: object, expected: object) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor) and type(got) is torch.Tensor
        assert got.shape == expected.shape and got.stride() == expected.stride()
        torch.testing.assert_close(got, expected)
    elif isinstance(expected, tuple | list):
        assert isinstance(got, tuple | list) and len(got) == len(expected)
        for g, e in zip(got, expected, strict=True):
            _assert_same(g, e)
    else:
        assert got == expected


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_matches_inner(name: str) -> None:
    op, x = OPS[name], example()
    out = op(x)
    got_a, got_b = _sides(out)
    _assert_same(got_a, op(x.a))
    _assert_same(got_b, op(x.b))
    for wrapper, plain in zip(*_flat_pairs(out, op(x.a)), strict=True):
        assert wrapper.shape == plain.shape and wrapper.stride() == plain.stride()


def _flat_pairs(out: object, plain: object) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    outs = [o for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    plains = [p for p in torch.utils._pytree.tree_leaves(plain) if isinstance(p, torch.Tensor)]
    return outs, plains


VIEWS: dict[str, Op] = {k: OPS[k] for k in ("t", "transpose", "view", "slice", "select", "narrow", "expand")}
VIEWS["as_strided"] = OPS["as_strided"]
VIEWS["detach"] = lambda t: t.detach()
VIEWS["unsqueeze"] = lambda t: t.unsqueeze(1)


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_alias_like_plain(name: str) -> None:
    x = example()
    v = VIEWS[name](x)
    assert isinstance(v, PairTensor)
    assert v.untyped_storage()._cdata == x.untyped_storage()._cdata
    plain_view = VIEWS[name](torch.zeros(3, 4))
    assert isinstance(plain_view, torch.Tensor)
    assert (v._base is x) == (plain_view._base is not None)
    assert v.storage_offset() == v.a.storage_offset()
    assert v.a.untyped_storage().data_ptr() == x.a.untyped_storage().data_ptr()


@pytest.mark.parametrize(
    ("name", "op"),
    [
        ("add_", lambda t: t.add_(1)),
        ("mul_plain_", lambda t: t.mul_(torch.arange(4.0))),
        ("copy_plain", lambda t: t.copy_(torch.ones(3, 4))),
        ("zero_", lambda t: t.zero_()),
        ("t_", lambda t: t.t_()),
        ("unsqueeze_", lambda t: t.unsqueeze_(0)),
        ("transpose_", lambda t: t.transpose_(0, 1)),
        ("squeeze_", lambda t: t.unsqueeze_(0).squeeze_(0)),
        ("as_strided_", lambda t: t.as_strided_((2, 2), (1, 4), 1)),
        ("resize_smaller", lambda t: t.resize_(2, 2)),
        ("resize_larger", lambda t: t.resize_(4, 5)),
        ("set_", lambda t: t.set_(PairTensor(torch.ones(5), torch.zeros(5)))),
    ],
)
def test_inplace_ops_return_input_and_fix_metadata(name: str, op: Op) -> None:
    x = example()
    plain_a = x.a.clone()
    out = op(x)
    assert out is x
    expected = op(plain_a) if name != "set_" else torch.ones(5)
    assert isinstance(expected, torch.Tensor)
    assert x.shape == x.a.shape == expected.shape
    assert x.stride() == x.a.stride() == expected.stride()
    if not name.startswith("resize_larger"):
        torch.testing.assert_close(x.a, expected)


def test_inplace_on_view_updates_base() -> None:
    x = example()
    x[0].add_(100)
    assert x.a[0, 0] == 100 and x.b[0, 0] == 101


def test_plain_args_broadcast_to_both_sides() -> None:
    x, y = example(), torch.full((4,), 2.0)
    out = x * y
    assert isinstance(out, PairTensor)
    torch.testing.assert_close(out.a, x.a * y)
    torch.testing.assert_close(out.b, x.b * y)


def test_non_tensor_results_come_from_a() -> None:
    x = example()
    assert x.sum().item() == x.a.sum().item()
    assert bool(x.is_same_size(example()))
    assert x.dim() == 2 and x.numel() == 12


def test_from_tensor_copies_with_strides() -> None:
    t = torch.randn(4, 3).t()
    p = PairTensor.from_tensor(t, requires_grad=True)
    assert p.stride() == t.stride() and p.requires_grad and p.is_leaf
    assert p.a.untyped_storage().data_ptr() != p.b.untyped_storage().data_ptr()
    torch.testing.assert_close(p.b, t)


def test_nested_pairs_apply_to_every_leaf() -> None:
    x = nested_example()
    y = (x * 2).t()
    assert isinstance(y, PairTensor) and isinstance(y.a, PairTensor) and isinstance(x.a, PairTensor)
    assert y.shape == (4, 3)
    torch.testing.assert_close(y.a.b, (x.a.b * 2).t())


def test_autograd_flows_to_both_sides() -> None:
    x = PairTensor(torch.randn(3, 4), torch.randn(3, 4), requires_grad=True)
    torch.autograd.backward((x * x).sum())
    assert isinstance(x.grad, PairTensor)
    torch.testing.assert_close(x.grad.a, 2 * x.a)
    torch.testing.assert_close(x.grad.b, 2 * x.b)


def test_compile_aot_eager_matches_eager() -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        u = t.t() * 2 + 1
        return u.sum(0).unsqueeze(1)

    compiled = torch.compile(fn, backend="aot_eager", fullgraph=True)
    got, expected = compiled(example()), fn(example())
    assert isinstance(got, PairTensor) and isinstance(expected, PairTensor) and got.shape == expected.shape
    torch.testing.assert_close(got.a, expected.a)
    torch.testing.assert_close(got.b, expected.b)


def test_compile_aot_eager_input_mutation() -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        t.mul_(2)
        return t.view(-1)

    x1, x2 = example(), example()
    got = torch.compile(fn, backend="aot_eager", fullgraph=True)(x1)
    expected = fn(x2)
    assert isinstance(got, PairTensor) and isinstance(expected, PairTensor)
    torch.testing.assert_close(x1.a, x2.a)
    torch.testing.assert_close(x1.b, x2.b)
    torch.testing.assert_close(got.a, expected.a)
