"""The dynamic pathway's accuracy and time with each web query: the question itself, its key terms, or one the
model writes (`[program] web_query`), on shared MedQA questions with the offline web backend (issue 13).

    python docs/experiments/compare_web_queries.py [--limit 100] [--seed 0] [--config embedded-shared]
        [--modes question,salient,lm] [--max-query-chars 400] [--json OUT.json]

Each mode runs the `online` program (the dynamic pathway alone) over the same questions with the same model,
loaded once. Printed per mode: accuracy with its 95% Wilson interval, total and per-question seconds, how many
queries were the question / key terms / written, how many written queries had to be cut, and how often the query
writer fell back to key terms; then each mode against the first, paired (gained, lost, exact McNemar p).

`--max-query-chars 400` gives the offline index Tavily's limit, so "question" measures what a Tavily user gets.
The LM cache is off (a cached answer would be timed at zero) and so is the search cache (nothing shared is
written). It loads the configured model: run it when nothing else is measuring on the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import get_args

import dspy

from clearmed.api.assemble import build_program, build_role_lms
from clearmed.config import ClearmedConfig, load_config
from clearmed.metrics import mcnemar_exact_p, score_decision, wilson_interval
from clearmed.signatures.records import Question
from clearmed.signatures.records.settings import ProgramSettings

MODES: tuple[str, ...] = get_args(ProgramSettings.model_fields["web_query"].annotation)


@dataclass
class ModeResult:
    """One web-query mode over the questions: what it got right, what it cost, how its queries were made."""

    mode: str
    correct: list[bool] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    sources: Counter[str] = field(default_factory=Counter)
    cut: int = 0
    writer_fell_back: int = 0
    search_errors: int = 0

    @property
    def n(self) -> int:
        return len(self.correct)

    @property
    def accuracy(self) -> float:
        return sum(self.correct) / self.n if self.n else 0.0

    def line(self) -> str:
        ci = wilson_interval(sum(self.correct), self.n) if self.n else None
        interval = f"[{ci.low:.3f}, {ci.high:.3f}]" if ci else "-"
        total = sum(self.seconds)
        made = ", ".join(f"{source} {count}" for source, count in sorted(self.sources.items()))
        return (
            f"{self.mode:<9} n={self.n:<4} accuracy {self.accuracy:.3f} {interval}  "
            f"{total:8.1f} s ({total / max(self.n, 1):.2f} s/question)  queries: {made}; cut {self.cut}; "
            f"writer fell back {self.writer_fell_back}; search errors {self.search_errors}"
        )


def config_for(config: ClearmedConfig, mode: str, max_query_chars: int | None) -> ClearmedConfig:
    """The config with this web-query mode, no search cache, and (optionally) a query limit on the backend."""
    if config.search is None:
        raise SystemExit(f"{config.source}: no [search] backend: the dynamic pathway has nothing to query")
    search = config.search.model_copy(update={"cache_mode": "off", "max_query_chars": max_query_chars})
    program = config.program.model_copy(update={"web_query": mode})
    return config.model_copy(update={"search": search, "program": program})


def run_mode(
    questions: Sequence[Question],
    config: ClearmedConfig,
    mode: str,
    role_lms: dict[str, dspy.BaseLM],
    *,
    max_query_chars: int | None = None,
    progress: bool = False,
) -> ModeResult:
    program = build_program("online", config_for(config, mode, max_query_chars), role_lms=role_lms)
    result = ModeResult(mode)
    for index, question in enumerate(questions, start=1):
        started = time.perf_counter()
        decision = program(question=question).decision
        result.seconds.append(time.perf_counter() - started)
        result.correct.append(score_decision(question, decision).correct)
        candidate = decision.bundle.candidate("dynamic")
        result.sources[candidate.query_source] += 1
        result.cut += candidate.query_cut_chars is not None
        result.writer_fell_back += mode == "lm" and candidate.query_source != "lm"
        result.search_errors += candidate.error is not None and candidate.error.stage == "dynamic_search"
        if progress:
            print(f"\r{mode}: {index}/{len(questions)}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return result


def compare(
    questions: Sequence[Question],
    config: ClearmedConfig,
    modes: Sequence[str],
    role_lms: dict[str, dspy.BaseLM],
    *,
    max_query_chars: int | None = None,
    progress: bool = False,
) -> list[ModeResult]:
    return [
        run_mode(questions, config, mode, role_lms, max_query_chars=max_query_chars, progress=progress)
        for mode in modes
    ]


def report(results: Sequence[ModeResult]) -> str:
    lines = [result.line() for result in results]
    base = results[0]
    for other in results[1:]:
        gained = sum(1 for a, b in zip(base.correct, other.correct, strict=True) if b and not a)
        lost = sum(1 for a, b in zip(base.correct, other.correct, strict=True) if a and not b)
        lines.append(
            f"{other.mode} vs {base.mode}: gained {gained}, lost {lost}, exact McNemar p = "
            f"{mcnemar_exact_p(gained, lost):.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=100, help="questions (a seeded sample of shared MedQA)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default="embedded-shared", help="packaged config name or TOML path")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {', '.join(MODES)}")
    parser.add_argument("--max-query-chars", type=int, default=None, help="a query limit for the backend")
    parser.add_argument("--json", type=Path, default=None, help="also write the per-mode results here")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        parser.error(f"--modes: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(MODES)}")

    from clearmed.api.questions import shared_source
    from clearmed.benchmarks import load_benchmark

    questions = load_benchmark("medqa", source=shared_source("medqa"), limit=args.limit, seed=args.seed).questions
    config = load_config(args.config)
    # A cached LM answer would be timed at zero and shared between modes whose prompts coincide.
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    role_lms = build_role_lms(config)
    print(f"{len(questions)} shared MedQA questions (seed {args.seed}), config {args.config}, online program")
    results = compare(
        questions, config, modes, role_lms, max_query_chars=args.max_query_chars, progress=sys.stderr.isatty()
    )
    print(report(results))
    if args.json is not None:
        rows = [{**asdict(r), "sources": dict(r.sources), "accuracy": r.accuracy} for r in results]
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
