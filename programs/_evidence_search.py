"""Gathering evidence for a pathway: the query, bundle-unique passage ids, and search calls that never raise."""

from __future__ import annotations

import time

from clearmed.programs._stage import record_tool_call
from clearmed.programs.settings import Stage
from clearmed.retrieval.base import EvidenceError, WebSearch
from clearmed.signatures.records import ErrorKind, Passage, PathwayName, StepError


def reid(passages: list[Passage], prefix: str) -> list[Passage]:
    """Give passages short bundle-unique ids; keep the source id as the provenance doc id."""
    out = []
    for index, passage in enumerate(passages, start=1):
        provenance = passage.provenance
        if provenance.doc_id is None and provenance.kind == "corpus":
            provenance = provenance.model_copy(update={"doc_id": passage.id})
        if provenance.rank is None:
            provenance = provenance.model_copy(update={"rank": index})
        out.append(passage.model_copy(update={"id": f"{prefix}{index}", "provenance": provenance}))
    return out


def evidence_failure(pathway: PathwayName, stage: str, exc: Exception) -> StepError:
    kind: ErrorKind = "retrieval_error" if pathway == "local" else "search_error"
    if isinstance(exc, EvidenceError):
        return StepError(stage=stage, kind=kind, message=f"{exc.kind}: {exc}")
    return StepError(stage=stage, kind=kind, message=f"{type(exc).__name__}: {exc}")


def search_web(
    search: WebSearch, query: str, max_results: int, stage: Stage, prefix: str
) -> tuple[list[Passage], StepError | None]:
    """One search with its ledger row; failures become a recorded error and no passages."""
    started = time.perf_counter()
    try:
        found = search.search(query, max_results)
    except Exception as exc:  # recorded, never raised: the pathway still yields a candidate
        record_tool_call(stage, time.perf_counter() - started, backend=search.name, failed=True)
        return [], evidence_failure("dynamic", stage, exc)
    record_tool_call(stage, time.perf_counter() - started, backend=search.name, failed=False)
    return reid(list(found)[:max_results], prefix), None
