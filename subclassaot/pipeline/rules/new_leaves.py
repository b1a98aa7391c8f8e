"""Which of the program's requires_grad_() calls making new autograd leaves a compile holds back (Note [Training
Without A Function]).

Input: the program's calls turning a tensor's requires_grad on, in call order, as the analysis run meets them.
Output: `NewLeafHold`, the places held back (decided by the first analysis run that completes), and the refusals the
program as called meets there.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from subclassaot.errors import UnsupportedError
from subclassaot.schemas import OutputInfo, OutputKind


@dataclass(frozen=True, slots=True)
class ShownLeaves:
    """The outputs (positions among the program's pytree leaves) through which the caller sees the new leaves held
    back by a flag alone: `own`, the leaves themselves; `bases`, views of a leaf taken before its flag, which read it
    through their `._base` (the leaf returned by none of the outputs). Empty: eager's run observes none of them."""

    own: frozenset[int] = frozenset()
    bases: frozenset[int] = frozenset()


class NewLeafKind(enum.Enum):
    """Why the compile of the program as called cannot make a new leaf."""

    PLAIN = "plain"  # a plain tensor, in a call with grad on: only the native path makes it
    SUBCLASS = "subclass"  # a tensor subclass: the graph, over its inner tensors, has no wrapper to mark


@dataclass(slots=True)
class NewLeafHold:
    """The places (in call order, among the program's calls turning a requires_grad on) of the calls making new
    leaves that a compile holds back. `held` None: undecided, and the next analysis run holds back each call making a
    new leaf, noting it (`noted`: its place -> its kind and the tensor's type name) and deciding `held` once it
    completes; a frozenset: decided (every later run holds back those calls, `backward_probe.holding_back_flags`)."""

    held: frozenset[int] | None = None
    noted: dict[int, tuple[NewLeafKind, str]] = field(default_factory=dict)
    asked: bool = False  # whether the driver asked eager's runs about `held`; then, `shown`: the positions among the
    # program's outputs (its pytree leaves) of the leaves held back that the caller sees by their flag alone (empty:
    # eager's run observes none of `held`), or None where it observes one otherwise
    shown: ShownLeaves | None = None
    calls: int | None = None  # the calls turning a flag on that the run deciding `held` counted

    def run_starts(self) -> None:
        """An analysis run begins: while undecided, it notes afresh (what a run that failed noted is dropped)."""
        if self.held is None:
            self.noted.clear()

    def run_completed(self, calls: int) -> None:
        """The analysis run completed, counting `calls` calls turning a flag on: while undecided, what it held back is
        decided."""
        if self.held is None:
            self.held, self.calls = frozenset(self.noted), calls

    @staticmethod
    def as_called() -> NewLeafHold:
        """Decided: nothing held back (the program compiled as called)."""
        return NewLeafHold(held=frozenset())

    def refusal(self) -> UnsupportedError | None:
        """The refusal the compile as called meets before the others, where a held-back call has one of its own (a
        subclass): the analysis run raises it; None for plain calls, which only the native path may make
        (`backward_probe.refuse_new_leaves`)."""
        kinds = [self.noted[p] for p in sorted(self.noted)]
        subclass = next((name for kind, name in kinds if kind is NewLeafKind.SUBCLASS), None)
        return None if subclass is None else subclass_new_leaf_refusal(subclass)


def turns_flag_on(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, bool]:
    """Whether a torch-function call turns a tensor's requires_grad on (`requires_grad_()` or the setter), and whether
    it is the setter."""
    owner = getattr(getattr(func, "__self__", None), "__name__", None)
    setter = owner == "requires_grad" and getattr(func, "__name__", "") == "__set__"
    flag = setter or func is torch.Tensor.requires_grad_
    return flag and bool(args[1] if len(args) > 1 else kwargs.get("requires_grad", True)), setter


def subclass_new_leaf_refusal(type_name: str) -> UnsupportedError:
    return UnsupportedError(
        "the program calls requires_grad_() (or sets `.requires_grad = True`) on a tensor that is not an input, a "
        f"{type_name} (a tensor subclass), and uses it after: eager makes it a new autograd "
        "leaf, which the outputs' histories end in, and the compiled graph, over the subclass's inner tensors, "
        "does not hold that wrapper to make it one. Call requires_grad_() on the input itself, on the output "
        'after the call, or use torch.compile(fn, backend="subclassaot"), which splits the program there'
    )


def outputs_given_their_flag(outputs: tuple[OutputInfo, ...], shown: ShownLeaves) -> tuple[OutputInfo, ...] | None:
    """`outputs` (one per output of the program with the held-back calls skipped) where those at `shown.own`, new
    leaves of eager's that the caller sees by their flag alone, are made to require grad once every output is built
    (OutputInfo.gains_grad, gains_grad_last), as a tensor flagged under no_grad is: nothing else of eager's leaf
    differs from the tensor the program returns without the call, and the other outputs, views of it among them, show
    the same either way (Note [Training Without A Function]). Those at `shown.bases`, views replayed after the graph
    ran, get the flag on their rebuilt `._base` (OutputInfo.base_gains_grad), a leaf as eager's is, once every output is
    built. None where one is
    no tensor the runtime can give the flag (an inference tensor, whose flag only the block it was made in may set;
    for a base, a view the runtime does not replay)."""
    given = list(outputs)
    for k in sorted(shown.own | shown.bases):
        info = outputs[k] if k < len(outputs) else None
        if info is not None and info.kind is OutputKind.SAME_AS:
            continue  # (the same tensor as an earlier output, flagged there)
        if info is None or info.kind is not OutputKind.TENSOR or info.inference or info.inference_leaves:
            return None
        if k in shown.own:
            given[k] = replace(info, gains_grad=True, gains_grad_last=True)
        elif info.replay is None or info.base_gains_grad or info.gains_grad:
            return None
        else:
            given[k] = replace(info, base_gains_grad=True, gains_grad_last=True)
    return tuple(given)
