"""Ambient modes: the caller's dispatch and torch-function modes around a call, and how a compile treats them.

Input: the mode stacks at call time. Output: `AmbientModes` (the modes, and the key an entry is guarded on), the
words a recompile reason or warning uses, and `traced_under`, which runs the user's code with the caller's
torch-function modes while the pipeline's own tensor calls run without them.
Invariants: a mode is applied once per op, as in eager: traced into the graph and off while the graph runs, or
not traced and the call run eagerly. See Note [Ambient Modes].

Part: Stage `analyze` (torch-function subclasses): a compile-time eager trial run when an input is a tensor subclass
with only a __torch_function__ override (no __tensor_flatten__), which the pipeline traces as a plain tensor.

Input: the call and its `FlatInputs`. Output: `TorchFunctionTrial` (eager's output types, and what the compiled
entry must reproduce on identical clones), or None when no input is such a subclass.
Invariants: the trial runs on clones of the inputs under a forked RNG: the real inputs and the generator are untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

import torch
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import is_traceable_subclass
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline.inputs import unflatten_call
from subclassaot.pipeline.python_state import slot_names
from subclassaot.schemas import FlatInputs
from subclassaot.torch_internals import (
    DATA_DEPENDENT_ERRORS,
    ambient_mode_stacks,
    fake_mode_active,
    function_modes_on,
    is_value_read_type_error,
    outside_current_modes,
)

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
#   entry is refused (UnsupportedError naming the input) rather than cached (its Python numbers, strings, dtypes and
#   devices compared by value too: a class attribute `ndim = 10` reads 2 on the traced tensor). Nor can the trace
#   keep what the class adds in Python (a class attribute `x.scale`, an overridden method or property, an attribute its
#   __torch_function__ sets on results) nor a subclass the program makes of a traced tensor (`C(t)`,
#   `t.as_subclass(C)`, `Tensor._make_subclass(C, t)`: torch ties a traced tensor to its functional wrapper): a trace
#   that raises where eager's run on clones does not is refused, naming the input or the rule (`lost_subclasses`),
#   and so is an entry whose trial outputs lack a Python attribute (`__dict__` or `__slots__`) eager's have
#   (`out.extra_state` set by the override would raise). The clones carry the inputs' attributes, slots too.
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


@dataclass(frozen=True, slots=True, kw_only=True)
class TorchFunctionTrial:
    """A compile-time eager run of a program with torch-function subclass inputs (Note [Ambient
    Modes])."""

    output_types: tuple[type[torch.Tensor] | None, ...]  # per OutputIndex: eager's subclass type, None if plain
    subclass_input: str  # the path of the first torch-function subclass input (for messages)
    trial_values: tuple[object, ...]  # flat input values (fresh clones) for the compiled entry's trial call
    eager_outputs: tuple[object, ...]  # eager's output leaves on identical clones
    rng_state: torch.Tensor  # the CPU RNG state both runs start from


def torch_function_trial(call: Callable[..., object], flat: FlatInputs) -> TorchFunctionTrial | None:
    """Run the program eagerly on clones if an input is a torch-function subclass; None otherwise."""
    tensors = [cast(torch.Tensor, flat.values[i]) for i in flat.tensor_indices]
    first = next((i for i, t in zip(flat.tensor_indices, tensors, strict=True) if _has_torch_function(t)), None)
    if first is None:
        return None
    eager_values, trial_values = list(flat.values), list(flat.values)
    for i, t in zip(flat.tensor_indices, tensors, strict=True):
        eager_values[i], trial_values[i] = _detached_clone(t), _detached_clone(t)
    state, args, kwargs = unflatten_call(flat, eager_values)
    rng_state = torch.get_rng_state()
    try:
        with torch.random.fork_rng(devices=[]):
            out = call(state, args, kwargs)
    except Exception as e:
        raise UnsupportedError(
            f"{flat.leaves[first].path} is a torch-function subclass ({type(flat.values[first]).__name__}): the "
            f"types of the program's outputs are found by running it once on clones of the inputs, and that run "
            f"raised {e!r}"
        ) from e
    leaves = pytree.tree_leaves(out)
    return TorchFunctionTrial(
        output_types=tuple(
            type(leaf) if isinstance(leaf, torch.Tensor) and _has_torch_function(leaf) else None for leaf in leaves
        ),
        subclass_input=flat.leaves[first].path,
        trial_values=tuple(trial_values),
        eager_outputs=tuple(leaves),
        rng_state=rng_state,
    )


def check_trial(trial: TorchFunctionTrial, run: Callable[[Sequence[object]], object]) -> None:
    """Run the compiled entry on the trial inputs (`run`) and refuse it unless it gives eager's outputs."""
    with torch.random.fork_rng(devices=[]):
        torch.set_rng_state(trial.rng_state)
        ours = pytree.tree_leaves(run(trial.trial_values))
    for i, (a, b) in enumerate(zip(ours, trial.eager_outputs, strict=False)):
        if not isinstance(a, torch.Tensor) or type(a) is not type(b):
            continue  # (another type: the values' comparison refuses it)
        lost = sorted(_python_attributes(b).keys() - _python_attributes(a).keys())
        if lost:  # (before the values: a method of the output may read them)
            raise UnsupportedError(
                f"{trial.subclass_input}: its class's __torch_function__ gives output {i} Python attributes "
                f"({', '.join(lost)}) that the compiled program's output, retyped by as_subclass, does not have "
                "(the trace keeps the ops, not the Python the class runs around them). Make it a traceable wrapper "
                "subclass (__tensor_flatten__ / __torch_dispatch__) or call the function uncompiled"
            )
    same = len(ours) == len(trial.eager_outputs) and all(
        _same_value(a, b) for a, b in zip(ours, trial.eager_outputs, strict=True)
    )
    if not same:
        raise UnsupportedError(
            f"{trial.subclass_input}: its class's __torch_function__ changes what the program computes (a trial "
            "run of the compiled program on clones of the inputs differs from eager). The pipeline traces the "
            "plain ops under a torch-function subclass; make it a traceable wrapper subclass (__tensor_flatten__ / "
            "__torch_dispatch__) or call the function uncompiled"
        )


