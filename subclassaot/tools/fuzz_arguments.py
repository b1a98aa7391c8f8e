"""The fuzzer's argument-change mode: a program called with Python constants and a module as arguments, which change
between calls.

Input: a fuzz program as a function and its inputs maker, a compile function and a seed for the changes. Output: a `Verdict`, as `check_program`'s.
Invariants: the wrapper is user code (its source is executed in a fresh namespace named like a user module); it takes
a module whose buffers it updates (an exponential moving average and a step counter, under no_grad) and a dict of
the Python values users pass (a str, a torch.device, a dtype, an enum member, a float, None or a nested tuple of a
float and a dict of a list), branches on them and uses the floats as scalars. Before each call the constants are
drawn again and one change to the module (or none) is made, alike on the compiled side and on the eager twin; every
call is compared with eager, the module's buffers included (Note [State The Program Reads]). The dtype an
output is cast to is float32 or bfloat16, never float64: the programs compute in float32, and a float32 rounding
difference the oracle accepts at float32's tolerance (one ulp) would be judged at float64's after a widening cast.
"""

from __future__ import annotations

import copy
import enum
import random
import warnings
from collections.abc import Callable, Iterator
from typing import cast

import torch

from subclassaot.tools.fuzz import CompileFn, Outcome, Verdict, diverged_after_changes, exception_verdict
from subclassaot.tools.parity import Call, EagerRaised, compare_with_eager

# The wrapper, as a user would write it: `wrap(program_fn)` returns `step(stats, opts, *args)`.
_WRAPPER_SOURCE = """
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

CHANGES = ("none", "momentum", "reset buffers", "new module")
_VALUES = (0.5, 1.5, 2.0, -1.0)


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
    fn: Callable[..., object],
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
    ns: dict[str, object] = {"__name__": "fuzz_argument_program"}
    exec(compile(_WRAPPER_SOURCE, "<fuzz argument wrapper>", "exec"), ns)
    step = cast(Callable[..., Callable[..., object]], ns["wrap"])(fn)
    new_stats = cast(Callable[[], torch.nn.Module], ns["Stats"])
    first = new_stats()
    stats = [first, copy.deepcopy(first)]  # [compiled side's, eager side's]
    rng = random.Random(seed)
    applied: list[str] = []
    with warnings.catch_warnings(), torch.set_grad_enabled(grad_mode):
        warnings.simplefilter("ignore")
        try:
            compiled = compile_fn(step)
            for index in range(calls):
                change = CHANGES[rng.randrange(len(CHANGES))] if index else "none"
                _change(change, rng, stats, new_stats)
                opts = _draw_options(rng, ns)
                applied.append(f"{change}, {opts}")
                sides = iter((stats[1], stats[0]))  # compare_with_eager makes eager's inputs first

                def call(opts: dict[str, object] = opts, sides: Iterator[torch.nn.Module] = sides) -> Call:
                    return Call(args=(next(sides), opts, *inputs()))

                diffs = compare_with_eager(compiled, step, call)
                if diffs:
                    return diverged_after_changes(index, applied, diffs)
        except EagerRaised as e:
            return Verdict(outcome=Outcome.DISCARDED, detail=repr(e.error), signatures=())
        except Exception as e:  # classify every failure of the compiled side, whatever its type
            return exception_verdict(e)
    return Verdict(outcome=Outcome.PASS, detail="", signatures=())
