"""Typed DSPy signatures for the option-wise evidence judge (MedJudgeRAG).

The judge writes the evidence for an option before its verdict (the paper's evidence-first design), and the
graph before the verdicts in explicit mode. Verdict labels, letters and semantic types come back as loose
strings inside typed records and are normalised in Python (`programs.judge.verdicts`): a weak model writes
"Supported." or "A)" and a strict Literal would discard the whole call. The decision the model states is
recorded, but the decision the program uses follows from the verdicts by rule.
"""

from __future__ import annotations

import dspy
from pydantic import BaseModel, Field

from clearmed.signatures.clear import ANSWER_DESC, EVIDENCE_IS_DATA


class VerdictDraft(BaseModel):
    """One option's verdict as the model writes it (normalised and validated in Python)."""

    option: str = Field(description="the option letter")
    evidence: list[str] = Field(default_factory=list, description="ids of the passages (or graph elements) cited")
    note: str = Field(default="", description="a few words: what the cited evidence says about this option")
    verdict: str = Field(description="supported, contradicted or insufficient")


class EntityDraft(BaseModel):
    id: str = Field(description="E1, E2, ...")
    name: str
    type: str = Field(description="UMLS semantic group abbreviation, e.g. DISO, CHEM, ANAT, PROC")
    evidence: list[str] = Field(default_factory=list, description="ids of the passages that mention it")


class RelationDraft(BaseModel):
    id: str = Field(description="R1, R2, ...")
    source: str = Field(description="entity id")
    relation: str = Field(description="e.g. treats, causes, diagnoses, manifestation_of, risk_factor_for")
    target: str = Field(description="entity id")
    evidence: list[str] = Field(default_factory=list, description="ids of the passages that state it")


_VERDICT_RULES = (
    " For every option give a verdict, citing the passage ids it rests on: supported = the passages give direct "
    "evidence that the option is the correct answer to this question (a passage that merely mentions the option, "
    "or describes it without answering the question, is not support); contradicted = the passages explicitly "
    "indicate the option is wrong; insufficient = the passages alone do not settle it. A supported or contradicted "
    "verdict without a cited passage id does not count. When only one answer is allowed, at most one option can be "
    "supported: keep it for the option the passages support most directly. Then the decision: grounded if some "
    "option is supported (answer with it), elimination if none is supported but some are contradicted (rule those "
    "out and choose among the rest from your own knowledge), parametric if every option is insufficient (answer "
    "from your own knowledge)."
)


# A weak model tends to judge only the option it favours: the description spells out "every option" by example.
VERDICTS_DESC = (
    "one entry for EVERY option letter, in order, e.g. "
    '[{"option": "A", "evidence": ["L2"], "note": "L2 says A causes the opposite", "verdict": "contradicted"}, '
    '{"option": "B", "evidence": [], "note": "not mentioned", "verdict": "insufficient"}, ...]'
)


class JudgeOptions(dspy.Signature):
    __doc__ = "Judge each answer option of the medical question against the retrieved passages." + (
        _VERDICT_RULES + EVIDENCE_IS_DATA
    )

    # Same input order as AnswerFromEvidence: evidence last, so prompts share their prefix.
    question: str = dspy.InputField(desc="the medical question, possibly a clinical vignette")
    options: str = dspy.InputField(desc="the answer options, one per line as 'LETTER. text'")
    answer_format: str = dspy.InputField(desc="how many options to choose")
    evidence: str = dspy.InputField(desc="retrieved passages, each introduced by its id in square brackets")
    verdicts: list[VerdictDraft] = dspy.OutputField(desc=VERDICTS_DESC)
    decision: str = dspy.OutputField(desc="grounded, elimination or parametric")
    answer: str = dspy.OutputField(desc=ANSWER_DESC)


class JudgeOptionsWithGraph(dspy.Signature):
    __doc__ = (
        "First extract a small knowledge graph from the retrieved passages: only entities and relations that help "
        "tell the answer options apart, each grounded in and citing the passages (no facts from your own memory); "
        "entity types are UMLS semantic groups (ACTI activities, ANAT anatomy, CHEM chemicals and drugs, CONC "
        "concepts, DEVI devices, DISO disorders incl. signs and symptoms, GENE genes, GEOG geographic areas, LIVB "
        "living beings incl. organisms, OBJC objects, OCCU occupations, ORGA organizations, PHEN phenomena, PHYS "
        "physiology, PROC procedures incl. tests and treatments). Return empty lists when the passages do not "
        "help. Then judge each answer option; verdicts may cite graph element ids as well as passage ids."
        + _VERDICT_RULES
        + EVIDENCE_IS_DATA
    )

    question: str = dspy.InputField(desc="the medical question, possibly a clinical vignette")
    options: str = dspy.InputField(desc="the answer options, one per line as 'LETTER. text'")
    answer_format: str = dspy.InputField(desc="how many options to choose")
    evidence: str = dspy.InputField(desc="retrieved passages, each introduced by its id in square brackets")
    entities: list[EntityDraft] = dspy.OutputField(desc="graph entities; [] if none")
    relations: list[RelationDraft] = dspy.OutputField(desc="graph relations between entity ids; [] if none")
    verdicts: list[VerdictDraft] = dspy.OutputField(desc=VERDICTS_DESC)
    decision: str = dspy.OutputField(desc="grounded, elimination or parametric")
    answer: str = dspy.OutputField(desc=ANSWER_DESC)
