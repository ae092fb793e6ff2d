"""The option-wise judgement (MedJudgeRAG): a verdict per option that cites its evidence, a decision that
follows from the verdicts by rule, and optionally a small question-specific knowledge graph extracted first."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from clearmed.signatures.records.base import Record
from clearmed.signatures.records.question import Answer

Verdict = Literal["supported", "contradicted", "insufficient"]
JudgeDecision = Literal["grounded", "elimination", "parametric"]
JudgeMode = Literal["implicit", "explicit"]
# The 15 UMLS semantic groups (https://lhncbc.nlm.nih.gov/semanticnetwork/), by their official abbreviations.
SemanticGroup = Literal[
    "ACTI",
    "ANAT",
    "CHEM",
    "CONC",
    "DEVI",
    "DISO",
    "GENE",
    "GEOG",
    "LIVB",
    "OBJC",
    "OCCU",
    "ORGA",
    "PHEN",
    "PHYS",
    "PROC",
]


class GraphEntity(Record):
    """An entity of the question-specific graph, typed by UMLS semantic group, citing its source passages."""

    id: str
    name: str
    type: SemanticGroup
    description: str = ""
    evidence: list[str] = Field(default_factory=list)


class GraphRelation(Record):
    id: str
    source: str
    relation: str
    target: str
    evidence: list[str] = Field(default_factory=list)


class GraphCleanup(Record):
    """What schema-aware post-processing removed or changed (MedJudgeRAG 3.2), so KG quality can be reported."""

    types_normalised: int = 0
    entities_dropped_type: int = 0
    entities_dropped_ungrounded: int = 0
    relations_dropped_type: int = 0
    relations_dropped_orphan: int = 0
    relations_dropped_ungrounded: int = 0
    citations_removed: int = 0


class KnowledgeGraph(Record):
    """Empty is allowed: irrelevant evidence should yield no graph rather than noise."""

    entities: list[GraphEntity] = Field(default_factory=list)
    relations: list[GraphRelation] = Field(default_factory=list)
    cleanup: GraphCleanup = Field(default_factory=GraphCleanup)

    @property
    def is_empty(self) -> bool:
        return not self.entities and not self.relations


class OptionVerdict(Record):
    """The verdict on one option. `stated` is what the model wrote; `verdict` is what the rules use.

    A supported or contradicted verdict that cites nothing, or cites an id outside the evidence, is invalid
    and counts as insufficient (`invalid_reason` says why); citations of graph elements resolve to the
    passages those elements cite.
    """

    letter: str
    verdict: Verdict
    stated: str = ""
    cited_ids: list[str] = Field(default_factory=list)
    reason: str = ""
    invalid_reason: str | None = None

    @property
    def valid(self) -> bool:
        return self.invalid_reason is None


class OptionJudgment(Record):
    """A judge's full output for one pathway: graph, verdicts, decision by rule, answer and its checks."""

    mode: JudgeMode
    graph: KnowledgeGraph | None = None
    verdicts: list[OptionVerdict] = Field(default_factory=list)
    decision: JudgeDecision
    stated_decision: str | None = None
    model_answer: str | None = None
    answer: Answer | None = None
    answer_rule: str = ""
    eliminated: list[str] = Field(default_factory=list)
    invalid_citations: int = 0
    missing_verdicts: list[str] = Field(default_factory=list)
    # True when the typed parse failed and verdicts were recovered from the raw text by the fallback parser.
    salvaged: bool = False

    def letters_with(self, verdict: Verdict) -> list[str]:
        return [v.letter for v in self.verdicts if v.verdict == verdict]

    def verdict_for(self, letter: str) -> OptionVerdict | None:
        return next((v for v in self.verdicts if v.letter == letter), None)
