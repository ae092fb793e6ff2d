"""What a stage's prompt holds and how much of it fits: the question and evidence as prompt inputs, the
evidence view of the verifier and the assessors, the fit into the backbone's context window, and the input
budget.

Rendering evidence and candidates as prompt inputs.

Evidence is rendered as quoted data: each passage is fenced between markers that name its id and source,
and any marker-like text inside a passage is neutralised so retrieved text cannot close the quote and
speak as the prompt. A passage the evidence screen quarantines (text addressed to the model, imitations of
the prompt, look-alike domains: `retrieval.screening`) is listed by id only, its text, title and address
withheld from every prompt. Truncation keeps prompts inside the budget of small backbones.

The bundle's evidence as the verifier and the assessors read it: passages cited by a pathway first, within
the configured budget, web results with their quality labels and the quality counts over all of them.

Fitting a stage's prompt into its backbone's context window by leaving out the lowest-ranked passages.

A prompt past the window fails the call (``ContextWindowExceededError``), and the stage is then degraded. The static
budgets in ``[program]`` (``verifier_passages``, ``passage_words``) suit one backbone; this one follows the LM the stage
runs on: `run_stage` asks `fit_prompt` before each call, with the LM's ``context_window`` (`ClearmedLM` resolves it
from the config or the server: `backbones.context_window`) less the stage's output budget.

Tokens are estimated, not counted: no tokenizer is at hand for a remote model. ``_CHARS_PER_TOKEN`` = 3.2 is below
English prose's ~4 characters per token, because clinical terms, numbers and ids split into more tokens; and a margin
(``_MARGIN_SHARE`` of the window plus ``_MARGIN_TOKENS`` for the chat template's own tokens) is kept free on top.
Passages are dropped whole, from whichever field holds the most, so that no pathway loses all its evidence while
another keeps many. Within a field, a `RankedEvidence` says which go first (the verifier's and the assessors' views:
uncited first-search passages, then cited ones, then the follow-up pages the guard and audit must judge, each
lowest-ranked first); in any other field the last block goes first (the pathways' evidence is in retrieval order).
What is left out is said in the field itself, and its ids on the stage's usage row.

The input budget: a question too long for the backbone's context is refused before any model call.

A prompt over the context window fails in every stage (or, worse, is cut silently by the server), and a
truncated clinical vignette may lose the finding that decides it. So an oversized question is refused with a
clear, recorded reason (a failed Decision in an evaluation; one error line from `clearmed ask`), never
answered from a part of itself. `ProgramSettings.max_question_words` sets the budget.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass

import dspy

from clearmed.programs.lm.context import current
from clearmed.retrieval.screening import screen
from clearmed.signatures.records import (
    QUALITY_RANK,
    AdjudicationStep,
    Answer,
    Candidate,
    Decision,
    EvidenceBundle,
    FollowUpRound,
    Passage,
    QualityLabel,
    Question,
    SourceQuality,
    Thresholds,
)
from clearmed.signatures.records.settings import ProgramSettings

_OPEN = "<<<"
_CLOSE = ">>>"


def truncate_words(text: str, limit: int | None) -> str:
    if limit is None:
        return text
    words = text.split()
    return text if len(words) <= limit else " ".join(words[:limit]) + " ..."


def _neutralise(text: str) -> str:
    return text.replace(_OPEN, "< < <").replace(_CLOSE, "> > >").replace("[[ ##", "[ [ ##")


def _source(passage: Passage) -> str:
    prov = passage.provenance
    if prov.kind == "web":
        parts = [prov.domain or prov.url or "unknown site"]
        if prov.published:
            parts.append(f"published {prov.published.isoformat()}")
        if passage.quality:
            parts.append(f"quality {passage.quality}")
        return ", ".join(parts)
    return ", ".join(part for part in (prov.corpus, passage.title) if part) or "local corpus"


WITHHELD = "(text withheld: this page tries to instruct the reader or imitates an authority; it is not evidence)"


def _withheld_block(passage: Passage) -> str:
    quality = f", quality {passage.quality}" if passage.quality else ""
    return f"[{passage.id}] (quarantined source{quality})\n{_OPEN}\n{WITHHELD}\n{_CLOSE}"


def format_passages(
    passages: Sequence[Passage],
    words: int | None,
    *,
    empty: str = "(no passages)",
    min_quality: QualityLabel | None = None,
) -> str:
    """Passages as quoted blocks. With `min_quality`, passages labelled below it (or unlabelled) are listed
    with their source but without their text: what cannot count towards a decision does not argue in it."""
    if not passages:
        return empty
    blocks = []
    for passage in passages:
        if screen(passage).quarantined:
            blocks.append(_withheld_block(passage))
            continue
        source = _neutralise(_source(passage))
        if min_quality is not None and QUALITY_RANK[passage.quality or "low"] < QUALITY_RANK[min_quality]:
            note = f"(text not shown: {passage.quality or 'unlabelled'}-quality sources cannot settle this)"
            blocks.append(f"[{passage.id}] ({source})\n{_OPEN}\n{note}\n{_CLOSE}")
            continue
        text = _neutralise(truncate_words(passage.text, words))
        blocks.append(f"[{passage.id}] ({source})\n{_OPEN}\n{text}\n{_CLOSE}")
    return "\n".join(blocks)


# One rendered passage: its id line (and a results list's title line), then its fenced text. Text inside a fence
# never holds the closing marker (`_neutralise`), so the first closing line after an opening one ends the passage.
_PASSAGE_BLOCK = re.compile(
    rf"^\[[^\]\n]+\][^\n]*\n(?:title: [^\n]*\n)?{_OPEN}\n.*?\n{_CLOSE}$", flags=re.MULTILINE | re.DOTALL
)


def passage_blocks(text: str) -> list[re.Match[str]]:
    """The passages in a rendered evidence field (`format_passages`, `format_search_results`), in order."""
    return list(_PASSAGE_BLOCK.finditer(text))


def format_search_results(passages: Sequence[Passage], words: int | None, features: dict[str, str]) -> str:
    """Results for the quality assessment: id, URL, domain, date, prior features and a snippet."""
    blocks = []
    for passage in passages:
        if screen(passage).quarantined:  # its address and title are the attacker's words too
            blocks.append(f"[{passage.id}] (quarantined source)\ntitle: (withheld)\n{_OPEN}\n{WITHHELD}\n{_CLOSE}")
            continue
        prov = passage.provenance
        header = [f"[{passage.id}] {prov.url or ''}".strip()]
        if prov.published:
            header.append(f"date {prov.published.isoformat()}")
        if passage.id in features:
            header.append(features[passage.id])
        title = _neutralise(passage.title)
        text = _neutralise(truncate_words(passage.text, words))
        blocks.append(f"{'; '.join(header)}\ntitle: {title}\n{_OPEN}\n{text}\n{_CLOSE}")
    return "\n".join(blocks) if blocks else "(no results)"


def format_quality_counts(quality: SourceQuality) -> str:
    return f"source quality counts: high={quality.n_high}, medium={quality.n_medium}, low={quality.n_low}"


def format_candidates(candidates: Sequence[Candidate], rationale_words: int = 60) -> str:
    lines = []
    for candidate in candidates:
        if candidate.answer is None:
            reason = candidate.error.kind if candidate.error else "no answer"
            lines.append(f"{candidate.pathway}: (no answer: {reason})")
            continue
        cited = f" [cites {', '.join(candidate.cited_passage_ids)}]" if candidate.cited_passage_ids else ""
        rationale = _neutralise(truncate_words(candidate.rationale, rationale_words))
        lines.append(f"{candidate.pathway}: {candidate.answer.display()}{cited} - {rationale}")
    return "\n".join(lines)


def render_question(question: Question, context_words: int | None = None) -> str:
    """The question as the LM sees it: earlier conversation turns and any given context come first."""
    parts: list[str] = []
    if question.conversation and len(question.conversation) > 1:
        turns = "\n".join(f"{turn.role}: {turn.content}" for turn in question.conversation[:-1])
        parts.append(f"Conversation so far:\n{turns}")
    if question.context:
        parts.append(f"Context:\n{_OPEN}\n{_neutralise(truncate_words(question.context, context_words))}\n{_CLOSE}")
    parts.append(question.text if not parts else f"Question: {question.text}")
    return "\n\n".join(parts)


def select_passages(passages: list[Passage], cited: set[str], limit: int | None) -> list[Passage]:
    """At most `limit` passages, the ones a pathway cited first, then by retrieval order: a new list, never the
    record's own (a caller that extended the record's list would add follow-up pages to the bundle's initial ones)."""
    if limit is None or len(passages) <= limit:
        return list(passages)
    ranked = sorted(passages, key=lambda p: (p.id not in cited, passages.index(p)))
    return sorted(ranked[:limit], key=passages.index)


