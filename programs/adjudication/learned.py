"""The learned verifier (`verifier_mode = "learned"`): a logistic model, fitted on recorded runs, picks between the
pathways' competing answers from features of their own replies and evidence, with no LM call.

Issue 47: on MIRAGE's recorded GPT-3.5 and GPT-4 pathways the deterministic verifier is MedRAG with a CoT fallback,
the embedded LM verifier keeps CoT, and the calibrated verifier has no log-probabilities to pool. The replies still
carry weak signal (who hedges, whose reasoning names the other's option, which pathway is the more reliable on this
kind of benchmark, how well the passages support each option, a scored probability where there is one). This module
turns a bundle into those features (`answer_features`: one function for a recorded and a live question, so a fit on
a recorded pilot applies to a live run) and applies a fitted model with numpy alone (`learned_verify`); the fit
itself (scikit-learn) is `optimize.verifier_fit`.

A fit knows where it applies (`LearnedDomain`: the benchmarks, answer formats and backbones it saw). On any other
question, on a question with fewer than two competing single-letter answers, and where its probability for the
chosen answer is within `margin` of a coin flip, the deterministic verifier decides and the output says why
(`LearnedFallback`); so it does for a fit tune withheld (`LearnedModel.withheld`: its repeated cross-validation did
not beat the deterministic verifier) and where a pathway the fit read scores of answered without them
(`LearnedModel.scored`; a replayed record with no `option_scores`), its scored features then absent from the trail.
The fit chooses the margin on out-of-fold probabilities of its training questions, where the learned verifier with
that margin is then at least as accurate as the deterministic one (a margin of 0.5 is the deterministic verifier;
docs/results.md, issue 47).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, FiniteFloat

from clearmed.programs.adjudication.calibrated import binding_inputs, binding_term, confidence_label
from clearmed.programs.adjudication.rules import answer_for_route
from clearmed.signatures.records import (
    PATHWAYS,
    Agreement,
    Candidate,
    EvidenceBundle,
    LearnedVerdict,
    PathwayName,
    Question,
    RuleId,
    VerifierOutput,
    route_for,
    top_options,
)
from clearmed.signatures.records.routes import AnswerSource

__all__ = [
    "BASE_FEATURES",
    "BINDING_FEATURES",
    "LearnedDomain",
    "LearnedModel",
    "OutOfDomainError",
    "answer_features",
    "answer_holders",
    "domain_of",
    "feature_names",
    "feature_row",
    "learned_decision",
    "learned_verify",
    "question_cell",
]

# Words that hedge a conclusion; counted per 100 words of a reply.
_HEDGES = (
    "may",
    "might",
    "could",
    "possibly",
    "possible",
    "perhaps",
    "probably",
    "likely",
    "unlikely",
    "uncertain",
    "unclear",
    "suggest",
    "suggests",
    "seems",
    "appears",
    "however",
    "although",
)
# A retrieval pathway's reply saying its documents do not hold the answer (then often guessing anyway), as MIRAGE's
# MedRAG replies put it ("The provided documents do not contain ...", "not mentioned in the documents").
_DOCS_LACK = re.compile(
    r"(documents?|snippets?|passages?|context|information provided|provided information)"
    r"[^.]{0,60}\b(do|does|did)\s*(not|n't)\s+(contain|mention|provide|include|address|discuss|specify|say|give)"
    r"|not\s+(mentioned|provided|found|addressed|discussed|specified)\s+in\s+the\s+(provided\s+)?"
    r"(documents?|snippets?|passages?|context)"
    r"|no\s+(relevant\s+)?information\s+(is\s+)?(provided|given|available|found)"
    r"|(documents?|snippets?|passages?)\s+(are|is)\s+not\s+(relevant|helpful)",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "and",
        "or",
        "with",
        "by",
        "from",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "as",
        "that",
        "this",
        "these",
        "those",
        "which",
        "what",
        "who",
        "whom",
        "whose",
        "it",
        "its",
        "into",
        "than",
        "then",
        "most",
        "least",
        "following",
        "not",
        "no",
    ]
)

# The features of one competing answer, before the per-cell terms (`feature_names`). "holder" is a pathway whose
# answer it is, "other" an answered pathway whose answer it is not.
BASE_FEATURES: tuple[str, ...] = (
    *(f"holds_{p}" for p in PATHWAYS),
    "holders",
    "holder_log_words",
    "holder_hedges",
    "holder_docs_lack",
    "holder_names_option",
    "other_log_words",
    "other_hedges",
    "other_docs_lack",
    "other_names_option",
    "holder_names_other_option",
    "option_log_chars",
    "option_support",
    *(f"scored_{p}" for p in PATHWAYS),
)
# Evidence binding (issue 56 item 5), a group of its own after the base features: per evidence pathway k,
# log p_k(a | q, P) - log p_k(a | P) for the answer a, where the run recorded the passage-only scores
# (`Candidate.passage_only_scores`: disputed questions under `[program] evidence_binding`), else 0. The calibrated
# verifier's binding term reads the same numbers (`calibrated.binding_inputs`).
BINDING_FEATURES: tuple[str, ...] = ("binding_local", "binding_dynamic")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


def _normalised(text: str) -> str:
    return " ".join(_words(text))


def _reply(candidate: Candidate) -> str:
    """What a pathway said: its rationale, else its raw reply."""
    return candidate.rationale or candidate.raw_answer or ""


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _hedge_rate(words: Sequence[str]) -> float:
    return 100.0 * sum(word in _HEDGES for word in words) / len(words) if words else 0.0


def _names(reply: str, option_text: str) -> bool:
    """The reply names the option's text (whole words; a text of fewer than 4 characters is too short to tell)."""
    wanted = _normalised(option_text)
    return len(wanted) >= 4 and f" {wanted} " in f" {_normalised(reply)} "


