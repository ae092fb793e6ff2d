"""The judge's knowledge graph cleaned by rule (MedJudgeRAG 3.2): semantic types normalised to the 15 UMLS
groups, relation types checked, and every element grounded in the evidence it cites."""

from __future__ import annotations

import re
from collections.abc import Sequence

from clearmed.programs.judge.verdicts import cited_ids
from clearmed.signatures.option_judge import EntityDraft, RelationDraft
from clearmed.signatures.records import GraphCleanup, GraphEntity, GraphRelation, KnowledgeGraph, SemanticGroup

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
