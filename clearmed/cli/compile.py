"""`clearmed compile`: the arguments parse into a `CompileRequest` through `clearmed.api.compile.compile_prompts`
(a program's prompts optimized with a DSPy optimizer into an artifact folder); its report printed."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from clearmed.api.compile import CompileRequest, compile_prompts, optimizer_names
from clearmed.api.request import program_names
from clearmed.cli.main import add_config_arguments, parsed_request
from clearmed.core.console import user_console

if TYPE_CHECKING:
    from clearmed.optimize.compiling import CompileReport, SplitScore


def _run_compile(args: argparse.Namespace) -> int:
    compiled = compile_prompts(parsed_request(CompileRequest, args))
    user_console().print(_report(compiled.report))
    out = compiled.out
    user_console(stderr=True).print(
        f"artifact: {out}  (use it with --program-artifact {out})", markup=False, highlight=False
    )
    return 0


def _report(report: CompileReport) -> str:
    def row(name: str, score: SplitScore) -> str:
        acc = score.accuracy
        interval = f"[{acc.wilson.low:.3f}, {acc.wilson.high:.3f}]" if acc.wilson else "-"
        return f"| {name} | {acc.n} | {acc.accuracy:.3f} | {interval} | {score.mean_lm_calls:.2f} |"

    return "\n".join(
        [
            f"{report.settings.optimizer}: {report.compile_lm_calls} LM calls, {report.compile_seconds:.1f} s",
            "",
            "| program on val ids | n | accuracy | 95% Wilson | LM calls/q |",
            "|---|---|---|---|---|",
            row("before", report.val_before),
            row("after", report.val_after),
            "",
            "val ids were seen by the optimizer: evaluate on other ids for a test score",
        ]
    )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    compile_ = commands.add_parser("compile")
    compile_.add_argument("--program", default="clear", choices=program_names(), help="program to compile")
    compile_.add_argument("--optimizer", required=True, choices=optimizer_names(), help="DSPy optimizer")
    compile_.add_argument("--benchmark", required=True, help="benchmark name (see `clearmed benchmarks`), or 'demo'")
    compile_.add_argument("--source", help="local file in the upstream schema, or 'shared' (default: the hub copy)")
    compile_.add_argument("--split", help="hub split (or label for a local file)")
    compile_.add_argument(
        "--skip-bad-rows", action="store_true", help="skip and count malformed benchmark rows instead of stopping"
    )
    add_config_arguments(compile_)
    compile_.add_argument("--train", type=int, required=True, help="train questions")
    compile_.add_argument("--val", type=int, required=True, help="validation questions")
    compile_.add_argument("--seed", type=int, default=0)
    compile_.add_argument("--exclude-ids", help="file of ids never to compile on (e.g. your test ids)")
    compile_.add_argument("--stages", help="predictors or modules to optimize, comma separated (default: all)")
    compile_.add_argument("--max-demos", type=int, default=2, help="bootstrapped demos per predictor (default 2)")
    compile_.add_argument("--candidates", type=int, default=4, help="candidate programs or instructions")
    compile_.add_argument(
        "--auto", choices=["light", "medium", "heavy", "none"], default="light", help="MIPROv2/GEPA budget preset"
    )
    compile_.add_argument("--trials", type=int, help="MIPROv2 trials (with --auto none)")
    compile_.add_argument("--max-metric-calls", type=int, help="GEPA budget (with --auto none)")
    compile_.add_argument("--bsize", type=int, help="SIMBA mini-batch size")
    compile_.add_argument("--max-steps", type=int, default=4, help="SIMBA steps")
    compile_.add_argument("--threads", type=int, help="parallel program calls (default: run.num_threads)")
    compile_.add_argument("--out", required=True, help="artifact folder")
    compile_.set_defaults(func=_run_compile)
