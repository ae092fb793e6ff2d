"""`clearmed eval --estimate`: what a run will take before it is paid for: calls, tokens, dollars, credits, wall time.

The per-question means come from stored runs of the same program and config (`stored_runs`: same answer settings, so
a run at another timeout or thread count counts; the same benchmark when there is one) or from a short pilot, the first
questions of the run itself (`clearmed eval --estimate --pilot N`, kept in the run folder, so nothing is spent twice).

A cache hit in the basis cost nothing and took no time; a cold run pays for it. Its tokens are imputed from the same
stage's calls that reached the model, and seconds come from the questions with no cache hit when there are any. Wall
time is the per-question seconds times the questions, divided by the threads: a server that slows under load (or an
account's rate limit) makes it longer.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from clearmed.config import ClearmedConfig
from clearmed.evaluation.folder import same_run_config
from clearmed.evaluation.spend import Prices, total_usd
from clearmed.evaluation.store import EvalRecord, RunManifest, RunStoreError, load_manifest, read_records
from clearmed.signatures.records import CallUsage

__all__ = ["Estimate", "estimate", "stored_runs"]


class Estimate(BaseModel):
    """Means per question over the basis, and the totals they give for the questions left to run."""

    model_config = ConfigDict(extra="forbid")

    questions: int
    threads: int
    basis_questions: int
    basis_runs: list[str]
    same_benchmark: bool
    lm_calls: float
    prompt_tokens: float
    completion_tokens: float
    usd: float | None
    # Per question through the providers' batch APIs (`eval --batch`); None: no backbone has one, or a price is unknown.
    batch_usd: float | None = None
    search_credits: float
    search_usd: float = 0.0  # per question: the credits at `[run] tavily_usd_per_credit`
    seconds: float
    cache_hit_share: float

    @property
    def wall_seconds(self) -> float:
        return self.seconds * self.questions / max(1, self.threads)

    def render(self, benchmark: str) -> str:
        n = self.questions
        dollars = "unknown (a backbone has no price)" if self.usd is None else f"${self.usd * n:,.2f}"
        per_q = "" if self.usd is None else f" (${self.usd:.4f}/question)"
        if self.usd is not None and self.batch_usd is not None:
            per_q += f"; with --batch ${self.batch_usd * n:,.2f} (${self.batch_usd:.4f}/question)"
        search = f" = ${self.search_usd * n:,.2f}" if self.search_usd else ""
        total = (
            f"  total dollars   ${(self.usd + self.search_usd) * n:,.2f} (LM and Tavily; grading comes on top)"
            if self.usd is not None
            else ""
        )
        where = "" if self.same_benchmark else f" (no stored run on {benchmark}: from other benchmarks)"
        lines = [
            f"estimate for {n} question{'s' if n != 1 else ''} of {benchmark} at {self.threads} "
            f"thread{'s' if self.threads != 1 else ''}, from {self.basis_questions} questions of "
            f"{', '.join(self.basis_runs)}{where}:",
            f"  LM calls        {self.lm_calls * n:,.0f} ({self.lm_calls:.1f}/question)",
            f"  prompt tokens   {self.prompt_tokens * n:,.0f} ({self.prompt_tokens:,.0f}/question)",
            f"  output tokens   {self.completion_tokens * n:,.0f} ({self.completion_tokens:,.0f}/question)",
            f"  LM dollars      {dollars}{per_q}",
            f"  Tavily credits  {self.search_credits * n:,.0f} ({self.search_credits:.1f}/question){search}",
            *([total] if total and self.search_usd else []),
            f"  wall time       {_duration(self.wall_seconds)} ({self.seconds:.1f} s/question)",
        ]
        if self.cache_hit_share >= 0.05:
            lines.append(
                f"  {100 * self.cache_hit_share:.0f}% of the basis's LM calls were cache hits: their tokens are "
                "imputed from the same stage's other calls"
            )
        return "\n".join(lines) + "\n"


def _duration(seconds: float) -> str:
    hours, rest = divmod(round(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def stored_runs(
    runs_dir: Path,
    config: ClearmedConfig,
    *,
    program: str,
    artifact: str | None,
    recorded_pathways: Mapping[str, str] | None = None,
    extra: Sequence[Path] = (),
) -> list[tuple[Path, RunManifest]]:
    """Run folders under `runs_dir` (and `extra`) of this program, artifact, recorded pathways and config's answer
    settings."""
    recorded_pathways = recorded_pathways or {}
    found: dict[Path, RunManifest] = {}
    candidates = [*runs_dir.rglob("manifest.json")] if runs_dir.is_dir() else []
    candidates += [folder / "manifest.json" for folder in extra if (folder / "manifest.json").is_file()]
    for path in candidates:
        folder = path.parent.resolve()
        try:
            manifest = load_manifest(path)
        except RunStoreError:  # a damaged folder, or a run of another schema: no basis for an estimate
            continue
        if manifest.program != program or manifest.artifact != artifact:
            continue
        if manifest.recorded_pathways != dict(recorded_pathways):  # recorded answers cost nothing; live ones do
            continue
        if same_run_config(manifest, folder, config):
            found[folder] = manifest
    return sorted(found.items())


def _stage_means(records: Sequence[EvalRecord]) -> dict[str, tuple[float, float]]:
    """Per stage, the mean prompt and completion tokens of the LM calls that reached the model."""
    by_stage: dict[str, list[CallUsage]] = {}
    for record in records:
        for row in record.decision.usage:
            if row.role != "tool" and not row.cached and not row.failed:
                by_stage.setdefault(row.stage, []).append(row)
    return {
        stage: (
            statistics.fmean(row.prompt_tokens / max(1, row.calls) for row in rows),
            statistics.fmean(row.completion_tokens / max(1, row.calls) for row in rows),
        )
        for stage, rows in by_stage.items()
    }


def _as_cold(record: EvalRecord, means: Mapping[str, tuple[float, float]]) -> list[CallUsage]:
    """A record's LM calls as a cold run pays for them: a cache hit is one call at its stage's mean tokens."""
    rows = []
    for row in record.decision.usage:
        if row.role == "tool":
            continue
        if row.cached:
            mean_prompt, mean_completion = means.get(row.stage, (0.0, 0.0))
            row = row.model_copy(
                update={"calls": 1, "prompt_tokens": round(mean_prompt), "completion_tokens": round(mean_completion)}
            )
        rows.append(row)
    return rows


def _credits(record: EvalRecord, credits_per_search: float | None) -> float:
    """A record's Tavily credits: its successful searches at `credits_per_search`, else what they were billed."""
    if credits_per_search is not None:
        searches = [row for row in record.decision.usage if row.role == "tool" and row.model == "tavily"]
        return credits_per_search * sum(1 for row in searches if not row.failed)
    return sum(row.credits for row in record.decision.usage)


