"""`clearmed tune`: Optuna over the adjudication thresholds, re-scoring stored runs by replay."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from clearmed.cli.main import add_config_arguments, config_from_args
from clearmed.core.console import user_console
from clearmed.core.errors import UsageError

if TYPE_CHECKING:
    from clearmed.config import ClearmedConfig
    from clearmed.optimize.artifacts import ProgramArtifact
    from clearmed.optimize.rescore import LoadedRuns, ReplayItem, Rescorer, TrialScore
    from clearmed.optimize.splits import UsedIds
    from clearmed.optimize.tuning import TuneSummary
    from clearmed.optimize.verifier_fit import LearnedFit


def _run_config(args: argparse.Namespace) -> ClearmedConfig:
    """The config whose priors (and, with --live, LMs) replay uses: -c, else the first run's config.json."""
    from clearmed.config import ClearmedConfig
    from clearmed.evaluation.compare import snapshot_backbone

    if args.config or args.overrides:
        return config_from_args(args)
    path = Path(args.run[0]) / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        raise UsageError(f"{path}: missing or unreadable; pass -c/--config with the config the run used") from None
    try:
        for name, table in dict(data.get("backbones") or {}).items():
            if isinstance(table, dict):  # the snapshot's embedded-only defaults dropped (`snapshot_backbone`)
                data["backbones"][name] = snapshot_backbone(table)
        return ClearmedConfig.model_validate(data)
    except ValidationError as err:
        first = str(err).splitlines()[0]
        raise UsageError(f"{path}: not a config this version reads ({first}); pass -c/--config") from None


def _ids(path: str | None) -> list[str] | None:
    from clearmed.optimize.splits import read_id_file

    return read_id_file(path) if path else None


def run_tune(args: argparse.Namespace) -> int:
    from clearmed.optimize.rescore import load_items
    from clearmed.optimize.splits import question_groups, question_key_digest, refuse_seen_as_test, split_ids
    from clearmed.optimize.tuning import TuneSettings, parse_params, redact_storage, tune

    if args.cost_weight < 0:
        raise UsageError(f"--cost-weight must be >= 0, got {args.cost_weight}")
    params = parse_params(args.params)
    out, compiled = _out_and_compiled(args)
    items, loaded = load_items(args.run)
    groups = question_groups(item.question for item in items)  # a question repeated under two ids: one side
    ids = split_ids(
        [item.question_id for item in items],
        train_ids=_ids(args.train_ids),
        test_ids=_ids(args.test_ids),
        train_fraction=args.train_fraction,
        seed=args.seed,
        groups=groups,
    )
    train = set(ids.train)
    ids.seen_keys = sorted({question_key_digest(item.question) for item in items if item.question_id in train})
    if compiled is not None:
        refuse_seen_as_test(ids.test, compiled.ids.seen(), what="compiling the program")
    config = _run_config(args)
    rescorer = _rescorer(args, items, config)
    settings = TuneSettings(
        params=params,
        on_miss=args.on_miss,
        cost_weight=args.cost_weight,
        cost_unit=args.cost_unit,
        seed=args.seed,
        live=args.live,
    )
    out.mkdir(parents=True, exist_ok=True)
    storage = args.storage or f"sqlite:///{(out / 'optuna.db').resolve()}"
    console = user_console(stderr=True)
    console.print(
        f"tuning {', '.join(params)} on {len(ids.train)} train ids ({len(ids.test)} held out) "
        f"from {loaded.records} records ({loaded.skipped_unscored} unscored skipped); "
        f"study {args.study_name!r} in {redact_storage(storage)}"
    )
    summary = tune(
        rescorer, ids, settings, n_trials=args.trials, study_name=args.study_name, storage=storage, timeout=args.timeout
    )
    if summary.learned_fit is not None:  # where the fit does not apply: fall back (recorded) or refuse the question
        fit = summary.learned_fit
        model = fit.model.model_copy(update={"out_of_domain": args.learned_out_of_domain})
        summary = summary.model_copy(update={"learned_fit": fit.model_copy(update={"model": model})})
    _write_tune_artifact(out, summary, compiled, loaded, config, ids)
    user_console().print(_report(summary))
    console.print(f"artifact: {out}  (dashboard: optuna-dashboard {summary.storage})")
    return 0


