"""Stage `inputs`: flatten the call's argument pytree; lift a module's parameters and buffers, the tensors a
function captures (closure cells, globals), and the state of modules passed as arguments, to inputs.

Input: the user's callable (function or nn.Module) and one call's args/kwargs. Output: `FlatInputs` plus the
function that the later stages trace, taking the same pytree back. Invariants: tensor leaves keep their identity
(aliasing between inputs is visible to later stages); every leaf has a source path used in every message.

Part: Activation checkpointing (torch.utils.checkpoint) while the pipeline runs the user's code.

Input: the user's program, run by the pipeline's stages (observe, functional run, joint trace) inside
`regions_run_inline()`.
Output: each `checkpoint(fn, *args, ...)` call runs `fn(*args)` once, in place, as eager's values and gradients
are; eager-only differences are refused.
Invariants: nothing is patched outside the `with` block; a checkpoint call outside the pipeline's runs is torch's.

Part: One tensor passed at several positions of a call (`f(x, x)`): compiled as a program of its first position only.

Input: the user's function and one call's args/kwargs. Output: `SameInputs` (which positions repeat which), the
function the pipeline compiles in the user's place, and the compiled entry's guards and runner over the user's
values. Invariants: only the leaves of a repeated tensor change (to a `SameTensorAs` marker); every other leaf
keeps its position and its path; an entry compiled this way runs only where the same positions hold the very same
object again (guarded by `is`).
"""

from __future__ import annotations

import contextlib
import threading
import traceback
import types
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.utils.checkpoint as torch_checkpoint
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

from subclassaot.authoring.protocol import flatten_subclass, is_traceable_subclass, map_inner_tensors
from subclassaot.errors import TRAINING_STEP_HINT, UnsupportedError
from subclassaot.pipeline import python_state
from subclassaot.pipeline.guards import Guards
from subclassaot.pipeline.python_state import global_names
from subclassaot.pipeline.rng_calls import default_generators_as_none, generator_calls_refused, refuse_generator_inputs
from subclassaot.pipeline.rules.new_leaves import ConstructorFlags, constructor_flags_as_calls
from subclassaot.runtime.regenerate import unflatten_output
from subclassaot.schemas import FlatInputs, InputIndex, InputLeaf, LeafKind
from subclassaot.torch_internals import (
    compiled_call_under_transform_message,
    cond_with_flat_branches,
    fake_mode_active,
    functorch_unwrapped,
    is_compiler_checkpoint_region,
    is_functorch_wrapped,
    is_real_plain_tensor,
    no_torch_function,
    outside_current_modes,
)

CaptureRef = tuple[str, str]  # ("closure" | "globals", name) or ("self", "__self__"): a bound method's module


def module_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Parameters then buffers by qualified name (the names `state_dict` uses)."""
    state: dict[str, torch.Tensor] = dict(module.named_parameters(remove_duplicate=False))
    state.update(dict(module.named_buffers(remove_duplicate=False)))
    return state


def module_tensor_attributes(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Tensors held as plain attributes (`self.scale = torch.tensor(2.0)`, neither parameter nor buffer), by
    qualified name: lifted like the state (Note [State The Program Reads])."""
    out: dict[str, torch.Tensor] = {}
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for name, value in vars(sub).items():
            if isinstance(value, torch.Tensor):
                out[f"{prefix}.{name}" if prefix else name] = value
    return out


# Some modules keep a plain list of their own parameters (or of weak references to them), rebuilt whenever one is set
# (an RNN's `_flat_weights` and `_flat_weight_refs`). Tracing swaps the parameters for traced stand-ins and back
# (`functional_call`), which rebuilds such a list: left alone, the module would keep a list of the trace's tensors,
# which an eager call of the module (or the Python-state guards) would then read. Such lists are put back as they
# were after the trace. Nothing else is restored: an attribute a forward assigns is a side effect of the program,
# which the Python-state guards refuse by name.
def _derived_caches(module: torch.nn.Module) -> dict[tuple[torch.nn.Module, str], object]:
    own = {id(t) for t in module_state(module).values()}

    def owned(x: object) -> bool:  # one of the module's tensors, or a weak reference to one (`_flat_weight_refs`)
        target = x() if isinstance(x, weakref.ref) else x
        return isinstance(target, torch.Tensor) and id(target) in own

    return {
        (sub, name): value
        for sub in module.modules()
        for name, value in vars(sub).items()
        if isinstance(value, list | tuple) and any(owned(x) for x in value)
    }


