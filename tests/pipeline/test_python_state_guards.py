"""Python state the program reads is guarded: changing it between calls recompiles (and says what changed), so every
call equals eager. See Note [State The Program Reads].
"""

from __future__ import annotations

import array
import collections
import contextlib
import copy
import dataclasses
import re
import typing
from collections.abc import Callable, Iterator
from typing import cast

import pytest
import torch
from torch import nn
from torch.autograd.grad_mode import _force_original_view_tracking

import subclassaot
import subclassaot.api
from subclassaot.errors import UnsupportedError
from subclassaot.pipeline import python_state
from subclassaot.torch_internals import global_state_check
from tests.backends import RecordingBackend
from tests.oracle import Call, assert_call_matches_eager, assert_matches_eager

T = torch.Tensor
Compiled = subclassaot.api.CompiledFunction[..., object] | subclassaot.api.CompiledModule[nn.Module]


def compiled(
    fn: Callable[..., object], *, python_state_guards: bool = True, backend: str | RecordingBackend = "eager"
) -> Compiled:
    return subclassaot.api.compile(fn, backend=backend, python_state_guards=python_state_guards)


def module_of(c: Compiled) -> nn.Module:
    """The user's module behind a compiled one (a CompiledModule shares its state; changes go to the module)."""
    if isinstance(c, subclassaot.api.CompiledModule):
        return c._orig_mod
    assert isinstance(c.fn, nn.Module)
    return c.fn


def x84() -> tuple[T]:
    return (torch.randn(8, 4),)


def last_reason(c: Compiled, *patterns: str) -> None:
    assert c.recompile_reasons, "expected a recompile reason"
    for pattern in patterns:
        assert re.search(pattern, c.recompile_reasons[-1]), f"{c.recompile_reasons[-1]!r} lacks {pattern!r}"


