"""Speed of the full CLEAR program on the demo questions: wall time per question and per stage, peak memory.

    python scripts/bench_clear.py --config embedded --questions 6
    python scripts/bench_clear.py --config embedded --questions 6 --set backbones.main.prompt_cache_mb=0

Each question is answered cold (DSPy's LM cache off), so numbers are what a user waits for a new question.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
import tomllib
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy

from clearmed.api.assemble import build_program
from clearmed.config import parse_config, resolve_config_path
from clearmed.demo import demo_questions


def load_with_overrides(name: str, overrides: list[str]):
    path = resolve_config_path(name)
    tables = tomllib.loads(path.read_text(encoding="utf-8"))
    for item in overrides:
        dotted, _, raw = item.partition("=")
        *parents, leaf = dotted.split(".")
        table = tables
        for part in parents:
            table = table.setdefault(part, {})
        table[leaf] = tomllib.loads(f"v = {raw}")["v"]
    return parse_config(tables, source=str(path), base=path.parent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="embedded")
    parser.add_argument("--program", default="clear")
    parser.add_argument("--questions", type=int, default=6, help="first N demo questions")
    parser.add_argument("--set", action="append", default=[], help="override a config value: table.key=TOML")
    parser.add_argument("--json", help="write per-question results here")
    args = parser.parse_args()

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    config = load_with_overrides(args.config, args.set)
    started = time.perf_counter()
    program = build_program(args.program, config)
    build_seconds = time.perf_counter() - started

    rows = []
    stage_seconds: dict[str, list[float]] = defaultdict(list)
    for question in demo_questions()[: args.questions]:
        started = time.perf_counter()
        decision = program(question=question).decision
        seconds = time.perf_counter() - started
        per_stage: dict[str, float] = defaultdict(float)
        for row in decision.usage:
            per_stage[row.stage] += row.seconds
        for stage, value in per_stage.items():
            stage_seconds[stage].append(value)
        gold = ",".join(question.gold_letters or []) or (question.gold_text or "")
        rows.append(
            {
                "id": question.id,
                "seconds": round(seconds, 1),
                "lm_calls": decision.lm_calls(),
                "prompt_tokens": sum(r.prompt_tokens for r in decision.usage),
                "completion_tokens": sum(r.completion_tokens for r in decision.usage),
                "route": decision.route,
                "rule": decision.deciding_rule,
                "answer": decision.answer.display() if decision.answer else None,
                "gold": gold,
                "status": decision.status,
                "stages": {k: round(v, 1) for k, v in per_stage.items()},
                "errors": [
                    f"{s.error.stage}: {s.error.kind}: {s.error.message[:80]}" for s in decision.steps if s.error
                ],
            }
        )
        print(json.dumps(rows[-1]), flush=True)

    times = [row["seconds"] for row in rows]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nconfig {config.source}  program {args.program}  overrides {args.set or '-'}")
    print(f"build (load model, index corpora): {build_seconds:.1f} s;  peak RSS {peak_mb:.0f} MB")
    print(
        f"per question: median {statistics.median(times):.1f} s, mean {statistics.fmean(times):.1f} s, "
        f"min {min(times):.1f} s, max {max(times):.1f} s over {len(times)} questions"
    )
    print("per stage (mean seconds over questions where it ran, runs):")
    for stage, values in sorted(stage_seconds.items(), key=lambda item: -statistics.fmean(item[1])):
        print(f"  {stage:18s} {statistics.fmean(values):6.1f}  ({len(values)})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
