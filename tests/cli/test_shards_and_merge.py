"""`clearmed eval --shard K/N` and `clearmed merge`: a run made as three shards and merged is the run one process
makes (the same ids, answers, summary.json and report, wall times aside), and every merge that could not be that run
is refused in one line with nothing written."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from clearmed.cli.main import main
from clearmed.evaluation import read_records
from clearmed.evaluation.store import load_manifest
from tests.cli.scripted_cli import config_toml, scripted


def write_config(folder: Path, name: str = "remote", program: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(config_toml(program, run=f'runs_dir = "{folder / "runs"}"'), encoding="utf-8")
    return path


def eval_args(config: Path, *extra: str, limit: int = 9) -> list[str]:
    return ["eval", "--benchmark", "demo", "--limit", str(limit), "-c", str(config), *extra]


def _untimed(summary: dict[str, Any]) -> dict[str, Any]:
    cost = {**summary["cost"], "mean_seconds": 0, "median_seconds": 0}
    routes = [{**route, "mean_seconds": 0} for route in summary["cost_by_route"]]
    return {**summary, "cost": cost, "cost_by_route": routes}


_CLOCK = [
    (re.compile(r"data:image/png;base64,[A-Za-z0-9+/=]+"), "IMAGE"),  # the plots draw the seconds too
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00"), "TIME"),
    (re.compile(r"\d+\.\d+"), "N.N"),  # seconds (and with them dollars and rates, compared in summary.json)
]


def _report_pages(folder: Path) -> dict[str, str]:
    """The report's pages with what a clock writes (timestamps, seconds, plot images) masked; counts, answers,
    routes, rules and evidence left as they are."""
    pages = {}
    for page in sorted((folder / "report").rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        for pattern, mask in _CLOCK:
            text = pattern.sub(mask, text)
        pages[str(page.relative_to(folder))] = text
    return pages


def _records(folder: Path) -> list[dict[str, Any]]:
    """The records in order, without their wall times (the question's, and each call's)."""
    records = []
    for record in sorted(read_records(folder), key=lambda r: r.index):
        usage = [row.model_copy(update={"seconds": 0.0}) for row in record.decision.usage]
        untimed = record.model_copy(update={"decision": record.decision.model_copy(update={"usage": usage})})
        records.append(untimed.model_dump(exclude={"seconds", "finished"}))
    return records


def test_three_shards_merged_are_the_run_one_process_makes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scripted(monkeypatch)
    config = write_config(tmp_path)
    one = tmp_path / "one" / "clear-n9-s0"  # the same folder name as the merged run's: the reports name runs by it
    assert main(eval_args(config, "--run-dir", str(one))) == 0
    runs = tmp_path / "runs" / "remote" / "demo"
    # shard 2 is stopped after one question and resumed with its command: the split is the same on resume
    assert main(eval_args(config, "--shard", "2/3", "--stop-after", "1")) == 0
    for shard in ("1/3", "2/3", "3/3"):
        assert main(eval_args(config, "--shard", shard)) == 0
    shards = [runs / f"clear-n9-s0-shard{k}of3" for k in (1, 2, 3)]  # each shard in its own default folder
    manifests = [load_manifest(folder / "manifest.json") for folder in shards]
    ids = load_manifest(one / "manifest.json").question_ids
    assert [m.question_ids for m in manifests] == [ids[0::3], ids[1::3], ids[2::3]]
    assert [(m.shard.index, m.shard.count, m.shard.of_questions) for m in manifests if m.shard] == [
        (1, 3, 9),
        (2, 3, 9),
        (3, 3, 9),
    ]
    merged = tmp_path / "merged" / "clear-n9-s0"
    capsys.readouterr()
    assert main(["merge", *map(str, reversed(shards)), "--out", str(merged)]) == 0
    out, err = capsys.readouterr()
    assert "| clear | demo | 9/9 |" in out  # the summary `clearmed eval` prints
    assert f"run folder: {merged}" in err

    assert _records(merged) == _records(one)  # the same ids, at the same positions, with the same answers
    assert {("A",), ("B",)} <= {tuple(r["decision"]["answer"]["letters"]) for r in _records(one)}
    summary, unsharded = (json.loads((f / "summary.json").read_text()) for f in (merged, one))
    assert _untimed(summary) == _untimed(unsharded)
    assert summary["spend"]["usd"] > 0
    # per-stage dollars too: the merge prices the stages from the run's config snapshot, as eval from its config
    assert all(stage["usd"] is not None for stage in summary["spend"]["by_stage"])
    assert summary["accuracy"]["correct"] not in (0, 9)
    manifest = load_manifest(merged / "manifest.json")
    assert manifest.model_dump(exclude={"created"}) == load_manifest(one / "manifest.json").model_dump(
        exclude={"created"}
    )
    spent = [json.loads(line) for line in (merged / "spend.jsonl").read_text().splitlines()]
    assert {entry["question_id"] for entry in spent} == set(ids)
    assert _report_pages(merged) == _report_pages(one)
    assert (merged / "plots" / "accuracy.png").is_file()
    assert (merged / "leakage.json").is_file()
    # compare and report accept it, and the same eval command resumes it with nothing left to do
    assert main(["compare", str(one), str(merged)]) == 0
    assert main(["report", str(merged), "--out", str(tmp_path / "report")]) == 0
    assert main(eval_args(config, "--run-dir", str(merged))) == 0
    assert len(list(read_records(merged))) == 9


@pytest.mark.parametrize(
    ("shard", "message"),
    [
        ("0/3", "--shard 0/3: K must be between 1 and N"),
        ("4/3", "--shard 4/3: K must be between 1 and N"),
        ("x", "--shard 'x': give K/N"),
        ("4/12", "--shard 4/12: the run has 9 questions, so at most that many shards"),
    ],
)
def test_bad_shard_values_are_refused_in_one_line(
    shard: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path)
    assert main(eval_args(config, "--shard", shard)) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"clearmed: error: {message}")
    assert not (tmp_path / "runs").exists()


def test_a_shard_folder_resumed_as_another_shard_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scripted(monkeypatch)
    config = write_config(tmp_path)
    folder = tmp_path / "shard"
    assert main(eval_args(config, "--shard", "1/3", "--run-dir", str(folder), limit=3)) == 0
    capsys.readouterr()
    assert main(eval_args(config, "--shard", "2/3", "--run-dir", str(folder), limit=3)) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert re.search(r"holds a different run \(shard 1/3 of 3 ids \w+ != 2/3 of 3 ids \w+\)", err)
    assert main(eval_args(config, "--run-dir", str(folder), limit=3)) == 2  # nor as the whole run
    assert "!= None" in capsys.readouterr().err


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Run folders to merge or refuse: the 3 shards of a 6-question run, shard 3/3 of another program's and of
    another config's run, shard 2/3 of a 9-question run, an unfinished shard 2/3, and the unsharded run."""
    base = tmp_path_factory.mktemp("merge")
    config = write_config(base)
    other = write_config(base, "other", program="local_k = 3")
    made: dict[str, Path] = {}
    with pytest.MonkeyPatch.context() as monkeypatch:
        scripted(monkeypatch)

        def run(name: str, *extra: str, limit: int = 6, config: Path = config) -> None:
            made[name] = base / name
            assert main(eval_args(config, *extra, "--run-dir", str(base / name), limit=limit)) == 0

        for k in (1, 2, 3):
            run(f"shard{k}", "--shard", f"{k}/3")
        run("direct3", "--program", "direct", "--shard", "3/3")
        run("other3", "--shard", "3/3", config=other)
        run("nine2", "--shard", "2/3", limit=9)
        run("unfinished2", "--shard", "2/3", "--stop-after", "1")
        run("whole")
    shutil.copytree(made["shard1"], base / "copy1")
    made["copy1"] = base / "copy1"
    return made