class Gated(nn.Module):
    """Reads `training`, a float attribute and a submodule; owns a BatchNorm (its buffers move in training only)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.norm = nn.BatchNorm1d(4)
        self.scale = 2.0

    def forward(self, x: T) -> T:
        y: T = self.norm(self.lin(x)) * self.scale
        return y * 2 if self.training else y + 1


def twin(module: nn.Module) -> tuple[nn.Module, Compiled]:
    return copy.deepcopy(module), compiled(module)


def both(eager: nn.Module, c: Compiled, change: Callable[[nn.Module], object]) -> None:
    module = module_of(c)
    change(eager)
    change(module)


def check_module(eager: nn.Module, c: Compiled) -> None:
    module = module_of(c)
    assert_call_matches_eager(c, eager, x84, compiled_module=module)


def test_train_eval_flip_recompiles_and_matches_eager_each_call() -> None:
    eager, c = twin(Gated())
    check_module(eager, c)
    both(eager, c, lambda m: m.eval())
    check_module(eager, c)
    last_reason(c, r"self\.training: expected True, got False")
    both(eager, c, lambda m: m.train())
    check_module(eager, c)
    assert c.compile_count == 2  # back in training: the first entry serves again


def test_dropout_is_off_after_eval() -> None:
    module = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    eager, c = twin(module)
    c(torch.randn(8, 4))
    both(eager, c, lambda m: m.eval())
    check_module(eager, c)
    last_reason(c, r"self\.training: expected True, got False")


def test_module_float_attribute_change() -> None:
    eager, c = twin(Gated())
    check_module(eager, c)
    both(eager, c, lambda m: setattr(m, "scale", 3.0))
    check_module(eager, c)
    last_reason(c, r"self\.scale: expected 2\.0, got 3\.0")


def test_an_equal_new_value_does_not_recompile() -> None:
    eager, c = twin(Gated())
    check_module(eager, c)
    both(eager, c, lambda m: setattr(m, "scale", float("2.0")))  # a new float object, equal to the old one
    check_module(eager, c)
    check_module(eager, c)
    assert c.compile_count == 1


def test_submodule_replaced() -> None:
    eager, c = twin(nn.Sequential(nn.Linear(4, 4), nn.ReLU()))
    check_module(eager, c)
    both(eager, c, lambda m: cast(nn.Sequential, m).__setitem__(1, nn.Tanh()))
    check_module(eager, c)
    last_reason(c, r"self\[1\]: expected ReLU, got Tanh")


def test_nested_submodule_flag_and_attribute() -> None:
    outer = nn.Sequential(Gated(), nn.ReLU())
    eager, c = twin(outer)
    check_module(eager, c)
    both(eager, c, lambda m: setattr(cast(nn.Sequential, m)[0], "scale", 0.5))
    check_module(eager, c)
    last_reason(c, r"self\[0\]\.scale: expected 2\.0, got 0\.5")
    both(eager, c, lambda m: cast(nn.Sequential, m)[0].eval())
    check_module(eager, c)
    last_reason(c, r"self\[0\]\.training: expected True, got False")


def test_forward_hook_registered_after_compile() -> None:
    eager, c = twin(nn.Linear(4, 4))
    check_module(eager, c)
    both(eager, c, lambda m: m.register_forward_hook(lambda mod, args, out: out * 3))
    check_module(eager, c)
    last_reason(c, r"self\._forward_hooks: expected no entries \(no hooks\), got 1")


SCALE = 2.0


def reads_global(x: T) -> T:
    return x * SCALE


def test_global_float_change() -> None:
    global SCALE
    c = compiled(reads_global)
    try:
        assert_call_matches_eager(c, reads_global, x84)
        SCALE = 5.0
        assert_call_matches_eager(c, reads_global, x84)
        last_reason(c, r"globals\.SCALE: expected 2\.0, got 5\.0")
    finally:
        SCALE = 2.0


OFFSETS = {"bias": [1.0, {"inner": 2.0}]}


def helper(x: T) -> T:
    inner = OFFSETS["bias"][1]
    assert isinstance(inner, dict)
    return x + cast(float, inner["inner"])


def calls_helper(x: T) -> T:
    return helper(x) * 2


def test_global_read_by_a_helper_nested_containers() -> None:
    c = compiled(calls_helper)
    inner = OFFSETS["bias"][1]
    assert isinstance(inner, dict)
    try:
        assert_call_matches_eager(c, calls_helper, x84)
        inner["inner"] = 9.0
        assert_call_matches_eager(c, calls_helper, x84)
        last_reason(c, r"globals\.OFFSETS\['bias'\]\[1\]\['inner'\]: expected 2\.0, got 9\.0")
    finally:
        inner["inner"] = 2.0


def test_closure_list_element_change() -> None:
    k = [2.0]

    def f(x: T) -> T:
        return x * k[0]

    c = compiled(f)
    assert_call_matches_eager(c, f, x84)
    k[0] = 7.0
    assert_call_matches_eager(c, f, x84)
    last_reason(c, r"closure k\[0\]: expected 2\.0, got 7\.0")
    k.append(1.0)
    assert_call_matches_eager(c, f, x84)
    last_reason(c, r"closure k: expected length 1, got 2")


def test_closure_rebound() -> None:
    scale = 2.0

    def f(x: T) -> T:
        return x * scale

    c = compiled(f)
    assert_call_matches_eager(c, f, x84)
    scale = 4.0  # read through the closure cell
    assert_call_matches_eager(c, f, x84)
    last_reason(c, r"closure scale: expected 2\.0, got 4\.0")


@dataclasses.dataclass
class Config:
    scale: float
    shift: tuple[float, float]


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenConfig:
    scale: float


def test_dataclass_config_field_change() -> None:
    cfg = Config(scale=2.0, shift=(1.0, 0.5))

    def f(x: T) -> T:
        return x * cfg.scale + cfg.shift[1]

    c = compiled(f)
    assert_call_matches_eager(c, f, x84)
    cfg.scale = 3.0
    assert_call_matches_eager(c, f, x84)
    last_reason(c, r"closure cfg\.scale: expected 2\.0, got 3\.0")
    cfg.shift = (1.0, 0.25)
    assert_call_matches_eager(c, f, x84)
    last_reason(c, r"closure cfg\.shift: expected \(1\.0, 0\.5\), got \(1\.0, 0\.25\)")


def test_frozen_slots_dataclass_rebound() -> None:
    cfg = FrozenConfig(scale=2.0)

    def f(x: T) -> T:
        return x * cfg.scale

    c = compiled(f)
    assert_call_matches_eager(c, f, x84)
    cfg = FrozenConfig(scale=5.0)  # read through the closure cell
    assert_call_matches_eager(c, f, x84)
    last_reason(c, r"closure cfg: expected the FrozenConfig object compiled for, got another FrozenConfig")
    object.__setattr__(cfg, "scale", 6.0)  # a frozen dataclass changed anyway: its slots are watched too
    assert_call_matches_eager(c, f, x84)
    last_reason(c, r"closure cfg\.scale: expected 5\.0, got 6\.0")


def test_module_attribute_holding_a_dataclass_config() -> None:
    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cfg = Config(scale=2.0, shift=(0.0, 1.0))

        def forward(self, x: T) -> T:
            return x * self.cfg.scale

    eager, c = twin(Scaled())
    check_module(eager, c)
    both(eager, c, lambda m: setattr(m.cfg, "scale", 4.0))
    check_module(eager, c)
    last_reason(c, r"self\.cfg\.scale: expected 2\.0, got 4\.0")


def test_captured_module_training_flag() -> None:
    net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))

    def f(x: T) -> T:
        y: T = net(x)
        return y + 1

    c = compiled(f)
    c(torch.randn(8, 4))
    net.eval()
    assert_call_matches_eager(c, f, x84)
    last_reason(c, r"closure net\.training: expected True, got False")


def test_module_global_read_by_its_forward() -> None:
    class UsesGlobal(nn.Module):
        def forward(self, x: T) -> T:
            return x * SCALE

    global SCALE
    eager, c = twin(UsesGlobal())
    try:
        check_module(eager, c)
        SCALE = 3.0
        check_module(eager, c)
        last_reason(c, r"globals\.SCALE: expected 2\.0, got 3\.0")
    finally:
        SCALE = 2.0


def test_autocast_compiled_inside_called_outside() -> None:
    def f(x: T) -> T:
        return x @ x.T

    c = compiled(f)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert_call_matches_eager(c, f, x84)
    assert_call_matches_eager(c, f, x84)
    last_reason(c, r"torch\.is_autocast_enabled\('cpu'\): expected True, got False")
    with torch.autocast("cpu", dtype=torch.float16):
        assert_call_matches_eager(c, f, x84, atol=1e-2, rtol=1e-2)
    last_reason(c, r"torch\.get_autocast_dtype\('cpu'\): expected torch\.bfloat16, got torch\.float16")


def test_default_dtype_change() -> None:
    def f(x: T) -> T:
        return x + torch.arange(4.0)

    c = compiled(f)
    assert_call_matches_eager(c, f, lambda: (torch.randn(4, dtype=torch.float64),))
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert_call_matches_eager(c, f, lambda: (torch.randn(4, dtype=torch.float64),))
    finally:
        torch.set_default_dtype(previous)
    last_reason(c, r"torch\.get_default_dtype\(\): expected torch\.float32, got torch\.float64")


def test_grad_mode_change_recompiles() -> None:
    lin = nn.Linear(4, 4)
    eager, c = twin(lin)
    with torch.no_grad():
        check_module(eager, c)
    check_module(eager, c)
    last_reason(c, r"torch\.is_grad_enabled\(\): expected False, got True")


def test_deterministic_and_matmul_precision_are_guarded() -> None:
    c = compiled(reads_global)
    assert_call_matches_eager(c, reads_global, x84)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium" if previous != "medium" else "high")
    try:
        assert_call_matches_eager(c, reads_global, x84)
    finally:
        torch.set_float32_matmul_precision(previous)
    last_reason(c, r"torch\.get_float32_matmul_precision\(\)")
    torch.use_deterministic_algorithms(True)
    try:
        assert_call_matches_eager(c, reads_global, x84)
    finally:
        torch.use_deterministic_algorithms(False)
    last_reason(c, r"torch\.are_deterministic_algorithms_enabled\(\)")


def _regenerated_view_name(x0: T) -> tuple[T]:
    x1 = x0 * 2
    t = x1[0]
    with torch.no_grad():
        x1.add_(1)
    return (t * 1.0 + len(type(t.grad_fn).__name__),)  # SelectBackward0 under view replay, else AsStridedBackward0


def test_view_replay_mode_is_guarded() -> None:
    """A compile made outside view replay mode is not reused inside it: a view written through its base has another
    history there (eager's read of its grad_fn answers another node)."""
    with torch.enable_grad():
        c = compiled(_regenerated_view_name)
        assert_call_matches_eager(c, _regenerated_view_name, lambda: (torch.randn(3, 4, requires_grad=True),))
        with _force_original_view_tracking(True):
            with pytest.raises(UnsupportedError, match=r"view replay mode"):
                c(torch.randn(3, 4, requires_grad=True))
        last_reason(c, r"torch\._C\._is_view_replay_enabled\(\): expected False, got True")


def test_module_passed_as_an_argument() -> None:
    drop = nn.Dropout(0.5)

    def f(m: nn.Module, x: T) -> T:
        y: T = m(x)
        return y + 1

    c = compiled(f)
    c(drop, torch.randn(8, 4))
    drop.eval()
    assert_call_matches_eager(c, f, lambda: (drop, torch.randn(8, 4)))
    last_reason(c, r"args\[0\]\.training: expected True, got False")


class FirstCall(nn.Module):
    """Doubles on its first call only: eager's first call reads `first` True and leaves it False."""

    def __init__(self) -> None:
        super().__init__()
        self.first = True

    def forward(self, x: T) -> T:
        if self.first:
            self.first = False
            return x * 2
        return x


def test_plain_value_assigned_is_replayed_and_the_next_call_compiles_from_it() -> None:
    """Every run of the compile starts from the state the call found (a run reading `first` False would bake `x` into
    the first call's graph); the entry makes the write after the call; the next call recompiles from what it finds,
    and the entry compiled then writes what it found, a fixed point: no further compile (Note [State The Program
    Reads], "Writes")."""
    eager = FirstCall()
    c = compiled(FirstCall())

    def x84_grad() -> tuple[T]:  # (a training compile: the program runs several times)
        return (torch.randn(8, 4, requires_grad=True),)

    for _ in range(3):
        assert_call_matches_eager(c, eager, x84_grad, compiled_module=module_of(c))
        assert cast(FirstCall, module_of(c)).first is False and eager.first is False
    assert c.compile_count == 2
    assert c.recompile_reasons == ("self.first: expected True, got False",)
    cast(FirstCall, module_of(c)).first = True  # the first entry again: its write made again
    assert_call_matches_eager(c, FirstCall(), x84_grad, compiled_module=module_of(c))
    assert cast(FirstCall, module_of(c)).first is False and c.compile_count == 2


def test_counter_recompiles_on_each_call_until_the_limit_then_runs_eagerly() -> None:
    """`self.n += 1`: each call finds another value, so each compiles (its guard reads the value before the write);
    past `recompile_limit` the calls run eagerly, writing as eager does."""

    class Counter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def forward(self, x: T) -> T:
            self.n += 1
            return x * self.n

    eager = Counter()
    c = cast(Compiled, subclassaot.api.compile(Counter(), backend="eager", recompile_limit=3))
    for calls in range(1, 6):
        with pytest.warns(UserWarning, match="recompile_limit") if calls > 3 else contextlib.nullcontext():
            assert_call_matches_eager(c, eager, x84, compiled_module=module_of(c))
        assert cast(Counter, module_of(c)).n == eager.n == calls
    assert c.compile_count == 3
    last_reason(c, r"self\.n: expected 0, got 2; self\.n: expected 1, got 2")


def _writer() -> tuple[Callable[[T], T], Callable[[], tuple[object, ...]]]:
    """A function writing plain values to a closure cell, a list item and a dict (one item changed, one added)."""
    seen = False
    flags = [True]
    cfg: dict[str, object] = {"mode": "warmup"}

    def f(x: T) -> T:
        nonlocal seen
        out = x if seen else x * 2
        seen = True
        flags[0] = False
        cfg["mode"] = "steady"
        cfg["steps"] = (1, "one")
        return out + 1 if cfg["mode"] == "steady" else out

    return f, lambda: (seen, flags[0], dict(cfg))


FIRST_RUN = True


def _first_run_triples(x: T) -> T:
    global FIRST_RUN
    if FIRST_RUN:
        FIRST_RUN = False
        return x * 3
    return x


def test_writes_to_cells_items_new_keys_and_globals_are_replayed() -> None:
    f, state = _writer()
    g, eager_state = _writer()
    c = compiled(f)
    for _ in range(3):
        assert_call_matches_eager(c, g, x84)
        assert state() == eager_state() == (True, False, {"mode": "steady", "steps": (1, "one")})
    assert c.compile_count == 2
    last_reason(c, r"closure seen: expected False, got True")
    global FIRST_RUN
    FIRST_RUN = True
    c = compiled(_first_run_triples)
    x = torch.randn(3)
    torch.testing.assert_close(c(x), x * 3)
    assert FIRST_RUN is False
    torch.testing.assert_close(c(x), x)
    assert c.compile_count == 2 and c.recompile_reasons == ("globals.FIRST_RUN: expected True, got False",)
    # the write in the generated function of the entry (Note [Straight-Line Runners], "one function per entry")
    assert c.entries[0].entry_source is not None and "_written" in c.entries[0].entry_source
    assert c.entries[0].python_writes[0].label == "globals.FIRST_RUN"


def test_program_raising_after_a_write_raises_its_error_and_makes_no_write() -> None:
    """Eager's error propagates; the compiled call makes no write (writes are made after the graph returned), where
    eager leaves the ones it made before raising (Note [State The Program Reads], "Writes")."""

    class Raises(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stage = "start"

        def forward(self, x: T) -> T:
            self.stage = "running"
            if x.dim() != 2:
                raise ValueError("expected a matrix")
            return x * 2

    m = Raises()
    with pytest.raises(ValueError, match="expected a matrix"):
        compiled(m)(torch.randn(3))
    assert m.stage == "start"


def test_explain_names_the_writes() -> None:
    text = str(subclassaot.explain(FirstCall(), torch.randn(3)))
    assert "== Python writes (made after the graph returned) ==\nself.first = False\n" in text


class _Refused(nn.Module):
    def __init__(self, change: Callable[[_Refused, T], None]) -> None:
        super().__init__()
        self.change = change
        self.calls = 0
        self.seen: list[int] = []
        self.cache: object = None
        self.tag = "a"

    def forward(self, x: T) -> T:
        self.calls += 1
        self.change(self, x)
        return x * 2


def _append(m: _Refused, x: T) -> None:
    m.seen.append(1)


def _store_list(m: _Refused, x: T) -> None:
    m.cache = [1]


def _store_tensor(m: _Refused, x: T) -> None:
    m.cache = x * 1


def _remove(m: _Refused, x: T) -> None:
    del m.tag


def _type_name(m: _Refused, x: T) -> None:
    m.tag = type(x).__name__  # the class of what the compile's runs pass (fake, functional): no value to replay


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (_append, r"self\.seen: expected length 0, got 1"),
        (_store_list, r"self\.cache: expected None, got list"),
        (_store_tensor, r"self\.cache: expected None, got \w*Tensor"),
        (_remove, r"self: names added \[\], removed \['tag'\]"),
        (_type_name, r"\(self\.tag\), and writes another value in another of the runs"),
    ],
)
def test_program_that_changes_python_state_otherwise_is_refused(
    change: Callable[[_Refused, T], None], reason: str
) -> None:
    """Anything but plain values assigned is refused by name; the refused call leaves the state as it found it."""
    m = _Refused(change)
    c = compiled(m)
    with pytest.raises(UnsupportedError, match=reason + r".*(Python side effects|outside the compiled function)"):
        c(torch.randn(3, requires_grad=True))
    assert m.calls == 0


