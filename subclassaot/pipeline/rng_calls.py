"""The program's calls on random generators while the pipeline runs it (comment below)."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator, Sequence

import torch
from torch.utils._mode_utils import no_dispatch

from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.python_state import Watched
from subclassaot.torch_internals import no_torch_function

# The program's random generators while the pipeline runs it: the trace draws on fakes, and a call that seeds, sets,
# saves or restores a generator's state (torch.manual_seed, torch.seed, torch.set_rng_state, fork_rng's restore on
# exit, torch.cuda.manual_seed, torch.default_generator.set_state) would run at compile time only, where eager runs
# it at each call between the draws: `s = torch.get_rng_state(); a = rand(); torch.set_rng_state(s); b = rand()`
# gives a == b in eager, two draws in order in the graph. Each such call is refused by name before it runs (so the
# caller's generators are as they were), even where the program catches the error; so is an op given an explicit
# torch.Generator (the graph draws from the default generator at each call, never from a given one: a generator
# made in the program starts fresh each call in eager), but for the default generator itself, which eager draws
# from as from generator=None. Dynamo breaks its graph at each of these calls instead. How each is seen:
#   * torch's functions by their module attributes, replaced for the run by stand-ins that refuse only the calls of
#     the compiling thread's program: torch's and our own code (our modes guard their fake runs with fork_rng) and
#     every other thread pass through to the originals;
#   * torch.default_generator and torch._C.default_generator by a module __getattr__ that gives the compiling thread
#     a stand-in (a Generator, whose state methods refuse the program's calls) and every other thread the real one;
#   * what the program reaches otherwise, by the walk of the state it reads (python_state): an alias of one of those
#     functions (`from torch.random import fork_rng`) is refused before the compile; a Generator (the default one
#     under another name, or any other: `G.manual_seed(5)`, a C method nothing can replace) has a state of ours
#     during the compile (not the default one: other threads draw from it), and is refused by name where the compile
#     changed it; its own state is given back either way.
# Not seen: torch.random.default_generator (torch's own functions read that global: it stays the real one), and
# reading a captured Generator's state without changing it (`G.initial_seed()` is read once, at compile time).
_RNG_FUNCTIONS = ("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "fork_rng")
_RNG_STATES = ("get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all")
_RNG_MODULES = (torch, torch.random, torch.cuda, torch.cuda.random, torch.mps, torch.xpu)
_GENERATOR_STATE = frozenset(n for n in dir(torch.Generator) if not n.startswith("_") and n != "device")
_ORIGINALS = {
    id(f): (f"{m.__name__}.{n}", f)
    for m in _RNG_MODULES
    for n in (*_RNG_FUNCTIONS, *_RNG_STATES)
    if (f := getattr(m, n, None))
}
_DEFAULT = torch._C.default_generator
_LOCK = threading.RLock()
_SENTINEL_SEED = 0x5EED_0F_5EB_C1A55  # (a captured Generator's state while the program is compiled)


def _generator_message(call: str) -> str:
    return (
        f"the program calls {call} inside the compiled function: the compiled graph's random draws start from the "
        "state the generator has at each call, and it cannot seed, save, set or restore a generator's state between "
        "them (the call would run once, at compile time). Seed or set the generator before calling the compiled "
        "function (torch.manual_seed(0); compiled(x)), or call the part that needs it outside"
    )


def _called_by_the_program(thread: int) -> bool:
    """Whether the stand-in's caller (two frames up) is the compiling thread's program, not torch's code or ours."""
    if threading.get_ident() != thread:
        return False
    caller = str(sys._getframe(2).f_globals.get("__name__", ""))
    # torch.testing's helpers (wrapper_set_seed, freeze_rng_state) seed on the program's behalf: its calls
    return caller.startswith("torch.testing") or caller.partition(".")[0] not in ("torch", "subclassaot")


class _DefaultGenerator(torch.Generator):
    """Stands in for torch.default_generator in the compiling thread: the program's reads and writes of its state are
    refused, torch's and ours reach the real one; as an op's generator= it is None (`default_generators_as_none`)."""

    def __new__(cls, refused: list[str], thread: int) -> _DefaultGenerator:
        return super().__new__(cls)

    def __init__(self, refused: list[str], thread: int) -> None:
        self.refused = refused
        self.thread = thread

    def __getattribute__(self, name: str) -> object:
        if name not in _GENERATOR_STATE:
            return super().__getattribute__(name)
        if not _called_by_the_program(object.__getattribute__(self, "thread")):
            return getattr(_DEFAULT, name)
        refused: list[str] = object.__getattribute__(self, "refused")
        refused.append(f"torch.default_generator.{name}")
        raise UnsupportedError(_generator_message(refused[-1]))


def _refusing(call: str, refused: list[str], original: Callable[..., object], thread: int) -> Callable[..., object]:
    def refuse(*args: object, **kwargs: object) -> object:
        if not _called_by_the_program(thread):
            return original(*args, **kwargs)
        refused.append(call)
        raise UnsupportedError(_generator_message(call))

    return refuse


