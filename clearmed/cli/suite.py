"""`clearmed suite`: a matrix of evaluations (a suite file or the command line; `clearmed.api.suite_file`) parsed
into a `Suite` and run in this process by `clearmed.api.suite.evaluate_suite` (every cell an `EvalRequest` through
`clearmed.evaluate`; no command line is built to run it), then, once every cell is done, one `clearmed compare` per
benchmark. A cell left with degraded questions is named in the closing line and the suite exits 4 (`ExitCode`).

`--print-commands` prints the command lines instead, one a line, rendered from the same requests
(`clearmed.api.request.request_argv`): the evals (every shard of every cell; independent, one per array task), the
merges (once the evals are done), the comparisons (last).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from clearmed.cli.main import print_summary
from clearmed.core.console import user_console
from clearmed.core.errors import UsageError
from clearmed.core.exit_codes import EXIT_CODES_HELP

if TYPE_CHECKING:
    from clearmed.api.suite_file import Suite


def _suite_of(args: argparse.Namespace) -> Suite:
    from clearmed.api.suite_file import load_suite, suite_from_table

    matrix = bool(args.program or args.benchmark or args.config or args.seed or args.limit)
    if args.suite_file:
        if matrix:
            raise UsageError("give a suite file or a matrix (--program, --benchmark, -c, --seed, --limit), not both")
        suite = load_suite(Path(args.suite_file))
    elif not (args.program and args.benchmark and args.config and args.out):
        raise UsageError("give a suite file, or a matrix: --program, --benchmark and -c (each repeatable) and --out")
    else:
        benchmarks = [dict(zip(("name", "source"), item.split("=", 1), strict=False)) for item in args.benchmark]
        table = {"out": args.out, "configs": args.config, "programs": args.program, "benchmarks": benchmarks}
        suite = suite_from_table({**table, "seeds": args.seed or [0], "limit": args.limit}, "the matrix")
    if args.shards is not None and args.shards < 1:
        raise UsageError(f"--shards must be at least 1, not {args.shards}")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads must be at least 1, not {args.threads}")
    options = {  # every cell's: the suite's template (`Suite.template`)
        "threads": args.threads,
        "overrides": [*suite.template.overrides, *args.overrides] if args.overrides else None,
    }
    template = suite.template.model_copy(update={key: value for key, value in options.items() if value is not None})
    given = {"out": Path(args.out) if args.out else None, "shards": args.shards, "template": template}
    return suite.model_copy(update={key: value for key, value in given.items() if value is not None})


def run_suite(args: argparse.Namespace) -> int:
    from clearmed.api.request import request_argv
    from clearmed.api.suite import compare_suite, evaluate_suite, plan_suite, suite_comparisons

    suite = _suite_of(args)
    plan = plan_suite(suite)  # a config that does not load is refused here, before any cell runs or is printed
    compares = suite_comparisons(suite, plan)
    if args.print_commands:
        sections = {
            "eval": [request_argv(request) for planned in plan for request in planned.evals],
            "merge": [
                ["merge", *map(str, planned.shard_dirs), "--out", str(planned.run_dir)]
                for planned in plan
                if planned.sharded
            ],
            "compare": [["compare", *map(str, folders), "--out", str(out)] for folders, out in compares],
        }
        chosen = list(sections) if args.print_commands == "all" else [args.print_commands]
        for argv in (argv for name in chosen for argv in sections[name]):
            print(f"clearmed {shlex.join(argv)}")
        return 0
    code = evaluate_suite(suite, on_summary=None if args.quiet else print_summary, quiet=args.quiet)
    if code:
        return code
    for compared in compare_suite(suite, plan):  # --quiet: written to the files alone
        user_console(soft_wrap=True, quiet=args.quiet).print(compared.markdown, markup=False, highlight=False)
    user_console(stderr=True).print(
        f"suite: {len(plan)} cells done; comparisons in {suite.out / 'compare'}", markup=False
    )
    return 0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    suite = commands.add_parser("suite", epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    suite.add_argument("suite_file", nargs="?", metavar="SUITE.toml", help="a suite file (clearmed.api.suite_file)")
    suite.add_argument("--program", action="append", default=[], help="a program of the matrix (repeatable)")
    suite.add_argument(
        "--benchmark", action="append", default=[], metavar="NAME[=SOURCE]", help="a benchmark of the matrix"
    )
    suite.add_argument("-c", "--config", action="append", default=[], help="a config of the matrix (repeatable)")
    suite.add_argument("--seed", action="append", type=int, default=[], help="a seed of the matrix (default 0)")
    suite.add_argument("--limit", type=int, help="a seeded sample of N questions of each benchmark")
    suite.add_argument("--out", help="the suite's folder (default for a file: runs/suites/<its name>)")
    suite.add_argument("--shards", type=int, help="run every cell as N shards and merge them")
    suite.add_argument("--threads", type=int, help="questions in parallel in every cell")
    suite.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a setting of every cell's config (repeatable; added to the suite file's overrides)",
    )
    suite.add_argument(
        "--quiet",
        action="store_true",
        help="one line a run and the closing line: no progress bars, no tables (notes and errors stay)",
    )
    suite.add_argument(
        "--print-commands",
        nargs="?",
        const="all",
        choices=["all", "eval", "merge", "compare"],
        help="print the command lines (all, or only the evals, merges or comparisons) instead of running them",
    )
    suite.set_defaults(func=run_suite)
