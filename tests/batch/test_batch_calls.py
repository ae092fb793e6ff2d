"""The rules of a batch run's calls (`backbones.batch_calls`) and of its folder's record of batches
(`batch.store`), each on its own: what is answered, queued, sent as it is, or failed; what a kill leaves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clearmed.backbones.batch_calls import BatchPass, batch_pass, line_key, served_reply
from clearmed.batch.store import (
    BATCHES_FILE,
    RESULTS_FILE,
    BatchCollected,
    BatchStore,
    BatchSubmitted,
    LineOutcome,
)
from clearmed.core.errors import CallDeferred

URL = "https://api.openai.com/v1/chat/completions"
BODY = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Which hormone?"}]}
REPLY = {"choices": [{"message": {"role": "assistant", "content": "A"}}], "usage": {"prompt_tokens": 3}}


def batched(url: str) -> bool:
    return url == URL


def test_a_lines_key_is_its_url_and_body_whatever_the_order_of_the_bodys_keys() -> None:
    reordered = {"messages": BODY["messages"], "model": "gpt-4o-mini"}
    assert line_key(URL, BODY) == line_key(URL, reordered)
    assert line_key(URL, BODY) != line_key(URL, {**BODY, "model": "gpt-4o"})
    assert line_key(URL, BODY) != line_key("https://other.example/v1/chat/completions", BODY)
    assert len(line_key(URL, BODY)) <= 64  # Anthropic's custom_id limit


def _collected(store: BatchStore, batch_id: str, *outcomes: LineOutcome) -> None:
    store.record_submitted(
        BatchSubmitted(batch_id=batch_id, provider="openai", role="main", keys=[o.key for o in outcomes])
    )
    store.record_collected(BatchCollected(batch_id=batch_id, status="completed"), list(outcomes))


def test_a_call_with_no_answer_is_queued_once_and_defers_its_question(tmp_path: Path) -> None:
    current = BatchPass(BatchStore(tmp_path), batched, retries=1)
    for _ in range(2):  # the same request from two questions: one line
        with pytest.raises(CallDeferred):
            current.serve(URL, BODY)
    assert list(current.pending) == [line_key(URL, BODY)]
    assert current.deferred == 2


def test_an_answered_line_is_the_calls_reply(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    _collected(store, "b1", LineOutcome(key=line_key(URL, BODY), batch_id="b1", status_code=200, body=REPLY))
    current = BatchPass(store, batched, retries=1)
    assert current.serve(URL, BODY) == (200, REPLY)
    assert current.pending == {}
    assert current.served == 1


def test_a_url_no_batch_client_serves_is_sent_as_it_is(tmp_path: Path) -> None:
    current = BatchPass(BatchStore(tmp_path), batched, retries=1)
    assert current.serve("http://127.0.0.1:8000/v1/chat/completions", BODY) is None
    assert current.pending == {}


def test_a_line_in_flight_defers_without_being_queued_again(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    store.record_submitted(BatchSubmitted(batch_id="b1", provider="openai", role="main", keys=[line_key(URL, BODY)]))
    current = BatchPass(store, batched, retries=1)
    with pytest.raises(CallDeferred):
        current.serve(URL, BODY)
    assert current.pending == {}


def test_a_failed_line_is_queued_again_until_its_retries_are_spent_then_its_error_is_the_reply(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    key = line_key(URL, BODY)
    error = {"error": {"message": "server error", "type": "server_error", "param": None, "code": None}}
    for attempt in range(2):  # retries = 1: the first failure is sent again, the second is the call's reply
        _collected(store, f"b{attempt}", LineOutcome(key=key, batch_id=f"b{attempt}", status_code=500, body=error))
        current = BatchPass(store, batched, retries=1)
        if attempt == 0:
            with pytest.raises(CallDeferred):
                current.serve(URL, BODY)
            assert key in current.pending
        else:
            assert current.serve(URL, BODY) == (500, error)


def test_an_error_entry_without_a_response_fails_as_a_500_in_openais_shape(tmp_path: Path) -> None:
    outcome = LineOutcome(key="k", batch_id="b", error_code="server_error", error_message="boom")
    status, body = outcome.as_reply()
    assert status == 500
    assert body["error"]["code"] == "server_error"
    assert "boom" in body["error"]["message"]


def test_a_line_not_run_is_sent_again_and_never_counted_as_a_failure(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    key = line_key(URL, BODY)
    for attempt in range(3):
        _collected(store, f"b{attempt}", LineOutcome(key=key, batch_id=f"b{attempt}", not_run=True))
    current = BatchPass(store, batched, retries=0)
    with pytest.raises(CallDeferred):
        current.serve(URL, BODY)
    assert key in current.pending


def test_failures_count_from_this_process_so_a_rerun_gives_a_line_its_retries_anew(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    key = line_key(URL, BODY)
    _collected(store, "b1", LineOutcome(key=key, batch_id="b1", status_code=500, body={"error": {"message": "x"}}))
    assert store.failures(key)[0] == 1
    reread = BatchStore(tmp_path)
    assert reread.failures(key)[0] == 0
    assert reread.failures(key)[1] is not None


def test_a_rerun_finds_the_batches_in_flight_and_skips_a_torn_last_line(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    store.record_submitted(BatchSubmitted(batch_id="b1", provider="openai", role="main", keys=["k1", "k2"]))
    _collected(store, "b2", LineOutcome(key="k3", batch_id="b2", status_code=200, body=REPLY))
    with (tmp_path / BATCHES_FILE).open("ab") as handle:
        handle.write(b'{"event": "submitted", "batch_id": "b3", "prov')  # a kill mid-write
    with (tmp_path / RESULTS_FILE).open("ab") as handle:
        handle.write(b'{"key": "k9", "batch_')
    reread = BatchStore(tmp_path)
    assert reread.batches_in_flight() == ["b1"]
    assert reread.in_flight("k1")
    assert not reread.in_flight("k3")
    assert reread.answer("k3") == (200, REPLY)
    assert reread.answer("k9") is None
    reread.record_submitted(BatchSubmitted(batch_id="b4", provider="openai", role="main", keys=["k4"]))
    assert BatchStore(tmp_path).batches_in_flight() == ["b1", "b4"]  # the torn line did not swallow the next one


def test_a_reply_is_stored_as_the_provider_sent_it(tmp_path: Path) -> None:
    key_shaped = {**REPLY, "note": "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"}  # text a redaction would change
    store = BatchStore(tmp_path)
    _collected(store, "b1", LineOutcome(key="k", batch_id="b1", status_code=200, body=key_shaped))
    assert BatchStore(tmp_path).answer("k") == (200, key_shaped)


def test_outside_a_pass_nothing_is_served_and_one_pass_runs_at_a_time(tmp_path: Path) -> None:
    assert served_reply(URL, BODY) is None
    current = BatchPass(BatchStore(tmp_path), batched, retries=0)
    with batch_pass(current):
        with pytest.raises(CallDeferred):
            served_reply(URL, BODY)
        with pytest.raises(RuntimeError), batch_pass(BatchPass(BatchStore(tmp_path), batched, retries=0)):
            pass
    assert served_reply(URL, BODY) is None


def test_dspys_native_call_is_answered_from_the_pass_and_parsed_as_a_synchronous_reply(tmp_path: Path) -> None:
    """The hook at lm15's transport: a hosted model's call in a pass gets the stored body, parsed by DSPy."""
    import dspy

    lm = dspy.LM("openai/gpt-4o-mini", api_key="sk-test", cache=False, num_retries=0)
    messages = [{"role": "user", "content": "Which hormone?"}]
    seen: dict[str, Any] = {}

    class Recorder:
        def answer(self, key: str) -> tuple[int, dict[str, Any]] | None:
            seen["key"] = key
            return 200, {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-4o-mini",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "Cortisol"}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
            }

        def failures(self, key: str) -> tuple[int, None]:
            return 0, None

        def in_flight(self, key: str) -> bool:
            return False

    with batch_pass(BatchPass(Recorder(), lambda url: url.endswith("/chat/completions"), retries=0)):
        assert lm(messages=messages) == ["Cortisol"]
    assert seen["key"]  # it was asked, by the request's key


def test_the_store_files_are_json_lines(tmp_path: Path) -> None:
    store = BatchStore(tmp_path)
    _collected(store, "b1", LineOutcome(key="k", batch_id="b1", status_code=200, body=REPLY))
    for name in (BATCHES_FILE, RESULTS_FILE):
        assert all(json.loads(line) for line in (tmp_path / name).read_text().splitlines())


def test_a_scored_option_pass_is_answered_from_its_batch_line_with_its_logprobs(tmp_path: Path) -> None:
    """The scored-option pass posts its own request (logprobs, top_logprobs): in a pass it is deferred, then answered
    from its line, its log-probabilities read from the stored body."""
    from clearmed.backbones.logprobs import OpenAICompatibleScorer

    scorer = OpenAICompatibleScorer("http://127.0.0.1:9/v1", "m", None, timeout=1.0, num_retries=0)
    url = "http://127.0.0.1:9/v1/chat/completions"  # nothing listens: a request sent would fail
    store = BatchStore(tmp_path)
    current = BatchPass(store, lambda u: u == url, retries=0)
    messages = [{"role": "user", "content": "Which hormone? A) Cortisol B) Insulin"}]
    with batch_pass(current), pytest.raises(CallDeferred):
        scorer.score_next_token(messages, "Answer: ", ["A", "B"])
    ((key, (sent_url, body)),) = current.pending.items()
    assert sent_url == url
    assert body["logprobs"] is True
    assert body["top_logprobs"] == 20  # passed through as the synchronous request sends them
    top = [{"token": "A", "logprob": -0.1}, {"token": "B", "logprob": -2.5}]
    reply = {"choices": [{"logprobs": {"content": [{"top_logprobs": top}]}}], "usage": {"prompt_tokens": 9}}
    _collected(store, "b1", LineOutcome(key=key, batch_id="b1", status_code=200, body=reply))
    with batch_pass(BatchPass(store, lambda u: u == url, retries=0)):
        scores = scorer.score_next_token(messages, "Answer: ", ["A", "B"])
    assert scores.logprobs == {"A": -0.1, "B": -2.5}
    assert scores.prompt_tokens == 9