def _cited(bundle: EvidenceBundle) -> set[str]:
    return {pid for candidate in bundle.candidates for pid in candidate.cited_passage_ids}


def drop_order(passages: list[Passage], cited: Set[str], followup: Set[str] = frozenset()) -> list[str]:
    """The order a prompt that must shrink leaves the shown passages out in (`fit_prompt`): uncited first-search
    passages, then cited ones, then follow-up pages, each lowest-ranked first. The renderers list passages in
    retrieval order, so the last blocks are often the cited ones (kept by `select_passages` from low ranks) or a
    follow-up round: what the verifier, guard and audit most need."""
    ranked = sorted(enumerate(passages), key=lambda item: (item[1].id in followup, item[1].id in cited, -item[0]))
    return [passage.id for _, passage in ranked]


def render_local_evidence(bundle: EvidenceBundle) -> str:
    settings = current().settings
    cited = _cited(bundle)
    passages = select_passages(bundle.local_passages, cited, settings.verifier_passages)
    return RankedEvidence(format_passages(passages, settings.passage_words), drop_order(passages, cited))


def render_dynamic_evidence(bundle: EvidenceBundle, min_quality: QualityLabel | None = None) -> str:
    """Initial and follow-up web evidence with quality labels, and the quality counts over all of it.

    `min_quality` shows the text of only those passages labelled at least that good (see `format_passages`).
    """
    settings = current().settings
    cited = _cited(bundle)
    passages = select_passages(bundle.dynamic_passages, cited, settings.verifier_passages)
    followup: set[str] = set()
    for round_ in bundle.followups:
        shown_round = select_passages(round_.passages, cited, settings.verifier_passages)
        followup.update(p.id for p in shown_round)
        passages += shown_round
    shown = format_passages(passages, settings.passage_words, min_quality=min_quality)
    text = f"{shown}\n{format_quality_counts(bundle.dynamic_quality())}"
    return RankedEvidence(text, drop_order(passages, cited, followup))


