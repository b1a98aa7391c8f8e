"""Fuzz regressions (seed 3000): set_() under grad of subclass tensors, outputs and inputs that gain grad.

Newly supported programs get a parity test; the refusals that stay get a test naming the rule. With
`--identity-compile` (eager against eager) every program here must pass the oracle (it is eager-legal).
"""

from __future__ import annotations

import torch

from subclasses.pair import nested_example
from tests.oracle import CompileFn
from tests.pipeline.corpus import set_to
from tests.pipeline.fuzz_helpers import check_with_grad as _check
from tests.pipeline.fuzz_helpers import pair, pair_nonleaf
from tests.pipeline.fuzz_helpers import refused_with_grad as assert_refused

T = torch.Tensor
GRAD_SET_RULE = r"set_\(\)s it with grad enabled to a tensor .*Note \[Inputs That Gain Grad In Training\]"


# ---------------------------------------------------------------------------------------------------------------
# A subclass output set_() under grad (Note [Outputs set_() Under Grad])


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

    assert_refused(f, lambda: (torch.randn(1, 3, requires_grad=True),), compile_fn, "that is a view cannot have")


def test_subclass_view_set_under_grad(compile_fn: CompileFn | None) -> None:
    # fuzz seed 3000 #8719: a view set_() under grad rebases its base in eager; refused before, supported since
    # fuzz seed 40000 (Note [Views Of Inputs set_() Under Grad])
    def f(x0: T) -> object:
        t0 = x0.transpose(0, 0)
        set_to(t0, t0)
        return (t0,)

    _check(f, lambda: (pair_nonleaf(3, 3),), compile_fn)


# ---------------------------------------------------------------------------------------------------------------
# A subclass input that gains grad by set_() (Note [Inputs That Gain Grad In Training])


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

    assert_refused(
        f, lambda: (pair(), pair(requires_grad=True)), compile_fn, "not an input or a view of one taken with grad"
    )


def test_subclass_input_set_to_intermediate_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        set_to(x0, x1 * 3)
        return ()

    assert_refused(f, lambda: (pair(1), pair_nonleaf(4, 1)), compile_fn, GRAD_SET_RULE)


def test_subclass_input_written_after_grad_set_refused(compile_fn: CompileFn | None) -> None:
    def f(x0: T, x1: T) -> object:
        set_to(x0, x1)
        x0.mul_(2)
        return ()

    assert_refused(f, lambda: (pair(1), pair_nonleaf(4, 1)), compile_fn, "or changes it after")


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

    assert_refused(f, make_inputs, compile_fn, "inner tensors are tensor subclasses too")
    assert_refused(g, make_inputs, compile_fn, "nested tensor subclass")