def _bm25_support(question: Question, passages: Sequence[str], k1: float = 1.5, b: float = 0.75) -> dict[str, float]:
    """Each option's BM25 support over the passages (its query: the question's and the option's content words;
    the best passage's score), scaled by the best option's, so 1 is the best supported option and 0 none."""
    options = question.options or {}
    docs = [[w for w in _words(text) if w not in _STOP] for text in passages]
    if not docs or not options:
        return dict.fromkeys(options, 0.0)
    frequency = Counter(term for doc in docs for term in set(doc))
    mean_length = sum(len(doc) for doc in docs) / len(docs) or 1.0
    counts = [Counter(doc) for doc in docs]
    stem = [w for w in _words(question.text) if w not in _STOP]
    scores = {}
    for letter, text in options.items():
        terms = set(stem) | {w for w in _words(text) if w not in _STOP}
        own = {w for w in _words(text) if w not in _STOP}
        best = 0.0
        for doc, count in zip(docs, counts, strict=True):
            if not own & count.keys():  # a passage that never names the option does not support it
                continue
            score = 0.0
            for term in terms & count.keys():
                idf = math.log(1 + (len(docs) - frequency[term] + 0.5) / (frequency[term] + 0.5))
                tf = count[term]
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / mean_length))
            best = max(best, score)
        scores[letter] = best
    top = max(scores.values())
    return {letter: (score / top if top > 0 else 0.0) for letter, score in scores.items()}


def answer_holders(bundle: EvidenceBundle) -> dict[str, list[PathwayName]]:
    """The distinct single-letter answers of the pathways, each with the pathways that gave it (in PATHWAYS order)."""
    held: dict[str, list[PathwayName]] = {}
    for pathway in PATHWAYS:
        candidate = bundle.candidate(pathway)
        if candidate.answer is not None and len(candidate.answer.letters) == 1:
            held.setdefault(candidate.answer.letters[0], []).append(pathway)
    return held


def answer_features(bundle: EvidenceBundle) -> dict[str, dict[str, float]]:
    """The base features (`BASE_FEATURES`) of each competing answer, from the bundle alone: the pathways' replies,
    their scored probabilities, and the passages the bundle holds. The same for a recorded and a live question."""
    question = bundle.question
    options = question.options or {}
    held = answer_holders(bundle)
    replies = {p: _reply(bundle.candidate(p)) for p in PATHWAYS}
    words = {p: _words(text) for p, text in replies.items()}
    passages = [p.text for p in [*bundle.local_passages, *bundle.all_dynamic_passages()]]
    support = _bm25_support(question, passages)
    lengths = [math.log1p(len(text)) for text in options.values()] or [0.0]
    mean_length = sum(lengths) / len(lengths)
    answered = [p for holders in held.values() for p in holders]
    bound = binding_inputs(bundle)
    features = {}
    for letter, holders in held.items():
        others = [p for p in answered if p not in holders]
        option_text = options.get(letter, "")
        other_texts = [options.get(o, "") for o in held if o != letter]

        row: dict[str, float] = {f"holds_{p}": float(p in holders) for p in PATHWAYS}
        row |= {
            "holders": float(len(holders)),
            "holder_log_words": _mean([math.log1p(len(words[p])) for p in holders]),
            "holder_hedges": _mean([_hedge_rate(words[p]) for p in holders]),
            "holder_docs_lack": float(any(p != "parametric" and _DOCS_LACK.search(replies[p]) for p in holders)),
            "holder_names_option": float(any(_names(replies[p], option_text) for p in holders)),
            "other_log_words": _mean([math.log1p(len(words[p])) for p in others]),
            "other_hedges": _mean([_hedge_rate(words[p]) for p in others]),
            "other_docs_lack": float(any(p != "parametric" and _DOCS_LACK.search(replies[p]) for p in others)),
            "other_names_option": float(any(_names(replies[p], option_text) for p in others)),
            "holder_names_other_option": float(any(_names(replies[p], text) for p in holders for text in other_texts)),
            "option_log_chars": (math.log1p(len(option_text)) - mean_length),
            "option_support": support.get(letter, 0.0),
        }
        for pathway in PATHWAYS:
            scores = bundle.candidate(pathway).option_scores
            row[f"scored_{pathway}"] = float(scores.probs.get(letter, 0.0)) if scores and not scores.per_option else 0.0
        row |= {f"binding_{p}": binding_term(*bound[p], letter) if p in bound else 0.0 for p in ("local", "dynamic")}
        features[letter] = row
    return features