def render_round_evidence(round_: FollowUpRound, min_quality: QualityLabel | None = None) -> str:
    """One follow-up round's web results with their quality labels, and its own quality counts: what the guard and
    the audit rule on (the CLEAR code's adjudicator reads "only the supplied second-search evidence")."""
    settings = current().settings
    passages = select_passages(round_.passages, set(), settings.verifier_passages)
    shown = format_passages(passages, settings.passage_words, min_quality=min_quality)
    return f"{shown}\n{format_quality_counts(round_.source_quality)}"


__all__ = ["PromptFit", "RankedEvidence", "estimate_tokens", "fit_prompt", "prompt_limit"]

_CHARS_PER_TOKEN = 3.2
_MARGIN_SHARE = 0.05
_MARGIN_TOKENS = 64
_LEFT_OUT = re.compile(r"\n\((\d+) lower-ranked passages? left out to fit the model's context window\)$")
_BLOCK_ID = re.compile(r"^\[([^\]\n]+)\]")


class RankedEvidence(str):
    """A rendered evidence field (a plain ``str`` to DSPy) that names the order its passages may be left out in,
    by id, first to go first. A passage it does not name goes before those it names."""

    drop_order: tuple[str, ...]

    def __new__(cls, text: str, drop_order: Sequence[str] = ()) -> RankedEvidence:
        value = super().__new__(cls, text)
        value.drop_order = tuple(drop_order)
        return value

    def __reduce__(self) -> tuple[type[RankedEvidence], tuple[str, tuple[str, ...]]]:  # copies and pickles keep it
        return RankedEvidence, (str(self), self.drop_order)


@dataclass(frozen=True)
class PromptFit:
    """The inputs to call with, and the passages (`dropped_ids`, in the order they went) left out to fit ``limit``
    prompt tokens."""

    inputs: dict[str, object]
    dropped: int = 0
    limit: int | None = None
    dropped_ids: tuple[str, ...] = ()


def estimate_tokens(text: str) -> int:
    return int(len(text) / _CHARS_PER_TOKEN) + 1