def test_deque_and_slots_object_are_watched() -> None:
    window = collections.deque([1.0, 2.0])

    class Slotted:
        __slots__ = ("scale",)

        def __init__(self) -> None:
            self.scale = 2.0

    holder = Slotted()

    def f(x: T) -> T:
        return x * window[0] + holder.scale

    c = compiled(f)
    assert_call_matches_eager(c, f, x84)
    window.appendleft(5.0)
    assert_call_matches_eager(c, f, x84)
    last_reason(c, r"closure window: expected length 2, got 3")
    holder.scale = 4.0
    assert_call_matches_eager(c, f, x84)
    last_reason(c, r"closure holder\.scale: expected 2\.0, got 4\.0")


def test_unsnapshottable_object_is_refused_by_name() -> None:
    buffer = array.array("d", [1.0, 2.0])  # mutable, no attributes to read: its contents cannot be watched

    def f(x: T) -> T:
        return x * buffer[0]

    with pytest.raises(UnsupportedError, match=r"closure buffer: .*array.*cannot tell whether it changed"):
        compiled(f)(torch.randn(3))


def test_python_state_guards_off_reuses_the_graph() -> None:
    """The torch.compile backend's setting: Dynamo guards this state itself, so the pipeline does not."""
    k = [2.0]

    def f(x: T) -> T:
        return x * k[0]

    c = compiled(f, python_state_guards=False)
    x = torch.ones(2)
    assert torch.equal(cast(T, c(x)), x * 2)
    k[0] = 3.0
    assert torch.equal(cast(T, c(x)), x * 2)  # stale by design: the caller owns these guards
    assert c.compile_count == 1


