"""`clearmed merge`: the shards of a run joined into one run folder (`clearmed.api.suite.merge_shards`)."""

from __future__ import annotations

import argparse

from clearmed.cli.main import parsed_request, print_summary


def run_merge(args: argparse.Namespace) -> int:
    """Exit 0 when the merged run holds every question clean, else 4 with the line `clearmed eval` gives (its
    degraded and unrecorded questions, redone by resuming the merged folder)."""
    from clearmed.api.evaluate import left_to_redo, unfinished_line
    from clearmed.api.merge import MergeRequest
    from clearmed.api.suite import merge_shards
    from clearmed.core.console import user_console
    from clearmed.core.exit_codes import ExitCode

    # the summary, plots and report `clearmed eval` leaves in its folder, at the prices of the shards' config
    request = parsed_request(MergeRequest, args)
    summary = merge_shards(request.runs, request.out)
    print_summary(summary)
    left = left_to_redo(summary)
    if not left:
        return ExitCode.DONE
    rerun = f"rerun the shards' clearmed eval command without --shard and with --run-dir {request.out}"
    user_console(stderr=True, soft_wrap=True).print(
        f"clearmed: {unfinished_line(summary, left, rerun)}", markup=False, highlight=False
    )
    return ExitCode.UNFINISHED


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    merge = commands.add_parser("merge")
    merge.add_argument(
        "runs", nargs="+", metavar="RUN_DIR", help="the run folders of all N shards (`clearmed eval ... --shard K/N`)"
    )
    merge.add_argument("--out", required=True, help="folder for the merged run (new, or an earlier merge of them)")
    merge.set_defaults(func=run_merge)
