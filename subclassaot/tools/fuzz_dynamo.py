"""The fuzzer's second entry point: each program compiled by `torch.compile(f, backend="subclassaot")`.

Input: a fuzz `Program` and the inner backend name. Output: `dynamo_compile_for(program)`, a compile function for
`check_program` that ignores the interpreter closure it is given and compiles the program's printed source instead.
Invariants: Dynamo sees user code, the printed `f` (executed in a fresh namespace, as a regression test would), never
the interpreter; `torch._dynamo.reset()` runs before each program, so no program sees another's cache; a refusal of
ours that Dynamo wraps (`BackendCompilerFailed` around an `UnsupportedError` raised while the backend compiles) is
unwrapped, so it counts as a refusal, as on the direct path; a failure of Dynamo's own tracing (TorchRuntimeError:
its fake run of the program raised, which no backend sees) counts as a refusal under a rule that names Dynamo. This
module and the adapter are the only ones of the
fuzzer that import Dynamo (tests/test_architecture.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch._dynamo

from subclassaot.errors import SubclassAOTError, UnsupportedError
from subclassaot.tools.dynamo_backend import subclassaot_backend
from subclassaot.tools.fuzz_program import Program, to_source

__all__ = ["dynamo_compile_for", "source_function"]

Fn = Callable[..., object]


def source_function(program: Program) -> Fn:
    """The printed program's `f`, defined by executing its source in a fresh namespace."""
    namespace: dict[str, object] = {"__name__": "fuzz_program_source"}
    exec(compile(to_source(program), "<fuzz program>", "exec"), namespace)
    f = namespace["f"]
    assert callable(f), "BUG: the printed program defines no f"
    return f


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
            except torch._dynamo.exc.TorchRuntimeError as e:
                # Dynamo's own run of the program on fakes failed, before any graph reached our backend (the same
                # program fails under backend="aot_eager"): counted as a refusal, under a rule naming Dynamo.
                raise UnsupportedError(f"dynamo, before the backend: {str(e).splitlines()[0]}") from e

        return run

    return compile_fn
