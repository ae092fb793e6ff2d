"""Failures recorded instead of raised, and the cost of every call."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from clearmed.core.sanitize import redact_secrets
from clearmed.signatures.records.base import Record

ErrorKind = Literal[
    "lm_error",
    "parse_error",
    "invalid_answer",
    "retrieval_error",
    "search_error",
    "timeout",
    "internal_error",
    # the prompt did not fit the context window even after the stage refitted it to the window the server named:
    # deterministic, so not transient (a resume would meet it again)
    "context_overflow",
    # a pathway left out by choice (recorded pathways: `--pathway dynamic=absent`): no failure, and not degraded
    "not_run",
]


class StepError(Record):
    """A failure recorded in the trail instead of raised: which stage, what kind, and the message.

    `transient` marks a failure a later attempt may not meet (a rate limit, timeout, server or connection error, or a
    200 whose body is no reply, each still failing after its retries): the question is then degraded, reported apart
    from clean answers and redone on resume. An unparseable output, an empty search, or a prompt still over the
    context window after it was refitted (`context_overflow`) is not transient.
    """

    stage: str
    kind: ErrorKind
    message: str
    raw_output: str | None = None
    transient: bool = False

    # Provider errors sometimes quote the credentials they were sent; recorded errors end up in run folders.
    @field_validator("message", "raw_output")
    @classmethod
    def _redact(cls, value: str | None) -> str | None:
        return redact_secrets(value) if value is not None else None


# The dynamic pathway's recorded error when its web search returned no page (a Tavily 200 with an empty `results`
# list): not a failure, so not transient; the run summary counts these questions (`empty_searches`) by this message.
EMPTY_SEARCH = "the search found nothing"


# Characters of a stage's thinking kept in its usage row: enough to see how it reasoned, not a transcript.
THINKING_KEPT = 4000


class CallUsage(Record):
    """One LM or search call: what it cost. Cache hits cost no tokens but are still listed.

    `retries` are the attempts the client repeated (rate limits, server errors); `credits` what a metered search
    service billed (Tavily: 1 per basic search, 2 per advanced; 0 for a cache hit). `passages_dropped` passages were
    left out so the prompt would fit `fit_tokens` (`programs.lm.prompting.fit_prompt`); `thinking` is the start of
    what a reasoning model thought before answering (at most `THINKING_KEPT` characters of `thinking_chars`). `token_counter`
    says how the prompt was measured for the fit: ``server`` (the server's own ``/tokenize``), ``estimate`` (3.2
    characters per token), None when no window was known; `refits` how often the stage refitted its prompt after a
    context-length error and tried again; `error` a failure the stage survived (a scoring pass that fell back to
    generation) in one line."""

    stage: str
    role: str = "main"
    model: str = ""
    calls: int = 1
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cached: bool = False
    failed: bool = False
    retries: int = 0
    credits: float = 0.0
    passages_dropped: int = 0
    passages_dropped_ids: list[str] = Field(default_factory=list)  # in the order they were left out
    fit_tokens: int | None = None
    token_counter: Literal["server", "estimate"] | None = None
    refits: int = 0
    error: str = ""
    thinking: str = ""
    thinking_chars: int = 0

    @field_validator("error")
    @classmethod
    def _redact_error(cls, value: str) -> str:
        return redact_secrets(value)

    @property
    def note(self) -> str:
        """What the trail says about the call beyond its cost ("" when nothing)."""
        if not self.passages_dropped:
            return ""
        plural = "passage" if self.passages_dropped == 1 else "passages"
        which = f" ({', '.join(self.passages_dropped_ids)})" if self.passages_dropped_ids else ""
        return f"{self.passages_dropped} {plural} dropped to fit {self.fit_tokens:,} prompt tokens{which}"
