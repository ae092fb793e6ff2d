"""Speed of threshold tuning by replay: 200 Optuna trials over a stored 300-question run (target: under 60 s).

    python scripts/bench_tune.py                       # 300 questions, 200 trials, SQLite storage
    python scripts/bench_tune.py --questions 1000 --trials 500 --storage memory

The stored run is a real run folder of CLEAR decisions made on a scripted LM (clearmed.testing.synthetic_run),
varied per question so the rules branch differently. Only the study is timed: every trial replays all train
decisions with zero LM calls and writes the trial to the Optuna storage, as `clearmed tune` does.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy

from clearmed.optimize.rescore import Rescorer, load_items
from clearmed.optimize.splits import split_ids
from clearmed.optimize.tuning import TuneSettings, parse_params, tune
from clearmed.testing.synthetic_run import write_synthetic_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--storage", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--target", type=float, default=60.0, help="seconds the trials must finish in")
    args = parser.parse_args(argv)
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)

    with tempfile.TemporaryDirectory(prefix="clearmed-bench-tune-") as folder:
        work = Path(folder)
        started = time.perf_counter()
        write_synthetic_run(work / "run", args.questions, seed=0)
        built = time.perf_counter() - started

        started = time.perf_counter()
        items, loaded = load_items([work / "run"])
        ids = split_ids([item.question_id for item in items])
        loaded_seconds = time.perf_counter() - started

        storage = f"sqlite:///{work / 'optuna.db'}" if args.storage == "sqlite" else None
        rescorer = Rescorer(items)
        started = time.perf_counter()
        summary = tune(
            rescorer,
            ids,
            TuneSettings(params=parse_params(None), seed=0),
            n_trials=args.trials,
            study_name="bench",
            storage=storage,
        )
        tuned = time.perf_counter() - started

    print(
        f"stored run: {loaded.records} decisions, built in {built:.1f} s (scripted LM), loaded in {loaded_seconds:.2f} s"
    )
    print(
        f"{summary.trials_in_study} trials over {len(ids.train)} decisions ({args.storage} storage): "
        f"{summary.seconds:.1f} s for the trials, {tuned:.1f} s with the summary "
        f"({1000 * summary.seconds / max(1, summary.trials_in_study):.0f} ms per trial)"
    )
    print(
        f"accuracy {summary.paper_defaults_train.accuracy:.3f} with the paper's defaults -> "
        f"{summary.best_train.accuracy:.3f} tuned (train ids); replay misses at best: {summary.best_train.misses}"
    )
    within = tuned < args.target
    print(f"target: under {args.target:.0f} s -> {'met' if within else 'MISSED'}")
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
