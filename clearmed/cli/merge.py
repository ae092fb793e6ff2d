"""`clearmed merge`: the shards of a run joined into one run folder (`clearmed.api.suite.merge_shards`)."""

from __future__ import annotations

import argparse


def run_merge(args: argparse.Namespace) -> int:
    from clearmed.api.suite import merge_shards
    from clearmed.cli.evaluate import _print_summary

    # the summary, plots and report `clearmed eval` leaves in its folder, at the prices of the shards' config
    _print_summary(merge_shards(args.runs, args.out))
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    merge = commands.add_parser("merge")
    merge.add_argument(
        "runs", nargs="+", metavar="RUN_DIR", help="the run folders of all N shards (`clearmed eval ... --shard K/N`)"
    )
    merge.add_argument("--out", required=True, help="folder for the merged run (new, or an earlier merge of them)")
    merge.set_defaults(func=run_merge)
