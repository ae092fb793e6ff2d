"""Endpoints in the faults' real shapes (issue 58 items 1, 8, 9): the packaged configs against closed ports, in a fresh
process where the first call's setup is paid as a real run pays it; two servers of one model name in one suite and in
two runs sharing a cache folder; a run resumed on a warm cache whose server has gone.

Before: with the packaged `qwen3.5-9b-vllm` config, ``num_retries = 0`` and ``timeout = 2`` against a closed port,
every question was recorded as ``LMTimeoutError: no complete reply within 2 s`` (DSPy imported LiteLLM inside the
attempt's deadline), exit 4, the endpoint never named; a suite whose second config's server was dead said "2 cells
done", exit 0, its answers the first server's (from the cache); a cache hit marked a dead server reached, so its
refusal was taken for a restart (degraded questions, exit 4).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import diskcache
import dspy
import pytest

from clearmed.cli.main import main
from clearmed.demo import demo_questions
from clearmed.evaluation import read_records
from clearmed.testing import demo_config_toml

from .fakes import FakeOpenAI, fake_questions_gold

# Packaged configs whose main backbone is reached over HTTP (the embedded ones have no endpoint).
REMOTE_CONFIGS = ("qwen3.5-9b-vllm", "dual-model", "o3-mini")
QUESTIONS = demo_questions()
GOLD = fake_questions_gold(QUESTIONS)
# A server that answers every question wrong: an option that is not the gold (a free-text question: nonsense).
WRONG = {
    q.text.strip(): next((letter for letter in q.options or {} if letter not in (q.gold_letters or [])), "no idea")
    for q in QUESTIONS
}


def clearmed_child(args: list[str], tmp_path: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """`clearmed ARGS` in a fresh process, as a user runs it (its own LM cache folder)."""
    env = {**os.environ, "DSPY_CACHEDIR": str(tmp_path / "dspy-cache"), "OPENAI_API_KEY": "sk-test-not-a-key"}
    code = "import sys; from clearmed.cli.main import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=timeout
    )


@pytest.fixture
def memory_cache() -> Iterator[None]:
    """DSPy's in-memory cache on, as in a real process (the test session runs with every cache off)."""
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)
    yield
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)


@pytest.fixture
def disk_cache(tmp_path: Path) -> Iterator[Path]:
    """DSPy's memory and disk caches on, the disk one in a folder of the test's (a real process's default)."""
    folder = tmp_path / "default-lm-cache"
    dspy.configure_cache(enable_disk_cache=True, enable_memory_cache=True, disk_cache_dir=str(folder))
    yield folder
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)


def server_config(tmp_path: Path, name: str, api_base: str, *, run: str = "", decoding: str = "generate") -> Path:
    """A config of model ``m`` at ``api_base`` on the demo bundle."""
    backbone = f'kind = "openai_compatible"\nmodel = "m"\napi_base = "{api_base}"\nnum_retries = 0\ntimeout = 5'
    path = tmp_path / f"{name}.toml"
    path.write_text(
        demo_config_toml(backbone=backbone, program=f'mcq_decoding = "{decoding}"', run=run or None),
        encoding="utf-8",
    )
    return path


def accuracy(run_dir: Path) -> float:
    return float(json.loads((run_dir / "summary.json").read_text())["accuracy"]["accuracy"])


# ---------------------------------------------------------------------------------------- item 1: unreachable


@pytest.mark.parametrize("timeout", ["2"])  # the repro; other timeouts: the in-process test below
def test_the_packaged_vllm_config_against_a_closed_port_stops_with_exit_2_whatever_the_timeout(
    closed_port: int, tmp_path: Path, timeout: str, reliability
) -> None:
    with reliability.case("failing dependencies", f"closed port, packaged vLLM config, timeout {timeout} s") as case:
        base = f"http://127.0.0.1:{closed_port}/v1"
        args = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "3", "-c", "qwen3.5-9b-vllm"]
        sets = [f"backbones.main.api_base={base}", "backbones.main.num_retries=0", f"backbones.main.timeout={timeout}"]
        child = clearmed_child([*args, *(f"--set={item}" for item in sets), "--run-dir", "run"], tmp_path)
        case.note = f"exit {child.returncode}"
        assert child.returncode == 2, child.stderr[-2000:]
        assert f"unreachable: http://127.0.0.1:{closed_port} refused the connection before any reply" in child.stderr
        assert "LMTimeoutError" not in child.stderr
        assert list(read_records(tmp_path / "run")) == []


