"""Storage resize_ inside a compiled program (FSDP2's pattern: `untyped_storage().resize_(0)` after use, resize_ to
full and copy_ before the next use) matches eager: storage bytes, values, aliasing, version counters (Note [Storage Swaps
By Rebinding]), on both entry points (through torch.compile, Dynamo's inductor::resize_storage_bytes_ is handed back
to the pipeline as the storage's resize_); what the pipeline cannot replay (a read of freed or unwritten bytes, a
subclass's storage) is refused with the input's name, never a crash; the same resize outside the compiled function,
between calls, matches eager; reading a storage's size inside the program stays supported."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch.autograd.grad_mode import _unsafe_preserve_version_counter

import subclassaot
from subclassaot.errors import UnsupportedError
from tests.oracle import CompileFn, assert_matches_eager
from tests.pipeline.corpus import set_to
from tests.pipeline.program_helpers import pair

T = torch.Tensor


def free_after_use(x: T, y: T) -> object:
    z = x * y
    x.untyped_storage().resize_(0)
    return z


def alloc_fill_use_free(x: T, src: T) -> object:  # FSDP2: alloc_storage, copy-out, use, free_storage
    x.untyped_storage().resize_(src.numel() * src.element_size())
    x.copy_(src)
    out = x * 2
    x.untyped_storage().resize_(0)
    return out


def alloc_and_fill(x: T, src: T) -> object:
    x.untyped_storage().resize_(src.numel() * src.element_size())
    with torch.no_grad():
        x.copy_(src)
    return x + 1


def free_intermediate(x: T) -> object:
    y = x * 2
    out = y.sum()
    y.untyped_storage().resize_(0)
    return out


def free_view_storage(x: T) -> object:
    v = x[1:]
    out = v + 1
    v.untyped_storage().resize_(0)
    return out


def _two() -> tuple[object, ...]:
    return torch.randn(4), torch.randn(4)


def _freed() -> tuple[object, ...]:
    x = torch.randn(4)
    x.untyped_storage().resize_(0)
    return x, torch.randn(4)


def free_returning_view(x: T) -> object:
    v = x[1:]
    out = v * 2
    x.untyped_storage().resize_(0)
    return out, v


def free_returning_input(x: T) -> object:
    out = x * 2
    x.untyped_storage().resize_(0)
    return out, x


def write_then_free(x: T, y: T) -> object:
    x.mul_(y)
    out = x + 1
    x.untyped_storage().resize_(0)
    return out


def _nbytes(args: tuple[object, ...]) -> list[int]:
    return [a.untyped_storage().nbytes() for a in args if isinstance(a, T)]


CASES = [
    (free_after_use, _two),
    (alloc_fill_use_free, _freed),
    (alloc_fill_use_free, _two),
    (alloc_and_fill, _freed),
    (free_intermediate, lambda: (torch.randn(4),)),
    (free_view_storage, lambda: (torch.randn(4),)),
    (free_returning_view, lambda: (torch.randn(4),)),
    (write_then_free, _two),
    (free_returning_input, lambda: (torch.randn(4),)),
]
IDS = [
    "free_after_use",
    "alloc_fill_use_free",
    "alloc_fill_use_free_of_a_full_input",
    "alloc_and_fill",
    "free_intermediate",
    "free_view_storage",
    "free_returning_view",
    "write_then_free",
    "free_returning_input",
]


@pytest.mark.parametrize(("f", "make_inputs"), CASES, ids=IDS)
def test_storage_resize_matches_eager(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    """Outputs, inputs, aliasing and version counters through the oracle; the storages' byte counts after the call
    (the oracle sees only whether a storage holds its tensor's elements) compared here."""
    compiled = assert_matches_eager(f, make_inputs, compile_fn=compile_fn)
    torch.manual_seed(0)
    eager_args = make_inputs()
    torch.manual_seed(0)
    compiled_args = make_inputs()
    f(*eager_args)
    compiled(*compiled_args)
    assert _nbytes(compiled_args) == _nbytes(eager_args)


def test_storage_resize_at_new_sizes_matches_eager(compile_fn: CompileFn | None) -> None:
    """The byte counts are symbolic once a second size is seen; inputs come freed or whole."""
    compiled = (subclassaot.compile if compile_fn is None else compile_fn)(alloc_fill_use_free)
    for n in (4, 6, 8):
        for freed in (True, False):
            results = []
            for run in (alloc_fill_use_free, compiled):
                torch.manual_seed(n)
                x, src = torch.randn(n), torch.randn(n)
                if freed:
                    x.untyped_storage().resize_(0)
                results.append((run(x, src), x.untyped_storage().nbytes(), x._version))
            (e, eb, ev), (c, cb, cv) = results
            torch.testing.assert_close(c, e)
            assert (cb, cv) == (eb, ev)


def test_storage_resize_of_a_parameter_matches_eager(compile_fn: CompileFn | None) -> None:
    class Sharded(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(4))

        def forward(self, x: T) -> T:
            out = x * self.weight
            self.weight.untyped_storage().resize_(0)
            return out

    # one call: a second would read the freed weight (eager crashes reading a freed storage)
    assert_matches_eager(Sharded(), lambda: (torch.randn(4),), compile_fn=compile_fn, calls=1, check_grads=False)
    for run in (Sharded(), (subclassaot.compile if compile_fn is None else compile_fn)(module := Sharded())):
        with torch.no_grad():
            run(torch.randn(4))
    assert module.weight.untyped_storage().nbytes() == 0


def read_after_free(x: T) -> object:
    x.untyped_storage().resize_(0)
    return x + 1


def read_before_fill(x: T, src: T) -> object:
    x.untyped_storage().resize_(src.numel() * src.element_size())
    return x + src


def partial_fill(x: T, src: T) -> object:
    x.untyped_storage().resize_(src.numel() * src.element_size())
    with torch.no_grad():
        x[:2].copy_(src[:2])
    return x + 1


def left_unwritten(x: T, src: T) -> object:
    x.untyped_storage().resize_(0)
    x.untyped_storage().resize_(src.numel() * src.element_size())
    return src + 1


def returns_freed_intermediate(x: T) -> object:
    y = x * 2
    y.untyped_storage().resize_(0)
    return y


def grows_a_fresh_storage(x: T) -> object:
    t = torch.empty(0)
    t.untyped_storage().resize_(16)
    return x + 1


def reads_nbytes_after_free(x: T, y: T) -> object:
    out = x * y
    x.untyped_storage().resize_(0)
    return out * x.untyped_storage().nbytes()


def view_after_free(x: T) -> object:
    out = x * 2
    x.untyped_storage().resize_(0)
    return out, x[1:]


def fill_while_freed(x: T, src: T) -> object:
    x.untyped_storage().resize_(0)
    with torch.no_grad():
        x.copy_(src)
    return src + 1


def shrinks_an_input(x: T) -> object:
    out = x * 2
    x.untyped_storage().resize_(8)
    return out


def frees_after_an_as_strided_write(x: T) -> object:
    y = x.as_strided((2,), (1,), 0)  # elements before the input's offset: traced over its whole storage
    y.add_(1.0)
    x.untyped_storage().resize_(0)
    return y * 1


def _freed_scalar() -> tuple[object, ...]:
    b = torch.randn(())
    b.untyped_storage().resize_(0)
    return (b,)


def _freed_three() -> tuple[object, ...]:
    b = torch.randn(3)
    b.untyped_storage().resize_(0)
    return (b,)


def _view_of_eight() -> tuple[object, ...]:
    return (torch.randn(8)[2:4],)


# An input traced over its whole storage (Note [as_strided On Inputs]: a resize_() of it that grows its storage, an
# as_strided() write outside it) whose storage the program resizes: the base is the storage as passed, or as the
# input's elements need where it came freed (Note [Storage Swaps By Rebinding]).


def grows_its_storage_then_itself(x: T) -> object:  # fuzz seed 119000, program 521 (which named two inputs)
    x.untyped_storage().resize_(4)
    x.fill_(-1.0)
    x.resize_((2,))  # past its storage's elements: traced over its whole storage (Note [as_strided On Inputs])
    x.fill_(2.0)
    return x * 1


def grows_itself_through_a_second_name(x: T, same: T) -> object:  # fuzz seed 119700, programs 3197, 6932, 7480
    x.untyped_storage().resize_(12)
    same.fill_(0.5)
    out = x + 1
    same.resize_((5,))
    x.fill_(3.0)
    return out, same


def grows_itself_keeping_a_view(x: T, w: T) -> object:  # fuzz seed 119600, program 6194
    x.untyped_storage().resize_(12)
    x.fill_(0.5)
    v = x[1:]
    x.resize_((5,))
    x.fill_(3.0)
    return v, x * w


def frees_after_an_as_strided_write_read_before(x: T) -> object:
    y = x.as_strided((2,), (1,), 0)  # elements before the input's offset: traced over its whole storage
    y.add_(1.0)
    out = y * 1
    x.untyped_storage().resize_(0)
    return out


def reallocates_past_its_whole_storage(x: T) -> object:
    x.untyped_storage().resize_(24)  # the base holds 12 bytes: a resize_((5,)) grows eager's storage no more
    x.fill_(0.5)
    x.resize_((5,))
    x.fill_(3.0)
    return x * 1


def frees_after_growing_itself(x: T) -> object:  # (was a wrong result: the free was taken for an intermediate's)
    x.resize_((5,))
    x.fill_(3.0)
    out = x * 2
    x.untyped_storage().resize_(0)
    return out


def refills_part_of_its_whole_storage(x: T) -> object:
    y = x.as_strided((2,), (1,), 0)
    y.add_(1.0)
    out = y * 1
    x.untyped_storage().resize_(0)
    x.untyped_storage().resize_(32)
    x.fill_(1.0)  # the caller's base shows the other six elements, undefined in eager
    return out, x


def _freed_three_twice() -> tuple[object, ...]:
    (b,) = _freed_three()
    return b, b


def _freed_three_beside_a_weight() -> tuple[object, ...]:
    return (*_freed_three(), torch.randn(5, requires_grad=True))


@pytest.mark.parametrize(
    ("f", "make_inputs"),
    [
        (grows_its_storage_then_itself, _freed_scalar),
        (grows_its_storage_then_itself, lambda: (torch.randn(()),)),
        (grows_itself_through_a_second_name, _freed_three_twice),
        (grows_itself_keeping_a_view, _freed_three_beside_a_weight),
        (frees_after_an_as_strided_write_read_before, _view_of_eight),
    ],
    ids=["freed", "whole", "one_tensor_twice", "keeping_a_view_in_training", "freed_after_an_as_strided_write"],
)
def test_storage_resize_of_an_input_over_its_whole_storage_matches_eager(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], compile_fn: CompileFn | None
) -> None:
    test_storage_resize_matches_eager(f, make_inputs, compile_fn)
    with torch.no_grad():
        test_storage_resize_matches_eager(f, make_inputs, compile_fn)