# (a kernel reading a fake tensor's memory: its data pointer, or its values, as tensor_split's C++ reads a tensor of
# indices)
_FAKE_DATA_PTR = ("Cannot access data pointer of Tensor", "its data is not allocated yet")
_DATA_PTR_READ = (
    "a kernel the program calls reads a tensor's data pointer (data_ptr()) or its values (torch.tensor_split given a "
    "tensor of indices) while it is traced, where the trace holds tensors without memory (eager's kernel runs on real "
    "ones). Declare the kernel an opaque op (torch.library.custom_op), whose kernel the trace does not enter, or pass "
    "such values as Python numbers (indices.tolist(), outside the compiled function)"
)
_TRACED_SUBCLASS = (
    "makes a tensor subclass of a tensor it computed (C(t), t.as_subclass(C), torch.Tensor._make_subclass(C, t)), "
    "or reads a Python attribute of one, which the trace cannot keep (it traces plain functional tensors)"
)


def lost_subclasses(call: Callable[..., object], flat: FlatInputs) -> Callable[..., object]:
    """`call`, refusing a trace that raises because the trace holds plain tensors where eager has Python subclasses
    (Note [Ambient Modes]): a functional tensor where eager has a subclass made in the program, or a torch-function
    subclass input's Python behaviour lost, eager's own run on clones not raising; an op torch's functionalization
    cannot run as eager does (`_functionalization_refusal`). Any other error raises as it is."""

    def run(state: dict[str, torch.Tensor], args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        try:
            return call(state, args, kwargs)
        except UnsupportedError:
            raise
        except Exception as e:
            if not fake_mode_active():  # (an eager run: the trial's, or a runtime fallback's)
                raise
            if isinstance(e, DATA_DEPENDENT_ERRORS) or (isinstance(e, TypeError) and is_value_read_type_error(e)):
                raise  # (a read of a tensor's value: the run's own refusal names it)
            if any(m in str(e) for m in _FAKE_DATA_PTR):  # (a kernel traced through: CompositeImplicitAutograd)
                raise UnsupportedError(_DATA_PTR_READ) from e
            try:
                with outside_current_modes():  # (eager's run, on real clones)
                    trial = torch_function_trial(call, flat)
            except UnsupportedError:  # (eager raises too: the program's own error)
                raise e from None
            if trial is None:
                refusal = _functionalization_refusal(e)
                if refusal is None:
                    raise
                raise refusal from e
            raise UnsupportedError(
                f"{trial.subclass_input} is a torch-function subclass ({type(flat.values[_first(flat)]).__name__}), "
                f"traced as the plain tensor it holds: the trace raised {e!r} where eager's run on clones did not "
                "(the class's Python attributes, methods or properties are not in the trace). Make it a traceable "
                "wrapper subclass (__tensor_flatten__ / __torch_dispatch__) or call the function uncompiled"
            ) from e

    return run


# torch's functionalization of an in-place op that has no functional variant (aten.polygamma_, whose functional op
# takes its arguments in another order): it names the op's schema
_NO_FUNCTIONAL_VARIANT = re.compile(
    r"Found a custom \(non-ATen\) operator whose output has alias annotations: (\w+)::(\w+)"
)
# the trace's errors that only a program making a tensor subclass of a traced tensor raises
_SUBCLASS_OF_TRACED = ("Creating a new Tensor subclass", "Attempting to use FunctionalTensor on its own")


def _functionalization_refusal(e: Exception) -> UnsupportedError | None:
    """The refusal for a trace error that torch's functionalization raises where eager does not, or None."""
    message = str(e)
    op = _NO_FUNCTIONAL_VARIANT.search(message)
    if op is not None:
        name, method = f"{op[1]}.{op[2]}", op[2].removesuffix("_")
        return UnsupportedError(
            f"the program calls an in-place op with no functional variant ({name}): torch's functionalization, "
            f"which the trace runs the program under, cannot rewrite it. Call the out-of-place op instead "
            f"(x = x.{method}(...) for x.{method}_(...)), or call the function uncompiled"
        )
    if any(m in message for m in _SUBCLASS_OF_TRACED):
        return UnsupportedError(f"the program {_TRACED_SUBCLASS}; the trace raised {e!r}")
    if "FunctionalTensor" in message:
        return UnsupportedError(
            f"an op of the program does not run on the trace's functional tensors as it runs eagerly (an in-place op "
            f"that resizes its input, as addbmm_ of a (1,) self; a kernel that takes a traced tensor for a Python "
            f"number): the trace raised {e!r}. Write the op out of place, or call the function uncompiled"
        )
    return None


def _first(flat: FlatInputs) -> int:
    return next(i for i in flat.tensor_indices if _has_torch_function(cast(torch.Tensor, flat.values[i])))


_COMPARED_BY_VALUE = (bool, int, float, complex, str, torch.dtype, torch.device)


def _same_value(a: object, b: object) -> bool:
    """One output leaf of the trial: tensors by value; Python numbers, strings, dtypes and devices by equality (a
    class attribute shadowing `ndim` gives eager 10 where the trace read 2); other objects by type."""
    if type(a) is not type(b):
        return False
    if isinstance(a, _COMPARED_BY_VALUE):
        return bool(a == b) or (isinstance(a, float) and a != a and b != b)  # (NaN is NaN)
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return True
    return a.shape == b.shape and bool(torch.allclose(a.detach(), b.detach(), equal_nan=True))


def _has_torch_function(t: torch.Tensor) -> bool:
    """A Python tensor subclass with a live __torch_function__ that the pipeline traces as a plain tensor."""
    if type(t) in (torch.Tensor, torch.nn.Parameter) or is_traceable_subclass(t):
        return False
    impl = getattr(type(t).__torch_function__, "__func__", type(t).__torch_function__)
    return impl is not torch._C._disabled_torch_function_impl


def _detached_clone(t: torch.Tensor) -> torch.Tensor:
    """A copy of `t` of the same class (a torch-function subclass via _make_subclass: not a view), same
    requires_grad, a non-leaf where `t` is one."""
    with torch.no_grad(), torch._C.DisableTorchFunctionSubclass():
        c = t.detach().clone()
    if type(c) is not type(t) and _has_torch_function(t):
        c = torch.Tensor._make_subclass(type(t), c)
        for name, value in _python_attributes(t).items():  # (what its __init__ or the caller set on it: `x.scale`)
            setattr(c, name, value)
    if t.requires_grad and t.is_leaf:
        c.requires_grad_(True)
    elif t.requires_grad:
        with torch.enable_grad():
            c = c.requires_grad_(True).clone()
    return c


def _python_attributes(t: object) -> dict[str, object]:
    """The Python attributes an object holds: its `__dict__` and its filled `__slots__`."""
    attrs = dict(getattr(t, "__dict__", {}))
    for name in slot_names(type(t)):
        if name not in attrs and hasattr(t, name):
            attrs[name] = getattr(t, name)
    return attrs