def estimate(
    records: Sequence[EvalRecord],
    prices: Prices,
    *,
    questions: int,
    threads: int,
    basis_runs: Sequence[str],
    same_benchmark: bool = True,
    credits_per_search: float | None = None,
) -> Estimate:
    """Per-question means over `records` (their cache hits priced as cold calls) for `questions` more questions.

    With `credits_per_search` (a Tavily config), credits are the basis's Tavily searches at that price, cache hits
    included; else what the searches were billed."""
    if not records:
        raise ValueError("an estimate needs at least one recorded question")
    means = _stage_means(records)
    as_cold = [_as_cold(record, means) for record in records]
    credits = [_credits(record, credits_per_search) for record in records]
    lm_rows = [row for record in records for row in record.decision.usage if row.role != "tool"]
    hits, total = sum(1 for row in lm_rows if row.cached), len(lm_rows)
    cold = [r for r in records if not any(row.cached for row in r.decision.usage if row.role != "tool")]
    usd = total_usd(total_usd(prices.row_usd(row) for row in rows) for rows in as_cold)
    batched = prices.batchable()
    batch = Prices(prices.backbones, usd_per_credit=prices.usd_per_credit, batched_roles=batched)
    batch_usd = total_usd(total_usd(batch.row_usd(row) for row in rows) for rows in as_cold) if batched else None
    return Estimate(
        questions=questions,
        threads=threads,
        basis_questions=len(records),
        basis_runs=list(basis_runs),
        same_benchmark=same_benchmark,
        lm_calls=statistics.fmean(sum(row.calls for row in rows) for rows in as_cold),
        prompt_tokens=statistics.fmean(sum(row.prompt_tokens for row in rows) for rows in as_cold),
        completion_tokens=statistics.fmean(sum(row.completion_tokens for row in rows) for rows in as_cold),
        usd=usd / len(records) if usd is not None else None,
        batch_usd=batch_usd / len(records) if batch_usd is not None else None,
        search_credits=statistics.fmean(credits),
        search_usd=round(statistics.fmean(credits) * prices.usd_per_credit, 6),
        seconds=statistics.fmean(r.seconds for r in (cold or records)),
        cache_hit_share=hits / total if total else 0.0,
    )


def basis_records(folders: Sequence[Path]) -> list[EvalRecord]:
    """The clean records of these run folders (a degraded question's cost is not a clean question's)."""
    return [record for folder in folders for record in read_records(folder) if not record.degraded]
