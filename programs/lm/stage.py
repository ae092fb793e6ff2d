"""Running one LM step: its role's LM, budget, usage row and recorded failure.

Every predictor call in the program goes through `run_stage`: the right LM for its role, its token budget, its
usage row and its failure, so a failing or unparseable LM step becomes a `StepError` in the trail (never a
traceback) and every call is accounted for in the ledger. `Shared` holds an evidence backend across DSPy's deep
copies.

What the modules hand each other are typed records (the `*Result` classes of `signatures.records.results`), never a
`dspy.Prediction` with ad-hoc keys.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

import dspy
from dspy.utils.exceptions import LMTransportError
from dspy.utils.usage_tracker import UsageTracker

from clearmed.backbones.failures import as_overflow, classify
from clearmed.backbones.reasoning import collect_thinking
from clearmed.core.errors import FatalServiceError
from clearmed.core.retries import count_retries
from clearmed.core.sanitize import mend_inputs
from clearmed.programs.lm.context import current
from clearmed.programs.lm.parsing import TolerantChatAdapter
from clearmed.programs.lm.prompting import PromptFit, estimate_tokens, fit_prompt, prompt_limit
from clearmed.signatures.records import CallUsage, ErrorKind, StepError
from clearmed.signatures.records.settings import Stage
from clearmed.signatures.records.usage import THINKING_KEPT

_MAX_MESSAGE = 300
# DSPy's adapter's words for a completion with no text (dspy/adapters/base.py).
_EMPTY_REPLY = "The LM returned an empty or null response"
Counter = Literal["server", "estimate"]
# A prompt estimated under this share of its limit fits whatever the tokenizer: the server is not asked to count it.
_SURE_SHARE = 0.6
# Times the fit is redone after the server counted more tokens than the estimate (each with the measured ratio).
_RECOUNTS = 3


@dataclass(frozen=True)
class StageResult:
    """A stage's prediction, or the error that replaced it; `truncated_at`: the token budget a reply was cut at (the
    server said it stopped at its length), None when none was."""

    prediction: dspy.Prediction | None
    error: StepError | None
    truncated_at: int | None = None

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
        if _EMPTY_REPLY in str(exc):
            # No reply is a failed call, not an unparseable answer (`backbones.failures`): the question is degraded
            # and redone on resume. `ClearmedLM` raises it before the adapter; an LM that does not reaches here.
            return StepError(stage=stage, kind="lm_error", message=_short(str(exc)), raw_output=raw, transient=True)
        return StepError(stage=stage, kind="parse_error", message=_short(str(exc)), raw_output=raw)
    if isinstance(exc, dspy.LMError):
        # One policy for every LM call (`backbones.failures`): transient failures degrade the question (redone on
        # resume); an overflow that reaches here survived a refit, so it is deterministic and recorded as such.
        failure = classify(exc)
        kind: ErrorKind = "timeout" if _is_timeout(exc) else "lm_error"
        if failure == "overflow":
            kind = "context_overflow"
        transient = failure == "transient" or kind == "timeout"
        return StepError(stage=stage, kind=kind, message=_short(f"{type(exc).__name__}: {exc}"), transient=transient)
    return StepError(stage=stage, kind="internal_error", message=_short(f"{type(exc).__name__}: {exc}"))


class _Replies:
    """This stage's replies as DSPy records them: an LM call's history entry is appended to the history of every
    module in `caller_modules`, a thread-local setting, so a stage reads its own replies, not another thread's."""

    def __init__(self) -> None:
        self.history: list[dict[str, object]] = []

    def truncated_at(self, lm: dspy.BaseLM | None) -> int | None:
        """The token budget a reply was cut at (its finish reason "length"), else None. Read off the reply in any
        shape DSPy keeps it (a native engine's `Response`, a LiteLLM response's choices), a cache hit's too."""
        for entry in self.history:
            if "length" not in _finish_reasons(entry.get("response")):
                continue
            asked = _field(entry.get("kwargs"), "max_tokens") or output_budget(lm, None)
            budget = asked if isinstance(asked, int) else _field(entry.get("usage"), "completion_tokens")
            return budget if isinstance(budget, int) and not isinstance(budget, bool) else 0
        return None


def _field(obj: object, name: str) -> object:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _finish_reasons(response: object) -> list[object]:
    """How each completion of a recorded reply ended: a `Response`'s own finish reason, or its choices'."""
    reasons: list[object] = []
    for item in response if isinstance(response, list | tuple) else [response]:
        reasons.append(_field(item, "finish_reason"))
        choices = _field(item, "choices")
        if isinstance(choices, list | tuple):
            reasons.extend(_field(choice, "finish_reason") for choice in choices)
    return reasons


