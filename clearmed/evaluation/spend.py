"""What a run spent: LM dollars per call from the backbones' prices, Tavily credits per search, retries per stage.

Every LM usage row is priced with its role's backbone (`clearmed.backbones.pricing.cost_usd`: LiteLLM's bundled price
map for hosted models, the config's `price` for self-hosted ones, 0 by default). Tavily credits are what the service
billed per search (1 at basic depth, 2 at advanced; a cache hit none), recorded on the search's usage row and priced at
`[run] tavily_usd_per_credit` (default `DEFAULT_USD_PER_CREDIT`, Tavily's pay-as-you-go price). A question's dollars are
priced when it finishes (`EvalRecord.cost_usd`); the budget of a run (`--max-cost`) and its summary count the spend log
instead (`spend_log`), which holds every paid call as it completed, grading included, so a kill loses none of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from clearmed.backbones.batch_api import no_batch_reason
from clearmed.backbones.config import BackboneConfig
from clearmed.backbones.pricing import cost_usd, price_of
from clearmed.config import ClearmedConfig, RunSettings
from clearmed.evaluation.store import EvalRecord
from clearmed.signatures.records import CallUsage, Decision

__all__ = ["DEFAULT_USD_PER_CREDIT", "Prices", "SpendSummary", "StageSpend", "record_usd", "spend_summary", "total_usd"]


# US dollars per Tavily credit by default: the pay-as-you-go price (tavily.com/pricing, $0.008 a credit).
DEFAULT_USD_PER_CREDIT: float = RunSettings.model_fields["tavily_usd_per_credit"].default


class Prices:
    """The dollar price of every usage row of a run, by the role's backbone (a role without its own: main's), and of
    each search credit at `usd_per_credit`."""

    def __init__(
        self,
        backbones: Mapping[str, BackboneConfig],
        *,
        usd_per_credit: float = 0.0,
        batched_roles: frozenset[str] = frozenset(),
    ) -> None:
        self.backbones = dict(backbones)
        self.usd_per_credit = usd_per_credit
        # Roles whose calls a batch run sends through the provider's batch API (`eval --batch`): priced at its price.
        self.batched_roles = batched_roles

    @classmethod
    def of(cls, config: ClearmedConfig, *, batched_roles: frozenset[str] = frozenset()) -> Prices:
        """A config's prices: its backbones', and Tavily's credit at `[run] tavily_usd_per_credit`."""
        return cls(config.backbones, usd_per_credit=config.run.tavily_usd_per_credit, batched_roles=batched_roles)

    def batchable(self) -> frozenset[str]:
        """The roles whose backbone's provider has a batch API (`eval --batch` would send their calls through it)."""
        return frozenset(role for role, backbone in self.backbones.items() if no_batch_reason(role, backbone) is None)

    def backbone(self, role: str) -> BackboneConfig | None:
        return self.backbones.get(role) or self.backbones.get("main")

    def unpriced(self, roles: Sequence[str] = ("main", "assessor")) -> list[str]:
        """Of the roles a run's program calls, those whose backbone has no known price (a hosted model LiteLLM's map
        lacks, and no `price` set)."""
        return [
            f"{role} ({backbone.model})"
            for role, backbone in self.backbones.items()
            if role in roles and price_of(backbone) is None
        ]

    def row_usd(self, row: CallUsage) -> float | None:
        """Dollars of one usage row: a tool row's credits at `usd_per_credit`; 0 for rows that used no tokens (cache
        hits, refusals)."""
        if row.role == "tool":
            return round(row.credits * self.usd_per_credit, 6)
        if row.prompt_tokens <= 0 and row.completion_tokens <= 0:
            return 0.0
        backbone = self.backbone(row.role)
        if backbone is None:
            return None
        return cost_usd(backbone, row.prompt_tokens, row.completion_tokens, batch=row.role in self.batched_roles)

    def decision_usd(self, decision: Decision) -> float | None:
        """A question's dollars (LM calls and searches); None when some row's price is unknown."""
        return total_usd(self.row_usd(row) for row in decision.usage)


