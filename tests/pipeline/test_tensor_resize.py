"""resize_() / resize_as_() of inputs (helper resize; the corpus's resize_as gap, and programs in the spirit of
PyTorch's test/functorch/test_aotdispatch.py and test/inductor's resize tests): shrinking, growing (a reallocation),
resize_as_ of another input, FSDP's resize_(0) then resize_(n) and copy_, a write after, a view input, PairTensor
inputs. Besides the oracle, the inputs' storage sizes after the call are compared with eager's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError
from subclassaot.tools.parity import write_outputs
from subclasses.pair import PairTensor
from tests.oracle import CompileFn, assert_matches_eager, assert_raises_like_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import (
    DirtyAddSaved,
    DirtyScale,
    SinFunction,
    TransposeSaved,
    assert_refused,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
)

T = torch.Tensor
Make = Callable[[], tuple[object, ...]]


def _storage_sizes(args: tuple[object, ...]) -> list[int]:
    return [a.untyped_storage().nbytes() for a in args if isinstance(a, T) and type(a) is T]


def _check(f: Callable[..., object], make_inputs: Make, compile_fn: CompileFn | None, *, dynamic: bool = False) -> None:
    kwargs = {"dynamic": True} if dynamic else {}
    assert_matches_eager(f, make_inputs, compile_fn=compile_fn, compile_kwargs=kwargs)
    # the storages' sizes (the oracle does not compare them), on the default backend (inductor)
    compiled = compile_fn(f, **kwargs) if compile_fn is not None else subclassaot.compile(f, dynamic=dynamic or None)
    torch.manual_seed(0)
    eager_args = make_inputs()
    f(*eager_args)
    torch.manual_seed(0)
    compiled_args = make_inputs()
    compiled(*compiled_args)
    assert _storage_sizes(compiled_args) == _storage_sizes(eager_args)


def shrink(x: T) -> object:
    x.resize_(2)
    return x * 2


def shrink_2d(x: T, y: T) -> object:  # test_aotdispatch's test_input_mutation_resize_smaller
    x.resize_(2, 2)
    return x + y


def shrink_returned(x: T) -> object:
    x.resize_(2)
    return x


def grow_then_fill(x: T) -> object:
    x.resize_(6)
    x.fill_(2)
    return x * 1


def grow_then_copy(x: T, y: T) -> object:
    x.resize_(2, 3)
    x.copy_(y)
    return x.sum(0)


def grow_returned_after_write(x: T) -> object:
    x.resize_(8)
    x.zero_()
    return x


def same_numel(x: T) -> object:
    x.resize_(2, 2)
    return x.t() * 1


def same_size(x: T) -> object:
    x.resize_(4)  # no change: no version bump in eager
    return x + 1


def resize_as_larger(x: T, y: T) -> object:
    x.resize_as_(y)
    x.fill_(3)
    return x.sum()


def resize_as_smaller(x: T, y: T) -> object:
    x.resize_as_(y)
    return x * y


def resize_as_channels_last(x: T, y: T) -> object:
    x.resize_as_(y, memory_format=torch.channels_last)
    x.copy_(y)
    return x + 1


def resize_as_preserve(x: T, y: T) -> object:
    x.resize_as_(y, memory_format=torch.preserve_format)
    x.copy_(y)
    return x + 1


def fsdp_free_then_refill(x: T, y: T) -> object:  # FSDP: x.resize_(0) ... x.resize_(n); x.copy_(y)
    z = x.sum()
    x.resize_(0)
    x.resize_(4)
    x.copy_(y)
    return z, x * 2


def fsdp_free(x: T) -> object:
    z = x * 2
    x.resize_(0)
    return z


def shrink_then_write(x: T) -> object:
    x.resize_(2)
    x.add_(1)
    return x.sum()


def write_then_shrink(x: T) -> object:
    x.mul_(3)
    x.resize_(3)
    return x + 1


def shrink_then_grow(x: T) -> object:  # the old values come back (the storage was never reallocated)
    x.resize_(1)
    x.resize_(4)
    return x * 1


def view_taken_before(x: T) -> object:
    v = x[1:]
    x.resize_(2)
    x.fill_(5)
    return v * 1


def regrow_then_write(x: T) -> object:  # the regrown elements are written: functionalization lost the write
    x.resize_(1)
    x.resize_(4)
    x.fill_(1)
    return x * 1


def regrow_partly_then_write(x: T) -> object:
    x.resize_(2)
    x.resize_(3)
    x.add_(1)
    return x * 1


def view_regrown_then_written(x: T) -> object:  # x[:2].resize_(4) covers all of x
    v = x[:2]
    v.resize_(4)
    v.fill_(1)
    return x * 1


def view_regrown_then_written_from(x: T, y: T) -> object:
    v = x[:2]
    v.resize_(4)
    v.copy_(y)
    return x * 1


def middle_view_regrown_then_written(x: T) -> object:
    v = x[1:3]
    v.resize_(3)
    v.fill_(1)
    return v * 1


def transposed_shrunk(x: T) -> object:
    x.t_()
    x.resize_(3)
    x.mul_(2)
    return x + 1


def resize_channels_last_same_numel(x: T) -> object:
    x.resize_(1, 2, 2, 3, memory_format=torch.channels_last)
    x.copy_(torch.arange(12.0).view(1, 2, 2, 3))
    return x * 1


def restrided_same_size(x: T) -> object:  # no version bump in eager: the size does not change
    x.resize_(1, 2, 2, 3, memory_format=torch.channels_last)
    return x + 1


def restrided_as_template(x: T, y: T) -> object:
    x.resize_as_(y, memory_format=torch.channels_last)
    return x * y


def view_resized_to_nothing(x: T) -> object:  # eager keeps the storage, from an offset past its end too
    t = x[:, 2:2]
    t.resize_((0,))
    t.fill_(-1.0)
    return (t,)


def resized_to_nothing_then_grown(x: T) -> object:
    x.resize_(0)
    x.resize_(3)
    x.fill_(2.0)
    return x * 1


def _empty_past_the_end(rows: slice) -> Make:
    def make() -> tuple[object, ...]:
        return (torch.randn(2, 4)[rows],)

    return make


def _plain(*shape: int) -> Make:
    return lambda: (torch.randn(shape),)


def _view_of_base(n: int, start: int) -> Make:
    def make() -> tuple[object, ...]:
        base = torch.randn(8)
        return (base[start : start + n],)

    return make


CASES: list[tuple[str, Callable[..., object], Make]] = [
    ("shrink", shrink, _plain(4)),
    ("shrink_pair", shrink, lambda: (pair(4),)),
    ("shrink_2d", shrink_2d, lambda: (torch.randn(3, 3), torch.randn(2, 2))),
    ("shrink_2d_pair", shrink_2d, lambda: (pair(3, 3), torch.randn(2, 2))),
    ("shrink_returned", shrink_returned, _plain(4)),
    ("shrink_returned_pair", shrink_returned, lambda: (pair(4),)),
    ("grow_then_fill", grow_then_fill, _plain(2)),
    ("grow_then_fill_pair", grow_then_fill, lambda: (pair(2),)),
    ("grow_then_copy", grow_then_copy, lambda: (torch.randn(2), torch.randn(2, 3))),
    ("grow_then_copy_pair", grow_then_copy, lambda: (pair(2), torch.randn(2, 3))),
    ("grow_returned_after_write", grow_returned_after_write, _plain(3)),
    ("grow_returned_after_write_pair", grow_returned_after_write, lambda: (pair(3),)),
    ("same_numel", same_numel, _plain(4)),
    ("same_numel_pair", same_numel, lambda: (pair(4),)),
    ("same_size", same_size, _plain(4)),
    ("same_size_pair", same_size, lambda: (pair(4),)),
    ("resize_as_larger", resize_as_larger, lambda: (torch.randn(2), torch.randn(2, 3))),
    ("resize_as_larger_pair", resize_as_larger, lambda: (pair(2), torch.randn(2, 3))),
    ("resize_as_larger_pair_template", resize_as_larger, lambda: (torch.randn(2), pair(2, 3))),
    ("resize_as_smaller", resize_as_smaller, lambda: (torch.randn(3, 3), torch.randn(2, 2))),
    ("resize_as_smaller_pair", resize_as_smaller, lambda: (pair(3, 3), torch.randn(2, 2))),
    ("resize_as_channels_last", resize_as_channels_last, lambda: (torch.randn(4), torch.randn(1, 2, 2, 3))),
    (
        "resize_as_preserve",
        resize_as_preserve,
        lambda: (torch.randn(4), torch.randn(1, 2, 2, 3).to(memory_format=torch.channels_last)),
    ),
    ("fsdp_free_then_refill", fsdp_free_then_refill, lambda: (torch.randn(4), torch.randn(4))),
    ("fsdp_free_then_refill_pair", fsdp_free_then_refill, lambda: (pair(4), torch.randn(4))),
    ("fsdp_free", fsdp_free, _plain(4)),
    ("fsdp_free_pair", fsdp_free, lambda: (pair(4),)),
    ("shrink_then_write", shrink_then_write, _plain(4)),
    ("shrink_then_write_pair", shrink_then_write, lambda: (pair(4),)),
    ("write_then_shrink", write_then_shrink, _plain(4)),
    ("write_then_shrink_pair", write_then_shrink, lambda: (pair(4),)),
    ("shrink_then_grow", shrink_then_grow, _plain(4)),
    ("shrink_then_grow_pair", shrink_then_grow, lambda: (pair(4),)),
    ("view_taken_before", view_taken_before, _plain(4)),
    ("view_taken_before_pair", view_taken_before, lambda: (pair(4),)),
    ("view_input_shrink", shrink, _view_of_base(4, 2)),
    ("view_input_grow_within", grow_then_fill, _view_of_base(2, 1)),
    ("view_input_grow_beyond", grow_then_fill, _view_of_base(2, 4)),
    ("view_input_shrink_then_write", shrink_then_write, _view_of_base(4, 2)),
    ("regrow_then_write", regrow_then_write, _plain(4)),
    ("regrow_then_write_pair", regrow_then_write, lambda: (pair(4),)),
    ("regrow_partly_then_write", regrow_partly_then_write, _plain(4)),
    ("regrow_partly_then_write_pair", regrow_partly_then_write, lambda: (pair(4),)),
    ("view_regrown_then_written", view_regrown_then_written, _plain(4)),
    ("view_regrown_then_written_pair", view_regrown_then_written, lambda: (pair(4),)),
    ("view_regrown_then_written_view_input", view_regrown_then_written, _view_of_base(4, 2)),
    ("middle_view_regrown_then_written", middle_view_regrown_then_written, _plain(4)),
    ("middle_view_regrown_then_written_pair", middle_view_regrown_then_written, lambda: (pair(4),)),
    ("transposed_shrunk", transposed_shrunk, _plain(2, 3)),
    ("transposed_shrunk_pair", transposed_shrunk, lambda: (pair(2, 3),)),
    ("resize_channels_last_same_numel", resize_channels_last_same_numel, _plain(12)),
    ("resize_channels_last_grow", resize_channels_last_same_numel, _plain(5)),
    ("restrided_same_size", restrided_same_size, _plain(1, 2, 2, 3)),
    ("view_resized_to_nothing", view_resized_to_nothing, _plain(3, 4)),
    ("view_resized_to_nothing_past_the_end", view_resized_to_nothing, _empty_past_the_end(slice(2, 2))),
    ("view_resized_to_nothing_pair", view_resized_to_nothing, lambda: (pair(3, 4),)),
    ("resized_to_nothing_then_grown", resized_to_nothing_then_grown, _plain(4)),
    ("resized_to_nothing_then_grown_pair", resized_to_nothing_then_grown, lambda: (pair(4),)),
    ("restrided_as_template", restrided_as_template, lambda: (torch.randn(1, 2, 2, 3), torch.randn(1, 2, 2, 3))),
]


@pytest.mark.parametrize(("f", "make_inputs"), [pytest.param(f, m, id=n) for n, f, m in CASES])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_resize_matches_eager(
    f: Callable[..., object], make_inputs: Make, dynamic: bool, compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        _check(f, make_inputs, compile_fn, dynamic=dynamic)


@pytest.mark.parametrize(("f", "make_inputs"), [pytest.param(f, m, id=n) for n, f, m in CASES])
def test_resize_matches_eager_no_grad(
    f: Callable[..., object], make_inputs: Make, compile_fn: CompileFn | None
) -> None:
    with torch.no_grad():
        _check(f, make_inputs, compile_fn)


GRAD_CASES: list[tuple[str, Callable[..., object], Make]] = [
    ("leaf", shrink, lambda: (leaf(4),)),
    ("leaf_same_size", same_size, lambda: (leaf(4),)),
    ("nonleaf", shrink, lambda: (nonleaf(4),)),
    ("pair_leaf", shrink, lambda: (pair(4, requires_grad=True),)),
    ("pair_nonleaf", shrink, lambda: (pair_nonleaf(4),)),
    ("resize_as_leaf", resize_as_larger, lambda: (leaf(2), torch.randn(2, 3))),
    ("resize_as_pair_leaf", resize_as_larger, lambda: (pair(2, requires_grad=True), torch.randn(2, 3))),
]


@pytest.mark.parametrize(("f", "make_inputs"), [pytest.param(f, m, id=n) for n, f, m in GRAD_CASES])
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_resize_of_input_requiring_grad_raises_like_eager(
    f: Callable[..., object], make_inputs: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    # eager: "cannot resize variables that require grad", under no_grad too
    with torch.set_grad_enabled(grad):
        assert_raises_like_eager(f, make_inputs, compile_fn=compile_fn)


def intermediate_regrown(x: T) -> object:
    t = x * 2
    t.resize_(0)
    t.resize_(4)
    t.fill_(1)
    return t + x


def intermediate_view_regrown(x: T) -> object:
    t = x * 2
    v = t[:1]
    v.resize_(4)
    v.fill_(1)
    return t + x


@pytest.mark.parametrize("f", [intermediate_regrown, intermediate_view_regrown])
@pytest.mark.parametrize("make", [_plain(4), lambda: (pair(4),)], ids=["plain", "pair"])
def test_intermediate_regrown_within_its_storage_is_refused(
    f: Callable[..., object], make: Make, compile_fn: CompileFn | None
) -> None:
    # Note [Storage Swaps By Rebinding]: functionalization lost the write (a wrong result)
    assert_refused(f, make, compile_fn, "does not hold after an earlier resize_")


def regrown_times_leaf(x: T, y: T) -> object:
    x.resize_(1)
    x.resize_(4)
    x.fill_(1)
    return x * y


@pytest.mark.parametrize(
    "make",
    [lambda: (torch.randn(4), leaf(4)), lambda: (pair(4), pair(4, requires_grad=True))],
    ids=["plain", "pair"],
)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_regrown_input_with_grad_elsewhere_matches_eager(
    make: Make, dynamic: bool, compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        _check(regrown_times_leaf, make, compile_fn, dynamic=dynamic)


@pytest.mark.parametrize("f", [fsdp_free_then_refill, view_regrown_then_written_from])
@pytest.mark.parametrize(
    "make", [lambda: (torch.randn(4), leaf(4)), lambda: (torch.randn(4), nonleaf(4))], ids=["leaf", "nonleaf"]
)
def test_regrown_input_written_with_grad(f: Callable[..., object], make: Make, compile_fn: CompileFn | None) -> None:
    # the input regrown within its storage is traced over its whole storage (Note [Storage Swaps By Rebinding]),
    # where a write with grad into it is refused in training; under no_grad it runs
    with torch.enable_grad():
        assert_refused(f, make, compile_fn, "writes a value that requires grad into it")
    with torch.no_grad():
        _check(f, make, compile_fn)


def resize_preserve_format(x: T) -> object:
    x.resize_(5, memory_format=torch.preserve_format)
    return x * 1


@pytest.mark.parametrize("make", [_plain(4), _plain(8)], ids=["grows", "shrinks"])
def test_resize_to_preserve_format_raises_like_eager(make: Make, compile_fn: CompileFn | None) -> None:
    # eager: "Unsupported memory formatPreserve" (after resizing)
    assert_raises_like_eager(resize_preserve_format, make, compile_fn=compile_fn)


def intermediate_view_shrunk_then_written(x: T) -> object:  # held elements cover the new size: no refusal
    t = x * 2
    v = t[1:]
    v.resize_(2)
    v.fill_(1)
    return t + 1


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_intermediate_view_shrunk_then_written_matches_eager(dynamic: bool, compile_fn: CompileFn | None) -> None:
    # Note [Storage Swaps By Rebinding]: symbolic sizes decided by their hints
    _check(intermediate_view_shrunk_then_written, _plain(5), compile_fn, dynamic=dynamic)


def grown_then_requires_grad(x: T) -> object:
    x.resize_(6)
    x.fill_(0.5)
    x.requires_grad_()
    return ()


def grown_then_requires_grad_returned(x: T) -> object:
    x.resize_(6)
    x.fill_(0.5)
    x.requires_grad_()
    return (x, x * 2)


def regrown_then_requires_grad(x: T) -> object:
    x.resize_(0)
    x.resize_(4)
    x.fill_(1.0)
    x.requires_grad_()
    return (x * 3,)


GROWN_THEN_GRAD = [grown_then_requires_grad, grown_then_requires_grad_returned, regrown_then_requires_grad]


@pytest.mark.parametrize("f", GROWN_THEN_GRAD)
@pytest.mark.parametrize("make", [_plain(4), _plain(1, 1), lambda: (pair(4),)], ids=["plain", "plain_2d", "pair"])
def test_input_grown_then_made_to_require_grad_matches_eager(
    f: Callable[..., object], make: Make, compile_fn: CompileFn | None
) -> None:
    # eager resizes before requires_grad_() (a resize_ of a tensor that requires grad raises), where the call makes
    # it require grad first: the epilogue's regrowth raised "cannot resize variables that require grad"
    with torch.no_grad():
        _check(f, make, compile_fn)
    with torch.enable_grad():  # the requires_grad_() after computing from it (or the 2-d input's regrowth): refused
        if f is grown_then_requires_grad and type(make()[0]) is torch.Tensor:
            # (nothing takes the plain input after the call: the flag is set last, Analysis.gains_last)
            _check(f, make, compile_fn)
            return
        assert_refused(f, make, compile_fn, r"requires_grad_\(\)|changes the layout")


def shrunk_then_requires_grad_and_read(x: T) -> object:
    with torch.no_grad():
        x.resize_((1, 1))
    x.requires_grad_()
    return (x.mul(2.0),)


def relaid_by_resize_then_requires_grad_and_read(x: T) -> object:
    with torch.no_grad():
        x.resize_((8,))
    x.requires_grad_()
    return (x * x,)


def relaid_by_resize_then_requires_grad_returned(x: T) -> object:
    # (a pair's wrapper too: its backward raised "invalid gradient at index 1 - got [8] but expected shape compatible
    # with [4, 2]", the wrapper's resize_ not noted as relaying it)
    with torch.no_grad():
        x.resize_((8,))
    x.requires_grad_()
    return (x * x, x)


def shrunk_with_grad_on_then_requires_grad_and_read(x: T) -> object:
    x.resize_((2,))  # (records nothing: x requires no grad yet)
    x.requires_grad_()
    return (x.sum(),)


def shrunk_as_template_then_requires_grad_and_read(x: T, y: T) -> object:
    with torch.no_grad():
        x.resize_as_(y)
    x.requires_grad_()
    return (x * y,)


def read_then_shrunk_then_requires_grad_and_read(x: T) -> object:
    t = x * 2
    with torch.no_grad():
        x.resize_((1, 1))
    x.requires_grad_()
    return (t, x * 3)


def shrunk_then_requires_grad_views_returned(x0: T) -> object:  # (fuzz seed 120200 #7541)
    with torch.no_grad():
        x0.resize_((1, 1))
    x0.requires_grad_()
    t0 = x0.mul(1.0 + x0.requires_grad + 2 * x0.is_leaf)
    t1 = t0.diagonal(1, 1, 0)
    t2 = t1[0:0:1]
    t2.add_(0.5)
    return (t1, t2, t2)


RELAID_THEN_GRAD = [
    shrunk_then_requires_grad_and_read,
    relaid_by_resize_then_requires_grad_and_read,
    relaid_by_resize_then_requires_grad_returned,
    shrunk_with_grad_on_then_requires_grad_and_read,
    shrunk_as_template_then_requires_grad_and_read,
    read_then_shrunk_then_requires_grad_and_read,
]


@pytest.mark.parametrize("f", RELAID_THEN_GRAD)
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_input_resized_within_its_storage_then_made_to_require_grad_matches_eager(
    f: Callable[..., object], kind: str, compile_fn: CompileFn | None
) -> None:
    # eager's accumulator is made at the first read with grad after the flag, at the resized size (Note [Leaves Laid
    # Out Anew Under no_grad]); the compiled Function's edge took the size the input came with, and its backward
    # raised "invalid gradient ... got [1, 1] but expected shape compatible with [4, 2]"
    def make() -> tuple[object, ...]:
        xs = (pair(4, 2), pair(3)) if kind == "pair" else (torch.randn(4, 2), torch.randn(3))
        return xs if f is shrunk_as_template_then_requires_grad_and_read else xs[:1]

    with torch.enable_grad():
        _check(f, make, compile_fn)


@pytest.mark.parametrize("make", [lambda: (torch.randn(4, 2),), lambda: (pair(4, 2),)], ids=["plain", "pair"])
def test_input_shrunk_then_made_to_require_grad_views_returned_matches_eager(
    make: Make, compile_fn: CompileFn | None
) -> None:
    # (the sweep above, run whole: its views of the result, one empty and written, as eager's)
    with torch.enable_grad():
        _check(shrunk_then_requires_grad_views_returned, make, compile_fn)


def relaid_in_inference_mode_then_read(x: T) -> object:
    with torch.inference_mode():
        x.resize_((8,))
    return (x * x, x)


def shrunk_as_template_in_inference_mode_then_read(x: T, y: T) -> object:
    with torch.inference_mode():
        x.resize_as_(y)
    return (x * y,)


def relaid_in_inference_mode_then_viewed(x: T) -> object:
    with torch.inference_mode():
        x.resize_((2, 2))
    return (x.t() * 3, x[0])


def relaid_and_written_in_inference_mode_then_read(x: T) -> object:
    with torch.inference_mode():
        x.resize_((8,))
        x.fill_(1.0)
    return (x * 3,)


def relaid_in_inference_mode_with_grad_then_read(x: T) -> object:
    # (grad mode on inside the block: autograd records nothing there all the same; a wrong gradient size for the pair
    # before, issue #27)
    with torch.inference_mode(), torch.enable_grad():
        x.resize_((8,))
    return (x * 3,)


def transposed_in_inference_mode_with_grad_then_read(x: T) -> object:
    with torch.inference_mode(), torch.enable_grad():
        x.t_()
    return (x * 3,)


def relaid_and_read_in_inference_mode_with_grad(x: T) -> object:
    with torch.inference_mode(), torch.enable_grad():
        x.resize_((2, 2))
        t = x * 2
    return (x * 3, t)


def read_then_shrunk_in_inference_mode_then_read(x: T) -> object:
    t = x * 2
    with torch.inference_mode():
        x.resize_((2,))
    return (t, x * 3)


@pytest.mark.parametrize(
    "f",
    [
        relaid_in_inference_mode_then_read,
        shrunk_as_template_in_inference_mode_then_read,
        relaid_in_inference_mode_then_viewed,
        relaid_and_written_in_inference_mode_then_read,
        relaid_in_inference_mode_with_grad_then_read,
        transposed_in_inference_mode_with_grad_then_read,
        relaid_and_read_in_inference_mode_with_grad,
    ],
)
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_leaf_resized_within_its_storage_in_inference_mode_then_read_with_grad_matches_eager(
    f: Callable[..., object], kind: str, compile_fn: CompileFn | None
) -> None:
    # a leaf that requires grad, resize_()d inside inference_mode (eager allows it there only) before any read with
    # grad: eager's accumulator is made at the first read after, at the new size, as after an in-place view op under
    # no_grad (Note [Leaves Laid Out Anew Under no_grad]); refused before, by the probe of eager's backward
    def make() -> tuple[object, ...]:
        xs = (
            (pair(4, 2, requires_grad=True), pair(3))
            if kind == "pair"
            else (torch.randn(4, 2).requires_grad_(), torch.randn(3))
        )
        return xs if f is shrunk_as_template_in_inference_mode_then_read else xs[:1]

    if kind == "pair" and f is relaid_and_written_in_inference_mode_then_read:
        assert_refused(f, make, compile_fn, "has its metadata or storage changed in place")
        return
    with torch.enable_grad():
        _check(f, make, compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_leaf_read_with_grad_then_resized_in_inference_mode_refused(kind: str, compile_fn: CompileFn | None) -> None:
    # read with grad before: eager's accumulator, alive in that read's node, keeps the size it was made at
    def make() -> tuple[object, ...]:
        return (pair(4, 2, requires_grad=True) if kind == "pair" else torch.randn(4, 2).requires_grad_(),)

    with torch.enable_grad():
        assert_refused(read_then_shrunk_in_inference_mode_then_read, make, compile_fn, "another size|behind autograd")


# An intermediate that requires grad, grown by resize_() inside inference_mode (eager allows it there only) after a view
# of it was taken with grad: at the view's next use with grad eager rebuilds its history by as_strided() of the grown
# tensor, the run by replaying the view op on it, which no longer applies (select(2, 2) of a 1-d tensor) and crashed the
# run with an IndexError (fuzz seed 120900 #1935: the split_with_sizes form). Note [Stale View Functions]
def view_read_after_its_base_grew_in_inference_mode(x: T) -> object:
    t0 = x * 2
    t1 = t0.select(2, 2)
    with torch.inference_mode():
        t0.resize_((14,))
        t0.fill_(-1.0)
    return (t1 * 1,)


def view_split_after_its_base_grew_in_inference_mode(x: T) -> object:
    t0, _ = x.sort(2)
    t1 = t0.select(2, 2)
    with torch.inference_mode():
        t0.resize_((14,))
        t0.fill_(-1.0)
    t2, t3 = t1.split_with_sizes([2, 2], 0)
    x.data = t3
    return (t1, t1)


def view_read_after_its_base_grew_in_inference_mode_replays(x: T) -> object:
    t0 = x * 2
    t1 = t0.select(2, 0)  # (select(2, 0) applies to the grown layout too: eager's backward raises, as the run's)
    with torch.inference_mode():
        t0.resize_((5, 1, 3))
        t0.fill_(-1.0)
    return (t1 * 1,)


@pytest.mark.parametrize(
    "f", [view_read_after_its_base_grew_in_inference_mode, view_split_after_its_base_grew_in_inference_mode]
)
def test_view_used_with_grad_after_its_base_grew_in_inference_mode_refused(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_refused(f, lambda: (leaf(4, 1, 3),), compile_fn, r"by resize_\(\) .*the view op does not apply")


def test_view_used_with_grad_after_its_base_grew_in_inference_mode_where_the_view_op_applies_matches_eager(
    compile_fn: CompileFn | None,
) -> None:
    # (the refusal above counts a growth only where the replay fails or reorders the view's elements)
    with torch.enable_grad():
        assert_matches_eager(
            view_read_after_its_base_grew_in_inference_mode_replays, lambda: (leaf(4, 1, 3),), compile_fn=compile_fn
        )


def grad_dropped_then_grown(x: T) -> object:
    x.requires_grad = False
    x.resize_((7,))
    x.fill_(-1.0)
    return ()


def grad_dropped_then_regrown(x: T) -> object:
    x.requires_grad_(False)
    x.resize_(0)
    x.resize_(4)
    x.fill_(1.0)
    return (x * 2,)


@pytest.mark.parametrize("f", [grad_dropped_then_regrown])  # (grown once: the test below, with the fuller message)
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_leaf_input_made_not_to_require_grad_then_grown_refused(
    f: Callable[..., object], grad: bool, compile_fn: CompileFn | None
) -> None:
    # the run traces the input over its whole storage, a view it cannot detach_() as eager's leaf stops requiring
    # grad (was "Can't detach views in-place")
    with torch.set_grad_enabled(grad):
        assert_refused(f, lambda: (leaf(3, 2),), compile_fn, r"args\[0\]: the program turns requires_grad off")


# ---------------------------------------------------------------------------------------------------------------------
# A storage grown by resize_() under other tensors (Note [Storage Swaps By Rebinding]): eager grows it in place, so a
# tensor set_() onto it or a view of it sees the grown storage and the writes after; the run had rebound only the
# resized tensor (wrong values, or setStorage's "out of bounds" at a later resize_ of the other).
# ---------------------------------------------------------------------------------------------------------------------


def set_onto_then_source_grown(x0: T) -> object:
    t0 = x0.mul(0.5)
    set_to(x0, t0)
    t0.resize_(8)
    t0.fill_(2.0)
    return (x0 * 1, t0 * 1)


def set_onto_then_source_grown_input_returned(x0: T) -> object:
    t0 = x0.mul(0.5)
    set_to(x0, t0)
    t0.resize_(8)
    t0.fill_(2.0)
    return (x0,)


def set_onto_under_no_grad_then_source_grown(x0: T) -> object:
    t0 = x0.detach().mul(0.5)
    with torch.no_grad():
        set_to(x0, t0)
        t0.resize_(8)
    t0.fill_(2.0)
    return (x0 + 1,)


def view_of_grown_intermediate_returned(x0: T) -> object:
    t0 = x0.mul(0.5)
    v = t0[1:3]
    t0.resize_(8)
    t0.fill_(2.0)
    return (v, t0)


def view_of_grown_intermediate_written(x0: T) -> object:
    t0 = x0.mul(0.5)
    v = t0[1:3]
    t0.resize_(8)
    t0[4:].fill_(1.0)
    v.fill_(3.0)
    return (t0 * 1,)


def view_of_grown_input_read(x0: T) -> object:
    v = x0[:2]
    x0.resize_(8)
    x0.fill_(1.0)
    return (v * 1,)


SHARED_GROWTH: list[tuple[str, Callable[..., object]]] = [
    ("set_onto", set_onto_then_source_grown),
    ("set_onto_input_returned", set_onto_then_source_grown_input_returned),
    ("view_returned", view_of_grown_intermediate_returned),
    ("view_written", view_of_grown_intermediate_written),
]


@pytest.mark.parametrize("f", [pytest.param(f, id=n) for n, f in SHARED_GROWTH])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_storage_grown_under_another_tensor_matches_eager(
    f: Callable[..., object], grad: bool, compile_fn: CompileFn | None
) -> None:
    with torch.set_grad_enabled(grad):
        _check(f, _plain(4), compile_fn)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_storage_grown_under_an_input_requiring_grad_set_onto_it_matches_eager(
    grad: bool, compile_fn: CompileFn | None
) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(set_onto_under_no_grad_then_source_grown, lambda: (nonleaf(4),), compile_fn=compile_fn)


def _detached_leaf_beside_history(kind: str) -> Make:
    # x0 = x1.detach() and x2 = x1.detach().requires_grad_() (or a Parameter over it): one storage, one version counter
    def make() -> tuple[object, ...]:
        x1 = nonleaf(1)
        x2 = x1.detach().requires_grad_() if kind == "leaf" else torch.nn.Parameter(x1.detach())
        return (x1.detach(), x1, x2)

    return make


def detach_grown_then_input_written(x0: T, x1: T, x2: T) -> object:  # fuzz seed 121007 #5669
    t0 = x0.transpose(0, 0)
    t0.resize_((3,))
    t0.fill_(2.0)
    x1.add_(3.0)
    return (x2 * 2,)


@pytest.mark.parametrize("kind", ["leaf", "parameter"])
def test_storage_grown_then_written_with_grad_beside_a_detached_leaf_matches_eager(
    kind: str, compile_fn: CompileFn | None
) -> None:
    # eager's x1.add_ is recorded on x1 alone: x2, a leaf that requires grad over the same counter, takes the values
    # (the epilogue's copy into it, made with grad, raised "a leaf Variable that requires grad ...")
    with torch.enable_grad():
        _check(detach_grown_then_input_written, _detached_leaf_beside_history(kind), compile_fn)


def set_onto_then_both_grown(x0: T) -> object:
    t0 = x0.mul(0.5)
    set_to(x0, t0)
    t0.resize_(8)
    t0[4:].fill_(2.0)
    x0.resize_(8)
    return (x0 * 1,)


def test_storage_grown_then_grown_through_the_tensor_set_onto_it_refused(compile_fn: CompileFn | None) -> None:
    # x0 now holds 4 of the grown storage's 8 elements: functionalization's resize_ within it would lose the writes
    assert_refused(set_onto_then_both_grown, _plain(4), compile_fn, "resize_.. to a size that covers storage elements")


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_input_storage_grown_under_a_view_of_it_matches_eager(grad: bool, compile_fn: CompileFn | None) -> None:
    # eager grows the input's storage in place under the view (main had read the view in the old storage, then
    # refused it); the view is rebound to the grown storage
    with torch.set_grad_enabled(grad):
        _check(view_of_grown_input_read, _plain(4), compile_fn)


def grown_then_view_of_it_grown(x0: T) -> object:
    x0.resize_((4,))
    x0.fill_(-1.0)
    t0 = x0.unbind(0)[2]
    t0.resize_((6,))  # eager grows x0's storage (the input's, grown once already) in place again
    t0.fill_(-1.0)
    return (x0,)


def grown_then_select_grown_read(x0: T) -> object:
    x0.resize_((4,))
    x0.fill_(2.0)
    t0 = x0[1]
    t0.resize_((5,))
    t0.fill_(3.0)
    return (x0 * 1, t0 * 1)


@pytest.mark.parametrize("f", [grown_then_view_of_it_grown, grown_then_select_grown_read])
@pytest.mark.parametrize("make", [_plain(1, 1), _plain(2)], ids=["plain_2d", "plain"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_input_grown_then_grown_again_under_a_view_of_it_matches_eager(
    f: Callable[..., object], make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    # the input's storage after its own resize_() is still eager's, grown in place: a view of it grown grows it
    # under the input again (the epilogue had lost the input's first elements, before the view's offset: a wrong
    # result, then refused). PairTensor: its view of a grown pair raises in eager (a meta storage set onto the view's)
    with torch.set_grad_enabled(grad):
        _check(f, make, compile_fn)


def grown_then_set_onto_an_intermediate(x0: T) -> object:
    x0.resize_((5,))
    x0.fill_(3.0)
    set_to(x0, x0 * 3)  # eager's x0 leaves its grown storage: a set_() onto another, not a growth of its own
    return (x0,)


def grown_then_set_onto_a_view_of_an_intermediate(x0: T) -> object:
    x0.resize_((5,))
    x0.fill_(3.0)
    t0 = x0 * 3
    set_to(x0, t0)
    set_to(x0, t0.unsqueeze(0))
    return (x0, t0)


def grown_then_set_onto_another_input(x0: T, x1: T) -> object:
    x1.resize_((10,))
    x1.fill_(3.0)
    set_to(x1, x0)  # eager's x1 leaves its storage grown to 10 elements, all 3.0: its base shows the first 6
    return ()


def grown_then_data_onto_another_input(x0: T, x1: T) -> object:
    x1.resize_((10,))
    x1.fill_(3.0)
    x1.data = x0
    return ()


def _view_of_3d(*shape: int) -> Make:
    return lambda: (torch.randn(shape).view(shape[0], -1),)


GROWN_INPUTS = [_plain(2, 1, 2), _view_of_3d(2, 1, 2), _view_of_base(2, 4)]  # 4 elements, or 2 at offset 4 of 8
GROWN_INPUT_IDS = ["plain", "view", "offset_view"]
_GROWN_THEN_LEFT = r"args\[\d\]: the program grows this input's storage with resize_\(\) and then set_\(\)s"
_GROWN_THROUGH_AN_ALIAS = r"args\[0\]\.a: the program grows this input's storage with resize_\(\) through an alias"


@pytest.mark.parametrize("f", [grown_then_set_onto_an_intermediate, grown_then_set_onto_a_view_of_an_intermediate])
@pytest.mark.parametrize("make", GROWN_INPUTS, ids=GROWN_INPUT_IDS)
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_input_grown_then_set_onto_an_intermediate_matches_eager(
    f: Callable[..., object], make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    # generate(RandomChooser(332)) had crashed (setStorage: out of bounds), then matched where no base showed the
    # storage the input left: eager grows it in place and holds the fill, the epilogue only set_() the input (then
    # refused). Fuzz seed 119700 #1573: the synthetic base's write-back grows and writes the storage first, then the
    # set_() (the storages' byte counts, and the view input's base, as eager's)
    with torch.set_grad_enabled(grad):
        _check(f, make, compile_fn)


@pytest.mark.parametrize("f", [grown_then_set_onto_another_input, grown_then_data_onto_another_input])
@pytest.mark.parametrize("make", GROWN_INPUTS, ids=GROWN_INPUT_IDS)
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_input_grown_then_set_onto_another_input_matches_eager(
    f: Callable[..., object], make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 113000, program 2712 (a view input grown, filled, then set_() onto another input): the input's base
    # kept its old values where eager's storage was grown in place and filled with 3.0 (then refused; fuzz seeds
    # 119700/119600: grown, written, then set_() in the epilogue as in eager)
    with torch.set_grad_enabled(grad):
        _check(f, lambda: (torch.randn(()), *make()), compile_fn)


def grown_then_set_onto_an_input_with_history(x0: T, x1: T) -> object:
    x1.resize_((6,))
    x1.fill_(1.0)
    t0 = x1.detach()
    set_to(x1, x0)
    t0.mul_(2)  # into the storage x1 left, which eager's base of x1 shows
    return (t0,)


def _two_views_and_another(offset: int) -> Make:
    def make() -> tuple[object, ...]:
        base = torch.randn(5)
        return (torch.randn(2), base[offset : offset + 2], base[2:4])

    return make


def member_grown_then_set_onto_another_input(x0: T, x1: T, x2: T) -> object:
    x1.resize_((6,))  # past the 5 elements of the storage x1 shares with x2
    x1.fill_(1.0)
    set_to(x1, x0)
    x2.mul_(2)
    return ()


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_input_grown_then_set_onto_an_input_with_history(grad: bool, compile_fn: CompileFn | None) -> None:
    # grown, written and set_() off its storage: the base's storage bytes and values as eager's. With grad, x1 takes
    # x0's history, and the run's synthetic base over the storage x1 left requires grad with it: refused by name (the
    # write-back would record a history eager's base of x1 has not)
    make: Make = lambda: (nonleaf(2), torch.randn(4)[1:3])  # noqa: E731
    with torch.set_grad_enabled(grad):
        if grad:
            assert_refused(grown_then_set_onto_an_input_with_history, make, compile_fn, _GROWN_THEN_LEFT)
        else:
            _check(grown_then_set_onto_an_input_with_history, make, compile_fn)


@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_alias_member_grown_then_set_onto_another_input_matches_eager(
    offset: int, grad: bool, compile_fn: CompileFn | None
) -> None:
    # one of two inputs over one storage grows it and leaves it: the group's base grows and writes it, then x1 moves
    with torch.set_grad_enabled(grad):
        _check(member_grown_then_set_onto_another_input, _two_views_and_another(offset), compile_fn)


def test_pair_input_grown_then_data_onto_another_input_matches_eager(compile_fn: CompileFn | None) -> None:
    # a PairTensor's `.data =` swaps the wrapper, not its grown inner tensors (its set_() raises in eager)
    assert_matches_eager(grown_then_data_onto_another_input, lambda: (pair(), pair(2, 3)), compile_fn=compile_fn)


def requires_grad_off_then_grow_and_read(x: T) -> object:
    x.requires_grad_(False)
    x.resize_((13,))
    return x * 2


@pytest.mark.parametrize("f", [grad_dropped_then_grown, requires_grad_off_then_grow_and_read])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_requires_grad_off_on_an_input_then_grown_is_refused(
    f: Callable[..., object], grad: bool, compile_fn: CompileFn | None
) -> None:
    """A leaf input that requires grad, its flag turned off, then grown by resize_(): the compiled call runs it as a
    view of its whole storage, whose flag follows its base's where eager's leaf drops its own; refused, naming the
    input (it crashed: Can't detach views in-place, or raised cannot resize variables that require grad)."""
    with torch.set_grad_enabled(grad):
        assert_refused(
            f, lambda: (leaf(3, 2),), compile_fn, "args\\[0\\]: the program turns requires_grad off .* runs as a view"
        )


def requires_grad_off(x: T) -> object:
    x.requires_grad = False
    return x * 2, x.requires_grad


def test_requires_grad_off_on_an_input_under_no_grad_matches_eager(compile_fn: CompileFn | None) -> None:
    """Under no_grad, `.requires_grad = False` on a leaf input is a flag change only: the run's detach_() for it
    keeps grad mode off (inference_mode(False) alone turned it on, and the compile took it for a grad region)."""
    with torch.no_grad():
        assert_matches_eager(requires_grad_off, lambda: (leaf(3, 2),), compile_fn=compile_fn)


def input_grown_then_a_view_of_it_grown(x0: T) -> object:
    x0.resize_((4,))
    x0.fill_(-1.0)
    t0 = x0.unbind(0)[2]
    t0.resize_((6,))  # eager grows the input's storage (grown once already) in place under x0 as well
    t0.fill_(3.0)
    return (x0,)


def input_grown_then_a_select_of_it_grown(x0: T) -> object:
    x0.resize_((3,))
    x0.fill_(2.0)
    t0 = x0.select(0, -1)
    t0.resize_((3,))
    t0.fill_(3.0)
    return ()


@pytest.mark.parametrize("f", [input_grown_then_a_view_of_it_grown, input_grown_then_a_select_of_it_grown])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_input_storage_grown_again_under_a_view_of_it_matches_eager(
    f: Callable[..., object], grad: bool, compile_fn: CompileFn | None
) -> None:
    # the first growth gave the input's storage a new key, which hid that the second one grows an input's storage
    # under the input (main left x0's elements as before the second growth: wrong values, then refused)
    with torch.set_grad_enabled(grad):
        _check(f, _plain(1), compile_fn)


def grown_then_data_onto_a_view_of_itself(x0: T) -> object:
    x0.resize_((14,))
    x0.fill_(2.0)
    x0.data = x0.t().reshape((14,))  # within its grown storage: eager's input keeps it, at the view's layout
    return ()


def grown_then_set_onto_a_view_of_itself(x0: T) -> object:
    x0.resize_((51,))
    x0.fill_(2.0)
    t0 = x0.unbind(0)[16]
    set_to(x0, t0)
    return (t0,)


def grown_then_data_onto_a_part_of_itself(x0: T) -> object:
    x0.resize_((14,))
    x0.fill_(2.0)
    x0.data = x0[3:5]  # eager's storage stays grown to 14 elements, past the view's end
    return (x0 * 1,)


@pytest.mark.parametrize("make", [_plain(3, 4), _plain(2), _view_of_base(2, 4)], ids=["plain_2d", "plain", "view"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_input_grown_then_set_onto_all_of_its_grown_storage_matches_eager(
    make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    # the growth then `.data =` a view of all of the grown storage: the epilogue set the input to its final layout
    # before growing its storage (setStorage: out of bounds); it grows it first, to eager's grown size. PairTensor: a
    # view of a grown pair raises in eager (a meta storage set onto the view's)
    with torch.set_grad_enabled(grad):
        _check(grown_then_data_onto_a_view_of_itself, make, compile_fn)


def grown_then_set_onto_a_strided_part_then_written(x0: T, w: T) -> object:
    x0.resize_((9,))
    x0.fill_(1.0)
    x0.mul_(w)  # with grad (training): a history for the grown input
    set_to(x0, x0[2::3])  # elements 2, 5 and 8: eager's storage keeps the other six under the input
    x0.add_(1.0)
    return (x0 * 2,)


def _whole_storages(args: tuple[object, ...]) -> list[T]:
    """Every element of each plain input's storage (the programs below write all of them)."""
    return [
        a.detach().as_strided((a.untyped_storage().nbytes() // a.element_size(),), (1,), 0).clone()
        for a in args
        if isinstance(a, T) and type(a) is T
    ]


def _check_storage_values(f: Callable[..., object], make_inputs: Make, compile_fn: CompileFn | None) -> None:
    """`_check`, and every element of the inputs' storages after the call as eager's (the oracle compares each
    input's own elements only; a base of the input, or a view of it the caller holds, shows the others)."""
    _check(f, make_inputs, compile_fn)
    compiled = compile_fn(f) if compile_fn is not None else subclassaot.compile(f)
    torch.manual_seed(0)
    eager_args = make_inputs()
    f(*eager_args)
    torch.manual_seed(0)
    compiled_args = make_inputs()
    compiled(*compiled_args)
    for got, want in zip(_whole_storages(compiled_args), _whole_storages(eager_args), strict=True):
        assert torch.equal(got, want), f"storage {got} vs eager {want}"


@pytest.mark.parametrize("f", [grown_then_set_onto_a_view_of_itself, grown_then_data_onto_a_part_of_itself])
@pytest.mark.parametrize("make", [_plain(3, 4), _view_of_base(2, 4)], ids=["plain_2d", "view"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_input_grown_then_set_onto_a_part_of_its_grown_storage_matches_eager(
    f: Callable[..., object], make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    # eager keeps the whole grown storage under the input (a base of it shows it); the epilogue wrote back only the
    # final layout's elements (a crash, setStorage: out of bounds; a view input's base kept old values: wrong), then
    # refused. The input is traced over its whole storage (Note [as_strided On Inputs]), whose base's write-back
    # grows the storage and writes all of it. PairTensor: a view of a grown pair raises in eager (a meta storage set
    # onto the view's)
    with torch.set_grad_enabled(grad):
        _check_storage_values(f, make, compile_fn)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_input_grown_written_with_grad_then_set_onto_a_strided_part_matches_eager(
    grad: bool, compile_fn: CompileFn | None
) -> None:
    def make() -> tuple[object, ...]:
        return (torch.randn(4), torch.randn((), requires_grad=True))

    with torch.set_grad_enabled(grad):
        _check_storage_values(grown_then_set_onto_a_strided_part_then_written, make, compile_fn)


# Fuzz seed 119000, programs 1801, 2270, 2467 and 2665: inputs sharing a storage (traced as one synthetic base, Note
# [Synthetic Bases]), one of them grown by resize_() and another set_() (or `.data =`) within the grown storage at a
# layout that does not cover it: refused by the rule for an input that is its own graph input, where the base's
# write-back already grows the storage and writes all of it.


def fuzz_1801(x0: T, x1: T) -> object:
    with torch.enable_grad():
        x0.resize_((4,))
        x0.fill_(2.0)
    with torch.set_grad_enabled(False):
        t0 = x1.transpose(0, 0)
    set_to(x1, t0)
    t1 = t0.unsqueeze(-2)
    x1.data = t1
    return (x1, t1, t0)


def fuzz_2270(x0: T, x1: T) -> object:
    with torch.enable_grad():
        t0 = x0.clone()
    set_to(x0, x1)
    x1.resize_((14,))
    x1.fill_(0.5)
    t1 = t0[3:3:1]
    _, t3 = x0.sort(1)
    return (t3, t3, t1)


def fuzz_2467(x0: T, x1: T, x2: T) -> object:
    x2.data = x1
    t0 = x0.view((1, 4))
    t0.unsqueeze(0)
    t2 = t0.reshape((4,))
    t2.transpose_(0, 0)
    with torch.no_grad():
        t2.resize_((7,))
        t2.fill_(0.5)
    return (x0, x1)


def fuzz_2665(x0: T, x1: T, x2: T) -> object:
    set_to(x2, x1)
    x1.data.fill_(-1.0)
    t0 = x2.unbind(1)[0]
    with torch.enable_grad():
        x0.resize_((7,))
        x0.fill_(2.0)
    return (t0,)


def _make_1801() -> tuple[object, ...]:
    b0 = torch.randn(())
    return (b0, b0.expand((1,)))


def _make_2270() -> tuple[object, ...]:
    b0 = torch.randn((4, 1, 4))
    return (b0, b0.unsqueeze(-2)[:, 1:1:1])


def _make_2467() -> tuple[object, ...]:
    b0 = torch.randn((1, 4, 1))
    return (b0, b0.unsqueeze(1).select(0, -1), b0)


def _make_2665() -> tuple[object, ...]:
    b0 = torch.randn((2, 1, 2))
    return (b0, b0, b0.contiguous().detach())


@pytest.mark.parametrize(
    ("f", "make", "grad"),
    [(fuzz_1801, _make_1801, False), (fuzz_2270, _make_2270, False), (fuzz_2467, _make_2467, True)]
    + [(fuzz_2665, _make_2665, True)],
    ids=["1801", "2270", "2467", "2665"],
)
def test_aliased_input_grown_then_set_within_the_grown_storage_matches_eager(
    f: Callable[..., object], make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make, compile_fn=compile_fn)
        if grad:  # (the fuzzer's last call in training: every output written after the call)
            assert_matches_eager(f, make, compile_fn=compile_fn, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# A view at an offset into an intermediate, grown by resize_() past its storage's end (fuzz seed 113000, program
# 3353: `t0.select(0, -2).resize_((5,))`): eager's storage, grown in place, keeps every old element, those before the
# view's offset too, which its base still shows; the run had copied only those from the view's offset on (the base's
# first rows came back uninitialized).
# ---------------------------------------------------------------------------------------------------------------------


def _select_row(t: T) -> tuple[T, int]:
    return t.select(0, -2), 5  # offset 4 of 8: grows to 9


def _narrow_rows(t: T) -> tuple[T, int]:
    return t.narrow(0, 1, 2), 7  # offset 2 of 8: grows to 9


def _slice_rows(t: T) -> tuple[T, int]:
    return t[3:], 4  # offset 6 of 8: grows to 10


OFFSET_VIEWS = [_select_row, _narrow_rows, _slice_rows]


def offset_view_of_intermediate_grown_then_filled(view: Callable[[T], tuple[T, int]]) -> Callable[[T], object]:
    def f(x0: T) -> object:
        t0 = x0.mul(-1.0)
        t1, n = view(t0)
        t1.resize_((n,))
        t1.fill_(-1.0)
        return (t0,)

    return f


def offset_view_of_intermediate_grown_then_base_written(view: Callable[[T], tuple[T, int]]) -> Callable[[T], object]:
    def f(x0: T) -> object:
        t0 = x0.mul(-1.0)
        t1, n = view(t0)
        t1.resize_((n,))
        t1.fill_(-1.0)
        t0.add_(2.0)  # through the other tensor over the grown storage
        return (t0 * 1, t1 * 1)

    return f


@pytest.mark.parametrize("view", OFFSET_VIEWS, ids=["select", "narrow", "slice"])
@pytest.mark.parametrize(
    "program", [offset_view_of_intermediate_grown_then_filled, offset_view_of_intermediate_grown_then_base_written]
)
@pytest.mark.parametrize("make", [_plain(4, 2), lambda: (pair(4, 2),)], ids=["plain", "pair"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_offset_view_of_intermediate_grown_keeps_the_elements_before_it(
    view: Callable[[T], tuple[T, int]],
    program: Callable[[Callable[[T], tuple[T, int]]], Callable[[T], object]],
    make: Make,
    grad: bool,
    compile_fn: CompileFn | None,
) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(program(view), make, compile_fn=compile_fn)


def set_onto_a_tail_of_intermediate_then_grown(x0: T) -> object:
    t0 = x0.mul(-1.0)
    y = x0.new_empty(0)
    set_to(y, t0[4:])  # y holds the storage's tail contiguously, t0 its first elements too
    y.resize_((6,))
    y.fill_(-1.0)
    return (t0,)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_tensor_set_onto_a_tail_grown_keeps_the_elements_before_it(grad: bool, compile_fn: CompileFn | None) -> None:
    # the grown tensor is its own storage chain's root (set_()), at offset 4: the elements before come from t0
    with torch.set_grad_enabled(grad):
        assert_matches_eager(set_onto_a_tail_of_intermediate_then_grown, _plain(8), compile_fn=compile_fn)


def offset_view_grown_after_its_base_left(x0: T) -> object:
    t0 = x0.mul(-1.0)
    w = t0.t()  # over the storage's first elements, densely but not contiguously
    y = t0[2:]
    set_to(t0, x0.mul(2.0))  # y's view root leaves the storage: no tensor holds it contiguously from its start
    y.resize_((6,))
    y.fill_(-1.0)
    return (w * 1, t0 * 1)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_offset_view_grown_after_its_base_left_keeps_the_elements_a_transposed_view_holds(
    grad: bool, compile_fn: CompileFn | None
) -> None:
    # the elements before y's offset were copied from t0, on another storage by then (a wrong result): they come
    # from w, which holds them in storage order once its dims are put in stride order
    with torch.set_grad_enabled(grad):
        assert_matches_eager(offset_view_grown_after_its_base_left, _plain(4, 2), compile_fn=compile_fn)


def offset_view_grown_after_its_base_left_strided_view_kept(x0: T) -> object:
    t0 = x0.mul(-1.0)
    w = t0[:, 0]  # every other element of the storage's first: no tensor holds them all
    y = t0[2:]
    set_to(t0, x0.mul(2.0))
    y.resize_((6,))
    y.fill_(-1.0)
    return (w * 1, t0 * 1)


def test_offset_view_grown_after_its_base_left_refused(compile_fn: CompileFn | None) -> None:
    assert_refused(
        offset_view_grown_after_its_base_left_strided_view_kept,
        _plain(4, 2),
        compile_fn,
        "resize_.. grows a tensor whose",
    )


def offset_view_of_input_grown(view: Callable[[T], tuple[T, int]]) -> Callable[[T], object]:
    def f(x0: T) -> object:
        t1, n = view(x0)
        t1.resize_((n,))
        t1.fill_(-1.0)
        return (x0 * 1,)

    return f


@pytest.mark.parametrize("view", OFFSET_VIEWS, ids=["select", "narrow", "slice"])
@pytest.mark.parametrize("make", [_plain(4, 2), lambda: (pair(4, 2),)], ids=["plain", "pair"])
def test_offset_view_of_input_grown_matches_eager(
    view: Callable[[T], tuple[T, int]], make: Make, compile_fn: CompileFn | None
) -> None:
    # the same growth under an input: the epilogue grows the input's storage in place (refused before that). A
    # PairTensor's view grown rebinds the pair's inner tensors off their storage in the run: refused by the rule on
    # inputs grown then moved (a known gap, never a wrong result), by a message naming the growth through an alias
    f = offset_view_of_input_grown(view)
    with torch.no_grad():
        if isinstance(make()[0], PairTensor):
            assert_refused(f, make, compile_fn, _GROWN_THROUGH_AN_ALIAS)
        else:
            assert_matches_eager(f, make, compile_fn=compile_fn)


# A storage that resize_() grows under an input: eager grows it in place, so the caller's views of the input (and its
# other views) see the grown storage (Note [Storage Swaps By Rebinding]). Programs in the fuzzer's resize_grow
# shape: seed 113500, programs 54 (a detach() alias taken), 103 (a view of the input grown), 225 (a transpose taken)
# and 41 (two inputs over one storage).


def grown_with_an_alias_taken(x0: T) -> object:
    _alias = x0.detach()  # alive across the growth: eager grows the storage under it
    x0.resize_((6,))
    x0.fill_(2.0)
    return ()


def grown_with_a_transpose_taken(x0: T) -> object:
    t0 = x0.transpose(0, -1)
    x0.resize_((6,))
    x0.fill_(3.0)
    return (t0 * 1,)


def grown_with_a_view_returned(x0: T) -> object:
    v = x0.view(-1)[:2]
    x0.resize_(8)
    x0.fill_(1.0)
    return (v,)


def grown_then_written(x0: T) -> object:
    v = x0.view(-1)
    x0.resize_(7)
    x0.fill_(1.0)
    x0[1:3].mul_(3.0)
    return (v * 1, x0.sum())


def a_view_grown(x0: T) -> object:
    t0 = x0.view(-1)[:1]
    t0.resize_((4,))
    t0.fill_(3.0)
    return (x0 * 1,)


def a_view_grown_read_within(x0: T) -> object:
    v = x0.view(-1)[1:]
    v.resize_(8)
    v.fill_(1.0)
    return (x0.view(-1)[1:2], x0 * 1)


GROWN_UNDER_VIEWS: list[tuple[str, Callable[..., object]]] = [
    ("alias_taken", grown_with_an_alias_taken),
    ("transpose_taken", grown_with_a_transpose_taken),
    ("view_returned", grown_with_a_view_returned),
    ("grown_then_written", grown_then_written),
    ("a_view_grown", a_view_grown),
    ("a_view_grown_read_within", a_view_grown_read_within),
    ("grown_again_under_a_view", grown_then_view_of_it_grown),
    ("grown_again_under_a_select", grown_then_select_grown_read),
    ("view_read", view_of_grown_input_read),
]


def _check_caller_views(f: Callable[..., object], make: Make, compile_fn: CompileFn | None) -> None:
    """The caller's views of the input (one of part of it, one alias of all of it) after the call, as eager's: their
    values, that they still share the input's storage, and its byte count."""
    compiled = compile_fn(f) if compile_fn is not None else subclassaot.compile(f)
    sides = []
    for fn in (f, compiled):
        torch.manual_seed(0)
        (x,) = make()
        assert isinstance(x, T)
        held = (x.detach().view(-1)[:1], x.detach())
        fn(x)
        sides.append(
            (
                [h.clone() for h in held],
                [h.untyped_storage()._cdata == x.untyped_storage()._cdata for h in held],
                x.untyped_storage().nbytes(),
            )
        )
    (want_values, *want), (got_values, *got) = sides
    assert got == want
    for g, w in zip(got_values, want_values, strict=True):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("f", [pytest.param(f, id=n) for n, f in GROWN_UNDER_VIEWS])
@pytest.mark.parametrize("make", [_plain(1, 1, 2), _plain(2), _view_of_base(2, 3)], ids=["plain_3d", "plain", "view"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_input_storage_grown_under_views_matches_eager(
    f: Callable[..., object], make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    # refused before (an input's storage grown with other tensors over it); the caller's views see the grown storage
    with torch.set_grad_enabled(grad):
        _check(f, make, compile_fn)
        _check_caller_views(f, make, compile_fn)


@pytest.mark.parametrize(
    "f",
    [
        pytest.param(f, id=n)
        for n, f in GROWN_UNDER_VIEWS
        if f in (grown_with_an_alias_taken, grown_with_a_transpose_taken, grown_with_a_view_returned)
        or f is view_of_grown_input_read
    ],
)
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_pair_input_storage_grown_under_views_matches_eager(
    f: Callable[..., object], grad: bool, compile_fn: CompileFn | None
) -> None:
    # PairTensor: views taken before the growth (a view of a pair grown, or taken of it after, raises in eager: a
    # meta storage set onto the view's)
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, lambda: (pair(1, 2),), compile_fn=compile_fn)


def grown_through_a_detached_alias(x: T) -> object:
    d = x.detach()
    d.resize_(8)
    d.fill_(1.0)  # hidden from autograd
    return x * 2


@pytest.mark.parametrize("make", [lambda: (leaf(4),), lambda: (nonleaf(4),)], ids=["leaf", "nonleaf"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_input_requiring_grad_grown_under_it_matches_eager(
    make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    # resize_() of a tensor that requires grad raises; of its detach() alias it grows the input's storage under it
    with torch.set_grad_enabled(grad):
        assert_matches_eager(grown_through_a_detached_alias, make, compile_fn=compile_fn)


def aliased_inputs_one_grown(x0: T, x1: T) -> object:
    x0.mul_(2)
    x0.resize_((6,))
    x0.fill_(3.0)
    return (x1 * 1,)


def aliased_inputs_the_view_grown(x0: T, x1: T) -> object:
    x1.resize_((6,))
    x1.fill_(0.5)
    return (x1,)


@pytest.mark.parametrize("f", [aliased_inputs_one_grown, aliased_inputs_the_view_grown])
@pytest.mark.parametrize("part", [slice(None), slice(1, 3)], ids=["expand", "slice"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_aliased_inputs_storage_grown_matches_eager(
    f: Callable[..., object], part: slice, grad: bool, compile_fn: CompileFn | None
) -> None:
    # aliased_inputs_the_view_grown: seed 113501, program 152 (the second input's original, one of the alias group's
    # two, was rebound onto the grown storage with the others: the input's grown elements came back unwritten)
    def make() -> tuple[object, ...]:
        b = torch.randn(4)
        return (b, b.expand(4)[part])

    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make, compile_fn=compile_fn)


def grown_view_of_an_intermediate_from_an_offset(x0: T) -> object:
    t = x0 * 1
    v = t[1:]
    v.resize_(8)
    v.fill_(1.0)
    return (t * 1, v * 1)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_storage_grown_keeps_elements_before_the_offset(grad: bool, compile_fn: CompileFn | None) -> None:
    # the grown storage kept only the elements from the grown view's offset on: t[0] came back uninitialized
    with torch.set_grad_enabled(grad):
        assert_matches_eager(grown_view_of_an_intermediate_from_an_offset, _plain(4), compile_fn=compile_fn)


def a_view_grown_returned(x0: T) -> object:
    v = x0[1:]
    v.resize_(8)
    v.fill_(1.0)
    return (v, x0 * 1)


def grown_then_a_view_grown_returned(x0: T) -> object:
    x0.resize_((4,))
    x0.fill_(-1.0)
    t0 = x0.unbind(0)[2]
    t0.resize_((6,))
    t0.fill_(3.0)
    return (x0, t0)


def grown_through_an_alias_returned(x: T) -> object:
    d = x.detach()
    d.resize_(8)
    d.fill_(1.0)
    return (x * 2, d)


@pytest.mark.parametrize(
    "f", [a_view_grown_returned, grown_then_a_view_grown_returned, grown_through_an_alias_returned]
)
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_output_past_the_input_in_its_grown_storage_matches_eager(
    f: Callable[..., object], grad: bool, compile_fn: CompileFn | None
) -> None:
    # the epilogue wrote back the input's elements only (the output's elements past them came back uninitialized,
    # then refused); the input is traced again over its whole storage, a synthetic base whose write-back spans the
    # grown elements
    with torch.set_grad_enabled(grad):
        _check(f, _plain(4), compile_fn)


def onto_input_then_grown_by_data(x0: T, x1: T) -> object:
    x0.data = x1
    x0.resize_((2,))
    x0.fill_(-1.0)
    return ()


def onto_input_then_grown_by_set(x0: T, x1: T) -> object:
    set_to(x0, x1)
    x0.resize_((2,))
    x0.fill_(-1.0)
    return ()


def onto_input_grown_before(x0: T, x1: T) -> object:
    x1.resize_((2,))
    set_to(x0, x1)
    x0.fill_(-1.0)
    return ()


@pytest.mark.parametrize("f", [onto_input_then_grown_by_data, onto_input_then_grown_by_set, onto_input_grown_before])
@pytest.mark.parametrize(
    "make", [lambda: (torch.randn(3), torch.randn(())), lambda: (pair(3), pair())], ids=["plain", "pair"]
)
def test_input_set_onto_another_input_grown_matches_eager(
    f: Callable[..., object], make: Make, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 114000 program 277: eager grows the other input's storage in place and both inputs end on it; the
    # epilogue gave the first a fresh storage (a wrong aliasing), then refused. Fuzz seed 119700 #4672: the grown
    # input's synthetic base grows and writes it before the epilogue's set_(). PairTensor: `.data =` swaps the
    # wrappers, whose inner tensors stay apart (matches eager); set_() onto a grown pair raises in eager (a meta
    # storage); a pair grown after a set_() onto it: the other's inner tensors grow through an alias (their rule)
    pairs = isinstance(make()[0], PairTensor)
    with torch.no_grad():
        if pairs and f is onto_input_grown_before:
            assert_raises_like_eager(f, make, compile_fn=compile_fn)
        elif pairs and f is onto_input_then_grown_by_set:
            assert_refused(
                f, make, compile_fn, r"args\[1\]\.a: the program grows this input's storage .* through an alias"
            )
        elif pairs:
            assert_matches_eager(f, make, compile_fn=compile_fn)
        else:
            _check(f, make, compile_fn)


def view_of_input_grown_returns_a_view(x0: T) -> object:
    t0 = x0.view((2, -1, 32))
    t0.resize_((67,))
    t0.fill_(3.0)
    return (t0.select(0, -22),)


@pytest.mark.parametrize("make", [_plain(4, 4, 4), lambda: (pair(4, 4, 4),)], ids=["plain", "pair"])
def test_view_of_view_of_input_grown_has_the_input_as_base(make: Make, compile_fn: CompileFn | None) -> None:
    # fuzz seed 114000 program 751: t0's storage grew, still the input's; the output is a view of the input in eager,
    # ours was rebuilt over another base (the grown storage read as one set_() put there). PairTensor: a view of a
    # pair grown raises in eager (a meta storage)
    with torch.no_grad():
        if isinstance(make()[0], PairTensor):
            assert_raises_like_eager(view_of_input_grown_returns_a_view, make, compile_fn=compile_fn)
        else:
            assert_matches_eager(view_of_input_grown_returns_a_view, make, compile_fn=compile_fn)


# Growth inside inference_mode (fuzz seed 116000 #62, #419, #803: refused as "an in-place write through an as_strided()
# view that is not the first view of its chain"): the grown storage was a torch.empty() made inside the block, which
# the functional mode hands back as a detach() of its value, so the rebinding's as_strided() of it was the second view
# of its chain and functionalization could not write it back.
def grown_in_inference_mode_then_written(x: T) -> object:
    with torch.inference_mode():
        x.resize_((11,))
        x.fill_(-1.0)
    return (x,)


def intermediate_grown_in_inference_mode_then_written(x: T) -> object:
    t = x.mul(2.0)
    with torch.inference_mode():
        t.resize_((11,))
        t.fill_(3.0)
    return (t, t.mul(2.0))


def view_grown_in_inference_mode_then_written(x: T) -> object:
    t = x[1:]
    with torch.inference_mode():
        t.resize_((11,))
        t.fill_(0.5)
    return (x,)  # (t reaches past x's elements: refused by its own rule)


def aliased_grown_in_inference_mode_then_written(x0: T, x1: T) -> object:
    with torch.inference_mode():
        x0.resize_((11,))
        x0.fill_(-1.0)
    x1.resize_((15,))
    x1.fill_(-1.0)
    return (x0, x1)


INFERENCE_GROWTH = [
    grown_in_inference_mode_then_written,
    intermediate_grown_in_inference_mode_then_written,
    view_grown_in_inference_mode_then_written,
]


def _pair9() -> tuple[object, ...]:
    return (pair(9),)


@pytest.mark.parametrize("f", INFERENCE_GROWTH)
@pytest.mark.parametrize(
    "make",
    [_plain(9), _plain(1, 3, 3), _pair9, lambda: (nonleaf(9),)],
    ids=["plain", "plain_3d", "pair", "nonleaf"],
)
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_grown_in_inference_mode_then_written_matches_eager(
    f: Callable[..., object], make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    with torch.set_grad_enabled(grad):
        if f is view_grown_in_inference_mode_then_written and make is _pair9:
            # a PairTensor view grown, which the run moves the pair's inner tensors off their storage for: its own
            # rule, which named a set_() after the growth the program never calls (issue #28)
            assert_refused(f, make, compile_fn, _GROWN_THROUGH_AN_ALIAS)
        else:
            _check(f, make, compile_fn)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_aliased_inputs_grown_in_inference_mode_then_written_matches_eager(
    grad: bool, compile_fn: CompileFn | None
) -> None:
    def make() -> tuple[object, ...]:
        b = torch.randn(1, 3, 3)
        return (b, b)

    with torch.set_grad_enabled(grad):
        _check(aliased_grown_in_inference_mode_then_written, make, compile_fn)


# A non-leaf grown inside inference_mode, then written with grad (fuzz seed 118700 program 8865, issue #27): eager's
# grad_fn is a node at the grown size, whose gradient the clone's history rejects, so a backward through the written
# inputs raises there, after the branch through the other input has accumulated; ours copied the value back before
# the resize_, a node at the old size that the backward's root rejected before any branch ran (no gradient behind
# args[1]). Written with grad before the growth alone, the node stays at the old size, as eager's.
def _nonleaf_grown_then_written_with_grad(x0: T, x1: T) -> object:
    with torch.inference_mode():
        x0.resize_((5,))
        x0.fill_(0.5)
    x0.fill_(3.0)
    return (x1,)


def _nonleaf_written_with_grad_then_grown(x0: T, x1: T) -> object:
    x0.fill_(3.0)
    with torch.inference_mode():
        x0.resize_((5,))
        x0.fill_(0.5)
    return (x1,)


def _nonleaf_written_with_grad_around_its_growth(x0: T, x1: T) -> object:
    x0.mul_(2.0)
    with torch.inference_mode():
        x0.resize_((5,))
        x0.fill_(0.5)
    x0.mul_(3.0)
    return (x1,)


@pytest.mark.parametrize(
    "f",
    [
        _nonleaf_grown_then_written_with_grad,
        _nonleaf_written_with_grad_then_grown,
        _nonleaf_written_with_grad_around_its_growth,
    ],
)
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_nonleaf_grown_in_inference_mode_and_written_with_grad_matches_eager(
    f: Callable[..., object], kind: str, compile_fn: CompileFn | None
) -> None:
    @torch.enable_grad()
    def make() -> tuple[object, ...]:
        if kind == "pair":
            return (pair_nonleaf(1, 4), pair(2, 3, 4, requires_grad=True).diagonal(-1, 1, 2))
        return (nonleaf(1, 4), leaf(2, 3, 4).diagonal(-1, 1, 2))

    with torch.enable_grad():
        if kind == "pair":  # (a pair's two inner tensors share a storage: refused by the alias groups' own rule)
            assert_refused(f, make, compile_fn, "shares storage with another input that requires grad")
            return
        assert_matches_eager(f, make, compile_fn=compile_fn)
        assert_matches_eager(f, make, compile_fn=compile_fn, after_call=write_outputs)


def _leaf_grown_in_inference_mode_beside_a_write(x0: T, x1: T) -> object:
    cast(T, DirtyScale.apply(x0))  # type: ignore[no-untyped-call]  # untyped in torch
    with torch.inference_mode():
        x1.resize_((3,))
        x1.fill_(0.5)
    return (x1,)


def _leaf_grown_in_inference_mode_beside_a_plain_write(x0: T, x1: T) -> object:
    x0.mul_(2)
    with torch.inference_mode():
        x1.resize_((3,))
        x1.fill_(0.5)
    return (x1,)


def _nonleaf_and_leaf() -> tuple[object, ...]:
    return nonleaf(2), leaf(1, 1)


def _pair_nonleaf_and_leaf() -> tuple[object, ...]:
    return pair_nonleaf(2), pair(1, 1, requires_grad=True)


@pytest.mark.parametrize(
    "f", [_leaf_grown_in_inference_mode_beside_a_write, _leaf_grown_in_inference_mode_beside_a_plain_write]
)
@pytest.mark.parametrize("make", [_nonleaf_and_leaf, _pair_nonleaf_and_leaf], ids=["plain", "pair"])
def test_unread_leaf_grown_in_inference_mode_returned(
    f: Callable[..., object], make: Make, compile_fn: CompileFn | None
) -> None:
    """fuzz seed 117100 #181: the program never reads the leaf x1 with grad, so eager makes its gradient accumulator
    at the backward through the returned x1, at its grown size. The compiled Function took x1 (through its synthetic
    base) attached, which made the accumulator at the call, at size (1, 1), and the backward through x1 failed its size
    check. Such an input, and such a base, now go into the Function detached. The PairTensor variant is refused by the
    rule on inputs whose inner tensors share storage."""
    with torch.enable_grad():
        if make is _pair_nonleaf_and_leaf:
            assert_refused(f, make, compile_fn, r"args\[1\]\.a shares storage with another input that requires grad")
            return
        assert_matches_eager(f, make, compile_fn=compile_fn)
        assert_matches_eager(f, make, compile_fn=compile_fn, after_call=write_outputs)


def leaf_grown_in_inference_mode_then_read(x: T) -> object:
    with torch.inference_mode():
        x.resize_((3,))
        x.fill_(3.0)
    return (x.reshape((3, 1)),)


def leaf_grown_in_inference_mode_then_split(x: T) -> object:
    with torch.inference_mode():
        x.resize_((26,))
        x.fill_(3.0)
    return (x.split_with_sizes([17, 9], 0)[1],)


def leaf_grown_in_inference_mode_with_grad_on_then_read(x: T) -> object:
    with torch.inference_mode(), torch.enable_grad():  # (autograd records nothing there, grad mode on or off)
        x.resize_((3,))
        x.fill_(3.0)
    return (x.mul(2.0),)


def view_taken_then_grown_in_inference_mode_then_read(x: T) -> object:
    v = x[:1]
    t = v.view((-1,))
    with torch.inference_mode():
        v.resize_((5,))
        v.fill_(2.0)
    return (t.unsqueeze(0),)


@pytest.mark.parametrize(
    "f",
    [
        leaf_grown_in_inference_mode_then_read,
        leaf_grown_in_inference_mode_then_split,
        view_taken_then_grown_in_inference_mode_then_read,
    ],
)
def test_requiring_grad_grown_in_inference_mode_then_used_with_grad_refused(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # fuzz seed 116000 #7890, #7859, #5315 (DIVERGED once the growth above was taken: the compiled backward gave the
    # gradient in the old size, eager's autograd in the grown one): refused by name. Returned as they are, taken.
    def make() -> tuple[object, ...]:
        return (leaf(1, 2, 1) if f is not view_taken_then_grown_in_inference_mode_then_read else nonleaf(2, 2),)

    with torch.enable_grad():
        assert_refused(
            f, make, compile_fn, r"after resize_\(\) grew its storage with grad off \(inside a torch.inference_mode\(\)"
        )
        _check(grown_in_inference_mode_then_written, make, compile_fn)


def test_leaf_grown_in_inference_mode_with_grad_on_then_used_with_grad_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 121008 #6552: grown with grad on inside inference_mode, which records no more than with grad off; the
    # growth went unnoted and x.grad came in the size x came with, (), where eager's is (3,): refused as above
    with torch.enable_grad():
        assert_refused(
            leaf_grown_in_inference_mode_with_grad_on_then_read,
            lambda: (leaf(),),
            compile_fn,
            r"after resize_\(\) grew its storage with grad off \(inside a torch.inference_mode\(\)",
        )


def leaf_grown_in_inference_mode_then_written_into_an_input(x: T, y: T) -> object:
    with torch.inference_mode():
        x.resize_((16,))
        x.fill_(0.5)
    y.mul_(x.select(0, 9))
    return (y,)


def test_grown_in_inference_mode_then_written_with_grad_into_an_input_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 119900 #6480: the write gives the input a history through the leaf at its grown size (eager's
    # gradient for x arrives in (16,), the compiled backward's in (4, 3)): refused by name
    def make() -> tuple[object, ...]:
        return (leaf(4, 3), torch.randn(4)[0:3])

    with torch.enable_grad():
        assert_refused(
            leaf_grown_in_inference_mode_then_written_into_an_input,
            make,
            compile_fn,
            r"carries a gradient: .*after resize_\(\) grew its storage with grad off \(inside a torch.inference_mode\(\)",
        )


def grown_under_no_grad_then_flagged_into_a_function(x: T, function: type[torch.autograd.Function]) -> object:
    with torch.no_grad():
        x.resize_((2,))
        x.fill_(3.0)
    x.requires_grad_()
    return (function.apply(x),)  # type: ignore[no-untyped-call]  # Function.apply is untyped in torch


@pytest.mark.parametrize("function", [TransposeSaved, SinFunction])
@pytest.mark.parametrize("kind", ["leaf", "expand"])
def test_grown_under_no_grad_then_read_by_a_custom_function_matches_eager(
    kind: str, function: type[torch.autograd.Function], compile_fn: CompileFn | None
) -> None:
    # fuzz seed 121009 #8138 (DIVERGED: x.grad [9., 9.] where eager's is [3., 6.], or of the size x came with): a
    # custom Function's apply reads its input with grad while its ops run with grad off inside; once refused, it now
    # matches: an input without grad alone over the storage it grows runs as a leaf made to require grad at the flag,
    # at the grown size (runtime.steps.grown_alone)
    def make() -> tuple[object, ...]:
        return (torch.randn(1) if kind == "leaf" else torch.randn(()).expand((1,)),)

    with torch.enable_grad():
        assert_matches_eager(
            lambda x: grown_under_no_grad_then_flagged_into_a_function(x, function), make, compile_fn=compile_fn
        )


def grown_in_inference_mode_then_detached(x: T) -> object:
    with torch.inference_mode():
        x.resize_((13,))
        x.fill_(-1.0)
    t = x.detach()
    return (t, x, t)


def leaf_view_grown_in_inference_mode_then_read_into_nothing(x: T) -> object:
    t = x.select(0, -3)
    with torch.inference_mode():
        x.resize_((5,))
        x.fill_(-1.0)
    u = t.view((1, 1))
    u.split_with_sizes([1, 0], 0)[0].mul(2.0)
    return (t,)


def leaf_grown_in_inference_mode_then_read_into_nothing(x: T) -> object:
    with torch.inference_mode():
        x.resize_((5,))
        x.fill_(-1.0)
    x.transpose(0, 0).mul(3.0).add_(1.0)
    return (x,)


def grown_in_inference_mode_then_set_to_itself(x: T) -> object:
    t = x.contiguous()
    set_to(x, x)
    with torch.no_grad():
        t.t_()
    t.requires_grad_()
    with torch.inference_mode():
        t.resize_((5,))
        t.fill_(3.0)
    set_to(t, t)
    return (t, t)


def split_in_inference_mode_after_growth_then_read(x: T) -> object:
    t = x.reshape((1,))
    with torch.inference_mode():
        t.resize_((4,))
        t.fill_(0.5)
        pieces = t.split_with_sizes([2, 0, 2], 0)
    return (pieces[0].split_with_sizes([0, 2], 0)[1], t)


@pytest.mark.parametrize(
    ("f", "make"),
    [
        (grown_in_inference_mode_then_detached, lambda: (nonleaf(1, 3, 4).unsqueeze(-2).transpose(1, 0),)),
        (leaf_view_grown_in_inference_mode_then_read_into_nothing, lambda: (leaf(4),)),
        (leaf_grown_in_inference_mode_then_read_into_nothing, lambda: (leaf(1),)),
        (grown_in_inference_mode_then_set_to_itself, lambda: (nonleaf().reshape((1, 1)),)),
        (split_in_inference_mode_after_growth_then_read, lambda: (nonleaf(),)),
    ],
    ids=["detached", "view_read_into_nothing", "leaf_read_into_nothing", "set_to_itself", "split_in_the_block"],
)
def test_requiring_grad_grown_in_inference_mode_then_used_with_grad_reaching_nothing(
    f: Callable[..., object], make: Make, compile_fn: CompileFn | None
) -> None:
    """fuzz seed 119900 #7732, #1864, #8522, #9769: refused where any op with grad read the tensor grown inside
    inference_mode (or a view of it); where no result of such a read that requires grad reaches an output or an
    input, no gradient takes the grown size (a view taken inside the block has no edge to its source), and the
    program matches eager."""
    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)
        assert_matches_eager(f, make, compile_fn=compile_fn, after_call=write_outputs)


def written_with_grad_then_grown_in_inference_mode(x0: T) -> object:
    x0.reshape((-1, 2, 1)).add_(2.0)
    with torch.inference_mode():
        x0.resize_((6,))
        x0.fill_(2.0)
    return ()


def written_without_grad_then_grown_in_inference_mode(x0: T) -> object:
    with torch.no_grad():
        x0.add_(2.0)
    with torch.inference_mode():
        x0.resize_((6,))
        x0.fill_(2.0)
    return ()


def read_with_grad_then_grown_in_inference_mode(x0: T) -> object:
    y = x0 * 2
    with torch.inference_mode():
        x0.resize_((6,))
        x0.fill_(2.0)
    return (y,)


def test_input_written_with_grad_then_grown_in_inference_mode_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 117000 #9092 (eager's autograd recorded the write at the input's earlier size, ours at the grown one:
    # the backward through the input raised "setStorage ... out of bounds"): refused by name; grown without such a
    # write, it matches eager
    def make() -> tuple[object, ...]:
        return (nonleaf(2).unsqueeze(-1),)

    with torch.enable_grad():
        assert_refused(written_with_grad_then_grown_in_inference_mode, make, compile_fn, r"after the program wrote it")
        _check(written_without_grad_then_grown_in_inference_mode, make, compile_fn)
        _check(read_with_grad_then_grown_in_inference_mode, make, compile_fn)


def written_read_flagged_then_grown_in_inference_mode(x0: T, x1: T) -> object:
    x1.add_(x1)
    y = x1 * 2  # eager's y has no history: x1 requires no grad yet
    x1.requires_grad = True
    with torch.inference_mode():
        x1.resize_((4,))
        x1.fill_(3.0)
    return (y,)


def test_input_read_then_flagged_then_grown_in_inference_mode_refused_by_the_growth_rule(
    compile_fn: CompileFn | None,
) -> None:
    # fuzz seed 121009 #4562 (refused as "calls requires_grad_() on this input after computing from it", the run's
    # check of the earlier read made first): the growth inside inference_mode of an input written with grad breaks a
    # rule of its own, which the refusal names
    def make() -> tuple[object, ...]:
        b0 = torch.randn(())
        return (b0, b0.t())

    with torch.enable_grad():
        assert_refused(
            written_read_flagged_then_grown_in_inference_mode, make, compile_fn, r"after the program wrote it"
        )


def view_grown_past_the_input_returned(x0: T) -> object:
    t0 = x0.view((-1, 1))
    with torch.no_grad():
        t0.resize_((2,))
        t0.fill_(-1.0)
    return (t0,)


def detached_grown_past_the_input_returned(x0: T) -> object:
    t0 = x0.detach()
    t0.resize_((4,))
    t0.fill_(0.5)
    return (t0, t0.select(0, 1))


def empty_split_grown_past_the_input_returned(x0: T) -> object:
    t0, _ = x0.split_with_sizes([1, 3], 0)
    _, t3 = t0.split_with_sizes([1, 0], 0)
    with torch.no_grad():
        t3.resize_((5,))
        t3.fill_(2.0)
    return (x0, t3)


def grown_past_an_input_with_an_alias_returned(x0: T, x1: T) -> object:
    t0 = x0.detach()
    t0.resize_((11,))
    t0.fill_(-1.0)
    return (x1, t0, t0.view((-1, 11)))


def _grown_past_inputs() -> list[tuple[Callable[..., object], Make]]:
    def aliased() -> tuple[object, ...]:
        b = torch.randn(2, 1, 4)
        return (b, b.unsqueeze(0))

    return [
        (view_grown_past_the_input_returned, lambda: (torch.randn(()),)),
        (view_grown_past_the_input_returned, lambda: (torch.randn(1).t(),)),
        (detached_grown_past_the_input_returned, lambda: (torch.randn(()),)),
        (detached_grown_past_the_input_returned, lambda: (nonleaf(),)),
        (empty_split_grown_past_the_input_returned, lambda: (torch.randn(4),)),
        (grown_past_an_input_with_an_alias_returned, aliased),
    ]


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize(("f", "make"), _grown_past_inputs())
def test_output_reaching_past_the_input_it_grew_matches_eager(
    f: Callable[..., object], make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 117000 #6, #3753, #4489, #4183 (refused: "reaches storage elements past the input's own"): the input
    # is traced again over its whole storage, a synthetic base whose write-back spans the grown elements
    with torch.set_grad_enabled(grad):
        _check(f, make, compile_fn)


def _view_of_empty_grown(view: Callable[[T], T], n: int) -> Callable[[T], object]:
    def f(x0: T) -> object:
        t0 = view(x0)
        t0.resize_((n,))
        t0.fill_(3.0)
        return (t0, t0[1:], x0 * 2)

    return f


def _dirty_view_of_empty_grown(x0: T) -> object:
    t0, _ = x0.split_with_sizes([0, 0], 0)
    t2, _ = DirtyAddSaved.apply(t0, x0)  # type: ignore[no-untyped-call]  # untyped in torch
    t0.resize_((10,))
    t0.fill_(2.0)
    return (t2,)


def _empty_slice(*shape: int, grad: bool = False) -> Make:
    def make() -> tuple[object, ...]:
        base = nonleaf(*shape) if grad else torch.randn(shape)
        return (base[..., shape[-1] : shape[-1]],)

    return make


_EMPTY_VIEWS_GROWN = [
    pytest.param(_view_of_empty_grown(lambda x: x.unsqueeze(-2), 4), _empty_slice(2), id="unsqueeze"),
    pytest.param(_view_of_empty_grown(lambda x: x.split_with_sizes([0, 0], 0)[0], 1), _empty_slice(1), id="split"),
    pytest.param(
        _view_of_empty_grown(lambda x: x.reshape((0, 2)), 3), lambda: (torch.randn(1, 2)[:, 0:0],), id="reshape"
    ),
    pytest.param(_view_of_empty_grown(lambda x: x.view((0,)), 1), lambda: (torch.randn(2, 4)[2:2],), id="view"),
    pytest.param(_view_of_empty_grown(lambda x: x.t(), 12), _empty_slice(4, 3), id="t"),
    pytest.param(_view_of_empty_grown(lambda x: x.unsqueeze(0), 3), lambda: (torch.randn(0),), id="own_storage"),
    pytest.param(
        _view_of_empty_grown(lambda x: x.detach().unsqueeze(-2), 4), _empty_slice(2, grad=True), id="detach_grad"
    ),
    pytest.param(_dirty_view_of_empty_grown, lambda: (torch.randn(3, 1)[0:0:2],), id="dirty_function"),
]


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize(("f", "make"), _EMPTY_VIEWS_GROWN)
def test_view_of_an_empty_input_grown_past_its_storage_matches_eager(
    f: Callable[..., object], make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 121005 #1499, #1805, #4464, #5766, #6553, #9038 (refused: "a view, with a layout of its own, of an
    # empty tensor the program computed and set_() input 0 to"): the empty input's storage grown by resize_() of a
    # view of it holds nothing a kernel laid out; the view takes resize_()'s contiguous strides, as on the fakes.
    # (A PairTensor input grown through an alias is refused by its own rule:
    # test_pair_input_grown_through_alias_is_refused.)
    with torch.set_grad_enabled(grad):
        _check(f, make, compile_fn)


def _grown_detached(x: T) -> T:
    return x.detach()


def _grown_data(x: T) -> T:
    return x.data


def _grown_view_of_detached(x: T) -> T:
    return x.detach().view(-1)


GROWING_ALIASES = [
    pytest.param(_grown_detached, id="detach"),
    pytest.param(_grown_data, id="data"),
    pytest.param(_grown_view_of_detached, id="view_of_detach"),
]


def _grown_through(alias: Callable[[T], T], written_after: bool) -> Callable[[T], object]:
    def f(x: T) -> object:
        t = alias(x)
        t.resize_((8,))
        t.fill_(-1.0)
        if written_after:
            x.mul_(3.0)
        return ()

    return f


def _nonleaf_element() -> tuple[T]:
    with torch.enable_grad():
        return (nonleaf(4)[1],)


@pytest.mark.parametrize("alias", GROWING_ALIASES)
@pytest.mark.parametrize("written_after", [True, False], ids=["mul_after", "no_write_after"])
@pytest.mark.parametrize(
    "make", [lambda: (nonleaf(),), lambda: (nonleaf(2),), _nonleaf_element], ids=["plain_0d", "plain", "view"]
)
def test_input_grown_through_alias_then_written_with_grad_matches_eager(
    alias: Callable[[T], T], written_after: bool, make: Make, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 120600 program 0: an alias autograd does not relate to the input grows its storage (eager grows it in
    # place; functionalization rebinds the input to a fresh storage), then the input's own mul_, which autograd
    # records, went unrecorded (it wrote that fresh storage, not the input's): the gradient through the written
    # input lacked the *3
    with torch.enable_grad():
        assert_matches_eager(_grown_through(alias, written_after), make, compile_fn=compile_fn)


@pytest.mark.parametrize("alias", GROWING_ALIASES)
@pytest.mark.parametrize("written_after", [True, False], ids=["mul_after", "no_write_after"])
@pytest.mark.parametrize(
    ("make", "grad"),
    [(lambda: (pair_nonleaf(2),), True), (lambda: (pair(2),), True), (lambda: (pair(2),), False)],
    ids=["pair_nonleaf", "pair", "pair_no_grad"],
)
def test_pair_input_grown_through_alias_is_refused(
    alias: Callable[[T], T], written_after: bool, make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    # the run does not take the input's inner tensors along as inputs whose storage grows (they end on the grown
    # storage as tensors set_() there), and eager's PairTensor aliasing correction swaps the input's own storage for
    # a meta one (a later detach() of it raises, in the backward of a non-leaf): refused. The message spoke of a
    # set_() the program never calls; it names the growth through an alias (issue #28)
    with torch.set_grad_enabled(grad):
        assert_refused(_grown_through(alias, written_after), make, compile_fn, _GROWN_THROUGH_AN_ALIAS)
        if compile_fn is None:
            with pytest.raises(UnsupportedError) as refusal:
                subclassaot.compile(_grown_through(alias, written_after))(*cast(tuple[T], make()))
            assert "set_()" not in str(refusal.value)


# Intermediates of multi-output ops (and the like) resized, then made new autograd leaves: eager's is no view.
def _max_of_0d(x: T) -> T:
    return x.max(0)[0].add(-1.0)


def _sorted(x: T) -> T:
    return x.sort(0)[0]


def _split_added(x: T) -> T:
    return x.split_with_sizes([1, 2], 0)[0].add(1.0)


def _unbound_scaled(x: T) -> T:
    return x.unbind(0)[-1].mul(2.0)


RESIZED_SOURCES = [
    pytest.param(_max_of_0d, _plain(), id="max_0d"),
    pytest.param(_sorted, _plain(3), id="sort"),
    pytest.param(_split_added, _plain(3), id="split"),
    pytest.param(_unbound_scaled, _plain(3), id="unbind"),
]


def _resized_made_leaf(source: Callable[[T], T], numel: int) -> Callable[[T], object]:
    def f(x: T) -> object:
        t = source(x)
        t.resize_((numel,))
        t.fill_(0.5)
        t.requires_grad = True
        return (t, t.mul(2.0))

    return f


def _outputs_facts(outputs: object) -> list[tuple[object, ...]]:
    assert isinstance(outputs, tuple)
    return [(o._is_view(), o.is_leaf, o.requires_grad, o.untyped_storage().nbytes()) for o in outputs]


@pytest.mark.parametrize(("source", "make"), RESIZED_SOURCES)
@pytest.mark.parametrize("numel", [5, 1], ids=["grown", "shrunk"])
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_intermediate_resized_then_made_a_leaf_is_no_view(
    source: Callable[[T], T], make: Make, numel: int, grad: bool, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 116800 program 2292: `t0 = x0.max(0)[0].add(-1.0); t0.resize_(5); t0.requires_grad = True`, returned:
    # the graph runs resize_ as an as_strided() of a temporary, whose view the new-leaf node made the leaf, so the
    # output was a view (`._base` set) where eager's is none. Plain only: requires_grad_() on an intermediate
    # PairTensor with grad on is refused (the new-leaf rule), and an input that requires grad cannot be resized.
    f = _resized_made_leaf(source, numel)
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make, compile_fn=compile_fn)
        compiled = compile_fn(f, backend="eager") if compile_fn is not None else subclassaot.compile(f, backend="eager")
        # no view, a leaf requiring grad, over a storage of eager's size
        assert _outputs_facts(compiled(*cast(tuple[T], make()))) == _outputs_facts(f(*cast(tuple[T], make())))


# Views of a detach() of an input taken before (or after) a resize_() grew it: eager's `._base` is that detach(),
# returned by no one, over the input's grown storage, sharing the input's version counter.
def _detached_view(x: T) -> T:
    return x.detach().view(-1)


GROWN_DETACHES = [
    pytest.param(_grown_detached, id="detach"),
    pytest.param(_detached_view, id="view_of_detach"),
]
VIEWS_OF_GROWN = [
    pytest.param(lambda t: t.split_with_sizes([2, 1, 1], 0)[1], id="split_with_sizes"),
    pytest.param(lambda t: t.unbind(0)[2], id="unbind"),
    pytest.param(lambda t: t.chunk(2, 0)[1], id="chunk"),
    pytest.param(lambda t: t[1:3], id="slice"),
]


def _view_of_grown_detach(alias: Callable[[T], T], view: Callable[[T], T], after: bool) -> Callable[[T], object]:
    def f(x: T) -> object:
        t = alias(x)
        v = view(t) if not after else None
        t.resize_((5,))
        t.fill_(-1.0)
        return (view(t[:4]) if after else v,)

    return f


def _after_output_written(f: Callable[..., object], make: Make, compile_fn: CompileFn | None) -> list[list[object]]:
    """Each side's input version counter moved by a write of the output after the call, the output's base's storage
    size, and the input's grown storage values (eager's detach() shares the input's counter and storage)."""
    compiled = compile_fn(f) if compile_fn is not None else subclassaot.compile(f)
    facts: list[list[object]] = []
    for fn in (compiled, f):
        (x,) = cast(tuple[T], make())
        (out,) = cast(tuple[T], fn(x))
        base = out._base
        assert base is not None
        before = x._version
        with torch.no_grad():
            out.add_(1.0)
        grown = torch.empty(0).set_(x.untyped_storage())
        facts.append([x._version != before, base.untyped_storage().nbytes(), grown.tolist(), base.tolist()])
    return facts


@pytest.mark.parametrize("alias", GROWN_DETACHES)
@pytest.mark.parametrize("view", VIEWS_OF_GROWN)
@pytest.mark.parametrize("after", [False, True], ids=["viewed_before", "viewed_after"])
@pytest.mark.parametrize(("make", "grad"), [(_plain(4), False), (lambda: (leaf(4),), True)], ids=["no_grad", "grad"])
def test_view_of_a_grown_detach_keeps_its_base_matches_eager(
    alias: Callable[[T], T],
    view: Callable[[T], T],
    after: bool,
    make: Make,
    grad: bool,
    compile_fn: CompileFn | None,
) -> None:
    # fuzz seed 116800 program 4740: `t0 = x0.detach(); t2 = t0.split_with_sizes([2, 1, 1])[1]; t0.resize_(5)`,
    # returning t2: no replay remakes a chain through the grown t0, and the output was rebuilt as a view of the input
    # (eager's `._base` is t0, over the input's storage grown in place, with the element past the input's own the
    # program wrote, and the input's version counter). Plain only: a PairTensor input grown through an alias is
    # refused (test_pair_input_grown_through_alias_is_refused).
    f = _view_of_grown_detach(alias, view, after)
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make, compile_fn=compile_fn)
        compiled_facts, eager_facts = _after_output_written(f, make, compile_fn)
    assert compiled_facts == eager_facts


def _unbound_then_input_shrunk_set_to_own_view(x: T) -> object:
    t0 = x.detach()
    t1 = t0.unbind(0)[0]
    x.resize_(())
    set_to(t1, t1.view(1, 1))
    return (t1,)


def _selected_then_input_shrunk_set_to_own_view(x: T) -> object:
    t0 = x.detach()
    t1 = t0[0]
    x.resize_(())
    set_to(t1, t1.view(1, 1))
    return (t1,)


def _selected_then_input_transposed_set_to_own_view(x: T) -> object:
    t0 = x.detach()
    t1 = t0[0]
    x.t_()
    set_to(t1, t1.view(3, 1))
    return (t1,)


def _selected_then_input_shrunk(x: T) -> object:
    t0 = x.detach()
    t1 = t0[0]
    x.resize_(2)
    return (t1, x)


@pytest.mark.parametrize(
    ("f", "shape"),
    [
        (_unbound_then_input_shrunk_set_to_own_view, (1,)),
        (_selected_then_input_shrunk_set_to_own_view, (1,)),
        (_selected_then_input_transposed_set_to_own_view, (2, 3)),
        (_selected_then_input_shrunk, (2, 3)),
    ],
    ids=["unbind_shrunk_set", "select_shrunk_set", "select_transposed_set", "select_shrunk"],
)
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_view_of_a_detach_the_input_left_keeps_its_base_matches_eager(
    f: Callable[..., object], shape: tuple[int, ...], kind: str, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 122930 program 1452: `t0 = x0.detach(); t1 = t0.unbind(0)[0]; x0.resize_(()); t1.set_(t1.view(1,
    # 1))`: eager's t1 keeps t0 as its `._base`, a detach() with the input's layout before the resize_() (and the
    # input's version counter); the output was rebuilt as a view of the input itself. The same after x0.t_().
    def make() -> tuple[object, ...]:
        return (pair(*shape) if kind == "pair" else torch.randn(shape),)

    with torch.no_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# A view made under no_grad between resizes, returned after the program made the input require grad (fuzz seed 122950
# #43): eager's view is stale (its counter moved after it was made) and its base requires grad, so its grad_fn and
# is_leaf raise; ours, rebuilt by as_strided after the epilogue, read fine. Refused (Note [Views That Raise After A
# Bump]); without the requires_grad_(), or with the view taken after the last write, eager's reads fine and so must ours.
# ---------------------------------------------------------------------------------------------------------------------


def _view_between_resizes(gains_grad: bool, view_last: bool) -> Callable[[T], object]:
    def f(x0: T) -> object:
        x0.resize_((1,))
        t0 = x0.expand((2,))
        x0.resize_((4,))
        x0.fill_(-1.0)
        if view_last:
            t0 = x0[:1].expand((2,))
        if gains_grad:
            x0.requires_grad_()
        return (t0,)

    return f


@pytest.mark.parametrize("view_last", [False, True])
@pytest.mark.parametrize("gains_grad", [False, True])
def test_no_grad_view_between_resizes(compile_fn: CompileFn | None, gains_grad: bool, view_last: bool) -> None:
    f = _view_between_resizes(gains_grad, view_last)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(()),)

    with torch.no_grad():
        if gains_grad and not view_last:
            assert_refused(f, make_inputs, compile_fn, "its grad_fn raises in eager")
        else:
            assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# resize_() and requires_grad_() in one program (Note [resize_ And requires_grad]): eager's resize_ raises wherever its
# tensor requires grad, and a view's flag is its autograd root's (the input's `._base`) where it has none of its own.
# The run's resize_ raised "cannot resize variables that require grad" where eager's ran: on a view taken before the
# program made its input require grad, where that input is a view of a tensor requiring none (fuzz seed 117100 #2390),
# and on an input sharing storage with one the program makes require grad later, which a training compile makes
# require it from the start (seed 123000 #161); and it ran where eager's raised, on (a view of) an input whose
# `._base` is another input the program made require grad.
# ---------------------------------------------------------------------------------------------------------------------


def _resize_and_gain(target: str, size: int, when: str) -> Callable[..., object]:
    """resize_() under no_grad of the last input (`target` "input") or of a view of it taken first ("early_view"),
    and requires_grad_() on the first input `when` "before" or "after" the resize_."""

    def f(*xs: T) -> object:
        x, gainer = xs[-1], xs[0]
        t = x.t() if target == "early_view" else x
        if when == "after":
            gainer.requires_grad_()
        with torch.no_grad():
            t.resize_((size,))
            t.fill_(2.0)
        if when == "before":
            gainer.requires_grad_()
        return ()

    return f


def _resize_gain_inputs(kind: str, struct: str) -> Make:
    def make() -> tuple[object, ...]:
        b = pair(3, 3) if kind == "pair" else torch.randn(3, 3)
        if struct == "view":
            return (b.select(1, -1),)
        if struct == "as_strided":
            return (b.as_strided((3,), (3,), 2),)
        if struct == "leaf":
            return (b[:, 2].clone(),)
        return (b, b[1])  # "group": a base and a view of it, the base made to require grad

    return make


_STRUCTS = ("view", "as_strided", "leaf", "group")
# the cases that compile and match eager (the others, where eager's program is legal, are refused by name)
_RESIZE_GAIN_MATCHES = {
    *(f"plain-{s}-{t}-{n}-before-no_grad" for s in _STRUCTS for t in ("input", "early_view") for n in (2, 9)),
    *(f"pair-{s}-input-{n}-before-no_grad" for s in ("view", "as_strided", "leaf") for n in (2, 9)),
    *(f"pair-{s}-early_view-2-before-no_grad" for s in _STRUCTS),
    *(f"plain-{s}-early_view-{n}-after-no_grad" for s in ("view", "as_strided") for n in (2, 9)),
    *(f"pair-{s}-early_view-2-after-no_grad" for s in ("view", "as_strided")),
    *(f"plain-group-{t}-9-before-grad" for t in ("input", "early_view")),
    *(f"{k}-leaf-early_view-2-before-grad" for k in ("plain", "pair")),
    "plain-group-input-2-before-grad",
    # (a leaf shrunk within its storage before the flag: relaid, as by an in-place view op, Note [Leaves Laid Out Anew
    # Under no_grad])
    "plain-leaf-input-2-before-grad",
    "pair-group-early_view-2-before-grad",
    # (the flag set last, nothing taking the storage after: Analysis.gains_last)
    *(f"plain-{s}-early_view-{n}-before-grad" for s in ("view", "as_strided", "leaf") for n in (2, 9)),
    "plain-group-early_view-2-before-grad",
    # (a lone input grown under no_grad past its storage, then made to require grad with grad on: the input ends a
    # leaf on its grown storage, as eager's; refused until session 49's resize_ rules, found matching by its slow sweep)
    *(f"plain-{s}-input-9-before-grad" for s in ("view", "as_strided", "leaf")),
}
_RESIZE_GAIN_CASES = [
    pytest.param(kind, struct, target, size, when, grad, id=f"{kind}-{struct}-{target}-{size}-{when}-{grad}")
    for kind in ("plain", "pair")
    for struct in _STRUCTS
    for target in ("input", "early_view")
    for size in (2, 9)
    for when in ("before", "after")
    for grad in ("no_grad", "grad")
]


def _eager_raises(f: Callable[..., object], make: Make) -> bool:
    try:
        f(*make())
    except RuntimeError:
        return True
    return False


@pytest.mark.parametrize(("kind", "struct", "target", "size", "when", "grad"), _RESIZE_GAIN_CASES)
def test_resize_around_requires_grad_as_eager(
    kind: str, struct: str, target: str, size: int, when: str, grad: str, compile_fn: CompileFn | None
) -> None:
    f, make = _resize_and_gain(target, size, when), _resize_gain_inputs(kind, struct)
    with torch.set_grad_enabled(grad == "grad"):
        if _eager_raises(f, make):  # (a resize_ of a tensor requiring grad in eager)
            assert_raises_like_eager(f, make, compile_fn=compile_fn)
        elif f"{kind}-{struct}-{target}-{size}-{when}-{grad}" in _RESIZE_GAIN_MATCHES:
            assert_matches_eager(f, make, compile_fn=compile_fn)
        else:
            assert_refused(f, make, compile_fn, r"args\[\d\]")


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_resize_of_a_view_of_an_input_whose_base_input_gained_grad_raises_like_eager(
    kind: str, compile_fn: CompileFn | None
) -> None:
    # the run's stand-in, a view of the synthetic base, did not gain the flag: its resize_ ran
    f, make = _resize_and_gain("early_view", 2, "after"), _resize_gain_inputs(kind, "group")
    with torch.no_grad():
        assert_raises_like_eager(f, make, compile_fn=compile_fn)


def test_resize_of_a_view_taken_before_its_view_input_gains_grad_matches_eager(compile_fn: CompileFn | None) -> None:
    # fuzz seed 117100, program 2390
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (torch.randn((3, 3)).select(1, -1),)

    def f(x0: T) -> object:
        t0 = x0.t()
        x0.requires_grad = True
        t0.resize_((9,))
        t0.fill_(2.0)
        return ()

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def _resized_with_grad_after_gain(before: str, resize: str) -> Callable[[T], object]:
    """A view of the input taken with grad before the program makes the input (a view of a base requiring none)
    require grad; written under no_grad (`before`), then resized with grad on (`resize`), its flag read after."""

    def f(x0: T) -> object:
        t0 = x0.transpose(0, 0)
        with torch.no_grad():
            if before == "data":
                t0.data.mul_(t0)
            elif before == "no_grad":
                t0.mul_(2.0)
        t1 = x0[0:0:2]
        x0.requires_grad_()
        if resize == "resize_as_":
            t0.resize_as_(torch.zeros(()))
        else:
            t0.resize_(())
        return (t1, t0.requires_grad, t0.grad_fn is None, x0 * 2)

    return f


@pytest.mark.parametrize("resize", ["resize_", "resize_as_"])
@pytest.mark.parametrize("before", ["data", "no_grad", "nothing"])
def test_resize_with_grad_of_a_view_taken_before_its_view_input_gains_grad_matches_eager(
    before: str, resize: str, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 120700, program 6701: eager's view takes its flag from the input's base (none), so its resize_ records
    # nothing; the run's, below autograd, was noted as a write with grad: the epilogue's copy of the earlier no_grad
    # write into the input, now a leaf view requiring grad, raised (and the view's flag read True, eager's False)
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (torch.randn(()).unsqueeze(-1).contiguous(),)

    with torch.enable_grad():
        assert_matches_eager(_resized_with_grad_after_gain(before, resize), make_inputs, compile_fn=compile_fn)


def test_resize_of_an_input_before_its_base_input_gains_grad_matches_eager(compile_fn: CompileFn | None) -> None:
    # fuzz seed 123000, program 161: the training compile makes x0 (and x1 over its storage) require grad from the start
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((1, 4, 1))
            return (b0, b0.as_strided((), (), 1).reshape((1,)), b0.contiguous().view((1, 4, 1)))

    def f(x0: T, x1: T, x2: T) -> object:
        with torch.no_grad():
            x1.resize_((4,))
            x1.fill_(3.0)
        x0.requires_grad_()
        return (x1,)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_resize_in_inference_mode_of_a_view_whose_base_input_gained_grad_matches_eager(
    kind: str, compile_fn: CompileFn | None
) -> None:
    # inside inference_mode eager's resize_ skips autograd's check: it resizes a tensor that requires grad
    def f(x0: T, x1: T) -> object:
        t = x1.t()
        x0.requires_grad_()
        with torch.inference_mode():
            t.resize_((2,))
        with torch.no_grad():
            t.fill_(2.0)
        return ()

    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            assert_matches_eager(f, _resize_gain_inputs(kind, "group"), compile_fn=compile_fn)


def test_resize_of_a_view_taken_before_the_flag_after_a_write_with_grad_refused(compile_fn: CompileFn | None) -> None:
    # eager's view requires grad after such a write only where the value written did
    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(3, 3).select(1, -1),)

    def f(x0: T) -> object:
        t = x0.t()
        x0.mul_(2)
        x0.requires_grad_()
        with torch.no_grad():
            t.resize_((2,))
            t.fill_(2.0)
        return ()

    with torch.enable_grad():  # (the flag after the write is checked first: the view input is read before it)
        assert_refused(
            f, make_inputs, compile_fn, r"args\[0\]: the program calls requires_grad_\(\) .* after computing"
        )
    with torch.no_grad():  # (no write autograd records)
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


_GAIN_AFTER_RESIZE = "is written in place and made to require grad"


@pytest.mark.parametrize("read", ["mul", "transpose_saved"])
@pytest.mark.parametrize("alias", ["zero_stride", "scalar_view"])
def test_input_made_to_require_grad_beside_an_input_over_its_storage_resized_and_written(
    compile_fn: CompileFn | None, read: str, alias: str
) -> None:
    # fuzz seed 117200 #6364: x1 made to require grad; x0, over x1's storage, resized (a reallocation) and written.
    # Eager's x1 required no grad when its storage changed. Where x1's elements overlap (a zero stride), the compiled
    # call would sum its gradient over the repeated elements of the grown storage: refused by name, as a direct write
    # is; a view without overlap matches eager
    def f(x0: T, x1: T) -> object:
        x1.requires_grad_()
        x0.resize_((3,))
        x0.fill_(0.5)
        return (x1 * 3 if read == "mul" else TransposeSaved.apply(x1),)  # type: ignore[no-untyped-call]  # untyped in torch

    def make() -> tuple[object, ...]:
        b0 = torch.randn(())
        return (b0, b0.as_strided((3, 1), (0, 1), 0) if alias == "zero_stride" else b0.view(1))

    with torch.enable_grad():
        if alias == "zero_stride":
            assert_refused(f, make, compile_fn, _GAIN_AFTER_RESIZE)
        else:
            assert_matches_eager(f, make, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# An input over the storage of other inputs grown by resize_() (through a detach()), beside a view input.


def _first_unbound(b0: T) -> T:
    return b0.unbind(0)[0]


def _first_selected(b0: T) -> T:
    return b0[0]


def _first_split(b0: T) -> T:
    return b0.split_with_sizes([2, 2])[0]


def _written_then_grown_through_a_detach(returned: bool) -> Callable[..., object]:
    def f(x0: T, x1: T, x2: T) -> object:
        x1.add_(-1.0)
        x2.resize_((3,))
        x2.fill_(3.0)
        return (x0,) if returned else ()

    return f


@pytest.mark.parametrize("member", [_first_unbound, _first_selected, _first_split], ids=["unbind", "select", "split"])
@pytest.mark.parametrize("returned", [False, True], ids=["nothing_returned", "view_returned"])
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_view_input_beside_an_input_grown_through_a_detach_matches_eager(
    member: Callable[[T], T], returned: bool, grad: bool, kind: str, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 117400 program 1078: inputs (b0.unbind(0)[0], b0, b0.unbind(0)[3].detach()); x1.add_(-1);
    # x2.resize_((3,)) grows the storage all three share, then fill_. Every member of the alias group is grown with
    # it, and each got a copy_ of its final value after the group's base's: a copy_ into a multi-output view (unbind)
    # that requires grad raises. The base's value holds the whole grown storage (Note [Input Updates]): a member
    # grown on it takes its value from there alone, as eager's does. A PairTensor input grown through an alias is
    # refused (test_pair_input_grown_through_alias_is_refused)
    def make() -> tuple[object, ...]:
        with torch.set_grad_enabled(grad):
            b0 = (pair_nonleaf(4) if grad else pair(4)) if kind == "pair" else (nonleaf(4) if grad else torch.randn(4))
            return (member(b0), b0, b0.unbind(0)[3].detach())

    f = _written_then_grown_through_a_detach(returned)
    with torch.set_grad_enabled(grad):
        if kind == "pair":
            assert_refused(f, make, compile_fn, _GROWN_THROUGH_AN_ALIAS)
        else:
            assert_matches_eager(f, make, compile_fn=compile_fn)
            if grad:
                assert_matches_eager(f, make, compile_fn=compile_fn, after_call=write_outputs)


def _view_of_grown_detach_set_to_intermediate(x0: T, x1: T) -> object:
    t0 = x0.add(0.5)
    t1 = x1.reshape((2, 1, 1))
    x1.resize_((3,))
    x1.fill_(-1.0)
    set_to(t1, t0)
    return ()


_VIEW_SET_AFTER_RELAYOUT = r"args\[0\] and args\[1\]: set_\(\) with grad of a view taken with grad enabled, after"


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_view_set_after_its_base_grew_matches_eager_or_is_refused(
    grad: bool, kind: str, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 117400 program 9221: inputs (b0, b0.detach()); t1 = x1.reshape((2, 1, 1)); x1.resize_((3,)) grows;
    # t1.set_(t0), t0 requiring grad. Autograd rebases t1's history on the set_() by replaying reshape on x1, now
    # (3,): under functionalization that raised inside the run ("shape '[2, 1, 1]' is invalid for input of size 3"),
    # where eager's as_strided() does not. With grad: refused naming the inputs; under no_grad autograd records
    # nothing and it matches eager. A PairTensor's set_() of its meta-storage view raises in eager.
    def make() -> tuple[object, ...]:
        with torch.set_grad_enabled(grad):
            b0 = (pair_nonleaf(2) if grad else pair(2)) if kind == "pair" else (nonleaf(2) if grad else torch.randn(2))
            return (b0, b0.detach())

    f = _view_of_grown_detach_set_to_intermediate
    with torch.set_grad_enabled(grad):
        if kind == "pair":
            assert_raises_like_eager(f, make, compile_fn=compile_fn)
        elif grad:
            assert_refused(f, make, compile_fn, _VIEW_SET_AFTER_RELAYOUT)
        else:
            assert_matches_eager(f, make, compile_fn=compile_fn)


# A view input that requires grad, grown inside inference_mode: eager's resize_() there neither checks the view (an
# unbind() output may not be changed in place elsewhere) nor rewrites its history, and the epilogue's layout replay
# must do neither either.
def _view_grown_in_inference_mode_beside_a_write_of_its_base(x0: T, x1: T) -> object:
    with torch.inference_mode():
        x0.resize_((21,))
        x0.fill_(-1.0)
    t0 = x1.unsqueeze(-4)
    t0.mul_(2.0)
    return ()


def _view_grown_by_its_detach_then_itself_in_inference_mode(x0: T, x1: T) -> object:
    x0.detach().resize_((20,))  # (its storage grows under it first: a resize_() of itself still follows)
    return _view_grown_in_inference_mode_beside_a_write_of_its_base(x0, x1)


@pytest.mark.parametrize(
    "grow",
    [_view_grown_in_inference_mode_beside_a_write_of_its_base, _view_grown_by_its_detach_then_itself_in_inference_mode],
    ids=["itself", "detach_then_itself"],
)
@pytest.mark.parametrize("split", ["unbind", "select"])
def test_view_input_grown_in_inference_mode_keeps_its_history(
    split: str, grow: Callable[[T, T], object], compile_fn: CompileFn | None
) -> None:
    """Found by the fuzzer (seed 123156 #65): the epilogue's as_strided_() of x0, an unbind() view, raised "Output 1
    of Unbind is a view and is being modified inplace" (crashed); of a select() view it rewrote x0's history with grad,
    and b0's gradient differed. A PairTensor's resize_() there raises in eager (a storage on the meta device). A
    resize_() of x0 itself that grows its storage is one of itself (`LeafMutation.grown_under_it` stays False), its
    storage grown by its detach() first or not: the replay stays inside inference_mode."""

    def make() -> tuple[object, ...]:
        b0 = nonleaf(3, 2, 3)
        return (b0.unbind(2)[1] if split == "unbind" else b0.select(2, 1)), b0

    with torch.enable_grad():
        assert_matches_eager(grow, make, compile_fn=compile_fn)
        assert_matches_eager(grow, make, compile_fn=compile_fn, after_call=write_outputs)


# A view input whose version counter a resize_() moves (eager's resize_() bumps the counter wherever it changes the
# size: growing or not, through the input itself inside inference_mode, a detach(), a view of one, its base's
# detach(), under no_grad or not), then read with grad: eager's unbind() view raises at the read (its grad_fn cannot
# be rebuilt once its counter moved), a select() view reads fine. The run's stand-in is no such view: the read
# raises eager's error by the real input's (Note [Views That Raise After A Bump]).
def _grown_through_its_detach(x0: T, x1: T) -> None:
    x0.detach().resize_((15,))


def _shrunk_through_its_detach(x0: T, x1: T) -> None:
    x0.detach().resize_((2,))


def _resized_to_its_size_through_its_detach(x0: T, x1: T) -> None:
    x0.detach().resize_((4, 3))  # (the same size: no bump, no error)


def _grown_through_a_view_of_its_detach(x0: T, x1: T) -> None:
    x0.detach().view(-1).resize_((30,))


def _grown_through_its_bases_detach(x0: T, x1: T) -> None:
    x1.detach().resize_((30,))


def _grown_through_its_detach_under_no_grad(x0: T, x1: T) -> None:
    with torch.no_grad():
        x0.detach().resize_((15,))


def _grown_through_its_detach_in_inference_mode(x0: T, x1: T) -> None:
    with torch.inference_mode():
        x0.detach().resize_((15,))


def _grown_itself_in_inference_mode(x0: T, x1: T) -> None:
    with torch.inference_mode():
        x0.resize_((15,))


_COUNTER_RESIZES = [
    _grown_through_its_detach,
    _shrunk_through_its_detach,
    _resized_to_its_size_through_its_detach,
    _grown_through_a_view_of_its_detach,
    _grown_through_its_bases_detach,
    _grown_through_its_detach_under_no_grad,
    _grown_through_its_detach_in_inference_mode,
    _grown_itself_in_inference_mode,
]


def _resized_then_read(resize: Callable[[T, T], None]) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        resize(x0, x1)
        return (x0 * 2,)

    return f


@pytest.mark.parametrize("resize", _COUNTER_RESIZES, ids=lambda r: r.__name__.lstrip("_"))
@pytest.mark.parametrize("split", ["unbind", "select"])
def test_view_input_read_with_grad_after_a_resize_moved_its_counter(
    split: str, resize: Callable[[T, T], None], compile_fn: CompileFn | None
) -> None:
    """Found by helper hg8616b (issue #27): `x0.detach().resize_((15,)); return (x0 * 2,)`, x0 an unbind() view of
    x1: eager raises "Output 1 of UnbindBackward0 is a view and its base or another view of its base has been modified
    inplace" at the read, the compiled call returned normally."""

    def make() -> tuple[object, ...]:
        b0 = nonleaf(4, 3, 2)
        return (b0.unbind(2)[1] if split == "unbind" else b0.select(2, 1)), b0

    f = _resized_then_read(resize)
    raises = split == "unbind" and resize is not _resized_to_its_size_through_its_detach
    with torch.enable_grad():
        if raises:
            assert_raises_like_eager(f, make, compile_fn=compile_fn)
        elif resize is _grown_itself_in_inference_mode:
            # (a storage shared with another input that requires grad, relaid inside inference_mode: refused by name)
            assert_refused(f, make, compile_fn, "shares storage with another input that requires grad")
        else:
            assert_matches_eager(f, make, compile_fn=compile_fn)


def alias_resized_returned_with_its_view(take: str, size: int, view: str) -> Callable[[T], object]:
    """An alias of input x0 (its detach(), an aten.alias, or a view of its detach()) viewed, then resized and written
    through; the alias and its view returned (the view's eager `._base`: the alias, or the detach() it came from)."""

    def f(x0: T) -> object:
        if take == "detach":
            t0 = x0.detach()
        elif take == "alias":
            t0 = torch.ops.aten.alias.default(x0)
        else:
            t0 = x0.detach().view(-1)
        t1 = t0.view(2, 4) if view == "view" else t0.view(-1)[1:5]
        t0.resize_((size,))
        t0.fill_(2.0)
        return (t0, t1)

    return f


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("size", [10, 4], ids=["grow", "shrink"])
@pytest.mark.parametrize("view", ["view", "slice"])
@pytest.mark.parametrize(
    ("take", "make"),
    [
        ("detach", _plain(4, 2)),
        ("detach", lambda: (leaf(4, 2),)),
        ("alias", _plain(4, 2)),
        ("detach_view", _plain(4, 2)),
        ("detach_view", lambda: (leaf(4, 2),)),
    ],
    ids=["detach", "detach_of_leaf", "alias", "detach_view", "detach_view_of_leaf"],
)
def test_alias_resized_returned_with_its_view_matches_eager(
    take: str, make: Make, view: str, size: int, grad: bool, compile_fn: CompileFn | None
) -> None:
    """fuzz seed 117700 #3256 (DIVERGED, inference): `t0 = x0.detach(); t1 = t0.view(2, 4); t0.resize_((10,));
    t0.fill_(2.0); return (t0, t1)`. A growing resize_() reallocates the storage in place, under x0, t0 and t1 alike:
    eager's t1 stays a view of t0, the output. The chain through the grown t0 was not replayed, and t1 was rebuilt as a
    view of x0 (its `._base`, and its requires_grad from x0's leaf); it is replayed from output t0 as laid out when
    viewed. Shrinking replayed already."""
    with torch.set_grad_enabled(grad):
        assert_matches_eager(alias_resized_returned_with_its_view(take, size, view), make, compile_fn=compile_fn)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("size", [10, 4], ids=["grow", "shrink"])
@pytest.mark.parametrize("take", ["detach", "alias"])
def test_pair_alias_resized_returned_with_its_view(
    take: str, size: int, grad: bool, compile_fn: CompileFn | None
) -> None:
    """The programs above over a PairTensor input: a shrink matches eager; a growth through the alias stays refused by
    name (the run rebinds the pair's inner tensors off the input's storage: a known gap, never a wrong result)."""
    f = alias_resized_returned_with_its_view(take, size, "view")
    with torch.set_grad_enabled(grad):
        if size > 8:
            assert_refused(f, lambda: (pair(4, 2),), compile_fn, _GROWN_THROUGH_AN_ALIAS)
        else:
            assert_matches_eager(f, lambda: (pair(4, 2),), compile_fn=compile_fn)


def _computed_over_resized(alias: str, size: int) -> Callable[[T], object]:
    """t0 computed from x0, resized to `size` elements through another tensor over its storage; t0 returned."""

    def f(x0: T) -> object:
        t0 = x0.mul(-1.0)
        t1 = t0.detach() if alias == "detach" else t0.view(-1)
        t1.resize_((size,))
        t1.fill_(0.5)
        return (t0,)

    return f


def _unit_dim_input(kind: str, transposed: bool) -> Make:
    """A (2, 1) input: transposed, strides (1, 2), which eager's mul keeps and the fake kernel does not; or as
    torch.empty lays it out, strides (1, 1)."""

    def make() -> tuple[object, ...]:
        b = torch.randn((1, 2) if transposed else (2, 1))
        x = PairTensor.from_tensor(b) if kind == "pair" else b
        return (x.t() if transposed else x,)

    return make


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("alias", ["detach", "view"])
@pytest.mark.parametrize("size", [3, 1], ids=["grow", "shrink"])
def test_computed_tensor_over_a_storage_resized_under_it_matches_eager(
    kind: str, alias: str, size: int, compile_fn: CompileFn | None
) -> None:
    with torch.no_grad():
        assert_matches_eager(_computed_over_resized(alias, size), _unit_dim_input(kind, False), compile_fn=compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_computed_tensor_with_kernel_strides_shrunk_under_it_matches_eager(
    kind: str, compile_fn: CompileFn | None
) -> None:
    with torch.no_grad():
        assert_matches_eager(_computed_over_resized("detach", 1), _unit_dim_input(kind, True), compile_fn=compile_fn)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("alias", ["detach", "view"])
def test_computed_tensor_with_kernel_strides_grown_under_it_refused(
    kind: str, alias: str, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 123191 program 1650: eager's t0 keeps the strides (1, 2) its mul kernel chose from the transposed
    # input; the graph rebuilt it over the grown storage with the fake kernel's (1, 1)
    with torch.no_grad():
        assert_refused(
            _computed_over_resized(alias, 3), _unit_dim_input(kind, True), compile_fn, "with the tracer's strides"
        )


# ---------------------------------------------------------------------------------------------------------------------
# A write through a view with distinct elements (a select, narrow or element) of an expand() taken before a resize_()
# grew its tensor (fuzz seed 118000 program 7605: `t0 = x0.expand((2,)); x0.resize_((3,)); x0.fill_(2.0);
# t0.select(0, 0).mul_(3.0)`): the growth rebinds the expand to an as_strided() view of the grown storage, with its zero
# stride, and functionalization wrote the update back by an as_strided_scatter through that repeating layout, which
# raised in the compiled graph ("more than one element of the written-to tensor refers to a single memory location").
# Through other repeating layouts (unfold) the scatter ran in the kernel's order, and inductor's lost the write. Each
# location now gets its old value plus the change written through it (Note [In-Place Ops As Eager Runs Them]).
# PairTensor: eager's expand() of a grown pair raises (a meta storage set onto the view's); ours raises too.
# ---------------------------------------------------------------------------------------------------------------------


def _grown_under_expand(
    view: Callable[[T], T], size: tuple[int, ...], write: Callable[[T], object]
) -> Callable[[T], object]:
    def f(x0: T) -> object:
        t0 = view(x0)
        x0.resize_(size)
        x0.fill_(2.0)
        write(t0)
        return (t0 * 1, x0 + 1)

    return f


_REPEATS_WRITTEN = [
    ((1,), lambda x: x.expand((2,)), (3,), lambda t: t.select(0, 0).mul_(3.0), "expand_select"),
    ((1, 3), lambda x: x.expand((2, 3)), (4, 3), lambda t: t.select(0, 1).mul_(3.0), "expand_rows_select"),
    ((1, 3), lambda x: x.expand((2, 3)), (3, 3), lambda t: t.narrow(0, 1, 1).add_(1.0), "expand_rows_narrow"),
    ((3, 1), lambda x: x.expand((3, 4)), (5, 1), lambda t: t[:, 2].mul_(3.0), "expand_cols_index"),
    ((1, 1), lambda x: x.expand((2, 3)), (2, 2), lambda t: t[1, 2].mul_(3.0), "expand_both_element"),
    ((3,), lambda x: x.unfold(0, 2, 1), (5,), lambda t: t.t()[0, 1].add_(100.0), "unfold_element"),
    ((8,), lambda x: x.as_strided((3, 2), (2, 2)), (9,), lambda t: t[1].add_(100.0), "as_strided_row"),
]


@pytest.mark.parametrize(
    ("shape", "view", "size", "write"), [pytest.param(*case[:4], id=case[4]) for case in _REPEATS_WRITTEN]
)
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_write_through_repeating_view_of_grown_tensor_matches_eager(
    shape: tuple[int, ...],
    view: Callable[[T], T],
    size: tuple[int, ...],
    write: Callable[[T], object],
    dynamic: bool,
    compile_fn: CompileFn | None,
) -> None:
    with torch.no_grad():
        assert_matches_eager(
            _grown_under_expand(view, size, write),
            lambda: (torch.randn(shape),),
            compile_fn=compile_fn,
            compile_kwargs={"dynamic": True} if dynamic else None,
        )


@pytest.mark.parametrize("case", [0, 1, 5], ids=[_REPEATS_WRITTEN[i][4] for i in (0, 1, 5)])
def test_write_through_repeating_view_of_grown_tensor_matches_eager_on_inductor(case: int) -> None:
    shape, view, size, write, _ = _REPEATS_WRITTEN[case]
    with torch.no_grad():
        assert_matches_eager(_grown_under_expand(view, size, write), lambda: (torch.randn(shape),), backend="inductor")


def test_write_through_expand_of_tensor_grown_through_one_set_onto_it_matches_eager(
    compile_fn: CompileFn | None,
) -> None:
    def f(x0: T) -> object:
        t0 = x0.expand((2,))
        y = torch.empty(0)
        set_to(y, x0)
        y.resize_((3,))  # grows x0's storage too
        y.fill_(2.0)
        t0.select(0, 0).mul_(3.0)
        return (y,)

    with torch.no_grad():
        assert_matches_eager(f, _plain(1), compile_fn=compile_fn)


@pytest.mark.parametrize("case", [0, 1], ids=[_REPEATS_WRITTEN[i][4] for i in (0, 1)])
def test_write_through_expand_of_grown_pair_raises_like_eager(case: int, compile_fn: CompileFn | None) -> None:
    shape, view, size, write, _ = _REPEATS_WRITTEN[case]
    with torch.no_grad():
        assert_raises_like_eager(_grown_under_expand(view, size, write), lambda: (pair(*shape),), compile_fn=compile_fn)


def test_write_through_the_expand_itself_of_grown_tensor_raises_like_eager(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.expand((2,))
        x0.resize_((3,))
        x0.fill_(2.0)
        t0.mul_(3.0)  # eager: more than one element of the written-to tensor refers to a single memory location
        return ()

    with torch.no_grad():
        err = assert_raises_like_eager(f, _plain(1), compile_fn=compile_fn)
    assert isinstance(err, RuntimeError)


@pytest.mark.parametrize("case", [0, 1, 5], ids=[_REPEATS_WRITTEN[i][4] for i in (0, 1, 5)])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_write_through_repeating_view_of_grown_input_in_training_matches_eager(
    case: int, kind: str, compile_fn: CompileFn | None
) -> None:
    # the written input keeps no grad; the output's gradient reads its values after the write-back
    shape, view, size, write, _ = _REPEATS_WRITTEN[case]
    grown = _grown_under_expand(view, size, write)

    def f(x0: T, w: T) -> object:
        with torch.no_grad():
            grown(x0)
        return (x0 * w,)

    def make() -> tuple[object, ...]:
        w = pair(*size, requires_grad=True) if kind == "pair" else torch.randn(size, requires_grad=True)
        return (torch.randn(shape), w)

    assert_matches_eager(f, make, compile_fn=compile_fn)


def _grad_written_through_repeats(
    view: Callable[[T], T], shape: tuple[int, ...], size: tuple[int, ...]
) -> Callable[[T], object]:
    def f(w: T) -> object:
        x = torch.zeros(shape)
        t0 = view(x)
        x.resize_(size)
        x.fill_(2.0)
        t0[(1,) * t0.dim()].mul_(w)  # autograd records it: the gradient reaches w through the write-back
        return (x * 2,)

    return f


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(5, id="unfold"),
        pytest.param(
            1,
            id="expand",
            marks=pytest.mark.xfail(
                strict=True,
                reason="the functional run's autograd regenerates the select of the expand by replaying expand((2, 3)) "
                "on the grown (4, 3) tensor, which raises; eager regenerates it by as_strided",
            ),
        ),
    ],
)
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_grad_written_through_repeating_view_of_grown_tensor_matches_eager(
    case: int, kind: str, compile_fn: CompileFn | None
) -> None:
    shape, view, size, _, _ = _REPEATS_WRITTEN[case]

    def make() -> tuple[object, ...]:
        return (pair(requires_grad=True) if kind == "pair" else torch.randn((), requires_grad=True),)

    assert_matches_eager(_grad_written_through_repeats(view, shape, size), make, compile_fn=compile_fn)


# resize_() growth of a tensor whose storage's old elements no single contiguous tensor holds up to the storage's end
# (fuzz seed 118100, programs 6573: a transpose_()d intermediate grown; 176, 8100: an empty slice at an input's end
# grown twice; 3413: an input grown past the end another input, a view of it, had grown the storage to): eager's
# storage, grown in place, keeps them all. They are read in storage order from a tensor that fills them densely in
# another dim order, or from consecutive parts of several tensors over the storage.
# ---------------------------------------------------------------------------------------------------------------------


def _fill_from(t: T, start: int) -> None:
    # (index_fill_, not a slice: PairTensor's eager slice of a grown wrapper raises)
    t.index_fill_(0, torch.arange(start, t.shape[0]), -1.0)


def transposed_intermediate_grown(x0: T) -> object:
    t0 = x0.mul(2.0)  # (4, 2)
    t0.transpose_(0, 1)  # no tensor over the storage is contiguous now
    t0.resize_((11,))
    _fill_from(t0, 8)  # (grown elements are undefined until written)
    return (t0 * 1,)


def permuted_intermediate_grown_then_filled_past_end(x0: T) -> object:
    t0 = x0.mul(2.0).view(2, 2, 2).permute(2, 0, 1)
    t1 = t0.transpose(0, 2)  # (a view: its root stays contiguous, but the grown tensor's own layout is not)
    t1.resize_((10,))
    _fill_from(t1, 8)
    return (t1 * 1,)


def intermediate_grown_over_parts(x0: T) -> object:
    t0 = x0.mul(-1.0).view(-1)  # elements 0..8
    t1 = t0[6:]
    t1.resize_((4,))  # the storage grows to 10: t0 holds 0..8, t1 6..10
    t1.fill_(3.0)
    t0.resize_((11,))  # keeps 0..10 from t0 and t1
    _fill_from(t0, 10)
    return (t0 * 1, t1 * 1)


@pytest.mark.parametrize(
    "program",
    [transposed_intermediate_grown, permuted_intermediate_grown_then_filled_past_end, intermediate_grown_over_parts],
)
@pytest.mark.parametrize("make", [_plain(4, 2), lambda: (pair(4, 2),)], ids=["plain", "pair"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_growth_keeps_storage_elements_held_densely_or_in_parts(
    program: Callable[[T], object], make: Make, grad: bool, compile_fn: CompileFn | None
) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(program, make, compile_fn=compile_fn)


def empty_end_slice_grown_twice(x0: T) -> object:
    x0.resize_((2,))
    x0.fill_(2.0)
    x0.resize_((5,))  # keeps the storage's first 3 elements (no tensor the program has) and x0's 2
    x0.fill_(3.0)
    return (x0 * 1,)


def _empty_slice_at_end() -> tuple[object, ...]:
    return (torch.randn(3)[3:],)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_empty_slice_at_an_inputs_end_grown_twice(grad: bool, compile_fn: CompileFn | None) -> None:
    with torch.set_grad_enabled(grad):
        _check(empty_end_slice_grown_twice, _empty_slice_at_end, compile_fn)


def grown_then_set_view_to_leaf(w: T, x: T) -> object:
    x.resize_((5,))
    x.fill_(2.0)
    v = x.reshape((5, 1))
    set_to(v, w)
    return ()


def grown_then_view_written_with_grad(w: T, x: T) -> object:
    x.resize_((5,))
    x.fill_(2.0)
    x.view(5, 1).mul_(w)
    return ()


def grown_then_view_written_without_grad(w: T, x: T) -> object:
    x.resize_((5,))
    x.fill_(2.0)
    x.view(5, 1).mul_(w.detach())
    return x * 1


_GRAD_WRITE_INTO_GROWN_VIEW = (
    r"args\[1\]: (set_|mul_): the program grows this input's storage with resize_\(\) and then, with grad enabled, "
    r"writes a value that requires grad into a view of it"
)


@pytest.mark.parametrize("f", [grown_then_set_view_to_leaf, grown_then_view_written_with_grad])
def test_input_grown_then_a_view_written_with_grad_refused(
    f: Callable[..., object], compile_fn: CompileFn | None
) -> None:
    # fuzz seed 119000, program 1752: autograd replayed the view (5, 1) on the input's base at its old size 4 and
    # the compile crashed ("shape '[5, 1]' is invalid for input of size 4"); eager gives the grown input a
    # CopySlices node (Note [Storage Swaps By Rebinding])
    with torch.enable_grad():
        assert_refused(f, lambda: (leaf(), torch.randn(4)), compile_fn, _GRAD_WRITE_INTO_GROWN_VIEW)


def test_input_grown_then_a_view_written_without_grad_matches_eager(compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        assert_matches_eager(
            grown_then_view_written_without_grad, lambda: (leaf(), torch.randn(4)), compile_fn=compile_fn
        )
    with torch.no_grad():
        assert_matches_eager(grown_then_view_written_with_grad, lambda: (leaf(), torch.randn(4)), compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# A view of an output grown by resize_() (fuzz seed 119200, program 8362): a growing resize_() reallocates the storage
# in place and leaves a view's `._base` as it was, so eager's `t1 = t0[0:1]; t1.resize_(4)` stays a view of `t0`, an
# output with no `._base` of its own (a detach()), over the grown storage. No replay of the chain remakes it; it was
# rebuilt by as_strided() of the input instead (`._base` the input's, requiring grad where the input did).
# ---------------------------------------------------------------------------------------------------------------------


def a_view_of_a_detach_grown(x0: T) -> object:
    t0 = x0.detach()
    t1 = t0[0:1]
    t1.resize_((4,))
    t1.fill_(3.0)
    return (t0, t1)


def a_view_of_a_detach_grown_returned_first(x0: T) -> object:
    t0 = x0.detach()
    t1 = t0[1:2]
    t1.resize_((2, 2))
    t1.fill_(3.0)
    return (t1, t0)


def a_view_of_a_grown_view_of_a_detach(x0: T) -> object:
    t0 = x0.detach()
    t1 = t0[0:1]
    t1.resize_((4,))
    t2 = t1[1:3]
    t2.fill_(3.0)
    return (t0, t2)


def a_no_grad_view_of_a_detach_grown(x0: T) -> object:
    t0 = x0.detach()
    t1 = t0[0:2]
    with torch.no_grad():
        t2 = t1[0:1]
    t2.resize_((4,))
    t2.fill_(3.0)
    return (t0, t2)


def an_inference_mode_view_of_a_detach_grown(x0: T) -> object:
    t0 = x0.detach()
    with torch.inference_mode():
        t1 = t0[2:3]
    t1.resize_((3,))
    t1.fill_(3.0)
    return (t0, t1)


def a_view_of_a_dirty_function_output_grown(x0: T, x1: T, x2: T) -> object:
    # the fuzz program: under no_grad DirtyScale returns an alias of x0 (no view), as a detach() is
    x1.requires_grad_()
    t0 = DirtyScale.apply(x0)  # type: ignore[no-untyped-call]  # untyped in torch
    t1 = t0[0:1:2]
    t1.resize_((4,))
    t1.fill_(3.0)
    return (t0, t1)


def _same_three() -> tuple[object, ...]:
    with torch.enable_grad():
        b0 = torch.randn((3,))
        return (b0, b0, b0.detach().as_strided((1,), (3,), 0))


GROWN_VIEWS_OF_OUTPUTS = [
    a_view_of_a_detach_grown,
    a_view_of_a_detach_grown_returned_first,
    a_view_of_a_grown_view_of_a_detach,
    a_no_grad_view_of_a_detach_grown,
    an_inference_mode_view_of_a_detach_grown,
]


@pytest.mark.parametrize("f", GROWN_VIEWS_OF_OUTPUTS)
@pytest.mark.parametrize("make", [_plain(3), lambda: (leaf(3),)], ids=["plain", "leaf"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_a_grown_view_of_an_output_stays_a_view_of_it(
    f: Callable[..., object], make: Make, grad: bool, dynamic: bool, compile_fn: CompileFn | None
) -> None:
    with torch.set_grad_enabled(grad):
        _check(f, make, compile_fn, dynamic=dynamic)


def test_fuzz_seed119200_program8362(compile_fn: CompileFn | None) -> None:
    # eager: out[1]._base is out[0]; ours was a view of args[2]._base (the storage the aliased inputs share)
    with torch.no_grad():
        assert_matches_eager(a_view_of_a_dirty_function_output_grown, _same_three, compile_fn=compile_fn)


def a_chunk_view_of_a_detach_grown(x0: T) -> object:
    t0 = x0.detach()
    t1 = t0.chunk(3)[0]
    t1.resize_((4,))
    t1.fill_(3.0)
    return (t0, t1)


@pytest.mark.parametrize("make", [_plain(3), lambda: (leaf(3),)], ids=["plain", "leaf"])
def test_a_grown_multi_output_view_of_an_output(make: Make, compile_fn: CompileFn | None) -> None:
    # with grad, eager's is a view of t0 with a multi-output view's creation meta, which no as_strided() gives:
    # refused (it was rebuilt over the input, a view of it); under no_grad it is a no_grad view, rebuilt so
    with torch.enable_grad():
        assert_refused(
            a_chunk_view_of_a_detach_grown, make, compile_fn, r"out\[1\] is a view, made with grad enabled by a multi"
        )
    with torch.no_grad():
        _check(a_chunk_view_of_a_detach_grown, make, compile_fn)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_a_grown_view_of_a_pair_output_refused(grad: bool, compile_fn: CompileFn | None) -> None:
    # a PairTensor input's storage grown through a detach() of it: refused by the rule for such growth, as before
    with torch.set_grad_enabled(grad):
        assert_refused(
            a_view_of_a_detach_grown,
            lambda: (pair(3),),
            compile_fn,
            r"grows this input's storage with resize_\(\) through",
        )


# ---------------------------------------------------------------------------------------------------------------------
# An as_strided() view of an input that resize_() grew (fuzz seed 121007 #1891: refused "not the first view of its
# chain"): the growth rebinds the input as an as_strided() view of a fresh grown tensor, which no tracker knew as the
# head of its chain; an unfold is traced as the as_strided() view it is, taken from that head too.
# ---------------------------------------------------------------------------------------------------------------------


def _strided_view_of_grown(program: str) -> Callable[[T], object]:
    def f(x0: T) -> object:
        x0.resize_((29,))
        x0.fill_(2.0)
        if program == "unfold":  # windows apart: the elements between them keep their value
            x0.unfold(0, 5, 6).fill_(-1.0)
        elif program == "as_strided":
            x0.as_strided((3, 5), (6, 1)).mul_(-1.0)
        elif program == "unfold_of_a_slice":  # and a remainder past the last window, at an offset
            x0[2:].unfold(0, 5, 6).mul_(-1.0)
        else:  # #1891 itself: windows that overlap, written as any overlapping view is (refused, grown or not)
            x0.unfold(0, 25, 2).fill_(-1.0)
        return (x0 * 1.0,)

    return f


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("program", ["unfold", "as_strided", "unfold_of_a_slice"])
def test_strided_view_of_a_grown_input_written(program: str, grad: bool, compile_fn: CompileFn | None) -> None:
    with torch.set_grad_enabled(grad):
        _check(_strided_view_of_grown(program), _plain(3, 3, 3), compile_fn)


def test_overlapping_unfold_of_a_grown_input_written_refused(compile_fn: CompileFn | None) -> None:
    with torch.no_grad():
        assert_refused(_strided_view_of_grown("overlapping"), _plain(3, 3, 3), compile_fn, "elements overlap in memory")