def question_cell(bundle: EvidenceBundle) -> str:
    """The cell a question belongs to for the per-cell terms: its benchmark and its pathways' backbone."""
    domain = domain_of(bundle)
    return f"{domain[0]} @ {domain[2]}"


def domain_of(bundle: EvidenceBundle) -> tuple[str, str, str]:
    """(benchmark, answer format, backbone) of a question: its id's prefix (``mirage:medqa:0001`` ->
    ``mirage:medqa``; an id with no prefix: ``-``), its answer mode and option count (``single:4``), and the models
    of the pathways that answered (``OpenAI/gpt-4-32k``; several: joined by ``+``)."""
    question = bundle.question
    benchmark = question.id.rsplit(":", 1)[0] if ":" in question.id else "-"
    answer_format = f"{question.answer_mode}:{len(question.options or {})}"
    models = sorted({c.model for c in bundle.candidates if c.answer is not None and c.model})
    return benchmark, answer_format, "+".join(models) or "-"


def feature_names(cells: Sequence[str]) -> list[str]:
    """The model's columns: the base features, then, with more than one cell, each holder flag per cell (which
    pathway is the reliable one depends on the benchmark and the backbone)."""
    names = [*BASE_FEATURES, *BINDING_FEATURES]
    if len(cells) > 1:
        names += [f"holds_{p}@{cell}" for cell in cells for p in PATHWAYS]
    return names


def feature_row(row: Mapping[str, float], cell: str, cells: Sequence[str]) -> list[float]:
    """One answer's column values in `feature_names(cells)` order."""
    values = [row[name] for name in BASE_FEATURES] + [row.get(name, 0.0) for name in BINDING_FEATURES]
    if len(cells) > 1:
        values += [row[f"holds_{p}"] * (c == cell) for c in cells for p in PATHWAYS]
    return values


class LearnedDomain(BaseModel):
    """Where a fit applies: the benchmarks, answer formats and backbones of the questions it was fitted on."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    benchmarks: list[str]
    formats: list[str]
    backbones: list[str]

    def misses(self, domain: tuple[str, str, str]) -> str:
        """What of a question's domain (`domain_of`) lies outside this one ("" when nothing does), e.g.
        "benchmark mirage:mmlu"."""
        seen = (self.benchmarks, self.formats, self.backbones)
        named = zip(("benchmark", "format", "backbone"), domain, seen, strict=True)
        return ", ".join(f"{what} {value}" for what, value, known in named if value not in known)


class LearnedModel(BaseModel):
    """A fitted learned verifier, as a tune artifact stores it (`learned.json`): a logistic model over the
    standardised features of each competing answer, its margin, and its domain."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    features: list[str]
    mean: list[FiniteFloat]
    scale: list[FiniteFloat]
    coef: list[FiniteFloat]
    intercept: FiniteFloat
    cells: list[str] = Field(default_factory=list, description="the cells of the per-cell terms (several: see names)")
    margin: float = Field(ge=0.0, le=0.5, description="below this distance of the choice from 0.5: the fallback")
    domain: LearnedDomain
    # Outside the domain: "fallback" lets the deterministic verifier decide (recorded), "refuse" stops the run.
    out_of_domain: Literal["fallback", "refuse"] = "fallback"
    # The pathways whose scored probability varied in the fit: a question one of whose answering pathways among them
    # carries no `option_scores` falls back ("scores_absent"), since the fit would read 0 where it learned a
    # probability. Empty in a model written before this was recorded (then nothing is checked).
    scored: list[PathwayName] = Field(default_factory=list)
    # Why tune withheld this fit (its repeated cross-validation did not beat the deterministic verifier): then it
    # decides no question ("withheld"). Empty: it ships.
    withheld: str = ""

    def probabilities(self, features: Mapping[str, Mapping[str, float]], cell: str) -> dict[str, float]:
        """Each competing answer's probability of being the right one among them: the model's probabilities of
        each being right, normalised over the competing answers."""
        if not features:
            return {}
        x = np.array([feature_row(row, cell, self.cells) for row in features.values()])
        logits = ((x - np.array(self.mean)) / np.array(self.scale)) @ np.array(self.coef) + self.intercept
        p = 1.0 / (1.0 + np.exp(-logits))
        total = float(p.sum()) or 1.0
        return {letter: float(v) / total for letter, v in zip(features, p, strict=True)}

    def choose(self, probabilities: Mapping[str, float]) -> str | None:
        """The answer the model stands by, or None when its choice is within the margin: of 0.5 with two
        answers, of the runner-up by twice the margin with more."""
        if len(probabilities) < 2:
            return None
        ranked = sorted(probabilities, key=probabilities.__getitem__, reverse=True)
        lead = probabilities[ranked[0]] - probabilities[ranked[1]]
        return ranked[0] if lead >= 2 * self.margin and lead > 0 else None