@pytest.mark.parametrize(
    ("f", "make_inputs", "message"),
    [
        (read_after_free, lambda: (torch.randn(4),), "storage of args\\[0\\] is freed .* while it has no bytes"),
        (read_before_fill, _freed, "storage of args\\[0\\] is freed .* reads it"),
        (partial_fill, _freed, "storage of args\\[0\\] is freed .* writes only part of it"),
        (left_unwritten, _two, "storage of args\\[0\\] is freed .* leaves it unwritten"),
        (returns_freed_intermediate, lambda: (torch.randn(4),), "returns a tensor over the storage of a tensor made"),
        (grows_a_fresh_storage, lambda: (torch.randn(4),), "resize_\\(\\) of the storage of a tensor made inside"),
        (shrinks_an_input, lambda: (torch.randn(4),), "resize_\\(\\) of the storage of args\\[0\\]: 8 bytes"),
        (view_after_free, lambda: (torch.randn(4),), "storage of args\\[0\\] is freed .* while it has no bytes"),
        (fill_while_freed, _two, "storage of args\\[0\\] is freed .* aten.copy_.default takes a tensor over it"),
        (reads_nbytes_after_free, _two, "storage of args\\[0\\]: the program reads the storage's nbytes\\(\\)"),
        (frees_after_an_as_strided_write, _view_of_eight, "storage of args\\[0\\] is freed .* while it has no bytes"),
        (
            reallocates_past_its_whole_storage,
            _freed_three,
            "24 bytes, where the input is traced over its whole storage",
        ),
        (frees_after_growing_itself, lambda: (torch.randn(3),), "a tensor's resize_\\(\\) grew the storage before"),
        (refills_part_of_its_whole_storage, _view_of_eight, "storage of args\\[0\\] is freed .* writes only part"),
    ],
    ids=[
        "read_after_free",
        "read_before_fill",
        "partial_fill",
        "left_unwritten",
        "returns_freed_intermediate",
        "grows_a_fresh_storage",
        "shrinks_an_input",
        "view_after_free",
        "fill_while_freed",
        "reads_nbytes_after_free",
        "frees_after_an_as_strided_write",
        "reallocates_past_its_whole_storage",
        "frees_after_growing_itself",
        "refills_part_of_its_whole_storage",
    ],
)
def test_storage_resize_refused_naming_the_storage(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]], message: str, compile_fn: CompileFn | None
) -> None:
    if compile_fn is not None:  # the compiled pipeline's rule; eager reads freed or undefined bytes
        return
    with pytest.raises(UnsupportedError, match=message):
        subclassaot.compile(f)(*make_inputs())


