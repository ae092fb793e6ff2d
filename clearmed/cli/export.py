"""`clearmed export`: run folders as one table, as CSV, Parquet or JSONL: one row per question
(`clearmed.results_frame`), or with `--table runs` one row per run (`clearmed.runs_frame`). Every row names its run
(folder, program, models, config, seed, ...), so a suite's folder exports as one table of all its runs."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from clearmed.core.console import user_console
from clearmed.core.errors import UsageError

FORMATS = ("csv", "parquet", "jsonl")
TABLES = {"questions": "results", "runs": "runs"}  # --table -> the default file's stem


def run_export(args: argparse.Namespace) -> int:
    from clearmed.evaluation import results_table as tables

    given = [Path(folder) for folder in args.runs]
    if args.format == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise UsageError("--format parquet needs pyarrow (pip install pyarrow), or use --format csv")
    if args.out:
        out = Path(args.out)
    elif len(given) == 1:
        out = given[0] / f"{TABLES[args.table]}.{args.format}"
    else:
        raise UsageError("several folders need --out (the file to write)")
    runs = tables.run_folders(given)  # a suite's folder -> its run folders; no run there: one line, nothing written
    per_run = args.table == "runs"
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.format == "jsonl":  # one row a line, as its pydantic model writes it (read back: model_validate_json)
        rows = tables.rows_per_run(runs) if per_run else tables.result_rows(runs)
        out.write_text("".join(row.model_dump_json() + "\n" for row in rows), encoding="utf-8")
        written = len(rows)
    else:
        frame = tables.runs_frame(runs) if per_run else tables.results_frame(runs)
        if args.format == "csv":
            frame.to_csv(out, index=False)
        else:
            frame.to_parquet(out, index=False)
        written = len(frame)
    what = f"{written} runs" if per_run else f"{written} questions" + (f" of {len(runs)} runs" if len(runs) > 1 else "")
    user_console(stderr=True, highlight=False, soft_wrap=True).print(f"{what} written to {out}", markup=False)
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser("export")
    export.add_argument(
        "runs",
        nargs="+",
        metavar="FOLDER",
        help="run folders (of `clearmed eval` or `clearmed.evaluate`), or a suite's folder (every run below it)",
    )
    export.add_argument("--format", choices=FORMATS, default="csv", help="file format (default: csv)")
    export.add_argument(
        "--table",
        choices=tuple(TABLES),
        default="questions",
        help="one row per question (default), or per run",
    )
    export.add_argument(
        "--out", help="file to write (default with one folder: FOLDER/results.FORMAT, or FOLDER/runs.FORMAT)"
    )
    export.set_defaults(func=run_export)
