"""`clearmed export`: a run folder's table, one row per question, as CSV or Parquet (`clearmed.results_frame`)."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from rich.console import Console

from clearmed.core.errors import UsageError

FORMATS = ("csv", "parquet")


def run_export(args: argparse.Namespace) -> int:
    from clearmed.evaluation.results_table import results_frame

    run_dir = Path(args.run)
    if args.format == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise UsageError("--format parquet needs pyarrow (pip install pyarrow), or use --format csv")
    out = Path(args.out) if args.out else run_dir / f"results.{args.format}"
    frame = results_frame(run_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.format == "csv":
        frame.to_csv(out, index=False)
    else:
        frame.to_parquet(out, index=False)
    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"{len(frame)} questions written to {out}", markup=False
    )
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = commands.add_parser("export")
    export.add_argument("run", metavar="RUN_DIR", help="a run folder (of `clearmed eval` or `clearmed.evaluate`)")
    export.add_argument("--format", choices=FORMATS, default="csv", help="file format (default: csv)")
    export.add_argument("--out", help="file to write (default: RUN_DIR/results.csv or results.parquet)")
    export.set_defaults(func=run_export)