def _out_and_compiled(args: argparse.Namespace) -> tuple[Path, ProgramArtifact | None]:
    """The artifact folder (never a compile artifact's), and the compile artifact the runs were made with, if any."""
    from clearmed.optimize.artifacts import MANIFEST, load_artifact

    out = Path(args.out)
    if (out / MANIFEST).exists() and load_artifact(out).manifest.kind != "tune":
        raise UsageError(f"{out} holds a compiled program artifact; choose another --out")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is a file, not a folder")
    compiled = load_artifact(args.program_artifact) if args.program_artifact else None
    if compiled is not None and compiled.program_state is None:
        raise UsageError(f"{args.program_artifact}: holds no compiled program (program.json) to carry")
    return out, compiled


def _rescorer(args: argparse.Namespace, items: list[ReplayItem], config: ClearmedConfig) -> Rescorer:
    from clearmed.optimize.rescore import LiveSession, Rescorer

    live = None
    if args.live:
        from clearmed.api.assemble import build_clear

        live = LiveSession(build_clear(config))
    return Rescorer(
        items,
        on_miss=args.on_miss,
        cost_weight=args.cost_weight,
        cost_unit=args.cost_unit,
        live=live,
    )


def _write_tune_artifact(
    out: Path,
    summary: TuneSummary,
    compiled: ProgramArtifact | None,
    loaded: LoadedRuns,
    config: ClearmedConfig,
    ids: UsedIds,
) -> None:
    """Tuned on runs of a compiled program: one artifact carries both, so `--program-artifact` loads them together."""
    from clearmed.optimize.artifacts import new_manifest, write_artifact

    state = compiled.program_state if compiled is not None else None
    optimizer = "optuna-tpe" if compiled is None else f"{compiled.manifest.optimizer}+optuna-tpe"
    manifest = new_manifest(
        "tune", loaded.programs[0], config, benchmark=None, optimizer=optimizer, has_program_state=state is not None
    )
    if compiled is not None:  # the prompts were optimised on the compile ids: they count as seen, never as test
        ids = ids.model_copy(update={"train": list(dict.fromkeys([*ids.train, *compiled.ids.seen()]))})
    reports = {"study.json": summary.model_dump_json(indent=2), "runs.json": loaded.model_dump_json(indent=2)}
    learned = summary.learned_fit.model if summary.learned_fit is not None else None
    write_artifact(
        out,
        manifest,
        thresholds=summary.thresholds,
        ids=ids,
        config=config,
        program_state=state,
        reports=reports,
        learned=learned,
    )


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
            accuracy = _mean_sd([s.learned_correct / q for s in scores])
            share = _mean_sd([s.share for s in scores])
            decided = _mean_sd([float(s.decided) for s in scores])
            above = sum(s.learned_correct >= s.deterministic_correct for s in scores)
            lines.append(
                f"| {cell} | {scores[0].questions} | {scores[0].deterministic_correct / q:.3f} | "
                f"{accuracy[0]:.3f} ± {accuracy[1]:.3f} | {share[0]:+.2f} ± {share[1]:.2f} | "
                f"{decided[0]:.0f} ± {decided[1]:.0f} | {above} / {n} |"
            )
        from clearmed.metrics import mcnemar_exact_p
        from clearmed.report.markdown import p_text

        gain, sd = repeated.gain()
        pooled, pooled_sd = repeated.pooled_share()
        pairs = [(sum(c.gained for c in part.cells), sum(c.lost for c in part.cells)) for part in repeated.partitions]
        gained = _mean_sd([float(g) for g, _ in pairs])
        lost = _mean_sd([float(lo) for _, lo in pairs])
        p = statistics.median(mcnemar_exact_p(g, lo) for g, lo in pairs)
        lines += [
            "",
            f"pooled share {pooled:+.3f} ± {pooled_sd:.3f}; against the deterministic verifier {gained[0]:.1f} gained "
            f"/ {lost[0]:.1f} lost a partition (net {gain:+.1f} ± {sd:.1f}; exact McNemar p, median over the "
            f"partitions, {p_text(p)}), at or above it on {repeated.at_or_above()} of {n} partitions",
        ]
    lines += ["", fit.withheld or "learned fit ships: over its partitions it beats the deterministic verifier"]
    return lines


def _mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from clearmed.optimize.tuning import DEFAULT_PARAMETERS, PARAMETERS

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
        help=f"comma-separated parameters to tune, from {', '.join(PARAMETERS)} (default: "
        f"{', '.join(DEFAULT_PARAMETERS)}, the likelihood fit of the pooling weights)",
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
    tune.set_defaults(func=run_tune)
