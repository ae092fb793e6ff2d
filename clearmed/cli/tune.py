"""`clearmed tune`: the arguments parse into a `TuneRequest` through `clearmed.api.tune.tune_thresholds` (Optuna over
the adjudication thresholds, re-scoring stored runs by replay); its report printed."""

from __future__ import annotations

import argparse
import json
import statistics
from typing import TYPE_CHECKING

from clearmed.api.tune import TuneRequest, tune_parameter_names, tune_thresholds
from clearmed.cli.main import add_config_arguments, parsed_request
from clearmed.core.console import user_console

if TYPE_CHECKING:
    from clearmed.optimize.rescore import TrialScore
    from clearmed.optimize.tuning import TuneSummary
    from clearmed.optimize.verifier_fit import LearnedFit


def _run_tune(args: argparse.Namespace) -> int:
    tuned = tune_thresholds(parsed_request(TuneRequest, args))
    user_console().print(_report(tuned.summary))
    user_console(stderr=True).print(f"artifact: {tuned.out}  (dashboard: optuna-dashboard {tuned.summary.storage})")
    return 0


def _report(summary: TuneSummary) -> str:
    def row(name: str, score: TrialScore) -> str:
        return f"| {name} | {score.n} | {score.accuracy:.3f} | {score.mean_calls:.2f} | {score.misses} |"

    lines = [
        f"study {summary.study_name}: {summary.trials_in_study} trials ({summary.trials_this_run} now, "
        f"{summary.seconds:.1f} s); best trial {summary.best_trial}, objective {summary.best_value:.4f} "
        f"(paper defaults {summary.paper_defaults_value:.4f})",
        "",
        "| thresholds on | n | accuracy | LM calls/q | replay misses |",
        "|---|---|---|---|---|",
        row("train: paper defaults", summary.paper_defaults_train),
        row("train: tuned", summary.best_train),
    ]
    if summary.held_out is not None:
        lines += [row("test (held out): paper defaults", summary.held_out.paper_defaults)]
        lines += [row("test (held out): tuned", summary.held_out.best)]
    else:
        lines += ["", "no held-out ids: every id was used for tuning, so no test score is reported"]
    if summary.unanimity is not None:
        check = summary.unanimity
        verdict = "kept" if check.kept else "dropped"
        lines += [
            "",
            f"unanimity fast path {verdict}: accuracy {check.accuracy_with:.3f} with, {check.accuracy_without:.3f} "
            f"without; {check.mean_calls_with:.2f} vs {check.mean_calls_without:.2f} LM calls/q",
        ]
    if summary.pool_fit is not None:
        fit = summary.pool_fit
        weights = ", ".join(f"{name.removeprefix('calibrated_')} {value:g}" for name, value in fit.weights.items())
        lines += [
            "",
            f"pooling weights fitted by likelihood on {fit.questions} train questions: {weights} "
            f"(mean log-likelihood of the gold {fit.mean_log_likelihood:.4f}; a weight of 0: that pathway adds nothing)"
            + (f"; the binding betas from {fit.bound_questions} disputed questions" if fit.bound_questions else ""),
        ]
    if summary.learned_fit is not None:
        lines += ["", *_learned_report(summary.learned_fit)]
    lines += ["", "thresholds: " + json.dumps(summary.thresholds.model_dump(exclude_defaults=True))]
    return "\n".join(lines)


