"""A run's questions are fixed when it begins (issue 50, item 10): a resume that asks for more of the same draw (a
larger `--limit`, the same `--seed`; a longer `--ids` list) grows the run with a one-line note, and any other list
(another seed, a smaller limit, other ids) is refused in one line naming both values, never silently ignored. The
public readers take a `str` as well as a `Path`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clearmed.cli.main import main
from clearmed.evaluation import read_records
from clearmed.evaluation.spend_log import paid_calls, read_spend_log
from clearmed.evaluation.store import RunStore, load_manifest, read_set_aside_degraded, scan_results
from tests.cli.scripted_cli import config_toml, scripted


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "remote.toml"
    path.write_text(config_toml(), encoding="utf-8")
    return path


def eval_args(config: Path, run_dir: Path, *extra: str) -> list[str]:
    return ["eval", "--program", "direct", "--benchmark", "demo", "-c", str(config), "--run-dir", str(run_dir), *extra]


def answered(run_dir: Path) -> dict[str, int]:
    return {record.question_id: record.index for record in read_records(run_dir)}


def test_a_larger_limit_grows_the_run_and_says_so(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = scripted(monkeypatch)
    run_dir = tmp_path / "run"
    assert main(eval_args(config, run_dir, "--limit", "2", "--seed", "7")) == 0
    first = answered(run_dir)
    calls = len(engine.calls)
    capsys.readouterr()
    assert main(eval_args(config, run_dir, "--limit", "3", "--seed", "7")) == 0  # before: exit 0, still 2 records
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert notes == [f"note: {run_dir} grows from 2 to 3 questions (limit 2 -> 3): the 2 it had are kept, 1 added"]
    grown = answered(run_dir)
    assert len(grown) == 3
    assert {qid: grown[qid] for qid in first} == first  # the old records are untouched, their indices kept
    assert len(engine.calls) == calls + 1  # only the new question was asked (Direct: one call a question)
    manifest = load_manifest(run_dir)
    assert (manifest.limit, manifest.seed, len(manifest.question_ids)) == (3, 7, 3)
    assert sorted(grown.values()) == [0, 1, 2]
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert (summary["evaluated"], summary["planned"]) == (3, 3)
    capsys.readouterr()
    assert main(eval_args(config, run_dir, "--limit", "3", "--seed", "7")) == 0  # the grown run resumes quietly
    assert "note:" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("second", "named"),
    [
        (["--limit", "2", "--seed", "8"], "seed 7 != 8"),
        (["--limit", "1", "--seed", "7"], "limit 2 != 1"),
    ],
    ids=["another-seed", "a-smaller-limit"],
)
def test_another_draw_of_questions_is_refused_naming_both_values(
    config: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    second: list[str],
    named: str,
) -> None:
    scripted(monkeypatch)
    run_dir = tmp_path / "run"
    assert main(eval_args(config, run_dir, "--limit", "2", "--seed", "7")) == 0
    first = answered(run_dir)
    capsys.readouterr()
    assert main(eval_args(config, run_dir, *second)) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0] == f"clearmed: error: {run_dir} holds a different run ({named}); choose another --run-dir"
    assert answered(run_dir) == first


def test_an_ids_list_grows_by_extension_and_is_refused_otherwise(
    config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clearmed.demo import demo_questions

    ids = [question.id for question in demo_questions()][:4]
    scripted(monkeypatch)
    run_dir, listed = tmp_path / "run", tmp_path / "ids.txt"
    listed.write_text("\n".join(ids[:2]) + "\n", encoding="utf-8")
    assert main(eval_args(config, run_dir, "--ids", str(listed))) == 0
    listed.write_text("\n".join(ids[:3]) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert main(eval_args(config, run_dir, "--ids", str(listed))) == 0
    assert "grows from 2 to 3 questions (a longer question list)" in capsys.readouterr().err
    assert list(answered(run_dir)) == ids[:3]
    listed.write_text(ids[3] + "\n", encoding="utf-8")
    assert main(eval_args(config, run_dir, "--ids", str(listed))) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert f"3 of this run's 3 questions are not among those asked now (first: {ids[0]})" in lines[0]


def test_the_readers_take_a_string_path(config: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scripted(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(eval_args(config, Path("runs/x"), "--limit", "2")) == 0
    assert len(list(read_records("runs/x"))) == 2  # before: TypeError: unsupported operand type(s) for /
    assert len(scan_results("runs/x").records) == 2
    assert load_manifest("runs/x").question_ids == load_manifest("runs/x/manifest.json").question_ids
    assert read_set_aside_degraded("runs/x") == []
    assert len(read_spend_log("runs/x")) == len(paid_calls("runs/x") or []) > 0
    with RunStore("runs/x") as store:
        assert store.read_manifest() is not None
