"""The option-wise judge's rules (MedJudgeRAG 3.2-3.3) as pure functions: no LM, table-testable.

The model writes verdicts, a decision and an answer; here the verdicts are normalised and their citations
checked against the evidence, the decision is derived from the verdicts (grounded > elimination >
parametric), and the answer is taken only where the decision allows it. Anything the rules cannot reconcile
becomes no answer with a reason, never a guess.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from clearmed.programs.answers import parse_letters
from clearmed.signatures.option_judge import EntityDraft, RelationDraft, VerdictDraft
from clearmed.signatures.records import (
    Answer,
    GraphCleanup,
    GraphEntity,
    GraphRelation,
    JudgeDecision,
    KnowledgeGraph,
    OptionJudgment,
    OptionVerdict,
    Question,
    SemanticGroup,
    Verdict,
)

# ------------------------------------------------------------------------------------------- verdict labels

_VERDICT_WORDS: dict[str, Verdict] = {
    "supported": "supported",
    "support": "supported",
    "supports": "supported",
    "correct": "supported",
    "contradicted": "contradicted",
    "contradict": "contradicted",
    "contradicts": "contradicted",
    "refuted": "contradicted",
    "incorrect": "contradicted",
    "insufficient": "insufficient",
    "unsupported": "insufficient",
    "unclear": "insufficient",
    "unknown": "insufficient",
    "neutral": "insufficient",
}


def normalise_verdict(text: str) -> Verdict | None:
    """'SUPPORTED', 'Supported.', '**contradicted**', 'not enough evidence' -> a verdict; None if unrecognised."""
    words = re.findall(r"[a-z]+", text.casefold())
    if not words:
        return None
    if words[0] in ("not", "no") and len(words) > 1:
        return "insufficient" if words[1] in ("enough", "sufficient", "evidence", "mentioned", "addressed") else None
    return _VERDICT_WORDS.get(words[0])


def normalise_letter(text: str, letters: Sequence[str]) -> str | None:
    """'A', 'a)', 'Option B', '(C) Aspirin' -> the letter when it is one of `letters`."""
    match = re.match(r"^\s*(?:option\s+)?\(?([A-Za-z])\)?(?:[\s.:)\-]|$)", text, re.IGNORECASE)
    if match is None:
        return None
    letter = match.group(1).upper()
    return letter if letter in letters else None


_DECISION_WORDS: dict[str, JudgeDecision] = {"grounded": "grounded", "elimination": "elimination"}


def normalise_decision(text: str | None) -> JudgeDecision | None:
    words = re.findall(r"[a-z]+", (text or "").casefold())
    if not words:
        return None
    if words[0] == "parametric":
        return "parametric"
    return _DECISION_WORDS.get(words[0])


# ------------------------------------------------------------------------------------------- citations

_ID = re.compile(r"[A-Z]\d+(?:\.\d+)?")


def cited_ids(raw: Iterable[str]) -> list[str]:
    """Ids named in a citation list, tolerant of '[L1]', 'L1, L2', 'W3 (cdc)'; order kept, duplicates dropped."""
    out: list[str] = []
    for item in raw:
        for found in _ID.findall(str(item).upper()):
            if found not in out:
                out.append(found)
    return out


def resolve_citations(
    ids: Sequence[str], evidence_ids: set[str], graph: KnowledgeGraph | None
) -> tuple[list[str], list[str]]:
    """(passage ids the citations rest on, ids that name nothing in the evidence).

    A graph element (E1, R2) stands for the passages it cites: citing it is citing them.
    """
    elements: dict[str, list[str]] = {}
    if graph is not None:
        elements = {e.id: e.evidence for e in graph.entities} | {r.id: r.evidence for r in graph.relations}
    passages: list[str] = []
    unknown: list[str] = []
    for cited in ids:
        resolved = [cited] if cited in evidence_ids else elements.get(cited)
        if not resolved:
            unknown.append(cited)
            continue
        passages.extend(p for p in resolved if p not in passages)
    return passages, unknown


# ------------------------------------------------------------------------------------------- verdicts


def validate_verdicts(
    drafts: Sequence[VerdictDraft],
    question: Question,
    evidence_ids: set[str],
    graph: KnowledgeGraph | None = None,
) -> tuple[list[OptionVerdict], int, list[str]]:
    """One validated verdict per option, the number of invalid citations, and the options left unjudged.

    Rules: an unrecognised label, a supported/contradicted verdict citing nothing, or citing any id that is
    not in the evidence is invalid and counts as insufficient. A second verdict for the same option is
    ignored (the first one stands). An option with no verdict is insufficient and listed as missing.
    """
    letters = question.letters
    by_letter: dict[str, OptionVerdict] = {}
    invalid_citations = 0
    for draft in drafts:
        letter = normalise_letter(draft.option, letters)
        if letter is None or letter in by_letter:
            continue
        stated = normalise_verdict(draft.verdict)
        ids = cited_ids(draft.evidence)
        passages, unknown = resolve_citations(ids, evidence_ids, graph)
        invalid_citations += len(unknown)
        reason: str | None = None
        if stated is None:
            reason = f"unrecognised verdict {draft.verdict!r}"
        elif stated != "insufficient" and unknown:
            reason = f"cites {', '.join(unknown)}, not in the evidence"
        elif stated != "insufficient" and not passages:
            reason = "cites no evidence"
        by_letter[letter] = OptionVerdict(
            letter=letter,
            verdict="insufficient" if reason else stated,  # type: ignore[arg-type]
            stated=draft.verdict.strip(),
            cited_ids=passages,
            reason=draft.note.strip(),
            invalid_reason=reason,
        )
    missing = [letter for letter in letters if letter not in by_letter]
    for letter in missing:
        by_letter[letter] = OptionVerdict(letter=letter, verdict="insufficient", invalid_reason="no verdict given")
    return [by_letter[letter] for letter in letters], invalid_citations, missing


def decide(verdicts: Sequence[OptionVerdict]) -> JudgeDecision:
    """grounded if any option is supported; elimination if none is but some are contradicted; else parametric."""
    labels = {v.verdict for v in verdicts}
    if "supported" in labels:
        return "grounded"
    if "contradicted" in labels:
        return "elimination"
    return "parametric"


def answer_from_verdicts(
    question: Question, verdicts: Sequence[OptionVerdict], decision: JudgeDecision, model_answer: str | None
) -> tuple[Answer | None, str]:
    """The answer the decision allows, and the rule that produced it (or why there is none).

    grounded: the supported options. Multi-answer: all of them. Single: the model's answer if it is supported,
    else the only supported option; several supported and the model named none of them -> no answer.
    elimination: the model's answer among the options not contradicted, or the only one left.
    parametric: the model's own answer.
    """
    options = question.options or {}
    parsed = parse_letters(model_answer, options, question.answer_mode) if model_answer else None
    chosen = set(parsed or ())
    supported = [v.letter for v in verdicts if v.verdict == "supported"]
    contradicted = {v.letter for v in verdicts if v.verdict == "contradicted"}
    if decision == "grounded":
        if question.answer_mode == "multi":
            return Answer(letters=tuple(supported)), "grounded: every supported option"
        if chosen and chosen <= set(supported):
            return Answer(letters=tuple(chosen)), "grounded: the model's answer is supported"
        if len(supported) == 1:
            return Answer.of_letters(supported[0]), "grounded: the only supported option"
        return None, f"grounded: options {', '.join(supported)} are all supported and the answer names none of them"
    if decision == "elimination":
        remaining = [letter for letter in question.letters if letter not in contradicted]
        if not remaining:
            return None, "elimination: every option is contradicted"
        if chosen and chosen <= set(remaining):
            return Answer(letters=tuple(chosen)), "elimination: the model's answer among the remaining options"
        if len(remaining) == 1:
            return Answer.of_letters(remaining[0]), "elimination: the only option not contradicted"
        if chosen:
            return None, "elimination: the model's answer is an option it judged contradicted"
        return None, "elimination: no parseable answer among the remaining options"
    if parsed:
        return Answer(letters=parsed), "parametric: the model's own answer"
    return None, "parametric: no parseable answer"


# ------------------------------------------------------------------------------------------- knowledge graph

_GROUPS: tuple[SemanticGroup, ...] = (
    "ACTI", "ANAT", "CHEM", "CONC", "DEVI", "DISO", "GENE", "GEOG", "LIVB", "OBJC", "OCCU", "ORGA", "PHEN", "PHYS", "PROC",
)  # fmt: skip
# Names models write for a group (UMLS group names, and the semantic types weak models reach for).
_GROUP_WORDS: dict[str, SemanticGroup] = {
    "activities": "ACTI", "activity": "ACTI", "behavior": "ACTI", "behaviour": "ACTI",
    "anatomy": "ANAT", "anatomical": "ANAT", "organ": "ANAT", "tissue": "ANAT", "cell": "ANAT", "body": "ANAT",
    "chemicals": "CHEM", "chemical": "CHEM", "drug": "CHEM", "drugs": "CHEM", "medication": "CHEM",
    "hormone": "CHEM", "enzyme": "CHEM", "protein": "CHEM", "substance": "CHEM", "vitamin": "CHEM",
    "concepts": "CONC", "concept": "CONC", "idea": "CONC",
    "devices": "DEVI", "device": "DEVI",
    "disorders": "DISO", "disorder": "DISO", "disease": "DISO", "condition": "DISO", "symptom": "DISO",
    "sign": "DISO", "finding": "DISO", "syndrome": "DISO", "injury": "DISO",
    "genes": "GENE", "gene": "GENE", "mutation": "GENE",
    "geographic": "GEOG", "geography": "GEOG", "place": "GEOG",
    "living": "LIVB", "organism": "LIVB", "bacteria": "LIVB", "bacterium": "LIVB", "virus": "LIVB",
    "pathogen": "LIVB", "population": "LIVB", "patient": "LIVB",
    "objects": "OBJC", "object": "OBJC",
    "occupations": "OCCU", "occupation": "OCCU",
    "organizations": "ORGA", "organization": "ORGA",
    "phenomena": "PHEN", "phenomenon": "PHEN",
    "physiology": "PHYS", "physiological": "PHYS", "function": "PHYS", "process": "PHYS",
    "procedures": "PROC", "procedure": "PROC", "test": "PROC", "treatment": "PROC", "therapy": "PROC",
    "surgery": "PROC", "diagnostic": "PROC", "lab": "PROC",
}  # fmt: skip

RELATION_TYPES: frozenset[str] = frozenset(
    {
        "treats", "prevents", "causes", "complicates", "diagnoses", "manifestation_of", "associated_with",
        "risk_factor_for", "interacts_with", "contraindicated_with", "location_of", "part_of", "isa", "affects",
        "produces", "measures", "result_of", "precedes", "indicates", "inhibits", "increases", "decreases",
        "caused_by", "treated_by", "has_finding", "first_line_for", "adverse_effect_of",
    }
)  # fmt: skip


def normalise_group(text: str) -> tuple[SemanticGroup | None, bool]:
    """(group, whether it had to be mapped from another spelling)."""
    upper = text.strip().upper()
    if upper in _GROUPS:
        return upper, False
    for word in re.findall(r"[a-z]+", text.casefold()):
        if word in _GROUP_WORDS:
            return _GROUP_WORDS[word], True
    return None, False


def normalise_relation(text: str) -> str | None:
    key = re.sub(r"[\s\-]+", "_", text.strip().casefold())
    return key if key in RELATION_TYPES else None


def clean_graph(
    entities: Sequence[EntityDraft], relations: Sequence[RelationDraft], evidence_ids: set[str]
) -> KnowledgeGraph:
    """MedJudgeRAG's schema-aware post-processing: types normalised to the 15 groups, invalid relation types
    dropped, relations between unknown entities dropped; and document grounding enforced: citations outside the
    evidence are removed, and an element left citing nothing is dropped."""
    cleanup = GraphCleanup()

    def grounded_in_evidence(raw: list[str]) -> list[str]:
        ids = cited_ids(raw)
        grounded = [i for i in ids if i in evidence_ids]
        cleanup.citations_removed += len(ids) - len(grounded)
        return grounded

    kept: list[GraphEntity] = []
    for draft in entities:
        group, mapped = normalise_group(draft.type)
        if group is None:
            cleanup.entities_dropped_type += 1
            continue
        cleanup.types_normalised += int(mapped)
        grounded = grounded_in_evidence(draft.evidence)
        if not grounded:
            cleanup.entities_dropped_ungrounded += 1
            continue
        kept.append(GraphEntity(id=draft.id.strip(), name=draft.name.strip(), type=group, evidence=grounded))
    names = {e.id for e in kept}
    links: list[GraphRelation] = []
    for link in relations:
        relation = normalise_relation(link.relation)
        if relation is None:
            cleanup.relations_dropped_type += 1
            continue
        if link.source.strip() not in names or link.target.strip() not in names:
            cleanup.relations_dropped_orphan += 1
            continue
        grounded = grounded_in_evidence(link.evidence)
        if not grounded:
            cleanup.relations_dropped_ungrounded += 1
            continue
        links.append(
            GraphRelation(
                id=link.id.strip(),
                source=link.source.strip(),
                relation=relation,
                target=link.target.strip(),
                evidence=grounded,
            )
        )
    return KnowledgeGraph(entities=kept, relations=links, cleanup=cleanup)


# ------------------------------------------------------------------------------------------- the whole judgement


def judge(
    question: Question,
    drafts: Sequence[VerdictDraft],
    evidence_ids: set[str],
    *,
    stated_decision: str | None,
    model_answer: str | None,
    graph: KnowledgeGraph | None = None,
) -> OptionJudgment:
    verdicts, invalid, missing = validate_verdicts(drafts, question, evidence_ids, graph)
    decision = decide(verdicts)
    answer, rule = answer_from_verdicts(question, verdicts, decision, model_answer)
    return OptionJudgment(
        mode="explicit" if graph is not None else "implicit",
        graph=graph,
        verdicts=verdicts,
        decision=decision,
        stated_decision=stated_decision,
        model_answer=model_answer,
        answer=answer,
        answer_rule=rule,
        eliminated=[v.letter for v in verdicts if v.verdict == "contradicted"] if decision == "elimination" else [],
        invalid_citations=invalid,
        missing_verdicts=missing,
    )


def option_support(judgment: OptionJudgment | None, answer: Answer | None) -> bool | None:
    """The paper's "support at the exact option level": every letter of `answer` judged supported.

    None when there is no judgement to consult (the judge was off, or the answer is free text).
    """
    if judgment is None or answer is None or not answer.letters:
        return None
    return all(
        (v := judgment.verdict_for(letter)) is not None and v.verdict == "supported" for letter in answer.letters
    )


# ------------------------------------------------------------------------------------------- parser fallback

_SECTION = re.compile(r"\[\[ ## (\w+) ## \]\]\s*(.*?)(?=\[\[ ## \w+ ## \]\]|\Z)", re.DOTALL)
_VERDICT_LINE = re.compile(
    r"^\W*(?:option\s+)?\(?([A-Z])\)?\b(.*?)\b(supported|contradicted|insufficient)\b(.*)$", re.IGNORECASE
)


def raw_sections(raw: str) -> dict[str, str]:
    """ChatAdapter-style '[[ ## field ## ]]' sections of a raw completion."""
    return {name: body.strip() for name, body in _SECTION.findall(raw)}


def parse_verdict_lines(text: str) -> list[VerdictDraft]:
    """Salvage verdicts from text the typed parse rejected: JSON-ish lists, or one 'A: supported [L1]' per line.

    Used only after the adapter failed; whatever it recovers still goes through `validate_verdicts`.
    """
    drafts: list[VerdictDraft] = []
    for line in text.splitlines():
        match = _VERDICT_LINE.match(line.strip())
        if match is None:
            continue
        letter, before, label, after = match.groups()
        ids = cited_ids([before + " " + after])
        drafts.append(VerdictDraft(option=letter.upper(), evidence=ids, verdict=label.casefold()))
    if drafts:
        return drafts
    # A single-line JSON list cut or malformed: take each {...} object that names an option and a verdict.
    for obj in re.findall(r"\{[^{}]*\}", text):
        option = re.search(r'"option"\s*:\s*"([^"]*)"', obj)
        verdict = re.search(r'"verdict"\s*:\s*"([^"]*)"', obj)
        if option and verdict:
            evidence = re.search(r'"evidence"\s*:\s*\[([^\]]*)\]', obj)
            drafts.append(
                VerdictDraft(
                    option=option.group(1),
                    evidence=cited_ids([evidence.group(1)]) if evidence else [],
                    verdict=verdict.group(1),
                )
            )
    return drafts