class FsdpLike(torch.nn.Module):
    """FSDP2's pattern in one module: the parameter's storage is freed after use; re-allocated and filled from its
    shard (standing for the all-gather) before the next use, in forward, and before backward (outside the program,
    as FSDP2's pre-backward hook)."""

    shard: T

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 4))
        self.register_buffer("shard", self.weight.detach().clone())
        self.weight.untyped_storage().resize_(0)

    def forward(self, x: T) -> T:
        w = self.weight
        w.untyped_storage().resize_(w.numel() * w.element_size())
        with torch.no_grad():
            w.copy_(self.shard)
        out = torch.relu(x @ w).sum(dim=1)
        w.untyped_storage().resize_(0)
        return out


def _unshard(module: FsdpLike) -> None:
    w = module.weight
    w.untyped_storage().resize_(w.numel() * w.element_size())
    with torch.no_grad(), _unsafe_preserve_version_counter(w):  # as FSDP2's copy-out
        w.copy_(module.shard)


def test_fsdp_style_training_steps_match_eager() -> None:
    torch.manual_seed(0)
    eager = FsdpLike()
    model = FsdpLike()
    with torch.no_grad():
        model.shard.copy_(eager.shard)
    compiled = subclassaot.compile(model)
    for step in range(3):
        x = torch.randn(2, 4, requires_grad=True)
        results = []
        sides: list[tuple[FsdpLike, Callable[..., object]]] = [(eager, eager), (model, compiled)]
        for module, run in sides:
            xi = x.detach().clone().requires_grad_(True)
            out = run(xi)
            assert isinstance(out, T)
            assert module.weight.untyped_storage().nbytes() == 0
            _unshard(module)  # pre-backward all-gather
            out.sum().backward()  # type: ignore[no-untyped-call]
            module.weight.untyped_storage().resize_(0)  # post-backward free
            grad = module.weight.grad
            assert grad is not None
            with torch.no_grad():
                module.shard.sub_(0.1 * grad)  # the optimizer step on the shard
            results.append((out.detach(), xi.grad, grad.clone(), module.weight._version))
            module.weight.grad = None
        (eo, ex, ew, ev), (co, cx, cw, cv) = results
        torch.testing.assert_close(co, eo, msg=f"step {step}: output")
        torch.testing.assert_close(cx, ex, msg=f"step {step}: x.grad")
        torch.testing.assert_close(cw, ew, msg=f"step {step}: weight.grad")
        assert cv == ev, f"step {step}: weight's version {cv} vs eager {ev}"
    torch.testing.assert_close(model.shard, eager.shard)


