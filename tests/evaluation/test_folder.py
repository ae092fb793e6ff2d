"""A run folder's identity in one module (`clearmed.evaluation.folder`): whether a folder is finished for a config, and
the one reader of its config snapshot; no other module opens a run folder's config.json by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clearmed.config import SNAPSHOT
from clearmed.evaluation.folder import finished, same_run_config, snapshot_of
from clearmed.evaluation.store import MANIFEST, RESULTS, load_manifest
from clearmed.signatures.records import Thresholds
from clearmed.testing.synthetic_run import SYNTHETIC_CONFIG, write_synthetic_run

REPO = Path(__file__).resolve().parents[2]
# The other "config.json": an artifact folder's config (optimize/artifacts.py).
NOT_A_RUN_FOLDER = {"optimize/artifacts.py"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("folder") / "run"
    write_synthetic_run(folder, n=3)
    (folder / "summary.json").write_text("{}", encoding="utf-8")  # what `finished` asks of the summary: that it is
    return folder


def test_a_folder_is_finished_for_its_own_config_once_its_summary_is_written(run: Path, tmp_path: Path) -> None:
    config = SYNTHETIC_CONFIG.model_copy(update={"thresholds": Thresholds()})  # write_synthetic_run's
    assert same_run_config(load_manifest(run / MANIFEST), run, config)
    assert finished(run, config)
    changed = config.model_copy(update={"program": config.program.model_copy(update={"local_k": 2})})
    assert not finished(run, changed)  # another config: left to the run, which refuses it in one line
    for lose in ("summary.json", MANIFEST):
        copy = tmp_path / lose
        copy.mkdir()
        for path in run.iterdir():
            if path.is_file() and path.name != lose:
                (copy / path.name).write_bytes(path.read_bytes())
        assert not finished(copy, config), lose


def test_a_folder_with_a_question_unanswered_or_degraded_is_not_finished(run: Path, tmp_path: Path) -> None:
    config = SYNTHETIC_CONFIG.model_copy(update={"thresholds": Thresholds()})
    lines = (run / RESULTS).read_text(encoding="utf-8").splitlines()
    degraded = json.loads(lines[0])
    degraded["degraded_stages"] = ["parametric"]
    for case, kept in (("unanswered", lines[1:]), ("degraded", [json.dumps(degraded), *lines[1:]])):
        copy = tmp_path / case
        copy.mkdir()
        for path in run.iterdir():
            if path.is_file():
                (copy / path.name).write_bytes(path.read_bytes())
        (copy / RESULTS).write_text("\n".join(kept) + "\n", encoding="utf-8")
        assert not finished(copy, config), case


def test_a_snapshot_reads_as_data_or_none(run: Path, tmp_path: Path) -> None:
    snapshot = snapshot_of(run)
    assert snapshot is not None
    assert snapshot["backbones"]["main"]["model"] == "scripted"
    assert snapshot_of(tmp_path) is None  # none there
    (tmp_path / SNAPSHOT).write_text("{not json", encoding="utf-8")
    assert snapshot_of(tmp_path) is None


def test_no_module_reads_a_run_folders_config_json_by_hand() -> None:
    """`clearmed.config.snapshot_of` (through `folder.snapshot_of`) is the one reader; the file's name is
    `SNAPSHOT`, written once."""
    packages = [REPO / "clearmed", *(REPO / name for name in ("optimize", "programs", "retrieval", "backbones"))]
    packages += [REPO / name for name in ("benchmarks", "metrics", "signatures", "demo")]
    named = sorted(
        str(path.relative_to(REPO))
        for package in packages
        for path in package.rglob("*.py")
        if re.search(r"""["']config\.json["']""", path.read_text(encoding="utf-8"))
    )
    assert [path for path in named if path not in NOT_A_RUN_FOLDER] == ["clearmed/config.py"]
