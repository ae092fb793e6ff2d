"""`clearmed eval` (its arguments into one `clearmed.api.request.EvalRequest`), `clearmed compare` and `clearmed benchmarks`."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from clearmed.cli.main import add_artifact_argument, add_config_arguments, parsed_request, print_summary
from clearmed.core.console import user_console
from clearmed.core.exit_codes import EXIT_CODES_HELP

if TYPE_CHECKING:
    from clearmed.evaluation import RunSummary


def run_eval(args: argparse.Namespace) -> int:
    """The arguments as one `EvalRequest` through `clearmed.api` (each option is a field of the same name). Exit
    codes (`clearmed.core.exit_codes.ExitCode`): 0 done, 2 bad input or a fatal service error (a rejected key, an
    exhausted balance, a missing model: the run stops after its questions in flight and resumes with the same
    command), 3 the budget reached, 4 degraded or unrecorded questions left (summarized; a rerun redoes them)."""
    from clearmed.api.evaluate import estimate_run, evaluate_to_exit_code
    from clearmed.api.request import EvalRequest

    request = parsed_request(EvalRequest, args)
    if request.estimate:
        user_console(soft_wrap=True).print(estimate_run(request).render(request.benchmark), markup=False)
        return 0
    return evaluate_to_exit_code(request, _quiet if request.quiet else print_summary)


def _quiet(summary: RunSummary) -> None:
    """--quiet: the run's one line (`clearmed.api.evaluate.run_line`) is all it prints of its summary."""


def run_compare(args: argparse.Namespace) -> int:
    """The arguments as one `CompareRequest` through `clearmed.api.compare.compare_runs`; its Markdown printed."""
    from clearmed.api.compare import CompareRequest, compare_runs

    request = parsed_request(CompareRequest, args)
    result = compare_runs(request.runs, **request.model_dump(exclude={"runs"}))
    user_console(soft_wrap=True).print(result.markdown, markup=False, highlight=False)
    if args.out:
        user_console(stderr=True).print(f"comparison written to {args.out}", markup=False, highlight=False)
    return 0


def _add_question_arguments(evaluate: argparse.ArgumentParser) -> None:
    """`eval`: the program, and the benchmark questions it runs on."""
    from clearmed.api.request import program_names

    evaluate.add_argument("--program", default="clear", choices=program_names(), help="program to evaluate")
    evaluate.add_argument(
        "--benchmark",
        required=True,
        help="benchmark name (see `clearmed benchmarks`), 'demo', or 'questions' for your own file (--source FILE)",
    )
    evaluate.add_argument(
        "--source",
        help="local file in the upstream schema, or 'shared' (default: the Hugging Face hub copy); for 'questions', "
        'your JSONL file (or JSON list) of {"question", "options", "answer", "id"} objects, as clearmed.evaluate takes',
    )
    evaluate.add_argument("--split", help="hub split (or label for a local file)")
    evaluate.add_argument(
        "--revision", help="hub branch, tag or commit to read the benchmark at (the commit read goes in the manifest)"
    )
    add_config_arguments(evaluate)
    evaluate.add_argument("--limit", type=int, help="evaluate N questions (deterministic sample with --seed)")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--ids", help="a file of question ids to evaluate, in order (one per line or a JSON list)")
    evaluate.add_argument(
        "--skip-bad-rows", action="store_true", help="skip and count malformed benchmark rows instead of stopping"
    )


