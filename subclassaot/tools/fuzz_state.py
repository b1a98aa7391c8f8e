"""The fuzzer's state-change mode: a program wrapped in a module that reads Python state, changed between calls.

Input: a fuzz program as a function and its inputs maker, a compile function and a seed for the changes. Output: a `Verdict`, as `check_program`'s.
Invariants: the wrapper is user code (its source is executed in a fresh namespace named like a user module, so the
guards walk it as they walk any user's module: Note [State The Program Reads]); it reads a
`training` flag, a float attribute, a global, a closure list element and a submodule; before each call one of them
(or none) changes, alike on the compiled module and on its eager twin, and every call is compared with eager.
"""

from __future__ import annotations

import copy
import random
import warnings
from collections.abc import Callable
from typing import cast

import torch

from subclassaot.tools.fuzz import CompileFn, Outcome, Verdict, diverged_after_changes, exception_verdict
from subclassaot.tools.parity import EagerRaised, compare_with_eager

# The wrapper, as a user would write it. `wrap(program_fn, k)` returns the module class; SHIFT is a global it reads.
_WRAPPER_SOURCE = """
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

CHANGES = ("none", "flip training", "module float", "global", "closure item", "swap submodule")
_VALUES = (0.5, 1.5, 2.0, -1.0)
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
    fn: Callable[..., object],
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
    ns: dict[str, object] = {"__name__": "fuzz_stateful_program"}
    exec(compile(_WRAPPER_SOURCE, "<fuzz stateful wrapper>", "exec"), ns)
    k = [1.0]
    wrap = cast(Callable[..., type[torch.nn.Module]], ns["wrap"])
    module = wrap(fn, k)()
    eager = copy.deepcopy(module)
    rng = random.Random(seed)
    applied: list[str] = []
    with warnings.catch_warnings(), torch.set_grad_enabled(grad_mode):
        warnings.simplefilter("ignore")
        try:
            compiled = compile_fn(module)
            for index in range(calls):
                change = CHANGES[rng.randrange(len(CHANGES))] if index else "none"
                _apply(change, rng, (module, eager), ns, k)
                applied.append(change)
                diffs = compare_with_eager(
                    compiled,
                    eager,
                    inputs,
                    compiled_module=module,
                    eager_module=eager,
                )
                if diffs:
                    return diverged_after_changes(index, applied, diffs)
        except EagerRaised as e:
            return Verdict(outcome=Outcome.DISCARDED, detail=repr(e.error), signatures=())
        except Exception as e:  # classify every failure of the compiled side, whatever its type
            return exception_verdict(e)
    return Verdict(outcome=Outcome.PASS, detail="", signatures=())
