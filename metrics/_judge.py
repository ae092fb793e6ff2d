"""Statistics of the option-wise judge over a run (MedJudgeRAG-style analysis).

Per pathway: how often each option position was judged supported / contradicted / insufficient (position bias
shows here), the decision mix, how often the gold option was judged supported or contradicted, the rate of
valid citations among verdicts that needed one, salvaged parses, and the graph size in explicit mode.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from clearmed.signatures.records import PATHWAYS, Decision, PathwayName


class PathwayJudgeStats(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pathway: PathwayName
    judged: int
    verdicts_by_position: dict[str, dict[str, int]] = Field(default_factory=dict)
    decisions: dict[str, int] = Field(default_factory=dict)
    stated_decision_agrees: float | None = None
    gold_supported: float | None = None
    gold_contradicted: float | None = None
    citation_validity: float | None = None
    invalid_citations: int = 0
    # Options the model gave no verdict for (counted insufficient): weak models judge only their favourite.
    unjudged_options: float | None = None
    salvaged: int = 0
    no_answer: int = 0
    # Single-answer judgements with more than one option supported: a weak model reads "mentions" as "supports",
    # and the rules then refuse to pick among them (no answer).
    several_supported: int = 0
    mean_graph_entities: float | None = None
    mean_graph_relations: float | None = None


def _rate(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def judge_stats(decisions: Sequence[Decision]) -> list[PathwayJudgeStats]:
    """One entry per pathway that has judgements in `decisions` (none when the judge was off)."""
    out: list[PathwayJudgeStats] = []
    for pathway in PATHWAYS:
        judged = [(d, c.judgment) for d in decisions for c in [d.bundle.candidate(pathway)] if c.judgment is not None]
        if not judged:
            continue
        positions: dict[str, Counter[str]] = {}
        stated_agree = gold_total = gold_supported = gold_contradicted = 0
        claims = valid_claims = 0
        entities: list[int] = []
        relations: list[int] = []
        for decision, judgment in judged:
            for verdict in judgment.verdicts:
                positions.setdefault(verdict.letter, Counter())[verdict.verdict] += 1
                if verdict.stated.casefold().startswith(("supported", "contradicted")):
                    claims += 1
                    valid_claims += verdict.valid
            stated_agree += (judgment.stated_decision or "").strip().casefold().startswith(judgment.decision)
            gold = decision.bundle.question.gold_letters or []
            if gold:
                gold_total += 1
                labels = {v.verdict for letter in gold if (v := judgment.verdict_for(letter)) is not None}
                gold_supported += "supported" in labels
                gold_contradicted += "contradicted" in labels
            if judgment.graph is not None:
                entities.append(len(judgment.graph.entities))
                relations.append(len(judgment.graph.relations))
        n = len(judged)
        out.append(
            PathwayJudgeStats(
                pathway=pathway,
                judged=n,
                verdicts_by_position={letter: dict(counts) for letter, counts in sorted(positions.items())},
                decisions=dict(Counter(j.decision for _, j in judged)),
                stated_decision_agrees=_rate(stated_agree, n),
                gold_supported=_rate(gold_supported, gold_total),
                gold_contradicted=_rate(gold_contradicted, gold_total),
                citation_validity=_rate(valid_claims, claims),
                invalid_citations=sum(j.invalid_citations for _, j in judged),
                unjudged_options=_rate(
                    sum(len(j.missing_verdicts) for _, j in judged), sum(len(j.verdicts) for _, j in judged)
                ),
                salvaged=sum(j.salvaged for _, j in judged),
                no_answer=sum(j.answer is None for _, j in judged),
                several_supported=sum(
                    d.bundle.question.answer_mode == "single" and len(j.letters_with("supported")) > 1
                    for d, j in judged
                ),
                mean_graph_entities=round(sum(entities) / len(entities), 2) if entities else None,
                mean_graph_relations=round(sum(relations) / len(relations), 2) if relations else None,
            )
        )
    return out


def judge_table(stats: Sequence[PathwayJudgeStats]) -> str:
    """Markdown: one row per judged pathway."""
    if not stats:
        return ""

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}"

    rows = [
        "| pathway | judged | decisions | gold supported % | gold contradicted % | valid citations % | unjudged options % "
        "| salvaged | several supported | no answer | verdicts by option (S/C/I) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in stats:
        decisions = ", ".join(f"{k} {v}" for k, v in sorted(s.decisions.items()))
        positions = " ".join(
            f"{letter}:{c.get('supported', 0)}/{c.get('contradicted', 0)}/{c.get('insufficient', 0)}"
            for letter, c in s.verdicts_by_position.items()
        )
        rows.append(
            f"| {s.pathway} | {s.judged} | {decisions} | {pct(s.gold_supported)} | {pct(s.gold_contradicted)} | "
            f"{pct(s.citation_validity)} | {pct(s.unjudged_options)} | {s.salvaged} | {s.several_supported} "
            f"| {s.no_answer} | {positions} |"
        )
    return "\n".join(rows)
