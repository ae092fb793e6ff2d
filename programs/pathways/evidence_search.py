"""Gathering evidence for a pathway: the query, bundle-unique passage ids, and search calls that never raise."""

from __future__ import annotations

import time

from clearmed.errors import FatalServiceError
from clearmed.programs.lm.stage import record_tool_call
from clearmed.programs.settings import Stage
from clearmed.retries import count_retries
from clearmed.retrieval.base import EvidenceError, SearchFailure, WebSearch
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


# Search failures still there after the client's retries that a later attempt may not meet: the question is degraded.
_TRANSIENT: frozenset[SearchFailure] = frozenset({"rate_limit", "timeout", "server", "connection"})


def evidence_failure(pathway: PathwayName, stage: str, exc: Exception) -> StepError:
    kind: ErrorKind = "retrieval_error" if pathway == "local" else "search_error"
    if isinstance(exc, EvidenceError):
        return StepError(stage=stage, kind=kind, message=f"{exc.kind}: {exc}", transient=exc.kind in _TRANSIENT)
    return StepError(stage=stage, kind=kind, message=f"{type(exc).__name__}: {exc}")


def search_web(
    search: WebSearch, query: str, max_results: int, stage: Stage, prefix: str
) -> tuple[list[Passage], StepError | None]:
    """One search with its ledger row (retries and billed credits included); failures become a recorded error and
    no passages, except a `FatalServiceError` (a revoked key, an exhausted plan), which stops the run."""
    started = time.perf_counter()
    with count_retries() as tally:
        try:
            found = search.search(query, max_results)
        except FatalServiceError:
            raise
        except Exception as exc:  # recorded, never raised: the pathway still yields a candidate
            seconds = time.perf_counter() - started
            record_tool_call(stage, seconds, backend=search.name, failed=True, retries=tally.total)
            return [], evidence_failure("dynamic", stage, exc)
    seconds = time.perf_counter() - started
    record_tool_call(stage, seconds, backend=search.name, failed=False, retries=tally.total, credits=tally.credits)
    return reid(list(found)[:max_results], prefix), None
