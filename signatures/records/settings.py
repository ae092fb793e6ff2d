"""How the program runs: evidence counts, prompt budgets, modes and ablation switches.

Thresholds that decide routes live in `signatures.records.Thresholds`; everything here changes how much
evidence and text the LM steps see, which of them run, and how. Defaults suit a strong hosted backbone
(the paper's k=16 and 8 results); `configs/embedded.toml` shrinks them for the small in-process model.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from clearmed.signatures.records import Record

Stage = Literal[
    "parametric",
    "local_retrieval",
    "local_answer",
    "dynamic_search",
    "source_quality",
    "dynamic_answer",
    "local_judge",
    "dynamic_judge",
    "qpis_plan",
    "qpis_check",
    "agreement",
    "verifier",
    "followup_query",
    "followup_search",
    "followup_quality",
    "guard",
    "audit",
    "format_gate",
    "response",
    "web_query",
    "local_binding",
    "dynamic_binding",
]

# Stages the paper's dual-model variant hands to a second model: everything that judges evidence quality.
ASSESSOR_STAGES: frozenset[str] = frozenset({"source_quality", "followup_quality", "guard", "audit"})


class ProgramSettings(Record):
    local_k: int = Field(default=16, ge=0, description="local passages per question (paper: 16)")
    dynamic_k: int = Field(default=8, ge=0, description="web results per search (paper: 8)")
    passage_words: int | None = Field(default=None, ge=10, description="truncate each passage to N words")
    max_question_words: int | None = Field(
        default=4000,
        ge=50,
        description="refuse longer questions (text, context, options, conversation) before any model call",
    )
    quality_snippet_words: int | None = Field(
        default=None,
        ge=5,
        description="words of each result shown to the quality assessment (source, date and type matter most)",
    )
    verifier_passages: int | None = Field(
        default=None, ge=0, description="passages per pathway shown to the verifier and assessors (cited first)"
    )
    verifier_mode: Literal["lm", "heuristic", "calibrated", "learned"] = Field(
        default="lm",
        description="lm: the LM verifier; heuristic: the deterministic fallback order; calibrated: the route from "
        "the pathways' pooled option probabilities (needs mcq_decoding = 'score'; weights in [thresholds]); learned: a "
        "model fitted on recorded runs picks between competing answers, no LM call (tune --params learned_fit)",
    )
    mcq_decoding: Literal["generate", "score"] = Field(
        default="generate",
        description="score: read each MCQ pathway's option probabilities from the next-token distribution of its "
        "own prompt in one forward pass (backbones with log-probabilities; others generate)",
    )
    evidence_binding: bool = Field(
        default=False,
        description="on a disputed single-answer MCQ (the pathways' letters differ), score each evidence pathway's "
        "prompt once more with the question removed (passages and options only, p(o | P)) and record it: the "
        "calibrated verifier's binding term (thresholds calibrated_*_binding) and the learned verifier's binding "
        "features; needs mcq_decoding = 'score' and a backbone with log-probabilities",
    )
    source_quality: Literal["lm", "priors", "clear-code"] = Field(
        default="lm",
        description="who labels web results high/medium/low: the LM assessment, the domain/content priors alone, or "
        "the CLEAR code's domain table alone (retrieval/clear_code_quality.py)",
    )
    answer_source: Literal["route", "verifier"] = Field(
        default="route",
        description="the LM verifier's answer: route (the paper's: the answer of the pathway its route names) or "
        "verifier (the CLEAR code's: its own letter, whatever its route)",
    )
    web_query: Literal["question", "lm", "salient"] = Field(
        default="question",
        description="the dynamic search query: the question itself (shortened by key terms only when the backend's "
        "max_query_chars requires it), one written by the LM query step, or key terms always",
    )
    agreement_mode: Literal["normaliser", "lm"] = Field(
        default="normaliser",
        description="how free-text candidates are compared (MCQ always by letter set): the concept normaliser, or "
        "one LM judgement of all three pairs (the normaliser decides if it fails)",
    )
    format_gate_lm: bool = Field(default=True, description="ask the LM to map unparseable answers onto options")
    parallel_pathways: Literal["auto", "on", "off"] = "auto"
    json_fallback: bool = Field(default=True, description="retry a failed ChatAdapter parse with JSONAdapter")
    max_tokens: dict[Stage, int] = Field(default_factory=dict, description="per-stage output token caps")
    local_answerer: Literal["direct", "judge"] = Field(
        default="direct", description="the local pathway's answer step: a direct answer or the option-wise judge"
    )
    dynamic_answerer: Literal["direct", "judge"] = Field(
        default="direct", description="the dynamic pathway's answer step: a direct answer or the option-wise judge"
    )
    judge_mode: Literal["implicit", "explicit"] = Field(
        default="implicit", description="explicit: extract a question-specific knowledge graph before the verdicts"
    )
    dynamic_search_mode: Literal["single", "qpis"] = Field(
        default="single", description="qpis: plan sub-queries and search iteratively within a budget (CLEAR QPIS)"
    )
    qpis_max_subqueries: int = Field(default=3, ge=1, description="sub-queries the planner may issue")
    qpis_max_rounds: int = Field(default=2, ge=1, description="search rounds, the planned queries being the first")
    qpis_max_passages: int | None = Field(
        default=None, ge=1, description="web results kept over all rounds (default: twice dynamic_k)"
    )
    enable_guard: bool = True
    enable_audit: bool = True
    enable_followup: bool = True


# The CLEAR programs by name: the paper's ablations and the judge/QPIS variants, as changes to the settings.
CLEAR_VARIANTS: dict[str, dict[str, object]] = {
    "clear": {},
    "clear-no-followup": {"enable_followup": False},
    "clear-no-guard": {"enable_guard": False},
    "clear-no-audit": {"enable_audit": False},
    # The CLEAR code's heuristic mode: no LM call of any kind after the pathways (no guard, audit or follow-up).
    "clear-heuristic": {
        "verifier_mode": "heuristic",
        "enable_guard": False,
        "enable_audit": False,
        "enable_followup": False,
        "agreement_mode": "normaliser",
    },
    # The deterministic verifier with the LM guard, audit and follow-up (clear-heuristic before issue 46).
    "clear-heuristic-contested": {"verifier_mode": "heuristic"},
    "clear-judge": {"local_answerer": "judge", "dynamic_answerer": "judge"},
    "clear-judge-explicit": {"local_answerer": "judge", "dynamic_answerer": "judge", "judge_mode": "explicit"},
    "clear-qpis": {"dynamic_search_mode": "qpis"},
    "clear-judge-qpis": {"local_answerer": "judge", "dynamic_answerer": "judge", "dynamic_search_mode": "qpis"},
}


def clear_variant_settings(name: str, settings: ProgramSettings) -> ProgramSettings | None:
    """The settings a CLEAR variant runs with, given the config's (None: `name` is not a CLEAR variant)."""
    if name not in CLEAR_VARIANTS:
        return None
    return settings.model_copy(update=CLEAR_VARIANTS[name])
