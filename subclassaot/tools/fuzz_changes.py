"""The fuzzer's change modes: a program called several times, with something it reads changed between calls, alike
on the compiled side and on its eager twin; every call is compared with eager (Note [State The Program Reads]).

Input: a fuzz program as a function and its inputs maker, a compile function and a seed for the changes. Output: a
`Verdict`, as `check_program`'s.
Invariants: each wrapper is user code (its source is executed in a fresh namespace named like a user module, so the
guards walk it as they walk any user's module).
- State changes (`check_with_state_changes`): the program wrapped in a module that reads a `training` flag, a float
  attribute, a global, a closure list element and a submodule; before each call one of them (or none) changes.
- Argument changes (`check_with_argument_changes`): the program wrapped in a function that takes a module whose
  buffers it updates (an exponential moving average and a step counter, under no_grad) and a dict of the Python
  values users pass (a str, a torch.device, a dtype, an enum member, a float, None or a nested tuple of a float and a
  dict of a list), branches on them and uses the floats as scalars. Before each call the constants are drawn again
  and one change to the module (or none) is made. The dtype an output is cast to is float32 or bfloat16, never
  float64: the programs compute in float32, and a float32 rounding difference the oracle accepts at float32's
  tolerance (one ulp) would be judged at float64's after a widening cast.
"""

from __future__ import annotations

import copy
import enum
import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from typing import cast

import torch

from subclassaot.tools.fuzz import CompileFn, Verdict, diverged, verdict_of
from subclassaot.tools.parity import Call, compare_with_eager

Fn = Callable[..., object]
# One call after a change: (the change as the report names it, the differences from eager)
CallAfter = Callable[[Fn, str, random.Random], tuple[str, Sequence[str]]]
_VALUES = (0.5, 1.5, 2.0, -1.0)


def _user_namespace(source: str, name: str, filename: str) -> dict[str, object]:
    ns: dict[str, object] = {"__name__": name}
    exec(compile(source, filename, "exec"), ns)
    return ns


def _check_with_changes(
    grad_mode: bool, compile_target: Callable[[], Fn], changes: tuple[str, ...], seed: int, calls: int, call: CallAfter
) -> Verdict:
    """Compile once; before each of `calls` calls draw a change (none before the first) and let `call` apply it, call
    both sides and compare; the first call that differs is the verdict."""
    rng = random.Random(seed)
    applied: list[str] = []

    def run() -> Verdict | None:
        compiled = compile_target()
        for index in range(calls):
            change = changes[rng.randrange(len(changes))] if index else "none"
            what, diffs = call(compiled, change, rng)
            applied.append(what)
            if diffs:
                return diverged(f"call {index} (after {' / '.join(applied)})", diffs)
        return None

    return verdict_of(grad_mode, run)


# ---------------------------------------------------------------------------------------------------------------
# State changes

# The wrapper, as a user would write it. `wrap(program_fn, k)` returns the module class; SHIFT is a global it reads.
_STATE_SOURCE = """
import torch
from torch import nn

SHIFT = 0.0


def wrap(program_fn, k):
    def post(t):
        return t * k[0] + SHIFT

    class Stateful(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 1.0
            self.act = nn.Identity()

        def forward(self, *args):
            outs = tuple(self.act(post(o)) * self.scale for o in program_fn(*args))
            return outs if self.training else tuple(o - 1 for o in outs)

    return Stateful
"""

STATE_CHANGES = ("none", "flip training", "module float", "global", "closure item", "swap submodule")
_ACTIVATIONS: tuple[Callable[[], torch.nn.Module], ...] = (torch.nn.Identity, torch.nn.ReLU, torch.nn.Tanh)


def _apply(
    change: str, rng: random.Random, modules: tuple[torch.nn.Module, ...], ns: dict[str, object], k: list[float]
) -> None:
    if change == "flip training":
        for m in modules:
            m.train(not m.training)
    elif change == "module float":
        value = rng.choice(_VALUES)
        for m in modules:
            vars(m)["scale"] = value  # a plain attribute: where Module.__setattr__ would put it
    elif change == "global":
        ns["SHIFT"] = rng.choice(_VALUES)
    elif change == "closure item":
        k[0] = rng.choice(_VALUES)
    elif change == "swap submodule":
        make = rng.choice(_ACTIVATIONS)
        for m in modules:
            m.act = make()


