"""The project's one parity oracle: a compiled program must be observably identical to eager PyTorch.

Input: a program `fn` (a function or an `nn.Module`) and `make_inputs`, a zero-argument callable that builds FRESH
inputs every time it is called (so that aliasing between inputs, views, non-contiguous strides and `requires_grad`
are rebuilt exactly; it runs under a fixed RNG seed, so every set holds the same values).
Output: the compiled object, after checking that every call of it matches a run of eager PyTorch on its own fresh
inputs. `assert_raises_like_eager` is the counterpart for programs that are illegal in eager.
Invariants: the oracle never compares a compiled result with itself; every difference is reported by name
("call 1: args[0] after the call: stride (1, 2) vs eager (2, 1)"), all differences of one call at once.

What is compared, per call, is documented in subclassaot/tools/parity.py, which holds the comparison itself (the
fuzzer and the checker use it too); this module adds compiling, pytest-style assertions and eager-raises checks.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping

import torch

from subclassaot.tools.parity import (
    SEED,
    Call,
    EagerRaised,
    Tolerance,
    Versions,
    compare_with_eager,
    fixed_random_like,
    fresh_call,
)

__all__ = [
    "SEED",
    "Call",
    "CompileFn",
    "assert_call_matches_eager",
    "assert_matches_eager",
    "assert_raises_like_eager",
    "fixed_random_like",
]

CompileFn = Callable[..., Callable[..., object]]


def _default_compile(fn: Callable[..., object], **kwargs: object) -> Callable[..., object]:
    from subclassaot.api import compile as subclassaot_compile

    compiled: Callable[..., object] = subclassaot_compile(fn, **kwargs)  # type: ignore[call-overload]
    return compiled


_fresh = fresh_call


def assert_matches_eager(
    fn: Callable[..., object],
    make_inputs: Callable[[], tuple[object, ...] | Call],
    *,
    backend: object = "eager",
    compile_kwargs: Mapping[str, object] | None = None,
    calls: int = 2,
    check_grads: bool | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    after_call: Callable[[object, tuple[object, ...]], object] | None = None,
    compile_fn: CompileFn | None = None,
    versions: Versions = "moved",
) -> Callable[..., object]:
    """Compile `fn` and check `calls` calls of it, each on fresh inputs, against eager runs; return the compiled fn.

    `after_call(outputs, args)` runs after every call on both sides before anything is compared (for example to
    mutate an output and check that the mutation reaches the input it aliases); if it raises in eager it must
    raise in compiled code too. `compile_fn(fn, backend=..., **compile_kwargs)` defaults to `subclassaot.compile`.
    `versions`: how version counters are compared (subclassaot.tools.parity.Versions).
    An `nn.Module` is deep-copied for each side, and its parameters and buffers are compared as inputs.
    """
    tol = Tolerance(atol=atol, rtol=rtol)
    module = fn if isinstance(fn, torch.nn.Module) else None
    eager_fn = copy.deepcopy(fn) if module is not None else fn
    compiled_target = copy.deepcopy(fn) if module is not None else fn
    do_compile = compile_fn if compile_fn is not None else _default_compile
    compiled = do_compile(compiled_target, backend=backend, **dict(compile_kwargs or {}))
    for index in range(calls):
        _check_one_call(
            index, compiled, eager_fn, make_inputs, _as_module(compiled_target), after_call, check_grads, tol, versions
        )
    return compiled


def assert_call_matches_eager(
    compiled: Callable[..., object],
    fn: Callable[..., object],
    make_inputs: Callable[[], tuple[object, ...] | Call],
    *,
    check_grads: bool | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    after_call: Callable[[object, tuple[object, ...]], object] | None = None,
    compiled_module: torch.nn.Module | None = None,
) -> None:
    """One call of an already compiled function against `fn` in eager (recompile tests call this repeatedly).

    For a module, `fn` is the eager copy and `compiled_module` the one compiled: the parameters and buffers of each
    are compared as inputs."""
    tol = Tolerance(atol=atol, rtol=rtol)
    _check_one_call(0, compiled, fn, make_inputs, compiled_module, after_call, check_grads, tol)


def _check_one_call(
    index: int,
    compiled: Callable[..., object],
    eager_fn: Callable[..., object],
    make_inputs: Callable[[], tuple[object, ...] | Call],
    compiled_module: torch.nn.Module | None,
    after_call: Callable[[object, tuple[object, ...]], object] | None,
    check_grads: bool | None,
    tol: Tolerance,
    versions: Versions = "moved",
) -> None:
    try:
        errors = compare_with_eager(
            compiled,
            eager_fn,
            make_inputs,
            compiled_module=compiled_module,
            eager_module=_as_module(eager_fn),
            after_call=after_call,
            check_grads=check_grads,
            tolerance=tol,
            versions=versions,
        )
    except EagerRaised as e:
        raise AssertionError(
            f"eager itself raised {e.error!r}: this program is not legal in eager; use assert_raises_like_eager"
        ) from e.error
    if errors:
        raise AssertionError(f"call {index}: compiled differs from eager:\n  " + "\n  ".join(errors))


def _as_module(fn: Callable[..., object]) -> torch.nn.Module | None:
    return fn if isinstance(fn, torch.nn.Module) else None


def assert_raises_like_eager(
    fn: Callable[..., object],
    make_inputs: Callable[[], tuple[object, ...] | Call],
    *,
    backend: object = "eager",
    compile_kwargs: Mapping[str, object] | None = None,
    compile_fn: CompileFn | None = None,
) -> BaseException:
    """For a program eager rejects: check that eager raises, and that compiling or calling the compiled fn raises.

    Any exception type is accepted from the compiled side (an `UnsupportedError` at compile time is as good as the
    eager error). Returns the compiled side's exception.
    """
    call = _fresh(make_inputs)
    try:
        fn(*call.args, **call.kwargs)
    except Exception:  # only "it raised" matters here
        pass
    else:
        raise AssertionError("eager did not raise: this program is legal; use assert_matches_eager")
    do_compile = compile_fn if compile_fn is not None else _default_compile
    call = _fresh(make_inputs)
    try:
        compiled = do_compile(fn, backend=backend, **dict(compile_kwargs or {}))
        compiled(*call.args, **call.kwargs)
    except Exception as e:  # any exception type is accepted
        return e
    raise AssertionError("eager raised but the compiled function returned normally")