def _truncated(error: StepError, budget: int) -> StepError:
    """A failed step whose reply was cut at its budget says so first: the cause, not the parse that followed."""
    cut = f"truncated at {budget} tokens (its output budget)" if budget else "truncated at the token limit"
    return error.model_copy(update={"message": _short(f"{cut}: {error.message}")})


def context_window(lm: dspy.BaseLM | None) -> int | None:
    """The LM's window in tokens when it says (`ClearmedLM.context_window`; read by duck typing, like
    `context.supports_concurrency`), else None."""
    value = getattr(lm, "context_window", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def output_budget(lm: dspy.BaseLM | None, budget: int | None) -> int | None:
    """Tokens the call may write: the stage's cap, else the LM's own, raised to a thinking backbone's floor
    (`ClearmedLM.min_output_tokens`), as the client will raise it."""
    asked = budget or (getattr(lm, "kwargs", None) or {}).get("max_tokens")
    floor = getattr(lm, "min_output_tokens", None)
    values = [value for value in (asked, floor) if isinstance(value, int) and not isinstance(value, bool)]
    return max(values) if values else None


def _prompt_text(predictor: dspy.Module, adapter: dspy.Adapter, inputs: Mapping[str, object]) -> str:
    """The prompt's text as the adapter would send it (what `fit_prompt` estimates), or the inputs' text alone."""
    try:
        first = predictor.predictors()[0]
        messages = adapter.format(first.signature, list(first.demos), dict(inputs))
        return "".join(str(message.get("content", "")) for message in messages)
    except Exception:  # an unusual module: measure what it is given
        return "".join(str(value) for value in inputs.values())


def _server_count(lm: dspy.BaseLM | None, text: str) -> int | None:
    """``text``'s tokens as the LM's server counts them (`ClearmedLM.count_tokens`, by duck typing), else None."""
    count = getattr(lm, "count_tokens", None)
    value = count(text) if callable(count) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _window_for(limit: int, window: int, budget: int | None) -> int:
    """The window whose `prompt_limit` is at most ``limit`` (at most ``window``): `fit_prompt` fits estimated tokens,
    so a prompt the server counts ``scale`` times larger is fitted to the limit divided by ``scale``."""
    low, high = 1, window
    while low < high:
        middle = (low + high + 1) // 2
        if prompt_limit(middle, budget) <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def _fit(
    predictor: dspy.Module,
    adapter: dspy.Adapter,
    inputs: Mapping[str, object],
    lm: dspy.BaseLM | None,
    window: int | None,
    budget: int | None,
    scale: float = 1.0,
) -> tuple[PromptFit, Counter | None, int | None]:
    """The prompt fitted to ``window``, how its tokens were counted, and the limit it was fitted to.

    Fitted on the estimate; then, when it comes near the limit, counted by the server's tokenizer where it has one, and
    refitted with the ratio it measured until the server's count fits (or nothing is left to leave out)."""
    if window is None:
        return fit_prompt(predictor, adapter, inputs, window=None, output_budget=budget), None, None
    limit = prompt_limit(window, budget)
    counter: Counter = "estimate"
    fit = PromptFit(dict(inputs))
    for _ in range(_RECOUNTS + 1):
        target = window if scale <= 1.0 else _window_for(int(limit / scale), window, budget)
        refit = fit_prompt(predictor, adapter, inputs, window=target, output_budget=budget)
        if counter == "server" and refit.inputs == fit.inputs:
            break  # nothing more to leave out: the call says whether it fits
        fit = refit
        text = _prompt_text(predictor, adapter, fit.inputs)
        estimated = estimate_tokens(text)
        if estimated < limit * _SURE_SHARE:
            break
        counted = _server_count(lm, text)
        if counted is None:
            break
        counter = "server"
        if counted <= limit:
            break
        scale = max(scale, counted / estimated) * 1.02  # a little beyond the measured ratio: passages differ
    return fit, counter, limit


def _refit(
    predictor: dspy.Module,
    adapter: dspy.Adapter,
    inputs: Mapping[str, object],
    lm: dspy.BaseLM | None,
    budget: int | None,
    sent: PromptFit,
    exc: BaseException,
) -> tuple[PromptFit, Counter | None, int | None] | None:
    """After a context-length error: the prompt fitted to the window the error named (the LM learned it), with the
    estimate corrected by the server's own count of the refused prompt; None when that changes nothing (the same
    prompt would overflow again)."""
    overflow = as_overflow(exc)
    if overflow is None:
        return None
    window = context_window(lm) or overflow.limit
    if window is None:
        return None
    scale = 1.0
    if overflow.prompt_tokens:
        scale = max(1.0, overflow.prompt_tokens / estimate_tokens(_prompt_text(predictor, adapter, sent.inputs)))
    refit = _fit(predictor, adapter, inputs, lm, window, budget, scale)
    return refit if refit[0].inputs != sent.inputs else None


def run_stage(stage: Stage, predictor: dspy.Module, **inputs: object) -> StageResult:
    """Call `predictor` for `stage` under the run context; record usage; never raise for LM failures (a
    `FatalServiceError` is no failure of this step: it stops the run; nor is a second Ctrl-C, `RetriesCut`).

    Passages are left out first if the prompt would not fit the LM's context window (`fit_prompt`, with the server's
    token count where it has one); a context-length error that names the window teaches it to the LM, and the stage is
    refitted and tried once more. The usage row says how many passages were left out, how they were counted, and keeps
    the start of the model's thinking (`backbones.reasoning`)."""
    inputs = mend_inputs(inputs)  # half a character a reply left in what this step quotes: U+FFFD, not a failed step
    context = current()
    role, lm = context.lm_for(stage)
    budget = context.settings.max_tokens.get(stage)
    tracker = UsageTracker()
    adapter = TolerantChatAdapter(use_json_adapter_fallback=context.settings.json_fallback)
    started = time.perf_counter()
    prediction: dspy.Prediction | None = None
    error: StepError | None = None
    fit = PromptFit(dict(inputs))
    counter: Counter | None = None
    limit: int | None = None
    refits = 0
    cap = output_budget(lm, budget)
    config = {"max_tokens": budget} if budget else {}
    replies = _Replies()
    # `caller_modules` as DSPy keeps it, with this stage's recorder: DSPy appends each reply's history entry to it.
    callers = [*(dspy.settings.caller_modules or []), replies]
    # Opened first, so that a failure anywhere below (asking a server for its window included) is recorded with the
    # retries it took: a throttled window or token-count request is retried and counted like the call.
    with count_retries() as retries, collect_thinking() as thinking:
        try:
            fit, counter, limit = _fit(predictor, adapter, inputs, lm, context_window(lm), cap)
            try:
                with dspy.context(lm=lm, adapter=adapter, usage_tracker=tracker, caller_modules=callers):
                    prediction = predictor(**fit.inputs, config=config)
            except dspy.ContextWindowExceededError as exc:
                refit = _refit(predictor, adapter, inputs, lm, cap, fit, exc)
                if refit is None:
                    raise
                (fit, counter, limit), refits = refit, 1
                with dspy.context(lm=lm, adapter=adapter, usage_tracker=tracker, caller_modules=callers):
                    prediction = predictor(**fit.inputs, config=config)
        except FatalServiceError:
            raise
        except Exception as exc:  # every failure of an LM step is recorded, by design
            error = error_from_exception(stage, exc)
    truncated_at = replies.truncated_at(lm)
    if error is not None and truncated_at is not None:
        error = _truncated(error, truncated_at)
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
            passages_dropped_ids=list(fit.dropped_ids),
            fit_tokens=limit if fit.dropped else None,
            token_counter=counter,
            refits=refits,
            thinking=thinking.text[:THINKING_KEPT],
            thinking_chars=len(thinking.text),
        )
    )
    return StageResult(prediction=prediction, error=error, truncated_at=truncated_at)


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


