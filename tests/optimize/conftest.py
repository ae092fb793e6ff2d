"""A small synthetic stored run shared by the tuning tests (the same generator as scripts/bench_tune.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clearmed.testing.synthetic_run import write_synthetic_run


@pytest.fixture(scope="session")
def synthetic_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("synthetic") / "run"
    write_synthetic_run(run_dir, 40, seed=0)
    return run_dir
