from __future__ import annotations
from collections.abc import Callable
import pytest, torch
from tests.oracle import assert_matches_eager, assert_raises_like_eager
from tests.pipeline.program_helpers import nonleaf, pair_nonleaf
T = torch.Tensor

VIEWS = {
    "unbind": lambda b: b.unbind(2)[1],
    "chunk": lambda b: b.chunk(2, 2)[1],
    "no_grad": lambda b: _ng(lambda: b[..., 1]),
    "select": lambda b: b.select(2, 1),
}
def _ng(f):
    with torch.no_grad():
        return f()

def p_view_before(x0, x1):
    t = x0.view(-1); x0.detach().add_(1.0); return (t * 2,)
def p_slice_before(x0, x1):
    t = x0[1:]; x1.detach().mul_(2.0); return (t * 2,)
def p_view_before_grad_fn(x0, x1):
    t = x0.view(-1); x0.detach().add_(1.0); return (t.grad_fn is None,)
def p_view_before_is_leaf(x0, x1):
    t = x0.view(-1); x0.detach().add_(1.0); return (t.is_leaf,)
def p_is_leaf(x0, x1):
    x0.detach().add_(1.0); return (x0.is_leaf,)
def p_grad_fn(x0, x1):
    x0.detach().add_(1.0); return (x0.grad_fn is None,)
def p_is_leaf_nograd(x0, x1):
    x0.detach().add_(1.0)
    with torch.no_grad():
        return (x0.is_leaf,)
def p_requires_grad(x0, x1):
    x0.detach().add_(1.0); return (x0.requires_grad, x0 + 0 if False else x0.detach() * 1)
def p_view_after(x0, x1):
    x0.detach().add_(1.0); t = x0.view(-1); return (t * 2,)
def p_nograd_view_after(x0, x1):
    x0.detach().add_(1.0)
    with torch.no_grad():
        t = x0.view(-1)
    return (t * 2,)
def p_view_before_read_nograd(x0, x1):
    t = x0.view(-1); x0.detach().add_(1.0)
    with torch.no_grad():
        return (t * 2,)
def p_nograd_view_before(x0, x1):
    with torch.no_grad():
        t = x0.view(-1)
    x0.detach().add_(1.0); return (t * 2,)
def p_view_before_written_grad(x0, x1):
    t = x0.view(-1); x0.detach().add_(1.0); t.mul_(2.0); return (t * 2,)
def p_written_grad(x0, x1):
    x0.detach().add_(1.0); x0.mul_(2.0); return (x0 * 2,)
def p_is_leaf_before_bump(x0, x1):
    a = x0.is_leaf; x0.detach().add_(1.0); return (a, x0.detach() * 2)

PROGS = [p_view_before, p_slice_before, p_view_before_grad_fn, p_view_before_is_leaf, p_is_leaf, p_grad_fn, p_is_leaf_nograd,
         p_requires_grad, p_view_after, p_nograd_view_after, p_view_before_read_nograd, p_nograd_view_before,
         p_view_before_written_grad, p_written_grad, p_is_leaf_before_bump]

def eager_raises(f, make):
    with torch.enable_grad():
        try:
            f(*make()); return False
        except RuntimeError:
            return True

@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("f", PROGS, ids=lambda f: f.__name__)
def test_it(f, view, kind):
    def make():
        b0 = pair_nonleaf(4, 3, 2) if kind == "pair" else nonleaf(4, 3, 2)
        return VIEWS[view](b0), b0
    with torch.enable_grad():
        if eager_raises(f, make):
            assert_raises_like_eager(f, make)
        else:
            assert_matches_eager(f, make)