class OutOfDomainError(Exception):
    """The learned verifier was asked about a question outside its fit, with `out_of_domain = "refuse"`."""


def learned_decision(bundle: EvidenceBundle, model: LearnedModel | None) -> LearnedVerdict:
    """What the learned verifier makes of a bundle: each competing answer's features and probability, its choice,
    or why it leaves the question to the deterministic verifier (`fallback`, `note`)."""
    if model is None:
        note = "no fitted model: apply a tune artifact with a learned fit (--program-artifact)"
        return LearnedVerdict(fallback="no_model", note=note)
    question = bundle.question
    if question.answer_mode != "single" or not question.options:
        return LearnedVerdict(fallback="not_single_choice", note=f"answer mode {question.answer_mode}")
    held = answer_holders(bundle)
    if len(held) < 2:
        return LearnedVerdict(fallback="fewer_than_two_answers", note=f"{len(held)} distinct answer(s)")
    if model.withheld:
        return LearnedVerdict(fallback="withheld", note=model.withheld)
    outside = model.domain.misses(domain_of(bundle))
    if outside:
        if model.out_of_domain == "refuse":
            raise OutOfDomainError(f"{question.id}: outside the learned verifier's fit ({outside})")
        return LearnedVerdict(fallback="out_of_domain", note=f"outside the fit: {outside}")
    features = answer_features(bundle)
    # A scored feature whose pathway recorded no scores is absent, not 0: it is left out of the trail's features.
    unscored = [p for p in PATHWAYS if bundle.candidate(p).option_scores is None]
    shown = {
        o: {k: round(v, 4) for k, v in row.items() if k not in {f"scored_{p}" for p in unscored}}
        for o, row in features.items()
    }
    missing = [p for p in model.scored if p in unscored and any(p in holders for holders in held.values())]
    if missing:
        note = f"scored features absent: {', '.join(missing)} answered with no option_scores, and the fit reads them"
        return LearnedVerdict(features=shown, fallback="scores_absent", note=note)
    probabilities = model.probabilities(features, question_cell(bundle))
    choice = model.choose(probabilities)
    rounded = {o: round(p, 4) for o, p in probabilities.items()}
    if choice is None:
        note = f"{top_options(probabilities)}: within the margin {model.margin:.2f} of a coin flip"
        return LearnedVerdict(probabilities=rounded, features=shown, fallback="within_margin", note=note)
    return LearnedVerdict(choice=choice, probabilities=rounded, features=shown)


def learned_verify(
    bundle: EvidenceBundle, agreement: Agreement, model: LearnedModel | None
) -> tuple[VerifierOutput, RuleId] | LearnedVerdict:
    """The learned verifier's output and rule for a disputed single-answer MCQ; else its verdict, whose `fallback`
    says why the deterministic verifier must decide (the caller records it on that verifier's output)."""
    verdict = learned_decision(bundle, model)
    if verdict.choice is None:
        return verdict
    holders = answer_holders(bundle)[verdict.choice]
    source: AnswerSource = "agreement" if len(holders) >= 2 else holders[0]
    route = route_for(source)
    probability = verdict.probabilities[verdict.choice]
    output = VerifierOutput(
        answer=answer_for_route(route, bundle, agreement),
        route=route,
        rationale=f"learned verifier: {top_options(verdict.probabilities)}",
        confidence=confidence_label(probability),
        mode="learned",
        raw_answer=verdict.choice,
        learned=verdict,
    )
    return output, "learned"
