"""`clearmed export-sft`: the option-wise judge's validated teacher traces from run folders, as chat JSONL."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

from rich.table import Table

from clearmed.core.console import user_console
from clearmed.core.errors import UsageError
from clearmed.signatures.records import Decision, PathwayName


def _run_decisions(runs: list[Path]) -> Iterator[tuple[Decision, str]]:
    from clearmed.evaluation import read_records

    for run in runs:
        for record in read_records(run):
            yield record.decision, run.name


def _passage_words(run: Path) -> int | None:
    """The passage truncation the judge saw, from the run's resolved config (the export must show the same text)."""
    from clearmed.evaluation.folder import snapshot_of

    config = snapshot_of(run)
    if config is None:
        return None
    words = config.get("program", {}).get("passage_words")
    return int(words) if isinstance(words, int) else None


def _read_ids(path: Path | None) -> frozenset[str]:
    if path is None:
        return frozenset()
    try:
        return frozenset(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    except OSError as err:
        raise UsageError(f"cannot read --exclude-ids {path}: {err.strerror}") from None


def cmd_export_sft(args: argparse.Namespace) -> int:
    from clearmed.optimize.teacher_traces import export_sft

    runs = [Path(run) for run in args.run]
    for run in runs:
        if not (run / "results.jsonl").exists():
            raise UsageError(f"{run} is not a run folder (no results.jsonl)")
    words = {_passage_words(run) for run in runs}
    if len(words) > 1:
        raise UsageError(f"the runs truncated passages differently ({sorted(map(str, words))}); export them separately")
    pathways: tuple[PathwayName, ...] = tuple(args.pathways.split(","))  # checked next
    if not pathways or any(p not in ("local", "dynamic") for p in pathways):
        raise UsageError("--pathways takes local, dynamic or local,dynamic")
    if not 0.0 <= args.lambda_g <= 1.0:
        raise UsageError(f"--lambda-g must be in [0, 1], got {args.lambda_g}")
    report = export_sft(
        _run_decisions(runs),
        Path(args.out),
        lambda_g=args.lambda_g,
        pathways=pathways,
        passage_words=words.pop(),
        exclude_ids=_read_ids(Path(args.exclude_ids) if args.exclude_ids else None),
    )
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
