"""`--identity-compile`: run the corpus with `compile_fn = lambda fn, **kw: fn`, i.e. eager against eager.

That run checks the corpus and the oracle themselves (every program must pass it) without the pipeline:
`pytest tests/pipeline --identity-compile`. Without the flag, the corpus compiles with `subclassaot.compile`.
"""

from __future__ import annotations

import pytest

from tests.oracle import CompileFn
from tests.pipeline.corpus import identity_compile


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--identity-compile",
        action="store_true",
        default=False,
        help="run the pipeline corpus eager-vs-eager, to check the corpus and the oracle",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--identity-compile", default=False):
        return
    for item in items:  # eager against eager has no known gaps
        item.own_markers = [m for m in item.own_markers if m.name != "xfail"]


@pytest.fixture
def compile_fn(request: pytest.FixtureRequest) -> CompileFn | None:
    """None means `subclassaot.compile`; with --identity-compile, a compile that returns the program unchanged."""
    if request.config.getoption("--identity-compile", default=False):
        return identity_compile
    return None
