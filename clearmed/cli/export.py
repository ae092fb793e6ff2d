"""`clearmed export`: run folders as one table, as CSV, Parquet or JSONL: one row per question
(`clearmed.results_frame`), or with `--table runs` one row per run (`clearmed.runs_frame`). The arguments parse into
an `ExportRequest` through `clearmed.api.export.export_runs`."""

from __future__ import annotations

import argparse

from clearmed.api.export import FORMATS, TABLES, ExportRequest, export_runs
from clearmed.cli.main import parsed_request
from clearmed.core.console import user_console


def _run_export(args: argparse.Namespace) -> int:
    exported = export_runs(parsed_request(ExportRequest, args))
    user_console(stderr=True, highlight=False, soft_wrap=True).print(exported.line(), markup=False)
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
    export.set_defaults(func=_run_export)
