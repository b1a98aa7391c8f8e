"""Fuzz regressions (helper bwdshape): eager's backward fails its size check ("returned an invalid gradient ...
expected shape compatible with") after an input's layout changed behind autograd, where ours ran (Note [Leaves Laid Out
Anew Under no_grad], Note [Layouts Changed Behind Autograd])."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_with_grad, leaf, nonleaf, pair, refused_with_grad

T = torch.Tensor

SUBCLASS_RESIZED = r"args\[0\]: a tensor subclass input that is an autograd leaf and requires grad gets another size"
BEHIND = r"args\[0\]: the program changes the size of a tensor that requires grad behind autograd"


def test_fuzz_seed17000_program4088(compile_fn: CompileFn | None) -> None:
    # fuzz seed 17000 #4088: the expand() keeps the leaf's accumulator at its old size; eager's SelectBackward0 fails
    # its size check, and so must ours (the select is replayed on the real leaf after the epilogue's t_())
    def f(x0: T, x1: T) -> object:
        t0 = x1.expand((1, 2, -1))  # noqa: F841  (held, as in the fuzz program)
        with torch.no_grad():
            x0.t_()
        t1 = x0.select(1, -2)
        return (t1,)

    def make_inputs() -> tuple[object, ...]:
        b = leaf(2, 4)
        return (b, b)

    check_with_grad(f, make_inputs, compile_fn)


_OPS: dict[str, Callable[[T], object]] = {
    "t_": lambda x: x.t_(),
    "transpose_": lambda x: x.transpose_(0, 1),
    "unsqueeze_1": lambda x: x.unsqueeze_(1),
    "unsqueeze_0": lambda x: x.unsqueeze_(0),
    "as_strided_": lambda x: x.as_strided_((x.shape[1], x.shape[0]), (1, x.shape[1])),
}
_OUTS: dict[str, Callable[[T], T]] = {
    "row": lambda x: x[0],
    "select": lambda x: x.select(0, -1),
    "self": lambda x: x,
}


_READS: dict[str, Callable[[T], object]] = {
    "expand": lambda x: x.expand(2, -1, -1),
    "view": lambda x: x[0],
    "mul": lambda x: x * 2,
    "temp": lambda x: (x.sin(), None)[1],  # the result dies at once: eager's accumulator with it
}


def _read_then_layout_op(op: str, out: str, read: str) -> Callable[..., object]:
    def f(*xs: T) -> object:
        x0, x1 = xs[0], xs[-1]
        held = _READS[read](x1)  # noqa: F841  (held, as in the fuzz program)
        with torch.no_grad():
            _OPS[op](x0)
        return (_OUTS[out](x0),)

    return f


def _leaf_inputs(make: Callable[[], T], twice: bool) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        b = make()
        return (b, b) if twice else (b,)

    return make_inputs


@pytest.mark.parametrize("op", list(_OPS))
@pytest.mark.parametrize("out", list(_OUTS))
@pytest.mark.parametrize("read", list(_READS))
@pytest.mark.parametrize("twice", [False, True])
def test_leaf_read_before_layout_op_under_no_grad(
    compile_fn: CompileFn | None, op: str, out: str, read: str, twice: bool
) -> None:
    # fuzz seed 17000 #4088 generalized: a read with grad before the op whose result is held keeps the accumulator
    # at the old size; views of the leaf replayed after the epilogue must find it, as eager's do (or make a new one
    # where the result died: `temp`)
    check_with_grad(_read_then_layout_op(op, out, read), _leaf_inputs(lambda: leaf(2, 3), twice), compile_fn)


@pytest.mark.parametrize("op", ["t_", "unsqueeze_0", "unsqueeze_1"])
@pytest.mark.parametrize("out", list(_OUTS))
@pytest.mark.parametrize("read", ["expand", "temp"])
def test_leaf_read_before_layout_op_under_no_grad_square(
    compile_fn: CompileFn | None, op: str, out: str, read: str
) -> None:
    # fuzz seed 17000 #4088 generalized: a square leaf keeps its size through t_() (either accumulator will do)
    check_with_grad(_read_then_layout_op(op, out, read), _leaf_inputs(lambda: leaf(3, 3), False), compile_fn)


@pytest.mark.parametrize("op", ["t_", "unsqueeze_1", "as_strided_"])
@pytest.mark.parametrize("read", ["expand", "view", "temp"])
def test_pair_leaf_read_before_layout_op_under_no_grad(compile_fn: CompileFn | None, op: str, read: str) -> None:
    # fuzz seed 17000 #4088 generalized to a PairTensor leaf: returned itself, it matches eager; read with grad after
    # the op, the subclass rule refuses it (Note [Leaves Laid Out Anew Under no_grad]); passed twice, the alias
    # rule does
    make = _leaf_inputs(lambda: pair(2, 3, requires_grad=True), False)
    check_with_grad(_read_then_layout_op(op, "self", read), make, compile_fn)
    refused_with_grad(_read_then_layout_op(op, "row", read), make, compile_fn, SUBCLASS_RESIZED)


def _set_then(after: str, out: str) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x0.set_(x1)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        if after == "t_":
            x0.t_()
        else:
            x0.unsqueeze_(0)
        return {"x1": (x1,), "x1mul": (x1 * 2,), "x0": (x0,), "x0mul": (x0 * 2,)}[out]

    return f


def _aliased(view: Callable[[T], T], *shape: int) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        b = nonleaf(*shape)
        return (b, view(b))

    return make_inputs


def test_fuzz_seed17000_program3910(compile_fn: CompileFn | None) -> None:
    # fuzz seed 17000 #3910: eager's TBackward1 hands CloneBackward0 (size [2, 3]) a gradient of size [2, 0]
    refused_with_grad(_set_then("t_", "x1"), _aliased(lambda b: b[:, 3:3:2], 2, 3), compile_fn, BEHIND)


@pytest.mark.parametrize("after", ["t_", "unsqueeze_"])
@pytest.mark.parametrize("out", ["x1", "x1mul", "x0"])
@pytest.mark.parametrize("view", ["slice", "row", "t"])
def test_nonleaf_set_under_no_grad_then_layout_op_refused(
    compile_fn: CompileFn | None, after: str, out: str, view: str
) -> None:
    # fuzz seed 17000 #3910 generalized: where eager's backward fails its size check and ours runs, refused
    views: dict[str, Callable[[T], T]] = {"slice": lambda b: b[:, 3:3:2], "row": lambda b: b[0], "t": lambda b: b.t()}
    refused_with_grad(_set_then(after, out), _aliased(views[view], 2, 3), compile_fn, BEHIND)


@pytest.mark.parametrize("after", ["t_", "unsqueeze_"])
@pytest.mark.parametrize("out", ["x1", "x0mul"])
def test_nonleaf_set_under_no_grad_then_layout_op_passes(compile_fn: CompileFn | None, after: str, out: str) -> None:
    # set_() to the input's own layout records nothing eager's history reads; a read by the graph (x0 * 2) fails
    # in the traced backward as in eager's, and that error is deferred
    check_with_grad(_set_then(after, out), _aliased(lambda b: b.view(2, 3), 2, 3), compile_fn)
    if out == "x0mul":
        check_with_grad(_set_then(after, out), _aliased(lambda b: b[0], 2, 3), compile_fn)
