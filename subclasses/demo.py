"""`python -m subclassaot demo`: a tour of the pipeline on the sample subclasses, checked against eager.

Input: an `emit(line)` callback (the command line passes `print`). Output: an exit code (0: every check passed).
Invariants: every compiled program is compared with eager on fresh inputs (`subclassaot.tools.parity.compare_with_eager`)
and every difference is printed; timings are medians over many calls on tiny inputs, so they measure per-call
overhead (guards, unwrap, epilogue, wrap), not kernels. Lives in `subclasses` because it uses the samples;
`subclassaot/__main__.py` reaches it by module name, keeping `subclassaot` free of imports of `subclasses`.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

import subclassaot
from subclassaot.tools.checker import check_subclass
from subclassaot.tools.explain import explain
from subclassaot.tools.parity import compare_with_eager
from subclasses.pair import PairTensor, example

Emit = Callable[[str], None]

__all__ = ["DEMOS", "Demo", "run"]


def _pair(*shape: int, requires_grad: bool = False) -> PairTensor:
    return PairTensor(torch.randn(*shape), torch.randn(*shape), requires_grad=requires_grad)


def add_then_view(p: PairTensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mutates an input; returns a view of it and a fresh value."""
    p.add_(x)
    return p.view(-1), (p * x).sum()


def scale_in_place(p: PairTensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns the very input it mutated, and a view of it."""
    p.mul_(2)
    return p, p[0]


def shifted_loss(w: PairTensor, b: PairTensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Training: w requires grad; b (no grad) is mutated and a view of it is returned."""
    b.add_(1)
    return (w * b).sum(), b.view(-1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Demo:
    fn: Callable[..., object]
    make_inputs: Callable[[], tuple[object, ...]]  # fresh inputs on every call


DEMOS: tuple[Demo, ...] = (
    Demo(fn=add_then_view, make_inputs=lambda: (_pair(3, 2), torch.randn(3, 2))),
    Demo(fn=scale_in_place, make_inputs=lambda: (_pair(3, 2),)),
    Demo(fn=shifted_loss, make_inputs=lambda: (_pair(3, 2, requires_grad=True), _pair(3, 2))),
)


def _median_call_s(fn: Callable[..., object], args: tuple[object, ...], calls: int) -> float:
    for _ in range(3):
        fn(*args)  # warm up (the compiled function compiles on its first call)
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _run_demo(demo: Demo, emit: Emit, calls: int) -> bool:
    name = getattr(demo.fn, "__name__", repr(demo.fn))
    compiled = subclassaot.compile(demo.fn, backend="eager")
    differences = compare_with_eager(compiled, demo.fn, demo.make_inputs)
    emit(f"{name}: parity with eager: {'PASS' if not differences else 'FAIL'}")
    for line in differences:
        emit(f"  - {line}")
    with torch.no_grad():
        eager_s = _median_call_s(demo.fn, demo.make_inputs(), calls)
        compiled_s = _median_call_s(subclassaot.compile(demo.fn, backend="eager"), demo.make_inputs(), calls)
    emit(
        f"{name}: median per call over {calls} calls: compiled {compiled_s * 1e6:.0f} us, eager {eager_s * 1e6:.0f} us"
        f" (compiled/eager = {compiled_s / eager_s:.2f}x)"
    )
    return not differences


def _float8_step(emit: Emit) -> bool:
    """One forward + backward + SGD step of a Float8Linear model, compiled vs an uncompiled copy."""
    try:
        from subclasses.fp8 import Float8Linear
    except ImportError as e:  # the fp8 sample needs its kernels' dependencies
        emit(f"float8: skipped ({e})")
        return True
    torch.manual_seed(0)
    eager = torch.nn.Sequential(Float8Linear(16, 32), torch.nn.ReLU(), Float8Linear(32, 8))
    model = copy.deepcopy(eager)
    compiled = subclassaot.compile(model, backend="eager")
    x, target = torch.randn(4, 16), torch.randn(4, 8)
    outputs: tuple[torch.Tensor, torch.Tensor] = (eager(x), compiled(x))
    for m, out in zip((eager, model), outputs, strict=True):
        torch.autograd.backward(torch.nn.functional.mse_loss(out, target))
        torch.optim.SGD(m.parameters(), lr=0.1).step()
    mismatched = [
        name
        for (name, p), (_, q) in zip(model.named_parameters(), eager.named_parameters(), strict=True)
        if not torch.equal(p, q)
    ]
    status = "PASS" if not mismatched else f"FAIL (parameters differ after the step: {', '.join(mismatched)})"
    emit(f"float8: Float8Linear training step (forward, backward, SGD), compiled vs eager: {status}")
    return not mismatched


def run(emit: Emit, *, calls: int = 200) -> int:
    """The whole demo; returns the exit code."""
    emit("== The conformance checker on subclasses.pair:example ==")
    report = check_subclass(example)
    emit(str(report))
    emit("")
    emit("== explain(add_then_view, PairTensor, Tensor) ==")
    first = DEMOS[0]
    emit(str(explain(first.fn, *first.make_inputs())))
    emit("== Parity with eager and per-call overhead ==")
    ok = report.ok
    for demo in DEMOS:
        ok = _run_demo(demo, emit, calls) and ok
    emit("")
    ok = _float8_step(emit) and ok
    emit("")
    emit("demo: all checks passed" if ok else "demo: some checks FAILED (see above)")
    return 0 if ok else 1
