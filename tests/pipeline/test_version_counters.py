"""The epilogue's effects on inputs: version counters (bumped as eager's, not more), input metadata kept or
changed, writes through overlapping, expanded or offset inputs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
import torch

from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import inp, set_to
from tests.pipeline.corpus_pytorch9 import (
    _randn_2x3,
    _x_and_out,
    custom_op_writes_input,
    custom_op_writes_out_and_returns,
    custom_op_writes_view_of_input,
)
from tests.pipeline.program_helpers import (
    DirtyScale,
    TransposeSaved,
    ViewAsAndRowOfOwnTensor,
    nonleaf,
    pair,
    pair_nonleaf,
)

# ---------------------------------------------------------------------------------------------------------------------
# Fuzz regressions: one hand-minimized program per distinct bug the fuzzer found (`python -m subclassaot fuzz`).
# Each program was a bug (once a strict xfail naming it); each now matches eager or is refused as eager's rule says.
# ---------------------------------------------------------------------------------------------------------------------

T = torch.Tensor


# ---------------------------------------------------------------------------------------------------------------
# Epilogue, version counters and input metadata (inference)


def test_aliased_inputs_version_counter_not_bumped(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        x.add_(1)
        return ()

    def make_inputs() -> tuple[object, ...]:
        b = torch.randn(4)
        return (b, b.detach())

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_resize_to_same_shape_bumps_version(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        x.resize_(2)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_detached_alias_input_gains_requires_grad(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        return ()

    def make_inputs() -> tuple[object, ...]:
        b = torch.randn(2, requires_grad=True)
        return (b, b.detach())

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_mutation_of_overlapping_input(compile_fn: CompileFn | None) -> None:
    # Note [In-Place Ops As Eager Runs Them]: an expanded input filled in place, then read (fuzz seed 1000, program
    # 2454 gave wrong values while this was accepted, then it was refused): the input is traced as a view of a
    # synthetic base over its storage (Note [as_strided On Inputs]).
    def f(x: T) -> object:
        x[0].fill_(2.0)
        x.fill_(2.0)
        return (x.sin(),)

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2).expand(2, 2),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_uniform_write_through_empty_expanded_view(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 1000, program 6069: an empty slice of an expanded view zeroed: nothing is written (the narrowed
    # view wrote one element before).
    def f(x0: T) -> object:
        t1 = x0.expand((4, 3, 2))[:, 3:3:1]
        t1.zero_()
        return ()

    with torch.no_grad():
        assert_matches_eager(f, lambda: (torch.randn(4, 2, 1)[:, 0:1:2],), compile_fn=compile_fn)


def test_set_to_mutated_offset_view_input(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        x.add_(1)
        set_to(y, x)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(4)[1:3], torch.randn(3))

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_mutation_through_expand_view(compile_fn: CompileFn | None) -> None:
    def f(x: T) -> object:
        x.expand(3, 4).zero_()
        return x

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(4),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_as_strided_outside_offset_input(compile_fn: CompileFn | None) -> None:
    # Note [as_strided On Inputs]: the view reaches storage elements the input does not cover (refused before).
    def f(x: T) -> object:
        x.as_strided((3,), (1,), 1).unsqueeze_(1)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(4)[2],)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_as_strided_into_hole_of_strided_input(compile_fn: CompileFn | None) -> None:
    # Note [as_strided On Inputs]: element 1 lies between the input's elements 0 and 2.
    def f(x: T) -> object:
        x.as_strided((1,), (1,), 1).add_(1)
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(4, requires_grad=True)[::2],)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_as_strided_write_on_empty_input_view(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10, program 251: the input has no elements; eager writes storage element 1 and returns it.
    def f(x: T) -> object:
        t = x.as_strided((), (), 1)
        t.add_(2.0)
        return t

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(4, 2)[:, 1:1],)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_as_strided_write_after_subclass_reshape(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10, program 210: functionalization refuses a write through as_strided at the end of a view chain;
    # the view is taken from the chain's root instead (the same view: as_strided offsets are absolute).
    def f(x: T) -> object:
        x.reshape(1, 2, 3).as_strided((1,), (2,), 1).add_(3.0)
        return x

    def make_inputs() -> tuple[object, ...]:
        return (pair(3, 2),)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_no_grad_write_through_multi_output_view_in_training(compile_fn: CompileFn | None) -> None:
    # Fuzz seed 10, program 112 (training): eager's returned view has a grad_fn that raises, because its base was
    # written after it was taken; the compiled output is taken before the epilogue writes the input, likewise.
    def f(x: T) -> object:
        t = x.unbind(0)[1].expand(())
        with torch.no_grad():
            t.add_(3.0)
        return t

    def make_inputs() -> tuple[object, ...]:
        return (torch.randn(2, requires_grad=True),)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


@pytest.mark.parametrize("sizes", [(2, 3), (3, 3)])
def test_subclass_set_between_inputs(sizes: tuple[int, int], compile_fn: CompileFn | None) -> None:
    # x grows to y's size: the wrapper's own storage grows in place (it crashed: setStorage out of bounds).
    def f(x: T, y: T) -> object:
        set_to(x, y)
        y.add_(1.0)  # seen through x too: their inner tensors share storage, as in eager
        return (x + 0,)

    def make_inputs() -> tuple[object, ...]:
        return (pair(sizes[0]), pair(sizes[1]))

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_subclass_data_assign_between_inputs(compile_fn: CompileFn | None) -> None:
    def f(x: T, y: T) -> object:
        x.data = y
        return ()

    def make_inputs() -> tuple[object, ...]:
        return (pair(3), pair(2))

    with torch.no_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def test_untouched_strided_nonleaf_subclass_input_keeps_metadata(compile_fn: CompileFn | None) -> None:
    # The analysis runs a non-leaf subclass input as a clone (other strides): an untouched input must not look
    # like one whose metadata changed (the epilogue then restrided the real input, or failed on an unbind view).
    def f(x: T) -> object:
        return (x * 2,)

    def make_inputs() -> tuple[object, ...]:
        return (pair_nonleaf(2, 3, 1).unbind(1)[2],)

    with torch.enable_grad():
        assert_matches_eager(f, make_inputs, compile_fn=compile_fn)


def _view_then_t_of_detach(x0: torch.Tensor) -> object:
    t0 = x0.detach()
    t1 = t0.view(-1)
    t0.t_()
    t2 = x0.view(x0.shape[::-1])
    return (t1, t2)


@pytest.mark.parametrize("requires_grad", [False, True], ids=["plain", "nonleaf_requiring_grad"])
@pytest.mark.parametrize("shape", [(), (2, 3)], ids=["0d", "2d"])
def test_in_place_view_op_on_a_detach_after_a_view_of_it_counts_once(
    shape: tuple[int, ...], requires_grad: bool, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 32000 #570 (grad_mode vocabulary): the output view taken before `t0.t_()` is rebuilt with t_ applied
    # to its replayed `._base` afterwards (Replay.base_after), which advanced the input's shared counter a second
    # time after the epilogue had given it eager's count: x0._version 2 against eager's 1, and x0's later no_grad view
    # raised on `is_leaf` where eager's answered
    def make() -> tuple[object, ...]:
        with torch.enable_grad():
            return (torch.randn(shape, requires_grad=requires_grad).clone(),)

    with torch.no_grad():
        assert_matches_eager(_view_then_t_of_detach, make, compile_fn=compile_fn)


def view_taken_after_its_base_was_written_then_another_input_written(
    x0: torch.Tensor, x1: torch.Tensor, x2: torch.Tensor
) -> object:
    x2.add_(2.0)  # x2 is x0's base
    t0 = x0.unbind(0)[2]  # taken after that write
    x1.fill_(0.5)  # an input on another storage, written after the view
    return (t0,)


def test_a_write_to_an_unrelated_input_after_a_view_does_not_bump_it() -> None:
    """The view was replayed with its input's counter as at entry (Replay.entry_counter) because some input was
    written after it was taken; only inputs over its own storage can share its counter, and x1 is not one (fuzz seed
    56000, program 2581: DIVERGED, the view's grad_fn read raised where eager's answers)."""

    def make() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b0 = torch.randn((4, 3), requires_grad=True).clone()
        return b0.unbind(1)[2], torch.randn(()), b0

    with torch.no_grad():
        assert_matches_eager(view_taken_after_its_base_was_written_then_another_input_written, make)


def in_place_view_op_under_no_grad_at_the_end_of_a_chain(x0: torch.Tensor) -> object:
    t0 = x0.transpose(1, 0)
    t1 = t0.select(0, -1)
    with torch.no_grad():
        t1.t_()  # bumps the counter x0 shares, after the chain's views were taken
    return (t1,)


def test_chain_ending_in_its_own_in_place_view_op_is_replayed_at_the_entry_counter() -> None:
    """x0 is a view of an unbind() output: rebuilding a view of it with grad after its counter moved raises (a
    multi-output view's history cannot be replayed). The runtime advanced the counter, then replayed the chain (fuzz
    seed 56000, program 3692: CRASHED); the chain's views are now taken at the entry counter, its own t_() after, as in
    eager."""

    def make() -> tuple[torch.Tensor]:
        b0 = torch.randn((1, 3), requires_grad=True)
        return (b0.unbind(1)[0].view((-1, 1)),)

    with torch.enable_grad():
        assert_matches_eager(in_place_view_op_under_no_grad_at_the_end_of_a_chain, make)


# ---------------------------------------------------------------------------------------------------------------
# Version counters end at eager's count, not merely moved (runtime/steps.py: Version Counters As Eager's; issues #27, #28). The
# oracle compares counts ("counted"); each program failed it while the epilogue only made counters move.

_KINDS = ["plain", "pair"]


def _input(kind: str, *shape: int) -> T:
    return pair(*shape) if kind == "pair" else torch.randn(shape)


def _in_place_view_op_then_a_write(x0: T) -> object:
    x0.unsqueeze_(0)
    t0 = x0[0]
    x0.mul_(2)
    return (t0 + 0,)


@pytest.mark.parametrize("kind", _KINDS)
def test_in_place_view_op_then_a_write_counts_two(kind: str, compile_fn: CompileFn | None) -> None:
    # issue #27: x0._version ended at 3 (plain: the epilogue's copy_ and as_strided_ on top) and 1 (PairTensor:
    # advanced once) where eager's is 2
    with torch.no_grad():
        assert_matches_eager(
            _in_place_view_op_then_a_write, lambda: (_input(kind, 3),), compile_fn=compile_fn, versions="counted"
        )


def _intermediate_written_after_its_view(x: T) -> object:
    y = x.clone()
    t = y[0:2]
    y.add_(1)
    return y, t


@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_intermediate_output_written_in_place_counts_its_writes(kind: str, compile_fn: CompileFn | None) -> None:
    # issue #28: y and its view t came out of the graph fresh, at 0, where eager's counter (one, shared) is at 1; the
    # stale view's build advances the shared counter (its root's count is given one less)
    with torch.no_grad():
        assert_matches_eager(
            _intermediate_written_after_its_view, lambda: (_input(kind, 3),), compile_fn=compile_fn, versions="exact"
        )


def _written_twice(x: T, y: T) -> object:
    x.add_(1)
    x.mul_(2)
    y.t_()
    return (x * y.sum(),)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "training"])
@pytest.mark.parametrize("kind", _KINDS)
def test_input_written_twice_counts_two(kind: str, grad: bool, compile_fn: CompileFn | None) -> None:
    def make() -> tuple[object, ...]:
        if kind == "pair":
            return (pair_nonleaf(3) if grad else pair(3), pair(2, 3))
        with torch.enable_grad():
            x = torch.randn(3, requires_grad=grad).clone()
        return (x, torch.randn(2, 3))

    with torch.set_grad_enabled(grad):
        assert_matches_eager(_written_twice, make, compile_fn=compile_fn, versions="counted")


def _marked_dirty(x0: T) -> object:
    DirtyScale.apply(x0)  # type: ignore[no-untyped-call]  # torch leaves Function.apply unannotated
    return ()


def test_a_write_marked_dirty_counts_the_write_and_the_mark(compile_fn: CompileFn | None) -> None:
    # fuzz seed 122000, program 17: x0.mul_ and ctx.mark_dirty each advance the counter (2); it ended at 1
    with torch.no_grad():
        assert_matches_eager(_marked_dirty, lambda: (torch.randn(()),), compile_fn=compile_fn, versions="counted")


def _foreach_written(x: T, y: T) -> object:
    torch._foreach_add_([x, y], 1.0)
    x.add_(1)
    return ()


@pytest.mark.parametrize("kind", _KINDS)
def test_foreach_write_counts_as_eager(kind: str, compile_fn: CompileFn | None) -> None:
    # eager's in-place foreach advances each plain tensor's counter once and leaves a wrapper subclass's alone (its
    # inner tensors are written below autograd): x ends at 2 (plain) or 1 (PairTensor)
    with torch.no_grad():
        assert_matches_eager(
            _foreach_written, lambda: (_input(kind, 3), _input(kind, 3)), compile_fn=compile_fn, versions="counted"
        )


def _view_transposed_in_place(x: T) -> object:
    t = x[0:2]
    t.t_()
    return (t,)


def _detach_transposed_in_place(x: T) -> object:
    t = x.detach()
    t.transpose_(1, 0)
    return (t, x)


@pytest.mark.parametrize("program", [_view_transposed_in_place, _detach_transposed_in_place])
@pytest.mark.parametrize("kind", _KINDS)
def test_output_view_replayed_with_its_in_place_view_op_keeps_the_count(
    program: Callable[[T], object], kind: str, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 122000, programs 265, 271, 275: the output is replayed from the input after the epilogue gave the
    # input eager's count, its t_() then advanced it once more (Replay.keeps_counter)
    with torch.no_grad():
        assert_matches_eager(program, lambda: (_input(kind, 3, 2),), compile_fn=compile_fn, versions="exact")


def test_write_through_an_expand_recorded_by_autograd_counts_once(compile_fn: CompileFn | None) -> None:
    # the write is rewritten over the expand's elements once each, and a Function of the pipeline's own marks it dirty
    # (so that the backward raises as eager's): neither is a write of eager's
    def f(x0: T) -> object:
        x0.unsqueeze(0).expand(2, -1, -1).fill_(1.0)
        return (x0.sin(),)

    with torch.enable_grad():
        assert_matches_eager(f, lambda: (nonleaf(4, 1),), compile_fn=compile_fn, versions="exact")


# A set_() shares the storage, not the version counter: a write through the tensor set_() onto another's storage bumps
# only its own counter, not that of the storage's other tensors or of views taken of them.


def _set_then_chain_of_the_source(x0: T, x1: T) -> object:
    set_to(x1, x0)
    t0 = x0.select(0, 1)
    t1 = t0.unsqueeze(0)
    x1.mul_(0.5)
    return (t0, t1)


def _chain_of_the_source_then_set(x0: T, x1: T) -> object:
    t0 = x0.select(0, 1)
    t1 = t0.unsqueeze(0)
    set_to(x1, x0)
    x1.mul_(0.5)
    return (t0, t1)


def _set_then_chain_of_the_target(x0: T, x1: T) -> object:
    set_to(x1, x0)
    t0 = x1.select(0, 1)
    t1 = t0.unsqueeze(0)
    x0.mul_(0.5)
    return (t0, t1)


def _set_then_views_of_both(x0: T, x1: T) -> object:
    set_to(x1, x0)
    t1 = x0.select(0, 1).unsqueeze(0)
    u = x1[0].t()
    x1.mul_(0.5)
    return (t1, u)


_SET_WRITES = [
    _set_then_chain_of_the_source,
    _chain_of_the_source_then_set,
    _set_then_chain_of_the_target,
    _set_then_views_of_both,
]


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("program", _SET_WRITES)
@pytest.mark.parametrize("kind", _KINDS)
def test_write_through_a_set_onto_another_storage_bumps_only_its_own_counter(
    kind: str, program: Callable[[T, T], object], grad: bool, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 123242, program 248: a view of a view of x0 was taken as stale (its storage written after it was
    # made), and its build advanced the counter x0 shares, where eager's x1.mul_ advanced only x1's
    with torch.set_grad_enabled(grad):
        assert_matches_eager(
            program, lambda: (_input(kind, 4, 2, 4), _input(kind)), compile_fn=compile_fn, versions="exact"
        )


# A view replayed from another output whose chain starts at an input shares the input's counter: eager's views, taken
# before the write, are stale by it; the replay is made at the input's counter at entry, not advanced after its build
# (which moved the count the epilogue gave the input: Replay.root_input).


def _chain_of_one_then_mul(x0: T) -> object:
    t0 = x0.select(0, 1)
    t1 = t0.unsqueeze(0)
    x0.mul_(0.5)
    return (t0, t1)


def _chain_of_one_then_mul_reversed(x0: T) -> object:
    t0 = x0.select(0, 1)
    t1 = t0.unsqueeze(0)
    x0.mul_(0.5)
    return (t1, t0)


def _chain_of_two_then_copy(x0: T) -> object:
    t0 = x0.select(0, 1)
    t2 = t0.unsqueeze(0).t()
    x0.copy_(torch.ones_like(x0))
    return (t0, t2)


def _chain_of_three_then_a_write_through_a_view(x0: T) -> object:
    t0 = x0[1:]
    t3 = t0.unsqueeze(0).transpose(1, 2).flatten(0, 1)
    x0[0].mul_(0.5)
    return (t3, x0.sin(), t0)


def _each_view_of_a_chain_returned(x0: T) -> object:
    t0 = x0.select(0, 1)
    t1 = t0.unsqueeze(0)
    t2 = t1.t()
    x0.add_(1.0)
    return (t2, t0, t1)


def _chain_written_between_its_views(x0: T) -> object:
    t0 = x0.select(0, 1)
    x0.mul_(0.5)
    t1 = t0.unsqueeze(0)
    x0.add_(1.0)
    return (t0, t1)


_CHAINS_FROM_AN_OUTPUT = [
    _chain_of_one_then_mul,
    _chain_of_one_then_mul_reversed,
    _chain_of_two_then_copy,
    _chain_of_three_then_a_write_through_a_view,
    _each_view_of_a_chain_returned,
    _chain_written_between_its_views,
]


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("program", _CHAINS_FROM_AN_OUTPUT)
@pytest.mark.parametrize("kind", _KINDS)
def test_view_replayed_from_an_output_over_an_input_keeps_the_input_count(
    kind: str, program: Callable[[T], object], grad: bool, compile_fn: CompileFn | None, request: pytest.FixtureRequest
) -> None:
    # issue #27 (found by helper hvc): under no_grad x0, t0 and t1 ended at 2 where eager's are at 1: t1, replayed from
    # output t0, was advanced to make it stale, on the counter x0 shares, after the epilogue set x0's count
    if grad and kind == "pair" and program is _chain_written_between_its_views and compile_fn is None:
        # another gap: `t0 = x0.select(0, 1); x0.mul_(0.5); x0.add_(1.0); return (t0,)` alone ends at 1, eager's at 2
        request.applymarker(
            pytest.mark.xfail(strict=True, reason="a PairTensor requiring grad written twice after a view counts one")
        )

    def make() -> tuple[object, ...]:
        if grad:
            return (pair_nonleaf(3, 4) if kind == "pair" else nonleaf(3, 4),)
        return (_input(kind, 3, 4),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(program, make, compile_fn=compile_fn, versions="exact")


# ---------------------------------------------------------------------------------------------------------------------
# fuzz seed 118400 --versions exact (programs 640, 506, 621, 1423, ...): an input that is a view requiring grad,
# written under no_grad, kept the count the epilogue left it at (1) where eager's is 2 or 3: settle_version left a view
# requiring grad whose counter moved (moving it again would make autograd regenerate its grad_fn), though eager
# recorded no node on it and its grad_fn is stale at the end either way (EpiloguePlan.recorded). And an output view
# made before the epilogue was given the input's count plus one after it, where eager's resize_ and write made two
# (Replay.counter_at_end).
# ---------------------------------------------------------------------------------------------------------------------


def _in_place_view_op_on_one_alias_then_a_write_on_another(x0: T, x1: T) -> object:
    x1.t_()
    x0.fill_(0.5)
    return (x0,)


def _set_onto_itself_then_transposed(x0: T, x1: T) -> object:
    set_to(x0, x0)
    x0.t_()
    return (x0,)


def _marked_dirty_then_written(x0: T, x1: T) -> object:
    t0 = DirtyScale.apply(x0)  # type: ignore[no-untyped-call]  # torch leaves Function.apply unannotated
    x0.mul_(3.0)
    return (t0,)


def _view_then_resized_and_filled(x0: T, x1: T) -> object:
    t0 = x1.view((2, -1, 3))
    x1.resize_((13,))
    x1.fill_(-1.0)
    return (t0,)


def _view_inputs_written(kind: str) -> tuple[object, ...]:
    base = pair_nonleaf(2, 3, 4) if kind == "pair" else nonleaf(2, 3, 4)
    return (base[0], base[1])


def _elements_of_one_base(kind: str) -> tuple[object, ...]:
    base = pair_nonleaf(2) if kind == "pair" else nonleaf(2)
    return (base.select(0, 0), base.select(0, -1))


def _plain_input_resized(kind: str) -> tuple[object, ...]:
    return (_input(kind, 2), torch.randn(3, 4, 1))


@pytest.mark.parametrize(
    ("program", "inputs"),
    [
        (_in_place_view_op_on_one_alias_then_a_write_on_another, _elements_of_one_base),
        (_set_onto_itself_then_transposed, _view_inputs_written),
        (_marked_dirty_then_written, _view_inputs_written),
        (_view_then_resized_and_filled, _plain_input_resized),
    ],
    ids=["alias_then_write", "set_onto_itself", "marked_dirty", "resized"],
)
@pytest.mark.parametrize("kind", _KINDS)
def test_input_written_under_no_grad_counts_as_eager(
    program: Callable[[T, T], object],
    inputs: Callable[[str], tuple[object, ...]],
    kind: str,
    compile_fn: CompileFn | None,
) -> None:
    with torch.no_grad():
        assert_matches_eager(program, lambda: inputs(kind), compile_fn=compile_fn, versions="exact")


# A fresh output (on no input's storage) the program wrote in place, or changed by an in-place view op, ends at
# eager's count (issue #27; fuzz seed 118400, programs 62, 76, 401, 438, 597, 767, 935, 1139, 1144, 1149, 1202, 1360,
# 1437, 1650: each ended at 0, or at 2 where eager's is 1). One that requires grad gets it in the training Function's
# forward, before the Function saves it (autograd's check of a save reads eager's count), or once the graph ran on
# the eager backend's native path, where no save of the graph's is over it; a view of an intermediate base through
# its base, before the view is replayed; a root less each in-place view op a replay from it repeats.


def _graph_as_traced(gm: torch.fx.GraphModule, example_inputs: object) -> Callable[..., object]:
    """A backend of the user's: training runs through the compiled Function (the eager backend's may not)."""
    return gm


def _clone_written(x: T) -> object:
    t = x.clone()
    t.add_(0.5)
    return (t,)


def _product_written(x: T) -> object:
    t = x.mul(x)
    t.add_(0.5)
    return (t,)


def _written_by_itself(x: T) -> object:
    t = x.clone()
    t.mul_(t)
    return (t,)


def _sum_transposed_in_place(x: T) -> object:
    t = x.sum(0)
    t.t_()
    return (t,)


def _written_then_saved(x: T) -> object:
    t = x.mul(x)
    t.add_(0.5)
    return (t, t.sin())  # (sin saves t: eager's save at count 1)


def _exp_in_place(x: T) -> object:
    t = x.clone()
    t.exp_()  # (exp saves its result, the output, at count 1)
    return (t,)


def _view_of_a_sum_written_after(x: T) -> object:
    t0 = x.sum()
    t1 = t0.view((1, 1))
    t0.add_(2.0)
    return (t1,)


def _view_written_by_itself(x: T) -> object:
    t0 = x.add(3.0)
    t1 = t0.unsqueeze(-2)
    t1.mul_(t1)
    return (t1,)


_FRESH_WRITTEN = [
    _clone_written,
    _product_written,
    _written_by_itself,
    _sum_transposed_in_place,
    _written_then_saved,
    _exp_in_place,
    _view_of_a_sum_written_after,
    _view_written_by_itself,
]


@pytest.mark.parametrize("path", ["eager", "function"])
@pytest.mark.parametrize("program", _FRESH_WRITTEN)
@pytest.mark.parametrize("kind", _KINDS)
def test_fresh_output_written_in_training_counts_as_eager(
    kind: str, program: Callable[[T], object], path: str, compile_fn: CompileFn | None
) -> None:
    from subclassaot.tools.parity import write_outputs

    def make() -> tuple[object, ...]:
        return (pair_nonleaf(3, 2) if kind == "pair" else nonleaf(3, 2),)

    backend: object = "eager" if path == "eager" else _graph_as_traced
    with torch.enable_grad():
        assert_matches_eager(program, make, backend=backend, compile_fn=compile_fn, versions="exact")
        # ... and with every output written after the call: eager's backward raises where it saved one
        assert_matches_eager(
            program, make, backend=backend, compile_fn=compile_fn, versions="exact", after_call=write_outputs
        )


def _product_of_other_inputs_unsqueezed(x0: T, x1: T, x2: T) -> object:
    t0 = x1.mul(x2)
    x0.add_(0.5)
    t0.unsqueeze_(0)
    return (t0,)


def test_fresh_output_requiring_no_grad_in_training_counts_as_eager(compile_fn: CompileFn | None) -> None:
    # seed 118400, program 1144: the Function's output that requires no grad was built with no count
    def make() -> tuple[object, ...]:
        b = torch.randn(())
        return (nonleaf(2, 1), b, b)

    with torch.enable_grad():
        assert_matches_eager(_product_of_other_inputs_unsqueezed, make, compile_fn=compile_fn, versions="exact")


def _indices_unsqueezed_then_expanded(x: T) -> object:
    _, t1 = x.max(0, keepdim=True)
    t1.unsqueeze_(0)
    return (t1.expand((3, 1)),)


def _sorted_filled_through_a_view(x: T) -> object:
    t0, _ = x.sort(1, descending=True)
    t2 = t0.view((2, 3, 4))
    t2.fill_(3.0)
    return (t2.view((3, 4, 2)),)


def _unbind_view_resized(x: T) -> object:
    t1 = x.view((-1, 3)).clone()
    t2 = t1.unbind(0)[1]
    t2.resize_((1, 2))
    return (t1, t2)


def _written_then_made_to_require_grad(x: T) -> object:
    t0 = x.clone()
    t0.mul_(2.0)
    t0.requires_grad_()
    return (t0,)


@pytest.mark.parametrize(
    ("program", "shape"),
    [
        (_indices_unsqueezed_then_expanded, ()),
        (_sorted_filled_through_a_view, (3, 4, 2)),
        (_unbind_view_resized, (1, 3, 2)),
        (_written_then_made_to_require_grad, ()),
    ],
)
@pytest.mark.parametrize("kind", _KINDS)
def test_fresh_output_written_under_no_grad_counts_as_eager(
    kind: str, program: Callable[[T], object], shape: tuple[int, ...], compile_fn: CompileFn | None
) -> None:
    # a view of an intermediate base (or subclass root) given its root's count before it is replayed; a root less the
    # resize_() its view's replay repeats (it ended at 2, eager's at 1)
    with torch.no_grad():
        assert_matches_eager(program, lambda: (_input(kind, *shape),), compile_fn=compile_fn, versions="exact")


def _grad_region_then_written(x: T) -> object:
    with torch.enable_grad():
        t0 = x.mul(0.5)
    t0.mul_(3.0)
    return (t0,)


@pytest.mark.parametrize("kind", _KINDS)
def test_fresh_output_with_history_written_under_no_grad_counts_as_eager(
    kind: str, compile_fn: CompileFn | None
) -> None:
    # seed 118400, program 1202: computed with grad on inside a call under no_grad, written after
    def make() -> tuple[object, ...]:
        return (pair_nonleaf(2, 3) if kind == "pair" else nonleaf(2, 3),)

    with torch.no_grad():
        assert_matches_eager(_grad_region_then_written, make, compile_fn=compile_fn, versions="exact")


# ---------------------------------------------------------------------------------------------------------------------
# fuzz seed 118400 --versions exact (programs 247, 535): an input view requiring grad whose set_() under grad eager
# recorded kept the count the epilogue left it at. One set_() onto another input ended at 2 where eager's is 1: the
# epilogue replays the new layout without grad (one bump) and repeats the set_() under grad after (another), and the
# count is kept where the repeat made the view's grad_fn (EpiloguePlan.counted, CountedStep.SET: the counter is set to
# eager's count less one before the repeat). One set_() onto itself, then written under no_grad, ended at 1 where
# eager's is 3: eager's writes after its last recorded node leave the view's grad_fn stale at the end, so the count is
# eager's (LeafMutation.bumps_after_grad).
# ---------------------------------------------------------------------------------------------------------------------


def _view_set_onto_another_input(x0: T, x1: T) -> object:
    set_to(x1, x0)
    return (x1,)


def _set_onto_itself_then_marked_dirty_under_no_grad(x0: T) -> object:
    t0, t1 = x0.split_with_sizes([1, 0], 0)
    set_to(x0, x0)
    with torch.no_grad():
        DirtyScale.apply(t1)  # type: ignore[no-untyped-call]  # torch leaves Function.apply unannotated
    return (t0,)


def _leaf_and_a_view(kind: str) -> tuple[object, ...]:
    leaf = pair(3, 4, requires_grad=True) if kind == "pair" else torch.randn(3, 4, requires_grad=True)
    return (leaf, _input(kind, 1).unsqueeze(-1))


def _view_requiring_grad(kind: str) -> tuple[object, ...]:
    base = pair_nonleaf(1) if kind == "pair" else nonleaf(1)
    return (base.view(1, 1),)


_SET_UNDER_GRAD = [
    (_view_set_onto_another_input, _leaf_and_a_view, "set_onto_another"),
    (_set_onto_itself_then_marked_dirty_under_no_grad, _view_requiring_grad, "marked_dirty_after"),
]
# A known gap: a subclass input keeps the count the epilogue left it at where its view eager recorded a node on
# (EpiloguePlan.recorded_wrappers) or an output view replayed from it (viewed_wrappers) would regenerate its grad_fn,
# though eager's bumps after its last recorded node leave those stale at the end too.
_VIEWED_WRAPPER_GAP = pytest.mark.xfail(strict=True, reason="EpiloguePlan.viewed_wrappers keeps the moved count")


@pytest.mark.parametrize(
    ("program", "inputs", "kind"),
    [
        pytest.param(
            program,
            inputs,
            kind,
            id=f"{kind}-{name}",
            marks=[_VIEWED_WRAPPER_GAP] if (kind, name) == ("pair", "marked_dirty_after") else [],
        )
        for program, inputs, name in _SET_UNDER_GRAD
        for kind in _KINDS
    ],
)
def test_input_view_set_under_grad_counts_as_eager(
    program: Callable[..., object],
    inputs: Callable[[str], tuple[object, ...]],
    kind: str,
    compile_fn: CompileFn | None,
) -> None:
    from subclassaot.tools.parity import write_outputs

    with torch.enable_grad():
        assert_matches_eager(program, lambda: inputs(kind), compile_fn=compile_fn, versions="exact")
        assert_matches_eager(
            program, lambda: inputs(kind), compile_fn=compile_fn, versions="exact", after_call=write_outputs
        )


def _view_of_an_intermediate_transposed_returned_twice(x: T) -> object:
    t0 = x.mul(2.0)
    t1 = t0.view((1, 3))
    t1.t_()
    return (t1, t1)


def _view_of_an_output_transposed_returned_twice(x: T) -> object:
    t0 = x.mul(2.0)
    t1 = t0.view((1, 3))
    t1.t_()
    return (t0, t1, t1)


def _stale_view_of_an_output_returned_twice(x: T) -> object:
    t0 = x.clone()
    t1 = t0[0:2]
    t0.add_(1.0)
    t0.mul_(2.0)
    return (t0, t1, t1)


# (kind, program, grad): a stale view runs behind eager's count returned once as well, in training, and from a
# PairTensor root written twice (runtime/steps.py: Version Counters As Eager's, known gaps)
_RETURNED_TWICE = [
    *[(kind, _view_of_an_intermediate_transposed_returned_twice, grad) for kind in _KINDS for grad in (False, True)],
    *[(kind, _view_of_an_output_transposed_returned_twice, grad) for kind in _KINDS for grad in (False, True)],
    ("plain", _stale_view_of_an_output_returned_twice, False),
]


@pytest.mark.parametrize(("kind", "program", "grad"), _RETURNED_TWICE)
def test_view_returned_twice_is_counted_once(
    kind: str, program: Callable[[T], object], grad: bool, compile_fn: CompileFn | None
) -> None:
    # fuzz seed 118600, program 5391 (CRASHED): `return (t1, t1)` of a view t_()'d is built once (OutputKind.SAME_AS),
    # yet its root was given its count less the t_() once per return, -1: "Cannot set a version_counter to a value
    # below 0"
    def make() -> tuple[object, ...]:
        if grad:
            return (pair_nonleaf(3) if kind == "pair" else nonleaf(3),)
        return (_input(kind, 3),)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(program, make, compile_fn=compile_fn, versions="exact")


def _function_view_transposed_sliced_and_detached(x: T) -> object:
    t0, _ = ViewAsAndRowOfOwnTensor.apply(x)  # type: ignore[no-untyped-call]  # torch leaves Function.apply unannotated
    t0.t_()
    return (t0[2:2:2], t0.detach())


def _view_of_an_intermediate_transposed_sliced_and_detached(x: T) -> object:
    t0 = x.mul(2.0).view(-1)
    t0.t_()
    return (t0[1:], t0.detach())


@pytest.mark.parametrize(
    "program", [_function_view_transposed_sliced_and_detached, _view_of_an_intermediate_transposed_sliced_and_detached]
)
@pytest.mark.parametrize("kind", _KINDS)
def test_views_through_one_transposed_view_count_its_transpose_once(
    kind: str, program: Callable[[T], object], compile_fn: CompileFn | None
) -> None:
    # fuzz seed 121003, program 181 (CRASHED): both outputs' chains pass t0 after its t_(); the second replay reuses
    # the t0 the first made (Replay.marks), so the t_() is repeated once, yet the intermediate base was given its
    # count less one t_() per chain, -1: "Cannot set a version_counter to a value below 0"
    with torch.no_grad():
        assert_matches_eager(program, lambda: (_input(kind, 2),), compile_fn=compile_fn, versions="exact")


def _clone_of_inference(x: T) -> object:
    with torch.inference_mode():
        t0 = x.clone()
    return (t0.clone(),)


def _max_of_inference(x: T) -> object:
    with torch.inference_mode():
        t0 = x.mul(2.0)
    values, indices = t0.max(0)
    return (values, indices, t0.sum())


def _clone_of_inference_written_and_viewed(x: T) -> object:
    with torch.inference_mode():
        t0 = x.clone()
    t1 = t0.clone()
    t1.add_(1.0)
    return (t1.view(-1),)


@pytest.mark.parametrize("program", [_clone_of_inference, _max_of_inference, _clone_of_inference_written_and_viewed])
@pytest.mark.parametrize("kind", _KINDS)
def test_result_read_from_inference_tensor_counts_as_eager(
    kind: str, program: Callable[[T], object], compile_fn: CompileFn | None
) -> None:
    # seed 118400, program 1432 and seed 123290, program 971: outside inference_mode, eager's clone() (and reductions)
    # of an inference tensor run no autograd kernel, so their kernels' inner copies advance the result's counter (1 and
    # 2 where ours were fresh)
    with torch.no_grad():
        assert_matches_eager(program, lambda: (_input(kind, 3, 2),), compile_fn=compile_fn, versions="exact")


def _unbind_view_transposed(x: T) -> object:
    t0 = x.unbind(1)[2]
    t0.t_()
    return (t0,)


@pytest.mark.parametrize("kind", _KINDS)
def test_view_with_history_transposed_in_place_counts_as_eager(kind: str, compile_fn: CompileFn | None) -> None:
    # seed 118400, program 283: an unbind() view of a leaf requiring grad, t_()'d under no_grad; its replay after the
    # epilogue repeated the t_() on the settled count (2, eager's 1)
    def make() -> tuple[object, ...]:
        if kind == "pair":
            return (pair(3, 4, 4, requires_grad=True),)
        return (torch.randn(3, 4, 4).requires_grad_(),)

    with torch.no_grad():
        assert_matches_eager(_unbind_view_transposed, make, compile_fn=compile_fn, versions="exact")


# ---------------------------------------------------------------------------------------------------------------------
# A keeps_counter view with history is made at eager's count at the end less the in-place view ops its replay repeats.
# Eager's count, not the count the input has then: a subclass input whose counter the epilogue keeps as it moved
# (EpiloguePlan.viewed_wrappers) ran behind it, and made at that count less its repeats the view went below the count
# eager's was taken at (a counter set to -1). Only the repeats the replay makes count: a chain object an earlier replay
# made is reused (Note [Output Regeneration]), its in-place view op not repeated.
# ---------------------------------------------------------------------------------------------------------------------


def _written_then_view_changed_in_place(x0: T) -> object:
    x0.mul_(0.5)
    x0.add_(1.0)
    t0 = x0[0]
    t0.t_()
    t0.unsqueeze_(0)
    return (t0, x0)


def _view_changed_in_place_around_another_view(x0: T) -> object:
    t0 = x0[0]
    t0.t_()
    t1 = x0[1]
    t0.unsqueeze_(0)
    return (t1, t0)


@pytest.mark.parametrize("program", [_written_then_view_changed_in_place, _view_changed_in_place_around_another_view])
@pytest.mark.parametrize("kind", _KINDS)
def test_view_with_history_changed_in_place_counts_as_eager(
    kind: str, program: Callable[[T], object], compile_fn: CompileFn | None
) -> None:
    make = pair_nonleaf if kind == "pair" else nonleaf
    with torch.enable_grad():
        assert_matches_eager(program, lambda: (make(3, 3, 3),), compile_fn=compile_fn, versions="exact")
    if program is _written_then_view_changed_in_place:
        with torch.no_grad():
            assert_matches_eager(program, lambda: (make(3, 3, 3),), compile_fn=compile_fn, versions="exact")


def _views_sharing_a_transposed_view(x0: T) -> object:
    t0 = x0.view(x0.shape)
    t0.t_()
    with torch.no_grad():
        t1 = t0.unsqueeze(0)
    return t0, t1, t0.select(0, 0)


@pytest.mark.parametrize("kind", _KINDS)
def test_views_sharing_a_view_changed_in_place_count_as_eager(kind: str, compile_fn: CompileFn | None) -> None:
    # the no_grad view t1 is replayed first and makes t0 (t_() and all); t0's replay reuses it and repeats no t_():
    # made at the count less one, it was left one behind eager's
    make = pair_nonleaf if kind == "pair" else nonleaf
    assert_matches_eager(
        _views_sharing_a_transposed_view, lambda: (make(2, 3),), compile_fn=compile_fn, versions="exact"
    )


# ---------------------------------------------------------------------------------------------------------------------
# fuzz seed 123294 --versions exact (programs 240, 30): an input view requiring grad whose count the epilogue kept as it
# moved (EpiloguePlan.recorded) ended at 1 where eager's is 2. A Function's mark_dirty with grad is repeated by one copy_
# with grad (EpiloguePlan.counted: CountedStep.ORIGINAL_COPY); two set_() onto itself with grad by one set_() before
# the call (CountedStep.EARLY_SET): each lands on eager's count from eager's count less one. Written after the two
# set_() (program 30 again, shrunk anew: the add_ ends at 3, ours at 2, the early set_() then the copy), the copy is the
# epilogue's last step on the counter and the one that lands (CountedStep.ORIGINAL_COPY).
# ---------------------------------------------------------------------------------------------------------------------


def _viewed_then_marked_dirty(x0: T) -> object:
    t0 = x0.view(1, 2, 4)
    DirtyScale.apply(x0)  # type: ignore[no-untyped-call]  # torch leaves Function.apply unannotated
    return (t0,)


def _set_to_itself_twice(x0: T) -> object:
    set_to(x0, x0)
    set_to(x0, x0)
    return (x0,)


def _set_to_itself_twice_then_written(x0: T) -> object:
    set_to(x0, x0)
    set_to(x0, x0)
    x0.add_(x0)
    return (x0,)


@pytest.mark.parametrize(
    "program", [_viewed_then_marked_dirty, _set_to_itself_twice, _set_to_itself_twice_then_written]
)
def test_input_view_with_history_recorded_counts_as_eager(
    program: Callable[[T], object], compile_fn: CompileFn | None
) -> None:
    from subclassaot.tools.parity import write_outputs

    def make() -> tuple[object, ...]:
        return (nonleaf(2, 1, 4).transpose(2, 1),)

    with torch.enable_grad():
        assert_matches_eager(program, make, compile_fn=compile_fn, versions="exact")
        assert_matches_eager(program, make, compile_fn=compile_fn, versions="exact", after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------------
# fuzz seed 123300 --versions exact (program 265): two input views of one element of a base requiring grad, one of them
# marked dirty by a Function, ended at 1 where eager's is 2 (the write and the mark, on the counter both share): the
# epilogue repeats them by one copy to their synthetic base, its last step on the members' counter, which lands on
# eager's count (EpiloguePlan.counted: CountedStep.BASE_COPY).
# ---------------------------------------------------------------------------------------------------------------------


def _one_alias_marked_dirty(x0: T, x1: T) -> object:
    DirtyScale.apply(x1)  # type: ignore[no-untyped-call]  # torch leaves Function.apply unannotated
    return (x0,)


def test_aliases_written_through_their_base_count_as_eager(compile_fn: CompileFn | None) -> None:
    # (plain only: a PairTensor input marked dirty beside a view of it is refused, Note [Custom Functions])
    from subclassaot.tools.parity import write_outputs

    def make() -> tuple[object, ...]:
        base = nonleaf(4)
        return (base.as_strided((), (), 2), base.as_strided((), (), 2))

    with torch.enable_grad():
        assert_matches_eager(_one_alias_marked_dirty, make, compile_fn=compile_fn, versions="exact")
        assert_matches_eager(
            _one_alias_marked_dirty, make, compile_fn=compile_fn, versions="exact", after_call=write_outputs
        )


# ---------------------------------------------------------------------------------------------------------------------
# fuzz seed 123300 --versions exact (program 316): a fresh output of the graph written, then set_() onto itself under
# grad, ended at 1 where eager's is 2. The training Function gave its output eager's count, but eager's set_ node is
# made on a holder of its own (set_under_grad_holder), a new tensor: its set_() lands on eager's count.
# ---------------------------------------------------------------------------------------------------------------------


def _fresh_written_then_set_onto_itself(x0: T) -> object:
    t0 = x0 * 3
    t0.zero_()
    set_to(t0, t0)
    return (x0, t0)


def _function_output_written_then_set_onto_itself(x0: T) -> object:
    t0 = TransposeSaved.apply(x0.diagonal(0, 0, 1))  # type: ignore[no-untyped-call]  # Function.apply is unannotated
    t0.zero_()
    set_to(t0, t0)
    return (x0, t0)


@pytest.mark.parametrize(
    "program", [_fresh_written_then_set_onto_itself, _function_output_written_then_set_onto_itself]
)
@pytest.mark.parametrize("kind", _KINDS)
def test_fresh_output_set_onto_itself_under_grad_counts_as_eager(
    program: Callable[[T], object], kind: str, compile_fn: CompileFn | None
) -> None:
    from subclassaot.tools.parity import write_outputs

    def make() -> tuple[object, ...]:
        return (pair_nonleaf(4, 1) if kind == "pair" else nonleaf(4, 1),)

    with torch.enable_grad():
        assert_matches_eager(program, make, compile_fn=compile_fn, versions="exact")
        assert_matches_eager(program, make, compile_fn=compile_fn, versions="exact", after_call=write_outputs)


# ---------------------------------------------------------------------------------------------------------------
# torch.library custom ops that write their arguments (`mutates_args`)


@pytest.mark.parametrize("two", [False, True], ids=["plain", "two_tensor"])
@pytest.mark.parametrize(
    ("fn", "make"),
    [
        (custom_op_writes_input, _randn_2x3),  # its body's add_ advances a plain input's counter once more
        (custom_op_writes_view_of_input, _randn_2x3),
        (custom_op_writes_out_and_returns, _x_and_out),  # its body's copy_ into `out`
    ],
    ids=["input", "view_of_input", "out_arg"],
)
def test_custom_op_mutating_its_argument_counts_as_eager(
    fn: Callable[..., object], make: Callable[[bool], tuple[object, ...]], two: bool, compile_fn: CompileFn | None
) -> None:
    # The dispatcher advances each argument of `mutates_args` once (the op's ADInplaceOrView kernel) and the body as
    # often as it writes a plain one (eager: 2 for `x.add_(1)` in the body; a TwoTensor's outer counter: 1). Before:
    # the trace raised NotImplementedError (auto_functionalized_v2 under a subclass of FakeTensorMode), then counted
    # no bump (the op's name has no trailing underscore).
    assert_matches_eager(fn, lambda: make(two), versions="exact", compile_fn=compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# Ops declared by a schema alone (torch.library.Library.define, a CompositeExplicitAutograd kernel): no ADInplaceOrView
# kernel, so the dispatcher moves no counter, whatever the op's name; the body's writes move a plain argument's (a
# written list's members too) as they run, and a TwoTensor's body runs on its inner tensors below autograd, moving
# nothing the program sees. Before: a `name_` op (and a kwarg-only written argument, as an out= one) advanced the
# counter once, a TwoTensor's too, and a written list's members stayed at 0.

_SCHEMA_LIB = torch.library.Library("version_counters", "DEF")  # type: ignore[no-untyped-call]
_SCHEMA_LIB.define("write_twice_(Tensor(a!) x) -> ()")  # type: ignore[no-untyped-call]
_SCHEMA_LIB.define("write_each(Tensor a, Tensor(a!)[] xs, *, Tensor(b!) out) -> ()")  # type: ignore[no-untyped-call]


def _write_twice(x: T) -> None:
    x.add_(1)
    x.mul_(2)


def _write_each(a: T, xs: list[T], *, out: T) -> None:
    for x in xs:
        x.add_(a)
    out.copy_(a)


_SCHEMA_LIB.impl("write_twice_", _write_twice, "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]
_SCHEMA_LIB.impl("write_each", _write_each, "CompositeExplicitAutograd")  # type: ignore[no-untyped-call]


def schema_op_writing_twice(x: T) -> object:
    torch.ops.version_counters.write_twice_(x)
    return x * 2


def schema_op_writing_a_list_and_out(a: T, x0: T, x1: T, out: T) -> object:
    torch.ops.version_counters.write_each(a, [x0, x1], out=out)
    return out + x0


_SCHEMA_VARIANTS = [(False, False), (True, False), (False, True)]  # (TwoTensor inputs, dynamic)


@pytest.mark.parametrize(("two", "dynamic"), _SCHEMA_VARIANTS, ids=["plain", "two_tensor", "plain_dynamic"])
def test_schema_op_named_in_place_counts_its_body_writes(
    two: bool, dynamic: bool, compile_fn: CompileFn | None
) -> None:
    # eager: 2 (the body's add_ and mul_), a TwoTensor's 0; ours was 1 for both
    assert_matches_eager(
        schema_op_writing_twice,
        lambda: (inp(torch.randn(2, 3), two),),
        versions="exact",
        compile_fn=compile_fn,
        compile_kwargs={"dynamic": dynamic},
    )


@pytest.mark.parametrize(("two", "dynamic"), _SCHEMA_VARIANTS, ids=["plain", "two_tensor", "plain_dynamic"])
def test_schema_op_writing_a_list_counts_its_members(two: bool, dynamic: bool, compile_fn: CompileFn | None) -> None:
    # eager: each member of `xs` and `out` 1, a TwoTensor's 0; ours was 0 for the members, 1 for `out` either way
    assert_matches_eager(
        schema_op_writing_a_list_and_out,
        lambda: tuple(inp(torch.randn(2, 3), two) for _ in range(4)),
        versions="exact",
        compile_fn=compile_fn,
        compile_kwargs={"dynamic": dynamic},
    )


# ---------------------------------------------------------------------------------------------------------------
# A write eager's kernel makes without moving a counter: batch norm in training writes its running statistics
# (native_batch_norm's schema says no write; the `_native_batch_norm_legit` it runs as says one, but is no in-place
# op by name: no ADInplaceOrView kernel). Views taken before it are not stale by it, and no output's counter moves.


def _batch_norm(api: str, batch: T, mean: T, var: T) -> T:
    if api == "native":
        return torch.native_batch_norm(batch, None, None, mean, var, True, 0.1, 1e-05)[0]
    return torch.nn.functional.batch_norm(batch, mean, var, training=True, momentum=0.1, eps=1e-05)


def _views_of_the_input_then_its_element_written(api: str, x0: T) -> object:
    # fuzz seed 121005, program 9127: both views came back at counter 1 (built as stale, then advanced), eager's 0
    t0 = x0.transpose(0, 0)
    t1 = t0.view((3, 1, 1))
    t2 = t1.view((1, 1, 3))
    _batch_norm(api, t0.clone().reshape(-1, 1), t1[0, 0], torch.ones(1))
    return (t2, t0)


def _views_of_an_intermediate_then_its_element_written(api: str, x0: T) -> object:
    t = x0 * 2
    v, w = t.view(-1), t[0]
    y = _batch_norm(api, x0.clone().reshape(-1, 1), torch.zeros(1), t.view(3, 1)[1].abs())
    z = _batch_norm(api, x0.clone().reshape(-1, 1), t.view(3, 1)[0], torch.ones(1))
    return (v, w, y, z)


def _a_chain_of_the_input_then_its_variance_written(api: str, x0: T) -> object:
    t0 = x0.view(3)
    t1 = t0.unsqueeze(0)
    y = _batch_norm(api, x0.clone().reshape(-1, 1) * 3, torch.zeros(1), t0[1:2])
    return (t1, y, t0, x0.transpose(0, 2))


_UNBUMPED_WRITES = [
    _views_of_the_input_then_its_element_written,
    _views_of_an_intermediate_then_its_element_written,
    _a_chain_of_the_input_then_its_variance_written,
]


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("api", ["native", "functional"])
@pytest.mark.parametrize("program", _UNBUMPED_WRITES)
@pytest.mark.parametrize("kind", _KINDS)
def test_views_taken_before_batch_norm_writes_running_statistics_stay_fresh(
    kind: str, program: Callable[[str, T], object], api: str, grad: bool, compile_fn: CompileFn | None
) -> None:
    with torch.set_grad_enabled(grad):
        assert_matches_eager(
            functools.partial(program, api), lambda: (_input(kind, 1, 3, 1),), compile_fn=compile_fn, versions="exact"
        )
