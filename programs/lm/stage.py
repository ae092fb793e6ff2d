"""Running one LM step: the right LM for its role, its token budget, its usage row, and its failure.

Every predictor call in the program goes through `run_stage`, so a failing or unparseable LM step becomes
a `StepError` in the trail (never a traceback) and every call is accounted for in the ledger.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import dspy
from dspy.utils.exceptions import (
    ContextWindowExceededError,
    LMRateLimitError,
    LMServerError,
    LMTimeoutError,
    LMTransportError,
)
from dspy.utils.usage_tracker import UsageTracker

from clearmed.backbones.reasoning import collect_thinking
from clearmed.errors import FatalServiceError
from clearmed.programs.lm.adapter import TolerantChatAdapter
from clearmed.programs.lm.prompt_fit import PromptFit, fit_prompt
from clearmed.programs.lm.run_context import current
from clearmed.programs.settings import Stage
from clearmed.retries import count_retries
from clearmed.signatures.records import CallUsage, ErrorKind, StepError
from clearmed.signatures.records.usage import THINKING_KEPT

_MAX_MESSAGE = 300
# Failures still there after the client's retries that a later attempt may not meet: the question is degraded.
_TRANSIENT = (LMRateLimitError, LMServerError, LMTimeoutError, LMTransportError, ContextWindowExceededError)


@dataclass(frozen=True)
class StageResult:
    """A stage's prediction, or the error that replaced it."""

    prediction: dspy.Prediction | None
    error: StepError | None

    @property
    def ok(self) -> bool:
        return self.prediction is not None


def _short(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 3] + "..."


def lm_name(lm: dspy.BaseLM | None) -> str:
    return str(getattr(lm, "model", "")) if lm is not None else ""


def is_cacheable(lm: dspy.BaseLM | None) -> bool:
    # DummyLM reports cache=True but never caches (`_cache_responses=False`).
    return bool(lm is not None and getattr(lm, "cache", False) and getattr(lm, "_cache_responses", True))


def _is_timeout(exc: BaseException) -> bool:
    # An HTTP read timeout reaches us as a transport error ("read timed out waiting for headers"), not as
    # LMTimeoutError; both mean the model was too slow, which the trail should say.
    if "Timeout" in type(exc).__name__ or getattr(exc, "code", None) == "timeout":
        return True
    return isinstance(exc, LMTransportError) and "timed out" in str(exc).lower()


def error_from_exception(stage: str, exc: BaseException) -> StepError:
    """Classify an exception raised by an LM step into a recorded, human-readable error."""
    if isinstance(exc, dspy.AdapterParseError):
        raw = exc.lm_response if isinstance(exc.lm_response, str) else None
        return StepError(stage=stage, kind="parse_error", message=_short(str(exc)), raw_output=raw)
    if isinstance(exc, dspy.LMError):
        kind: ErrorKind = "timeout" if _is_timeout(exc) else "lm_error"
        transient = kind == "timeout" or isinstance(exc, _TRANSIENT)
        return StepError(stage=stage, kind=kind, message=_short(f"{type(exc).__name__}: {exc}"), transient=transient)
    return StepError(stage=stage, kind="internal_error", message=_short(f"{type(exc).__name__}: {exc}"))


def context_window(lm: dspy.BaseLM | None) -> int | None:
    """The LM's window in tokens when it says (`ClearmedLM.context_window`; read by duck typing, like
    `run_context.supports_concurrency`), else None."""
    value = getattr(lm, "context_window", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def output_budget(lm: dspy.BaseLM | None, budget: int | None) -> int | None:
    """Tokens the call may write: the stage's cap, else the LM's own, raised to a thinking backbone's floor
    (`ClearmedLM.min_output_tokens`), as the client will raise it."""
    asked = budget or (getattr(lm, "kwargs", None) or {}).get("max_tokens")
    floor = getattr(lm, "min_output_tokens", None)
    values = [value for value in (asked, floor) if isinstance(value, int) and not isinstance(value, bool)]
    return max(values) if values else None


def run_stage(stage: Stage, predictor: dspy.Module, **inputs: object) -> StageResult:
    """Call `predictor` for `stage` under the run context; record usage; never raise for LM failures (a
    `FatalServiceError` is no failure of this step: it stops the run).

    Passages are left out first if the prompt would not fit the LM's context window (`prompt_fit`); the usage row
    says how many, and keeps the start of the model's thinking (`backbones.reasoning`)."""
    context = current()
    role, lm = context.lm_for(stage)
    budget = context.settings.max_tokens.get(stage)
    tracker = UsageTracker()
    adapter = TolerantChatAdapter(use_json_adapter_fallback=context.settings.json_fallback)
    started = time.perf_counter()
    prediction: dspy.Prediction | None = None
    error: StepError | None = None
    fit = PromptFit(dict(inputs))
    try:
        fit = fit_prompt(predictor, adapter, inputs, window=context_window(lm), output_budget=output_budget(lm, budget))
        with (
            count_retries() as retries,
            collect_thinking() as thinking,
            dspy.context(lm=lm, adapter=adapter, usage_tracker=tracker),
        ):
            config = {"max_tokens": budget} if budget else {}
            prediction = predictor(**fit.inputs, config=config)
    except FatalServiceError:
        raise
    except Exception as exc:  # every failure of an LM step is recorded, by design
        error = error_from_exception(stage, exc)
    seconds = time.perf_counter() - started
    entries = [entry for per_model in tracker.usage_data.values() for entry in per_model]
    context.ledger.add(
        CallUsage(
            stage=stage,
            role=role,
            model=lm_name(lm),
            calls=len(entries) if entries else (0 if is_cacheable(lm) and error is None else 1),
            prompt_tokens=sum(int(e.get("prompt_tokens") or 0) for e in entries),
            completion_tokens=sum(int(e.get("completion_tokens") or 0) for e in entries),
            seconds=round(seconds, 4),
            cached=not entries and error is None and is_cacheable(lm),
            failed=error is not None,
            retries=retries.total,
            passages_dropped=fit.dropped,
            fit_tokens=fit.limit,
            thinking=thinking.text[:THINKING_KEPT],
            thinking_chars=len(thinking.text),
        )
    )
    return StageResult(prediction=prediction, error=error)


def record_tool_call(
    stage: Stage,
    seconds: float,
    *,
    backend: str,
    failed: bool,
    cached: bool = False,
    retries: int = 0,
    credits: float = 0.0,
) -> None:
    """Ledger row for a non-LM call (retrieval, search) so cost per route includes evidence gathering."""
    current().ledger.add(
        CallUsage(
            stage=stage,
            role="tool",
            model=backend,
            seconds=round(seconds, 4),
            failed=failed,
            cached=cached,
            retries=retries,
            credits=credits,
        )
    )
