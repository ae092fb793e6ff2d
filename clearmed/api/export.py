"""`export_runs`: run folders as one table file, the door of `clearmed export`. One row per question
(`clearmed.results_frame`), or per run (`clearmed.runs_frame`), as CSV, Parquet or JSONL; every row names its run, so
a suite's folder exports as one table of all its runs."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from clearmed.core.errors import UsageError

FORMATS = ("csv", "parquet", "jsonl")
TABLES = {"questions": "results", "runs": "runs"}  # --table -> the default file's stem


class ExportRequest(BaseModel):
    """One field per `clearmed export` option of the same name (the folders are `runs`)."""

    model_config = ConfigDict(extra="forbid")

    runs: list[str | Path]  # run folders, or a suite's folder (every run below it)
    format: Literal["csv", "parquet", "jsonl"] = "csv"
    table: Literal["questions", "runs"] = "questions"  # one row per question, or per run
    out: str | Path | None = None  # default with one folder: FOLDER/results.FORMAT (or runs.FORMAT)


class Exported(BaseModel):
    """What an export wrote: the file, its rows, and the runs they came from."""

    out: Path
    rows: int
    runs: int
    table: Literal["questions", "runs"]

    def line(self) -> str:
        """`12 questions of 2 runs written to out.csv`."""
        if self.table == "runs":
            what = f"{self.rows} runs"
        else:
            what = f"{self.rows} questions" + (f" of {self.runs} runs" if self.runs > 1 else "")
        return f"{what} written to {self.out}"


def export_runs(request: ExportRequest | None = None, /, **fields: Any) -> Exported:
    """Write the table: `export_runs(ExportRequest(...))` or `export_runs(runs=[...], format=..., ...)`."""
    from clearmed.numbers import results_table as tables

    if request is None:
        request = ExportRequest(**fields)
    elif fields:
        raise UsageError("give a request or its fields as keywords, not both")
    given = [Path(folder) for folder in request.runs]
    if not given:
        raise UsageError("give at least one run folder to export")
    if request.format == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise UsageError("--format parquet needs pyarrow (pip install pyarrow), or use --format csv")
    if request.out:
        out = Path(request.out)
    elif len(given) == 1:
        out = given[0] / f"{TABLES[request.table]}.{request.format}"
    else:
        raise UsageError("several folders need --out (the file to write)")
    runs = tables.run_folders(given)  # a suite's folder -> its run folders; no run there: one line, nothing written
    per_run = request.table == "runs"
    out.parent.mkdir(parents=True, exist_ok=True)
    if request.format == "jsonl":  # one row a line, as its pydantic model writes it (read back: model_validate_json)
        rows = tables.rows_per_run(runs) if per_run else tables.result_rows(runs)
        out.write_text("".join(row.model_dump_json() + "\n" for row in rows), encoding="utf-8")
        written = len(rows)
    else:
        frame = tables.runs_frame(runs) if per_run else tables.results_frame(runs)
        if request.format == "csv":
            frame.to_csv(out, index=False)
        else:
            frame.to_parquet(out, index=False)
        written = len(frame)
    return Exported(out=out, rows=written, runs=len(runs), table=request.table)
