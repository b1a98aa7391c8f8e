"""Fuzz follow-up (seed 49000 #6570): a view (detach, view, select, ...) of a subclass input taken before an in-place
view op on it (transpose_, t_, as_strided_) and a `.data =` / set_() of it: the `.data =` gives the wrapper back
the metadata it had when the view was taken while its dense leaves stay transposed, and the output was replayed
from the input after the epilogue, on the transposed leaves (Note [Wrapper Data Assignment]). Also its
variants: a view of a PairTensor input set_() while another input shares its storage, and a plain input that
requires grad given `.data =` and an in-place view op with grad (Note [Writes With Grad After .data =])."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn
from tests.pipeline.fuzz_helpers import check_no_grad, check_with_grad, nonleaf, pair, pair_nonleaf, refused_with_grad

T = torch.Tensor

_VIEWS: dict[str, Callable[[T], T]] = {
    "detach": lambda x: x.detach(),
    "alias": torch.ops.aten.alias.default,
    "view": lambda x: x.view(-1),  # raised: view() of the transposed leaves
    "select": lambda x: x[0],
    "detach_t": lambda x: x.detach().t(),
}

_META_OPS: dict[str, Callable[[T], object]] = {
    "transpose_": lambda x: x.transpose_(0, 1),
    "t_": lambda x: x.t_(),
    "as_strided_": lambda x: x.as_strided_((3, 2), (1, 3), 1),
    "unsqueeze_": lambda x: x.unsqueeze_(0),
}


def _assign(how: str, x: T, t: T) -> None:
    if how == "data":
        x.data = t
    elif how == "data_fresh":
        x.data = torch.zeros_like(t)
    else:
        x.set_(t)  # type: ignore[call-overload]  # torch's stubs list only the storage overloads of set_


def _program(view: str, meta: str, how: str, n: int) -> Callable[..., object]:
    """`t0 = view(x_1); t1 = x_0.sin(); meta(x_0); x_last.<assign>(t1); return (t0,)` over one object passed n times."""

    def f(*xs: T) -> object:
        t0 = _VIEWS[view](xs[1 % n])
        t1 = xs[0].sin()
        _META_OPS[meta](xs[0])
        _assign(how, xs[-1], t1)
        return (t0,)

    return f


def _times(make: Callable[[], T], n: int) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        x = make()
        return (x,) * n

    return make_inputs


def test_detach_before_transpose_and_data_assignment(compile_fn: CompileFn | None) -> None:
    # fuzz seed 49000 #6570 (shrunk): ours' output had stride (1, 3) and transposed values, eager's (3, 1)
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x1.detach()
        t1 = x1.sin()
        x0.transpose_(0, 1)
        x2.data = t1
        return (t0,)

    make_inputs = _times(lambda: pair(3, 3), 3)
    check_no_grad(f, make_inputs, compile_fn)
    check_with_grad(f, make_inputs, compile_fn)


@pytest.mark.parametrize("view", sorted(_VIEWS))
@pytest.mark.parametrize("n", [1, 3])
def test_views_before_meta_op_and_data_assignment(compile_fn: CompileFn | None, view: str, n: int) -> None:
    # variants of fuzz seed 49000 #6570: every view op, every in-place view op, `.data =` of the computed tensor;
    # a PairTensor and a plain tensor, passed once or three times, with and without grad
    for meta in sorted(_META_OPS):
        f = _program(view, meta, "data", n)
        for make in (lambda: pair(3, 3), lambda: torch.randn(3, 3)):
            check_no_grad(f, _times(make, n), compile_fn)
            check_with_grad(f, _times(make, n), compile_fn)


@pytest.mark.parametrize("how", ["data_fresh", "set_"])
def test_views_before_meta_op_and_storage_swap(compile_fn: CompileFn | None, how: str) -> None:
    # variants of fuzz seed 49000 #6570: `.data =` of a fresh tensor (the same failure) and set_()
    for view in ("detach", "view", "select"):
        for meta in ("transpose_", "as_strided_"):
            check_no_grad(_program(view, meta, how, 1), _times(lambda: pair(3, 3), 1), compile_fn)
            check_with_grad(_program(view, meta, how, 2), _times(lambda: pair(3, 3), 2), compile_fn)


def test_view_inputs_and_leaves_requiring_grad(compile_fn: CompileFn | None) -> None:
    # variants of fuzz seed 49000 #6570: the PairTensor input a view of a larger one, a leaf requiring grad (under
    # no_grad: with grad on, eager refuses the in-place view op), a non-leaf
    for view in ("detach", "select", "detach_t"):
        for meta in ("transpose_", "t_"):
            f = _program(view, meta, "data", 3)
            check_no_grad(f, _times(lambda: pair(4, 3)[1:], 3), compile_fn)
            check_with_grad(f, _times(lambda: pair(4, 3)[1:], 3), compile_fn)
            check_no_grad(f, _times(lambda: pair(3, 3, requires_grad=True), 3), compile_fn)
            check_no_grad(f, _times(lambda: pair_nonleaf(3, 3), 3), compile_fn)


def _aliased_pair() -> tuple[object, ...]:
    x = pair(3, 3)
    return (x, x.view(3, 3))


def _aliased_plain() -> tuple[object, ...]:
    x = torch.randn(3, 3)
    return (x, x.view(3, 3))


def _set_while_aliased(view: str, meta: str) -> Callable[..., object]:
    def f(x0: T, x1: T) -> object:
        t0 = _VIEWS[view](x1)
        t1 = x0.sin()
        x1.set_(t1)  # type: ignore[call-overload]  # torch's stubs list only the storage overloads of set_
        if meta == "squeeze_unsqueeze":
            x0.unsqueeze_(1)
            x0.squeeze_(1)
        elif meta == "t_":
            x0.t_()
        return (t0,)

    return f


@pytest.mark.parametrize("view", ["detach", "view", "select", "detach_t"])
def test_view_of_input_set_while_an_alias_keeps_its_storage(compile_fn: CompileFn | None, view: str) -> None:
    # variant of fuzz seed 49000 #6570 (found by a grid around it): `t0 = x1.detach(); x1.set_(x0.sin())` with x1 a
    # view of x0, two PairTensor objects on one storage: t0 was replayed from x1 after the epilogue, on its new
    # storage (another input still holding the old one hid the swap)
    for meta in ("none", "squeeze_unsqueeze", "t_"):
        for make in (_aliased_pair, _aliased_plain):
            check_no_grad(_set_while_aliased(view, meta), make, compile_fn)
            check_with_grad(_set_while_aliased(view, meta), make, compile_fn)


def _data_then_transpose(x: T) -> object:
    x.data = x.sin()
    x.transpose_(0, 1)
    return (x,)


def _transpose_then_data(x: T) -> object:
    x.transpose_(0, 1)
    x.data = x.sin()
    return (x,)


def _data_of_input_then_unsqueeze(x: T, y: T) -> object:
    x.data = y
    x.unsqueeze_(0)
    return (x.detach(),)


def test_inplace_view_op_with_grad_and_data_assignment(compile_fn: CompileFn | None) -> None:
    # variant of fuzz seed 49000 #6570 (found by a grid around it): a plain non-leaf that requires grad, given
    # `.data =` another storage and transpose_() with grad, returned: the epilogue's invisible `.data =` left it
    # without eager's TransposeBackward0 (a wrong gradient): refused; under no_grad, and for a PairTensor, parity
    one = lambda: (nonleaf(3, 3),)  # noqa: E731
    two = lambda: (nonleaf(3, 3), torch.randn(3, 3))  # noqa: E731
    match = r"cannot give it eager's history of that view op \(Note \[Writes With Grad After \.data =\]\)"
    for f, make in ((_data_then_transpose, one), (_transpose_then_data, one), (_data_of_input_then_unsqueeze, two)):
        refused_with_grad(f, make, compile_fn, match)
        check_no_grad(f, make, compile_fn)
    check_with_grad(_data_then_transpose, lambda: (pair_nonleaf(3, 3),), compile_fn)
    check_with_grad(_data_then_transpose, lambda: (torch.randn(3, 3),), compile_fn)

    def written_after(x: T, y: T) -> object:  # a write with grad after: Note [Writes With Grad After .data =]
        x.t_()
        x.data = y.sin()
        x.mul_(2)
        return (x,)

    check_with_grad(written_after, two, compile_fn)
