"""The `python -m subclassaot` command line: each subcommand a function from parsed args to an exit code.

Purpose: `check MODULE:FACTORY` runs the conformance checker on the subclass a factory returns; `fuzz` fuzzes the
pipeline against eager; `demo` tours the pipeline on the sample subclasses (implemented in `subclasses/demo.py`,
imported by name). A new subcommand is one more subparser in `build_parser`, its `run` the function that runs it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

import torch

from subclassaot.tools import fuzz_runner
from subclassaot.tools.checker import check_subclass


def resolve_factory(spec: str) -> Callable[[], torch.Tensor]:
    """`package.module:function` -> the function; a clear error for a malformed spec or a missing name."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SystemExit(f"expected MODULE:FACTORY (e.g. subclasses.pair:example), got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise SystemExit(f"cannot import {module_name!r}: {e}") from e
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise SystemExit(f"{module_name} has no callable {attr!r}; the factory must take no arguments")
    return factory  # type: ignore[no-any-return]  # checked callable above; its result is checked by the rules


def run_check(args: argparse.Namespace) -> int:
    report = check_subclass(resolve_factory(args.factory))
    print(report)
    return 0 if report.ok else 1


def run_demo(args: argparse.Namespace) -> int:
    # The demo uses the sample subclasses; `subclassaot` never imports `subclasses` (see DESIGN.md), so it is
    # reached by module name at run time.
    demo = importlib.import_module("subclasses.demo")
    code: int = demo.run(lambda line: print(line, flush=True), calls=args.calls)
    return code


def run_fuzz(args: argparse.Namespace) -> int:
    # A module-level function, not a lambda: `--jobs N` sends the parsed arguments (this default included) to worker
    # processes, which pickle them.
    return fuzz_runner.run_cli(args, print_line)


def print_line(line: str) -> None:
    print(line, flush=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m subclassaot")
    subparsers = parser.add_subparsers(dest="command", required=True)
    check = subparsers.add_parser("check", help="run the conformance checker on a subclass instance")
    check.add_argument("factory", help="MODULE:FACTORY, a zero-argument function returning an instance")
    check.set_defaults(run=run_check)
    fuzz = subparsers.add_parser(
        "fuzz", help="fuzz the pipeline against eager with random programs; shrink and write out failures"
    )
    fuzz_runner.add_arguments(fuzz)
    fuzz.set_defaults(run=run_fuzz)
    demo = subparsers.add_parser(
        "demo", help="compile programs over the sample subclasses, explain one, check parity with eager and time them"
    )
    demo.add_argument("--calls", type=int, default=200, help="calls per timing (median per-call time is printed)")
    demo.set_defaults(run=run_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