def test_guard_source_holds_no_attribute_names() -> None:
    class Odd(nn.Module):
        def forward(self, x: T) -> T:
            return x * cast(float, getattr(self, "a'b\nc"))

    module = Odd()
    setattr(module, "a'b\nc", 2.0)
    c = compiled(module)
    c(torch.randn(3))
    source = c.entries[0].guards.source
    assert "a'b" not in source
    setattr(module, "a'b\nc", 3.0)
    c(torch.randn(3))
    last_reason(c, r"expected 2\.0, got 3\.0")


class _Scales(typing.NamedTuple):
    scale: float
    shift: float


def test_named_tuple_config_is_compared_by_value() -> None:
    # an immutable NamedTuple config (torchao's LinearMMConfig is one) is a plain value, not an opaque object
    cfg = [_Scales(2.0, 1.0)]

    def f(x: T) -> T:
        return x * cfg[0].scale + cfg[0].shift

    c = compiled(f)
    assert_call_matches_eager(c, f, x84)
    cfg[0] = _Scales(2.0, 1.0)  # an equal value: no recompile
    assert_call_matches_eager(c, f, x84)
    assert c.compile_count == 1
    cfg[0] = _Scales(3.0, 1.0)
    assert_call_matches_eager(c, f, x84)
    last_reason(c, r"closure cfg\[0\]")


