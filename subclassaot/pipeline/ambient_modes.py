"""Ambient modes: the caller's dispatch and torch-function modes around a call, and how a compile treats them.

Input: the mode stacks at call time. Output: `AmbientModes` (the modes, and the key an entry is guarded on), the
words a recompile reason or warning uses, and `traced_under`, which runs the user's code with the caller's
torch-function modes while the pipeline's own tensor calls run without them.
Invariants: a mode is applied once per op, as in eager: traced into the graph and off while the graph runs, or
not traced and the call run eagerly. See Note [Ambient Modes].
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from subclassaot.torch_internals import ambient_mode_stacks, function_modes_on

# Note [Ambient Modes]
# A mode on the stack around a call changes what every op of the program does: in eager, under TwoTensorMode,
# `x + torch.ones(3, 4)` makes the factory's result a TwoTensor, so the sum is one. A compiled graph holds the ops
# as they were after the modes ran, so each mode is either traced into the graph and kept off while the graph runs,
# or not traced and the call runs eagerly. Never both (the mode would apply twice: a TwoTensor of TwoTensors) and
# never neither.
# - A torch-function mode sees Python-level calls, the user's code's calls among them. The trace pushes the caller's
#   torch-function modes back around the user's code only (the pipeline's own tensor calls never see them), and the
#   entry runs with them popped: they would otherwise see the graph's aten calls and apply again.
# - A dispatch mode sees aten calls on real tensors below autograd, where it may build subclasses, read values or
#   keep state per call; a fake, functional trace cannot run it as eager does. A call under one runs eagerly, with
#   a warning naming the mode.
# - The modes on the stack are part of every entry's guards, by type, bottom first: an entry compiled with no mode
#   is not reused under one, nor the reverse, and the recompile reason names the modes. A mode's own state is not
#   guarded (nor does Dynamo guard it): instances of one mode class are taken to behave alike.
# - A tensor subclass that only overrides __torch_function__ (no __tensor_flatten__: `x.as_subclass(MyTensor)`) is
#   traced as the plain tensor it holds, so the graph's outputs are plain, where eager's Tensor.__torch_function__
#   turns every result into the subclass and an override may do anything else; fakes cannot show either. So the driver
#   runs the program once for real at compile time on clones of the inputs (the RNG state restored) and records each
#   output's type, and the runtime applies `as_subclass` where eager's differs. The new entry then runs on a second set
#   of clones from the same RNG state and must give the same outputs; if the override changed what the ops compute, the
#   entry is refused (UnsupportedError naming the input) rather than cached.
# Infrastructure modes (fake tensors, functionalization, proxy tracing, modes that ignore compile internals, and
# subclassaot's own, seen by a compiled function called while another is traced) belong to a tracer, not the
# caller: they are not ambient.

ModesKey = tuple[tuple[type, ...], tuple[type, ...]]  # (dispatch mode types, torch-function mode types), bottom first
NO_MODES_KEY: ModesKey = ((), ())


@dataclass(frozen=True, slots=True, kw_only=True)
class AmbientModes:
    dispatch: tuple[object, ...]  # the caller's dispatch modes, bottom of the stack first
    function: tuple[object, ...]  # the caller's torch-function modes, bottom of the stack first

    @property
    def key(self) -> ModesKey:
        return tuple(type(m) for m in self.dispatch), tuple(type(m) for m in self.function)

    def __bool__(self) -> bool:
        return bool(self.dispatch or self.function)


NO_MODES = AmbientModes(dispatch=(), function=())


def ambient_modes() -> AmbientModes:
    """The caller's modes now (cheap when there are none: the per-call path asks on every call)."""
    dispatch, function = ambient_mode_stacks()
    if not dispatch and not function:
        return NO_MODES
    return AmbientModes(dispatch=dispatch, function=function)


def describe_modes(key: ModesKey) -> str:
    """In words: "no modes", "dispatch mode TwoTensorMode", "torch-function modes A, B"."""
    parts = []
    for kind, types in zip(("dispatch", "torch-function"), key, strict=True):
        if types:
            names = ", ".join(t.__qualname__ for t in types)
            parts.append(f"{kind} mode{'s' if len(types) > 1 else ''} {names}")
    return " and ".join(parts) or "no modes"


def describe_modes_change(compiled: ModesKey, now: ModesKey) -> str:
    return f"ambient modes: compiled under {describe_modes(compiled)}, called under {describe_modes(now)}"


def traced_under(function_modes: tuple[object, ...], call: Callable[..., object]) -> Callable[..., object]:
    """`call` with the caller's torch-function modes on the stack while it runs (the trace records their effect)."""
    if not function_modes:
        return call

    def run(*args: object, **kwargs: object) -> object:
        with function_modes_on(function_modes):
            return call(*args, **kwargs)

    return run