def test_storage_resize_of_a_subclass_refused() -> None:
    def f(x: T) -> object:
        out = x * 2
        x.untyped_storage().resize_(0)
        return out

    rule = r"storage of a PairTensor: it is a PairTensor wrapper's own storage.*Note \[Storage Swaps By Rebinding\]"
    with pytest.raises(UnsupportedError, match=rule):
        subclassaot.compile(f)(pair(4))


def test_refusal_leaves_storages_outside_the_program_resizable() -> None:
    with pytest.raises(UnsupportedError):
        subclassaot.compile(read_after_free)(torch.randn(4))
    x = torch.randn(4)
    x.untyped_storage().resize_(0)
    assert x.untyped_storage().nbytes() == 0
    x.untyped_storage().resize_(16)
    assert x.untyped_storage().nbytes() == 16


def test_fsdp_resize_between_calls_matches_eager(compile_fn: CompileFn | None) -> None:
    """FSDP2 with torch.compile: the hooks free and re-allocate outside the graph; the compiled program between."""

    def use(x: T, y: T) -> object:
        return x * y + 1

    compiled = assert_matches_eager(use, _two, compile_fn=compile_fn)
    outputs = []
    for run in (use, compiled):
        torch.manual_seed(0)
        x, y = torch.randn(4), torch.randn(4)
        first = run(x, y)
        x.untyped_storage().resize_(0)
        x.untyped_storage().resize_(16)
        with torch.no_grad():
            x.copy_(torch.arange(4.0))
        outputs.append((first, run(x, y), x.untyped_storage().nbytes()))
    (e1, e2, eb), (c1, c2, cb) = outputs
    torch.testing.assert_close(c1, e1)
    torch.testing.assert_close(c2, e2)
    assert cb == eb == 16


