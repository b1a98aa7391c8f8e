"""One compiled function called from 8 threads at once: every thread gets its own correct result."""

from __future__ import annotations

import threading

import torch

import subclassaot.api
from subclasses.pair import PairTensor

THREADS = 8


def program(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.add_(y)
    return (x * 2).view(-1)


def run_concurrently(c: subclassaot.api.CompiledFunction[..., torch.Tensor], make: object, warm: bool) -> None:
    assert callable(make)
    if warm:
        c(*make(0))
    barrier = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            x, y = make(i)
            want_x, want_y = make(i)
            want = program(want_x, want_y)
            barrier.wait()
            for _ in range(5):
                got = c(x, y)
                torch.testing.assert_close(got, want)
                torch.testing.assert_close(x, want_x)
                want = program(want_x, want_y)
        except BaseException as e:  # a thread's failure must reach the test
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def plain(i: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.full((4, 3), float(i)), torch.arange(12.0).view(4, 3)


def pairs(i: int) -> tuple[torch.Tensor, torch.Tensor]:
    a, y = plain(i)
    return PairTensor(a, a * -1), y


def test_eight_threads_share_a_warm_entry() -> None:
    c = subclassaot.api.compile(program, backend="eager")
    run_concurrently(c, plain, warm=True)
    assert c.compile_count == 1


def test_eight_threads_race_to_compile() -> None:
    c = subclassaot.api.compile(program, backend="eager")
    run_concurrently(c, plain, warm=False)


def test_eight_threads_with_subclass_inputs() -> None:
    c = subclassaot.api.compile(program, backend="eager")
    run_concurrently(c, pairs, warm=True)


def draws(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.dropout(x, 0.5) + torch.rand(x.shape, generator=torch.default_generator)


def test_another_thread_seeds_and_reads_the_generator_while_a_compile_runs() -> None:
    """The compile replaces torch's generator calls for the program's thread only: another thread's seeds, state
    reads and draws from torch.default_generator run as they do without a compile, and the compile is not refused."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def other() -> None:
        try:
            while not stop.is_set():
                torch.manual_seed(3)
                torch.set_rng_state(torch.get_rng_state())
                torch.rand(2, generator=torch.default_generator)
                torch.default_generator.get_state()
        except BaseException as e:  # a thread's failure must reach the test
            errors.append(e)

    thread = threading.Thread(target=other)
    thread.start()
    try:
        for _ in range(3):
            subclassaot.api.compile(draws, backend="eager")(torch.ones(8, 4))  # (a fresh compile each time)
    finally:
        stop.set()
        thread.join()
    assert errors == []