# The ambient state in one call (Note [State The Program Reads]): Dynamo's global-state snapshot stands for five reads
# where no autocast was on at compile time. Each setting it stands for still fails the entry with that setting's own
# reason, on the path a plain positional call takes first (the guards and runner as one function), and the first
# entry serves the first state again; what else the snapshot compares (the thread count) costs no recompile.

# Every device type name of c10 (those autocast does not know are skipped)
_DEVICE_TYPES = (
    "cpu", "cuda", "opengl", "opencl", "ideep", "hip", "fpga", "maia", "xla", "vulkan", "metal", "xpu",
    "mps", "meta", "hpu", "ve", "lazy", "ipu", "mtia", "privateuseone",
)  # fmt: skip


def test_the_global_state_snapshot_sees_every_autocast_flag_any_autocast_enabled_reads() -> None:
    made = global_state_check()
    assert made is not None
    check, fields = made
    assert fields[-1] is False and check()
    seen = []
    for device in _DEVICE_TYPES:
        try:
            previous = torch.is_autocast_enabled(device)
            torch.set_autocast_enabled(device, True)
        except RuntimeError:  # no autocast for this device type
            continue
        try:
            if torch._C._is_any_autocast_enabled():
                seen.append(device)
                assert not check(), device
        finally:
            torch.set_autocast_enabled(device, previous)
    assert check()
    assert {"cpu", "cuda", "xpu", "hpu"} <= set(seen), seen