def check_with_state_changes(
    fn: Fn,
    inputs: Callable[[], tuple[torch.Tensor, ...]],
    grad_mode: bool,
    compile_fn: CompileFn,
    seed: int,
    *,
    calls: int = 4,
) -> Verdict:
    """Compile the wrapped program once; before each of `calls` calls, change one piece of Python state (drawn from
    `seed`) on both the compiled module and its eager twin; compare each call with eager.
    `fn`: the program, a function of the tensors `inputs()` makes (a printed program's f and make_inputs too: a
    regression test calls this)."""
    ns = _user_namespace(_STATE_SOURCE, "fuzz_stateful_program", "<fuzz stateful wrapper>")
    k = [1.0]
    module = cast(Callable[..., type[torch.nn.Module]], ns["wrap"])(fn, k)()
    eager = copy.deepcopy(module)

    def call(compiled: Fn, change: str, rng: random.Random) -> tuple[str, Sequence[str]]:
        _apply(change, rng, (module, eager), ns, k)
        return change, compare_with_eager(compiled, eager, inputs, compiled_module=module, eager_module=eager)

    return _check_with_changes(grad_mode, lambda: compile_fn(module), STATE_CHANGES, seed, calls, call)


# ---------------------------------------------------------------------------------------------------------------
# Argument changes

# The wrapper, as a user would write it: `wrap(program_fn)` returns `step(stats, opts, *args)`.
_ARGUMENTS_SOURCE = """
import enum

import torch
from torch import nn


class Mode(enum.Enum):
    SCALE = "scale"
    SHIFT = "shift"


class Stats(nn.Module):
    def __init__(self):
        super().__init__()
        self.momentum = 0.9
        self.register_buffer("ema", torch.zeros(()))
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))


def wrap(program_fn):
    def step(stats, opts, *args):
        outs = program_fn(*args)
        result = []
        for o in outs:
            if opts["kind"] == "double":
                o = o * 2
            elif opts["kind"] == "negate":
                o = -o
            o = o * opts["alpha"] if opts["mode"] is Mode.SCALE else o + opts["alpha"]
            if opts["extra"] is not None:
                o = o + opts["extra"][0] * opts["extra"][1]["w"][1]
            result.append(o.to(device=opts["device"], dtype=opts["dtype"]))
        with torch.no_grad():
            m = stats.momentum
            stats.ema.mul_(m).add_(outs[0].detach().float().sum() * (1 - m))
            stats.steps.add_(1)
        return tuple(result)

    return step
"""

ARGUMENT_CHANGES = ("none", "momentum", "reset buffers", "new module")


def _draw_options(rng: random.Random, ns: dict[str, object]) -> dict[str, object]:
    mode = cast("type[enum.Enum]", ns["Mode"])
    extra = None if rng.randrange(2) else (rng.choice(_VALUES), {"w": [rng.choice(_VALUES), rng.choice(_VALUES)]})
    return {
        "kind": rng.choice(("double", "negate", "same")),
        "mode": rng.choice(list(mode)),
        "alpha": rng.choice(_VALUES),
        "extra": extra,
        "device": torch.device("cpu"),
        "dtype": rng.choice((torch.float32, torch.bfloat16)),  # never wider: see the module docstring
    }


def _change(change: str, rng: random.Random, stats: list[torch.nn.Module], new: Callable[[], torch.nn.Module]) -> None:
    if change == "momentum":
        value = rng.choice((0.5, 0.9, 0.99))
        for m in stats:
            vars(m)["momentum"] = value
    elif change == "reset buffers":
        value = rng.choice(_VALUES)
        with torch.no_grad():
            for m in stats:
                cast(torch.Tensor, m.ema).fill_(value)
    elif change == "new module":
        fresh = new()
        stats[:] = [fresh, copy.deepcopy(fresh)]


def check_with_argument_changes(
    fn: Fn,
    inputs: Callable[[], tuple[torch.Tensor, ...]],
    grad_mode: bool,
    compile_fn: CompileFn,
    seed: int,
    *,
    calls: int = 4,
) -> Verdict:
    """Compile the wrapped program once; call it `calls` times with constants drawn from `seed` and a module whose
    buffers it updates, changed between calls on both sides; compare each call with eager.
    `fn`: the program, a function of the tensors `inputs()` makes (a printed program's f and make_inputs too: a
    regression test calls this)."""
    ns = _user_namespace(_ARGUMENTS_SOURCE, "fuzz_argument_program", "<fuzz argument wrapper>")
    step = cast(Callable[..., Fn], ns["wrap"])(fn)
    new_stats = cast(Callable[[], torch.nn.Module], ns["Stats"])
    first = new_stats()
    stats = [first, copy.deepcopy(first)]  # [compiled side's, eager side's]

    def call(compiled: Fn, change: str, rng: random.Random) -> tuple[str, Sequence[str]]:
        _change(change, rng, stats, new_stats)
        opts = _draw_options(rng, ns)
        # compare_with_eager makes eager's inputs first, and may make a second pair (both sides advance alike)
        sides = itertools.cycle((stats[1], stats[0]))

        def args(opts: dict[str, object] = opts, sides: Iterator[torch.nn.Module] = sides) -> Call:
            return Call(args=(next(sides), opts, *inputs()))

        return f"{change}, {opts}", compare_with_eager(compiled, step, args)

    return _check_with_changes(grad_mode, lambda: compile_fn(step), ARGUMENT_CHANGES, seed, calls, call)
