"""Test settings: offline, no caches, deterministic adapters. Set before dspy is imported."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

if "DSPY_CACHEDIR" not in os.environ:
    # One throwaway cache a test session, removed when it ends (each session used to leave one in /tmp).
    os.environ["DSPY_CACHEDIR"] = tempfile.mkdtemp(prefix="clearmed-dspy-cache-")
    atexit.register(shutil.rmtree, os.environ["DSPY_CACHEDIR"], ignore_errors=True)
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import dspy
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    """`../shared/data` beside the checkout (or $CLEARMED_SHARED_DATA); None when absent."""
    explicit = os.environ.get("CLEARMED_SHARED_DATA")
    candidate = Path(explicit) if explicit else REPO_ROOT.parent / "shared" / "data"
    return candidate if candidate.is_dir() else None


@pytest.fixture
def shared_data() -> Path:
    path = shared_data_dir()
    if path is None:
        pytest.skip("../shared/data is not available on this machine")
    return path


@pytest.fixture(autouse=True, scope="session")
def _dspy_test_settings() -> None:
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)


@pytest.fixture(autouse=True)
def _strict_adapter():
    # One scripted answer per LM call: the automatic JSONAdapter retry would consume a second one.
    with dspy.context(adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)):
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests load the real embedded model (GBs of RAM, minutes of CPU): they run only when asked for
    with `-m slow` (or any -m expression naming them), never by accident in a plain `pytest tests/...`."""
    if "slow" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="loads the real embedded model: run with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