def matmul_loss(x: T) -> T:
    return (x @ x.T).sum()


def x44() -> tuple[T]:
    return (torch.randn(4, 4, requires_grad=True),)


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@contextlib.contextmanager
def _deterministic(enabled: bool, warn_only: bool) -> Iterator[None]:
    previous = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(previous[0], warn_only=previous[1])


@contextlib.contextmanager
def _matmul_precision(precision: str) -> Iterator[None]:
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


AMBIENT_CHANGES: dict[str, tuple[Callable[[], contextlib.AbstractContextManager[object]], str]] = {
    "grad mode": (torch.no_grad, r"torch\.is_grad_enabled\(\): expected True, got False"),
    "autocast": (
        lambda: torch.autocast("cpu", dtype=torch.bfloat16),
        r"torch\.is_autocast_enabled\('cpu'\): expected False, got True",
    ),
    "default dtype": (
        lambda: _default_dtype(torch.float64),
        r"torch\.get_default_dtype\(\): expected torch\.float32, got torch\.float64",
    ),
    "deterministic": (
        lambda: _deterministic(True, False),
        r"are_deterministic_algorithms_enabled\(\) \(warn_only\): expected \(False, False\), got \(True, False\)",
    ),
    "warn only": (
        lambda: _deterministic(False, True),
        r"are_deterministic_algorithms_enabled\(\) \(warn_only\): expected \(False, False\), got \(False, True\)",
    ),
    "matmul precision": (
        lambda: _matmul_precision("medium"),
        r"torch\.get_float32_matmul_precision\(\): expected 'highest', got 'medium'",
    ),
}