def lifted_state(
    fn: Callable[..., object],
    refs: tuple[CaptureRef, ...],
    args: tuple[object, ...] = (),
    kwargs: Mapping[str, object] | None = None,
) -> dict[str, torch.Tensor]:
    """What is lifted to inputs besides the arguments, by name: a module's parameters, buffers and tensor
    attributes, or the tensors a function captures (`refs`, from `capture_refs`); then the state of the modules in
    the arguments (Note [State The Program Reads])."""
    if isinstance(fn, torch.nn.Module):
        state = {**module_state(fn), **module_tensor_attributes(fn)}
    else:
        state = captured_state(fn, refs)
    if not args and not kwargs:
        return state
    seen = {id(t) for t in state.values()}
    for path, module in argument_modules(args, kwargs or {}):
        for name, t in {**module_state(module), **module_tensor_attributes(module)}.items():
            if id(t) not in seen:
                seen.add(id(t))
                state[f"{path}.{name}"] = t
    return state


def argument_modules(args: tuple[object, ...], kwargs: Mapping[str, object]) -> list[tuple[str, torch.nn.Module]]:
    """The nn.Modules among the argument pytree's leaves, with their paths (`args[0]`, `kwargs['m']`)."""
    keyed, _ = pytree.tree_flatten_with_path((args, dict(kwargs)))
    out: list[tuple[str, torch.nn.Module]] = []
    for key_path, value in keyed:
        if isinstance(value, torch.nn.Module):
            head, *rest = key_path
            root = ("args", "kwargs")[cast(pytree.SequenceKey[object], head).idx]
            out.append((root + pytree.keystr(tuple(rest)), value))
    return out


