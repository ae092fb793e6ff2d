"""`clearmed report`: the arguments parse into a `ReportRequest` through `clearmed.api.report.report_runs` (a static
HTML report of run folders, or of every run below a suite's folder, in SUITE/report by default); what it wrote
printed."""

from __future__ import annotations

import argparse

from clearmed.cli.main import parsed_request
from clearmed.core.console import user_console


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def run_report(args: argparse.Namespace) -> int:
    from clearmed.api.report import ReportRequest, report_runs

    report = report_runs(parsed_request(ReportRequest, args))
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
