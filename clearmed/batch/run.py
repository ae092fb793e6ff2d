"""A run through the providers' batch APIs (`eval --batch`): half the price, in passes, resumable after a kill.

Each pass runs every unfinished question until its next LM call misses the cache (`runner.run_evaluation` under a
`backbones.batch_calls.BatchPass`: a call that missed is queued and its question left unrecorded). The queued calls
go out as provider batches, split at the provider's limits (`backbones.batch_api.split_lines`), each recorded in the
run folder the moment the provider accepts it (`batch.store`); the run waits for them, stores each line's outcome, and
runs the next pass, in which those calls are answered from the batches and cached by DSPy under the keys the
synchronous calls would have used. Each pass moves every question on by one stage (its three pathways, the verifier,
the guard, audit and follow-up): four to six passes make a CLEAR run.

Promises:
- **The same decisions** as the same run made synchronously: a call is answered with the very body its synchronous
  request would have been answered with, parsed and cached by the same code.
- **A kill loses nothing paid for.** A rerun reattaches to the batches still in flight (by the ids recorded before
  anything waited on them) and sends none of their lines again; a line already answered is never sent again.
- **Expiry and failures.** An expired or cancelled batch keeps its answered part; the rest is sent again in the next
  pass. A failed line is sent again in a later batch up to the backbone's ``num_retries``; then its error is the
  call's reply, and the stage is degraded as a synchronous call's would be. A batch the provider refuses (its file or
  its validation) stops the run with the provider's reason in one line.
- **Costs.** Each collected batch is one spend-log entry at the batch price, with its id; the questions' own records
  are priced at the batch price too. With ``--max-cost``, a batch is sent only if its worst case (every prompt byte a
  token, every call at its output cap) fits what is left.
- **Progress** in eval's line form: a line per pass and per submission, and while waiting at most one a minute.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dspy
from rich.console import Console

from clearmed.backbones.batch_api import (
    BatchClient,
    BatchLine,
    BatchRejected,
    BatchState,
    LineResult,
    batch_client_for,
    no_batch_reason,
    split_lines,
)
from clearmed.backbones.batch_calls import BatchPass, batch_pass, install_batch_calls
from clearmed.backbones.config import BackboneConfig, RemoteBackbone
from clearmed.backbones.factory import build_lm
from clearmed.backbones.pricing import cost_usd
from clearmed.batch.store import BatchCollected, BatchSending, BatchStore, BatchSubmitted, LineOutcome
from clearmed.config import ClearmedConfig
from clearmed.core.console import user_console
from clearmed.core.errors import UsageError
from clearmed.evaluation.folder import EvalSpec
from clearmed.evaluation.progress import clock_text
from clearmed.evaluation.runner import BudgetReached, RunInterrupted, Scorer, default_scorer, run_evaluation
from clearmed.evaluation.spend import Prices
from clearmed.evaluation.spend_log import SpendLog
from clearmed.evaluation.store import EvalRecord
from clearmed.signatures.records import CallUsage

__all__ = ["BatchStalled", "batch_clients", "run_batched", "worst_case_usd"]

# A call without an output cap in its body is counted at this many output tokens in a batch's worst case.
_UNCAPPED_OUTPUT_TOKENS = 16_384
# The metadata key of a batch's intent (`store.BatchSending`), by which a rerun finds a batch whose id a kill lost.
INTENT_KEY = "clearmed_intent"
# Seconds between progress lines while batches are in flight.
_PROGRESS_EVERY_S = 60.0


class BatchStalled(RuntimeError):
    """A pass deferred questions without a call to send: a bug, stopped in one line rather than looped on."""


def batch_clients(config: ClearmedConfig, *, note: Callable[[str], object] | None = None) -> dict[str, BatchClient]:
    """A batch client for each backbone role whose provider has a batch API. The main backbone must have one (else the
    run is refused in one line, `no_batch_reason`); another role without one (a grader on a local server) is called
    synchronously as ever, said once through ``note``. A backbone whose calls DSPy sends through LiteLLM, which a batch
    run cannot answer, is refused too."""
    clients: dict[str, BatchClient] = {}
    for role, backbone in config.backbones.items():
        reason = no_batch_reason(role, backbone)
        if reason is not None:
            if role == "main":
                raise UsageError(reason)
            if note is not None:
                note(f"note: backbone {role} ({backbone.model}) has no batch API: its calls are made synchronously")
            continue
        key_env = backbone.api_key_env if isinstance(backbone, RemoteBackbone) else None
        client = batch_client_for(
            backbone,
            api_key=os.environ.get(key_env) if key_env else None,
            timeout=backbone.timeout if isinstance(backbone, RemoteBackbone) else 60.0,
            num_retries=backbone.num_retries,
        )
        if client is None:  # no_batch_reason said it had one: the two disagree
            raise UsageError(f"backbone {role} ({backbone.model}) has no batch client")
        if build_lm(backbone, role=role).sends_through_litellm():
            raise UsageError(
                f"backbone {role} ({backbone.model}): DSPy sends its calls through LiteLLM (for its extra options), "
                "which a batch run cannot answer; drop those options or run without --batch"
            )
        clients[role] = client
    return clients


def worst_case_usd(lines: Sequence[BatchLine], backbone: BackboneConfig) -> float | None:
    """What the lines can cost at most at the batch price: every byte of their messages a prompt token, every call
    at its output cap (the body's, else the backbone's, else `_UNCAPPED_OUTPUT_TOKENS`); None: the price is unknown."""
    prompt = sum(len(json.dumps(line.body.get("messages") or line.body, ensure_ascii=False).encode()) for line in lines)
    cap = backbone.max_tokens or _UNCAPPED_OUTPUT_TOKENS
    output = sum(int(line.body.get("max_completion_tokens") or line.body.get("max_tokens") or cap) for line in lines)
    return cost_usd(backbone, prompt, output, batch=True)


def _usage(body: Mapping[str, Any] | None) -> tuple[int, int]:
    """A reply's prompt and completion tokens (OpenAI's names, or Anthropic's)."""
    usage = (body or {}).get("usage") or {}
    prompt = usage.get("prompt_tokens", usage.get("input_tokens", 0))
    completion = usage.get("completion_tokens", usage.get("output_tokens", 0))
    return int(prompt or 0), int(completion or 0)