@contextlib.contextmanager
def _default_generator_per_thread(stand_in: _DefaultGenerator, thread: int) -> Iterator[None]:
    """Within: `torch.default_generator` (and torch._C's) is `stand_in` in `thread`, the real one elsewhere."""
    saved = [(m, m.__dict__.get("__getattr__")) for m in (torch, torch._C)]
    for module, prior in saved:

        def lookup(name: str, module: object = module, prior: Callable[[str], object] | None = prior) -> object:
            if name == "default_generator":
                return stand_in if threading.get_ident() == thread else _DEFAULT
            if prior is None:
                raise AttributeError(f"module {getattr(module, '__name__', '')!r} has no attribute {name!r}")
            return prior(name)

        setattr(module, "__getattr__", lookup)  # noqa: B010  # (first: no moment without the name)
        delattr(module, "default_generator")
    try:
        yield
    finally:
        for module, prior in saved:
            setattr(module, "default_generator", _DEFAULT)  # noqa: B010  # setattr: typed as the original
            if prior is None:
                delattr(module, "__getattr__")
            else:
                setattr(module, "__getattr__", prior)  # noqa: B010  # as above


@contextlib.contextmanager
def generator_calls_refused() -> Iterator[None]:
    """Within: the compiling thread's program's calls that seed, set or read a random generator's state are refused
    (comment above)."""
    refused: list[str] = []
    thread = threading.get_ident()
    saved = [(m, n, getattr(m, n)) for m in _RNG_MODULES for n in (*_RNG_FUNCTIONS, *_RNG_STATES) if hasattr(m, n)]
    stand_in = _DefaultGenerator(refused, thread)
    fresh = torch.Generator.get_state(stand_in)
    with _LOCK:
        for module, name, value in saved:
            setattr(module, name, _refusing(f"{module.__name__}.{name}", refused, value, thread))
        try:
            with _default_generator_per_thread(stand_in, thread):
                yield
            with no_dispatch(), no_torch_function():  # (`torch.Generator.manual_seed(torch.default_generator, 0)`)
                if not torch.equal(torch.Generator.get_state(stand_in), fresh):
                    refused.append("a torch.Generator method on torch.default_generator")
        finally:
            for module, name, value in saved:
                setattr(module, name, value)
    if refused:  # (the program caught the refusal)
        raise UnsupportedError(_generator_message(refused[0]))


def refuse_generator_inputs(values: Sequence[object], paths: Sequence[str]) -> None:
    """Before any run: the program could seed or draw from it, and the refusal of that would come after the run
    changed the caller's generator."""
    for value, path in zip(values, paths, strict=True):
        if isinstance(value, torch.Generator):
            raise UnsupportedError(
                f"{path} is a torch.Generator: the compiled graph draws from the default CPU generator at each call, "
                "never from a generator passed to it. Draw from the default generator (seed it before the call), or "
                "draw outside the compiled function and pass the values in"
            )


def default_generators_as_none(func: Callable[..., object], leaves: list[object]) -> list[object]:
    """An op's flat arguments with the default generator (or its stand-in) as None; any other generator refused."""
    if not any(isinstance(leaf, torch.Generator) for leaf in leaves):
        return leaves
    leaves = [None if leaf is _DEFAULT or isinstance(leaf, _DefaultGenerator) else leaf for leaf in leaves]
    if any(isinstance(leaf, torch.Generator) for leaf in leaves):
        raise UnsupportedError(
            f"the program calls {getattr(func, '__name__', func)} with an explicit generator (generator=g): the "
            "compiled graph draws from the default CPU generator at each call, never from a generator given to it "
            "(eager draws from g's state at each call). Draw from the default generator (seed it before the call), "
            "or draw outside the compiled function and pass the values in"
        )
    return leaves


@contextlib.contextmanager
def captured_generators_kept(before: Sequence[Watched]) -> Iterator[None]:
    """Within (a compile): an alias of torch's generator functions among the state the program reads is refused
    before it runs, and a Generator among it whose state changed is restored and refused by name (comment above)."""
    reached = [(label, v) for w in before for label, v in zip(w.labels, w.values, strict=True)]
    for label, value in reached:
        if id(value) in _ORIGINALS and _ORIGINALS[id(value)][1] is value:
            raise UnsupportedError(_generator_message(f"{label} ({_ORIGINALS[id(value)][0]})"))
    generators = [(label, g, torch.Generator.get_state(g)) for label, g in reached if isinstance(g, torch.Generator)]
    for _, g, _ in generators:  # (a seed to the state it has is a change too; the default one: other threads draw)
        if g is not _DEFAULT:
            torch.Generator.manual_seed(g, _SENTINEL_SEED)
    marks = [torch.Generator.get_state(g) for _, g, _ in generators]
    # The compile draws none of the caller's CPU generator's numbers: a fake kernel making sizes no static fake
    # has (new_dynamic_size()) makes the fake mode run the op's real kernel, whose draws would move it
    default = torch.Generator.get_state(_DEFAULT)
    try:
        yield
    finally:
        with no_dispatch(), no_torch_function():  # (the caller's modes: a real comparison)
            changed = [label for (label, g, _), mark in zip(generators, marks, strict=True) if not _kept(g, mark)]
            for _, g, state in generators:
                torch.Generator.set_state(g, state)
            torch.Generator.set_state(_DEFAULT, default)
    if changed:
        raise UnsupportedError(
            _generator_message(f"a method of {changed[0]} (a torch.Generator) that changes its state")
        )


def _kept(g: torch.Generator, mark: torch.Tensor) -> bool:
    return torch.equal(torch.Generator.get_state(g), mark)