def _learned_report(fit: LearnedFit) -> list[str]:
    """The learned verifier's fit: its margin and domain, each feature's weight, and the nested cross-validated
    accuracy per benchmark and backbone against the deterministic verifier on the same disputed questions, as mean ±
    SD over random grouped partitions; then whether it ships, in one line."""
    model = fit.model
    weights = ", ".join(f"{name} {w:+.3f}" for name, w in sorted(fit.weights.items(), key=lambda kv: -abs(kv[1])))
    lines = [
        f"learned verifier fitted on {fit.questions} disputed train questions (C {fit.c:g}, {fit.folds} folds by "
        f"question): margin {model.margin:g}; fitted on {', '.join(model.domain.benchmarks)} / "
        f"{', '.join(model.domain.formats)} / {', '.join(model.domain.backbones)}",
        f"weights per standard deviation: {weights}",
    ]
    repeated = fit.repeated
    if repeated is not None and repeated.partitions:
        from clearmed.metrics import mcnemar_exact_p, mean_sd

        n = len(repeated.partitions)
        lines += [
            "",
            f"nested cross-validation over {n} random grouped partitions (mean ± SD); share = (learned - better "
            "pathway) / (oracle - better pathway) on the disputed questions",
            "",
            "| cell (benchmark, backbone) | disputed | deterministic | learned CV | share | decided by the model "
            "| partitions at or above the deterministic |",
            "|---|---|---|---|---|---|---|",
        ]
        for cell in repeated.cells():
            scores = repeated.of_cell(cell)
            q = max(1, scores[0].questions)
            accuracy = mean_sd([s.learned_correct / q for s in scores])
            share = mean_sd([s.share for s in scores])
            decided = mean_sd([float(s.decided) for s in scores])
            above = sum(s.learned_correct >= s.deterministic_correct for s in scores)
            lines.append(
                f"| {cell} | {scores[0].questions} | {scores[0].deterministic_correct / q:.3f} | "
                f"{accuracy[0]:.3f} ± {accuracy[1]:.3f} | {share[0]:+.2f} ± {share[1]:.2f} | "
                f"{decided[0]:.0f} ± {decided[1]:.0f} | {above} / {n} |"
            )
        from clearmed.report.markdown import p_text

        gain, sd = repeated.gain()
        pooled, pooled_sd = repeated.pooled_share()
        pairs = [(sum(c.gained for c in part.cells), sum(c.lost for c in part.cells)) for part in repeated.partitions]
        gained = mean_sd([float(g) for g, _ in pairs])
        lost = mean_sd([float(lo) for _, lo in pairs])
        p = statistics.median(mcnemar_exact_p(g, lo) for g, lo in pairs)
        lines += [
            "",
            f"pooled share {pooled:+.3f} ± {pooled_sd:.3f}; against the deterministic verifier {gained[0]:.1f} gained "
            f"/ {lost[0]:.1f} lost a partition (net {gain:+.1f} ± {sd:.1f}; exact McNemar p, median over the "
            f"partitions, {p_text(p)}), at or above it on {repeated.at_or_above()} of {n} partitions",
        ]
    lines += ["", fit.withheld or "learned fit ships: over its partitions it beats the deterministic verifier"]
    return lines


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parameters, defaults = tune_parameter_names()
    tune = commands.add_parser("tune")
    tune.add_argument("--run", action="append", required=True, metavar="DIR", help="a finished eval run folder")
    tune.add_argument("--out", required=True, help="artifact folder for the tuned thresholds and the study summary")
    tune.add_argument("--trials", type=int, default=100, help="trials to run in this process (default 100)")
    tune.add_argument("--timeout", type=float, help="stop starting trials after this many seconds")
    tune.add_argument("--seed", type=int, default=0, help="TPE seed and train/test split seed")
    tune.add_argument("--storage", help="Optuna storage URL (default: sqlite:///<out>/optuna.db)")
    tune.add_argument("--study-name", default="clearmed-thresholds", help="workers sharing a study use one name")
    tune.add_argument(
        "--params",
        help=f"comma-separated parameters to tune, from {', '.join(parameters)} (default: "
        f"{', '.join(defaults)}, the likelihood fit of the pooling weights)",
    )
    tune.add_argument(
        "--learned-out-of-domain",
        choices=["fallback", "refuse"],
        default="fallback",
        help="learned_fit: on a question of another benchmark, format or backbone, the deterministic verifier decides "
        "(recorded), or the question is refused (recorded as failed, saying why)",
    )
    tune.add_argument(
        "--on-miss",
        choices=["keep-original", "penalize"],
        default="keep-original",
        help="a branch the record lacks keeps the original outcome, or counts as wrong",
    )
    tune.add_argument("--live", action="store_true", help="ask the LM (cached) for branches the records lack")
    tune.add_argument(
        "--program-artifact",
        help="the compile artifact the runs were made with: its program.json goes into this artifact too",
    )
    add_config_arguments(tune, help="config for priors and --live LMs (default: the first run's config)")
    tune.add_argument("--cost-weight", type=float, default=0.0, help="objective = accuracy - weight * cost")
    tune.add_argument("--cost-unit", choices=["calls", "seconds"], default="calls", help="cost per question")
    tune.add_argument("--train-ids", help="file of ids to tune on (JSON list, ids.json, or one per line)")
    tune.add_argument("--train-fraction", type=float, help="tune on this seeded fraction of the ids")
    tune.add_argument("--test-ids", help="file of held-out ids to report on (must not overlap the train ids)")
    tune.set_defaults(func=_run_tune)
