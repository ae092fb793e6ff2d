"""Per-question state shared by every stage: the settings, the LMs per role and the usage ledger.

It travels in a context variable so that pathway modules keep plain DSPy `forward` signatures, and so
that concurrent questions (DSPy's threaded `Evaluate`/`batch`) each get their own ledger.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import dspy

from clearmed.signatures.records import CallUsage
from clearmed.signatures.records.settings import ASSESSOR_STAGES, ProgramSettings

# Where each usage row also goes the moment its call completes (an evaluation's append-only spend log), so a kill
# mid-question loses none of what was paid. Set by the caller around a question; pathway threads inherit it.
USAGE_SINK: contextvars.ContextVar[Callable[[CallUsage], None] | None] = contextvars.ContextVar(
    "clearmed_usage_sink", default=None
)


@dataclass
class Ledger:
    """Usage rows appended by concurrent stages of one question (and passed on to `USAGE_SINK`)."""

    rows: list[CallUsage] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, row: CallUsage) -> None:
        with self._lock:
            self.rows.append(row)
        sink = USAGE_SINK.get()
        if sink is not None:
            sink(row)


@dataclass
class RunContext:
    settings: ProgramSettings = field(default_factory=ProgramSettings)
    role_lms: dict[str, dspy.BaseLM] = field(default_factory=dict)
    ledger: Ledger = field(default_factory=Ledger)

    def lm_for(self, stage: str) -> tuple[str, dspy.BaseLM | None]:
        """The (role, LM) a stage runs on: the assessor for quality judgements when one is configured."""
        if stage in ASSESSOR_STAGES and "assessor" in self.role_lms:
            return "assessor", self.role_lms["assessor"]
        return "main", self.role_lms.get("main") or dspy.settings.lm


def supports_concurrency(lm: dspy.BaseLM) -> bool:
    """False when the LM's engine serializes every call (the in-process llama.cpp engine says so through
    `serializes_calls`); True otherwise. Read by duck typing, so the program never imports a backbone."""
    engine = getattr(lm, "engine", None)
    return not getattr(engine, "serializes_calls", False)


_CURRENT: contextvars.ContextVar[RunContext | None] = contextvars.ContextVar("clearmed_run", default=None)


class NoRunContext(RuntimeError):
    """A stage ran outside a run: its usage rows would have nowhere to go."""


def current() -> RunContext:
    """The active run context. Outside `activate(...)` (which CLEAR and SinglePathway open per question) this
    raises rather than hand out a throwaway context whose usage rows would silently vanish."""
    context = _CURRENT.get()
    if context is None:
        raise NoRunContext("no active run context: run stages inside `activate(RunContext(...))`")
    return context


@contextlib.contextmanager
def activate(context: RunContext) -> Iterator[RunContext]:
    token = _CURRENT.set(context)
    try:
        yield context
    finally:
        _CURRENT.reset(token)