def storage_reads(x: T, y: T) -> object:
    return x * x.untyped_storage().nbytes() + y


def test_storage_reads_match_eager(compile_fn: CompileFn | None) -> None:
    assert_matches_eager(storage_reads, _two, compile_fn=compile_fn)


def _through_dynamo(fn: Callable[..., object], **_: object) -> Callable[..., object]:
    return torch.compile(fn, backend="subclassaot", options={"backend": "eager"})


@pytest.mark.parametrize(("f", "make_inputs"), CASES, ids=IDS)
def test_storage_resize_through_dynamo_matches_eager(
    f: Callable[..., object], make_inputs: Callable[[], tuple[object, ...]]
) -> None:
    """Dynamo captures the resize as inductor::resize_storage_bytes_ on a graph input; the adapter hands the
    pipeline the storage's resize_ again (`dynamo_backend._restore_data_reads`): the same results and byte counts
    as eager, as on the direct path."""
    torch._dynamo.reset()
    try:
        test_storage_resize_matches_eager(f, make_inputs, _through_dynamo)
    finally:
        torch._dynamo.reset()


def set_then_free_the_old_storage(x0: torch.Tensor) -> object:
    t0 = x0.contiguous()  # x0 itself
    t1 = t0.detach()  # over x0's storage as passed
    t0.set_(t1.sum(0))  # type: ignore[call-overload]  # x0 moves to a new storage
    t1.untyped_storage().resize_(0)  # frees the storage x0 had
    return (t0,)


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_storage_freed_after_its_input_was_set_elsewhere_matches_eager(
    grad: bool, compile_fn: CompileFn | None
) -> None:
    """The program frees the storage the input had, after set_() moved the input to a new one: the runtime freed the
    input's storage at the end, the new one, and the output read freed memory (fuzz seed 55000, program 7826: a
    segfault that ended the run). It resizes the storage the input was passed with."""

    def make() -> tuple[torch.Tensor]:
        return (torch.randn(2, 3, 4, requires_grad=grad),)

    with torch.no_grad():
        assert_matches_eager(set_then_free_the_old_storage, make, compile_fn=compile_fn)


