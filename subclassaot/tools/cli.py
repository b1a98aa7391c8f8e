"""The `python -m subclassaot` command line: a registry of subcommands, each a function from parsed args to an exit code.

Purpose: `check MODULE:FACTORY` runs the conformance checker on the subclass a factory returns; `demo` tours the
pipeline on the sample subclasses (implemented in `subclasses/demo.py`, imported by name). A new subcommand
(`demo`, `fuzz`) is one `add_subcommand(...)` call: a name, help text, a function that adds its arguments to its
parser, and the function that runs it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from subclassaot.tools import fuzz_runner
from subclassaot.tools.checker import check_subclass

__all__ = ["SUBCOMMANDS", "Subcommand", "add_subcommand", "main"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Subcommand:
    """One `python -m subclassaot NAME ...` command."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]  # returns the process exit code


SUBCOMMANDS: dict[str, Subcommand] = {}


def add_subcommand(command: Subcommand) -> None:
    if command.name in SUBCOMMANDS:
        raise ValueError(f"subcommand {command.name!r} is registered twice")
    SUBCOMMANDS[command.name] = command


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


def _add_check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("factory", help="MODULE:FACTORY, a zero-argument function returning an instance")


def run_check(args: argparse.Namespace) -> int:
    report = check_subclass(resolve_factory(args.factory))
    print(report)
    return 0 if report.ok else 1


def _add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--calls", type=int, default=200, help="calls per timing (median per-call time is printed)")


def run_demo(args: argparse.Namespace) -> int:
    # The demo uses the sample subclasses; `subclassaot` never imports `subclasses` (see DESIGN.md), so it is
    # reached by module name at run time.
    demo = importlib.import_module("subclasses.demo")
    code: int = demo.run(lambda line: print(line, flush=True), calls=args.calls)
    return code


for _command in (
    Subcommand(
        name="check",
        help="run the conformance checker on a subclass instance",
        add_arguments=_add_check_arguments,
        run=run_check,
    ),
    Subcommand(
        name="fuzz",
        help="fuzz the pipeline against eager with random programs; shrink and write out failures",
        add_arguments=fuzz_runner.add_arguments,
        run=lambda args: fuzz_runner.run_cli(args, lambda line: print(line, flush=True)),
    ),
    Subcommand(
        name="demo",
        help="compile programs over the sample subclasses, explain one, check parity with eager and time them",
        add_arguments=_add_demo_arguments,
        run=run_demo,
    ),
):
    add_subcommand(_command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m subclassaot")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in SUBCOMMANDS.values():
        sub = subparsers.add_parser(command.name, help=command.help)
        command.add_arguments(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    return SUBCOMMANDS[args.command].run(args)
