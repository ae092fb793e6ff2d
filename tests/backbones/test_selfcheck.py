"""The engine self-check: a child process decodes once; crashes become one clear line, success is cached."""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path

import pytest

from clearmed.backbones import engine_build, selfcheck
from clearmed.backbones.engine_build import REINSTALL_COMMAND
from clearmed.backbones.selfcheck import EngineCheckError, ensure_engine_works, probe_engine


def child(code: str) -> list[str]:
    """A stand-in for the engine child; it receives the same argv (model, threads, tokens)."""
    return [sys.executable, "-c", code]


KILL_WITH = "import os, signal; os.kill(os.getpid(), signal.{})"
LOAD_ERROR = (
    "import json, sys; print(json.dumps({'load_error': 'ValueError: Failed to load model from file'})); sys.exit(3)"
)
SUCCESS = (
    "import json, sys; print('llama.cpp chatter'); print(json.dumps({'system_info': 'CPU : AVX2 = 1 |', "
    "'n_threads': int(sys.argv[2]), 'load_seconds': 1.5, 'prompt_tokens': int(sys.argv[3]), 'prompt_seconds': 0.5, "
    "'generated_tokens': int(sys.argv[4]), 'generation_seconds': 0.25}))"
)
CRASH_IF_RUN = KILL_WITH.format("SIGSEGV")


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 64)
    return path


@pytest.fixture(autouse=True)
def fresh_process_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selfcheck, "_passed_in_process", set())
    monkeypatch.delenv(selfcheck.ENGINE_CHECK_SKIP_ENV, raising=False)


def test_sigill_becomes_one_line_with_the_cause_and_the_reinstall_command(model_file: Path, tmp_path: Path) -> None:
    with pytest.raises(EngineCheckError) as raised:
        ensure_engine_works(
            str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(KILL_WITH.format("SIGILL"))
        )
    message = str(raised.value)
    assert "\n" not in message
    assert "SIGILL" in message
    assert "AMX" in message
    assert REINSTALL_COMMAND in message
    assert not list(tmp_path.glob("engine-checks/*.json")), "a failure must not be cached"


def test_sigsegv_is_reported_as_a_crash(model_file: Path, tmp_path: Path) -> None:
    with pytest.raises(EngineCheckError, match=r"SIGSEGV.*another CPU, or a damaged model file") as raised:
        ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(CRASH_IF_RUN))
    assert REINSTALL_COMMAND in str(raised.value)


def test_a_model_that_fails_to_load(model_file: Path, tmp_path: Path) -> None:
    with pytest.raises(EngineCheckError) as raised:
        ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(LOAD_ERROR))
    message = str(raised.value)
    assert "could not load the model file" in message
    assert str(model_file) in message
    assert "Failed to load model" in message


def test_success_is_cached_per_build_and_model_file(
    model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(SUCCESS))
    records = list(tmp_path.glob("engine-checks/*.json"))
    assert len(records) == 1
    assert json.loads(records[0].read_text())["outcome"] == "ok"
    # Cached: a child that would crash is never started, in this process or (file cache) the next one.
    ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(CRASH_IF_RUN))
    monkeypatch.setattr(selfcheck, "_passed_in_process", set())
    ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(CRASH_IF_RUN))
    # A different engine build is checked afresh.
    monkeypatch.setattr(selfcheck, "_passed_in_process", set())
    monkeypatch.setattr(selfcheck, "engine_build_identity", lambda: "another-build")
    with pytest.raises(EngineCheckError):
        ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(CRASH_IF_RUN))


def test_another_cpu_sharing_the_cache_is_checked_again(
    model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A home directory shared by cluster nodes, or a VM migrated to another host: same build, same model file.
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(engine_build, "read_cpuinfo", lambda path=None: "flags\t: avx2 fma avx512f avx512bw\n")
    ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(SUCCESS))
    monkeypatch.setattr(selfcheck, "_passed_in_process", set())
    ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(CRASH_IF_RUN))
    # A CPU without AVX-512 must not trust the pass recorded on one with it.
    monkeypatch.setattr(engine_build, "read_cpuinfo", lambda path=None: "flags\t: avx2 fma\n")
    with pytest.raises(EngineCheckError):
        ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(CRASH_IF_RUN))


def test_another_architecture_sharing_the_cache_is_checked_again(
    model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(SUCCESS))
    monkeypatch.setattr(selfcheck, "_passed_in_process", set())
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    with pytest.raises(EngineCheckError):
        ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(CRASH_IF_RUN))


def test_a_replaced_model_file_is_checked_again(model_file: Path, tmp_path: Path) -> None:
    ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(SUCCESS))
    model_file.write_bytes(b"GGUF" + b"\1" * 128)
    os.utime(model_file, ns=(1, 1))
    selfcheck._passed_in_process.clear()
    with pytest.raises(EngineCheckError):
        ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(CRASH_IF_RUN))


def test_the_skip_variable_bypasses_the_check(
    model_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(selfcheck.ENGINE_CHECK_SKIP_ENV, "1")
    ensure_engine_works(str(model_file), n_threads=2, cache_dir=tmp_path, child_argv=child(CRASH_IF_RUN))


def test_probe_measures_speed_and_ignores_chatter(model_file: Path) -> None:
    probe = probe_engine(str(model_file), n_threads=3, prompt_tokens=100, generated_tokens=8, child_argv=child(SUCCESS))
    assert probe.outcome == "ok"
    assert probe.n_threads == 3
    assert probe.prompt_tokens_per_second == pytest.approx(200.0)
    assert probe.generation_tokens_per_second == pytest.approx(32.0)


def test_probe_timeout_and_unstartable_child(model_file: Path) -> None:
    slow = probe_engine(str(model_file), n_threads=1, child_argv=child("import time; time.sleep(30)"), timeout=0.5)
    assert slow.outcome == "timed_out"
    assert "did not answer" in slow.failure_message(str(model_file))
    missing = probe_engine(str(model_file), n_threads=1, child_argv=["/nonexistent/python"])
    assert missing.outcome == "failed"
    assert "could not start" in missing.detail


def test_a_child_that_exits_with_an_error(model_file: Path) -> None:
    probe = probe_engine(
        str(model_file), n_threads=1, child_argv=child("import sys; sys.exit('ImportError: no llama_cpp')")
    )
    assert probe.outcome == "failed"
    assert probe.detail == "ImportError: no llama_cpp"


def test_cli_prints_an_engine_failure_as_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clearmed.api import assemble
    from clearmed.cli import main as cli

    def crash(name: str, config: object, **kwargs: object) -> None:
        raise EngineCheckError(f"the llama.cpp engine died with SIGILL on a short test prompt; {REINSTALL_COMMAND}")

    monkeypatch.setattr(assemble, "build_program", crash)
    assert cli.main(["ask", "--demo", "demo-01"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("clearmed: error: the llama.cpp engine died with SIGILL")