def test_the_first_call_through_litellm_spends_its_deadline_on_the_server(tmp_path: Path, reliability) -> None:
    """The packaged vLLM config's ``chat_template_kwargs`` send each call through DSPy's LiteLLM engine, which imports
    LiteLLM on the first call (seconds of CPU). Before: that import ran inside the first attempt's deadline, so with a
    short timeout every first call timed out against a server answering at once (degraded questions, exit 4)."""
    with (
        reliability.case("failing dependencies", "first LiteLLM call under a 1 s timeout") as case,
        FakeOpenAI(gold=GOLD) as server,
    ):
        args = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "3", "-c", "qwen3.5-9b-vllm"]
        sets = [
            f"backbones.main.api_base={server.api_base}",
            "backbones.main.num_retries=0",
            "backbones.main.timeout=1",
            "program.mcq_decoding=generate",
        ]
        child = clearmed_child([*args, *(f"--set={item}" for item in sets), "--run-dir", "run"], tmp_path)
        case.note = f"exit {child.returncode}"
        assert child.returncode == 0, child.stderr[-2000:]
        assert accuracy(tmp_path / "run") == 1.0
        assert server.served["ok"] == 3


@pytest.mark.parametrize("timeout", ["0.5", "2", "30"])
@pytest.mark.parametrize("config", REMOTE_CONFIGS)
def test_every_packaged_remote_config_stops_on_a_closed_port(
    closed_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    config: str, timeout: str,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    base = f"http://127.0.0.1:{closed_port}/v1"
    sets = [f"backbones.main.api_base={base}", "backbones.main.num_retries=0", f"backbones.main.timeout={timeout}"]
    argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "2", "-c", config]
    code = main([*argv, *(f"--set={item}" for item in sets), "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"http://127.0.0.1:{closed_port} refused the connection before any reply" in err


# ---------------------------------------------------------------------------------------- item 8: the cache


def test_a_suite_of_one_model_on_two_servers_the_second_dead_stops_with_exit_2(
    tmp_path: Path, closed_port: int, capsys: pytest.CaptureFixture[str], memory_cache: None, reliability
) -> None:
    with (
        reliability.case("lost work", "suite: one model on two servers, the second dead") as case,
        FakeOpenAI(gold=GOLD) as first,
    ):
        alive = server_config(tmp_path, "alive", first.api_base)
        dead = server_config(tmp_path, "dead", f"http://127.0.0.1:{closed_port}/v1")
        argv = ["suite", "--program", "direct", "--benchmark", "demo", "--limit", "3", "--out", str(tmp_path / "out")]
        code = main([*argv, "-c", str(alive), "-c", str(dead)])
        err = capsys.readouterr().err
        case.note = f"exit {code}"
        assert code == 2, err
        assert f"http://127.0.0.1:{closed_port} refused the connection before any reply" in err
        dead_cells = list((tmp_path / "out" / "dead").rglob("results.jsonl"))
        assert all(not list(read_records(path.parent)) for path in dead_cells)  # nothing answered from the cache
        assert first.served["ok"] == 3


@pytest.mark.parametrize("decoding", ["generate", "score"])
def test_a_suite_of_one_model_on_two_servers_asks_each_server(
    tmp_path: Path, memory_cache: None, decoding: str
) -> None:
    """Before: the second cell was answered from the first server's replies (accuracy 1.0; alone it scores 0.0)."""
    with FakeOpenAI(gold=GOLD) as right, FakeOpenAI(gold=WRONG) as wrong:
        configs = [server_config(tmp_path, name, server.api_base, decoding=decoding) for name, server in
                   (("right", right), ("wrong", wrong))]  # fmt: skip
        argv = ["suite", "--program", "direct", "--benchmark", "demo", "--limit", "3", "--out", str(tmp_path / "out")]
        assert main([*argv, *(f"-c={path}" for path in configs)]) == 0
        (right_run,) = [path.parent for path in (tmp_path / "out" / "right").rglob("summary.json")]
        (wrong_run,) = [path.parent for path in (tmp_path / "out" / "wrong").rglob("summary.json")]
        assert (accuracy(right_run), accuracy(wrong_run)) == (1.0, 0.0)
        assert wrong.chat_requests >= 3


def test_two_runs_sharing_one_cache_folder_each_ask_their_own_server(tmp_path: Path, disk_cache: Path) -> None:
    shared = f'lm_cache_dir = "{tmp_path / "shared-cache"}"'
    with FakeOpenAI(gold=GOLD) as right, FakeOpenAI(gold=WRONG) as wrong:
        argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "3"]
        first = server_config(tmp_path, "right", right.api_base, run=shared)
        assert main([*argv, "-c", str(first), "--run-dir", str(tmp_path / "first")]) == 0
        dspy.cache.reset_memory_cache()  # a second process: only the folder is shared
        second = server_config(tmp_path, "wrong", wrong.api_base, run=shared)
        assert main([*argv, "-c", str(second), "--run-dir", str(tmp_path / "second")]) == 0
        assert (accuracy(tmp_path / "first"), accuracy(tmp_path / "second")) == (1.0, 0.0)
        assert wrong.served["ok"] == 3
    # And a third run on the first server is answered from the folder.
    third = server_config(tmp_path, "right-again", right.api_base, run=shared)
    assert main([*argv, "-c", str(third), "--run-dir", str(tmp_path / "third")]) == 0
    assert accuracy(tmp_path / "third") == 1.0


def test_each_config_of_a_suite_caches_in_its_own_folder(tmp_path: Path, disk_cache: Path) -> None:
    """Before: the first config's folder (or the process's) served the whole process; the second config's stayed
    empty."""
    with FakeOpenAI(gold=GOLD) as server:
        configs = []
        for name in ("one", "two"):
            run = f'lm_cache_dir = "{tmp_path / f"cache-{name}"}"'
            configs.append(server_config(tmp_path, name, server.api_base, run=run))
        argv = ["suite", "--program", "direct", "--benchmark", "demo", "--limit", "2", "--out", str(tmp_path / "out")]
        assert main([*argv, *(f"-c={path}" for path in configs)]) == 0
    for name in ("one", "two"):
        with diskcache.FanoutCache(str(tmp_path / f"cache-{name}"), shards=16) as folder:
            assert len(folder) == 2, name  # one reply per question, in the config's own folder
    with diskcache.FanoutCache(str(disk_cache), shards=16) as default:
        assert len(default) == 0


# ---------------------------------------------------------------------------------------- item 9: hits prove nothing


def test_a_run_resumed_on_a_warm_cache_whose_server_is_gone_stops_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], memory_cache: None, reliability
) -> None:
    with reliability.case("failing dependencies", "cache hits, then the server refuses") as case:
        (tmp_path / "two.txt").write_text("demo-01\ndemo-02\n", encoding="utf-8")
        (tmp_path / "three.txt").write_text("demo-01\ndemo-02\ndemo-03\n", encoding="utf-8")
        with FakeOpenAI(gold=GOLD) as server:
            config = server_config(tmp_path, "gone", server.api_base)
            argv = ["eval", "--program", "direct", "--benchmark", "demo", "-c", str(config), "--threads", "1"]
            assert main([*argv, "--ids", str(tmp_path / "two.txt"), "--run-dir", str(tmp_path / "first")]) == 0
        capsys.readouterr()
        code = main([*argv, "--ids", str(tmp_path / "three.txt"), "--run-dir", str(tmp_path / "second")])
        err = capsys.readouterr().err
        case.note = f"exit {code}"
        assert code == 2, err  # not 4 with demo-03 degraded
        assert "refused the connection before any reply" in err