@pytest.mark.parametrize("backend", ["eager", "recording"], ids=["native training", "the Function"])
@pytest.mark.parametrize("change", list(AMBIENT_CHANGES))
def test_each_ambient_setting_the_one_call_check_stands_for_recompiles_like_before(change: str, backend: str) -> None:
    context, reason = AMBIENT_CHANGES[change]
    assert torch.get_float32_matmul_precision() == "highest"
    c = compiled(matmul_loss, backend=RecordingBackend() if backend == "recording" else backend)
    assert_call_matches_eager(c, matmul_loss, x44)
    assert isinstance(c, subclassaot.api.CompiledFunction)
    entry_fn = c._plain[0][1]  # the guards and the runner as one function
    assert entry_fn is not None and "is_grad_enabled" not in entry_fn.__code__.co_names
    with context():
        assert_call_matches_eager(c, matmul_loss, x44, atol=1e-2, rtol=1e-2)
    assert c.compile_count == 2
    last_reason(c, reason)
    assert_call_matches_eager(c, matmul_loss, x44)
    assert c.compile_count == 2


def double_plus_one(x: T) -> T:
    return x * 2 + 1


@pytest.mark.parametrize("state_guards", [True, False], ids=["the state's check", "no state check"])
def test_an_inference_entry_reads_grad_mode_once_and_recompiles_under_no_grad_like_before(state_guards: bool) -> None:
    """An inference entry requires the grad mode it was analyzed in (Note [Grad Mode And Autograd Reads]); where the
    Python state's checks require the same one (here its one-call check), the entry's one function leaves the
    guards' own read out; without them, the guards read it. Either way a call under no_grad recompiles, naming it."""
    c = compiled(double_plus_one, python_state_guards=state_guards)
    assert_call_matches_eager(c, double_plus_one, x84)
    assert isinstance(c, subclassaot.api.CompiledFunction)
    entry_fn = c._plain[0][1]  # the checks and the runner as one function
    assert entry_fn is not None and ("is_grad_enabled" in entry_fn.__code__.co_names) is not state_guards
    with torch.no_grad():
        assert_call_matches_eager(c, double_plus_one, x84)
    assert c.compile_count == 2
    last_reason(c, r"torch\.is_grad_enabled\(\): expected True, got False")
    assert_call_matches_eager(c, double_plus_one, x84)
    with torch.no_grad():
        assert_call_matches_eager(c, double_plus_one, x84)
    assert c.compile_count == 2


