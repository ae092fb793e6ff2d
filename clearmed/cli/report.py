"""`clearmed report`: a static HTML report of run folders (a thin wrapper over `clearmed.report.html_report`). A
suite's folder stands for every run below it (`results_table.run_folders`): one report of all the suite's runs,
with each run's pages and a comparison per benchmark, in SUITE/report by default."""

from __future__ import annotations

import argparse
from pathlib import Path

from clearmed.core.console import user_console
from clearmed.core.errors import UsageError


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def run_report(args: argparse.Namespace) -> int:
    from clearmed.numbers.results_table import run_folders
    from clearmed.report.html_report import write_html_report

    given = [Path(folder) for folder in args.runs]
    if args.out:
        out = Path(args.out)
    elif len(given) == 1:
        out = given[0] / "report"
    else:
        raise UsageError("several run folders need --out (the folder for the report)")
    report = write_html_report(run_folders(given), out)
    user_console(stderr=True, highlight=False, soft_wrap=True).print(
        f"report: {report.index} ({report.pages} pages: {report.question_pages} question pages, "
        f"comparison views {report.comparisons}; {_size(report.bytes)})",
        markup=False,
    )
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = commands.add_parser("report")
    report.add_argument(
        "runs",
        nargs="+",
        metavar="RUN_DIR",
        help="run folders (of `clearmed eval`), or a suite's folder (every run below it)",
    )
    report.add_argument("--out", help="folder for the report (default with one folder: RUN_DIR/report)")
    report.set_defaults(func=run_report)
