"""Serving across machines: a run through a LiteLLM proxy (its Router) in front of two replicas, as one
``openai_compatible`` endpoint (README, "Serving across machines"). The fakes: `fake_router.FakeLiteLLMRouter` with
LiteLLM's routing, cooldowns and error bodies; replicas that answer every CLEAR stage with the gold."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from clearmed.api.assemble import build_program
from clearmed.backbones.config import OpenAICompatibleBackbone
from clearmed.backbones.context_window import resolve_window
from clearmed.backbones.logprobs import probe_capabilities
from clearmed.config import load_config
from clearmed.core.errors import FatalServiceError
from clearmed.evaluation import EvalSpec, read_records, run_evaluation
from clearmed.signatures.records import Question
from clearmed.testing import demo_config_toml
from tests.backbones.fake_router import FakeLiteLLMRouter, LogprobReplica

KEY_ENV = "CLEARMED_TEST_PROXY_KEY"
MASTER = "sk-proxy-master-0123"
REPLICA_KEY = "replica-key"


def _questions(n: int) -> list[Question]:
    options = {"A": "Cortisol", "B": "Insulin", "C": "Thyroxine", "D": "Growth hormone"}
    return [
        Question(
            id=f"q{i}", text=f"Question {i}: which hormone (case {i})?", options=options, gold_letters=["ABCD"[i % 4]]
        )
        for i in range(n)
    ]


def _gold(questions: list[Question]) -> dict[str, str]:
    return {q.text: q.gold_letters[0] for q in questions if q.gold_letters}


@pytest.fixture
def replicas(request: pytest.FixtureRequest) -> Iterator[list[LogprobReplica]]:
    questions = getattr(request, "param", None) or _questions(100)
    made = [LogprobReplica(gold=_gold(questions), api_key=REPLICA_KEY) for _ in range(2)]
    yield made
    for replica in made:
        replica.close()


def _run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    router: FakeLiteLLMRouter,
    questions: list[Question],
    *,
    program: str = "clear",
    backbone: str = "",
    settings: str = "",
    threads: int = 4,
) -> Path:
    """`program` on `questions` through the router, as a config names it: the proxy's alias and key, its address."""
    monkeypatch.setenv(KEY_ENV, MASTER)
    main = f'kind = "openai_compatible"\nmodel = "{router.model_name}"\napi_base = "{router.api_base}"\n'
    main += f'api_key_env = "{KEY_ENV}"\ncache = false\n{backbone}'
    program_table = f'parallel_pathways = "on"\njson_fallback = false\nsource_quality = "priors"\n{settings}'
    path = tmp_path / "proxy.toml"
    path.write_text(demo_config_toml(backbone=main, program=program_table), encoding="utf-8")
    config = load_config(str(path))
    run_dir = tmp_path / "run"
    spec = EvalSpec(program=program, benchmark="proxy", source="proxy", questions=questions, run_dir=run_dir)
    run_evaluation(spec, config, build_program(program, config), num_threads=threads, show_progress=False)
    return run_dir


def test_a_run_through_the_router_completes_and_both_replicas_serve_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replicas: list[LogprobReplica]
) -> None:
    questions = _questions(100)
    with FakeLiteLLMRouter([r.api_base for r in replicas], replica_key=REPLICA_KEY) as router:
        records = list(read_records(_run(tmp_path, monkeypatch, router, questions)))
    assert len(records) == 100
    assert not any(r.degraded for r in records)
    assert all(r.score is not None and r.score.correct for r in records)  # every stage answered, through the proxy
    served = [r.chat_requests for r in replicas]
    assert sum(served) == sum(router.forwarded.values())
    assert min(served) >= 0.45 * sum(served)  # round-robin: both replicas carry the run
    # the proxy speaks to each replica with the deployment's model and key; the proxy's own key stays with it
    seen = [request for replica in replicas for request in replica.requests]
    assert {request["body"]["model"] for request in seen} == {"m"}
    assert {request["auth"] for request in seen} == {f"Bearer {REPLICA_KEY}"}


def test_a_rate_limited_replica_is_cooled_down_and_the_run_goes_on_without_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replicas: list[LogprobReplica]
) -> None:
    replicas[0].inject("429", times=None)  # OpenAI's 429 body, every request
    with FakeLiteLLMRouter([r.api_base for r in replicas], cooldown_s=60.0) as router:
        records = list(read_records(_run(tmp_path, monkeypatch, router, _questions(40))))
    assert not any(r.degraded for r in records)
    # refused only the requests already on their way when it first refused (4 threads), then cooled down for the run
    assert 1 <= replicas[0].served["429"] <= 4
    assert router.cooldowns[replicas[0].api_base] == replicas[0].served["429"]
    assert replicas[1].served["ok"] == replicas[1].chat_requests
    # the router retried on the other replica: clearmed saw no failure at all
    assert all(u.retries == 0 for r in records for u in r.decision.usage)