@pytest.mark.parametrize("fault", ["timeout", "503"])
def test_a_server_that_accepts_and_never_answers_is_named_by_the_degraded_line_and_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fault: str, reliability
) -> None:
    """Before: "3 of 3 questions degraded (failed after their retries: parametric)", model and stage only."""
    with (
        reliability.case("failing dependencies", f"a server that {fault}s: the endpoint named") as case,
        FakeOpenAI(gold=GOLD, hang_s=1.0) as server,
    ):
        server.inject(fault, times=None)
        endpoint = server.api_base.removesuffix("/v1")
        config = server_config(tmp_path, "silent", server.api_base)
        config.write_text(config.read_text().replace("timeout = 5", "timeout = 0.3"), encoding="utf-8")
        argv = ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "2", "-c", str(config)]
        code = main([*argv, "--run-dir", str(tmp_path / "run")])
        err = capsys.readouterr().err
        case.note = f"exit {code}"
        assert code == 4, err
        (line,) = [line for line in err.splitlines() if "questions degraded" in line]
        assert f"(failed after their retries: parametric; at {endpoint})" in line
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["degraded_endpoints"] == {endpoint: 2}
        assert f"by endpoint: {endpoint} 2" in (tmp_path / "run" / "summary.md").read_text()


ASYNC_CHILD = """
import asyncio, sys
from clearmed.backbones.config import parse_backbone
from clearmed.backbones.factory import build_lm
table = {"kind": "openai_compatible", "model": "m", "api_base": sys.argv[1], "num_retries": 0, "timeout": 1.0,
         "cache": False, "extra": {"chat_template_kwargs": {"enable_thinking": False}}}
print(asyncio.run(build_lm(parse_backbone(table)).acall("Which virus causes Koplik spots?")))
"""


def test_the_first_async_call_through_litellm_spends_its_deadline_on_the_server(tmp_path: Path) -> None:
    """An async call's deadline is ``asyncio.wait_for`` around the whole call: LiteLLM is imported before it starts
    (`ClearmedLM._ready_engine`). Before: a fresh process's first async call timed out against a server answering at
    once."""
    with FakeOpenAI(gold=GOLD) as server:
        env = {**os.environ, "DSPY_CACHEDIR": str(tmp_path / "dspy-cache")}
        child = subprocess.run(
            [sys.executable, "-c", ASYNC_CHILD, server.api_base], capture_output=True, text=True, env=env, timeout=120
        )
        assert child.returncode == 0, child.stderr[-2000:]
        assert "I cannot tell which stage this is." in child.stdout
        assert server.served["ok"] == 1
