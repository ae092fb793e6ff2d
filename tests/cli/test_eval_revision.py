"""`clearmed eval --revision REV`: the benchmark is read at that hub revision, the commit read is fixed in the run's
manifest, and a resume that would read other content is refused in one line. Offline: a fake `datasets.load_dataset`
serves a copy laid out as the datasets cache lays out a hub copy prepared at a commit."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from clearmed.cli.main import main
from clearmed.testing import ScriptedCall, demo_config_toml
from tests.cli.test_eval_recorded import scripted

ROWS = Path(__file__).parents[1] / "benchmarks" / "fixtures" / "medmcqa" / "validation.jsonl"
V1, V2, MOVED = "1" * 40, "2" * 40, "3" * 40


def answer_a(call: ScriptedCall) -> dict[str, object]:
    return {"rationale": "because", "answer": "A"}


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, object]:
    """The hub's revisions (name -> commit) and the revisions asked of it; the default branch is `main`."""
    state: dict[str, object] = {"refs": {"v1": V1, "v2": V2, "main": V1}, "asked": []}
    rows = [json.loads(line) for line in ROWS.read_text().splitlines() if line.strip()]
    usable = [row for row in rows if row["id"] != "fake-0003"]  # its options repeat: skipped, with a warning
    cache = tmp_path / "hf-cache" / "openlifescienceai___medmcqa" / "default" / "0.0.0"
    for commit in (V1, V2, MOVED):
        datasets.Dataset.from_list(usable).save_to_disk(str(cache / commit))

    def load(*args: object, **kwargs: object) -> datasets.Dataset:
        asked = kwargs.get("revision")
        state["asked"].append(asked)  # type: ignore[attr-defined]
        refs: dict[str, str] = state["refs"]  # type: ignore[assignment]
        return datasets.load_from_disk(str(cache / refs[str(asked or "main")]))

    monkeypatch.setattr(datasets, "load_dataset", load)
    return state


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "remote.toml"
    path.write_text(demo_config_toml(run=f'runs_dir = "{tmp_path / "runs"}"'), encoding="utf-8")
    return path


def _eval(config: Path, run_dir: Path, *extra: str) -> int:
    argv = ["eval", "--program", "direct", "--benchmark", "medmcqa", "-c", str(config), "--run-dir", str(run_dir)]
    return main([*argv, *extra])


def _manifest(run_dir: Path) -> dict[str, object]:
    return json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))


def test_the_commit_read_is_in_the_manifest_and_a_resume_at_another_revision_is_refused(
    monkeypatch: pytest.MonkeyPatch,
    hub: dict[str, object],
    config: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    engine = scripted(monkeypatch, {"parametric": answer_a})
    run_dir = tmp_path / "run"
    assert _eval(config, run_dir, "--revision", "v1") == 0
    assert hub["asked"] == ["v1"]
    assert _manifest(run_dir)["dataset_revision"] == V1  # the tag as the commit it named
    asked_before = len(engine.calls)

    capsys.readouterr()
    assert _eval(config, run_dir, "--revision", "v2") == 2
    err = capsys.readouterr().err.strip()
    assert f"hub revision '{V1}' != '{V2}'" in err
    assert len(err.splitlines()) == 1

    # the same content by another name resumes: the default branch is still at v1's commit
    assert _eval(config, run_dir) == 0
    assert len(engine.calls) == asked_before  # every question was done: nothing asked again

    hub["refs"]["main"] = MOVED  # type: ignore[index]
    capsys.readouterr()
    assert _eval(config, run_dir) == 2  # the default branch moved on: its content is not the run's
    assert f"hub revision '{V1}' != '{MOVED}'" in capsys.readouterr().err


def test_a_revision_for_a_local_file_or_the_demo_is_one_line(
    config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "--program", "direct", "-c", str(config), "--revision", "v1", "--run-dir", str(tmp_path / "r")]
    assert main([*argv, "--benchmark", "medmcqa", "--source", str(ROWS)]) == 2
    err = capsys.readouterr().err.strip()
    assert "a revision picks a hub copy; the local source" in err
    assert len(err.splitlines()) == 1
    assert main([*argv, "--benchmark", "demo"]) == 2
    assert "the demo bundle has none" in capsys.readouterr().err
