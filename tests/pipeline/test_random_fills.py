"""In-place random fills of non-contiguous tensors (Note [In-Place Ops As Eager Runs Them]): dropout after a
transpose, `bernoulli_`/`uniform_`/`exponential_` on permuted and sliced tensors; the compiled call draws what eager
draws, element for element, and leaves the RNG state where eager leaves it. A program that seeds, sets or restores a
generator's state, or draws from an explicit generator, matches eager through Dynamo and is refused by name by the
direct entry."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch.random import fork_rng
from torch.testing._utils import wrapper_set_seed

import subclassaot
from subclassaot.errors import UnsupportedError
from tests.oracle import assert_matches_eager
from tests.pipeline.program_helpers import ENTRIES

T = torch.Tensor


def dropout_after_transpose(x: T) -> T:
    return F.dropout(x.transpose(0, 1) * 2, 0.3)


def bernoulli_permuted(x: T) -> T:
    y = torch.empty(4, 3, 5).permute(2, 0, 1)
    y.bernoulli_(0.4)
    return y + x.sum()


def bernoulli_tensor_p(x: T) -> T:
    y = torch.empty(6, 5).t()
    y.bernoulli_(x.sigmoid().detach())
    return y


def uniform_sliced(x: T) -> T:
    y = torch.empty(5, 12)[:, ::2]
    y.uniform_(-1, 1)
    return y * x[:, :6]


def exponential_transposed(x: T) -> T:
    y = torch.empty(6, 5).t()
    y.exponential_(2.0)
    return y + x


def dropout_both_sides(x: T) -> T:
    a = F.dropout(x.t(), 0.5)
    return F.dropout(a.t() + 1, 0.5).t()


PROGRAMS = (
    dropout_after_transpose,
    bernoulli_permuted,
    bernoulli_tensor_p,
    uniform_sliced,
    exponential_transposed,
    dropout_both_sides,
)


def _run(fn: Callable[[T], T], x: T) -> tuple[T, T]:
    torch.manual_seed(7)
    out = fn(x)
    return out, torch.get_rng_state()


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_random_fill_draws_like_eager(fn: Callable[[T], T], grad: bool) -> None:
    x = torch.randn(5, 6, requires_grad=grad)
    compiled = subclassaot.compile(fn, backend="eager")
    with torch.set_grad_enabled(grad):
        want, want_state = _run(fn, x)
        for _ in range(2):  # the second call runs the cached entry
            got, state = _run(compiled, x)
            assert torch.equal(got, want) and got.stride() == want.stride()
            assert torch.equal(state, want_state)


def fill_an_input_through_its_transpose(x: T) -> T:
    x.t().uniform_(-1, 1)
    return x * 2


def bernoulli_into_a_strided_input(x: T) -> T:
    x.bernoulli_(0.3)
    return x.sum()


def test_random_fill_of_an_input_view_matches_eager() -> None:
    assert_matches_eager(fill_an_input_through_its_transpose, lambda: (torch.randn(4, 6),))
    assert_matches_eager(bernoulli_into_a_strided_input, lambda: (torch.randn(6, 4).t(),))
    assert_matches_eager(bernoulli_into_a_strided_input, lambda: (torch.randn(4, 10)[:, ::2],))


def random_from_to(x: T) -> T:
    return torch.empty_like(x).random_(-3, 10) * x


def _runs_fx_code(gm: torch.fx.GraphModule, example_inputs: object) -> Callable[..., object]:
    assert "random_from" in gm.code  # (fx's own code for the graph, which a backend may run or print)
    return gm.forward


def test_random_from_makes_a_graph_fx_can_print() -> None:
    """`random_(low, high)` is `aten.random.from`, an overload named by a Python keyword: fx printed it as
    `torch.ops.aten.random.from(...)`, a SyntaxError before any backend that reads the graph's code ran (Note [What A
    Backend Receives And Returns])."""
    assert_matches_eager(random_from_to, lambda: (torch.randn(4, 6),), backend=_runs_fx_code)
    assert_matches_eager(random_from_to, lambda: (torch.randn(4, 6, requires_grad=True),), backend=_runs_fx_code)


# A program that seeds, sets, saves or restores a random generator's state, or draws from an explicit generator:
# eager runs those calls at each call between its draws; the direct entry refuses each by name, before it runs (the
# caller's generator is as it was), and Dynamo breaks its graph at each, so its entry matches eager.


def restore_between_draws(x: T) -> object:
    state = torch.get_rng_state()
    before = torch.rand(4)
    torch.set_rng_state(state)
    return before, torch.rand(4) + x  # eager: the same four numbers twice


def seed_then_draw(x: T) -> T:
    torch.manual_seed(3)
    return torch.rand(4) + x


def draw_in_fork_rng(x: T) -> object:
    with torch.random.fork_rng(devices=[]):
        inner = torch.rand(4)
    return inner, torch.rand(4) + x  # eager: fork_rng's exit restores the state, so the same numbers twice


def seed_default_generator(x: T) -> T:
    torch.default_generator.manual_seed(3)
    return torch.rand(4) + x


def seed_cuda(x: T) -> T:
    torch.cuda.manual_seed(3)  # (no GPU: queued, no effect on the CPU draws; refused without running)
    return torch.rand(4) + x


def seed_caught(x: T) -> T:
    try:
        torch.manual_seed(3)
    except Exception:  # the program swallows what it raises
        pass
    return torch.rand(4) + x


def seed_through_torch_testing(x: T) -> T:
    # torch's OpInfos run random ops so (`wrapper_set_seed`: freeze_rng_state, manual_seed(42), the op); calls from
    # torch.testing are the program's, not torch's own
    seeded: Callable[..., T] = wrapper_set_seed  # (untyped)
    return seeded(lambda: torch.rand(4) + x)


def draw_from_made_generator(x: T) -> T:
    g = torch.Generator().manual_seed(5)  # eager: a fresh generator at each call, so the same numbers each call
    return torch.rand(4, generator=g) + x


def draw_from_given_generator(x: T, g: torch.Generator) -> T:
    g.manual_seed(2)
    return torch.rand(4, generator=g) + x


GENERATOR_CALLS = (
    (restore_between_draws, "torch.get_rng_state"),
    (seed_then_draw, "torch.manual_seed"),
    (draw_in_fork_rng, "torch.random.fork_rng"),
    (seed_default_generator, "torch.default_generator.manual_seed"),
    (seed_cuda, "torch.cuda.manual_seed"),
    (seed_caught, "torch.manual_seed"),
    (seed_through_torch_testing, "torch.get_rng_state"),
    (draw_from_made_generator, "rand with an explicit generator"),
    (draw_from_given_generator, r"args\[1\] is a torch.Generator"),
)


def _with_generator(fn: Callable[..., object]) -> Callable[[], tuple[object, ...]]:
    if fn is draw_from_given_generator:
        return lambda: (torch.zeros(4), torch.Generator().manual_seed(1))
    return lambda: (torch.zeros(4),)


@pytest.mark.parametrize("entry", ENTRIES)
def test_generator_state_calls_match_eager_or_are_refused_by_name(entry: str) -> None:
    for fn, match in GENERATOR_CALLS:  # (one test per entry: every program runs in CI's slice)
        make_inputs = _with_generator(fn)
        if ENTRIES[entry] is not None:
            assert_matches_eager(fn, make_inputs, compile_fn=ENTRIES[entry])
            continue
        args = make_inputs()
        torch.manual_seed(11)
        state = torch.get_rng_state()
        given = [(a, a.get_state()) for a in args if isinstance(a, torch.Generator)]
        with pytest.raises(UnsupportedError, match=match):
            subclassaot.compile(fn)(*args)
        assert torch.equal(torch.get_rng_state(), state), fn.__name__  # the refused compile left the generators be
        assert all(torch.equal(a.get_state(), s) for a, s in given), fn.__name__


def reseed(x: T) -> T:
    torch.seed()
    return torch.rand(4) + x


@pytest.mark.parametrize("entry", ENTRIES)
def test_seed_inside_is_refused_by_name(entry: str) -> None:
    """Dynamo keeps `torch.seed()` in its graph (no graph break): refused there too, by the name in the graph."""
    compile_fn = ENTRIES[entry] or subclassaot.compile
    torch.manual_seed(11)
    state = torch.get_rng_state()
    with pytest.raises(UnsupportedError, match=r"torch\.(random\.)?seed inside the compiled function"):
        compile_fn(reseed)(torch.zeros(4))
    assert torch.equal(torch.get_rng_state(), state)


CAPTURED = torch.Generator()


def seed_captured(x: T) -> T:
    CAPTURED.manual_seed(5)  # eager: at every call, so a caller's draw from it between calls is undone
    return x + 1


def _seed_in_helper() -> None:
    CAPTURED.manual_seed(0)  # (the state the caller gives it: a seed to the state it has is one too)


def seed_captured_in_helper(x: T) -> T:
    _seed_in_helper()
    return x + 1


def _seed_closure() -> Callable[[T], T]:
    g = torch.Generator()

    def seed_closure_generator(x: T) -> T:
        g.seed()
        return x * 2

    return seed_closure_generator


def fork_by_alias(x: T) -> object:
    with fork_rng(devices=[]):  # (bound before the compile: no torch attribute read)
        inner = torch.rand(4)
    return inner, torch.rand(4) + x


CAPTURED_CALLS = (
    (seed_captured, "globals.CAPTURED"),
    (seed_captured_in_helper, "globals.CAPTURED"),
    (_seed_closure(), "closure g"),
    (fork_by_alias, r"globals.fork_rng \(torch.random.fork_rng\)"),
)


def test_captured_generator_state_calls_are_refused_by_name() -> None:
    """Generator methods are C methods nothing replaces, and an alias reads no torch attribute: eager seeds or
    restores at every call, the compiled call would have done so once, at compile time."""
    for fn, match in CAPTURED_CALLS:  # (one test: every program runs in CI's slice)
        CAPTURED.manual_seed(0)
        torch.manual_seed(11)
        states = (CAPTURED.get_state(), torch.get_rng_state())
        with pytest.raises(UnsupportedError, match=match):
            subclassaot.compile(fn)(torch.zeros(4))
        assert torch.equal(CAPTURED.get_state(), states[0]), fn.__name__  # (as the caller left them)
        assert torch.equal(torch.get_rng_state(), states[1]), fn.__name__


def draw_from_default_generator(x: T) -> T:
    return torch.rand(4, generator=torch.default_generator) + torch.randn(4, generator=torch._C.default_generator) * x


@pytest.mark.parametrize("entry", ENTRIES)
def test_the_default_generator_given_as_generator_draws_like_eager(entry: str) -> None:
    assert_matches_eager(draw_from_default_generator, lambda: (torch.ones(4),), compile_fn=ENTRIES[entry])
