"""set_() of inputs, intermediates, outputs and their views with grad enabled (and `x.set_(x)`): where the set_ node
sits in the program's history, which gradient accumulator a leaf set_() to itself feeds, the outputs' history and
`._base` beside other outputs that require grad, and the refusals that stay (Note [set_ Under Grad], Note [Inputs
Written In Training], Note [Storage Swaps By Rebinding]).
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import functools
import itertools
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
import torch
from torch.overrides import _get_current_function_mode_stack

import subclassaot
import subclassaot.pipeline.functional_run
import subclasses.pair
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.rules.storage_swaps import _DataMode
from subclassaot.pipeline.rules.swap_record import SwapRecord
from subclassaot.tools.parity import write_outputs
from subclasses.pair import PairTensor, nested_example
from tests.oracle import CompileFn, assert_matches_eager, assert_raises_like_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import (
    DirtyAddSaved,
    DirtyScale,
    SinFunction,
    TransposeSaved,
    ViewAsAndRowOfOwnTensor,
    assert_refused,
    backward_through,
    check_no_grad,
    check_with_grad,
    ci_share,
    leaf,
    nonleaf,
    pair,
    pair_nonleaf,
    refused_with_grad,
    twice,
)
from tests.pipeline.program_helpers import check_with_grad as _check
from tests.pipeline.program_helpers import leaf as _leaf

# ---------------------------------------------------------------------------------------------------------------------
# set_() under grad of an intermediate that does not require grad onto a tensor that does, read afterwards.
# ---------------------------------------------------------------------------------------------------------------------


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    with torch.enable_grad():
        b0 = torch.randn((1,))
        b1 = torch.randn((2, 2))
        b1.requires_grad_()
        b1 = b1.clone()
    return (b0, b1)


def _set_onto_nograd_view_then_read(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.no_grad():
        t0 = x1.t()  # a no_grad view of a non-leaf that requires grad: t0.requires_grad is True in eager
    t1 = x0.add(-1.0)  # an intermediate that does not require grad
    set_to(t1, t0)  # grad on: eager records a NotImplemented node ("derivative for set_ is not implemented")
    return (t1 * 2,)


def test_backward_through_read_of_intermediate_set_under_grad_raises_as_eager() -> None:
    # fuzz seed 19000 #3167: the compiled backward computed gradients; the oracle compares backward errors
    with torch.enable_grad():
        assert_matches_eager(_set_onto_nograd_view_then_read, _inputs)


def _set_onto_nograd_view_then_read_beside_input(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        t0 = x1.t()
    t1 = x0.add(-1.0)
    set_to(t1, t0)
    return (t1 * 2, x1 * 3)  # eager's backward through x1 * 3 alone completes; through both it raises


@pytest.mark.parametrize("through", [None, 0, 1])
def test_read_of_intermediate_set_under_grad_beside_other_output(through: int | None) -> None:
    # once refused: the probe's fake of x1 had a history node numbered above all, which ended its backward through
    # both outputs first (Note [Probing Eager's Backward]); now eager's order is probed, and the backward through
    # x1 * 3 alone completes as eager's (issue #27)
    after_call = None if through is None else backward_through(through)
    with torch.enable_grad():
        assert_matches_eager(_set_onto_nograd_view_then_read_beside_input, _inputs, after_call=after_call)


def _set_onto_nograd_view_returned(x0: torch.Tensor, x1: torch.Tensor) -> tuple[torch.Tensor]:
    with torch.no_grad():
        t0 = x1.t()
    t1 = x0.add(-1.0)
    set_to(t1, t0)
    return (t1,)  # the output's own set_ node (Note [set_ Under Grad])


def test_intermediate_set_under_grad_returned_itself_matches_eager() -> None:
    with torch.enable_grad():
        assert_matches_eager(_set_onto_nograd_view_returned, _inputs)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (seed 3000): set_() under grad of subclass tensors, outputs and inputs that gain grad.
#
# Newly supported programs get a parity test; the refusals that stay get a test naming the rule. With
# `--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
# ---------------------------------------------------------------------------------------------------------------------

T = torch.Tensor
GRAD_SET_RULE = r"set_\(\)s it with grad enabled to a tensor .*Note \[Inputs Written In Training\]"


# ---------------------------------------------------------------------------------------------------------------
# A subclass output set_() under grad (Note [set_ Under Grad])


def test_subclass_clone_set_to_itself_under_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #4064: refused before (a subclass output set_() under grad)
    def f(x0: T) -> object:
        t0 = x0.clone()
        set_to(t0, t0)
        return (t0,)

    _check(f, lambda: (pair_nonleaf(),), compile_fn)


def test_subclass_intermediate_set_to_input_under_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #27 (shrunk, with one input): eager's output shares the input's storage, its grad_fn raises
    def f(x0: T) -> object:
        t0 = x0.sin()
        set_to(t0, x0)
        return (t0,)

    _check(f, lambda: (pair_nonleaf(4, 3, 2),), compile_fn)


def test_subclass_view_of_intermediate_set_under_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #6751: eager's output stays a view of the intermediate, whose history the set_ rebases
    def f(x0: T) -> object:
        t0 = x0.sin()
        t1 = t0.as_strided((2,), (1,), 0)
        t0.fill_(-1.0)
        set_to(t1, x0)
        return (t1, t1, t1)

    _check(f, lambda: (pair(4, 2, requires_grad=True),), compile_fn)


def test_plain_view_of_intermediate_set_under_grad(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        t = (x * 2).t().unsqueeze(0)
        set_to(t, y[2:])
        return (t,)

    _check(f, lambda: (torch.randn(4, 2, requires_grad=True), torch.randn(8, requires_grad=True)), compile_fn)


def test_view_of_returned_intermediate_set_under_grad_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #7105 (wrong `_base` when supported): the intermediate is an output too
    def f(x0: T) -> object:
        t1 = x0.add(x0)
        t3 = t1.view((3,))
        t4 = t1.contiguous()
        set_to(t3, t3)
        return (t3, t4, t3)

    refused_with_grad(f, lambda: (torch.randn(1, 3, requires_grad=True),), compile_fn, "that is a view cannot have")


def test_subclass_view_set_under_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #8719: a view set_() under grad rebases its base in eager; refused before, supported since
    # fuzz seed 40000 (Note [set_ Under Grad])
    def f(x0: T) -> object:
        t0 = x0.transpose(0, 0)
        set_to(t0, t0)
        return (t0,)

    _check(f, lambda: (pair_nonleaf(3, 3),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# A subclass input that gains grad by set_() (Note [Inputs Written In Training])


def test_subclass_input_set_to_grad_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #763
    def f(x0: T, x1: T) -> object:
        set_to(x0, x1)
        return ()

    _check(f, lambda: (pair(1), pair_nonleaf(4, 1)), compile_fn)


def test_subclass_input_set_to_view_of_grad_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        set_to(x0, x1.t())
        set_to(x2, x1[1:])
        return (x0 * 2,)

    _check(f, lambda: (pair(1), pair_nonleaf(4, 2), pair(3)), compile_fn)


def test_subclass_input_set_to_grad_leaf_then_returned(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        set_to(x0, x1)
        return (x0.view(-1),)

    _check(f, lambda: (pair(1), pair(4, 2, requires_grad=True)), compile_fn)


def _set_then_view(x0: T, x1: T) -> object:
    set_to(x1, x0)  # fuzz seed 76100, program 8084 (shrunk)
    return (x0, x1.reshape((3, 2, 1)))


def _set_then_relaid(x0: T, x1: T) -> object:
    set_to(x1, x0)
    x1.t_()  # (an in-place view op after the set_: the epilogue's set_ takes an as_strided() of x0)
    return (x1, x0)


def _set_to_a_view_then_read(x0: T, x1: T) -> object:
    set_to(x1, x0[0])
    return (x1 * 2, x0)


def _set_to_a_detach(x0: T, x1: T) -> object:
    set_to(x1, x0.detach())  # eager's node has no edge to x0: its gradient does not wait behind the node
    return (x1, x0)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize(
    "f",
    [_set_then_view, _set_then_relaid, _set_to_a_view_then_read, _set_to_a_detach],
    ids=["view", "relaid", "to_a_view", "to_a_detach"],
)
def test_input_set_under_grad_to_a_returned_grad_leaf(
    compile_fn: CompileFn | None, f: Callable[[T, T], object], kind: str
) -> None:
    """Eager's set_ node has an edge to the history of the tensor set_() to, where that requires grad: x0's
    gradient from its own output waits behind the node, whose backward raises first, so x0 gets none. The epilogue's
    set_ of a subclass input (repeated at the wrapper level) took the input itself, so x0 got one; the epilogue's set_
    of a plain input took x0 even where the program's source was a detach(). (A subclass input read or relaid after
    its set_() takes the set_ before the call, still to itself: `relaid` with PairTensor inputs was a known gap until
    the thirty-first session, when it began to match eager: kept here as a regression test.)"""

    def make_inputs() -> tuple[object, ...]:
        if kind == "plain":
            return (leaf(2, 3), nonleaf(4, 3, 4))
        return (pair(2, 3, requires_grad=True), pair_nonleaf(4, 3, 4))

    _check(f, make_inputs, compile_fn)


def _set_to_a_leaf_passed_beside_its_detach(x0: T, x1: T, x2: T) -> tuple[T, T]:
    set_to(x1, x2)  # x2 shares its storage with x0, passed first
    t0 = x2.select(0, -1)
    with torch.inference_mode():
        set_to(x2, x2)  # (moves x2's counter: t0's node is made again at its next read, after the call)
    return (x1, t0)


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_input_set_under_grad_to_a_leaf_passed_beside_its_detach(compile_fn: CompileFn | None, kind: str) -> None:
    """fuzz seed 118500 #3802: `x1.set_(x2)` with grad, where x0 = x2.detach() is passed too, before x2. Eager's set_
    node has its edge to x2's history: a backward through x1 and t0 raises there before x2 gets its gradient from
    t0's node. The epilogue's set_ took the first input on that storage, x0, which has no history, so x2's gradient
    did not wait behind the node and arrived before it raised. A PairTensor x1 set_() to x2, which the program then
    changes, stays refused (Note [Inputs Written In Training])."""

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = leaf(1) if kind == "plain" else pair(1, requires_grad=True)
            b1 = torch.randn((1, 2)) if kind == "plain" else pair(1, 2)
            return (b0.detach(), b1.t(), b0)

    if kind == "pair":
        match = r"args\[1\] does not require grad and the program set_\(\)s it with grad enabled .* or changes it after"
        refused_with_grad(_set_to_a_leaf_passed_beside_its_detach, make_inputs, compile_fn, match)
        return
    with torch.enable_grad():
        assert_matches_eager(_set_to_a_leaf_passed_beside_its_detach, make_inputs, compile_fn=compile_fn)
        assert_matches_eager(
            _set_to_a_leaf_passed_beside_its_detach, make_inputs, compile_fn=compile_fn, after_call=write_outputs
        )


def _self_set_after_its_detach_written_with_grad(x0: T, x1: T) -> tuple[T]:
    x1.mul_(x0)  # x1 = x0.detach() gains history of its own
    set_to(x0, x0)  # with grad: x0's node raises, x1's history does not reach it
    return (x1,)


def test_self_set_after_its_detach_written_with_grad(compile_fn: CompileFn | None) -> None:
    """fuzz seed 123470 #148: eager's backward through x1 completes (x1's MulBackward never reaches x0's set_ node);
    the compiled one raised set_'s error: the trace's synthetic base over x0 and x1 runs its history through the set_,
    and the output x1 was taken to reach that base's written value. Refused by name (Note [set_ Under Grad]) until
    the probe took x1, apart in autograd and gaining its own history by the write, to reach only its own new value
    (LeafMutation.history_of_its_own, fuzz seed 121011 #5237): the graph is traced without x0's, as eager's."""

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(2)
        return (b0, b0.detach())

    with torch.enable_grad():
        assert_matches_eager(_self_set_after_its_detach_written_with_grad, make_inputs, compile_fn=compile_fn)
        assert_matches_eager(
            _self_set_after_its_detach_written_with_grad, make_inputs, compile_fn=compile_fn, after_call=write_outputs
        )


def _set_to_an_inference_mode_view(x0: T, x1: T, x2: T) -> tuple[T]:
    with torch.inference_mode():
        t0 = x0.select(0, 1)
    t1 = t0.t()
    set_to(x1, t1)
    return (t1[1:1:1],)


@pytest.mark.parametrize("source", ["view", "leaf"])
@pytest.mark.parametrize("target", ["view", "nonleaf"])
def test_input_set_under_grad_to_an_inference_mode_view_of_a_grad_input(
    compile_fn: CompileFn | None, source: str, target: str
) -> None:
    """A view taken inside inference_mode of an input that requires grad requires grad too, but has no edge to that
    input's history: eager's set_ node of x1 (which gains grad by the set_, or had it) reaches no input, so a
    backward through x0 and x1 (after a write of the output) gives their leaf x2 its gradient before the set_ node
    raises. The epilogue's set_ took x0 as its source, an edge that held x2's gradient back (fuzz seed 123100,
    program 288). Plain tensors only: a PairTensor view taken inside inference_mode raises in eager ("Cannot set
    version_counter for inference tensor")."""

    def make_inputs() -> tuple[object, ...]:
        b0, b1 = torch.randn((2, 2, 2), requires_grad=True), torch.randn((3, 3, 3))
        with torch.enable_grad():
            x0 = b0.expand((2, -1, -1)) if source == "view" else b0
            x1 = b1.diagonal(-1, 2, 0) if target == "view" else nonleaf(3, 3)
            return (x0, x1, b0)

    with torch.enable_grad():
        assert_matches_eager(_set_to_an_inference_mode_view, make_inputs, compile_fn=compile_fn)
        assert_matches_eager(
            _set_to_an_inference_mode_view, make_inputs, compile_fn=compile_fn, after_call=write_outputs
        )


def _views_of_one_leaf() -> tuple[T, ...]:
    with torch.enable_grad():
        b0 = torch.randn((), requires_grad=True)
        return (b0, b0.unsqueeze(0), b0.detach().unsqueeze(-1))


def _set_sources(kind: str) -> tuple[T, ...]:
    """x0 a leaf that requires grad, x1 a tensor that requires grad (a view of x0 for "view"), x2 one that does not."""
    if kind == "view":
        return _views_of_one_leaf()
    if kind == "plain":
        return (leaf(3), nonleaf(3), torch.randn(3))
    return (pair(3, requires_grad=True), pair_nonleaf(3), pair(3))


def _then_self(x1: T, x2: T) -> None:
    set_to(x2, x1)
    set_to(x2, x2)


def _self_then(x1: T, x2: T) -> None:
    set_to(x2, x2)
    set_to(x2, x1)


def _then_self_twice(x1: T, x2: T) -> None:
    _then_self(x1, x2)
    set_to(x2, x2)


_SET_ORDERS: dict[str, Callable[[T, T], None]] = {
    "then_self": _then_self,
    "self_then": _self_then,
    "then_self_twice": _then_self_twice,
}


@pytest.mark.parametrize("returned", [False, True], ids=["nothing", "x0_doubled"])
@pytest.mark.parametrize("order", list(_SET_ORDERS))
@pytest.mark.parametrize("kind", ["view", "plain", "pair"])
def test_input_set_to_itself_after_set_to_another_input(
    compile_fn: CompileFn | None, kind: str, order: str, returned: bool
) -> None:
    """`x2.set_(x1); x2.set_(x2)` with grad on (fuzz seed 116900 #3494, kind "view"): eager's second set_ node has an
    edge to x2's history, the first set_ node, whose edge goes to x1's history: a backward through x1 and x2 (the
    inputs the call wrote) raises before x0's gradient arrives. The epilogue's set_ took no source for a set_() of x2
    to itself, so x0 got one (plain); a PairTensor input so set_() was refused (Note [set_ Under Grad])."""

    def f(x0: T, x1: T, x2: T) -> object:
        _SET_ORDERS[order](x1, x2)
        return (x0 * 2,) if returned else ()

    with torch.enable_grad():
        assert_matches_eager(f, lambda: _set_sources(kind), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: _set_sources(kind), compile_fn=compile_fn, after_call=write_outputs)


def test_subclass_input_written_between_set_and_set_to_itself_refused(compile_fn: CompileFn | None) -> None:
    """`x2.set_(x1); x2.mul_(x0); x2.set_(x2)`: eager's last set_ node reaches x0's history too (through the mul_'s),
    which one set_ of the epilogue, to x1, cannot: the set_() to itself keeps x1 as its source only where nothing
    wrote x2 between (Note [set_ Under Grad])."""

    def f(x0: T, x1: T, x2: T) -> object:
        set_to(x2, x1)
        x2.mul_(x0)
        set_to(x2, x2)
        return (x0 * 2,)

    refused_with_grad(f, lambda: _set_sources("pair"), compile_fn, GRAD_SET_RULE)


def _function_reads(kind: str) -> tuple[T, ...]:
    """x0 passed twice (as x2), a non-leaf that requires grad; x1 an expand of a leaf."""
    with torch.enable_grad():
        if kind == "plain":
            b0, b1 = nonleaf(3), torch.randn((), requires_grad=True)
            return (b0, b1.expand((1, 3)), b0)
        p0, p1 = pair_nonleaf(3), pair(3, requires_grad=True)
        return (p0, p1.view(1, 3), p0)


@pytest.mark.parametrize("set_first", [True, False], ids=["set_then_read", "read_then_set"])
@pytest.mark.parametrize("function", [TransposeSaved, SinFunction, None], ids=["transpose_saved", "sin", "no_function"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_function_reads_input_set_to_itself_beside_returned_view(
    compile_fn: CompileFn | None, kind: str, function: type[torch.autograd.Function] | None, set_first: bool
) -> None:
    """`x2.set_(x2)` then a custom autograd.Function on x2, returned beside x1, an expand of a leaf (fuzz seed 116900
    #4112): eager's Function node has an edge to the set_ node, which waits for it, so x1's node (newer) gives the
    leaf its gradient before the set_ node raises. The Function's forward runs with grad off, so no op noted the read
    after the set_(): the epilogue's set_ node was ready at once and raised first (Note [set_ Under Grad])."""

    def f(x0: T, x1: T, x2: T) -> object:
        if set_first:
            set_to(x2, x2)
        t0 = x2 * 3 if function is None else cast(T, function.apply(x2))  # type: ignore[no-untyped-call]  # (untyped)
        if not set_first:
            set_to(x2, x2)
        return (x1, x0, t0)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: _function_reads(kind), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: _function_reads(kind), compile_fn=compile_fn, after_call=write_outputs)


def test_subclass_input_data_assigned_then_set_under_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #1340: a `.data =` before the set_ does not stand between the input and the set_ node
    def f(x0: T, x1: T) -> object:
        x0.data = x1
        set_to(x0, x1[3:3:2])
        return ()

    _check(f, lambda: (pair(3), pair_nonleaf(3, 4, 4)), compile_fn)


def test_subclass_input_set_to_no_grad_view_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #3836: wrong gradients (args[1].grad None) when supported like a set_ to the input itself:
    # eager's set_ node leads to the no_grad view, not to the input's history
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            t0 = x1.expand(())
        set_to(x0, t0)
        return (x0, x1)

    refused_with_grad(
        f, lambda: (pair(), pair(requires_grad=True)), compile_fn, "not an input or a view of one taken with grad"
    )


def test_subclass_input_set_to_intermediate_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        set_to(x0, x1 * 3)
        return ()

    refused_with_grad(f, lambda: (pair(1), pair_nonleaf(4, 1)), compile_fn, GRAD_SET_RULE)


def test_subclass_input_written_after_grad_set_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        set_to(x0, x1)
        x0.mul_(2)
        return ()

    refused_with_grad(f, lambda: (pair(1), pair_nonleaf(4, 1)), compile_fn, "or changes it after")


def test_nested_subclass_set_under_grad_refused(compile_fn: CompileFn | None) -> None:
    # A nested subclass set_() loses its inner wrappers' shared storage (even in inference): not lifted here
    def f(x0: T, x1: T) -> object:
        t = x1.sin()
        set_to(t, x1)
        return (t,)

    def g(x0: T, x1: T) -> object:
        set_to(x0, x1)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return nested_example(), nested_example().detach().requires_grad_()

    refused_with_grad(f, make_inputs, compile_fn, "inner tensors are tensor subclasses too")
    refused_with_grad(g, make_inputs, compile_fn, "nested tensor subclass")


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (seed 7000): set_() under grad in training, outputs beside other outputs that require grad.
#
# Newly supported programs get a parity test; the refusals that stay get a test naming the rule. With
# `--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
# ---------------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# A set_() output beside other outputs that require grad (Note [set_ Under Grad])


def test_set_output_beside_returned_nonleaf_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #380: refused before; both backwards raise, no leaf gets a gradient
    def f(x0: T) -> object:
        t0 = x0.sum(0)
        set_to(t0, t0)
        return (x0, t0)

    _check(f, lambda: (nonleaf(2, 3, 3),), compile_fn)


def test_set_output_beside_intermediate_of_leaf(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #742
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        t1 = t0.add(3.0)
        set_to(t1, x0)
        return (t0, t1)

    _check(f, lambda: (_leaf(4),), compile_fn)


def test_subclass_set_output_read_after_the_set(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #1249: eager's set_ node waits for the add that reads t0 after the set_
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        t1 = x0.add(x0)
        set_to(t0, t1)
        t2 = t0.add(0.5)
        return (t2, t0)

    _check(f, lambda: (pair(requires_grad=True),), compile_fn)


def test_set_output_to_input_read_after_the_set(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #9601
    def f(x0: T) -> object:
        t0 = x0.add(-1.0)
        set_to(t0, x0)
        t1 = x0.add(t0)
        return (t0, t1)

    _check(f, lambda: (_leaf(2, 3, 3),), compile_fn)


def test_subclass_set_output_beside_view_of_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #1577 (one input passed twice)
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(x0)
        t1 = x0.unsqueeze(0)
        set_to(t0, x0)
        return (t1, t0)

    _check(f, twice(pair_nonleaf), compile_fn)


def test_subclass_clone_set_to_returned_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #8642
    def f(x0: T) -> object:
        t0 = x0.clone()
        set_to(t0, x0)
        return (x0, t0)

    _check(f, lambda: (pair_nonleaf(2, 3),), compile_fn)


def test_set_output_of_reshaped_clone(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #2259
    def f(x0: T) -> object:
        t0 = x0.reshape((1, 4, 2))
        t2 = x0.clone().reshape((2, 1, 4))
        set_to(t2, t2.contiguous())
        return (t0, t2)

    _check(f, lambda: (nonleaf(2, 4),), compile_fn)


def test_set_output_beside_returned_leaf_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #4015: eager's add on x0 (reached only through the set_ node) keeps x0's gradient back; a
    # compiled x0 reached by the loss alone would get one
    def f(x0: T) -> object:
        t1 = x0.add(x0).t()
        set_to(t1, t1)
        return (t1, x0)

    refused_with_grad(f, lambda: (_leaf(1, 4),), compile_fn, "an autograd leaf that requires grad")


def test_set_output_after_returned_unused_leaf_refused(compile_fn: CompileFn | None) -> None:
    # eager's set_ node raises before the loss reaches x0; the Function's deferred error would not
    def f(x0: T, x1: T) -> object:
        t0 = x1.clone()
        set_to(t0, t0)
        return (x0, t0)

    refused_with_grad(f, lambda: (_leaf(3), nonleaf(3)), compile_fn, "an autograd leaf that requires grad")


def test_set_output_beside_leaf_passed_twice(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #6854: one leaf passed twice is one input (Note [Synthetic Bases]), behind the
    # raising set_ node (Note [set_ Under Grad]): supported; a leaf the set_ node does not reach
    # (two distinct leaves) stays refused
    def f(x0: T, x1: T) -> object:
        t0 = x1.clone()
        set_to(t0, t0)
        return (t0, x0)

    _check(f, twice(lambda: _leaf(1, 3)), compile_fn)
    refused_with_grad(f, lambda: (_leaf(1, 3), _leaf(1, 3)), compile_fn, "an autograd leaf that requires grad")


def _set_output_then_flagged_input(x0: T, x1: T) -> object:
    # fuzz seed 117400 #6584: eager's set_ node and x0's accumulator both run first (numbered above all), the first
    # root first: x0 gets no gradient; the compiled output's node, numbered among the program's, runs after x0's
    x0.requires_grad_()
    t0, _ = x1.max(0, keepdim=True)
    set_to(t0, t0)
    return (t0, x0)


def _flagged_input_then_set_output(x0: T, x1: T) -> object:
    x0.requires_grad_()
    t0 = x1 * 2
    set_to(t0, t0)
    return (x0, t0)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize("f", [_set_output_then_flagged_input, _flagged_input_then_set_output], ids=["after", "before"])
def test_set_output_beside_leaf_made_to_require_grad_refused(
    f: Callable[..., object], kind: str, compile_fn: CompileFn | None
) -> None:
    """A leaf input the program makes require grad (requires_grad_()) and returns, beside an output set_() under grad
    whose node does not reach it, is refused as one passed requiring grad is: whether eager's backward accumulates its
    gradient before the set_ node raises depends on the roots' order. It was compiled, and got a gradient."""

    def make_inputs() -> tuple[object, ...]:
        if kind == "pair":
            return pair(2), pair(2, requires_grad=True)
        return torch.randn(2), _leaf(2)

    refused_with_grad(f, make_inputs, compile_fn, "an autograd leaf that requires grad")


# ---------------------------------------------------------------------------------------------------------------
# A view taken of an intermediate after the program set_() it under grad (Note [set_ Under Grad])


def test_view_after_set_of_intermediate(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #4697: refused before; eager's t1 is a view of t0 (returned by no one), its grad_fn through
    # the set_
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        set_to(t0, x0)
        t1 = t0.t()
        return (t1,)

    _check(f, lambda: (_leaf(2),), compile_fn)


def test_subclass_view_after_set_of_intermediate(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #1471
    def f(x0: T) -> object:
        t0 = x0.as_strided((), (), 2)
        t1 = x0.sin()
        set_to(t1, t0)
        return (t1.reshape(()),)

    _check(f, lambda: (pair(2, 2, 1, requires_grad=True),), compile_fn)


def test_view_chain_after_set_beside_another_output(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.add(x0)
        set_to(t0, x0)
        return (t0.t().unsqueeze(0), x0 * 2)

    _check(f, lambda: (_leaf(2, 3),), compile_fn)


def test_subclass_view_after_set_of_clone(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.clone()
        set_to(t0, t0)
        return (t0[1:],)

    _check(f, lambda: (pair_nonleaf(3, 2),), compile_fn)


def test_view_after_set_of_returned_intermediate_refused(compile_fn: CompileFn | None) -> None:
    # eager's view has the returned t0 as its `_base`
    def f(x0: T) -> object:
        t0 = x0.mul(2.0)
        set_to(t0, x0)
        return (t0.view(-1), t0)

    refused_with_grad(f, lambda: (_leaf(2, 3),), compile_fn, "before taking the view")


def test_view_after_set_of_view_of_input_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #2196: t0 is a view of the input, whose history eager rebases on the set_ (refused by the stale-view rule, which runs first)
    def f(x0: T) -> object:
        t0 = x0.view((3, 1))
        set_to(t0, t0.transpose(1, 0))
        return (t0.reshape((1, -1, 1)),)

    refused_with_grad(
        f, lambda: (pair_nonleaf(1, 1, 3),), compile_fn, "used with grad after the program changed the layout"
    )


# ---------------------------------------------------------------------------------------------------------------
# An output that an input was set_() or `.data =`-assigned to (Note [Outputs Over Another Storage])


def test_output_input_was_set_to_under_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #292: refused before; eager's t0 keeps MulBackward and shares x0's new storage
    def f(x0: T) -> object:
        t0 = x0.mul(-1.0)
        set_to(x0, t0)
        return (t0,)

    _check(f, lambda: (nonleaf(),), compile_fn)


def test_output_input_data_was_assigned(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #523, #5356
    def f(x0: T) -> object:
        t1 = x0.mul(x0.clone())
        x0.data = t1
        return (t1,)

    _check(f, lambda: (nonleaf(1, 2, 2),), compile_fn)


def test_output_leaf_input_was_set_to_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #831
    def f(x0: T) -> object:
        t0 = x0.add(3.0)
        with torch.no_grad():
            set_to(x0, t0)
        return (t0,)

    _check(f, lambda: (_leaf(1, 4, 1),), compile_fn)


def test_output_leaf_passed_twice_set_to_under_no_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #3276
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(-1.0)
        with torch.no_grad():
            set_to(x1, t0)
        return (t0,)

    _check(f, twice(lambda: _leaf(1, 1, 3)), compile_fn)


def test_output_without_grad_assigned_to_leaf_data(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #3507: rebuilt from x0 it would require grad
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(2.0)
        x0.data = t0
        return (t0,)

    _check(f, lambda: (_leaf(), torch.randn(())), compile_fn)


def test_output_input_was_set_to_then_written(compile_fn: CompileFn | None) -> None:
    # the write through x0 reaches t0 (one storage), whose history saved exp's result
    def f(x0: T) -> object:
        t0 = x0.exp()
        set_to(x0, t0)
        with torch.no_grad():
            x0.mul_(2)
        return (t0,)

    _check(f, lambda: (nonleaf(3),), compile_fn)


def test_view_input_was_set_to_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #282: t1 is a view of t0; eager's `_base` is t0
    def f(x0: T) -> object:
        t1 = x0.clone().transpose(0, 1)
        set_to(x0, t1)
        return (t1,)

    refused_with_grad(f, lambda: (nonleaf(1, 3, 1),), compile_fn, "set_\\(\\) to a new tensor that requires grad")


def test_subclass_output_input_was_set_to_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #7966
    def f(x0: T) -> object:
        t0 = x0.clone()
        set_to(x0, t0)
        return (t0,)

    refused_with_grad(f, lambda: (pair_nonleaf(4),), compile_fn, "set_\\(\\) to a new tensor that requires grad")


def test_output_input_was_set_to_beside_view_of_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #292 (shortened): t2, a view of x1 (x0 passed twice) taken after the set_, shares t0's storage
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(-1.0)
        with torch.no_grad():
            set_to(x0, t0)
        t2 = x1.t()
        t2.unsqueeze_(0)
        return (t2, t0)

    _check(f, twice(nonleaf), compile_fn)


def test_output_assigned_to_data_after_no_grad_view_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 7000 #7885: t1, a no_grad view of x0, makes eager's t2 require grad; the traced one would not
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            t1 = x0.unsqueeze(-3).as_strided((), (), 2)
        t2 = x1.add(t1)
        x0.data = t2
        return (t2,)

    # (the rule on outputs over an input's storage beside a no_grad view, seed 70000's, comes first since)
    refused_with_grad(
        f,
        lambda: (nonleaf(4, 3, 3), torch.randn(3, 4)),
        compile_fn,
        "set_\\(\\) to a new tensor that requires grad|shares the storage the program gave an input",
    )


def _no_grad_and_leaf() -> tuple[object, ...]:
    return (torch.randn(3), _leaf())


def test_output_input_was_set_to_then_resized_and_written(compile_fn: CompileFn | None) -> None:
    # fuzz seed 80000 #5960: t0, resized below x0's size after the set_(), then written with grad, keeps its own
    # history (AddBackward0) on x0's new storage with its own layout; ours was rebuilt from x0 without history
    def f(x0: T, x1: T) -> object:
        t0 = x0.add(0.5)
        set_to(x0, t0)
        t0.resize_((1, 2))
        t0.add_(x1)
        return (t0,)

    _check(f, _no_grad_and_leaf, compile_fn)
    with torch.enable_grad():
        assert_matches_eager(f, _no_grad_and_leaf, compile_fn=compile_fn, after_call=write_outputs)


def test_output_input_was_set_to_then_strided_and_written(compile_fn: CompileFn | None) -> None:
    # the same through as_strided_ to an offset inside x0's elements (and x0 returned too)
    def f(x0: T, x1: T) -> object:
        t0 = x0.add(0.5)
        set_to(x0, t0)
        t0.as_strided_((2,), (1,), 1)
        t0.mul_(x1)
        return (t0, x0)

    _check(f, _no_grad_and_leaf, compile_fn)


def test_output_input_was_set_to_then_resized_past_it_refused(compile_fn: CompileFn | None) -> None:
    # x0 made smaller after the set_(): t0 reaches elements x0's new storage does not hold at run time
    def f(x0: T, x1: T) -> object:
        t0 = x0.add(0.5)
        set_to(x0, t0)
        x0.resize_((2,))
        t0.add_(x1)
        return (t0, x0)

    refused_with_grad(f, _no_grad_and_leaf, compile_fn, "reaches elements of it that the input does not cover")


def test_view_with_history_of_tensor_input_was_set_to_refused(compile_fn: CompileFn | None) -> None:
    # (fuzz seed 80000 #5960's kin) t1, a view of t0 written with grad, has history (t0's CopySlices); rebuilt as a
    # view of x0, which has none, it had none
    def f(x0: T, x1: T) -> object:
        t0 = x0.add(0.5)
        set_to(x0, t0)
        t1 = t0[:2]
        t1.add_(x1)
        return (t1,)

    refused_with_grad(
        f, _no_grad_and_leaf, compile_fn, "args\\[0\\] was set_\\(\\) .*the compiled call can rebuild it only"
    )


@pytest.mark.parametrize("resize", [False, True])
def test_subclass_output_with_history_input_was_set_to_refused(compile_fn: CompileFn | None, resize: bool) -> None:
    # the PairTensor kin of fuzz seed 80000 #5960: rebuilt from x0's dense leaves, the output had no history
    def f(x0: T, x1: T) -> object:
        t0 = x0.add(0.5)
        set_to(x0, t0)
        if resize:
            t0.resize_((1, 2))
        t0.add_(x1)
        return (t0,)

    refused_with_grad(
        f,
        lambda: (pair(3), pair(requires_grad=True)),
        compile_fn,
        "out\\[0\\] is a tensor subclass with autograd history .*args\\[0\\].a was set_",
    )


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (seed 40000): set_() with grad enabled of a view of an input (Note [set_ Under
# Grad]).
#
# Newly supported programs get a parity test; the refusals that stay get a test naming the rule. With
# `--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
# ---------------------------------------------------------------------------------------------------------------------


_ORDER_RULE = "set_\\(\\) a view of this input with grad enabled"


# ---------------------------------------------------------------------------------------------------------------
# A returned view of an input, set_() under grad: supported


def test_plain_view_of_input_set_to_itself(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #26 (refused before)
    def f(x0: T) -> object:
        t0 = x0.diagonal(0, 1, 0)
        set_to(t0, t0)
        return (t0,)

    _check(f, lambda: (nonleaf(1, 2),), compile_fn)


def test_subclass_view_of_input_set_to_itself(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #1538 (refused before)
    def f(x0: T) -> object:
        t0 = x0.reshape((1, -1))
        set_to(t0, t0)
        return (t0,)

    _check(f, lambda: (pair_nonleaf(),), compile_fn)


def test_subclass_view_of_input_set_to_its_own_view(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #2713 (refused before)
    def f(x0: T) -> object:
        t0 = x0.reshape((1, -1))
        t1 = t0[:, 0:1:1]
        set_to(t0, t1)
        return (t0,)

    _check(f, lambda: (pair_nonleaf(),), compile_fn)


def test_subclass_view_of_input_set_to_the_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #2842 (refused before): t0 stays a view of x0, with x0's layout
    def f(x0: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        set_to(t0, x0)
        return (t0,)

    _check(f, lambda: (pair_nonleaf(2, 2),), compile_fn)


def test_plain_view_of_input_set_to_the_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.diagonal(1, 0, 1)
        set_to(t0, x0)
        return (t0,)

    _check(f, lambda: (nonleaf(2, 2),), compile_fn)


def test_plain_view_of_input_set_to_a_narrower_view(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.reshape((2, -1))
        set_to(t0, t0[:, 0:1])
        return (t0,)

    _check(f, lambda: (nonleaf(2, 3),), compile_fn)


def test_view_set_beside_the_input_and_another_view(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t1 = x0[1]
        t0 = x0[0]
        set_to(t0, t0)
        return (t0, x0, t1, x0.t())

    _check(f, lambda: (nonleaf(2, 3),), compile_fn)
    _check(f, lambda: (pair_nonleaf(2, 3),), compile_fn)


def test_subclass_view_set_to_another_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0[0].unsqueeze(0)
        set_to(t0, x1)
        return (t0,)

    _check(f, lambda: (pair_nonleaf(2, 3), pair(4)), compile_fn)


def test_view_set_then_input_written(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        x0.mul_(x1)
        t0 = x0[0]
        set_to(t0, t0)
        return (t0,)

    _check(f, lambda: (nonleaf(2, 3), torch.randn(2, 3, requires_grad=True)), compile_fn)


def _unsqueezed_then_transposed_set_to_itself(x0: T) -> object:
    x0.unsqueeze_(1)
    t0 = x0.transpose(0, 1)
    set_to(t0, t0)
    return ()


@pytest.mark.parametrize(
    "view",
    [
        lambda b0: b0.as_strided((3,), (0,), 1),
        lambda b0: b0[:1].expand(3),
        lambda b0: b0.view(2),
    ],
    ids=["zero_stride_as_strided", "expand", "view"],
)
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_view_of_a_relaid_view_input_set_under_grad(
    view: Callable[[T], T], grad: bool, kind: str, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 117400 program 4114: x0 = b0.as_strided((3,), (0,), 1) of a non-leaf; x0.unsqueeze_(1);
    # t0 = x0.transpose(0, 1); t0.set_(t0). The joint's forward example ran before the set_-under-grad checks, and
    # there autograd's rebase of t0's history replayed the transpose on the expanded input as it came, without its
    # unsqueeze_ (IndexError inside the pipeline); a non-overlapping view input reached the refusal. Now every view
    # input is refused by the rule, with grad; under no_grad it matches eager. Eager's PairTensor raises with grad (it
    # replays the view function too).
    def make() -> tuple[object, ...]:
        with torch.set_grad_enabled(grad):
            b0 = (pair_nonleaf(2) if grad else pair(2)) if kind == "pair" else (nonleaf(2) if grad else torch.randn(2))
            return (view(b0),)

    f = _unsqueezed_then_transposed_set_to_itself
    if not grad:
        check_no_grad(f, make, compile_fn)
    elif kind == "pair":
        with torch.enable_grad():
            assert_raises_like_eager(f, make, compile_fn=compile_fn)
    else:
        refused_with_grad(f, make, compile_fn, _ORDER_RULE)


def test_view_of_input_view_set_under_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 42000 #4220 (diverged when first supported: the graph computed the view, whose `._base` was not
    # eager's; then refused): now replayed from the input, then set_() (Replay.then_set; fuzz seed 14000 #2383)
    def f(x0: T) -> object:
        t0 = x0.reshape((1, 3, 1))
        t1 = t0.mul(2.0)
        set_to(t0, t1)
        return (t0,)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(3, 4, 1).diagonal(0, 0, 1),)

    _check(f, make_inputs, compile_fn)


def test_plain_view_of_input_set_onto_another_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #7491 (refused before): t0 stays a view of x0 (`._base`) on x1's storage
    def f(x0: T, x1: T) -> object:
        with torch.no_grad():
            x1.t_()
        t0 = x0.t()
        set_to(t0, x1)
        with torch.no_grad():
            x1.unsqueeze(2)
        return (t0,)

    _check(f, lambda: (nonleaf(), nonleaf(4, 1)), compile_fn)


def test_views_of_input_set_onto_other_inputs(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x0.t()
        t1 = x0[1]
        set_to(t0, x1)
        set_to(t1, x1[1:])
        return (t0, t1, x1, x0)

    _check(f, lambda: (nonleaf(2, 3), torch.randn(4)), compile_fn)
    _check(f, lambda: (nonleaf(2, 3), nonleaf(4)), compile_fn)
    _check(f, lambda: (pair_nonleaf(2, 3), pair(4)), compile_fn)

    def g(x0: T, x1: T) -> object:
        t0 = x0.t()
        set_to(t0, x1)
        return (t0, x1, x0)

    _check(g, lambda: (torch.randn(2, 3), nonleaf(4)), compile_fn)  # x0 gains grad


def test_view_of_input_set_onto_grad_leaf_refused(compile_fn: CompileFn | None) -> None:
    # diverged when first supported (x1.grad a tensor vs eager None): eager's set_ node holds back x1's gradient
    def f(x0: T, x1: T) -> object:
        t0 = x0.t()
        set_to(t0, x1)
        return (t0, x1)

    rule = "an autograd leaf that requires grad: eager's set_ node holds"
    refused_with_grad(f, lambda: (nonleaf(2, 3), torch.randn(4, requires_grad=True)), compile_fn, rule)
    refused_with_grad(f, lambda: (pair_nonleaf(2, 3), pair(4, requires_grad=True)), compile_fn, rule)


# ---------------------------------------------------------------------------------------------------------------
# Eager's backward gives a leaf its gradient before the set_'s node raises: refused


def test_view_set_beside_an_unrelated_output_refused(compile_fn: CompileFn | None) -> None:
    # w's gradient comes from a node made after the set_, which eager runs first
    def f(x0: T, w: T) -> object:
        t0 = x0[0]
        set_to(t0, t0)
        return (t0, w * 2)

    refused_with_grad(f, lambda: (nonleaf(2, 3), torch.randn(2, 3, requires_grad=True)), compile_fn, _ORDER_RULE)
    refused_with_grad(f, lambda: (pair_nonleaf(2, 3), pair(2, 3, requires_grad=True)), compile_fn, _ORDER_RULE)


def test_input_view_set_and_input_returned_beside_an_unrelated_output_refused(compile_fn: CompileFn | None) -> None:
    # diverged before (w.grad None vs eager a tensor): only the input is returned, not the view
    def f(x0: T, w: T) -> object:
        t0 = x0[0]
        set_to(t0, t0)
        return (w * 2, x0)

    refused_with_grad(f, lambda: (nonleaf(2, 3), torch.randn(2, 3, requires_grad=True)), compile_fn, _ORDER_RULE)


# ---------------------------------------------------------------------------------------------------------------
# A view of an input set_() under grad, beside nodes made after the call (a view input's history regenerated after
# a write): eager's CopySlices runs after them, a set_ node of the input's own would run before them


def _view_set_returned_input(x0: T, x1: T) -> object:
    t0 = x0.select(1, -2)
    set_to(t0, t0)
    return (x0, x1)


def _view_set_returned_view(x0: T, x1: T) -> object:
    t0 = x0[0]
    set_to(t0, t0)
    return (t0, x1)


def _view_set_then_read(x0: T, x1: T) -> object:
    t0 = x0[0]
    set_to(t0, t0)  # read with grad after, returned: the set_ is repeated before the call
    return (x0, x0 * 2, x1)


def _view_set_after_own_set(x0: T, x1: T) -> object:
    set_to(x0, x0)
    t0 = x0[0]
    set_to(t0, t0)  # the last set_(): x0's node is the view's CopySlices
    return (x0, x1)


def _view_set_after_a_leaf_view(x0: T, x1: T) -> object:
    t1 = x1.t()  # a node older than the set_'s: eager's backward raises before it runs
    t0 = x0[0]
    set_to(t0, t0)
    return (x0, t1)


def _own_set_after_view_set(x0: T, x1: T) -> object:
    t0 = x0[0]
    set_to(t0, t0)
    set_to(x0, x0)  # the last set_(): x0's node is a set_ node of its own
    return (x0, x1)


def _bump_view_input(out: object, args: tuple[object, ...]) -> None:
    with torch.no_grad():
        cast(torch.Tensor, args[1]).mul_(1)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize(
    "after_call", [None, write_outputs, _bump_view_input], ids=["no_write", "write_outputs", "bump_x1"]
)
@pytest.mark.parametrize(
    "f",
    [
        _view_set_returned_input,
        _view_set_returned_view,
        _view_set_then_read,
        _view_set_after_a_leaf_view,
        _own_set_after_view_set,
    ],
    ids=["input", "view", "read_after", "after_a_leaf_view", "own_set_last"],
)
def test_view_set_node_runs_after_nodes_made_after_the_call(
    compile_fn: CompileFn | None,
    f: Callable[[T, T], object],
    after_call: Callable[[object, tuple[object, ...]], None] | None,
    kind: str,
) -> None:
    """fuzz seed 113801 #67: eager's set_() of a view of x0 rebases x0 on a CopySlices numbered in the program's
    order; x1, a view of a leaf written under no_grad after the call, regenerates its history there, newer, which the
    engine runs first: b1 gets its gradient before the CopySlices raises. The epilogue's `x0.set_(x0)` made a set_
    node of x0's own, which the engine runs before any other ready node: b1 got none. A view of x0 is now set_() to
    itself once the outputs are built: a CopySlices newer than the call's nodes (`after_a_leaf_view`: the output
    view of x1 made before the set_, whose node eager runs after the raise), older than those made after it; not
    where the program's last set_() of x0 was its own (`own_set_last`: a set_ node, as eager's)."""
    with torch.enable_grad():
        assert_matches_eager(
            f, functools.partial(_input_and_leaf_view, kind), compile_fn=compile_fn, after_call=after_call
        )


@pytest.mark.parametrize(
    "after_call", [None, write_outputs, _bump_view_input], ids=["no_write", "write_outputs", "bump_x1"]
)
def test_view_set_after_own_set_beside_nodes_made_after_the_call(
    compile_fn: CompileFn | None, after_call: Callable[[object, tuple[object, ...]], None] | None
) -> None:
    """As above, where the program set_() x0 itself before its view's set_(): x0's node is the CopySlices. (With
    PairTensor inputs this program is refused by the rule on a wrapper's in-place view ops beside its views.)"""
    with torch.enable_grad():
        assert_matches_eager(
            _view_set_after_own_set,
            functools.partial(_input_and_leaf_view, "plain"),
            compile_fn=compile_fn,
            after_call=after_call,
        )


def _input_and_leaf_view(kind: str) -> tuple[object, ...]:
    if kind == "plain":
        return (nonleaf(3, 2, 3), leaf(2, 2, 2).select(2, -1))
    with torch.enable_grad():
        return (pair_nonleaf(3, 2, 3), pair(2, 2, 2, requires_grad=True).select(2, -1))


# ---------------------------------------------------------------------------------------------------------------
# set_() under grad of a view of a tensor that does not require grad, to one that does: eager rebases the base,
# which then requires grad (supported where no output is a view of that base, refused where one is)


def test_view_of_grad_free_intermediate_set_to_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #2672 (refused before): t0 gains grad by its view's set_
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = x0.add(x0)
        t0.copy_(t0)
        t1 = t0.transpose(2, 1)
        x0.add_(0.5)
        x0.add_(t0)
        set_to(t1, x0)
        return (t0, x0, t0)

    _check(f, lambda: (nonleaf(3, 2, 1),), compile_fn)


def test_view_of_grad_free_input_set_to_grad_leaf(compile_fn: CompileFn | None) -> None:
    # fuzz seed 40000 #8747 (refused before): x0 gains grad by its view's set_; x1 and x2 are one leaf
    def f(x0: T, x1: T, x2: T) -> object:
        t0 = x0.t()
        t1 = t0.view((1,))
        t0.data.unsqueeze_(-1)
        set_to(t0, x1)
        t1.data.copy_(t0)
        return (x2,)

    def make_inputs() -> tuple[object, ...]:
        b1 = torch.randn((), requires_grad=True)
        return (torch.randn(()), b1, b1)

    _check(f, make_inputs, compile_fn)


def test_view_of_grad_free_tensors_set_to_grad_input(compile_fn: CompileFn | None) -> None:
    def f_input(x0: T, x1: T) -> object:
        t0 = x0[0]
        set_to(t0, x1[0])
        return (x0, x0[1], x0 * 2)

    _check(f_input, lambda: (torch.randn(2, 3), nonleaf(2, 3)), compile_fn)

    def f_intermediate(x0: T) -> object:
        with torch.no_grad():
            t0 = x0 * 2
        t2 = t0[0]
        t1 = t0.t()
        set_to(t1, x0)
        return (t0, t0[1], t2)

    _check(f_intermediate, lambda: (nonleaf(2, 3),), compile_fn)


def test_returned_view_of_grad_free_intermediate_set_under_grad_refused(compile_fn: CompileFn | None) -> None:
    # the view would be rebuilt over a fresh base (Note [set_ Under Grad]), not eager's
    def f(x0: T) -> object:
        with torch.no_grad():
            t0 = x0 * 2
        t1 = t0.t()
        set_to(t1, x0)
        return (t1,)

    refused_with_grad(f, lambda: (nonleaf(2, 3),), compile_fn, "of a tensor that did not require grad")


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions (helper refsetgrad): training programs of fuzz seed 44000 that set_() with grad enabled, once
# refused, now compiled exactly, and the narrow refusals left.
# ---------------------------------------------------------------------------------------------------------------------


def test_clone_set_to_returned_subclass_leaf(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #8877: eager's set_ node stands between the loss and x0's AccumulateGrad, so x0 gets no
    # gradient although it is returned (Note [set_ Under Grad])
    def f(x0: T) -> object:
        t0 = x0.clone()
        set_to(t0, x0)
        return (t0, x0)

    check_with_grad(f, lambda: (pair(requires_grad=True),), compile_fn)


def test_clone_set_to_returned_plain_leaf_input_first(compile_fn: CompileFn | None) -> None:
    # a variant of seed 44000 #8877: plain, 2-d, the leaf returned first
    def f(x0: T) -> object:
        t0 = x0.clone()
        set_to(t0, x0)
        return (x0, t0)

    check_with_grad(f, lambda: (leaf(2, 3),), compile_fn)


def test_view_after_set_of_a_sum_with_leaf_passed_twice(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #573: one leaf as both arguments; the output is a view of t0 taken after its set_
    def f(x0: T, x1: T) -> object:
        t0 = x1.sum(0)
        set_to(t0, x0)
        t1 = t0.select(0, 2)
        return (x1, t1)

    check_with_grad(f, twice(lambda: leaf(3, 2)), compile_fn)


def test_product_set_to_itself_beside_its_leaf(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #1187 (plain) and #6920 (PairTensor)
    def f(x0: T) -> object:
        t0 = x0.mul(x0)
        set_to(t0, t0)
        return (x0, t0)

    check_with_grad(f, lambda: (leaf(),), compile_fn)
    check_with_grad(f, lambda: (pair(requires_grad=True),), compile_fn)


def test_subclass_sum_set_to_a_returned_leaf(compile_fn: CompileFn | None) -> None:
    # fuzz seed 44000 #3409: t0 is computed from x1 (no grad), set_() to the leaf x0 with grad
    def f(x0: T, x1: T) -> object:
        t0 = x1.add(x1)
        set_to(t0, x0)
        return (x0, t0)

    check_with_grad(f, lambda: (pair(2, 3, 4, requires_grad=True), pair(2)), compile_fn)


def test_returned_leaf_not_behind_the_set_node_stays_refused(compile_fn: CompileFn | None) -> None:
    # x0 is reached by the loss only directly: whether eager accumulates its gradient before t0's set_ node raises
    # depends on the order the engine runs its nodes
    def f(x0: T, x1: T) -> object:
        t0 = x1.mul(2.0)
        set_to(t0, x1)
        return (t0, x0)

    refused_with_grad(f, lambda: (leaf(3), leaf(3)), compile_fn, r"Note \[set_ Under Grad\]")


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions of helper r2crash: set_() under grad, to a value that requires grad, of an input that shares
# storage with another input (Note [Inputs Written In Training]; fuzz seed 3001 #1275).
# ---------------------------------------------------------------------------------------------------------------------


_RULE = r"set_\(\) with grad enabled, to a tensor that requires grad, of a tensor in the storage that inputs args\[1\], args\[2\] share"


def _inputs_r2crash(kind: str, x0_nonleaf: bool = False) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            if kind == "plain":
                b0, b1 = torch.randn((1, 1), requires_grad=True), torch.randn((3,))
            else:
                b0 = PairTensor.from_tensor(torch.randn((1, 1)), requires_grad=True)
                b1 = PairTensor.from_tensor(torch.randn((3,)))
            if x0_nonleaf:
                b0 = b0.clone()
            return (b0, b1, b1.as_strided((1,), (2,), 0))

    return make_inputs


def _zero_other(x0: T, x1: T, x2: T) -> object:
    set_to(x2, x0)
    x1.zero_()
    return ()


def _zero_other_returned(x0: T, x1: T, x2: T) -> object:
    set_to(x2, x0)
    x1.zero_()
    return (x1, x2)


def _scale_other(x0: T, x1: T, x2: T) -> object:
    set_to(x2, x0)
    x1.mul_(2)
    return x1.sum()


@pytest.mark.parametrize("f", [_zero_other, _zero_other_returned, _scale_other])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_set_under_grad_into_shared_storage_refused(
    f: Callable[..., object], kind: str, compile_fn: CompileFn | None
) -> None:
    # seed 3001 #1275 (plain, _zero_other): the functional run crashed with "a leaf Variable that requires grad is
    # being used in an in-place operation"; the pair variant of _scale_other returned an output without eager's
    # requires_grad (DIVERGED)
    with torch.enable_grad():
        assert_refused(f, _inputs_r2crash(kind), compile_fn, _RULE)


def test_set_under_grad_to_nonleaf_into_shared_storage_refused(compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        assert_refused(_zero_other, _inputs_r2crash("plain", x0_nonleaf=True), compile_fn, _RULE)


@pytest.mark.parametrize("f", [_zero_other, _zero_other_returned, _scale_other])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_set_under_no_grad_into_shared_storage_matches_eager(
    f: Callable[..., object], kind: str, compile_fn: CompileFn | None
) -> None:
    with torch.no_grad():
        assert_matches_eager(f, _inputs_r2crash(kind), compile_fn=compile_fn)


def test_set_into_shared_storage_that_requires_grad_matches_eager(compile_fn: CompileFn | None) -> None:
    # the inputs' storage already has a history (a clone of a leaf): the rule does not apply
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b1 = torch.randn((3,), requires_grad=True).clone()
            return (torch.randn((1, 1), requires_grad=True), b1, b1.as_strided((1,), (2,), 0))

    with torch.enable_grad():
        assert_matches_eager(_scale_other, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# set_() under grad, to a value that requires grad, of an input that shares storage with another input but was moved
# off that storage first (a resize_() that grows it, or an earlier set_()). Autograd rebasing the input regenerates
# its grad_fn while holding its lock, and runs Python inside (the view op it replays, the reset of the input's
# `_backward_hooks`): the shared inputs' histories read there (`refresh_shared_histories`) waited on that lock
# forever (fuzz seed 122970 #1276 hung the fuzzer).
# ---------------------------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _exits_rather_than_hangs(seconds: int = 120) -> Iterator[None]:
    """A deadlock in torch's C++ holds the GIL, so no Python timeout can end it: faulthandler's own thread prints
    every thread's stack and exits the process (status 1, no summary: run the test with -s to see the stacks)."""
    faulthandler.dump_traceback_later(seconds, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def _inputs_moved_member(kind: str) -> Callable[[], tuple[object, ...]]:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            if kind == "plain":
                b0, b1 = torch.randn((2, 2), requires_grad=True), torch.randn((2, 1, 1))
            else:
                b0 = PairTensor.from_tensor(torch.randn((2, 2)), requires_grad=True)
                b1 = PairTensor.from_tensor(torch.randn((2, 1, 1)))
            return (b0.expand((-1, 2)).expand((2, 2)), b1, b1.reshape((2, 1, 1)))

    return make_inputs


def _grown_then_set(x0: T, x1: T, x2: T) -> object:
    x2.resize_((3,))
    set_to(x1, x0)
    return (x2,)


def _set_away_then_set(x0: T, x1: T, x2: T) -> object:
    set_to(x1, x2.clone())
    set_to(x1, x0)
    return (x2,)


def test_set_under_grad_of_grown_shared_input_refused(compile_fn: CompileFn | None) -> None:
    # fuzz seed 122970 #1276, shrunk: hung; x1's storage grown through x2 is then left (the rule on grown inputs).
    # (A PairTensor variant is not eager-legal: eager's set_() raises on the resized wrapper's meta storage.)
    with _exits_rather_than_hangs():
        refused_with_grad(
            _grown_then_set,
            _inputs_moved_member("plain"),
            compile_fn,
            r"args\[1\]: the program grows this input's storage with resize_\(\) and then set_\(\)s the input",
        )


def test_set_under_grad_of_shared_input_set_away_first(compile_fn: CompileFn | None) -> None:
    # the same hang with x1 moved off the shared storage by a set_(); eager's x2, a view of x1, then requires grad
    # with a history of the set_ (refused: the rule on members that gain grad, Note [Inputs Written In Training])
    with _exits_rather_than_hangs():
        refused_with_grad(
            _set_away_then_set,
            _inputs_moved_member("plain"),
            compile_fn,
            r"args\[2\] does not require grad, shares storage with another input, and the program writes a value",
        )


def test_set_under_grad_of_pair_input_set_away_first_matches_eager(compile_fn: CompileFn | None) -> None:
    # the PairTensor variant of both above (subclass inputs are no shared members whose histories are read)
    with _exits_rather_than_hangs():
        check_with_grad(_set_away_then_set, _inputs_moved_member("pair"), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions from dev seed 49000 about `x.set_(x)`: which gradient accumulator of a leaf set_() to itself under
# no_grad the compiled Function feeds (Note [Gradient Accumulators Of Leaves]), and where the set_ node
# of an input set_() under grad sits among the program's nodes (Note [set_ Under Grad]).
# ---------------------------------------------------------------------------------------------------------------------


_LEAVES: tuple[Callable[[], T], ...] = (leaf, lambda: pair(requires_grad=True))
_ALL: tuple[Callable[[], T], ...] = (*_LEAVES, nonleaf, pair_nonleaf)


def _self_set(x: T) -> None:
    with torch.no_grad():
        set_to(x, x)


# fuzz seed 49000 #9292: x0 set_() to itself under no_grad before any read; t1's backward raises (t0, saved by the
# mul, is written): eager's MulBackward0 feeds the accumulator the returned x0 feeds, so x0.grad stays None; ours
# renewed the accumulator after the call and gave the returned x0 a gradient
def test_leaf_self_set_before_reads_feeds_the_returned_leafs_accumulator(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        _self_set(x0)
        t0 = x0.add(-1.0)
        t1 = x0.mul(t0)
        t0.copy_(t0)
        return (t1, x0)

    for make in _ALL:
        check_with_grad(f, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]
    check_no_grad(f, lambda: (leaf(),), compile_fn)


# variants of fuzz seed 49000 #9292: no write (the backward completes), x0 not returned, returned as a view or first,
# an in-place write instead of the copy_, set_() twice, reads through a view taken after the set_
def _self_set_before_reads_unwritten_unreturned_viewed_or_twice() -> tuple[Callable[[T], object], ...]:
    def no_write(x0: T) -> object:
        _self_set(x0)
        t0 = x0.add(-1.0)
        return (x0.mul(t0), x0)

    def unreturned(x0: T) -> object:
        _self_set(x0)
        t0 = x0.add(-1.0)
        t1 = x0.mul(t0)
        t0.copy_(t0)
        return (t1,)

    def viewed(x0: T) -> object:
        _self_set(x0)
        t0 = x0.add(-1.0)
        t1 = x0.mul(t0)
        t0.mul_(2.0)
        return (x0.view(x0.shape), t1)

    def twice(x0: T) -> object:
        _self_set(x0)
        _self_set(x0)
        v = x0.view(x0.shape)
        t0 = v.add(-1.0)
        t1 = v.mul(t0)
        t0.copy_(t0)
        return (x0, t1)

    return (no_write, unreturned, viewed, twice)


# CI's share: each program beside one kind of input, each kind once (ci_share); the rest run in the slow sibling
_UNWRITTEN_UNRETURNED_VIEWED_OR_TWICE = ci_share(_self_set_before_reads_unwritten_unreturned_viewed_or_twice(), _ALL)


def test_leaf_self_set_before_reads_unwritten_unreturned_viewed_or_twice(compile_fn: CompileFn | None) -> None:
    for f, make in _UNWRITTEN_UNRETURNED_VIEWED_OR_TWICE[0]:
        check_with_grad(f, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]


@pytest.mark.slow
def test_leaf_self_set_before_reads_unwritten_unreturned_viewed_or_twice_outside_ci(
    compile_fn: CompileFn | None,
) -> None:
    for f, make in _UNWRITTEN_UNRETURNED_VIEWED_OR_TWICE[1]:
        check_with_grad(f, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]


# variants of fuzz seed 49000 #9292 read only before the set_(), or only between two of them: eager's nodes feed an
# earlier accumulator than the returned leaf's (fuzz seed 10000 #2934's rule)
def test_reads_before_self_set_feed_an_earlier_accumulator(compile_fn: CompileFn | None) -> None:
    def before(x0: T) -> object:
        t0 = x0.add(-1.0)
        t1 = x0.mul(t0)
        _self_set(x0)
        t0.copy_(t0)
        return (t1, x0)

    def between(x0: T) -> object:
        _self_set(x0)
        t0 = x0.add(-1.0)
        t1 = x0.mul(t0)
        _self_set(x0)
        t0.copy_(t0)
        return (t1, x0)

    for f in (before, between):
        for make in _ALL:
            check_with_grad(f, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]


# variant of fuzz seed 49000 #9292 read with grad before and after the set_(), with a raising backward: eager's
# nodes feed two accumulators, the returned leaf's behind the raising node; refused for leaves (the backward that
# completes, and non-leaves, match)
def test_reads_around_self_set_with_raising_backward_refused_for_leaves(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t = x0.mul(2.0)
        _self_set(x0)
        t0 = x0.add(-1.0)
        t1 = t.mul(t0)
        t0.copy_(t0)
        return (t1, x0)

    def completes(x0: T) -> object:
        t = x0.mul(2.0)
        _self_set(x0)
        t0 = x0.add(-1.0)
        return (t.mul(t0), x0)

    match = "Gradient Accumulators Of Leaves"
    for make in _LEAVES:
        refused_with_grad(f, lambda make=make: (make(),), compile_fn, match)  # type: ignore[misc]
    for make in _ALL:
        check_with_grad(completes, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]
    check_with_grad(f, lambda: (nonleaf(),), compile_fn)
    check_with_grad(f, lambda: (pair_nonleaf(),), compile_fn)


# fuzz seed 49000 #3836 (unshrunk): x2 (x1 passed again) written, set_() to itself with grad, read and written after;
# eager's set_ node waits behind the program's nodes, so x0 gets its gradient before the backward raises; ours made
# the set_ node after the compiled call, where it raised before x0's caller nodes ran (x0.grad None)
def test_set_under_grad_node_waits_behind_the_programs_nodes(compile_fn: CompileFn | None) -> None:
    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn((4,))
            b0.requires_grad_()
            b1: T = subclasses.pair.PairTensor.from_tensor(torch.randn((4, 1, 2)))
            b1.requires_grad_()
            b1 = b1.clone()
        return (b0, b1, b1)

    def f(x0: T, x1: T, x2: T) -> object:
        x2.add_(2.0)
        x0.add(x0)
        set_to(x2, x2)
        t1 = x1.mul(x1)
        with torch.no_grad():
            x2.diagonal(1, 2, 0)
        x2.mul_(t1)
        return (x0, x1, t1)

    check_with_grad(f, make_inputs, compile_fn)

    def plain() -> tuple[object, ...]:
        b1 = nonleaf(4, 1, 2)
        return (leaf(4), b1, b1)

    check_with_grad(f, plain, compile_fn)


# variants of fuzz seed 49000 #3836: the set_() input written after, returned first, not returned, read before too
def _set_under_grad_written_first_unreturned_or_viewed() -> tuple[Callable[..., object], ...]:
    def written(x0: T, x1: T) -> object:
        set_to(x1, x1)
        t0 = x1.mul(x1)
        x1.mul_(t0)
        return (x0, x1, t0)

    def first(x0: T, x1: T) -> object:
        set_to(x1, x1)
        t0 = x1.mul(x1)
        x1.mul_(t0)
        return (x1, t0, x0)

    def unreturned(x0: T, x1: T) -> object:
        x1.add_(1.0)
        set_to(x1, x1)
        return (x0, x1.mul(2.0))

    def viewed(x0: T, x1: T) -> object:
        set_to(x1, x1)
        return (x1.mul(x1), x0.view(-1), x1)

    return (written, first, unreturned, viewed)


# CI's share: each program once, each kind of inputs once (ci_share); the rest run in the slow sibling below
_WRITTEN_FIRST_UNRETURNED_OR_VIEWED = ci_share(
    _set_under_grad_written_first_unreturned_or_viewed(),
    [
        lambda: (leaf(4), pair_nonleaf(4, 1, 2)),
        lambda: (leaf(4), nonleaf(4, 1, 2)),
        lambda: (pair(4, requires_grad=True), nonleaf(4, 1, 2)),
    ],
)


def test_set_under_grad_input_written_returned_first_unreturned_or_viewed(compile_fn: CompileFn | None) -> None:
    for f, make_inputs in _WRITTEN_FIRST_UNRETURNED_OR_VIEWED[0]:
        check_with_grad(f, make_inputs, compile_fn)


@pytest.mark.slow
def test_set_under_grad_input_written_returned_first_unreturned_or_viewed_outside_ci(
    compile_fn: CompileFn | None,
) -> None:
    for f, make_inputs in _WRITTEN_FIRST_UNRETURNED_OR_VIEWED[1]:
        check_with_grad(f, make_inputs, compile_fn)


# variants of fuzz seed 49000 #9292 read only through a view taken before the set_(): the set_() advanced the version
# the view shares, so eager regenerates its grad_fn from the new accumulator (x0.grad None, as for the program)
def test_view_taken_before_self_set_regenerates_from_the_new_accumulator(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        v = x0.view(-1)
        _self_set(x0)
        t0 = v.add(-1.0)
        t1 = v.mul(t0)
        t0.copy_(t0)
        return (t1, x0)

    def read_before(x0: T) -> object:
        v = x0.view(-1)
        t0 = v.add(-1.0)
        _self_set(x0)
        t1 = t0.mul(t0)
        t0.copy_(t0)
        return (t1, x0)

    for make in _ALL:
        check_with_grad(f, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]
        check_with_grad(read_before, lambda make=make: (make(),), compile_fn)  # type: ignore[misc]
    check_no_grad(f, lambda: (leaf(),), compile_fn)


# fuzz seed 109801 #143: `x0.contiguous()` of a contiguous leaf returns x0 itself and makes no node, so the
# program's reads with grad all come after its `x0.set_(x1)` (x1 is x0, passed twice): eager's SinBackward0 feeds the
# accumulator the returned x1 feeds, behind the node whose backward raises (the outputs written after the call), so
# x0.grad stays None; ours counted the contiguous() as a read before the set_() and renewed the accumulator after the
# call. Variants: the other ops that return their argument itself (to() of its own dtype, float() of a float), the
# leaf passed once, written in the program instead of after the call
def test_op_returning_its_argument_reads_nothing(compile_fn: CompileFn | None) -> None:
    def repro(x0: T, x1: T) -> object:
        t0 = x0.contiguous()
        with torch.no_grad():
            set_to(t0, x1)
        return (x1.sin(), x1)

    for make_inputs in (twice(lambda: leaf(2, 1, 3)), twice(lambda: pair(2, 1, 3, requires_grad=True))):
        with torch.enable_grad():
            assert_matches_eager(repro, make_inputs, compile_fn=compile_fn, after_call=write_outputs)

    def same_object(op: Callable[[T], T]) -> Callable[[T], object]:
        def f(x0: T) -> object:
            _self_set(op(x0))
            t0 = x0.add(-1.0)
            t1 = x0.mul(t0)
            t0.copy_(t0)
            return (t1, x0)

        return f

    ops: tuple[Callable[[T], T], ...] = (
        lambda x: x.contiguous(),
        lambda x: x.to(x.dtype),
        lambda x: x.float(),
    )
    for op in ops:
        for make in _LEAVES:
            check_with_grad(same_object(op), lambda make=make: (make(),), compile_fn)  # type: ignore[misc]


# fuzz seed 117100 #8392: x0 set_() to itself under no_grad, then read only by a custom Function's apply (with grad;
# its forward's ops run with grad off); the outputs written after the call make the Function's backward raise. Eager's
# node feeds the accumulator the returned x0 feeds, behind the raising node, so x0.grad stays None; ours did not count
# the apply as a read and renewed the accumulator after the call, giving the returned x0 a gradient. Variants: the
# Function applied before the set_() only, and before it with a plain read after (two accumulators behind a raising
# backward: refused for leaves, as for plain reads around the set_())
def _function_apply_after_self_set(x0: T) -> object:
    _self_set(x0)
    t0 = _sin_fn(x0)
    return (x0, t0)


def _function_apply_before_self_set(x0: T) -> object:
    t0 = _sin_fn(x0)
    _self_set(x0)
    return (x0, t0)


# CI's share: each program beside two kinds of input, each kind once (ci_share); the rest run in the slow sibling
_FUNCTION_APPLY_PROGRAMS: tuple[Callable[[T], object], ...] = (
    _function_apply_after_self_set,
    _function_apply_before_self_set,
)
_FUNCTION_APPLY_READS = ci_share(_FUNCTION_APPLY_PROGRAMS, _ALL)


def _check_function_apply_reads(
    cases: list[tuple[Callable[[T], object], Callable[[], T]]], compile_fn: CompileFn | None
) -> None:
    for f, make in cases:
        with torch.enable_grad():
            assert_matches_eager(f, lambda make=make: (make(),), compile_fn=compile_fn, after_call=write_outputs)  # type: ignore[misc]
            assert_matches_eager(f, lambda make=make: (make(),), compile_fn=compile_fn)  # type: ignore[misc]


@pytest.mark.slow
def test_function_apply_reads_the_leaf_outside_ci(compile_fn: CompileFn | None) -> None:
    _check_function_apply_reads(_FUNCTION_APPLY_READS[1], compile_fn)


def test_function_apply_reads_the_leaf(compile_fn: CompileFn | None) -> None:
    _check_function_apply_reads(_FUNCTION_APPLY_READS[0], compile_fn)

    def around(x0: T) -> object:
        t = _sin_fn(x0)
        _self_set(x0)
        t0 = x0.add(-1.0)
        return (t.mul(t0), x0)

    for make in _LEAVES:
        refused_with_grad(around, lambda make=make: (make(),), compile_fn, "Gradient Accumulators Of Leaves")  # type: ignore[misc]
    check_with_grad(around, lambda: (nonleaf(),), compile_fn)
    check_with_grad(around, lambda: (pair_nonleaf(),), compile_fn)


def _expanded_leaf_and(make: Callable[[], T]) -> Callable[[], tuple[object, ...]]:
    """(a view of a leaf that requires grad, written by the oracle after the call; `make()`) made fresh."""

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn(()).requires_grad_()
            return (b0.expand(()), make())

    return make_inputs


# fuzz seed 117100 #9404: x1 set_() to itself with grad, then unsqueeze_()d with grad; x0 (a view of a leaf) returned
# and written after the call. Eager's UnsqueezeBackward1 sits above x1's set_ node, numbered among the program's, so a
# backward through both written inputs runs x0's regenerated node first (b0 gets its gradient) and then raises at the
# set_ node; ours replayed the layout before repeating the set_, whose node (numbered above all) ran first and raised.
# Variants: t_() instead, x1 returned too, written with grad after, the layout op before the set_() (order kept)
def test_layout_op_after_set_under_grad_keeps_eagers_node_order(compile_fn: CompileFn | None) -> None:
    def repro(x0: T, x1: T) -> object:
        set_to(x1, x1)
        x1.unsqueeze_(1)
        return (x0,)

    def transposed(x0: T, x1: T) -> object:
        set_to(x1, x1)
        x1.t_()
        return (x0,)

    def returned(x0: T, x1: T) -> object:
        set_to(x1, x1)
        x1.unsqueeze_(1)
        return (x0, x1)

    def written(x0: T, x1: T) -> object:
        set_to(x1, x1)
        x1.t_()
        x1.mul_(2.0)
        return (x0,)

    def before(x0: T, x1: T) -> object:
        x1.unsqueeze_(0)
        set_to(x1, x1)
        return (x0,)

    for f in (repro, transposed, returned, written, before):
        with torch.enable_grad():
            assert_matches_eager(f, _expanded_leaf_and(lambda: nonleaf(2, 2)), compile_fn=compile_fn)
            assert_matches_eager(
                f, _expanded_leaf_and(lambda: nonleaf(2, 2)), compile_fn=compile_fn, after_call=write_outputs
            )
    with torch.enable_grad():  # (a PairTensor: the order of its layout op and set_() alone)
        assert_matches_eager(before, _expanded_leaf_and(lambda: pair_nonleaf(2, 2)), compile_fn=compile_fn)


def _view_set_then_relaid(x0: T, x1: T) -> object:
    v = x1[0]
    set_to(v, v)
    x1.unsqueeze_(1)
    return (x0,)


def _written_then_relaid(x0: T, x1: T) -> object:
    set_to(x1, x1)
    x1.mul_(2.0)
    x1.unsqueeze_(1)
    return (x0,)


def _relaid_then_view_set(x0: T, x1: T) -> object:
    set_to(x1, x1)
    x1.t_()
    v = x1[0]
    set_to(v, v)
    return (x0,)


@pytest.mark.parametrize("make", [lambda: nonleaf(2, 2), lambda: pair_nonleaf(2, 2)], ids=["plain", "pair"])
@pytest.mark.parametrize(
    "f", [_view_set_then_relaid, _written_then_relaid, _relaid_then_view_set], ids=["view_set", "written", "relaid"]
)
def test_node_after_set_under_grad_made_in_eager_order(
    f: Callable[[T, T], object], make: Callable[[], T], compile_fn: CompileFn | None
) -> None:
    """Note [Epilogue Nodes In Eager's Order], over fuzz seed 117100 #9404 and 123030 #168: x1's history ends on a node
    numbered in program order (a view's set_() or a write, with an in-place view op after it or before it), which
    the epilogue makes once the outputs are built, so that a backward through x1 and x0 (written after the call: a
    newer node) gives x0's leaf its gradient before x1's set_ node raises, as eager's does. A layout op over such a
    node keeps that order; taken as a layout op right over the set_ node, a PairTensor x1 (whose layout the epilogue
    replays without autograd) got no node after the call, and x0's leaf no gradient."""
    with torch.enable_grad():
        assert_matches_eager(f, _expanded_leaf_and(make), compile_fn=compile_fn)
        assert_matches_eager(f, _expanded_leaf_and(make), compile_fn=compile_fn, after_call=write_outputs)


def _dirty_write_after_set(x0: T, x1: T) -> object:
    set_to(x1, x1)
    DirtyScale.apply(x1)  # type: ignore[no-untyped-call]  # untyped in torch
    return (x0,)


def _dirty_write_after_set_returned(x0: T, x1: T) -> object:
    set_to(x1, x1)
    t1 = DirtyScale.apply(x1)  # type: ignore[no-untyped-call]  # untyped in torch
    return (t1, x0)


def _dirty_view_write_after_set(x0: T, x1: T) -> object:
    set_to(x1, x1)
    DirtyScale.apply(x1[0])  # type: ignore[no-untyped-call]  # untyped in torch
    return (x0, x1)


@pytest.mark.parametrize("make", [lambda: nonleaf(2, 2), lambda: pair_nonleaf(2, 2)], ids=["plain", "pair"])
@pytest.mark.parametrize(
    "f",
    [_dirty_write_after_set, _dirty_write_after_set_returned, _dirty_view_write_after_set],
    ids=["kept", "returned", "view"],
)
def test_dirty_function_write_after_set_under_grad_made_in_eager_order(
    f: Callable[[T, T], object], make: Callable[[], T], compile_fn: CompileFn | None
) -> None:
    """Note [Epilogue Nodes In Eager's Order]: a custom Function that writes x1 (or a view of it) in place and marks
    it dirty after x1's set_() under grad rebases x1's history on its node (or its base's CopySlices), numbered in
    program order, as a write with grad does; its forward runs with grad off, so the write was not taken for one and
    x1's history ended on the epilogue's set_ node, which ran first: a backward through x1 and x0 (written after the
    call: a newer node) raised before x0's leaf got the gradient eager's gives it."""
    with torch.enable_grad():
        assert_matches_eager(f, _expanded_leaf_and(make), compile_fn=compile_fn)
        assert_matches_eager(f, _expanded_leaf_and(make), compile_fn=compile_fn, after_call=write_outputs)


def test_dirty_function_write_after_self_set_beside_a_leaf_view(compile_fn: CompileFn | None) -> None:
    """fuzz seed 119700 #8762: x0.set_(x0) and DirtyScale.apply(x0) with grad, x1 a view of a leaf returned as itself
    and written after the call; a backward through both runs x1's regenerated node (the leaf gets its gradient), then
    DirtyScaleBackward, then raises at x0's set_ node. Ours ended x0's history on the epilogue's set_ node, which ran
    first: the leaf got none."""

    def f(x0: T, x1: T) -> object:
        set_to(x0, x0)
        t0 = DirtyScale.apply(x0)  # type: ignore[no-untyped-call]  # untyped in torch
        return (t0, x1)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            return (nonleaf(), _leaf(4, 2, 4).reshape((1, -1, 1)))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


def _view_of(make: Callable[..., T]) -> Callable[..., T]:
    """An input maker giving a view (row 0) of a (2, *shape) tensor from `make`."""

    def view(*shape: int) -> T:
        return make(2, *shape)[0]

    return view


# variants of fuzz seed 49000 #3836: the set_() input read after only through a view taken before it (eager's set_
# node gets the view's regenerated node), set_() twice, and passed as a view of another tensor
def _read_through_an_earlier_view(x0: T, x1: T) -> object:
    v = x1.view(-1)
    set_to(x1, x1)
    return (x0, x1, v.mul(v))


def _set_twice(x0: T, x1: T) -> object:
    set_to(x1, x1)
    t0 = x1.mul(x1)
    set_to(x1, x1)
    return (x0, x1, x1.add(t0))


_EARLIER_VIEW_PROGRAMS = {"view_read": _read_through_an_earlier_view, "set_twice": _set_twice}
_EARLIER_VIEW_SET = {
    "plain": nonleaf,
    "pair": pair_nonleaf,
    "view": _view_of(nonleaf),
    "pair_view": _view_of(pair_nonleaf),
}
_EARLIER_VIEW_LEAF: dict[str, Callable[[], T]] = {
    "leaf": lambda: leaf(4),
    "pair_leaf": lambda: pair(4, requires_grad=True),
}
# CI's four of the 16: each kind of set_() input once, each program beside each kind of leaf; the rest are slow
_EARLIER_VIEW_IN_CI = [
    ("view_read", "plain", "leaf"),
    ("set_twice", "pair", "pair_leaf"),
    ("set_twice", "view", "leaf"),
    ("view_read", "pair_view", "pair_leaf"),
]


def _check_earlier_view(case: tuple[str, str, str], compile_fn: CompileFn | None) -> None:
    program, set_input, leaf_input = case
    make_set, make_leaf = _EARLIER_VIEW_SET[set_input], _EARLIER_VIEW_LEAF[leaf_input]
    check_with_grad(_EARLIER_VIEW_PROGRAMS[program], lambda: (make_leaf(), make_set(4)), compile_fn)


def test_set_under_grad_input_read_after_through_an_earlier_view(compile_fn: CompileFn | None) -> None:
    for case in _EARLIER_VIEW_IN_CI:
        _check_earlier_view(case, compile_fn)


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    [
        c
        for c in itertools.product(_EARLIER_VIEW_PROGRAMS, _EARLIER_VIEW_SET, _EARLIER_VIEW_LEAF)
        if c not in _EARLIER_VIEW_IN_CI
    ],
    ids="-".join,
)
def test_set_under_grad_input_read_after_through_an_earlier_view_outside_ci(
    case: tuple[str, str, str], compile_fn: CompileFn | None
) -> None:
    _check_earlier_view(case, compile_fn)


# variant of fuzz seed 49000 #3836: a plain input set_() under grad to another input's storage and read after, beside
# a returned leaf: its set_ node, which has an edge to that input's history, stays in the epilogue, where the order of
# a raising backward is out of reach: refused (Note [set_ Under Grad]); a PairTensor one matches
def test_set_under_grad_to_other_input_beside_returned_leaf(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        set_to(x1, x2)
        t0 = x1.mul(x1)
        return (x0, x1, t0)

    match = "set_ Under Grad"
    refused_with_grad(f, lambda: (leaf(4), nonleaf(4), nonleaf(4)), compile_fn, match)
    refused_with_grad(f, lambda: (pair(4, requires_grad=True), nonleaf(4), nonleaf(4)), compile_fn, match)
    check_with_grad(f, lambda: (leaf(4), pair_nonleaf(4), pair_nonleaf(4)), compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# id() reuse in the swap record (Note [Storage Swaps By Rebinding]): the record names tensors by id(), and a tensor the
# program drops must not hand what the record says about it to a later tensor that CPython puts at its address.
#
# The programs drop the results of multi-output ops that are no views (sort, max), which no list of the run kept
# alive: each test checks that the program passes the oracle, and (not with --identity-compile) that every id() the
# record holds names a tensor the record keeps alive, and that no dropped result of a run shared its id() with a later
# tensor of that run (in eager they do: the test checks that too, to show the programs do force the reuse).
# ---------------------------------------------------------------------------------------------------------------------

_N = 12  # dropped temporaries per program: enough that CPython gives a later tensor one of their addresses
_MANY = 40  # ... enough that one of those is an output that the analysis asks about (3 runs in 4 before the pins)


class _Ids:
    """The ids of the program's dropped and kept tensors per run: by the run's SwapRecord (its position in
    `records`), -1 for runs outside the swap modes (eager, and the pipeline's probes of eager's backward)."""

    def __init__(self, records: list[SwapRecord]) -> None:
        self.records = records
        self.runs: dict[int, tuple[list[int], list[int]]] = {}

    def _run(self) -> tuple[list[int], list[int]]:
        stack = _get_current_function_mode_stack()  # type: ignore[no-untyped-call]  # untyped in torch
        modes = [m for m in stack if isinstance(m, _DataMode)]
        at = next((k for k, r in enumerate(self.records) if modes and r is modes[-1].record), -1)
        return self.runs.setdefault(at, ([], []))

    def dropped(self, t: T) -> None:
        self._run()[0].append(id(t))

    def kept(self, t: T) -> None:
        self._run()[1].append(id(t))


@pytest.fixture
def records(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[SwapRecord]]:
    """Every SwapRecord the functional runs make, from the test's start."""
    made: list[SwapRecord] = []

    def make(**kwargs: Any) -> SwapRecord:
        made.append(SwapRecord(**kwargs))
        return made[-1]

    monkeypatch.setattr(subclassaot.pipeline.functional_run, "SwapRecord", make)
    yield made


def _unpinned(record: SwapRecord) -> list[tuple[str, int]]:
    """The id()s the record holds (set members, dict keys, the version-counter families) that name no tensor it
    keeps alive (the `._base` of one it keeps counts: a family root). Negative numbers are families of inputs."""
    alive = set(record.pinned)
    alive.update(id(t._base) for t in record.pinned.values() if isinstance(t, torch.Tensor) and t._base is not None)
    found: list[tuple[str, int]] = []
    for f in dataclasses.fields(record):
        value = getattr(record, f.name)
        if f.name == "pinned" or not isinstance(value, set | dict):
            continue
        numbers = [*value, *(value.values() if isinstance(value, dict) and f.name == "family" else ())]
        found.extend((f.name, k) for k in numbers if type(k) is int and k >= 0 and k not in alive)
    return found


def _check_idaudit(
    f: Callable[..., object],
    make_inputs: Callable[[], tuple[object, ...]],
    compile_fn: CompileFn | None,
    records: list[SwapRecord],
    ids: _Ids,
    *,
    grad: bool,
    eager_reuse: bool = True,
) -> None:
    """The oracle; then `f` eager, which gives a dropped tensor's address to a later one (not checked where
    `eager_reuse` is False: a PairTensor's dropped results may stay alive through their inner tensors' histories);
    then compiled, whose every run keeps them apart."""
    # The programs note ids into `_Ids`, a Python side effect for the test's eyes only, which the Python-state guards
    # would refuse (Note [State The Program Reads]): compiled without them.
    unguarded = compile_fn or functools.partial(subclassaot.compile, python_state_guards=False)
    (check_with_grad if grad else check_no_grad)(f, make_inputs, unguarded)
    records.clear()
    ids.runs.clear()
    with torch.set_grad_enabled(grad):
        f(*make_inputs())  # eager: the dropped tensors' addresses go to later ones
    dropped, kept = ids.runs[-1]
    reused = len(set(dropped)) < len(dropped) or set(dropped) & set(kept)
    assert reused or not eager_reuse, "the program forced no id() reuse in eager"
    if compile_fn is not None:
        return
    ids.runs.clear()
    with torch.set_grad_enabled(grad):
        subclassaot.compile(f, backend="eager", python_state_guards=False)(*make_inputs())
    ids.runs.pop(-1, None)
    assert records and ids.runs, "the program never ran under the swap modes"
    for record in records:
        assert not _unpinned(record)
    for dropped, kept in ids.runs.values():
        assert len(set(dropped)) == len(dropped) and not set(dropped) & set(kept), "a run reused a tensor's id()"


def test_output_of_sort_takes_no_set_under_grad_of_a_dropped_one(
    compile_fn: CompileFn | None, records: list[SwapRecord]
) -> None:
    # SwapRecord.grad_set_ids (x.set_(x) under grad): a sort result set_() to itself and dropped, then views of new
    # sort results returned. Before the pins, a new result at a dropped one's address was taken for set_() under
    # grad: its view's backward raised "derivative for set_ is not implemented" where eager's ran (3 runs in 4).
    ids = _Ids(records)

    def f(x: T) -> object:
        outs = []
        for _ in range(_MANY):
            v, i = x.sort(0)
            v.set_(v)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
            ids.dropped(v)
            ids.dropped(i)
            del v, i
            w, i = x.sort(0)
            ids.kept(w)
            outs.append(w[1:])
        return outs

    _check_idaudit(f, lambda: (nonleaf(4, 3),), compile_fn, records, ids, grad=True)


def test_outputs_of_sort_after_dropped_ones_set_under_grad(
    compile_fn: CompileFn | None, records: list[SwapRecord]
) -> None:
    # The same, the new results returned themselves, and a PairTensor input (grad_set_ids, wrapper_grad_sets).
    ids = _Ids(records)

    def f(x: T) -> object:
        outs = []
        for _ in range(_N):
            v, i = x.sort(0)
            v.set_(v)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
            ids.dropped(v)
            del i, v  # v last: the next tensor made takes its address
            w = x.sort(0)[0]
            ids.kept(w)
            outs.append(w)
        return outs

    _check_idaudit(f, lambda: (nonleaf(4, 3),), compile_fn, records, ids, grad=True)
    _check_idaudit(f, lambda: (pair_nonleaf(4, 3),), compile_fn, records, ids, grad=True, eager_reuse=False)


def test_views_of_max_after_dropped_ones_grown(compile_fn: CompileFn | None, records: list[SwapRecord]) -> None:
    # SwapRecord.grown_ids (resize_() beyond the storage): max results grown and dropped, then views of new ones.
    ids = _Ids(records)

    def f(x: T) -> object:
        outs = []
        for _ in range(_N):
            v, i = x.max(0)
            v.resize_(40)
            ids.dropped(v)
            del i, v  # v last: the next tensor made takes its address
            w = x.max(0)[0]
            ids.kept(w)
            outs.append(w[1:])
        return outs

    _check_idaudit(f, lambda: (torch.randn(4, 3),), compile_fn, records, ids, grad=False)
    _check_idaudit(f, lambda: (pair(4, 3),), compile_fn, records, ids, grad=False, eager_reuse=False)


def test_data_assigned_sort_results_after_dropped_reads(
    compile_fn: CompileFn | None, records: list[SwapRecord]
) -> None:
    # SwapRecord.grad_read / kept_accumulators / fresh_accumulators (Note [Gradient Accumulators Of Leaves]):
    # sort results read with grad and dropped, then new ones given other data by `.data =` and read again.
    ids = _Ids(records)

    def f(x: T, y: T) -> object:
        outs = []
        for _ in range(_N):
            v, i = x.sort(0)
            outs.append(v.mul(2).sum())
            ids.dropped(v)
            del i, v  # v last: the next tensor made takes its address
            w = x.sort(0)[0]
            ids.kept(w)
            w.data = y
            outs.append(w.mul(3))
        return outs

    _check_idaudit(f, lambda: (nonleaf(4, 3), torch.randn(4, 3)), compile_fn, records, ids, grad=True)


def test_written_sort_results_dropped_under_no_grad_and_with_grad(
    compile_fn: CompileFn | None, records: list[SwapRecord]
) -> None:
    # The version-counter families (written_families, visible_families, visible_seq) of written sort results,
    # dropped, then new results written through views and returned; called with grad and without.
    ids = _Ids(records)

    def f(x: T) -> object:
        outs = []
        for _ in range(_N):
            v, i = x.sort(0)
            v[0].mul_(2)
            ids.dropped(v)
            del i, v  # v last: the next tensor made takes its address
            w = x.sort(0)[0]
            ids.kept(w)
            t = w[1:]
            with torch.no_grad():
                w.add_(1)
            outs.append(t)
        return outs

    _check_idaudit(f, lambda: (nonleaf(4, 3),), compile_fn, records, ids, grad=True)
    _check_idaudit(f, lambda: (torch.randn(4, 3),), compile_fn, records, ids, grad=False)
    _check_idaudit(f, lambda: (pair_nonleaf(4, 3),), compile_fn, records, ids, grad=True, eager_reuse=False)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions from dev seed 49000: views taken after an in-place view op on an input (Note [Views That Raise
# After A Bump]), a set_() of a leaf's neighbour in a raising backward (Note [set_ Under
# Grad]), and views set_() onto another storage whose `._base` is an input's own base (Note [Outputs Over Another
# Storage]); each program is a shrunk fuzz program or a variant of one (seed and index in the test's comment).
# ---------------------------------------------------------------------------------------------------------------------


_METADATA_CHANGES: tuple[Callable[[T], object], ...] = (
    lambda x: x.t_(),
    lambda x: x.transpose_(0, 1),
    lambda x: x.unsqueeze_(0),
    lambda x: x.as_strided_((2, 3), (1, 2), 1),
)


# fuzz seed 49000 #2330: the as_strided view is taken before x0.t_(), its unbind() after: eager's multi-output view
# was made after the bump and reads fine; replayed before the epilogue, ours raised on grad_fn
def test_multi_output_view_after_inplace_view_op(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.as_strided((1, 2), (0, 0), 0)
        x0.t_()
        t1 = t0.unbind(1)[1]
        return (t1.unsqueeze(-2),)

    check_with_grad(f, lambda: (pair_nonleaf(4, 4),), compile_fn)
    check_with_grad(f, lambda: (nonleaf(4, 4),), compile_fn)
    check_no_grad(f, lambda: (pair(4, 4),), compile_fn)
    check_no_grad(f, lambda: (nonleaf(4, 4),), compile_fn)


# variant of fuzz seed 49000 #2330: other in-place view ops, and split()/chunk() after them, plain and PairTensor
def test_split_after_metadata_changes(compile_fn: CompileFn | None) -> None:
    for change in _METADATA_CHANGES:

        def f(x0: T, change: Callable[[T], object] = change) -> object:
            t0 = x0.as_strided((1, 2), (0, 0), 0)
            change(x0)
            return (torch.split(t0, 1, -1)[0], t0.chunk(2, 0)[-1].unsqueeze(0))

        check_with_grad(f, lambda: (nonleaf(3, 4),), compile_fn)
        check_with_grad(f, lambda: (pair_nonleaf(3, 4),), compile_fn)
        check_no_grad(f, lambda: (leaf(3, 4),), compile_fn)


# variant of fuzz seed 49000 #2330: a plain view() taken first, the split after x0.unsqueeze_(0)
def test_split_of_view_after_unsqueeze_(compile_fn: CompileFn | None) -> None:
    def f(x0: T) -> object:
        t0 = x0.view(-1)
        x0.unsqueeze_(0)
        return (torch.split(t0, 1, -1)[0],)

    check_with_grad(f, lambda: (nonleaf(3, 4),), compile_fn)
    check_with_grad(f, lambda: (pair_nonleaf(3, 4),), compile_fn)


# fuzz seed 49000 #3836: x2 (x1 passed again) set_() to itself with grad, then read: eager's set_ node waits behind
# the mul's, and the leaf x0 gets its gradient before the backward raises; ours, whose set_ node was made after the
# compiled call, raised first (was refused); the runtime now repeats that set_ before the call (Note [set_ Under
# Grad])
def test_set_beside_returned_leaf_then_read(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T, x2: T) -> object:
        set_to(x2, x2)
        t0 = x1.mul(x1)
        return (x0, x1, t0)

    def make_pair() -> tuple[object, ...]:
        b1 = pair_nonleaf(4, 1, 2)
        return (leaf(4), b1, b1)

    def make_plain() -> tuple[object, ...]:
        b1 = nonleaf(4, 1, 2)
        return (leaf(4), b1, b1)

    check_with_grad(f, make_pair, compile_fn)
    check_with_grad(f, make_plain, compile_fn)

    def g(x0: T, x1: T) -> object:
        set_to(x1, x1)
        return (x0, x1, x1.mul(x1))

    check_with_grad(g, lambda: (leaf(4), pair_nonleaf(4, 1, 2)), compile_fn)
    check_with_grad(g, lambda: (pair(4, requires_grad=True), nonleaf(4, 1, 2)), compile_fn)


# variants of fuzz seed 49000 #3836 that eager orders as ours: no read after the set_(), a read before it, or only a
# view of the set_() input returned
def test_set_beside_returned_leaf_unread_read_before_or_viewed(compile_fn: CompileFn | None) -> None:
    def unread(x0: T, x1: T, x2: T) -> object:
        set_to(x2, x2)
        return (x0, x1)

    def read_before(x0: T, x1: T, x2: T) -> object:
        t0 = x1.mul(x1)
        set_to(x2, x2)
        return (x0, x1, t0)

    def make_pair() -> tuple[object, ...]:
        b1 = pair_nonleaf(4, 1, 2)
        return (leaf(4), b1, b1)

    check_with_grad(unread, make_pair, compile_fn)
    check_with_grad(read_before, make_pair, compile_fn)

    def viewed(x0: T, x1: T) -> object:
        set_to(x1, x1)
        return (x0, x1.view(-1), x1.mul(x1))

    check_with_grad(viewed, lambda: (leaf(4), nonleaf(4, 1, 2)), compile_fn)
    check_with_grad(viewed, lambda: (leaf(4), pair_nonleaf(4, 1, 2)), compile_fn)


# fuzz seed 49000 #4037: t3, a view of x1's base (x1 a view), set_() onto an intermediate: eager's `t3._base` is that
# base, not the intermediate
def test_view_set_onto_intermediate_keeps_input_base(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t0 = x1.expand((3, 3, 1))
        t2 = x1.mul(3.0).transpose(1, 2)
        t3 = t0.select(0, -1)
        x1.transpose_(2, 1)
        set_to(t3, t2)
        return (t3,)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((1, 1, 2))
        return (b0.view((2, 1)), b0.diagonal(0, 2, 1).unsqueeze(-3))

    check_no_grad(f, make_inputs, compile_fn)
    check_with_grad(f, make_inputs, compile_fn)

    def g(x1: T) -> object:
        return f(x1, x1)

    check_no_grad(g, lambda: (torch.randn(1, 1, 2).diagonal(0, 2, 1).unsqueeze(-3),), compile_fn)
    check_no_grad(g, lambda: (torch.randn(1, 1, 1),), compile_fn)


# variant of fuzz seed 49000 #4037: set_() onto another input's storage, x1 a view of a base it shares with x0 or not
def test_view_set_onto_input_keeps_input_base(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t3 = x1.unsqueeze(0).select(0, 0)
        set_to(t3, x0.t())
        return (t3, t3.unsqueeze(0))

    def shared() -> tuple[object, ...]:
        b = torch.randn(2, 2, 3)
        return (b[0], b[1])

    check_no_grad(f, shared, compile_fn)
    check_no_grad(f, lambda: (torch.randn(3, 2), torch.randn(4, 2, 3)[1]), compile_fn)
    check_no_grad(f, lambda: (torch.randn(3, 2), torch.randn(2, 3)), compile_fn)


# variant of fuzz seed 49000 #4037 with grad: x1, a view of a non-leaf, viewed and set_() onto x0 with grad on
def test_grad_view_set_onto_input(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        t3 = x1.unsqueeze(0).select(0, 0)
        set_to(t3, x0)
        return (t3, x1)

    def shared() -> tuple[object, ...]:
        b = nonleaf(2, 2, 3)
        return (b[0], b[1])

    check_with_grad(f, shared, compile_fn)
    check_with_grad(f, lambda: (nonleaf(2, 3), nonleaf(4, 2, 3)[1]), compile_fn)


@pytest.mark.parametrize("grad", [False, True])
def test_set_to_another_dtype_raises_as_eager(grad: bool) -> None:
    # seed 24000 #768's set_() counterpart: unlike `.data =`, set_() to a tensor of another dtype raises in eager
    # ("Could not set tensor of type long int to a tensor of type float"), and in the compiled call
    def f(x0: T) -> object:
        set_to(x0, torch.arange(3))
        return (x0,)

    with torch.set_grad_enabled(grad):
        assert_raises_like_eager(f, lambda: (torch.randn(3),))


def test_input_set_under_grad_to_an_input_set_away_after() -> None:
    # fuzz seed 30000 #7591 (Note [set_ Under Grad]): x1 keeps x0's old storage in eager; the epilogue's repeat set_
    # took its alias from x0's new storage (x1 shared it: values and aliasing differed): refused. x0 moved first, or
    # x1's set_() under no_grad, match eager
    def moved_after(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t0 = x0.add(-1.0)
        set_to(x1, x0)
        set_to(x0, t0)
        return (t0 * 2,)

    def moved_before(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t0 = x0.add(-1.0)
        set_to(x0, t0)
        set_to(x1, x0)
        return (t0 * 2,)

    def under_no_grad(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t0 = x0.add(-1.0)
        with torch.no_grad():
            set_to(x1, x0)
        set_to(x0, t0)
        return (t0 * 2,)

    def make_inputs() -> tuple[torch.Tensor, ...]:
        return (torch.randn(1, requires_grad=True).clone(), torch.randn(1, 3, 4))

    with torch.enable_grad():
        with pytest.raises(UnsupportedError, match="which the program then set_\\(\\) to another storage"):
            subclassaot.compile(moved_after)(*make_inputs())
        assert_matches_eager(moved_before, make_inputs)
        assert_matches_eager(under_no_grad, make_inputs)


def test_view_read_after_its_base_is_set_to_it() -> None:
    # fuzz seed 34000 #7234 (CRASHED, Note [Stale View Functions]): t1, an unsqueeze-expand view of x0, read after
    # `set_to(x0, t1)`: functionalization replays unsqueeze and expand on x0's new 3-d layout, and expand raised from the
    # trace (a crash). Refused now; t1 returned unread matches eager
    def read(x0: torch.Tensor) -> object:
        t1 = x0.unsqueeze(-3).expand((3, -1, 2))
        set_to(x0, t1)
        return (t1 * 2,)

    def returned(x0: torch.Tensor) -> object:
        t1 = x0.unsqueeze(-3).expand((3, -1, 2))
        set_to(x0, t1)
        return (t1,)

    def make_inputs() -> tuple[torch.Tensor, ...]:
        return (torch.randn((2, 1), requires_grad=True).clone(),)

    with torch.enable_grad():
        with pytest.raises(UnsupportedError, match="a view is read after the program set_\\(\\) the tensor it was"):
            subclassaot.compile(read)(*make_inputs())
        assert_matches_eager(returned, make_inputs)
    with torch.no_grad():  # functionalization's replay runs without grad too, and gives eager's values here
        assert_matches_eager(read, make_inputs)


def test_set_of_a_view_of_a_set_view() -> None:
    # fuzz seed 35000 #5633 (CRASHED, Note [Stale View Functions]): x0, a view input, set_() to x1 with grad; t0 =
    # x0.reshape(...) taken after; `set_to(t0, x0)` with grad makes autograd rebuild t0's history by replaying x0's view
    # function (made for x0's old layout) and then the reshape, which raised from the trace. Refused now; without the
    # second set_() the program matches eager
    def set_again(x0: torch.Tensor, x1: torch.Tensor) -> object:
        set_to(x0, x1)
        t0 = x0.reshape((1, 1, 8))
        set_to(t0, x0)
        return (x1,)

    def read(x0: torch.Tensor, x1: torch.Tensor) -> object:
        set_to(x0, x1)
        t0 = x0.reshape((1, 1, 8))
        return (t0 * 2, x1)

    def make_inputs() -> tuple[torch.Tensor, ...]:
        b0 = torch.randn((1, 2, 4), requires_grad=True).clone()
        return (b0[:, :, 1:3], b0)

    with torch.enable_grad():
        with pytest.raises(UnsupportedError, match="for the set_\\(\\), which does not make eager's history"):
            subclassaot.compile(set_again)(*make_inputs())
        assert_matches_eager(read, make_inputs)


def test_view_of_an_output_relaid_after_and_set_onto_by_an_input(compile_fn: CompileFn | None) -> None:
    # fuzz seed 37200 #167 (DIVERGED, Note [Output Regeneration]): t1 = t0.view(...), then t0.transpose_(): eager's
    # t1._base is t0 (out[1]); x0.set_(t0) puts the input over t0's storage, and t1 was regenerated as a view of x0.
    # It is now replayed from out[1] as laid out when the view was taken
    def f(x0: torch.Tensor) -> object:
        t0 = x0.add(-1.0)
        set_to(x0, t0)
        t1 = t0.view((4, 2, 3))
        t0.transpose_(0, 2)
        return (t1, t0)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn((4, 3, 2)),), compile_fn=compile_fn)


def test_view_of_an_input_another_input_was_set_onto(compile_fn: CompileFn | None) -> None:
    # fuzz seed 37200 #988 (DIVERGED): after `x1.set_(x0)` both inputs end over x0's storage; t1, a view of a view of
    # x0 (set_() to x0 in between), was given x1 as its `._base` (the last input over the storage); eager's is x0
    def f(x0: torch.Tensor, x1: torch.Tensor) -> object:
        set_to(x1, x0)
        t0 = x0[0:1:2]
        set_to(t0, x0)
        return (t0[:, :, 0:1:2],)

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn((1, 3, 1)), torch.randn((4,))), compile_fn=compile_fn)


def test_view_input_set_to_a_clone_with_grad_refused() -> None:
    # fuzz seed 37200 #246 (DIVERGED: x1.grad a tensor vs eager None): x0, a select() view of a non-leaf, through an
    # expand() set_() to a clone of x1 with grad. Eager's CopySlices over the set_ node holds back the clone's history
    # and so x1's gradient, and raises first; the compiled Function handed x1 its gradient before it. Refused now
    def f(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t0 = x0.expand((1, 1))
        t1 = x1.clone()
        set_to(t0, t1)
        t2 = x1.mul(t1)
        x0.view((1, 1, 1))
        return (t2.select(1, 1), x0)

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((1, 4), requires_grad=True).clone()
        return (b0.select(1, -2), torch.randn((4, 3, 4), requires_grad=True))

    rule = "every leaf behind a tensor computed from inputs that a view is set_"
    refused_with_grad(f, make_inputs, None, rule)

    def not_held(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t2 = x1.mul(2)  # (made before the set_: eager's CopySlices runs first, as the compiled one)
        t0 = x0.expand((1, 1))
        set_to(t0, x1.detach().clone())  # no history behind the set_: nothing held back
        x0.view((1, 1, 1))
        return (t2.select(1, 1), x0)

    # ... but x0, read after its view's set_(), has the set_ repeated before the compiled call, whose node (holding
    # t2's) then runs before the raising one: x1 got its gradient where eager's raised first. Refused
    order = "before this autograd leaf gets its gradient from the nodes made before the set_()"
    refused_with_grad(not_held, make_inputs, None, order)

    def not_read_after(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t2 = x1.mul(2)
        t0 = x0.expand((1, 1))
        set_to(t0, x1.detach().clone())
        return (t2.select(1, 1), x0)

    with torch.enable_grad():
        assert_matches_eager(not_read_after, make_inputs)


def test_set_of_a_view_after_its_base_data_assigned() -> None:
    # fuzz seed 40000 #1383 (CRASHED, Note [Stale View Functions]): t0 = x0.transpose(1, 0) with grad, then
    # `x0.data = x1` (1-d), then `set_to(t0, x1)` with grad: autograd rebases t0's history by replaying transpose on
    # x0's new layout, which raised from the trace. Refused now; without the set_() the program matches eager
    def set_after(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t0 = x0.transpose(1, 0)
        x0.data = x1
        set_to(t0, x1)
        return (x1,)

    def without(x0: torch.Tensor, x1: torch.Tensor) -> object:
        t0 = x0.transpose(1, 0)
        x0.data = x1
        return (x1, t0 * 2)

    def make_inputs() -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.randn((3, 3), requires_grad=True).clone(), torch.randn((4,)))

    with torch.enable_grad():
        with pytest.raises(UnsupportedError, match="for the set_\\(\\), which does not make eager's history"):
            subclassaot.compile(set_after)(*make_inputs())
        assert_matches_eager(without, make_inputs)


# ---------------------------------------------------------------------------------------------------------------------
# An input that is a view whose storage set_() replaced before the call: autograd still names its `._base`, over a
# storage it no longer shares (a view of one tensor, set_() to another, as Dynamo hands a graph after a break at the
# set_(); fuzz 79500 #187 through the torch.compile backend). Its fake must be over the storage it has.


def _moved_view_and_target() -> tuple[torch.Tensor, torch.Tensor]:
    base = torch.randn(4, 1)
    view = base.select(0, 3)
    target = view * view
    set_to(view, target)
    return view, target


def _read_both(a: torch.Tensor, b: torch.Tensor) -> object:
    return a.expand(3) + 1, b.sin()


def _write_through_the_view(a: torch.Tensor, b: torch.Tensor) -> object:
    a.add_(1)
    return b * 2, a.view(1, 1)


@pytest.mark.parametrize("fn", [_read_both, _write_through_the_view])
def test_view_input_moved_to_another_storage_shares_that_storage_as_eager(fn: Callable[..., object]) -> None:
    assert_matches_eager(fn, _moved_view_and_target)
    with torch.no_grad():
        assert_matches_eager(fn, _moved_view_and_target)


def test_view_input_moved_to_another_storage_through_the_dynamo_entry() -> None:
    def program(x: torch.Tensor) -> object:
        t = x.mul(x)
        set_to(x, t)  # (Dynamo breaks the graph here and hands the next one x and t, sharing a storage)
        return x.expand(3) * 2, t.sin()

    def compile_fn(fn: Callable[..., object], **_: object) -> Callable[..., object]:
        return torch.compile(fn, backend="subclassaot", options={"backend": "eager"})

    with torch.no_grad():
        assert_matches_eager(program, lambda: (torch.randn(4, 1).select(0, 3),), compile_fn=compile_fn)


def test_view_input_requiring_grad_moved_to_another_storage_refused() -> None:
    def make() -> tuple[torch.Tensor, torch.Tensor]:
        base = torch.randn(4, 1, requires_grad=True)
        view = base.select(0, 3)
        with torch.no_grad():
            set_to(view, torch.randn(1))
        return view, torch.randn(1)

    with pytest.raises(UnsupportedError, match="whose storage set_\\(\\) replaced before the call"):
        subclassaot.compile(_read_both, backend="eager")(*make())


def test_set_under_grad_to_an_input_on_the_same_storage_4580(compile_fn: CompileFn | None) -> None:
    # fuzz seed 113000 #4580: x0 kept its storage, so no set_source was recorded and the epilogue repeated the set_()
    # onto a fresh alias leaf; eager's set_ node has an edge to x1's accumulator, which a backward through the written
    # inputs waits on (it raises 'derivative for set_ is not implemented' first): args[1].grad was a tensor, eager's None
    def f(x0: torch.Tensor, x1: torch.Tensor, x2: torch.Tensor) -> object:
        x0.set_(x1)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b0 = torch.randn((1,), requires_grad=True)
        return (b0.detach().select(0, -1), b0, b0.view((1,)))

    def row_of_base() -> tuple[object, ...]:
        b0 = torch.randn((2, 3), requires_grad=True)
        return (b0.detach()[1], b0, b0.view(6))

    def pairs() -> tuple[object, ...]:
        b0 = PairTensor.from_tensor(torch.randn(1), requires_grad=True)
        return (b0.detach().select(0, -1), b0, b0.view((1,)))

    with torch.enable_grad():
        for make in (make_inputs, row_of_base):
            assert_matches_eager(f, make, compile_fn=compile_fn)
            assert_matches_eager(f, make, compile_fn=compile_fn, after_call=write_outputs)
    # (a subclass input is set_() at the wrapper level: refused, Note [Inputs Written In Training])
    refused_with_grad(f, pairs, compile_fn, r"args\[0\] does not require grad and the program set_\(\)s it")


def _plain(*shape: int, requires_grad: bool = False) -> T:
    return torch.randn(shape, requires_grad=requires_grad)


@pytest.mark.parametrize("make", [_plain, pair], ids=["plain", "pair"])
def test_input_set_to_a_product_of_a_returned_leaf(make: Callable[..., T], compile_fn: CompileFn | None) -> None:
    # fuzz seed 114000 #1000: eager's set_ node of x1 has an edge to x0's accumulator, which so never runs (x1's
    # backward raises first); the compiled call's returned x0 got its gradient: refused then, now the epilogue's set_
    # node holds x0 back too (Analysis.input_set_blocks)
    def f(x0: T, x1: T) -> object:
        t0 = x0.mul(x0)
        set_to(x1, t0)
        return (x0, x1)

    def make_inputs() -> tuple[object, ...]:
        return (make(1, 1, 4, requires_grad=True), make())

    if (
        make is pair
    ):  # (a subclass input without grad is set_() at the wrapper level: Note [Inputs Written In Training])
        refused_with_grad(f, make_inputs, compile_fn, r"args\[1\] does not require grad and the program set_\(\)s it")
        return
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


@pytest.mark.parametrize("read", ["returned", "read_after"])
@pytest.mark.parametrize("target", ["nonleaf", "nonleaf_view", "pair_nonleaf"])
def test_input_set_to_a_product_of_a_returned_leaf_with_grad(
    target: str, read: str, compile_fn: CompileFn | None
) -> None:
    # the same with an input that requires grad, its set_ repeated in the epilogue, or before the call where the
    # program reads it after (Note [set_ Under Grad]); either holds the leaf back
    def f(x0: T, x1: T) -> object:
        set_to(x0, x1 * 2.0)
        return (x1, x0, x0 * 3.0) if read == "read_after" else (x1, x0)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            if target == "pair_nonleaf":
                return (pair_nonleaf(3), pair(3, requires_grad=True))
            return (nonleaf(2, 3)[0] if target == "nonleaf_view" else nonleaf(3), leaf(3))

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


# Inputs set_() under grad to a tensor computed from a view of a leaf, the view returned (issue #27, fuzz seed 117300
# #2495: `x0.set_(SinFn.apply(x1))`, x1 = b1.as_strided(...), `return (x1, x0)`). Eager's set_ node of x0 has an edge
# to x1's history, so b1's accumulator never runs: the backward raises with b1.grad None, whichever node runs first.
# The epilogue's set_ took an alias of x0 with no such edge, so a node of x1 newer than it (renewed by the caller's
# write of x1 after the call, or x0 a view, whose CopySlices is numbered among the program's) handed b1 its gradient
# before x0's node raised. Now the epilogue's set_ node reaches x1's history (Analysis.input_set_blocks).
_SET_TARGETS: dict[str, Callable[[], T]] = {
    "plain": lambda: torch.randn(3),
    "plain_view": lambda: torch.randn(2, 3)[0],
    "nonleaf": lambda: nonleaf(3),
    "nonleaf_view": lambda: nonleaf(2, 3)[0],
    "pair_nonleaf": lambda: pair_nonleaf(3),
    "pair_nonleaf_view": lambda: pair_nonleaf(2, 3)[0],
}


@pytest.mark.parametrize("source", ["function", "op"])
@pytest.mark.parametrize("target", sorted(_SET_TARGETS))
def test_input_set_to_a_product_of_a_returned_view_of_a_leaf(
    target: str, source: str, compile_fn: CompileFn | None
) -> None:
    def f(x0: T, x1: T) -> object:
        set_to(x0, _sin_fn(x1) if source == "function" else x1 * 2.0)
        return (x1, x0)

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b1 = pair(2, 3, requires_grad=True) if target.startswith("pair") else leaf(2, 3)
            return (_SET_TARGETS[target](), b1[1])

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# fuzz seed 113600 #222: an input that is a view, set_() under grad to (a view of) itself before the program made any
# other node. Eager's set_ node (the base's CopySlices) is numbered before the nodes made after it, which its backward
# runs first (x0 gets its gradient), then raises; the epilogue's set_, made after the compiled Function, ran first and
# raised before x0's gradient. The set_ is now repeated before the call (Note [set_ Under Grad]). A node made before the
# set_() (an op, a Function, a view of another input) keeps the epilogue's set_, eager's order there.
# ---------------------------------------------------------------------------------------------------------------------


def _sin_fn(x: T) -> T:
    return cast(T, SinFunction.apply(x))  # type: ignore[no-untyped-call]  # Function.apply is untyped in torch


def _set_to_own_view_then_function(x0: T, x1: T) -> object:
    t0 = x1.view((3, 1))
    set_to(x1, t0)
    return (x1, _sin_fn(x0))


def _set_to_itself_then_op(x0: T, x1: T) -> object:
    set_to(x1, x1)
    return (x1, x0.mul(x0), x0.cos())


def _set_then_view_returned(x0: T, x1: T) -> object:
    set_to(x1, x1)
    return (x1.view(-1), x0.view(-1), _sin_fn(x0))


def _op_before_set(x0: T, x1: T) -> object:
    t1 = x0.mul(2.0)
    set_to(x1, x1)
    return (x1, t1, x0.sin())


def _function_before_set(x0: T, x1: T) -> object:
    t1 = _sin_fn(x0)
    set_to(x1, x1)
    return (x1, t1)


def _view_inputs_of(kind: str) -> tuple[object, ...]:
    if kind == "plain":
        return (leaf(3), nonleaf(2, 3)[0])
    if kind == "strided":  # the fuzz program's: x1 an as_strided view with a zero stride
        with torch.enable_grad():
            b1 = torch.randn((3,), requires_grad=True).clone()
        return (leaf(3), b1.as_strided((3,), (0,), 2))
    return (pair(3, requires_grad=True), pair_nonleaf(2, 3)[0])


# fuzz seed 113600 #222
@pytest.mark.parametrize("kind", ["plain", "strided", "pair"])
@pytest.mark.parametrize(
    "f",
    [
        _set_to_own_view_then_function,
        _set_to_itself_then_op,
        _set_then_view_returned,
        _op_before_set,
        _function_before_set,
    ],
    ids=["own_view", "then_op", "view_returned", "op_before", "function_before"],
)
def test_view_input_set_under_grad_before_other_nodes(
    f: Callable[[T, T], object], kind: str, compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, lambda: _view_inputs_of(kind), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: _view_inputs_of(kind), compile_fn=compile_fn, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# The order of a view input's set_ node against the program's other nodes (after 113600 #222), each diverging before:
# - a view of the leaf x0 taken before the set_() of view input x1: eager's view node waits behind x1's set_ node
#   and x0 gets no gradient; ours rebuilt the view after the epilogue's set_, so it ran first. It is now rebuilt
#   before the call (Note [set_ Under Grad]);
# - a subclass view input set_() twice with a node between: its set_ reached the program's torch-function mode as an
#   aten overload, counted as a read after the first set_, and ran before the call;
# - two views of one base each set_() to itself: the second's family counted as written by the first set_, so it
#   stayed in the epilogue, ahead of the nodes eager runs before it.
# ---------------------------------------------------------------------------------------------------------------------


def _view_of_leaf_before_set(x0: T, x1: T, x2: T) -> object:
    t1 = x0.view(-1)
    set_to(x1, x1)
    return (x1, t1)


def _view_chain_across_set(x0: T, x1: T, x2: T) -> object:
    t1 = x0.view(-1)
    set_to(x1, x1)
    return (x1, t1.unsqueeze(0), x0 * 2)


def _set_twice_around_op(x0: T, x1: T, x2: T) -> object:
    set_to(x1, x1)
    t = x0.sin()
    set_to(x1, x1)
    return (x1, t)


def _both_views_set(x0: T, x1: T, x2: T) -> object:
    set_to(x1, x1)
    set_to(x2, x2)
    return (x1, x2, x0.sin())


def _both_views_set_reversed(x0: T, x1: T, x2: T) -> object:
    set_to(x2, x2)
    set_to(x1, x1)
    return (x0.cos(), x1, x2)


def _op_between_view_sets(x0: T, x1: T, x2: T) -> object:
    set_to(x1, x1)
    t = x0.sin()
    set_to(x2, x2)
    return (x1, x2, t)


def _two_rows(kind: str) -> tuple[object, ...]:
    if kind == "plain":
        b = nonleaf(2, 3)
        return (leaf(3), b[0], b[1])
    p = pair_nonleaf(2, 3)
    return (pair(3, requires_grad=True), p[0], p[1])


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize(
    "f",
    [
        _view_of_leaf_before_set,
        _view_chain_across_set,
        _set_twice_around_op,
        _both_views_set,
        _both_views_set_reversed,
        _op_between_view_sets,
    ],
    ids=["leaf_view_before", "view_chain_across", "set_twice", "both_set", "both_set_reversed", "op_between"],
)
def test_view_input_set_under_grad_order_against_other_nodes(
    f: Callable[[T, T, T], object], kind: str, compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, lambda: _two_rows(kind), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: _two_rows(kind), compile_fn=compile_fn, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# Issue #27 A (found by hand, not drawn by the fuzzer then): views of one base set_() to themselves under grad, with a
# write autograd does not record (under no_grad, through a detach(), a no_grad x.set_(x)) to their family between or
# before. Eager's set_ nodes still hold back no history but their own, so nodes made after them (x0.sin()) run first
# and x0 gets its gradient before the backward raises; the write counted as history of the family, the second set_
# stayed in the epilogue, ahead of the Function, and a PairTensor x0 got none. Such writes now keep the set_()s
# after them their own (Note [set_ Under Grad]). The plain forms are refused (a backward for some outputs only); a
# write autograd records keeps its node between them, refused as well.
# ---------------------------------------------------------------------------------------------------------------------


def _hidden_write_between_view_sets(x0: T, x1: T, x2: T) -> object:
    set_to(x1, x1)
    with torch.no_grad():
        x2.mul_(2)
    set_to(x2, x2)
    return (x1, x2, x0.sin())


def _hidden_write_before_view_sets(x0: T, x1: T, x2: T) -> object:
    with torch.no_grad():
        x2.mul_(2)
    set_to(x1, x1)
    set_to(x2, x2)
    return (x1, x2, x0.sin())


def _hidden_write_before_one_view_set(x0: T, x1: T, x2: T) -> object:
    with torch.no_grad():
        x2.mul_(2)
    set_to(x2, x2)
    return (x2, x0.sin())


def _hidden_write_between_own_sets(x0: T, x1: T, x2: T) -> object:
    set_to(x2, x2)
    with torch.no_grad():
        x2.mul_(2)
    set_to(x2, x2)
    return (x0.sin(), x2)


def _write_through_detach_between_view_sets(x0: T, x1: T, x2: T) -> object:
    set_to(x1, x1)
    with torch.no_grad():
        x2.detach().mul_(2)
    set_to(x2, x2)
    return (x1, x2, x0.sin())


def _nograd_self_set_between_view_sets(x0: T, x1: T, x2: T) -> object:
    set_to(x1, x1)
    with torch.no_grad():
        set_to(x2, x2)
        x1.mul_(x0.detach())
    set_to(x2, x2)
    return (x1, x2, x0.sin())


def _hidden_write_after_view_sets(x0: T, x1: T, x2: T) -> object:
    set_to(x1, x1)
    set_to(x2, x2)
    with torch.no_grad():
        x1.add_(1.0)
    return (x1, x2, x0.sin())


_HIDDEN_WRITES = [
    _hidden_write_between_view_sets,
    _hidden_write_before_view_sets,
    _hidden_write_before_one_view_set,
    _hidden_write_between_own_sets,
    _write_through_detach_between_view_sets,
    _nograd_self_set_between_view_sets,
    _hidden_write_after_view_sets,
]


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize(
    "f",
    _HIDDEN_WRITES,
    ids=["between", "before", "before_one", "between_own", "through_detach", "nograd_self_set", "after"],
)
def test_view_input_sets_around_writes_autograd_does_not_record(
    f: Callable[[T, T, T], object], kind: str, compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        if kind == "plain":
            assert_refused(f, lambda: _two_rows(kind), compile_fn, "cannot raise for some outputs and run for others")
            return
        assert_matches_eager(f, lambda: _two_rows(kind), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: _two_rows(kind), compile_fn=compile_fn, after_call=write_outputs)


def _recorded_write_between_view_sets(x0: T, x1: T, x2: T) -> object:
    set_to(x1, x1)
    x2.mul_(2)
    set_to(x2, x2)
    return (x1, x2, x0.sin())


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_view_input_sets_around_a_recorded_write_refused(kind: str, compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        assert_refused(
            _recorded_write_between_view_sets,
            lambda: _two_rows(kind),
            compile_fn,
            "cannot raise for some outputs and run for others",
        )


# ---------------------------------------------------------------------------------------------------------------------
# Issue #27 B (found by hand): a view of the leaf x0 taken before the set_() under grad of view input x1, every output
# written after the call: eager rebuilds the view's node at its next read, newest of all, and x0 gets its gradient
# from it and from the nodes made after the set_() (x0 * 2) before x1's set_ node raises. The view was rebuilt before
# the call, the set_ repeated in the epilogue, after the Function, where it ran first. A view of a leaf input now
# counts as rebuilt before the set_(), which then goes before the call too, after the view (Note [set_ Under Grad]).
# (The program itself: `view_chain_across` above.)
# ---------------------------------------------------------------------------------------------------------------------


def _leaf_view_then_both_sets(x0: T, x1: T, x2: T) -> object:
    t = x0.view(-1)
    set_to(x1, x1)
    set_to(x2, x2)
    return (x1, x2, t.unsqueeze(0), x0 * 2)


def _leaf_view_sliced_after(x0: T, x1: T, x2: T) -> object:
    t = x0.view(-1)
    set_to(x1, x1)
    u = x0 * 2
    return (t[1:], x1, u)


def _leaf_view_then_set_to_own_view(x0: T, x1: T, x2: T) -> object:
    t = x0.view(-1)
    set_to(x1, x1.view(-1))
    return (x1, t.unsqueeze(0), x0 * 2)


def _leaf_view_read_after_set(x0: T, x1: T, x2: T) -> object:  # its node read by another output: stays
    t = x0.view(-1)
    set_to(x1, x1)
    return (x1, t.unsqueeze(0), t * 2)


@pytest.mark.parametrize("kind", ["plain", "pair"])
@pytest.mark.parametrize(
    "f",
    [
        _leaf_view_then_both_sets,
        _leaf_view_sliced_after,
        _leaf_view_then_set_to_own_view,
        _leaf_view_read_after_set,
    ],
    ids=["both_sets", "sliced_after", "own_view", "read_after"],
)
def test_leaf_view_before_view_input_set_outputs_written(
    f: Callable[[T, T, T], object], kind: str, compile_fn: CompileFn | None
) -> None:
    with torch.enable_grad():
        assert_matches_eager(f, lambda: _two_rows(kind), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: _two_rows(kind), compile_fn=compile_fn, after_call=write_outputs)


def _written_after_set(kind: str) -> tuple[T, ...]:
    """x0 a leaf that requires grad, x1 a scalar that does not (fuzz seed 123030 #168) or a non-leaf that does, x2 a
    view of another leaf. (A PairTensor x1 without grad so set_() and written is refused: Note [Inputs Written In
    Training].)"""
    if kind == "plain":
        return (leaf(3), torch.randn(()), leaf(3, 2, 3).view(3, 2, 3))
    if kind == "plain_nonleaf":
        return (leaf(3), nonleaf(), leaf(3, 2, 3).view(3, 2, 3))
    return (pair(3, requires_grad=True), pair_nonleaf(), pair(3, 2, 3, requires_grad=True).view(3, 2, 3))


_WRITES_AFTER_SET: dict[str, Callable[[T], object]] = {
    "select_mul": lambda x: x.select(0, -2).mul_(3.0),
    "add": lambda x: x.add_(1.0),
    "mul": lambda x: x.mul_(3.0),
}


@pytest.mark.parametrize("returned", ["as_is", "view"])
@pytest.mark.parametrize("write", list(_WRITES_AFTER_SET))
@pytest.mark.parametrize("kind", ["plain", "plain_nonleaf", "pair_nonleaf"])
def test_input_written_after_set_under_grad_beside_returned_view_input(
    compile_fn: CompileFn | None, kind: str, write: str, returned: str
) -> None:
    """`x1.set_(x0); x1.select(0, -2).mul_(3.0); return (x2,)` (fuzz seed 123030 #168): eager's history of x1 is the
    write's node (CopySlices, MulBackward0, ...) over the set_ node, numbered as the program made it, so a backward
    through x1 and x2 (the inputs the call and write_outputs wrote) runs x2's regenerated node first and gives its leaf
    a gradient before the set_ node raises. The epilogue's set_ node of x1 (numbered above all) ran first and raised
    before it: a write with grad after the set_() now takes the late set_ on a view of x1, a CopySlices numbered after
    the call's nodes (Note [set_ Under Grad])."""

    def f(x0: T, x1: T, x2: T) -> object:
        set_to(x1, x0)
        _WRITES_AFTER_SET[write](x1)
        return (x2 if returned == "as_is" else x2.view(-1),)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: _written_after_set(kind), compile_fn=compile_fn)
        assert_matches_eager(f, lambda: _written_after_set(kind), compile_fn=compile_fn, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# A view the program takes of an input, set_() under grad onto another input: the input's CopySlices holds the set_
# node, whose edge to that other input's history holds back the leaf behind it.
# ---------------------------------------------------------------------------------------------------------------------

_VIEW_SET_TARGETS: dict[str, Callable[[], T]] = {
    "plain_without_grad": lambda: torch.randn(3, 4, 4),
    "plain_nonleaf": lambda: nonleaf(3, 4, 4),
    "pair_nonleaf": lambda: pair_nonleaf(3, 4, 4),
}


def _view_set_onto_another_input(x0: T, x1: T) -> object:
    t0 = x1.select(1, -3)
    set_to(t0, x0)
    return (x0,)


@pytest.mark.parametrize("target", list(_VIEW_SET_TARGETS))
def test_view_set_onto_a_view_of_a_leaf_holds_that_leaf_behind_the_set_node(
    target: str, compile_fn: CompileFn | None
) -> None:
    """Found by the fuzzer (seed 123121 #132, its last call writing the outputs): a backward through x0 and x1 as the
    call left them raised in both, but the compiled one gave b0 its gradient first. Eager's x1 is a CopySlices over
    the set_ node, whose edge to x0's history (a view of b0) holds b0's accumulator back; the epilogue's set_ of x1
    now holds x0 back too (the view's set_ node counts among the raising nodes: `view_set_nodes`)."""

    def make() -> tuple[object, ...]:
        b0 = pair(3, 1, 2, requires_grad=True) if target.startswith("pair") else _leaf(3, 1, 2)
        with torch.enable_grad():
            return (b0.unsqueeze(0), _VIEW_SET_TARGETS[target]())

    with torch.enable_grad():
        assert_matches_eager(_view_set_onto_another_input, make, compile_fn=compile_fn)
        assert_matches_eager(_view_set_onto_another_input, make, compile_fn=compile_fn, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# set_() under grad of a detach() of a base onto a view of that base (one version counter for both).
# ---------------------------------------------------------------------------------------------------------------------

_VIEWS_OF_THE_BASE: dict[str, Callable[[T], T]] = {
    "unbind": lambda b: b.unbind(0)[0],
    "split": lambda b: b.split_with_sizes([1, 1])[1],
    "chunk": lambda b: b.chunk(2, 1)[0],
    "select": lambda b: b[1],  # (a single-output view: read after the write, its grad_fn regenerates)
}


def _set_onto_a_view(x0: T, x1: T) -> tuple[()]:
    set_to(x0, x1)
    return ()


def _set_onto_a_view_then_read(x0: T, x1: T) -> tuple[T]:
    set_to(x0, x1)
    return (x0 * 2,)


@pytest.mark.parametrize("f", [_set_onto_a_view, _set_onto_a_view_then_read], ids=["nothing", "read"])
@pytest.mark.parametrize("view", list(_VIEWS_OF_THE_BASE))
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_detach_set_under_grad_onto_a_view_sharing_its_counter(
    compile_fn: CompileFn | None, kind: str, view: str, f: Callable[[T, T], object]
) -> None:
    """Found by the fuzzer (seed 123185 #260, shrunk): x0 = b0.detach() shares the counter of x1, a view of b0 that
    requires grad. Eager's set_() reads x1's history before it advances that counter; the epilogue replayed the new
    layout first (advancing it), so its set_ under grad read x1 after: a multi-output view raised autograd's
    view-after-write error (`_counter_at` in runtime/call.py). A PairTensor x0 is refused by name
    (its set_() under grad takes a wrapper-level history the epilogue cannot rebuild: Note [Inputs Written In
    Training])."""

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(2, 4, 2) if kind == "plain" else pair_nonleaf(2, 4, 2)
        with torch.enable_grad():
            return (b0.detach(), _VIEWS_OF_THE_BASE[view](b0))

    _matches_eager_or_pair_refused(f, make_inputs, compile_fn, kind)


def _matches_eager_or_pair_refused(
    f: Callable[[T, T], object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None, kind: str
) -> None:
    """A plain program checked against eager (also with its outputs written after the call); a PairTensor one refused
    by name (Note [Inputs Written In Training]: a set_() with grad of a wrapper that does not require grad)."""
    if kind == "pair":
        refused_with_grad(f, make_inputs, compile_fn, match=r"args\[0\] does not require grad .* set_\(\)s it")
        return
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


def _write_then_set_onto_a_view(x0: T, x1: T) -> tuple[()]:
    x0.mul_(2)  # advances the counter x1 shares: eager's set_() then reads x1 after a write and raises
    set_to(x0, x1)
    return ()


@pytest.mark.parametrize("f", [_set_onto_a_view, _set_onto_a_view_then_read], ids=["nothing", "read"])
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_detach_of_a_slice_set_under_grad_onto_an_unbind_of_its_transposed_base(
    compile_fn: CompileFn | None, kind: str, f: Callable[[T, T], object]
) -> None:
    """Found by the fuzzer (seed 117800 #6224, shrunk): as above, with x0 = b0[2:3:2].detach() and x1 =
    b0.t().unbind(0)[0]. Both are views of b0, so the epilogue's copy to their synthetic base advanced the shared
    counter before the set_ under grad read x1; where only the set_() bumps that counter, the repeat reads x1 at its
    count as the inputs came (`_swap_source_counts` in runtime/call.py)."""

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(4, 1) if kind == "plain" else pair_nonleaf(4, 1)
        with torch.enable_grad():
            return (b0[2:3:2].detach(), b0.t().unbind(0)[0])

    _matches_eager_or_pair_refused(f, make_inputs, compile_fn, kind)


@pytest.mark.parametrize("detached", ["whole", "slice"])
def test_write_then_detach_set_under_grad_onto_an_unbind_raises_as_eager(
    compile_fn: CompileFn | None, detached: str
) -> None:
    """The counterpart of the tests above: a write of the shared counter before the set_() is in the count the
    repeat reads x1 at, so it raises autograd's view-after-write error as eager does."""

    def make_inputs() -> tuple[object, ...]:
        b0 = nonleaf(4, 1)
        with torch.enable_grad():
            return ((b0 if detached == "whole" else b0[2:3:2]).detach(), b0.t().unbind(0)[0])

    with torch.enable_grad():
        assert_raises_like_eager(_write_then_set_onto_a_view, make_inputs, compile_fn=compile_fn)


def _set_onto_a_view_then_write(x0: T, x1: T) -> tuple[()]:
    set_to(x1, x0)  # eager's set_() reads x0's history here, before any write
    x1.mul_(3.0)  # advances the counter x1 keeps, which x0 (a view of x1 as it came) shares
    return ()


@pytest.mark.parametrize("multi", [True, False], ids=["unbind", "select"])
def test_input_set_under_grad_onto_a_view_of_itself_then_written_reads_the_view_before_the_write(
    compile_fn: CompileFn | None, multi: bool
) -> None:
    """Found by the fuzzer (seed 121010 #357, shrunk): x1 a non-leaf, x0 = x1.unbind(1)[1]; `x1.set_(x0)` under grad,
    then `x1.mul_(3.0)`. Eager's set_() read x0's history before the write; the epilogue's copy of the written values
    advanced the counter x0 shares before its repeat of the set_() read x0, and reading an unbind view's history
    after a write raises autograd's view-after-write error (a CRASH, where eager runs). The repeat now reads x0 at its
    count as the call found it, moved on by the program's advances of it before the set_()."""

    def make_inputs() -> tuple[object, ...]:
        with torch.enable_grad():
            b0 = torch.randn(2, 4, requires_grad=True).clone()
            return (b0.unbind(1)[1] if multi else b0.select(1, 1), b0)

    with torch.enable_grad():
        assert_matches_eager(_set_onto_a_view_then_write, make_inputs, compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------------
# A view of an input set_() under grad, then a view of the input taken under no_grad (fuzz seed 123284 #63)
# ---------------------------------------------------------------------------------------------------------------------


def _set_then_no_grad_view(x0: T) -> object:
    # fuzz seed 123284 #63 as generated (shrunk)
    t0 = x0.reshape((1, 1, 1))
    t1 = x0.reshape((1, 1, 1))
    t1.set_(t0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
    with torch.set_grad_enabled(False):
        t2 = t0.view((-1, 1, 1))
    return (t1, t2)


def _set_then_no_grad_view_first(x0: T) -> object:
    t1 = x0.view((1, 1))
    t1.set_(x0.reshape((1, 1)))  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
    with torch.no_grad():
        t2 = x0.unsqueeze(0)
    return (t2, t1, x0.sin())


@pytest.mark.parametrize("kind", ["plain", "nonleaf", "pair_nonleaf"])
@pytest.mark.parametrize("f", [_set_then_no_grad_view, _set_then_no_grad_view_first])
def test_view_set_under_grad_then_a_no_grad_view(
    compile_fn: CompileFn | None, f: Callable[[T], object], kind: str
) -> None:
    """Fuzz seed 123284 #63 (diverged: out[1]'s is_leaf and grad_fn raised autograd's no_grad-view-after-write error,
    eager's read fine): t1, a view of x0 that requires grad, set_() under grad, is replayed by the runtime's set_()
    after the epilogue, which had already given x0 eager's count, the set_()'s bump in it. The repeat advanced it
    again, so the no_grad view t2, made after the epilogue as eager's after the set_(), saw a write. The repeat's bump
    is given back once t1's history, stale by the set_() as eager's (an as_strided() node), is read."""
    make = {"plain": lambda: torch.randn(1), "nonleaf": lambda: nonleaf(1), "pair_nonleaf": lambda: pair_nonleaf(1)}
    with torch.enable_grad():
        assert_matches_eager(f, lambda: (make[kind](),), compile_fn=compile_fn, versions="exact")
        assert_matches_eager(f, lambda: (make[kind](),), compile_fn=compile_fn, after_call=write_outputs)


def _alias_set_onto_view_input_then_written(x0: T, x1: T) -> object:
    x1.set_(x0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
    x1.fill_(-1.0)
    return ()


def _alias_written_then_set_onto_view_input(x0: T, x1: T) -> object:
    x1.mul_(2)  # advances x0's counter too (x1 is a detach() of x0's base)
    x1.set_(x0)  # type: ignore[call-overload]  # eager's set_ reads x0's history after that write
    return ()


def _view_and_detached_base(multi: bool) -> tuple[T, T]:
    b0 = nonleaf(1, 3, 2)
    return (b0.unbind(2)[0] if multi else b0[..., 0]), b0.detach()


@pytest.mark.parametrize("multi", [True, False], ids=["unbind", "select"])
def test_alias_set_under_grad_onto_a_view_input_reads_its_history_at_the_set(multi: bool) -> None:
    """Fuzz seed 119300 #1605 (crashed): x1, a detach() of x0's base (one version counter), set_() under grad onto x0
    and then written: eager's set_ reads x0's history before the write; the epilogue's repeat of the set_ read it at
    the count after the copy of the write, and an unbind() view's history raised there. The repeat now reads x0 at
    its count as it came, moved on by the program's advances before the set_ (`source_bumps_at_set`)."""
    with torch.enable_grad():
        make = functools.partial(_view_and_detached_base, multi)
        assert_matches_eager(_alias_set_onto_view_input_then_written, make, versions="exact")
        assert_matches_eager(_alias_set_onto_view_input_then_written, make, after_call=write_outputs)
        if multi:  # a write before the set_: eager's set_ raises reading the multi-output view's history
            assert_raises_like_eager(_alias_written_then_set_onto_view_input, make)
        else:
            assert_matches_eager(_alias_written_then_set_onto_view_input, make, versions="exact")


# ---------------------------------------------------------------------------------------------------------------------
# A write through a tensor set_() onto an input's storage: it moves that tensor's version counter, not the input's.
# ---------------------------------------------------------------------------------------------------------------------

_VIEWS_BEFORE_THE_WRITE: dict[str, Callable[[T], T]] = {
    "split": lambda x: x.split_with_sizes([1, 1], 0)[1],
    "unbind": lambda x: x.unbind(0)[0],
    "no_grad": lambda x: x.view(-1),  # (taken under no_grad below)
}


def _write_through_a_set_onto_the_input(view: str) -> Callable[[T], tuple[T]]:
    def f(x0: T) -> tuple[T]:
        # fuzz seed 119300 #8690 as generated (shrunk), with the view as a parameter
        with torch.set_grad_enabled(False):
            x0.add_(x0)
        t0, _ = x0.max(1)
        t0.set_(x0)  # type: ignore[call-overload]  # the stub lacks set_(Tensor)
        with torch.set_grad_enabled(view != "no_grad"):
            t3 = _VIEWS_BEFORE_THE_WRITE[view](x0)
        t0.fill_(-1.0)
        return (t3,)

    return f


@pytest.mark.parametrize("view", list(_VIEWS_BEFORE_THE_WRITE))
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_write_through_a_set_onto_the_input_keeps_the_input_counter(
    compile_fn: CompileFn | None, kind: str, view: str
) -> None:
    """Fuzz seed 119300 #8690 (diverged: out[0]'s is_leaf, grad_fn and backward raised autograd's view-after-write
    error, eager's read fine): t0.set_(x0) gives t0 x0's storage, not x0's version counter, so t0.fill_() advances
    t0's counter alone and x0's multi-output (or no_grad) view made before it is not stale. The analysis counted the
    fill_ as the last bump of x0's storage and replayed the view before the epilogue, whose copy into x0 made it
    stale (`view_chains.last_bump`: only the input's own counter family counts)."""

    def make_inputs() -> tuple[object, ...]:
        return (_leaf(2, 1) if kind == "plain" else pair(2, 1, requires_grad=True),)

    f = _write_through_a_set_onto_the_input(view)
    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, versions="exact")
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz seed 121008 #4475: `x0.set_(x2)` of a view input x0 under grad (its set_ node raises in eager's backward), and an
# output of a leaf input x1 made after it: eager's engine runs x1's newer nodes and accumulates x1's gradient, then
# raises at the set_ node. The probe's fakes said the backward raised before any gradient: a fake view's history,
# made again after the set_(), replays its view ops at its old size, and their size check failed at the first node
# where eager's passes. So the error was deferred and x1 got no gradient ("args[1].grad: None vs eager a tensor").
# Where the fakes fail that check the probe runs on meta copies (eager's own view handling), and the program is refused.
# The refusal quotes eager's error, the probe's on those copies (it quoted the traced backward's size-check error:
# "MulBackward0 returned an invalid gradient at index 0", which eager never raises).
# ---------------------------------------------------------------------------------------------------------------------


def _set_view_input_then_sorted(x0: T, x1: T, x2: T) -> object:
    set_to(x0, x2)
    t0, _ = ViewAsAndRowOfOwnTensor.apply(x1)  # type: ignore[no-untyped-call]  # Function.apply is untyped in torch
    t2, _ = x0.sort(0)
    return (t2, t0)


def _set_view_input_then_leaf_read(x0: T, x1: T, x2: T) -> object:
    set_to(x0, x2)
    t0 = x1 * 2  # (made before x0's read: eager's engine runs that read, the newest node, first)
    return (x0 * 2, t0)


def _view_leaf_and_base() -> tuple[object, ...]:
    b0 = nonleaf()
    return (b0.unsqueeze(0), b0.detach().requires_grad_(), b0)


def _view_other_leaf_and_base() -> tuple[object, ...]:
    b0 = nonleaf()
    return (b0.unsqueeze(0), leaf(), b0)


@pytest.mark.parametrize("make", [_view_leaf_and_base, _view_other_leaf_and_base], ids=["detach", "other"])
@pytest.mark.parametrize("f", [_set_view_input_then_sorted, _set_view_input_then_leaf_read], ids=["sort", "mul"])
def test_set_of_a_view_input_beside_a_leaf_read_after_is_refused(
    f: Callable[[T, T, T], object], make: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    quoted = r"backward fails in eager \(derivative for set_ is not implemented\)"
    with torch.enable_grad():
        assert_refused(f, make, compile_fn, f"{quoted}.* cannot raise for some outputs and run for others")


# ---------------------------------------------------------------------------------------------------------------------
# Fuzz seed 123910 #3: `x0.set_(x1)` under grad, x1 a leaf of its own (`x0.detach().requires_grad_()`) over x0's
# storage, so x0 keeps its storage. Eager's set_ node has an edge to x1's accumulator (through the view nodes where the
# set_() took a view of x1 taken with grad), so a backward through x0, or through a view of x0 taken before the set_()
# (whose history is regenerated onto that node), raises before x1 gets its gradient, even where x1 is returned itself.
# The epilogue repeated `x0.set_(x0)`, whose node has no edge to x1: x1 got a gradient ("args[1].grad: a tensor vs
# eager None").
# ---------------------------------------------------------------------------------------------------------------------

_VIEWS_BEFORE_THE_SET: dict[str, Callable[[T], T]] = {
    "transpose_expand": lambda x: x.transpose(0, 0).expand(2, 3),
    "view": lambda x: x.view(3, 2),
    "t": lambda x: x.t(),
    "select": lambda x: x.select(0, 1),
}


def _view_then_set_onto_the_leaf(view: Callable[[T], T], first: bool) -> Callable[[T, T], object]:
    def f(x0: T, x1: T) -> object:
        t0 = view(x0)
        set_to(x0, x1)
        return (x1, t0) if first else (t0, x1)

    return f


def _nonleaf_and_its_detached_leaf() -> tuple[object, ...]:
    b0 = nonleaf(2, 3)
    return (b0, b0.detach().requires_grad_())


def _plain_and_its_detached_leaf() -> tuple[object, ...]:
    b0 = torch.randn(2, 3)
    return (b0, b0.detach().requires_grad_())


@pytest.mark.parametrize(
    "make", [_nonleaf_and_its_detached_leaf, _plain_and_its_detached_leaf], ids=["nonleaf", "plain"]
)
@pytest.mark.parametrize("first", [True, False], ids=["leaf_first", "view_first"])
@pytest.mark.parametrize("view", list(_VIEWS_BEFORE_THE_SET))
def test_set_onto_a_leaf_over_its_storage_holds_that_leaf_back(
    compile_fn: CompileFn | None, view: str, first: bool, make: Callable[[], tuple[object, ...]]
) -> None:
    f = _view_then_set_onto_the_leaf(_VIEWS_BEFORE_THE_SET[view], first)
    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=compile_fn)
        assert_matches_eager(f, make, compile_fn=compile_fn, after_call=write_outputs)


def _set_then_return_it(x0: T, x1: T) -> object:
    set_to(x0, x1)
    return (x1, x0)


def _set_then_view_it(x0: T, x1: T) -> object:
    set_to(x0, x1)
    return (x1, x0.t())


def _set_then_set_to_itself(x0: T, x1: T) -> object:
    t0 = x0.t()
    set_to(x0, x1)
    set_to(x0, x0)  # (its node's edge to x0's history reaches the first one's, and x1 behind it)
    return (x1, t0)


def _set_onto_a_view_of_it(x0: T, x1: T) -> object:
    t0 = x0.t()
    set_to(x0, x1.view(2, 3))
    return (x1, t0)


def _set_onto_a_view_of_it_returned(x0: T, x1: T) -> object:
    set_to(x0, x1.view(2, 3))
    return (x1, x0)


def _set_onto_a_transpose_of_it(x0: T, x1: T) -> object:
    t0 = x0[1]
    set_to(x0, x1.t())
    return (t0, x1)


def _set_onto_a_row_of_it(x0: T, x1: T) -> object:
    set_to(x0, x1[1])
    return (x1, x0)


_SETS_ONTO_THE_LEAF = {
    f.__name__: f
    for f in (
        _set_then_return_it,
        _set_then_view_it,
        _set_then_set_to_itself,
        _set_onto_a_view_of_it,
        _set_onto_a_view_of_it_returned,
        _set_onto_a_transpose_of_it,
        _set_onto_a_row_of_it,
    )
}


@pytest.mark.parametrize("program", list(_SETS_ONTO_THE_LEAF))
def test_set_onto_a_leaf_over_its_storage_or_a_view_of_it(compile_fn: CompileFn | None, program: str) -> None:
    """The set_() onto x1 itself, or onto a view of x1 taken with grad (eager's node reaches x1 through the view's),
    with x0 returned or viewed after it: x1 gets no gradient before the set_ node raises."""
    f = _SETS_ONTO_THE_LEAF[program]
    with torch.enable_grad():
        assert_matches_eager(f, _nonleaf_and_its_detached_leaf, compile_fn=compile_fn)
        assert_matches_eager(f, _nonleaf_and_its_detached_leaf, compile_fn=compile_fn, after_call=write_outputs)


@pytest.mark.parametrize("first", [True, False], ids=["leaf_first", "view_first"])
def test_view_of_an_input_set_onto_another_leaf_storage_is_refused(compile_fn: CompileFn | None, first: bool) -> None:
    """x1 a leaf over a storage of its own: x0 leaves its storage, and t0 (taken with grad) views the old one."""
    f = _view_then_set_onto_the_leaf(lambda x: x.t(), first)
    with torch.enable_grad():
        assert_refused(f, lambda: (nonleaf(2, 3), leaf(2, 3)), compile_fn, "the storage that input 0 had before set_")


def test_set_of_a_leaf_that_requires_grad_onto_its_detached_leaf_raises_as_eager(compile_fn: CompileFn | None) -> None:
    """x0 a leaf that requires grad: eager's set_() raises (a leaf used in an in-place operation)."""

    def make() -> tuple[object, ...]:
        b0 = leaf(2, 3)
        return (b0, b0.detach().requires_grad_())

    with torch.enable_grad():
        assert_raises_like_eager(_view_then_set_onto_the_leaf(lambda x: x.t(), True), make, compile_fn=compile_fn)


def _nonleaf_expanded_leaf_and_its_detach() -> tuple[object, ...]:
    b0 = torch.randn(()).requires_grad_().clone()
    b1 = torch.randn((4, 3, 2)).requires_grad_()
    return (b0, b1.expand((4, -1, 2)), b1.detach())


def test_set_under_grad_holds_back_a_view_input_whose_node_a_later_bump_remade(compile_fn: CompileFn | None) -> None:
    """x0 set_() with grad to a value read from x1 (a view of a leaf), then x1's leaf written through x2 (its detach)
    and x0 written with grad: eager's set_ node reaches the leaf through x1's node as it was read, which the bump
    replaced (x1's history is rebuilt from its base after the call), so the leaf's gradient through x1 waits behind
    the raising set_ node. The epilogue's set_ of x0 held back only inputs whose current node it reached, not x1, and
    the leaf got a gradient through x1 before the raise."""

    def f(x0: T, x1: T, x2: T) -> tuple[()]:
        set_to(x0, (x1 * x0).sum())
        x2.mul_(2)
        x0.mul_(3)
        return ()

    with torch.enable_grad():
        assert_matches_eager(f, _nonleaf_expanded_leaf_and_its_detach, compile_fn=compile_fn)
        assert_matches_eager(f, _nonleaf_expanded_leaf_and_its_detach, compile_fn=compile_fn, after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# A view of a detach() of an intermediate set_() onto an input's storage: eager's `._base` is that detach, with the
# intermediate's own version counter and no history, not the input (chain_facts.hidden_base).
# ---------------------------------------------------------------------------------------------------------------------


def _scalar_view_of_nonleaf() -> tuple[T]:
    with torch.enable_grad():
        return (torch.randn((4, 2), requires_grad=True).clone().as_strided((), (), 1),)


def _dirty_apply_under_no_grad_then_viewed(x0: T) -> tuple[T]:
    # fuzz seed 121011 #596: under no_grad a custom Function returns its dirty input that requires grad as a detach()
    t0 = x0.mul(x0)
    set_to(t0, x0)
    with torch.no_grad():
        t1, _ = DirtyAddSaved.apply(t0, t0)  # type: ignore[no-untyped-call]  # untyped in torch
    return (t1.expand(()),)


def _detach_of_set_intermediate_written_then_viewed(x0: T) -> tuple[T]:
    t0 = x0.mul(x0)
    set_to(t0, x0)
    with torch.no_grad():
        t0.add_(1)
    return (t0.detach().expand(()),)


def _detach_of_data_assigned_intermediate_viewed(x0: T) -> tuple[T]:
    t0 = x0.mul(x0)
    t0.data = x0
    return (t0.detach().expand(()),)


def _view_of_detach_of_a_view_of_set_intermediate(x0: T, x1: T) -> tuple[T, T]:
    t0 = x0.mul(2)
    set_to(t0, x1)
    return (t0.t().detach()[0], x1)


def test_view_of_a_dirty_apply_under_no_grad_of_an_intermediate_set_onto_an_input_matches_eager(
    compile_fn: CompileFn | None,
) -> None:
    """Eager: under no_grad the Function returns its dirty input, which requires grad, as a detach(): the output's
    `._base`, sharing t0's own counter (set_() leaves it its own), with no history. We rebuilt the output as a view
    of x0: with history, a gradient into x0's leaf, and x0's counter moved 0 -> 3 by the output's version."""
    check_with_grad(_dirty_apply_under_no_grad_then_viewed, _scalar_view_of_nonleaf, compile_fn)


@pytest.mark.parametrize(
    ("f", "make"),
    [
        (_detach_of_set_intermediate_written_then_viewed, _scalar_view_of_nonleaf),
        (_detach_of_data_assigned_intermediate_viewed, _scalar_view_of_nonleaf),
        (_view_of_detach_of_a_view_of_set_intermediate, lambda: (torch.randn(2, 3), nonleaf(2, 3))),
    ],
)
def test_view_of_a_detach_of_an_intermediate_set_onto_an_input_matches_eager(
    f: Callable[..., tuple[T, ...]], make: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    """Eager: the output's `._base` is the detach(), which shares the intermediate's counter (set_() and `.data =`
    leave it its own) and has no history. We rebuilt the output as a view of the input, with history, and moved the
    input's counter by the output's version. (The written one checks the detach's offset: eager's terms, as the
    output's.)"""
    check_with_grad(f, make, compile_fn)