def _add_run_arguments(evaluate: argparse.ArgumentParser) -> None:
    """`eval`: how the run is made: threads, folder, artifact, degraded questions, budget, estimate, pathways."""
    evaluate.add_argument("--threads", type=int, help="questions in parallel (default: run.num_threads)")
    evaluate.add_argument(
        "--run-dir", help="run folder (default: runs/<config>/<benchmark>/<program>-n<N>-s<seed>[-<the --set label>])"
    )
    add_artifact_argument(evaluate)
    evaluate.add_argument(
        "--allow-train-overlap", action="store_true", help="evaluate even on ids the artifact was optimized on"
    )
    evaluate.add_argument(
        "--keep-degraded",
        action="store_true",
        help="on resume, keep questions recorded as degraded (a stage failed after its retries) instead of redoing them",
    )
    evaluate.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="start no question once the run's LM calls have cost this much (default: run.max_cost; exit code 3; "
        "the questions in flight still finish, so a run may overshoot by what --threads questions cost)",
    )
    evaluate.add_argument(
        "--batch",
        action="store_true",
        help="send the LM calls through the provider's batch API (OpenAI, Anthropic: half the price, answers within "
        "24 h), in passes until every question is answered; a rerun reattaches to the batches in flight",
    )
    evaluate.add_argument(
        "--estimate",
        action="store_true",
        help="print the expected calls, tokens, dollars and wall time from stored runs of this program and config",
    )
    evaluate.add_argument(
        "--pilot", type=int, metavar="N", help="with --estimate: run the first N questions first and estimate from them"
    )
    evaluate.add_argument(
        "--pathway",
        action="append",
        default=[],
        metavar="NAME=SOURCE",
        help="take a pathway's answers from a recorded run instead of running it: NAME is parametric, local or "
        "dynamic; SOURCE a MIRAGE prediction folder or a clearmed run folder, or 'absent' to leave the pathway "
        "out (repeatable; the adjudication always runs live)",
    )
    evaluate.add_argument(
        "--shard",
        metavar="K/N",
        help="evaluate shard K of N of the run's questions (round robin by position; join them with clearmed merge)",
    )
    evaluate.add_argument(
        "--quiet", action="store_true", help="one line for the run: no progress bar, no tables (notes and errors stay)"
    )
    evaluate.add_argument("--stop-after", type=int, help=argparse.SUPPRESS)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    evaluate = commands.add_parser("eval", epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_question_arguments(evaluate)
    _add_run_arguments(evaluate)
    evaluate.set_defaults(func=run_eval)

    compare = commands.add_parser("compare")
    compare.add_argument("runs", nargs="+", help="run folders, or a suite's folder (every run below it)")
    compare.add_argument(
        "--out", help="folder for comparison.md, runs.csv, pairs.csv, comparison.json, comparison.tex and the plots"
    )
    compare.add_argument(
        "--common",
        action="store_true",
        help="re-summarize each run on the question ids all runs of its benchmark answered (fair when sizes differ)",
    )
    pairing = compare.add_mutually_exclusive_group()
    pairing.add_argument(
        "--baseline",
        metavar="RUN",
        help="pair every run against this run folder (default: the first of each benchmark)",
    )
    pairing.add_argument("--all-pairs", action="store_true", help="pair every two runs of a benchmark")
    compare.add_argument(
        "--plot-format", choices=["png", "pdf", "svg"], default="png", help="the plots' file format in --out"
    )
    compare.set_defaults(func=run_compare)

    benchmarks = commands.add_parser("benchmarks")
    benchmarks.set_defaults(func=list_benchmarks)


def list_benchmarks(args: argparse.Namespace) -> int:
    from rich.table import Table

    from clearmed.api.questions import benchmark_listing

    listing = benchmark_listing()
    table = Table(title="Benchmarks", title_justify="left")
    for column in ("name", "hub id", "mode", "scoring", "shared file"):
        table.add_column(column, overflow="fold")
    for info in listing.benchmarks:
        table.add_row(info.name, info.hub_id or "-", info.answer_mode, info.scoring, info.shared_file or "")
    console = user_console()
    console.print(table)
    console.print("demo: the built-in bundle of a few questions (--benchmark demo)", markup=False, soft_wrap=True)
    console.print(
        f"{listing.own_name}: your own questions, --benchmark {listing.own_name} --source my.jsonl: "
        f"{listing.own_format}, as clearmed.evaluate "
        'takes them (each question\'s mode is its own: options or none, and "multi": true)',
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return 0
