"""`clearmed export RUN --format csv|parquet|jsonl`: the table `results_frame` returns (or `runs_frame`'s, with
`--table runs`), as a file."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from clearmed import results_frame
from clearmed.cli.main import main
from clearmed.numbers.results_table import COLUMNS, ResultRow, RunRow, result_rows
from clearmed.testing.synthetic_run import write_synthetic_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("export") / "run"
    write_synthetic_run(folder, n=12)
    return folder


def test_csv_by_default_into_the_run_folder(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(run_dir)]) == 0
    assert f"12 questions written to {run_dir / 'results.csv'}" in capsys.readouterr().err
    written = pd.read_csv(run_dir / "results.csv", keep_default_na=False)
    frame = results_frame(run_dir)
    assert list(written.columns) == list(frame.columns)
    assert list(written.question_id) == list(frame.question_id)
    assert written.route.tolist() == frame.route.tolist()
    assert written.cost_usd.tolist() == pytest.approx(frame.cost_usd.tolist())


def test_parquet_to_a_file_reads_back_as_the_frame(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "tables" / "clear.parquet"
    assert main(["export", str(run_dir), "--format", "parquet", "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(out), results_frame(run_dir))


def test_parquet_without_pyarrow_is_refused_in_one_line(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else find_spec(name, *a)
    )
    assert main(["export", str(run_dir), "--format", "parquet", "--out", str(tmp_path / "t.parquet")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "clearmed: error: --format parquet needs pyarrow (pip install pyarrow), or use --format csv"
    ]
    assert not (tmp_path / "t.parquet").exists()


def test_a_folder_that_is_no_run_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(tmp_path)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"clearmed: error: {tmp_path}: no manifest.json in it or below it (is it a run folder, or a suite's?)"
    ]
    assert not (tmp_path / "results.csv").exists()


def test_jsonl_round_trips_row_for_row(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.jsonl"
    assert main(["export", str(run_dir), "--format", "jsonl", "--out", str(out)]) == 0
    assert f"12 questions written to {out}" in capsys.readouterr().err
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [ResultRow.model_validate_json(line) for line in lines] == result_rows(run_dir)
    read = pd.read_json(out, lines=True, dtype=False)
    assert list(read.columns) == list(COLUMNS)
    assert read.question_id.tolist() == results_frame(run_dir).question_id.tolist()


def test_one_row_per_run_with_table_runs(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", str(run_dir), "--table", "runs", "--format", "jsonl"]) == 0
    assert f"1 runs written to {run_dir / 'runs.jsonl'}" in capsys.readouterr().err
    (line,) = (run_dir / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    row = RunRow.model_validate_json(line)
    assert (row.run, row.model, row.n, row.planned) == (str(run_dir), "scripted", 12, 12)


def test_an_unknown_format_is_refused_by_the_parser(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["export", str(run_dir), "--format", "xlsx"])
    assert stopped.value.code == 2
    assert "invalid choice: 'xlsx'" in capsys.readouterr().err