def _outcome(batch_id: str, result: LineResult) -> LineOutcome:
    return LineOutcome(
        key=result.custom_id,
        batch_id=batch_id,
        status_code=result.status_code,
        body=result.body,
        error_code=result.error_code,
        error_message=result.error_message,
        not_run=result.expired,
    )


@dataclass
class _Batches:
    """The run's batches at the providers: submitting, waiting, collecting (with the run folder's record of them)."""

    spec: EvalSpec
    config: ClearmedConfig
    clients: dict[str, BatchClient]
    store: BatchStore
    prices: Prices
    console: Console
    max_cost: float | None
    poll_s: float
    sleep: Callable[[float], None]
    clock: Callable[[], float]
    submitted_at: dict[str, float] = field(default_factory=dict)

    def role_of(self, url: str, body: Mapping[str, Any]) -> str:
        """The role whose backbone a line calls: the one whose client serves its URL and whose model it names."""
        model = str(body.get("model") or "")
        serving = [role for role, client in self.clients.items() if client.handles(url)]
        named = [role for role in serving if self.config.backbones[role].model.partition("/")[2] == model]
        return (named or serving or ["main"])[0]

    def submit(self, pending: Mapping[str, tuple[str, dict[str, Any]]], run_pass: int, questions_left: int) -> None:
        """Send the pass's queued calls as batches, each recorded as soon as the provider has accepted it."""
        by_role: dict[str, list[BatchLine]] = {}
        for key, (url, body) in pending.items():
            by_role.setdefault(self.role_of(url, body), []).append(BatchLine(custom_id=key, url=url, body=body))
        for role, lines in by_role.items():
            client = self.clients[role]
            for chunk in split_lines(lines, client.limits):
                worst = worst_case_usd(chunk, self.config.backbones[role])
                self._check_budget(worst, questions_left)
                sending = BatchSending(
                    intent=uuid.uuid4().hex,
                    provider=client.provider,
                    role=role,
                    keys=[line.custom_id for line in chunk],
                    worst_usd=worst,
                    run_pass=run_pass,
                )
                self.store.record_sending(sending)
                metadata = {
                    INTENT_KEY: sending.intent,
                    "clearmed_run": self.spec.run_dir.name[:512],
                    "clearmed_pass": str(run_pass),
                }
                state = client.submit(chunk, metadata=metadata)
                self.record(sending, state.id)
                self.submitted_at[state.id] = self.clock()
                self.say(f"batch pass {run_pass}: sent batch {state.id} ({len(chunk):,} requests, {role})")

    def record(self, sending: BatchSending, batch_id: str) -> None:
        """Record the provider's id for a batch sent."""
        fields = sending.model_dump(exclude={"event", "intent", "at"})
        self.store.record_submitted(BatchSubmitted(batch_id=batch_id, intent=sending.intent, **fields))

    def recover(self) -> None:
        """Find the batches a killed run had sent whose ids never reached the folder (the kill came between the
        provider's answer and the record), by the intent in their metadata; one not found was not made, and its lines
        go out again with the next pass."""
        for sending in self.store.unanswered_intents():
            client = self.clients.get(sending.role)
            found = client.find(INTENT_KEY, sending.intent) if client is not None else None
            if found is not None:
                self.record(sending, found.id)
                self.say(f"found batch {found.id}, sent just before the previous run stopped")

    def _check_budget(self, worst: float | None, questions_left: int) -> None:
        if self.max_cost is None:
            return
        spent = SpendLog(self.spec.run_dir, self.prices).total_usd()
        in_flight = sum(self.store.submitted[batch_id].worst_usd or 0.0 for batch_id in self.store.batches_in_flight())
        if worst is None or spent + in_flight + worst > self.max_cost:
            raise BudgetReached(spent, self.max_cost, questions_left)

    def wait(self, run_pass: int) -> None:
        """Wait for every batch in flight (reattaching to those a killed run left) and collect each as it ends."""
        last_line = -_PROGRESS_EVERY_S
        while in_flight := self.store.batches_in_flight():
            states: list[BatchState] = []
            for batch_id in in_flight:
                client = self.clients.get(self.store.submitted[batch_id].role)
                if client is None:  # the config no longer has that role: nothing to reattach with
                    raise UsageError(
                        f"batch {batch_id} was sent for backbone {self.store.submitted[batch_id].role}, which this "
                        "config does not have; rerun with the config the run began with"
                    )
                state = client.status(batch_id)
                if state.terminal:
                    self.collect(client, state)
                else:
                    states.append(state)
            if not states:
                return
            if self.clock() - last_line >= _PROGRESS_EVERY_S:
                last_line = self.clock()
                self._progress(run_pass, states)
            self.sleep(self.poll_s)

    def _progress(self, run_pass: int, states: Sequence[BatchState]) -> None:
        total = sum(state.request_counts.total for state in states)
        done = sum(state.request_counts.completed for state in states)
        failed = sum(state.request_counts.failed for state in states)
        now_wall = time.time()
        ages = [
            now_wall - state.created_at if state.created_at else self.clock() - self.submitted_at.get(state.id, 0.0)
            for state in states
        ]
        self.say(
            f"batch pass {run_pass}: {len(states)} batch{'es' if len(states) != 1 else ''} in flight, "
            f"{done:,} of {total:,} requests done, {failed:,} failed, oldest {clock_text(max(0.0, *ages))}"
        )

    def collect(self, client: BatchClient, state: BatchState) -> None:
        """Store a finished batch's lines and log what it cost, at the batch price, under its id."""
        submitted = self.store.submitted[state.id]
        if state.status == "failed":
            why = "; ".join(state.errors) or "no reason given"
            self.store.record_collected(BatchCollected(batch_id=state.id, status=state.status), [])
            raise BatchRejected(f"batch {state.id} failed at the provider ({client.provider}): {why}")
        results = {result.custom_id: result for result in client.results(state)}
        keys = set(submitted.keys)
        outcomes = [_outcome(state.id, result) for key, result in results.items() if key in keys]
        # A line the provider returned nothing for did not run: it is sent again.
        outcomes += [
            LineOutcome(key=key, batch_id=state.id, not_run=True) for key in submitted.keys if key not in results
        ]
        answered = [outcome for outcome in outcomes if outcome.answered]
        prompt = sum(_usage(outcome.body)[0] for outcome in answered)
        completion = sum(_usage(outcome.body)[1] for outcome in answered)
        backbone = self.config.backbones[submitted.role]
        usd = cost_usd(backbone, prompt, completion, batch=True)
        failed = sum(1 for outcome in outcomes if not outcome.answered and not outcome.not_run)
        not_run = sum(1 for outcome in outcomes if outcome.not_run)
        # The spend first, once per batch id: a kill between the two collects the batch again, and finds it logged.
        row = CallUsage(
            stage="batch",
            role=submitted.role,
            model=backbone.model,
            calls=len(answered),
            prompt_tokens=prompt,
            completion_tokens=completion,
        )
        log = SpendLog(self.spec.run_dir, self.prices)
        if state.id not in log.batch_ids:
            log.add(f"batch {state.id}", row, usd=usd, batch_id=state.id)
        self.store.record_collected(
            BatchCollected(
                batch_id=state.id, status=state.status, answered=len(answered), failed=failed, not_run=not_run, usd=usd
            ),
            outcomes,
        )
        note = f", {failed:,} failed" if failed else ""
        note += f", {not_run:,} not run ({state.status}): sent again" if not_run else ""
        self.say(f"batch {state.id} {state.status}: {len(answered):,} answered{note}")

    def say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)