def record_usd(record: EvalRecord, prices: Prices | None) -> float | None:
    """A record's dollars as priced when it finished; priced now when it was written before records carried them."""
    if record.cost_usd is not None or prices is None:
        return record.cost_usd
    return prices.decision_usd(record.decision)


def total_usd(amounts: Iterable[float | None]) -> float | None:
    """The sum, or None if any amount is unknown (an unknown price is never counted as free)."""
    total = 0.0
    for amount in amounts:
        if amount is None:
            return None
        total += amount
    return round(total, 6)


class StageSpend(BaseModel):
    """One stage over a run: calls that reached a model or service, cache hits, tokens, dollars, credits, retries."""

    model_config = ConfigDict(extra="forbid")

    stage: str
    calls: int
    cached: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    usd: float | None
    credits: float
    retries: int


class SpendSummary(BaseModel):
    """What the run spent (`usd` None: a price unknown), per stage: its spend log's dollars, credits and retries
    (every billed call, across kills and resumes; the records' own prices for a folder without a log), and the
    recorded questions' calls and tokens; `set_aside_usd` is the part the degraded attempts a resume redid had spent
    (their records are kept in results.degraded.jsonl)."""

    model_config = ConfigDict(extra="forbid")

    usd: float | None
    mean_usd: float | None
    search_credits: float
    retries: int
    by_stage: list[StageSpend]
    set_aside_questions: int = 0
    set_aside_usd: float | None = 0.0


def spend_summary(
    decisions: Sequence[Decision],
    record_usd: Sequence[float | None],
    *,
    prices: Prices | None = None,
    set_aside_usd: Sequence[float | None] = (),
    paid: Sequence[tuple[float | None, CallUsage]] | None = None,
) -> SpendSummary:
    """Calls, cache hits and tokens from the records' usage rows. Dollars, credits and retries, per stage and in
    total, from `paid` when the run has a spend log (`spend_log.read_spend_log`: each call's dollars and row, attempts
    cut short by a kill or set aside by a resume included), else from the records (`record_usd`, one per decision;
    per-stage dollars then need `prices`). A record of unknown price makes the total unknown either way."""
    stages: dict[str, list[CallUsage]] = {}
    for decision in decisions:
        for row in decision.usage:
            stages.setdefault(row.stage, []).append(row)
    logged: dict[str, list[tuple[float | None, CallUsage]]] = {}
    for usd, row in paid or ():
        logged.setdefault(row.stage, []).append((usd, row))

    def stage_usd(stage: str) -> float | None:
        if paid is not None:
            return total_usd(usd for usd, _ in logged.get(stage, []))
        return total_usd(prices.row_usd(row) for row in stages[stage]) if prices is not None else None

    def billed(stage: str) -> list[CallUsage]:
        return [row for _, row in logged.get(stage, [])] if paid is not None else stages[stage]

    by_stage = [
        StageSpend(
            stage=stage,
            calls=sum(row.calls for row in rows if not row.cached),
            cached=sum(1 for row in rows if row.cached),
            failed=sum(1 for row in rows if row.failed),
            prompt_tokens=sum(row.prompt_tokens for row in rows),
            completion_tokens=sum(row.completion_tokens for row in rows),
            usd=stage_usd(stage),
            credits=sum(row.credits for row in billed(stage)),
            # A log holds every retried call the records hold, and more; one written before retried calls that cost
            # nothing were logged may hold fewer, and then the records' count stands.
            retries=max(sum(row.retries for row in billed(stage)), sum(row.retries for row in rows)),
        )
        for stage, rows in [*stages.items(), *((stage, []) for stage in logged if stage not in stages)]
    ]
    usd = total_usd(record_usd)
    if usd is not None and paid is not None:
        usd = total_usd(amount for amount, _ in paid)
    return SpendSummary(
        usd=usd,
        mean_usd=round(usd / len(decisions), 6) if usd is not None and decisions else None,
        search_credits=sum(stage.credits for stage in by_stage),
        retries=sum(stage.retries for stage in by_stage),
        by_stage=by_stage,
        set_aside_questions=len(set_aside_usd),
        set_aside_usd=total_usd(set_aside_usd),
    )