def capture_refs(fn: Callable[..., object]) -> tuple[CaptureRef, ...]:
    """The closure cells and referenced globals of `fn` (and of functions nested in it) that hold a tensor or an
    nn.Module now: the names `captured_state` reads on every call (Note [State The Program Reads])."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType) or isinstance(fn, torch.nn.Module):
        return ()
    refs: list[CaptureRef] = []
    closure = getattr(fn, "__closure__", None) or ()
    for name, cell in zip(code.co_freevars, closure, strict=True):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell (assigned later in the enclosing function)
            value = None
        if isinstance(value, torch.Tensor | torch.nn.Module):
            refs.append(("closure", name))
    fn_globals: dict[str, object] = getattr(fn, "__globals__", {})
    for name in dict.fromkeys(global_names(code)):
        if isinstance(fn_globals.get(name), torch.Tensor | torch.nn.Module):
            refs.append(("globals", name))
    if isinstance(getattr(fn, "__self__", None), torch.nn.Module):  # a module's bound method (`model.forward`)
        refs.append(("self", "__self__"))
    return tuple(refs)


def captured_state(fn: Callable[..., object], refs: tuple[CaptureRef, ...]) -> dict[str, torch.Tensor]:
    """The captured tensors by path, read now (a captured module contributes its parameters and buffers)."""
    if not refs:
        return {}
    code = cast(types.FunctionType, fn).__code__
    cells = dict(zip(code.co_freevars, cast(types.FunctionType, fn).__closure__ or (), strict=True))
    fn_globals: dict[str, object] = cast(types.FunctionType, fn).__globals__
    state: dict[str, torch.Tensor] = {}
    for kind, name in refs:
        if kind == "self":  # the bound method's module: its state keyed as its own forward would name it
            state.update({f"self.{k}": v for k, v in module_state(getattr(fn, name)).items()})
            continue
        value = cells[name].cell_contents if kind == "closure" else fn_globals.get(name)
        if isinstance(value, torch.nn.Module):
            state.update({f"{kind}.{name}.{k}": v for k, v in module_state(value).items()})
        elif isinstance(value, torch.Tensor):
            state[f"{kind}.{name}"] = value
    return state


_METADATA_READS = frozenset({"__get__", "size", "stride", "dim", "numel", "storage_offset"})  # (`.shape`: __get__)


class _BranchRead(Exception):  # (not an error: a run of a branch found one more tensor it reads)
    def __init__(self, tensor: torch.Tensor, reads: list[torch.Tensor]) -> None:
        super().__init__("a torch.cond branch reads a tensor it does not take as an operand")
        self.tensor = tensor
        self.reads = reads  # (the call that lifts it: a cond inside a branch lifts its own reads)


class _BranchReads(TorchFunctionMode):
    """Around a run of a torch.cond branch: every tensor an op in it takes is one of its operands, one it made, or
    one it reads from outside (a closure variable, global, module parameter, a tensor the program computed before
    the call) that the op already passes it (`lifted`: the branch's own tensor, by the id of the outside tensor's
    traced stand-in, which `swap` gives). Any other ends the run (`_BranchRead`) and the op is called again with it
    lifted too, as Dynamo lifts what eager's torch.cond's branches read (Note [State The Program Reads])."""

    def __init__(
        self,
        operands: tuple[object, ...],
        reads: list[torch.Tensor],
        lifted: dict[int, torch.Tensor],
        swap: Callable[[torch.Tensor], torch.Tensor],
    ) -> None:
        super().__init__()
        self.reads = reads
        self.lifted = lifted
        self.swap = swap
        self.known = {id(t) for t in operands if isinstance(t, torch.Tensor)}

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: object,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        leaves, spec = pytree.tree_flatten((args, kwargs or {}))
        swapped = [self._own(t) if isinstance(t, torch.Tensor) else t for t in leaves]
        args, kwargs = pytree.tree_unflatten(swapped, spec)
        is_cond, out = _call_cond_lifting_reads(func, args, kwargs, self._own)  # (a cond in the branch: its reads)
        out = out if is_cond else func(*args, **kwargs)
        self.known.update(id(t) for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor))
        return out

    def __enter__(self) -> Callable[[object], object]:
        super().__enter__()  # type: ignore[no-untyped-call]  # (untyped in torch)
        return self.returned

    def returned(self, leaf: object) -> object:
        """What the op gets for a leaf the branch returns: an outside tensor returned as it is is lifted too."""
        return self._own(leaf) if isinstance(leaf, torch.Tensor) else leaf

    def _own(self, t: torch.Tensor) -> torch.Tensor:
        if id(t) in self.known:
            return t
        # (a backward's run of the branch reads a module's parameter itself, its forward's the stand-in)
        stand_in = self.swap(t)
        lifted = self.lifted.get(id(stand_in))
        if lifted is None:
            raise _BranchRead(stand_in, self.reads)
        return lifted


def _call_cond_lifting_reads(
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    swap: Callable[[torch.Tensor], torch.Tensor],
) -> tuple[bool, object]:
    """(True, the op's output) for the program's call of torch.cond's op, its branches' reads of tensors outside
    them lifted to operands (`swap` gives the traced stand-in of a captured one); (False, None) for any other call.
    A run of a branch that meets a tensor not yet lifted stops there, and the op is called again with it lifted."""
    reads: list[torch.Tensor] = []  # the stand-ins of the tensors outside the branches that they read
    while True:

        def around(branch: Callable[..., object], ops: tuple[object, ...], lifted: tuple[object, ...]) -> _BranchReads:
            by_id = {id(r): cast(torch.Tensor, b) for r, b in zip(reads, lifted, strict=True)}
            return _BranchReads(ops, reads, by_id, swap)

        flat = cond_with_flat_branches(func, args, around, tuple(reads))
        if flat is None:
            return False, None
        try:
            return True, flat[1](func(*flat[0], **kwargs))
        except _BranchRead as e:
            if e.reads is not reads:
                raise  # (an outer cond's read, met inside a cond in its branch: the outer call lifts it)
            if any(e.tensor is t for t in reads):
                raise  # (BUG guard: a lifted tensor's read is swapped for the branch's own)
            reads.append(e.tensor)


class _LiftCaptured(TorchFunctionMode):
    """While the program is traced: every op given a captured real tensor gets its traced stand-in instead; a real
    tensor that was not lifted is refused (Note [State The Program Reads])."""

    def __init__(self, table: dict[int, torch.Tensor], fn: Callable[..., object], leaves: list[object]) -> None:
        super().__init__()
        self.table = table
        self.fn = fn
        self.made = ConstructorFlags()  # wrappers built with requires_grad=True, not yet flagged
        # the ids of the traced arguments and captured tensors (`_share_memory`)
        self.arguments = {id(t) for t in (*leaves, *table.values()) if isinstance(t, torch.Tensor)}

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: object,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.Tensor.share_memory_:
            return self._share_memory(args[0])
        if func is torch.ops.aten.lift_fresh.default:  # (a constant C++ made of a Python number: `x.real = 10`)
            return func(*args, **kwargs)
        if self.made.pending or self.made.read_only:
            self.made.flag_taken(func, (args, kwargs))
        leaves, spec = pytree.tree_flatten((args, kwargs))  # (one walk: rebuilt only where a tensor is swapped)
        swapped = [
            self._swap(t) if isinstance(t, torch.Tensor) else t for t in default_generators_as_none(func, leaves)
        ]
        if any(s is not t for s, t in zip(swapped, leaves, strict=True)):
            args, kwargs = pytree.tree_unflatten(swapped, spec)
        if self.table and getattr(func, "__name__", None) not in _METADATA_READS:
            for t in swapped:
                if isinstance(t, torch.Tensor):
                    self._refuse_built_around_captured(t)
        is_cond, out = _call_cond_lifting_reads(func, args, kwargs, self._swap)
        return out if is_cond else func(*args, **kwargs)

    def _share_memory(self, t: torch.Tensor) -> torch.Tensor:
        """`share_memory_()` moves a CPU storage into shared memory, its values, layout, aliasing and version counter
        unchanged (on an accelerator it does nothing): of a tensor the program made, no op the compiled call must
        run. Of an argument or captured tensor, or a view of one, the caller's storage would be shared afterwards
        (`is_shared()`): refused."""
        if id(t) in self.arguments or (t._base is not None and id(t._base) in self.arguments):
            raise UnsupportedError(
                f"{getattr(self.fn, '__qualname__', type(self.fn).__name__)} calls share_memory_() on an argument or "
                "captured tensor (or a view of one): eager moves the caller's storage into shared memory, which the "
                "compiled call does not do; call share_memory_() before calling the compiled function"
            )
        return t

    def _swap(self, t: torch.Tensor) -> torch.Tensor:
        lifted = self.table.get(id(t))
        if lifted is not None:
            return lifted
        if is_functorch_wrapped(t) and id(functorch_unwrapped(t)) in self.table:
            raise UnsupportedError(
                f"{getattr(self.fn, '__qualname__', type(self.fn).__name__)} passes a tensor it captures (a closure "
                "variable, global or module attribute) straight into a torch.func transform (vmap, grad, jacrev) "
                "as the transformed argument: the transform wraps the captured tensor itself, before the compiled "
                "program can read it as an input. Pass it as an argument of the compiled function "
                "(Note [State The Program Reads])"
            )
        if is_real_plain_tensor(t) and fake_mode_active():  # a real run (torch_function_output_types) makes them
            raise UnsupportedError(uncaptured_tensor_message(self.fn, t))
        return t

    def _refuse_built_around_captured(self, t: torch.Tensor) -> None:
        if is_traceable_subclass(t):
            attrs, _ = t.__tensor_flatten__()
            if any(id(getattr(t, a)) in self.table for a in attrs):
                raise UnsupportedError(
                    f"{getattr(self.fn, '__qualname__', type(self.fn).__name__)} builds a {type(t).__name__} around "
                    "a tensor it captures (a closure variable, global or module attribute) and then computes with "
                    "it: the subclass's own ops would read the captured tensor itself, not the compiled program's "
                    "input for it. Pass the subclass (or the tensor) as an argument of the compiled function "
                    "(Note [State The Program Reads])"
                )

    def lift_outputs(self, out: object) -> object:
        """The program's outputs with every captured tensor reached without an op swapped for its stand-in: one
        returned as it is, or held by a subclass built around it (a constructor is no torch function)."""
        leaves, spec = pytree.tree_flatten(out)
        lifted = [self._lift_output(v) if isinstance(v, torch.Tensor) else v for v in leaves]
        if all(a is b for a, b in zip(lifted, leaves, strict=True)):
            return out  # (as returned: a torch.Size stays one, which pytree rebuilds as a tuple)
        return unflatten_output(lifted, spec)

    def _lift_output(self, t: torch.Tensor) -> torch.Tensor:
        lifted = self.table.get(id(t))
        if lifted is not None:
            return lifted
        if is_traceable_subclass(t) and self.table:
            _, leaves = flatten_subclass(t, "out")
            if any(id(leaf) in self.table for leaf in leaves):
                return map_inner_tensors(
                    t,
                    lambda _, leaf: self.table.get(id(leaf), leaf),
                    "out",
                    outer_size=t.size(),
                    outer_stride=t.stride(),
                )
        return t


def uncaptured_tensor_message(fn: Callable[..., object], t: torch.Tensor) -> str:
    name = getattr(fn, "__qualname__", type(fn).__name__)
    return (
        f"{name} uses a tensor of shape {tuple(t.shape)} and dtype {t.dtype} that is not an argument, not a closure "
        "variable or global it names, and not a parameter, buffer or tensor attribute of the module or of a module "
        "passed as an argument: the compiled "
        "program would freeze it as a constant, while eager reads it (and sees its changes) on every call. Pass it "
        "as an argument, or make it an attribute of the module you compile"
        + (f". {TRAINING_STEP_HINT}" if isinstance(t, torch.nn.Parameter) else "")
    )


@contextlib.contextmanager
def _grad_state_restored_on_error() -> Iterator[None]:
    """The caller's grad mode and inference mode after the program raises part-way. A graph Dynamo captured switches
    them by calls, not `with` blocks (`torch._C._set_grad_enabled(False)`, `_enter_inference_mode(True)` ...
    `_exit_inference_mode(guard)`), so a refusal raised between two such calls would leave the switch on for every
    later call of the process; the inference-mode guard lives in the graph's frame, which the traceback keeps."""
    grad = torch.is_grad_enabled()
    try:
        yield
    except BaseException as e:
        traceback.clear_frames(e.__traceback__)  # drops the guards the program entered: they restore on release
        torch.set_grad_enabled(grad)
        raise


def _mark_parameters(state: Mapping[str, torch.Tensor], real: Mapping[str, torch.Tensor]) -> None:
    """The trace's stand-in of a parameter answers `isinstance(t, nn.Parameter)` as eager's does (the parameter
    metaclass's `_is_param` flag): a forward that branches on it took the other branch in the trace."""
    for k, v in state.items():
        if v is not real[k] and isinstance(real[k], torch.nn.Parameter) and not isinstance(v, torch.nn.Parameter):
            v._is_param = True


def _tensor_arguments(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> list[tuple[str, torch.Tensor, frozenset[str]]]:
    """Each tensor argument as the call got it: its path, the tensor, its public Python attributes then."""
    found = []
    for key_path, value in pytree.tree_flatten_with_path((args, kwargs))[0]:
        if isinstance(value, torch.Tensor):
            root = ("args", "kwargs")[cast(pytree.SequenceKey[object], key_path[0]).idx]
            found.append((f"{root}{pytree.keystr(tuple(key_path[1:]))}", value, python_state.tensor_attributes(value)))
    return found


def _refuse_attributes_set(before: list[tuple[str, torch.Tensor, frozenset[str]]], out: object) -> None:
    """A program that sets a Python attribute on a tensor argument (`x.flag = True`) set it on the trace's stand-in:
    the caller's tensor would not have it after the call, as eager's does. Refused by name. (The arguments as the call
    got them: a program may add or replace a container's entries, which another rule refuses.) Then the outputs'."""
    for path, value, had in before:
        if added := python_state.tensor_attributes(value) - had:
            raise UnsupportedError(
                f"{path}: the program sets Python attributes on this tensor "
                f"argument ({', '.join(sorted(added))}), which the compiled call does not make on the caller's "
                "tensor; set them outside the compiled function"
            )
    _refuse_output_attributes(out)


def _refuse_output_attributes(out: object) -> None:
    """A program that sets a Python attribute on a tensor it returns (`y.flag = True`) set it on the trace's tensor:
    the compiled call's result would not have it, as eager's does. Refused by name."""
    for key_path, value in pytree.tree_flatten_with_path(out)[0]:
        if isinstance(value, torch.Tensor) and (added := python_state.attributes_set_in_trace(value)):
            raise UnsupportedError(
                f"output{pytree.keystr(key_path)}: the program sets Python attributes on this tensor output "
                f"({', '.join(sorted(added))}), which the compiled call does not make on its result; set them on "
                "the compiled function's result instead"
            )


def flatten_call(
    fn: Callable[..., object],
    args: tuple[object, ...],
    kwargs: Mapping[str, object],
    refs: tuple[CaptureRef, ...] | None = None,
) -> tuple[FlatInputs, Callable[..., object]]:
    """Flatten one call; return the flat record and `call(state, args, kwargs)` that runs the user's code. `refs`:
    the captures to lift (default: what `capture_refs(fn)` finds now)."""
    state = lifted_state(fn, capture_refs(fn) if refs is None else refs, args, kwargs)
    real = dict(state)
    own: frozenset[str] = frozenset()
    if isinstance(fn, torch.nn.Module):
        module = fn
        names = tuple(module_state(module))
        attrs = module_tensor_attributes(module)  # plain tensor attributes, lifted by the mode
        own = frozenset((*names, *attrs))

        def run(state: dict[str, torch.Tensor], args: tuple[object, ...], kwargs: dict[str, object]) -> object:
            params = {k: state[k] for k in names}
            handle = module.register_forward_hook(lambda mod, a, out: _check_state_kept(mod, params, attrs))
            caches = _derived_caches(module)
            try:
                return torch.func.functional_call(module, params, args, kwargs, tie_weights=False, strict=True)
            finally:
                handle.remove()
                for k, v in attrs.items():  # a forward that rebinds one is refused; leave the module as it was
                    owner, _, attr = k.rpartition(".")
                    setattr(module.get_submodule(owner), attr, v)
                for (sub, name), cache in caches.items():  # see _derived_caches
                    sub.__dict__[name] = cache

    else:
        user_fn = fn

        def run(state: dict[str, torch.Tensor], args: tuple[object, ...], kwargs: dict[str, object]) -> object:
            return user_fn(*args, **kwargs)

    def call(state: dict[str, torch.Tensor], args: tuple[object, ...], kwargs: dict[str, object]) -> object:
        python_state.run_starts()  # See Note [State The Program Reads], "Writes"
        _mark_parameters(state, real)
        # See Note [Checkpointed Regions Run Inline]
        leaves = pytree.tree_leaves((state, args, kwargs))
        lift = _LiftCaptured({id(real[k]): v for k, v in state.items() if v is not real[k]}, fn, leaves)
        with outside_current_modes(), no_torch_function():  # (the pipeline's read, not the program's)
            lift.made.grad_inputs = any(isinstance(t, torch.Tensor) and t.requires_grad for t in leaves)
        attrs = _tensor_arguments(args, kwargs)
        with _grad_state_restored_on_error(), lift, regions_run_inline(), generator_calls_refused():
            with constructor_flags_as_calls(lift.made):
                out = run(state, args, kwargs)
            lift.made.flag_all()  # See Note [Training Without A Function], constructor flags
            lift.made.refuse_returned(out)
        _refuse_attributes_set(attrs, out)
        out = lift.lift_outputs(out)
        python_state.run_completed()
        return out

    values, spec = pytree.tree_flatten((state, args, dict(kwargs)))
    paths = _leaf_paths((state, args, dict(kwargs)), own)
    leaves = tuple(
        InputLeaf(
            index=InputIndex(i),
            path=path,
            kind=LeafKind.TENSOR if isinstance(v, torch.Tensor) else LeafKind.CONSTANT,
        )
        for i, (path, v) in enumerate(zip(paths, values, strict=True))
    )
    # See Note [Compiled Functions Inside torch.func Transforms]
    refuse_transform_wrappers(args, kwargs)
    _refuse_sparse(values, paths)
    refuse_generator_inputs(values, paths)
    if torch._C._are_functorch_transforms_active():  # (the trace's own tensors would be the transform's wrappers)
        raise UnsupportedError(compiled_call_under_transform_message("the call"))
    flat = FlatInputs(
        spec=spec,
        leaves=leaves,
        values=tuple(values),
        tensor_indices=tuple(leaf.index for leaf in leaves if leaf.kind is LeafKind.TENSOR),
        module_state_names=tuple(state),
    )
    return flat, cast(Callable[..., object], call)


# Note [Compiled Functions Inside torch.func Transforms]
# A compiled function runs its program as an autograd.Function over the real tensors it unwraps itself, and its
# guards and compile read storages. A torch.func transform (grad, vjp, jacrev, jvp, jacfwd, vmap) calls it either
# with its own wrappers (GradTrackingTensor, BatchedTensor: no storage) or, over tensors it does not wrap, through
# torch's Function.apply, which under any active transform asks for a setup_context staticmethod and a vmap rule.
# Neither gives eager's result, so each is refused where it is met, naming the transform and the fix (call the
# function uncompiled inside the transform, or compile the whole transformed function, whose trace runs the
# transform on fake tensors):
#   - a wrapper among the arguments: here, at compile; and at a warm entry, where its guards' storage read raises
#     NotImplementedError (the call's `except`, zero-cost until raised: no check on the per-call path);
#   - a compile while a transform is active (the trace would make the transform's wrappers);
#   - the training runner's apply while a transform is active (runtime/autograd_function/apply.py: the branch the runner
#     takes only under transforms). An inference entry over untransformed tensors runs its graph as it is.


def refuse_transform_wrappers(args: tuple[object, ...], kwargs: Mapping[str, object]) -> None:
    """Refuse a call whose arguments hold a torch.func transform's wrapper, naming the first one's path."""
    keyed, _ = pytree.tree_flatten_with_path((args, dict(kwargs)))
    for key_path, value in keyed:
        if is_functorch_wrapped(value):
            root = ("args", "kwargs")[cast(pytree.SequenceKey[object], key_path[0]).idx]
            raise UnsupportedError(compiled_call_under_transform_message(root + pytree.keystr(tuple(key_path[1:]))))


_SPARSE_LAYOUTS = frozenset(
    (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)
)  # (a nested jagged tensor, layout torch.jagged, is a traceable subclass: it compiles)


def _refuse_sparse(values: Sequence[object], paths: Sequence[str]) -> None:
    for value, path in zip(values, paths, strict=True):
        refuse_sparse(path, value)


def refuse_sparse(path: str, value: object) -> None:
    """Refuse a sparse (COO, CSR, ...) tensor, an input or an output, naming its path: the pipeline traces dense
    tensors over storages, and a sparse tensor has no storage nor strides."""
    if isinstance(value, torch.Tensor) and value.layout in _SPARSE_LAYOUTS:
        raise UnsupportedError(
            f"{path} is a tensor of layout {value.layout}: subclassaot compiles strided (dense) tensors only. "
            f"Make it dense ({path}.to_dense(); torch.sparse.mm(s, w) is s.to_dense() @ w), or call the sparse part "
            'outside the compiled function; torch.compile(fn, backend="subclassaot") runs it eagerly'
        )


def _check_state_kept(
    module: torch.nn.Module, params: Mapping[str, torch.Tensor], attrs: Mapping[str, torch.Tensor]
) -> None:
    """Refuse a forward that rebinds a parameter, buffer or lifted tensor attribute (`self.buf = ...`): the compiled
    module would keep the old tensor, where eager's module holds the new one after the call."""
    for name, tensor in (*params.items(), *attrs.items()):
        owner, _, attr = name.rpartition(".")
        if getattr(module.get_submodule(owner), attr) is not tensor:
            raise UnsupportedError(
                f"self.{name}: the forward assigns a new tensor to this parameter, buffer or tensor attribute; "
                f"rebinding module state in a compiled forward is not supported. Update it in place instead "
                f"(self.{name}.copy_(...)); for the hook-based torch.nn.utils.spectral_norm / weight_norm, which "
                "rebind the weight before every forward, use torch.nn.utils.parametrizations.spectral_norm / "
                "weight_norm"
            )


def _leaf_paths(
    tree: tuple[dict[str, torch.Tensor], tuple[object, ...], dict[str, object]], own: frozenset[str]
) -> list[str]:
    """Source paths; `own`: the compiled module's state names (the rest of the state is keyed by its path)."""
    keyed, _ = pytree.tree_flatten_with_path(tree)
    out: list[str] = []
    for key_path, _value in keyed:
        head, *rest = key_path
        root = ("self", "args", "kwargs")[cast(pytree.SequenceKey[object], head).idx]
        name = cast(pytree.MappingKey[str, object], rest[0]).key if root == "self" else ""
        if root == "self" and name not in own:  # captured tensors, argument modules' state: keyed by their path
            out.append(name + pytree.keystr(tuple(rest[1:])))
        elif root == "self":
            # Module state is keyed by qualified name: self.layer.weight reads better than self['layer.weight'].
            out.append(f"self.{name}" + pytree.keystr(tuple(rest[1:])))
        else:
            out.append(root + pytree.keystr(tuple(rest)))
    return out


def unflatten_call(
    flat: FlatInputs, values: list[object]
) -> tuple[dict[str, torch.Tensor], tuple[object, ...], dict[str, object]]:
    """Rebuild (state, args, kwargs) from leaf values in InputIndex order."""
    state, args, kwargs = pytree.tree_unflatten(values, flat.spec)
    return (
        cast(dict[str, torch.Tensor], state),
        cast(tuple[object, ...], args),
        cast(dict[str, object], kwargs),
    )


# Note [Checkpointed Regions Run Inline]
# `checkpoint(fn, *args)` computes fn(*args); what it changes is what autograd keeps: eager frees the region's
# activations and the backward recomputes them, restoring the RNG state the forward had (preserve_rng_state=True, the
# default), so the recomputation draws the forward's random numbers (dropout's mask) and leaves the RNG as it was.
# Traced as eager runs it, the recomputation lands in the backward graph as fresh random ops (the RNG state it
# restores is no op of the graph): the backward would draw another mask. So while the pipeline runs the program, a
# checkpointed region runs once, inline: the joint graph saves what the partition decides, the forward draws the
# mask once and the backward uses it, exactly eager's values, gradients and final RNG state. Both variants:
#   * non-reentrant: `context_fn`'s forward context is entered around the region (a selective-checkpoint policy
#     only chooses what is saved, which the partition decides for us); the saved-tensor hooks are not installed;
#   * reentrant: eager runs the region under no_grad inside an autograd.Function whose outputs require grad iff an
#     input does; inline the region runs with grad where an input requires grad, else under no_grad (as eager, a
#     parameter used inside gets no gradient then). An output that eager's Function marks as requiring grad but
#     that does not depend on anything requiring grad inline (eager's backward raises) is refused.
# Refused: preserve_rng_state=False with grad enabled (eager's recomputation draws new numbers at backward time,
# which the compiled backward cannot draw), except from the region of a graph Dynamo captured: its checkpoint
# higher-order op always passes False, since under torch.compile the compiler keeps the draws (as inlining does). The patch swaps two module globals of torch.utils.checkpoint, which
# `checkpoint` reads on every call, for the duration of one run; a lock keeps concurrent compiles from nesting it.

_LOCK = threading.RLock()


def _no_random_redraw(preserve_rng_state: bool) -> None:
    if not preserve_rng_state and torch.is_grad_enabled():
        raise UnsupportedError(
            "the program calls torch.utils.checkpoint.checkpoint(..., preserve_rng_state=False): eager's backward "
            "recomputes the region with the RNG state it finds at backward time, so random ops inside it (dropout) "
            "draw other numbers than the forward did; the compiled backward cannot draw them. Pass "
            "preserve_rng_state=True (the default), or call the region without checkpoint"
        )


def _inline_non_reentrant(
    fn: Callable[..., object],
    preserve_rng_state: bool = True,
    context_fn: Callable[[], tuple[contextlib.AbstractContextManager[object], object]] = (
        torch_checkpoint.noop_context_fn
    ),
    *rest: object,
    **kwargs: object,
) -> Iterator[None]:
    _no_random_redraw(preserve_rng_state or is_compiler_checkpoint_region(fn))
    forward_context, _ = context_fn()
    with forward_context:
        yield


class _InlineReentrant:
    @staticmethod
    def apply(fn: Callable[..., object], preserve_rng_state: bool, *args: object) -> object:
        _no_random_redraw(preserve_rng_state)
        tracks = torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        with torch.set_grad_enabled(tracks):
            out = fn(*args)
        flat = out if isinstance(out, tuple) else (out,)
        if tracks and any(isinstance(t, torch.Tensor) and not t.requires_grad for t in flat):
            raise UnsupportedError(
                "the program calls torch.utils.checkpoint.checkpoint(..., use_reentrant=True) on a region with an "
                "output that depends on nothing requiring grad: eager's reentrant checkpoint marks it as requiring "
                "grad and its backward then fails. Detach that output, or use use_reentrant=False"
            )
        return out


@contextlib.contextmanager
def regions_run_inline() -> Iterator[None]:
    """Within: torch.utils.checkpoint's regions run inline (Note [Checkpointed Regions Run Inline])."""
    with _LOCK:
        saved: dict[str, Any] = {
            name: getattr(torch_checkpoint, name)
            for name in ("CheckpointFunction", "_checkpoint_without_reentrant_generator")
        }
        setattr(torch_checkpoint, "CheckpointFunction", _InlineReentrant)  # noqa: B010  # setattr: the module attributes are typed as their originals
        setattr(torch_checkpoint, "_checkpoint_without_reentrant_generator", _inline_non_reentrant)  # noqa: B010  # as above
        try:
            yield
        finally:
            for name, value in saved.items():
                setattr(torch_checkpoint, name, value)


@dataclass(frozen=True, slots=True)
class SameTensorAs:
    """Marks a repeated tensor's later position: the tensor is the one at flat leaf `index` (a constant leaf)."""

    index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SameInputs:
    repeats: tuple[tuple[int, int], ...]  # (later flat leaf, its first flat leaf) of (args, kwargs), in leaf order
    spec: pytree.TreeSpec  # of (args, kwargs)


def find_same_inputs(args: tuple[object, ...], kwargs: Mapping[str, object]) -> SameInputs | None:
    """The repeated tensors of a call (Note [Synthetic Bases]), or None where none repeats."""
    values, spec = pytree.tree_flatten((args, dict(kwargs)))
    first: dict[int, int] = {}
    repeats: list[tuple[int, int]] = []
    for i, v in enumerate(values):
        if isinstance(v, torch.Tensor):
            k = first.setdefault(id(v), i)
            if k != i:
                repeats.append((i, k))
    return SameInputs(repeats=tuple(repeats), spec=spec) if repeats else None


def marked_call(
    same: SameInputs, args: tuple[object, ...], kwargs: Mapping[str, object], offset: int
) -> tuple[tuple[object, ...], dict[str, object]]:
    """The call with each repeated position replaced by its marker. `offset`: how many leaves of state lifted from
    modules among the arguments come before the call's in the compiled entry's flat inputs (markers name those)."""
    values = pytree.tree_flatten((args, dict(kwargs)))[0]
    for later, k in same.repeats:
        values[later] = SameTensorAs(k + offset)
    marked_args, marked_kwargs = pytree.tree_unflatten(values, same.spec)
    return tuple(marked_args), dict(marked_kwargs)


def unmarking(fn: Callable[..., object], same: SameInputs) -> Callable[..., object]:
    """`fn` over the marked call: puts the first position's tensor (the traced one, at trace time) back in."""

    def unmarked(*args: object, **kwargs: object) -> object:
        values, spec = pytree.tree_flatten((args, kwargs))
        for later, k in same.repeats:
            values[later] = values[k]
        real_args, real_kwargs = pytree.tree_unflatten(values, spec)
        return fn(*real_args, **real_kwargs)

    for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
        if hasattr(fn, attr):
            setattr(unmarked, attr, getattr(fn, attr))
    return unmarked


def same_input_guards(
    same: SameInputs, inner: Guards, paths: Sequence[str], offset: int
) -> tuple[Guards, Callable[[Sequence[object]], list[object]]]:
    """Guards over the entry's flat values (the state lifted from argument modules, `offset` leaves, then those of
    (args, kwargs)) and the map from those values to the marked ones the compiled entry takes. `paths`: each flat
    leaf's source path."""
    repeats = tuple((later + offset, k + offset) for later, k in same.repeats)
    markers = tuple(SameTensorAs(k) for _, k in repeats)

    def marked(values: Sequence[object]) -> list[object]:
        out = list(values)
        for (later, _), marker in zip(repeats, markers, strict=True):
            out[later] = marker
        return out

    def check(values: Sequence[object]) -> dict[str, int] | str:
        for later, k in repeats:
            if len(values) <= later or values[later] is not values[k]:
                return f"input aliasing changed: compiled for {paths[later]} being the very same tensor as {paths[k]}"
        return inner.check(marked(values))

    lines = "".join(f"#   L[{later}] is L[{k}]  ({paths[later]} is {paths[k]})\n" for later, k in repeats)
    source = f"# Note [Synthetic Bases]: first\n{lines}# then, with those replaced by markers:\n"
    source += inner.source
    return Guards(source=source, check=check, symbols=inner.symbols, fast_source=inner.fast_source), marked
