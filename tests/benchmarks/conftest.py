"""Fixtures for the loader tests: the fixture folder and a fake hub behind `datasets.load_dataset`."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import datasets
import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@dataclass
class FakeHub:
    """Records every `load_dataset` call. Builder calls ("json", "csv") run the real builder on local copies
    of the files named in `files` (hub path -> fixture), so our builder arguments are really exercised;
    hub-id calls return the rows registered in `datasets_by_id`."""

    root: Path
    real_load: Callable[..., object]
    files: dict[str, Path] = field(default_factory=dict)
    datasets_by_id: dict[tuple[str, str | None, str], list[dict[str, object]]] = field(default_factory=dict)
    calls: list[tuple[tuple[object, ...], dict[str, object]]] = field(default_factory=list)
    error: Exception | None = None

    def __call__(self, *args: object, **kwargs: object) -> object:
        self.calls.append((args, dict(kwargs)))
        if self.error is not None:
            raise self.error
        path = str(args[0])
        if path in {"json", "csv"}:
            remote = str(kwargs["data_files"])
            local = self.root / remote.removeprefix("hf://datasets/")
            local.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.files[remote], local)
            return self.real_load(path, **{**kwargs, "data_files": str(local), "cache_dir": str(self.root / "cache")})
        name = str(args[1]) if len(args) > 1 else None
        rows = self.datasets_by_id[(path, name, str(kwargs["split"]))]
        return datasets.Dataset.from_list(rows)

    def add_rows(self, hub_id: str, name: str | None, split: str, jsonl: Path) -> None:
        self.datasets_by_id[(hub_id, name, split)] = [
            json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()
        ]


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeHub:
    hub = FakeHub(root=tmp_path, real_load=datasets.load_dataset)
    monkeypatch.setattr(datasets, "load_dataset", hub)
    return hub