def _merge(folders: dict[str, Path], names: list[str], out: Path) -> list[str]:
    return ["merge", *(str(folders[name]) if name in folders else name for name in names), "--out", str(out)]


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["shard1", "shard2"], "shard 3/3 missing: the 2 given cover 4 of the run's 6 questions"),
        (["shard1"], "shards 2/3, 3/3 missing: the 1 given cover 2 of the run's 6 questions"),
        (
            ["shard1", "shard2", "shard3", "copy1"],
            r"shard 1/3 is given twice \(.*shard1 and .*copy1\); their questions overlap",
        ),
        (["shard1", "shard2", "shard1"], r"shard1 is given twice"),
        (
            ["shard1", "shard2", "direct3"],
            r"direct3 is not a shard of the run .*shard1 is a shard of \(program 'clear'",
        ),
        (["shard1", "shard2", "other3"], r"other3 is not a shard of the run .*\(config digest '\w+' != '\w+'\)"),
        (["shard1", "nine2", "shard3"], r"nine2 is not a shard of the run .*\(limit 6 != 9; shard 1/3 of 6 ids"),
        (["shard1", "unfinished2", "shard3"], r"unfinished2: shard 2/3 is not finished \(1 of its 2 questions"),
        (["shard1", "shard2", "whole"], r"whole is not a shard \(a run of `clearmed eval ... --shard K/N`\)"),
        (["shard1", "shard2", "nowhere"], r"nowhere: no manifest.json \(is it a run folder\?\)"),
    ],
)
def test_a_merge_that_could_not_be_one_run_is_refused_in_one_line(
    names: list[str], message: str, folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "merged"
    assert main(_merge(folders, names, out)) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert re.search(message, err), err
    assert "Traceback" not in err
    assert not out.exists()


def test_merge_into_a_folder_of_another_run_or_a_shard_is_refused(
    folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shards = ["shard1", "shard2", "shard3"]
    assert main(_merge(folders, shards, folders["whole"])) == 2  # the unsharded run: created apart, kept
    assert "holds another run; choose a new folder" in capsys.readouterr().err
    assert main(_merge(folders, shards, folders["shard2"])) == 2
    assert "is one of the shards" in capsys.readouterr().err
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    assert main(_merge(folders, shards, tmp_path / "busy")) == 2
    assert "is not empty and holds no run" in capsys.readouterr().err
    # the same merge twice: the second rewrites the same run
    assert main(_merge(folders, shards, tmp_path / "merged")) == 0
    first = (tmp_path / "merged" / "results.jsonl").read_bytes()
    assert main(_merge(folders, shards, tmp_path / "merged")) == 0
    assert (tmp_path / "merged" / "results.jsonl").read_bytes() == first