def _prompt_tokens(predictor: dspy.Module, adapter: dspy.Adapter, inputs: Mapping[str, object]) -> int:
    """The estimated prompt as the adapter would send it (instructions, demos and all), or the inputs' text alone
    when the predictor cannot be formatted here."""
    predictors = predictor.predictors()
    try:
        messages = adapter.format(predictors[0].signature, list(predictors[0].demos), dict(inputs))
        text = "".join(str(message.get("content", "")) for message in messages)
    except Exception:  # an unusual module: estimate from what it is given
        text = "".join(str(value) for value in inputs.values())
    return estimate_tokens(text)


def prompt_limit(window: int, output_budget: int | None) -> int:
    """Prompt tokens a call may hold: the window less the output budget and the safety margin."""
    return window - (output_budget or 0) - int(window * _MARGIN_SHARE) - _MARGIN_TOKENS


def _block_id(block: re.Match[str]) -> str:
    found = _BLOCK_ID.match(block.group(0))
    return found.group(1) if found else ""


def _drop_one(text: str, order: Sequence[str]) -> tuple[str, str]:
    """``text`` without one passage block (the first `order` names, else the last), saying how many are left out;
    and the id of the block dropped."""
    blocks = passage_blocks(text)
    rank = {pid: position for position, pid in enumerate(order)}
    # Unnamed blocks first (rank -1), the last of equals first.
    last = min(reversed(blocks), key=lambda block: rank.get(_block_id(block), -1)) if order else blocks[-1]
    found = _LEFT_OUT.search(text)
    before = int(found.group(1)) if found else 0
    body = text[: found.start()] if found else text
    body = (body[: last.start()].rstrip("\n") + body[last.end() :]).strip("\n") or "(no passages)"
    count = before + 1
    plural = "passage" if count == 1 else "passages"
    return f"{body}\n({count} lower-ranked {plural} left out to fit the model's context window)", _block_id(last)


def fit_prompt(
    predictor: dspy.Module,
    adapter: dspy.Adapter,
    inputs: Mapping[str, object],
    *,
    window: int | None,
    output_budget: int | None,
) -> PromptFit:
    """``inputs`` with passages left out until the estimated prompt fits ``window`` (unchanged when it already
    does, when no window is known, or when no passage is left to drop: the call then says whether it fits)."""
    fitted = dict(inputs)
    if window is None:
        return PromptFit(fitted)
    orders = {name: value.drop_order for name, value in inputs.items() if isinstance(value, RankedEvidence)}
    limit = prompt_limit(window, output_budget)
    dropped: list[str] = []
    while _prompt_tokens(predictor, adapter, fitted) > limit:
        counts = {name: len(passage_blocks(value)) for name, value in fitted.items() if isinstance(value, str)}
        name = max(counts, key=lambda key: (counts[key], len(str(fitted[key]))), default=None)
        if name is None or counts[name] == 0:
            break
        fitted[name], passage_id = _drop_one(str(fitted[name]), orders.get(name, ()))
        dropped.append(passage_id)
    return PromptFit(fitted, dropped=len(dropped), limit=limit if dropped else None, dropped_ids=tuple(dropped))


def question_words(question: Question) -> int:
    """Words the model would read for this question: text, context, options and earlier conversation turns."""
    parts = [question.text, question.context or "", *(question.options or {}).values()]
    parts += [turn.content for turn in question.conversation or []]
    return sum(len(part.split()) for part in parts)


def over_budget(question: Question, settings: ProgramSettings) -> str | None:
    """Why the question cannot be answered within the budget, or None when it fits."""
    budget = settings.max_question_words
    words = question_words(question)
    if budget is None or words <= budget:
        return None
    return (
        f"the question is {words} words, over the input budget of {budget} words "
        "(program.max_question_words); shorten it or raise the budget for a backbone with a longer context"
    )


def refused_decision(question: Question, reason: str, program: str, thresholds: Thresholds | None = None) -> Decision:
    """A failed Decision that records the refusal; no model was called."""
    return Decision(
        question_id=question.id,
        status="failed",
        bundle=EvidenceBundle(question=question, candidates=[]),
        steps=[AdjudicationStep(mechanism="fallback", trigger="input", rule="input_over_budget", outcome=reason)],
        deciding_rule="input_over_budget",
        thresholds=thresholds or Thresholds(),
        error=reason,
        program=program,
    )


def describe_answer(answer: Answer, question: Question) -> str:
    """An answer as the assessors see it: letters with their option texts."""
    if answer.letters and question.options:
        return "; ".join(f"{letter}. {question.options.get(letter, '?')}" for letter in answer.letters)
    return answer.display()
