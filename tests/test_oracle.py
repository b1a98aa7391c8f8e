"""The oracle must be able to fail: each test hands it a deliberately wrong "compiled" function.

These run without the pipeline: `compile_fn` replaces `subclassaot.compile` with a fake that wraps the program.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

from subclassaot.tools.parity import write_outputs
from subclasses.pair import PairTensor
from tests.backends import CountingBackend, MutatingBackend, RecordingBackend, mutating_nodes
from tests.oracle import Call, assert_matches_eager, assert_raises_like_eager

Fn = Callable[..., object]


def two(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch's own TwoTensor (untyped), so that these self-tests do not depend on our subclasses."""
    out: torch.Tensor = TwoTensor(a, b)  # type: ignore[no-untyped-call]
    return out


def set_to(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """`x.set_(y)`, which torch's stubs do not accept (they only list the storage overloads)."""
    out: torch.Tensor = x.set_(y)  # type: ignore[call-overload]
    return out


def identity_compile(fn: Fn, **kwargs: object) -> Fn:
    return fn


def fake_compile(wrap: Callable[[Fn], Fn]) -> Callable[..., Fn]:
    """A compile function that returns `wrap(fn)`, ignoring backend and options."""

    def compile_fn(fn: Fn, **kwargs: object) -> Fn:
        return wrap(fn)

    return compile_fn


def on_output(transform: Callable[[torch.Tensor], object]) -> Callable[..., Fn]:
    def wrap(fn: Fn) -> Fn:
        def run(*args: object, **kwargs: object) -> object:
            out = fn(*args, **kwargs)
            assert isinstance(out, torch.Tensor)
            return transform(out)

        return run

    return fake_compile(wrap)


def on_clones(fn: Fn) -> Fn:
    """Runs the program on clones of its tensor inputs: every input mutation is lost."""

    def run(*args: object) -> object:
        return fn(*(a.clone() if isinstance(a, torch.Tensor) else a for a in args))

    return run


def one_input() -> tuple[object, ...]:
    return (torch.randn(3, 4),)


def test_identity_compile_passes_on_a_program_with_every_kind_of_effect() -> None:
    def f(x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> object:
        x.add_(1)
        y.t_()
        set_to(z, torch.ones(2))
        return {"a": x.view(-1), "b": [x, y * 2]}, x.shape[0], None

    assert_matches_eager(f, lambda: (torch.randn(2, 2), torch.randn(2, 3), torch.zeros(3)), compile_fn=identity_compile)


def test_a_view_whose_grad_fn_read_raises_index_error_is_compared_not_crashed() -> None:
    # fuzz seed 13000 #1259: after x1.transpose_, reading x0.is_leaf replays select(0, -3) on the transposed base and
    # raises IndexError in eager too; the oracle records that as a fact on both sides
    def f(x0: torch.Tensor, x1: torch.Tensor) -> object:
        x1.transpose_(0, 1)
        return ()

    @torch.enable_grad()
    def make_inputs() -> tuple[object, ...]:
        b = PairTensor.from_tensor(torch.randn(4, 1)).requires_grad_().clone()
        return (b.select(0, -3), b)

    with torch.no_grad():
        assert_matches_eager(f, make_inputs)  # the pipeline keeps x0 a view of x1 (identity_compile clones inputs)


def test_the_view_node_named_in_a_multi_output_view_error_is_not_compared() -> None:
    """Eager's reshape() of a split() view of a plain tensor makes a _reshape_alias (the grad_fn read after a write
    raises "Output 0 of ReshapeAlias is a view ..."), a view() of a subclass-like tensor a View: dispatch detail.
    That the read raises, and why, is compared."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return x.split_with_sizes([1, 2], 1)[0].reshape(2, 1, 1)

    def viewed(x: torch.Tensor) -> torch.Tensor:
        return x.split_with_sizes([1, 2], 1)[0].view(2, 1, 1)

    def fresh(x: torch.Tensor) -> torch.Tensor:
        return x[:, :1].view(2, 1, 1)  # no multi-output view: the read after the write does not raise

    @torch.enable_grad()
    def make() -> tuple[object, ...]:
        return (torch.randn(2, 3, requires_grad=True).clone(),)

    with torch.enable_grad():
        assert_matches_eager(f, make, compile_fn=fake_compile(lambda fn: viewed), after_call=write_outputs)
        with pytest.raises(AssertionError, match=r"output: is_leaf False vs eager 'raises RuntimeError"):
            assert_matches_eager(f, make, compile_fn=fake_compile(lambda fn: fresh), after_call=write_outputs)


def test_identity_compile_passes_with_aliased_inputs_kwargs_and_grads() -> None:
    def make() -> Call:
        leaf = torch.randn(4, requires_grad=True)
        base = torch.randn(4, 4)
        return Call(args=(base, base[1], leaf.clone()), kwargs={"w": leaf, "scale": 2.0})

    def f(base: torch.Tensor, row: torch.Tensor, c: torch.Tensor, *, w: torch.Tensor, scale: float) -> object:
        row.mul_(scale)
        c.mul_(2)
        return base.sum(0) * w, c

    assert_matches_eager(f, make, compile_fn=identity_compile)


def test_wrong_value_is_reported() -> None:
    with pytest.raises(AssertionError, match=r"(?s)call 0.*output: values differ from eager"):
        assert_matches_eager(lambda x: x * 2, one_input, compile_fn=on_output(lambda o: o + 1))


def test_a_dropped_python_attribute_is_reported() -> None:
    # hcorpus17: a program that sets `y.flag = 1` on a tensor it returns, or on an input, passed where the compiled
    # call's tensor lacked it (the oracle compared no `__dict__` entry)
    def set_flag(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        y.flag = 1  # type: ignore[attr-defined]
        x.flag = "on"  # type: ignore[attr-defined]
        return y

    def dropped(fn: Fn) -> Fn:
        def run(*args: object) -> object:
            (x,) = args
            assert isinstance(x, torch.Tensor)
            return x * 2

        return run

    with pytest.raises(
        AssertionError, match=r"(?s)output: Python attributes \[\] vs eager \['flag'\].*args\[0\] after"
    ):
        assert_matches_eager(set_flag, one_input, compile_fn=fake_compile(dropped))
    with pytest.raises(AssertionError, match=r"output.flag: int 2 vs eager int 1"):
        assert_matches_eager(set_flag, one_input, compile_fn=on_output(_flagged(2)))
    assert_matches_eager(set_flag, one_input, compile_fn=identity_compile)


def _flagged(value: object) -> Callable[[torch.Tensor], object]:
    def transform(o: torch.Tensor) -> object:
        o.flag = value  # type: ignore[attr-defined]
        return o

    return transform


def test_wrong_stride_is_reported() -> None:
    with pytest.raises(AssertionError, match=r"output: stride \(1, 3\) vs eager \(4, 1\)"):
        assert_matches_eager(lambda x: x * 2, one_input, compile_fn=on_output(lambda o: o.t().contiguous().t()))


def test_wrong_shape_and_dtype_are_reported() -> None:
    with pytest.raises(AssertionError, match=r"output: shape \(12,\) vs eager \(3, 4\)"):
        assert_matches_eager(lambda x: x * 2, one_input, compile_fn=on_output(lambda o: o.reshape(-1).clone()))
    with pytest.raises(AssertionError, match=r"output: dtype torch.float64 vs eager torch.float32"):
        assert_matches_eager(lambda x: x * 2, one_input, compile_fn=on_output(lambda o: o.double()))


def complex_input() -> tuple[object, ...]:
    return (torch.randn(3, 4, dtype=torch.cfloat),)


def test_a_materialized_conjugate_or_negative_is_reported() -> None:
    """A lazy conj view (is_conj) and its imag (is_neg, a negative view) are what a user reads and writes through:
    a compiled output that holds the same values resolved is a difference."""
    with pytest.raises(AssertionError, match=r"output: is_conj False vs eager True"):
        assert_matches_eager(lambda x: (x * 2).conj(), complex_input, compile_fn=on_output(lambda o: o.resolve_conj()))
    with pytest.raises(AssertionError, match=r"output: is_neg False vs eager True"):
        assert_matches_eager(
            lambda x: (x * 2).conj().imag, complex_input, compile_fn=on_output(lambda o: o.resolve_neg())
        )


def test_a_grad_mode_left_switched_is_compared() -> None:
    """A program that switches grad mode for good leaves it switched in eager: a compiled call that puts it back is
    caught, and the mode is restored between the two sides (else the second side's inputs are made in it)."""

    def leaves_grad_off(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        torch.set_grad_enabled(False)
        return y

    def restoring(fn: Callable[..., object], **kwargs: object) -> Callable[..., object]:
        def run(*args: object) -> object:
            with torch.set_grad_enabled(torch.is_grad_enabled()):
                return fn(*args)

        return run

    with torch.enable_grad():
        with pytest.raises(AssertionError, match=r"torch.is_grad_enabled\(\) after the call: True vs eager False"):
            assert_matches_eager(leaves_grad_off, lambda: (torch.randn(3, requires_grad=True),), compile_fn=restoring)
        assert torch.is_grad_enabled()
        assert_matches_eager(leaves_grad_off, lambda: (torch.randn(3, requires_grad=True),))  # the pipeline's leaves it
        assert torch.is_grad_enabled()


def test_missing_input_mutation_is_reported() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x + 1

    with pytest.raises(AssertionError) as info:
        assert_matches_eager(f, one_input, compile_fn=fake_compile(on_clones))
    message = str(info.value)
    assert "args[0] after the call: values differ from eager" in message
    assert "args[0] after the call: version counter unchanged vs eager changed" in message


def test_missing_metadata_mutation_is_reported() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        x.t_()
        return x + 1

    with pytest.raises(AssertionError, match=r"args\[0\] after the call: shape \(3, 4\) vs eager \(4, 3\)"):
        assert_matches_eager(f, one_input, compile_fn=fake_compile(on_clones))


def test_broken_output_aliasing_is_reported() -> None:
    with pytest.raises(AssertionError) as info:
        assert_matches_eager(lambda x: x.view(-1), one_input, compile_fn=on_output(lambda o: o.clone()))
    message = str(info.value)
    assert "aliasing: args[0] and output: unrelated vs eager shares storage with" in message
    assert "aliasing: output._base: not a view vs eager a view of args[0]" in message


def test_output_that_should_be_the_input_object_is_reported() -> None:
    with pytest.raises(AssertionError, match=r"args\[0\] and output: shares storage with vs eager is the same object"):
        assert_matches_eager(lambda x: x, one_input, compile_fn=on_output(lambda o: o.view_as(o)))


def test_outputs_that_alias_each_other_wrongly_are_reported() -> None:
    def wrong(fn: Fn) -> Fn:
        def run(x: torch.Tensor) -> object:
            out = fn(x)
            assert isinstance(out, tuple)
            return out[0], out[0]

        return run

    with pytest.raises(AssertionError, match=r"output\[0\] and output\[1\]: is the same object as vs eager unrelated"):
        assert_matches_eager(lambda x: (x + 1, x + 1), one_input, compile_fn=fake_compile(wrong))


def test_missing_storage_swap_is_reported() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        set_to(x, y)
        return x * 1

    def wrong(fn: Fn) -> Fn:
        def run(x: torch.Tensor, y: torch.Tensor) -> object:
            with torch.no_grad():
                set_to(x, y.clone())
            return x * 1

        return run

    with pytest.raises(AssertionError, match=r"args\[0\] and args\[1\]: unrelated vs eager shares storage with"):
        assert_matches_eager(f, lambda: (torch.randn(3), torch.randn(3)), compile_fn=fake_compile(wrong))


def test_wrong_version_counter_is_reported() -> None:
    def wrong(fn: Fn) -> Fn:
        def run(x: torch.Tensor) -> object:
            x.add_(0)  # same values, but a bump eager does not make
            return fn(x)

        return run

    with pytest.raises(AssertionError, match=r"args\[0\] after the call: version counter changed vs eager unchanged"):
        assert_matches_eager(lambda x: x * 2, one_input, compile_fn=fake_compile(wrong))


def test_hidden_mutation_must_not_bump_the_version_counter() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        x.data.mul_(2)
        return x + 1

    def wrong(fn: Fn) -> Fn:
        def run(x: torch.Tensor) -> object:
            with torch.no_grad():
                x.mul_(2)
            return x + 1

        return run

    def make() -> tuple[object, ...]:
        return (torch.randn(3, requires_grad=True),)

    assert_matches_eager(f, make, compile_fn=identity_compile)
    with pytest.raises(AssertionError, match=r"version counter changed vs eager unchanged"):
        assert_matches_eager(f, make, compile_fn=fake_compile(wrong))


def test_wrong_gradient_is_reported() -> None:
    def make() -> tuple[object, ...]:
        return (torch.randn(3, requires_grad=True),)

    doubled_grad = on_output(lambda o: o + (o - o.detach()))
    with pytest.raises(AssertionError, match=r"args\[0\]\.grad: values differ from eager"):
        assert_matches_eager(lambda x: x.sin(), make, compile_fn=doubled_grad)


def test_missing_gradient_and_requires_grad_are_reported() -> None:
    def make() -> tuple[object, ...]:
        return (torch.randn(3, requires_grad=True),)

    with pytest.raises(AssertionError) as info:
        assert_matches_eager(lambda x: x.sin(), make, compile_fn=on_output(lambda o: o.detach()))
    message = str(info.value)
    assert "output: requires_grad False vs eager True" in message
    assert "args[0].grad: None vs eager a tensor" in message


def test_wrong_output_structure_and_scalars_are_reported() -> None:
    with pytest.raises(AssertionError, match=r"output pytree structure"):
        assert_matches_eager(lambda x: (x + 1,), one_input, compile_fn=fake_compile(lambda fn: lambda x: [x + 1]))
    with pytest.raises(AssertionError, match=r"output\[1\]: int 3 vs eager int 4"):
        assert_matches_eager(
            lambda x: (x + 1, x.shape[1]), one_input, compile_fn=fake_compile(lambda fn: lambda x: (x + 1, 3))
        )


def test_only_a_later_call_being_wrong_is_reported_with_its_index() -> None:
    def wrong(fn: Fn) -> Fn:
        seen = [0]

        def run(x: torch.Tensor) -> object:
            seen[0] += 1
            out = fn(x)
            assert isinstance(out, torch.Tensor)
            return out if seen[0] == 1 else out + 1

        return run

    with pytest.raises(AssertionError, match=r"^call 1: "):
        assert_matches_eager(lambda x: x * 2, one_input, compile_fn=fake_compile(wrong))


def test_subclass_inner_tensor_and_type_are_compared() -> None:
    def make() -> tuple[object, ...]:
        return (two(torch.randn(3), torch.randn(3)),)

    def wrong_inner(fn: Fn) -> Fn:
        def run(x: TwoTensor) -> object:
            out = fn(x)
            assert isinstance(out, TwoTensor)
            return two(out.a, out.b + 1)

        return run

    assert_matches_eager(lambda x: x * 2, make, compile_fn=identity_compile)
    with pytest.raises(AssertionError, match=r"output\.b: values differ from eager"):
        assert_matches_eager(lambda x: x * 2, make, compile_fn=fake_compile(wrong_inner))
    with pytest.raises(AssertionError, match=r"output: type 'Tensor' vs eager 'TwoTensor'"):
        assert_matches_eager(lambda x: x * 2, make, compile_fn=fake_compile(lambda fn: lambda x: x.a * 2))


def test_subclass_view_rebuilt_from_inner_views_is_reported() -> None:
    """A view regenerated by unflatten shares the inner storages but not the wrapper's own storage or `_base`."""

    def make() -> tuple[object, ...]:
        return (two(torch.randn(2, 3), torch.randn(2, 3)),)

    def unflatten_views(fn: Fn) -> Fn:
        def run(x: TwoTensor) -> object:
            assert isinstance(x, TwoTensor)
            return two(x.a.view(-1), x.b.view(-1))

        return run

    with pytest.raises(AssertionError) as info:
        assert_matches_eager(lambda x: x.view(-1), make, compile_fn=fake_compile(unflatten_views))
    message = str(info.value)
    assert "args[0] and output: unrelated vs eager shares storage with" in message
    assert "output._base: not a view vs eager a view of args[0]" in message


def test_subclass_input_mutation_of_one_inner_tensor_is_reported() -> None:
    def make() -> tuple[object, ...]:
        return (two(torch.randn(3), torch.randn(3)),)

    def f(x: TwoTensor) -> torch.Tensor:
        x.add_(1)
        return x * 1

    def half(fn: Fn) -> Fn:
        def run(x: TwoTensor) -> object:
            assert isinstance(x, TwoTensor)
            with torch.no_grad():
                x.a.add_(1)
            return two(x.a * 1, x.b + 1)

        return run

    assert_matches_eager(f, make, compile_fn=identity_compile)
    with pytest.raises(AssertionError) as info:
        assert_matches_eager(f, make, compile_fn=fake_compile(half))
    message = str(info.value)
    assert "args[0].b after the call: values differ from eager" in message, message
    assert "args[0] after the call: version counter unchanged vs eager changed" in message


def test_module_buffers_are_compared() -> None:
    def make() -> tuple[object, ...]:
        return (torch.randn(4, 3),)

    def frozen_stats(fn: Fn) -> Fn:
        assert isinstance(fn, torch.nn.Module)
        module = fn

        def run(x: torch.Tensor) -> object:
            saved = {k: v.clone() for k, v in module.named_buffers()}
            out = module(x)
            with torch.no_grad():
                for k, v in module.named_buffers():
                    v.copy_(saved[k])
            return out

        return run

    bn = torch.nn.BatchNorm1d(3)
    assert_matches_eager(bn, make, compile_fn=identity_compile)
    with pytest.raises(AssertionError, match=r"self\.running_mean after the call: values differ from eager"):
        assert_matches_eager(bn, make, compile_fn=fake_compile(frozen_stats))


def test_after_call_failures_must_match() -> None:
    def mutate_output(out: object, args: tuple[object, ...]) -> None:
        assert isinstance(out, torch.Tensor)
        out.mul_(3)

    def make() -> tuple[object, ...]:
        return (torch.randn(3, requires_grad=True),)

    # In eager, the output is a view of a leaf that requires grad, so mutating it raises.
    with pytest.raises(AssertionError, match=r"after_call raised None vs eager RuntimeError"):
        assert_matches_eager(
            lambda x: x.view(-1), make, compile_fn=on_output(lambda o: o.detach().clone()), after_call=mutate_output
        )


def test_after_call_mutation_through_an_output_must_reach_the_input() -> None:
    def mutate_output(out: object, args: tuple[object, ...]) -> None:
        assert isinstance(out, torch.Tensor)
        out.mul_(3)

    assert_matches_eager(lambda x: x.view(-1), one_input, compile_fn=identity_compile, after_call=mutate_output)
    with pytest.raises(AssertionError, match=r"args\[0\] after the call: values differ from eager"):
        assert_matches_eager(
            lambda x: x.view(-1), one_input, compile_fn=on_output(lambda o: o.clone()), after_call=mutate_output
        )


def test_backward_failure_must_match() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        y = x * 1
        z = y.sin()
        y.mul_(2)  # sin saved y: eager's backward raises
        return z

    def make() -> tuple[object, ...]:
        return (torch.randn(3, requires_grad=True),)

    assert_matches_eager(f, make, compile_fn=identity_compile)
    with pytest.raises(AssertionError, match=r"backward raised None vs eager RuntimeError"):
        assert_matches_eager(f, make, compile_fn=fake_compile(lambda fn: lambda x: (x * 2).sin()), atol=10, rtol=10)


class _NoBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: object, g: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError("no backward formula")


def test_backward_failure_of_another_type_is_reported() -> None:
    def f(x: torch.Tensor) -> object:
        return _NoBackward.apply(x)  # type: ignore[no-untyped-call]

    def retyped(x: torch.Tensor) -> object:
        out = f(x)
        assert isinstance(out, torch.Tensor)

        def hook(g: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("no backward formula")

        out.register_hook(hook)  # type: ignore[no-untyped-call]
        return out

    def make() -> tuple[object, ...]:
        return (torch.randn(3, requires_grad=True),)

    assert_matches_eager(f, make, compile_fn=identity_compile)
    with pytest.raises(AssertionError, match=r"backward raised RuntimeError\(.*\) vs eager NotImplementedError"):
        assert_matches_eager(f, make, compile_fn=fake_compile(lambda fn: retyped))


def test_gradient_sharing_the_tangent_the_caller_holds_is_reported() -> None:
    # eager's AccumulateGrad copies a gradient the caller still holds (x.clone()'s backward passes it through)
    def make() -> tuple[object, ...]:
        return (torch.randn(3, requires_grad=True),)

    class _Through(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
            return x.clone()

        @staticmethod
        def backward(ctx: object, g: torch.Tensor) -> torch.Tensor:
            return g.view_as(g)  # a new tensor over the caller's memory, which AccumulateGrad takes

    def through(fn: Fn) -> Fn:
        applied: Fn = _Through.apply
        return applied

    assert_matches_eager(lambda x: x.clone(), make, compile_fn=identity_compile)
    with pytest.raises(AssertionError, match=r"args\[0\]\.grad and the tangent .*: shares storage with vs eager"):
        assert_matches_eager(lambda x: x.clone(), make, compile_fn=fake_compile(through))


def test_eager_failure_is_a_test_bug() -> None:
    with pytest.raises(AssertionError, match=r"eager itself raised"):
        assert_matches_eager(lambda x: x.view(5), one_input, compile_fn=identity_compile)


def test_assert_raises_like_eager() -> None:
    def bad(x: torch.Tensor) -> torch.Tensor:
        return x.view(5)

    err = assert_raises_like_eager(bad, one_input, compile_fn=identity_compile)
    assert isinstance(err, RuntimeError)
    with pytest.raises(AssertionError, match=r"compiled function returned normally"):
        assert_raises_like_eager(bad, one_input, compile_fn=fake_compile(lambda fn: lambda x: x.reshape(-1)[:5]))
    with pytest.raises(AssertionError, match=r"eager did not raise"):
        assert_raises_like_eager(lambda x: x + 1, one_input, compile_fn=identity_compile)


def test_test_backends_do_what_they_say() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.add_(1) * 2

    gm = torch.fx.symbolic_trace(f)
    recording, counting, broken = RecordingBackend(), CountingBackend(), MutatingBackend()
    x = torch.zeros(2)
    assert torch.equal(recording(gm, (x,))(torch.zeros(2)), torch.full((2,), 2.0))  # type: ignore[arg-type]
    assert recording.graphs == [gm]
    counting(gm, (x,))
    assert counting.count == 1
    y = torch.zeros(2)
    broken(gm, (x,))(y)
    assert torch.equal(y, torch.full((2,), 2.0))
    assert broken.calls == 1


def test_mutating_nodes_finds_in_place_ops() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    def f(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        x.add_(1)
        return y

    assert mutating_nodes(make_fx(f)(torch.zeros(2))) == ["add_ = aten.add_.Tensor"]
    assert mutating_nodes(make_fx(lambda x: x * 2)(torch.zeros(2))) == []


def test_wrong_gradient_behind_a_nonleaf_input_is_reported() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x.sin()

    def make() -> tuple[object, ...]:
        return (torch.randn(3, requires_grad=True).clone(),)

    def mutation_without_grad(fn: Fn) -> Fn:
        def run(x: torch.Tensor) -> object:
            with torch.no_grad():
                x.mul_(2)
            return x.sin()

        return run

    assert_matches_eager(f, make, compile_fn=identity_compile)
    with pytest.raises(AssertionError, match=r"leaf 0 behind args\[0\]\.grad: values differ from eager"):
        assert_matches_eager(f, make, compile_fn=fake_compile(mutation_without_grad))


def test_wrong_history_of_a_written_input_not_returned_is_reported() -> None:
    """The caller holds every input: one the call wrote (its version counter moved) is pushed back through too, so
    a history lost on an input the program does not return shows in the gradients (plain and PairTensor)."""

    def f(x: torch.Tensor) -> object:
        x.mul_(2)
        return ()

    def mutation_without_grad(fn: Fn) -> Fn:
        def run(x: torch.Tensor) -> object:
            with torch.no_grad():
                x.mul_(2)
            return ()

        return run

    for make in (
        lambda: (torch.randn(3, requires_grad=True).clone(),),
        lambda: (PairTensor.from_tensor(torch.randn(3), requires_grad=True).clone(),),
    ):
        with torch.enable_grad():
            assert_matches_eager(f, make, compile_fn=identity_compile)
            with pytest.raises(AssertionError, match=r"leaf 0 behind args\[0\]\.grad(\.a)?: values differ from eager"):
                assert_matches_eager(f, make, compile_fn=fake_compile(mutation_without_grad))


def test_wrong_values_of_a_hidden_base_are_reported() -> None:
    # fuzz seed 9000 #3608: an output's `._base` that no one else returns is the user's to read too
    def f(x: torch.Tensor) -> object:
        return (x * 2)[1:]

    def scribble_base(out: torch.Tensor) -> object:
        assert out._base is not None
        out._base[0] = 99.0
        return out

    with pytest.raises(AssertionError, match=r"output\._base: values differ from eager"):
        assert_matches_eager(f, one_input, compile_fn=on_output(scribble_base))


def _requires_grad_(x: torch.Tensor) -> torch.Tensor:
    x.requires_grad_()
    return x.sin()


def _requires_grad_set(x: torch.Tensor) -> torch.Tensor:
    x.requires_grad = True
    return x.sin()


def _base_requires_grad(x: torch.Tensor) -> torch.Tensor:
    base = x._base
    assert base is not None
    base.requires_grad_()
    return base.sin()


_MADE_TO_REQUIRE_GRAD = {
    "requires_grad_": (_requires_grad_, "args[0]"),
    "requires_grad = True": (_requires_grad_set, "args[0]"),
    "base of a view input": (_base_requires_grad, r"args[0]._base"),
}


@pytest.mark.parametrize("how", list(_MADE_TO_REQUIRE_GRAD))
@pytest.mark.parametrize("kind", ["plain", "pair"])
def test_wrong_gradient_of_an_input_the_program_makes_require_grad_is_reported(how: str, kind: str) -> None:
    """Issue #27: the `.grad` of a leaf the call makes of an input (or of a view input's base) is compared, though
    the input did not require grad when passed (plain and PairTensor)."""
    f, name = _MADE_TO_REQUIRE_GRAD[how]

    def make() -> tuple[object, ...]:
        b = torch.randn(2, 3)
        t = PairTensor.from_tensor(b) if kind == "pair" else b
        return (t.view(6),) if how == "base of a view input" else (t,)

    assert_matches_eager(f, make, compile_fn=identity_compile)
    doubled_grad = on_output(lambda o: o + (o - o.detach()))
    inner = r"\.a" if kind == "pair" else ""
    expected = rf"{re.escape(name)} \(a leaf as the call left it\)\.grad{inner}: values differ from eager"
    with pytest.raises(AssertionError, match=expected):
        assert_matches_eager(f, make, compile_fn=doubled_grad)
    lost_grad = on_output(lambda o: o.detach().requires_grad_() * 1)  # (a history that reaches no input)
    lost = rf"{re.escape(name)} \(a leaf as the call left it\)\.grad: None vs eager a tensor"
    with pytest.raises(AssertionError, match=lost):
        assert_matches_eager(f, make, compile_fn=lost_grad)
