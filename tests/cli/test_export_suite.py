"""`clearmed export SUITE` and `clearmed report SUITE`: a suite's folder stands for every run below it (a sharded
cell's merge, not its shards), in one table and one report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from clearmed.cli.main import main
from clearmed.evaluation import read_records, summarize
from clearmed.evaluation.store import MANIFEST, load_manifest
from clearmed.testing.synthetic_run import write_synthetic_suite


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    out = tmp_path_factory.mktemp("suite") / "out"
    return out, write_synthetic_suite(out, n=6)


def _accuracy(run_dir: Path) -> float | None:
    summary = summarize(list(read_records(run_dir)), load_manifest(run_dir / MANIFEST))
    return summary.accuracy.accuracy if summary.accuracy is not None else None


def test_a_suite_folder_exports_one_table_of_all_its_runs(
    suite: tuple[Path, dict[str, Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, runs = suite
    table = tmp_path / "suite.csv"
    assert main(["export", str(out), "--out", str(table)]) == 0
    assert f"12 questions of 2 runs written to {table}" in capsys.readouterr().err
    frame = pd.read_csv(table)
    assert frame.groupby("run").size().to_dict() == {str(runs["model-a"]): 6, str(runs["model-b"]): 6}
    assert frame.groupby("run").model.first().to_dict() == {
        str(runs["model-a"]): "model-a",
        str(runs["model-b"]): "model-b",
    }
    by_model = frame.groupby("model").correct.mean().to_dict()
    assert by_model == pytest.approx({model: _accuracy(run) for model, run in runs.items()})
    assert by_model["model-a"] != by_model["model-b"]


def test_a_suite_folder_exports_one_row_per_run_into_itself(
    suite: tuple[Path, dict[str, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    out, runs = suite
    assert main(["export", str(out), "--table", "runs"]) == 0
    assert f"2 runs written to {out / 'runs.csv'}" in capsys.readouterr().err
    frame = pd.read_csv(out / "runs.csv")
    assert frame.run.tolist() == [str(runs["model-a"]), str(runs["model-b"])]
    assert (frame.n.tolist(), frame.seed.tolist(), frame.shard.isna().all()) == ([6, 6], [0, 1], True)


def test_several_folders_need_out(suite: tuple[Path, dict[str, Path]], capsys: pytest.CaptureFixture[str]) -> None:
    _, runs = suite
    assert main(["export", str(runs["model-a"]), str(runs["model-b"])]) == 2
    assert capsys.readouterr().err.splitlines() == ["clearmed: error: several folders need --out (the file to write)"]


def test_a_suite_folder_reports_every_run_in_one_report(
    suite: tuple[Path, dict[str, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = suite
    assert main(["report", str(out)]) == 0
    assert f"report: {out / 'report' / 'index.html'}" in capsys.readouterr().err
    pages = sorted(path.name for path in (out / "report" / "runs").iterdir())
    assert pages == ["clear-n6-s0", "clear-n6-s1"]  # the two runs; no shard's pages
    assert (out / "report" / "compare" / "synthetic.html").is_file()
