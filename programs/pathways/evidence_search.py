"""Gathering evidence for a pathway: the query, bundle-unique passage ids, and search calls that never raise."""

from __future__ import annotations

import errno
import time

from clearmed.errors import FatalServiceError
from clearmed.programs.lm.stage import record_tool_call
from clearmed.programs.settings import Stage
from clearmed.retries import count_retries
from clearmed.retrieval.base import FATAL_FAILURES, TRANSIENT_FAILURES, EvidenceError, WebSearch
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
    """The recorded failure of a search or retrieval: transient (the question is degraded, and redone on resume) or
    deterministic. A failure every later search would meet too (a corrupt or unwritable cache or index) is raised as
    `FatalServiceError` instead: the run stops with one line rather than answer the rest with an empty search."""
    kind: ErrorKind = "retrieval_error" if pathway == "local" else "search_error"
    if isinstance(exc, EvidenceError):
        if exc.kind in FATAL_FAILURES:
            what = "local index" if pathway == "local" else f"{exc.backend or 'web'} search"
            raise FatalServiceError(what, "local_data", str(exc)) from exc
        transient = exc.kind in TRANSIENT_FAILURES
        return StepError(stage=stage, kind=kind, message=f"{exc.kind}: {exc}", transient=transient)
    if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):  # no descriptor left: may pass
        return StepError(stage=stage, kind=kind, message=f"{type(exc).__name__}: {exc}", transient=True)
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
