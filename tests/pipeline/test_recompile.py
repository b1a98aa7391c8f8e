"""Recompiles: each guard that fails says which input path and field changed, and the new entry is correct.

Wording is matched loosely (path, field and both values), not the exact sentence.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import cast

import pytest
import torch

import subclassaot.api
from subclassaot.errors import UnsupportedError
from subclasses.pair import PairTensor, nested_example
from tests.oracle import assert_call_matches_eager

T = torch.Tensor


def mutate_and_add(a: T, b: T) -> T:
    a.add_(1)
    return a + b


def double(x: T) -> T:
    return x * 2


def compiled(
    fn: Callable[..., object], *, dynamic: bool | None = None, recompile_limit: int = 8
) -> subclassaot.api.CompiledFunction[..., object]:
    return subclassaot.api.compile(fn, backend="eager", dynamic=dynamic, recompile_limit=recompile_limit)


def reason_matches(c: subclassaot.api.CompiledFunction[..., object], *patterns: str) -> None:
    assert c.recompile_reasons, "expected a recompile reason"
    last = c.recompile_reasons[-1]
    for pattern in patterns:
        assert re.search(pattern, last), f"recompile reason {last!r} does not match {pattern!r}"


def test_no_recompile_for_the_same_metadata() -> None:
    c = compiled(double)
    for _ in range(3):
        assert_call_matches_eager(c, double, lambda: (torch.randn(4),))
    assert c.compile_count == 1
    assert c.recompile_reasons == ()


def test_dtype_change_recompiles_and_says_why() -> None:
    c = compiled(double)
    assert_call_matches_eager(c, double, lambda: (torch.randn(8),))
    assert_call_matches_eager(c, double, lambda: (torch.randn(8, dtype=torch.float64),))
    assert c.compile_count == 2
    reason_matches(c, r"args\[0\]", r"dtype", r"torch\.float32", r"torch\.float64")


def test_automatic_dynamic_second_size_compiles_dynamic_third_size_reuses_it() -> None:
    c = compiled(double)
    assert_call_matches_eager(c, double, lambda: (torch.randn(8),))
    assert_call_matches_eager(c, double, lambda: (torch.randn(16),))
    assert c.compile_count == 2
    reason_matches(c, r"args\[0\]\.size\(0\)", r"\b8\b", r"\b16\b")
    assert_call_matches_eager(c, double, lambda: (torch.randn(24),))
    assert c.compile_count == 2


def test_dynamic_false_recompiles_every_size() -> None:
    c = compiled(double, dynamic=False)
    for n in (4, 6, 9):
        assert_call_matches_eager(c, double, lambda n=n: (torch.randn(n),))  # type: ignore[misc]
    assert c.compile_count == 3


def clamp_and_add(a: T, b: T) -> T:
    # functionalization's meta check of clamp_ expands the scalar to the symbolic size (it once raised there, and
    # the compile fell back to static shapes: one entry a size)
    a.clamp_(min=-0.5, max=0.5)
    return a + b


@pytest.mark.parametrize("fn", [mutate_and_add, clamp_and_add], ids=lambda f: f.__name__)
def test_dynamic_true_compiles_once(fn: Callable[[T, T], T]) -> None:
    c = compiled(fn, dynamic=True)
    for n in (4, 6, 9):
        assert_call_matches_eager(c, fn, lambda n=n: (torch.randn(n), torch.randn(n)))  # type: ignore[misc]
    assert c.compile_count == 1


class BranchesOnSizeInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: T) -> T:
        return x * 2

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, g: T) -> T:
        return g * 100 if g.shape[0] == 3 else g * 2


def branches_in_backward(x: T) -> object:
    return BranchesOnSizeInBackward.apply(x)  # type: ignore[no-untyped-call]


def test_guards_include_what_the_backward_trace_specialized() -> None:
    """A size the backward branches on is guarded like one the forward branches on: the guards were built before
    the joint trace, so a second size reused the graph traced for the first and failed inside it."""
    c = compiled(branches_in_backward, dynamic=True)
    for n in (3, 5, 3, 7):

        def make(n: int = n) -> tuple[T]:
            return (torch.randn(n, requires_grad=True),)

        assert_call_matches_eager(c, branches_in_backward, make, check_grads=True)
    assert c.compile_count == 2
    reason_matches(c, r"args\[0\]\.size\(0\)")


def test_requires_grad_change_recompiles() -> None:
    c = compiled(double)
    assert_call_matches_eager(c, double, lambda: (torch.randn(3),))
    assert_call_matches_eager(c, double, lambda: (torch.randn(3, requires_grad=True),))
    assert c.compile_count == 2
    reason_matches(c, r"args\[0\]", r"requires_grad", r"False", r"True")


def test_aliasing_pattern_change_recompiles_and_stays_correct() -> None:
    c = compiled(mutate_and_add)
    assert_call_matches_eager(c, mutate_and_add, lambda: (torch.randn(3), torch.randn(3)))
    assert_call_matches_eager(c, mutate_and_add, lambda: (x := torch.randn(3), x))
    assert c.compile_count == 2
    reason_matches(c, r"args\[0\]|args\[1\]", r"alias")
    assert_call_matches_eager(c, mutate_and_add, lambda: (torch.randn(3), torch.randn(3)))
    assert c.compile_count == 2


def mutate_three(a: T, b: T, c: T) -> T:
    a.add_(b)
    return a + c


def sum_pairs(a: T, b: T) -> T:
    return (a * b + a).sin()


def _shared_inner() -> tuple[T, ...]:
    t = torch.randn(3)
    return (PairTensor(t, t),)


def _pairs_sharing() -> tuple[T, ...]:
    x = PairTensor(torch.randn(3), torch.randn(3))
    return (x, PairTensor(x.a, torch.randn(3)))


def _pair() -> T:
    return PairTensor(torch.randn(3), torch.randn(3))


# The fast guards compare the storages of distinct leaves without a list: two by `!=`, more as a set (Note [What
# The Guards Compare]). Each size, compiled with distinct storages and then called with two leaves sharing one:
# a new entry, correct, and the first entry still taken for distinct storages.
@pytest.mark.parametrize(
    ("fn", "distinct", "shared"),
    [
        (mutate_and_add, lambda: (torch.randn(3), torch.randn(3)), lambda: (x := torch.randn(3), x.detach())),
        (mutate_three, lambda: tuple(torch.randn(3) for _ in range(3)), lambda: (x := torch.randn(3), x * 1, x)),
        (double, lambda: (_pair(),), _shared_inner),
        (sum_pairs, lambda: (_pair(), _pair()), _pairs_sharing),
    ],
    ids=["plain-2-leaves", "plain-3-leaves", "pair-2-leaves", "pairs-4-leaves"],
)
def test_shared_storage_among_distinct_leaves_recompiles(
    fn: Callable[..., T], distinct: Callable[[], tuple[T, ...]], shared: Callable[[], tuple[T, ...]]
) -> None:
    c = compiled(fn)
    assert_call_matches_eager(c, fn, distinct)
    assert_call_matches_eager(c, fn, shared)
    assert c.compile_count == 2
    reason_matches(c, r"alias")
    assert_call_matches_eager(c, fn, distinct)
    assert c.compile_count == 2


def test_subclass_to_plain_recompiles() -> None:
    c = compiled(double)
    assert_call_matches_eager(c, double, lambda: (PairTensor(torch.randn(3), torch.randn(3)),))
    assert_call_matches_eager(c, double, lambda: (torch.randn(3),))
    assert c.compile_count == 2
    reason_matches(c, r"args\[0\]", r"PairTensor|type")


def test_inner_type_change_recompiles() -> None:
    c = compiled(double)
    assert_call_matches_eager(c, double, lambda: (PairTensor(torch.randn(3, 4), torch.randn(3, 4)),))
    assert_call_matches_eager(c, double, lambda: (nested_example(),))
    assert c.compile_count == 2
    reason_matches(c, r"args\[0\]\.a|args\[0\]", r"PairTensor|type|ctx")


def test_inner_dtype_change_names_the_inner_path() -> None:
    c = compiled(double)
    assert_call_matches_eager(c, double, lambda: (PairTensor(torch.randn(3), torch.randn(3)),))
    assert_call_matches_eager(
        c, double, lambda: (PairTensor(torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)),)
    )
    assert c.compile_count == 2
    reason_matches(c, r"args\[0\]", r"dtype", r"float64")


def test_stride_change_is_correct() -> None:
    c = compiled(mutate_and_add)
    assert_call_matches_eager(c, mutate_and_add, lambda: (torch.randn(3, 4), torch.randn(3, 4)))
    assert_call_matches_eager(c, mutate_and_add, lambda: (torch.randn(4, 3).t(), torch.randn(3, 4)))


@pytest.mark.parametrize(
    ("make", "patterns"),
    [
        (lambda: PairTensor.from_tensor(torch.randn(3, 3)), (r"args\[0\]\.size\(0\)", r"expected 2, got 3")),
        (lambda: PairTensor.from_tensor(torch.randn(3, 2).t()), (r"args\[0\]\.stride\(0\)", r"expected 3, got 1")),
        (
            lambda: PairTensor(torch.randn(2, 3), torch.randn(3, 2).t()),
            (r"args\[0\]\.b\.stride\(0\)", r"expected 3, got 1"),
        ),
        (lambda: PairTensor(torch.randn(2, 3), torch.randn(7)[1:].view(2, 3)), (r"args\[0\]\.b\.storage_offset",)),
    ],
    ids=["size", "outer stride", "inner stride", "inner offset"],
)
def test_static_sizes_and_strides_checked_at_once_still_name_the_fact_that_changed(
    make: Callable[[], PairTensor], patterns: tuple[str, ...]
) -> None:
    """Note [What The Guards Compare]: the fast body compares a tensor's static sizes and strides at once; a
    failure is still reported as the one dim that changed."""
    c = compiled(double, dynamic=False)
    assert_call_matches_eager(c, double, lambda: (PairTensor.from_tensor(torch.randn(2, 3)),))
    assert "v0_size" not in c.entries[0].guards.fast_source  # all at once: one C call (or one comparison)
    assert_call_matches_eager(c, double, lambda: (make(),))
    assert c.compile_count == 2
    reason_matches(c, *patterns)


def test_python_scalar_change_is_correct() -> None:
    def scale(x: T, s: float) -> T:
        x.mul_(s)
        return x + s

    c = compiled(scale)
    assert_call_matches_eager(c, scale, lambda: (torch.randn(3), 2.0))
    assert_call_matches_eager(c, scale, lambda: (torch.randn(3), 3.0))


def test_structure_change_recompiles() -> None:
    def total(xs: list[T]) -> T:
        return sum(xs, torch.zeros(()))

    c = compiled(total)
    assert_call_matches_eager(c, total, lambda: ([torch.randn(2), torch.randn(2)],))
    assert_call_matches_eager(c, total, lambda: ([torch.randn(2), torch.randn(2), torch.randn(2)],))
    assert c.compile_count == 2


def test_recompile_limit_falls_back_to_eager_with_a_warning() -> None:
    c = compiled(double, recompile_limit=2, dynamic=False)
    assert_call_matches_eager(c, double, lambda: (torch.randn(2),))
    assert_call_matches_eager(c, double, lambda: (torch.randn(3),))
    with pytest.warns(UserWarning, match="recompile_limit"):
        assert_call_matches_eager(c, double, lambda: (torch.randn(4),))
    assert c.compile_count == 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_call_matches_eager(c, double, lambda: (torch.randn(2),))
    assert c.compile_count == 2


def test_leafness_change_of_an_input_that_requires_grad_recompiles() -> None:
    # Training rules differ for autograd leaves and non-leaves (in-place writes, layout changes, detached inputs):
    # the entry compiled for one is not reused for the other.
    c = compiled(double)
    with torch.enable_grad():
        assert_call_matches_eager(c, double, lambda: (torch.randn(3, requires_grad=True) * 1,))
        assert_call_matches_eager(c, double, lambda: (torch.randn(3, requires_grad=True),))
        assert_call_matches_eager(c, double, lambda: (torch.randn(3, requires_grad=True),))
    assert c.compile_count == 2
    reason_matches(c, r"args\[0\]", r"is_leaf", r"False", r"True")


def test_failed_compile_with_static_shapes_is_not_compiled_again() -> None:
    # A symbolic trace that fails compiles again with static shapes; a compile whose shapes were static already (the
    # first call under automatic dynamic) would be the very same compile, and is not repeated.
    runs: list[None] = []

    def reads_a_value(x: torch.Tensor) -> torch.Tensor:
        runs.append(None)
        return x * x.sum().item()

    counts = []
    for dynamic in (None, False, True):
        runs.clear()
        with pytest.raises(UnsupportedError, match="depends on tensor values"):
            subclassaot.compile(reads_a_value, backend="eager", dynamic=dynamic)(torch.randn(3))
        counts.append(len(runs))
    assert counts[0] == counts[1] and counts[2] == 2 * counts[1]


class CountingPair(PairTensor):
    """A PairTensor whose `__torch_function__` is its own (it counts property reads): the guards read its
    properties through it, as the program would."""

    reads = 0

    @classmethod
    def __torch_function__(  # type: ignore[override]  # (torch's stub omits `func`)
        cls,
        func: Callable[..., object],
        types: object,
        args: tuple[object, ...] = (),
        kwargs: dict[str, object] | None = None,
    ) -> object:
        CountingPair.reads += 1
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


def test_fast_guards_skip_torch_functions_only_where_the_classes_have_torch_s_own() -> None:
    # Note [What The Guards Compare]: PairTensor's __torch_function__ is torch's disabled one, so its properties read
    # the same with subclass torch functions off (and cheaper); a class with its own is read through it
    c = compiled(double)
    assert_call_matches_eager(c, double, lambda: (PairTensor.from_tensor(torch.randn(2, 3)),))
    assert "_no_subclass_functions" in c.entries[0].guards.fast_source
    assert_call_matches_eager(c, double, lambda: (PairTensor.from_tensor(torch.randn(2, 3, dtype=torch.float64)),))
    assert c.compile_count == 2  # a dtype change still fails the fast body, and names itself
    reason_matches(c, r"args\[0\]", r"dtype", r"float64")
    own = compiled(double)
    x = CountingPair(torch.randn(2, 3), torch.randn(2, 3))
    own(x)
    assert "_no_subclass_functions" not in own.entries[0].guards.fast_source
    before = CountingPair.reads
    own(x)
    assert CountingPair.reads > before and own.compile_count == 1


def _as_pair(make: Callable[[], T]) -> Callable[[], T]:
    return lambda: PairTensor(make(), make())


_CHANGED: dict[str, Callable[[], T]] = {
    "dtype": lambda: torch.randn(2, 3, dtype=torch.float64),
    "requires_grad": lambda: torch.randn(2, 3, requires_grad=True),
    "size": lambda: torch.randn(2, 4),
    "stride": lambda: torch.randn(3, 2).t(),
    "type": lambda: torch.nn.Parameter(torch.randn(2, 3), requires_grad=False),
    "offset": lambda: torch.randn(7)[1:].view(2, 3),
}


# The fast guards test a tensor's type, dtype, device, requires_grad, sizes and strides in one C call where all are
# static (Note [What The Guards Compare]). Each of those properties changed, on a plain tensor and inside a
# PairTensor: a new entry, correct; the first entry still taken by the fast body alone (no detailed body) for the
# inputs it was compiled for.
@pytest.mark.parametrize("change", list(_CHANGED))
@pytest.mark.parametrize("wrap", [False, True], ids=["plain", "pair"])
def test_a_property_change_fails_the_one_call_check(change: str, wrap: bool) -> None:
    same: Callable[[], T] = lambda: torch.randn(2, 3)  # noqa: E731
    changed = _CHANGED[change]
    if wrap:
        same, changed = _as_pair(same), _as_pair(changed)
    c = compiled(double)
    assert_call_matches_eager(c, double, lambda: (same(),))
    guards = c.entries[0].guards
    names = cast(dict[str, object], guards.check.__globals__)  # the fast check's globals
    slow = f"_slow{len(guards.fast) - 1}"  # the tensor guards' slow path: the detailed body
    detailed: list[object] = []
    detail = cast(Callable[[object, int], object], names[slow])

    def recording(values: object, code: int) -> object:
        detailed.append(values)
        return detail(values, code)

    names[slow] = recording
    assert isinstance(c.entries[0].guards.check([same()]), dict)
    assert detailed == []
    assert_call_matches_eager(c, double, lambda: (changed(),))
    assert c.compile_count == 2
    assert_call_matches_eager(c, double, lambda: (same(),))
    assert c.compile_count == 2


def _pair_written(x: T) -> T:
    x.mul_(2)
    return x + 1


# A written leaf's inference-ness decides the epilogue (Note [What The Guards Compare]): where the leaf, an inner
# tensor here, has its own one-call check, its dispatch keys tell it and the fast body reads no is_inference(); a
# PairTensor over inference tensors still compiles anew and matches eager, either way round.
def test_an_inner_tensors_inference_ness_is_judged_by_its_one_call_check() -> None:
    def pair(inference: bool) -> Callable[[], tuple[T]]:
        def make() -> tuple[T]:
            with torch.inference_mode(inference):
                a, b = torch.randn(2, 3), torch.randn(2, 3)
            return (PairTensor(a, b),)

        return make

    c = compiled(_pair_written)
    assert_call_matches_eager(c, _pair_written, pair(False))
    assert "is_inference()" not in c.entries[0].guards.fast_source
    assert_call_matches_eager(c, _pair_written, pair(True))
    assert c.compile_count == 2
    assert_call_matches_eager(c, _pair_written, pair(False))
    assert_call_matches_eager(c, _pair_written, pair(True))
    assert c.compile_count == 2


# A check stricter than the guards' predicate (the one call compares dispatch keys: here the conjugate bit) hands
# the call to the detailed body, which decides it as before: the result is eager's either way.
def test_a_dispatch_key_change_is_judged_by_the_detailed_body() -> None:
    c = compiled(double)
    assert_call_matches_eager(c, double, lambda: (torch.randn(3, dtype=torch.complex64),))
    assert_call_matches_eager(c, double, lambda: (torch.randn(3, dtype=torch.complex64).conj(),))
    assert_call_matches_eager(c, double, lambda: (torch.randn(3, dtype=torch.complex64),))


def _read_after_its_counter_moved(x: T) -> T:
    x.detach().add_(1.0)
    return x * 2


def test_creation_meta_change_of_a_view_input_recompiles_and_says_why() -> None:
    # A select() view and an unbind() view agree in every other guarded fact; the compile decided that the read after
    # the write raises nothing by the first's creation meta (Note [What The Guards Compare])
    def select_view() -> tuple[T]:
        return (torch.randn(3, 2, requires_grad=True).clone().select(1, 1),)

    c = compiled(_read_after_its_counter_moved)
    with torch.enable_grad():
        assert_call_matches_eager(c, _read_after_its_counter_moved, select_view)
        assert_call_matches_eager(c, _read_after_its_counter_moved, select_view)
    assert c.compile_count == 1
    with torch.enable_grad(), pytest.raises(RuntimeError, match="Output 1 of Unbind"):
        c(torch.randn(3, 2, requires_grad=True).clone().unbind(1)[1])
    reason_matches(c, r"args\[0\]", r"the default kind", r"several views \(unbind, split, chunk\)", "creation meta")


def test_a_leaf_read_after_its_counter_moved_is_guarded_to_stay_no_view() -> None:
    # a view taken under no_grad of a tensor requiring grad is a leaf requiring grad, as a plain leaf is
    c = compiled(_read_after_its_counter_moved)
    with torch.enable_grad():
        assert_call_matches_eager(c, _read_after_its_counter_moved, lambda: (torch.randn(3, requires_grad=True),))
        base = torch.randn(3, requires_grad=True)
        with torch.no_grad():
            view = base[:]
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
            c(view)
    reason_matches(c, r"args\[0\]", r"no view", r"a view taken under no_grad")


def test_creation_meta_is_guarded_only_where_the_compile_read_it() -> None:
    # autograd's reader of the creation meta costs more than the rest of a small entry's guards: an entry whose compile
    # decided nothing on it (no counter moved before the read) carries no such guard
    def view_input() -> tuple[T]:
        return (torch.randn(3, 2, requires_grad=True).clone()[:, 1],)

    with torch.enable_grad():
        c = compiled(double)
        assert_call_matches_eager(c, double, view_input)
        moved = compiled(_read_after_its_counter_moved)
        assert_call_matches_eager(moved, _read_after_its_counter_moved, view_input)
    assert "_creation_meta_of" not in c.entries[0].guards.source
    assert "_creation_meta_of" in moved.entries[0].guards.source