def run_batched(
    spec: EvalSpec,
    config: ClearmedConfig,
    program: dspy.Module,
    *,
    scorer: Scorer = default_scorer,
    num_threads: int = 1,
    console: Console | None = None,
    keep_degraded: bool = False,
    max_cost: float | None = None,
    clients: Mapping[str, BatchClient] | None = None,
    poll_s: float = 30.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> list[EvalRecord]:
    """Run `spec`'s questions through provider batches, pass after pass, until every question is recorded; return every
    record of the run (as `run_evaluation` does). ``clients``: role -> batch client (default: `batch_clients`)."""
    console = console or user_console(stderr=True)
    chosen = dict(clients) if clients is not None else batch_clients(config)
    if not install_batch_calls():
        raise UsageError("this DSPy's native engine cannot be batched (no lm15 provider base); run without --batch")
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    store = BatchStore(spec.run_dir)
    prices = Prices.of(config, batched_roles=frozenset(chosen))
    batches = _Batches(spec, config, chosen, store, prices, console, max_cost, poll_s, sleep, clock)
    batches.recover()
    if store.batches_in_flight():
        batches.say(f"reattaching to {len(store.batches_in_flight())} batch(es) a previous run left in flight")
        try:
            batches.wait(0)
        except KeyboardInterrupt:
            raise RunInterrupted(0, len(spec.questions)) from None
    retries = max((backbone.num_retries for backbone in config.backbones.values()), default=3)
    run_pass = 0
    while True:
        run_pass += 1
        current = BatchPass(store, lambda url: any(client.handles(url) for client in chosen.values()), retries=retries)
        with batch_pass(current):
            records = run_evaluation(
                spec,
                config,
                program,
                scorer=scorer,
                num_threads=num_threads,
                console=console,
                show_progress=False,
                # Degraded in an earlier pass of this run: its line is out of retries; redone by the next rerun.
                keep_degraded=keep_degraded or run_pass > 1,
                max_cost=max_cost,
                batched_roles=frozenset(chosen),
            )
        left = len(spec.questions) - len(records)
        batches.say(
            f"batch pass {run_pass}: {len(records):,} of {len(spec.questions):,} questions recorded, "
            f"{current.served:,} calls answered from batches, {len(current.pending):,} to send"
        )
        if not current.pending:
            if left and current.deferred:
                raise BatchStalled(
                    f"batch pass {run_pass} left {left} questions waiting with no call to send; rerun the command"
                )
            return records
        batches.submit(current.pending, run_pass, left)
        try:
            batches.wait(run_pass)
        except KeyboardInterrupt:
            # The batches keep running at the provider; their ids are in the folder, and a rerun reattaches.
            batches.say(
                f"interrupted while {len(store.batches_in_flight())} batch(es) were in flight: they keep running at the "
                "provider, and the same command reattaches to them"
            )
            raise RunInterrupted(len(records), len(spec.questions)) from None
