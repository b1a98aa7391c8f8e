"""The fuzzer's second entry point: each program compiled by `torch.compile(f, backend="subclassaot")`.

Input: a fuzz `Program` and the inner backend name. Output: `dynamo_compile_for(program)`, a compile function for
`check_program` that ignores the interpreter closure it is given and compiles the program's printed source instead.
Invariants: Dynamo sees user code, the printed `f` (executed in a fresh namespace, as a regression test would), never
the interpreter; `torch._dynamo.reset()` runs before each program, so no program sees another's cache; a refusal of
ours that Dynamo wraps (`BackendCompilerFailed` around an `UnsupportedError` raised while the backend compiles) is
unwrapped, so it counts as a refusal, as on the direct path; an exception none of whose frames (nor those of the
exceptions it chains) is ours (a frame of our process-wide wrappers of torch's own methods, `Function.apply`, is
torch's) is Dynamo's own failure (its run of the program on fakes, its guards), which the same
program meets under backend="aot_eager": it counts as a refusal under a rule that names Dynamo. This module and the
adapter are the only ones of the fuzzer that import Dynamo (tests/test_architecture.py).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable

import torch
import torch._dynamo

from subclassaot.errors import SubclassAOTError, UnsupportedError
from subclassaot.tools.dynamo_backend import subclassaot_backend
from subclassaot.tools.fuzz_program import Program, to_source
from subclassaot.torch_internals import torch_method_patches

# The oracle's `compile_fn` argument in a regression test the Dynamo entry writes (test source: the printed program
# is compiled by torch.compile with our backend, as the run did)
REGRESSION_COMPILE_ARG = (
    "compile_fn=lambda fn, **kw: torch.compile(fn, backend='subclassaot', options={'backend': 'eager'})"
)

Fn = Callable[..., object]


def source_function(program: Program) -> Fn:
    """The printed program's `f`, defined by executing its source in a fresh namespace."""
    namespace: dict[str, object] = {"__name__": "fuzz_program_source"}
    exec(compile(to_source(program), "<fuzz program>", "exec"), namespace)
    f = namespace["f"]
    assert callable(f), "BUG: the printed program defines no f"
    return f


_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the subclassaot package
_THIS = os.path.abspath(__file__)
_PATCHES = torch_method_patches()
# a subclass's own code (its dispatch, which Dynamo calls to fakify a subclass view), not the pipeline's
_AUTHORING = os.path.join(_OURS, "authoring") + os.sep


def _ran_our_code(e: BaseException) -> bool:
    """Did the exception (or one it was raised from or during) pass through a frame of the pipeline or the backend
    (subclassaot, but for this module and the authoring base classes of subclasses)?"""
    seen: set[int] = set()
    todo: list[BaseException | None] = [e]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        for frame, _ in traceback.walk_tb(current.__traceback__):
            if frame.f_code in _PATCHES:
                continue  # torch's own method, through our process-wide wrapper
            path = os.path.abspath(frame.f_code.co_filename)
            if path.startswith(_OURS + os.sep) and path != _THIS and not path.startswith(_AUTHORING):
                return True
        todo += [current.__cause__, current.__context__]
    return False


def dynamo_compile_for(program: Program, *, backend: str = "eager") -> Callable[[Fn], Fn]:
    """A compile function: `torch.compile(f, backend="subclassaot", options={"backend": backend})` of the printed
    source (Dynamo's caches reset first)."""
    source_fn = source_function(program)

    def compile_fn(_interpreter: Fn) -> Fn:
        torch._dynamo.reset()
        compiled = torch.compile(source_fn, backend=subclassaot_backend, options={"backend": backend})

        def run(*args: object) -> object:
            try:
                return compiled(*args)
            except torch._dynamo.exc.BackendCompilerFailed as e:
                if isinstance(e.inner_exception, SubclassAOTError):
                    raise e.inner_exception from e
                raise
            except Exception as e:
                if isinstance(e, SubclassAOTError) or _ran_our_code(e):
                    raise
                # Dynamo failed on its own (tracing the program on fakes, or building its guards), with no frame of
                # ours on the stack: counted as a refusal, under a rule naming Dynamo.
                first = str(e).splitlines()[0] if str(e) else ""
                raise UnsupportedError(f"dynamo, not our backend: {type(e).__name__}: {first}") from e

        return run

    return compile_fn
