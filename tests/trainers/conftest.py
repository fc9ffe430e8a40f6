"""Fixtures for real-trainer runs: the install cache, runs shared by xdist workers, the pinned checkouts.

* ``trainers_cache``: where pinned installs live, reused across runs:
  ``$LAYOUTCHECK_TRAINERS_CACHE``, else the pytest cache folder
  (``.pytest_cache/d/layoutcheck-trainers``).
* ``shared_run``: ``shared_run(name, compute)`` runs ``compute()`` once per
  test run, even under pytest-xdist (the other workers wait for it and read
  its JSON result), so a costly trainer job is paid once however its tests
  are spread.
* ``verl_folder(version)``: verl at a pinned version, installed on first use.
* ``miles_deps()`` / ``slime_deps()``: their pinned PyPI imports (installed on
  first call, so only when a checkout is present).
* ``miles_checkout(which)`` / ``slime_checkout(which)``: the checkout at the
  pinned ``which`` commit (``"buggy"``/``"fixed"``) among those that
  ``LAYOUTCHECK_MILES_CHECKOUT`` / ``LAYOUTCHECK_SLIME_CHECKOUT`` name
  (`trainers.checkouts`); the test is skipped when there is none.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trainers.checkouts import Checkout, find_checkout
from trainers.install import install
from trainers.pins import MILES_DEPS, SLIME_DEPS
from trainers.ranks import RankRun
from trainers.verl_harness import install_verl


@pytest.fixture(scope="session")
def trainers_cache(request: pytest.FixtureRequest) -> Path:
    given = os.environ.get("LAYOUTCHECK_TRAINERS_CACHE")
    if given:
        return Path(given)
    cache = getattr(request.config, "cache", None)
    if cache is not None:
        return Path(cache.mkdir("layoutcheck-trainers"))
    return Path(tempfile.gettempdir()) / "layoutcheck-trainers"


@pytest.fixture(scope="session")
def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test run that every xdist worker of the run shares (and no other run)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _encode(value: Any) -> Any:
    if isinstance(value, list) and value and isinstance(value[0], RankRun):
        return {"rank_runs": [dataclasses.asdict(r) for r in value]}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"rank_runs"}:
        return [RankRun(**r) for r in value["rank_runs"]]
    return value


@pytest.fixture(scope="session")
def shared_run(shared_folder: Path) -> Callable[[str, Callable[[], Any]], Any]:
    def run(name: str, compute: Callable[[], Any]) -> Any:
        path = shared_folder / f"shared-{name}.json"
        with open(shared_folder / f"shared-{name}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not path.exists():
                path.write_text(json.dumps(_encode(compute())))
        return _decode(json.loads(path.read_text()))

    return run


@pytest.fixture(scope="session")
def verl_folder(trainers_cache: Path) -> Callable[[str], Path]:
    return lambda version: install_verl(version, trainers_cache)


@pytest.fixture(scope="session")
def miles_checkout() -> Callable[[str], Checkout]:
    return lambda which: find_checkout("miles", which)


@pytest.fixture(scope="session")
def slime_checkout() -> Callable[[str], Checkout]:
    return lambda which: find_checkout("slime", which)


@pytest.fixture(scope="session")
def miles_deps(trainers_cache: Path) -> Callable[[], Path]:
    """The folder of what Miles's data path imports from PyPI (installed on first call: after a checkout is found)."""
    return lambda: install(MILES_DEPS, trainers_cache)


@pytest.fixture(scope="session")
def slime_deps(trainers_cache: Path) -> Callable[[], Path]:
    """The folder of what slime's actor module and data path import from PyPI (installed on first call)."""
    return lambda: install(SLIME_DEPS, trainers_cache)
