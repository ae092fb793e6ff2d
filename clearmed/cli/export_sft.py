"""`clearmed export-sft`: the arguments parse into a `SftExportRequest` through
`clearmed.api.sft.export_teacher_traces` (the option-wise judge's validated teacher traces from run folders, as chat
JSONL); the count of kept and rejected traces printed."""

from __future__ import annotations

import argparse

from rich.table import Table

from clearmed.api.sft import SftExportRequest, export_teacher_traces
from clearmed.cli.main import parsed_request
from clearmed.core.console import user_console


def cmd_export_sft(args: argparse.Namespace) -> int:
    report = export_teacher_traces(parsed_request(SftExportRequest, args))
    table = Table(title=f"teacher traces -> {report.out}", title_justify="left")
    table.add_column("traces")
    table.add_column("count", justify="right")
    table.add_row("judged (considered)", str(report.considered))
    for reason, count in sorted(report.rejected.items()):
        table.add_row(f"rejected: {reason}", str(count))
    table.add_row("kept", f"{report.kept} ({report.pass_rate:.1%})")
    user_console().print(table)
    return 0 if report.kept else 1


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("export-sft")
    parser.add_argument("--run", action="append", required=True, metavar="DIR", help="an eval run folder (repeatable)")
    parser.add_argument("--out", required=True, help="the JSONL file to write")
    parser.add_argument(
        "--lambda-g", type=float, default=0.0, help="loss weight of the knowledge-graph segment, in [0, 1] (default 0)"
    )
    parser.add_argument("--pathways", default="local,dynamic", help="whose judgements to export (default both)")
    parser.add_argument("--exclude-ids", help="a file of question ids (one per line) never to export, e.g. test ids")
    parser.set_defaults(func=cmd_export_sft)
