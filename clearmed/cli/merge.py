"""`clearmed merge`: the shards of a run joined into one run folder (a thin wrapper over `clearmed.evaluation.merge`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console


def run_merge(args: argparse.Namespace) -> int:
    from clearmed.cli.evaluate import _print_summary
    from clearmed.evaluation.compare import snapshot_prices
    from clearmed.evaluation.merge import merge_shards
    from clearmed.report.run_folder import finish_run_folder

    out = Path(args.out)
    merge_shards([Path(folder) for folder in args.runs], out)
    console = Console(stderr=True, soft_wrap=True)
    # the summary, plots and report `clearmed eval` leaves in its folder, at the prices of the shards' config
    _print_summary(finish_run_folder(out, snapshot_prices(out), console))
    console.print(f"run folder: {out}", markup=False, highlight=False)
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    merge = commands.add_parser("merge")
    merge.add_argument(
        "runs", nargs="+", metavar="RUN_DIR", help="the run folders of all N shards (`clearmed eval ... --shard K/N`)"
    )
    merge.add_argument("--out", required=True, help="folder for the merged run (new, or an earlier merge of them)")
    merge.set_defaults(func=run_merge)
