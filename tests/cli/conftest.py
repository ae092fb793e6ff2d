"""Scripts (scripts/, docs/experiments/) are not a package: tests import one by its path from the repository root."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]


def import_script(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def script_module() -> Callable[[str], ModuleType]:
    """`script_module("docs/experiments/compare_web_queries.py")`: that script, imported."""
    return import_script