def test_a_changed_thread_count_keeps_the_entry_and_costs_one_slow_call(monkeypatch: pytest.MonkeyPatch) -> None:
    c = compiled(matmul_loss)
    assert_call_matches_eager(c, matmul_loss, x44)
    reads: list[object] = []
    describe = python_state.describe_ambient

    def counted(expected: python_state.Ambient) -> str | None:
        reads.append(expected)
        return describe(expected)

    monkeypatch.setattr(python_state, "describe_ambient", counted)
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        for _ in range(3):
            assert_call_matches_eager(c, matmul_loss, x44)
    finally:
        torch.set_num_threads(threads)
    assert c.compile_count == 1 and len(reads) == 1  # the new snapshot adopted after the first call's slow path
    assert_call_matches_eager(c, matmul_loss, x44)
    assert c.compile_count == 1 and len(reads) == 2


def test_an_entry_compiled_under_autocast_reads_autocast_as_before() -> None:
    c = compiled(matmul_loss)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert_call_matches_eager(c, matmul_loss, x44, atol=1e-2, rtol=1e-2)
        assert "read_ambient" in c.entries[0].guards.source or ".autocast !=" in c.entries[0].guards.source
    assert_call_matches_eager(c, matmul_loss, x44)
    last_reason(c, r"torch\.is_autocast_enabled\('cpu'\): expected True, got False")


def _classifier(name: str) -> tuple[nn.Module, Callable[[], Call]]:
    transformers = pytest.importorskip("transformers")
    small = {"num_hidden_layers": 1, "num_attention_heads": 2, "hidden_size": 32, "intermediate_size": 64}
    if name == "vit":
        config = transformers.ViTConfig(**small, image_size=16, patch_size=4, num_labels=3, attn_implementation="eager")
        vit: nn.Module = transformers.ViTForImageClassification(config)
        return vit, lambda: Call(args=(torch.randn(2, 3, 16, 16),), kwargs={"labels": torch.randint(0, 3, (2,))})
    config = transformers.BertConfig(
        **small, vocab_size=100, max_position_embeddings=32, num_labels=3, attn_implementation="eager"
    )
    bert: nn.Module = transformers.BertForSequenceClassification(config)
    return bert, lambda: Call(args=(torch.randint(0, 100, (2, 8)),), kwargs={"labels": torch.randint(0, 3, (2,))})


@pytest.mark.parametrize("name", ["vit", "bert"])
def test_hugging_face_classifier_with_labels_trains_like_eager(name: str) -> None:
    """A `*ForSequenceClassification` / `ViTForImageClassification` forward given labels sets
    `config.problem_type` on its first call: replayed, then one recompile from the value set, then stable."""
    torch.manual_seed(0)
    model, make = _classifier(name)
    model.train()
    with torch.enable_grad():
        c = cast(Compiled, assert_matches_eager(model, make, calls=3))
    assert vars(module_of(c))["config"].problem_type == "single_label_classification"
    assert c.compile_count == 2
    last_reason(c, r"config\.problem_type: expected None, got 'single_label_classification'$")