@pytest.mark.parametrize("replicas", [_questions(2)], indirect=True)
def test_every_replica_cooling_down_is_litellms_429_a_transient_failure_that_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replicas: list[LogprobReplica]
) -> None:
    for replica in replicas:
        replica.inject("429", times=None)
    questions = _questions(2)
    with FakeLiteLLMRouter([r.api_base for r in replicas], cooldown_s=0.2) as router:
        run_dir = _run(tmp_path, monkeypatch, router, questions, program="direct", backbone="num_retries = 1\n")
        records = list(read_records(run_dir))
        # "No deployments available ... Try again in 0.2 seconds", no Retry-After: retried, then the question degraded
        assert router.answered[429] >= 2
        assert [r.degraded for r in records] == [True, True]
        for replica in replicas:
            replica.clear()
        run_dir = _run(tmp_path, monkeypatch, router, questions, program="direct")  # the resume redoes them
    again = list(read_records(run_dir))
    assert [r.degraded for r in again] == [False, False]


def test_a_wrong_proxy_key_stops_the_run_in_one_line_without_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replicas: list[LogprobReplica]
) -> None:
    router = FakeLiteLLMRouter([r.api_base for r in replicas], master_key="sk-another-master-key")
    with router, pytest.raises(FatalServiceError) as caught:
        _run(tmp_path, monkeypatch, router, _questions(2), program="direct")
    message = str(caught.value)
    assert caught.value.cause == "auth"
    assert "\n" not in message
    assert MASTER not in message
    assert sum(r.chat_requests for r in replicas) == 0


@pytest.mark.parametrize("models", ["list", "hidden"])
def test_behind_a_proxy_the_window_is_not_reported_so_the_config_gives_it(
    replicas: list[LogprobReplica], models: str
) -> None:
    # LiteLLM's /v1/models lists aliases, no max_model_len; or the route is hidden. It has no /props either.
    with FakeLiteLLMRouter([r.api_base for r in replicas], models=models) as router:  # type: ignore[arg-type]
        backbone = OpenAICompatibleBackbone(kind="openai_compatible", model=router.model_name, api_base=router.api_base)
        window = resolve_window(backbone, api_key=MASTER)
        assert (window.tokens, window.source, window.detail) == (None, "unknown", "the server does not report it")
        assert window.settled  # asked once: not asked again on every call
        given = backbone.model_copy(update={"context_window": 32768})
        assert resolve_window(given, api_key=MASTER).source == "config"


def test_option_scoring_passes_through_the_router(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replicas: list[LogprobReplica]
) -> None:
    with FakeLiteLLMRouter([r.api_base for r in replicas]) as router:
        capabilities = probe_capabilities(router.api_base, router.model_name, MASTER)
        run_dir = _run(
            tmp_path, monkeypatch, router, _questions(12), program="direct", settings='mcq_decoding = "score"'
        )
    assert capabilities.logprobs is True
    assert capabilities.continues_message is True
    records = list(read_records(run_dir))
    assert all(r.decision.bundle.candidate("parametric").option_scores is not None for r in records)
    assert all(r.score is not None and r.score.correct for r in records)
    # vLLM's fields reached the replicas as the scorer sent them (LiteLLM forwards non-OpenAI params in the body)
    scoring = [q["body"] for r in replicas for q in r.requests if q["body"].get("top_logprobs") == 20]  # not the probe
    assert scoring
    assert all(b["continue_final_message"] is True and b["add_generation_prompt"] is False for b in scoring)


def test_a_router_that_drops_logprobs_is_found_by_the_probe_and_the_pathways_generate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, replicas: list[LogprobReplica]
) -> None:
    with FakeLiteLLMRouter([r.api_base for r in replicas], drop_params=("logprobs", "top_logprobs")) as router:
        capabilities = probe_capabilities(router.api_base, router.model_name, MASTER)
        run_dir = _run(
            tmp_path, monkeypatch, router, _questions(12), program="direct", settings='mcq_decoding = "score"'
        )
    assert capabilities.logprobs is False
    assert capabilities.logprobs_note == "the reply has no top_logprobs"
    records = list(read_records(run_dir))
    assert not any(r.degraded for r in records)  # a backbone that cannot score is no failure of the question
    assert all(r.score is not None and r.score.correct for r in records)  # generated instead
    assert all(r.decision.bundle.candidate("parametric").option_scores is None for r in records)
    failed = [u for r in records for u in r.decision.usage if u.failed]
    assert len(failed) == len(records)  # one scoring pass each, on the usage row with why
    assert all("no top_logprobs" in u.error for u in failed)