@pytest.mark.parametrize("source", ["tensor", "storage"])
def test_set_after_freeing_the_storage_matches_eager(source: str, compile_fn: CompileFn | None) -> None:
    """set_() of an input whose storage the program freed reads nothing of the freed bytes: it points the input at
    another storage (found by porting PyTorch's test; it was refused as a read of freed bytes)."""

    def program(a: torch.Tensor) -> object:
        with torch.no_grad():
            a.untyped_storage().resize_(0)
            src = torch.ones(2)
            if source == "tensor":
                set_to(a, src)
            else:
                a.set_(src.untyped_storage())
        return a + 1

    assert_matches_eager(program, lambda: (torch.randn(8),), compile_fn=compile_fn)


def refill_an_intermediate(x: T) -> object:
    t = x * 2
    out = t.sum()
    t.untyped_storage().resize_(0)
    t.untyped_storage().resize_(t.numel() * t.element_size())  # back to its byte count
    t.fill_(3.0)  # written whole: its bytes count as written (they were counted as float32 elements)
    return out, t + x


def copy_an_empty_input_into_itself(x: T) -> object:
    x.copy_(x)  # its offset is past the end of its storage, which holds no byte it needs: not freed
    return x, x * 2


def copy_into_a_freed_empty_intermediate(x: T) -> object:
    t = x[3:3]
    s = t.clone()  # an empty storage
    s.untyped_storage().resize_(0)
    s.copy_(t)  # no element, so no byte, to reach: eager raises nothing
    return s, x + 1


def refill_then_resize_in_place(x: T) -> object:
    x.untyped_storage().resize_(x.numel() * x.element_size())
    x.fill_(2.0)
    x.resize_((2,))  # within the bytes it has: the pipeline's own byte-count read, not the program's
    return x + 1


def refill_then_assign_data(x: T, y: T) -> object:
    y.untyped_storage().resize_(y.numel() * y.element_size())
    y.fill_(0.5)
    x.data = y
    return x + 1, y


def _freed_plain(grad: bool) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        x = torch.randn(4)
        x.untyped_storage().resize_(0)
        return (x,)

    return make


def _freed_second(grad: bool) -> Callable[[], tuple[object, ...]]:
    def make() -> tuple[object, ...]:
        y = torch.randn(4)
        y.untyped_storage().resize_(0)
        return (torch.randn(4, requires_grad=grad).clone(), y)

    return make


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize(
    ("f", "make"),
    [
        (refill_an_intermediate, lambda grad: lambda: (torch.randn(2, 3, requires_grad=grad).clone(),)),
        (copy_into_a_freed_empty_intermediate, lambda grad: lambda: (torch.randn(4, requires_grad=grad).clone(),)),
        (refill_then_resize_in_place, _freed_plain),
        (refill_then_assign_data, _freed_second),
    ],
    ids=["refill_intermediate", "empty_into_freed", "resize_after_refill", "data_after_refill"],
)
def test_storage_freed_and_refilled_matches_eager(
    f: Callable[..., object], make: Callable[[bool], Callable[[], tuple[object, ...]]], grad: bool
) -> None:
    """Fuzz seed 117300: a freed intermediate re-allocated and filled whole was counted in bytes, its fill in elements
    (#1468, #2385: refused as read); an op over an empty tensor on a freed storage was refused as out of bounds
    (#4866); the pipeline's own reads of a resized storage's byte count (resize_(), `.data =`) were refused as the
    program's nbytes() reads (#1633, #3795, #6026). Each runs in eager. (Storage resizes of a PairTensor's storages
    stay refused: test_storage_resize_of_a_subclass_refused.)"""
    with torch.set_grad_enabled(grad):
        assert_matches_eager(f, make(grad))


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("p", [False, True], ids=["plain", "pair"])
def test_empty_input_with_its_offset_past_the_storage_end_matches_eager(p: bool, grad: bool) -> None:
    """Fuzz seed 117300 #314: an empty view input whose offset lies past its storage's end needs no byte of it, but
    was taken as a storage freed before the call (and its copy_() refused as out of bounds)."""

    def make() -> tuple[object, ...]:
        b = pair(2, 4, requires_grad=grad) if p else torch.randn(2, 4, requires_grad=grad)
        with torch.enable_grad():
            return (b.clone().select(1, 1)[2:2:2],)

    with torch.set_grad_enabled(grad):
        assert_matches_eager(copy_an_empty_input_into_itself, make)