T = TypeVar("T")


class Shared(Generic[T]):
    """Holds an evidence backend (a BM25 index, a search client) across `module.deepcopy()`.

    Optimizers deep-copy programs many times; an index of a million passages must not be copied with them.
    """

    def __init__(self, value: T, what: str = "evidence backend") -> None:
        self._value = value
        self.what = what  # how a detached backend is named: "local corpus", "web search"
        self.detached = False

    @property
    def value(self) -> T:
        """The backend (None: the config has none). A program loaded from a pickle holds none of the backends it was
        saved with: reading one stops the run in one line (`FatalServiceError`) instead of answering without it."""
        if self.detached:
            raise FatalServiceError(
                self.what,
                "local_data",
                "this program was loaded from a pickle, which keeps no index or search client: build it from its "
                "config (clearmed.build_program) and load its saved state (program.load) instead",
            )
        return self._value

    @value.setter
    def value(self, backend: T) -> None:  # wiring a loaded program to a backend again
        self._value, self.detached = backend, False

    def __deepcopy__(self, memo: dict[int, object]) -> Shared[T]:
        return self

    # A pickled program (`program.save(path, save_program=True)`) leaves its backend out, as it does its keys: an index,
    # a search client and its cache hold connections, threads and locks that belong to a run, not to the program. Its
    # pickle remembers that there was one, so the loaded program says so rather than answer as if none were configured.
    def __getstate__(self) -> dict[str, object]:
        return {"value": None, "what": self.what, "held": self._value is not None}

    def __setstate__(self, state: dict[str, object]) -> None:
        self._value = None  # type: ignore[assignment]
        self.what = str(state.get("what", "evidence backend"))
        self.detached = bool(state.get("held", False))

    def __repr__(self) -> str:
        if self.detached:
            return f"Shared(detached {self.what})"
        return f"Shared({type(self._value).__name__})"
