"""The ``xp`` fixture: one parametrisation over the Backend enum, narrowed by ``--backends``."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings
from support import Backend, namespace

# CI (nox sets GATHERX_HYPOTHESIS=ci) draws the same examples every run, so a result is
# reproducible; a plain pytest run draws new ones each time and so keeps searching.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("dev", print_blob=True)
settings.load_profile(os.environ.get("GATHERX_HYPOTHESIS", "dev"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backends",
        default=",".join(b.value for b in Backend),
        help="comma-separated Backend values the xp fixture runs on (default: all)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend" in metafunc.fixturenames:
        wanted = metafunc.config.getoption("--backends").split(",")
        chosen = [b for b in Backend if b.value in wanted]
        metafunc.parametrize("backend", chosen, ids=[b.label for b in chosen])


@pytest.fixture
def xp(backend: Backend):
    """``backend``'s namespace; skipped if not installed, failed if GATHERX_REQUIRE names it."""
    return namespace(backend)
