"""Secrets: API keys planted in the environment must never appear in any output.

The config names the variables (never the keys). The model server and the search server both reject the
keys and, like some proxies do, echo them back in their error bodies. Every output is then searched for the
keys: stdout, stderr, log records, every file of the run folder, the search cache and the LM cache.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from clearmed.cli.main import main
from clearmed.core.errors import FatalServiceError
from clearmed.retrieval.tavily import TavilyOptions, TavilySearch
from clearmed.testing import build_toy_program, demo_config_toml, label_all, pathway_replies, verifier_reply

pytestmark = pytest.mark.reliability

CATEGORY = "secrets"
OPENAI_KEY = "sk-FAKE-SECRET-456-abcdefghijklmnop"
TAVILY_KEY = "tvly-FAKE-SECRET-123-qrstuvwxyz"
SECRETS = (OPENAI_KEY, TAVILY_KEY)


def leaks(*outputs: str | bytes) -> int:
    """How many outputs contain a secret (in full, or its distinctive middle part)."""
    count = 0
    for output in outputs:
        text = output.decode("utf-8", errors="replace") if isinstance(output, bytes) else output
        count += any(secret in text or secret[3:-6] in text for secret in SECRETS)
    return count


def files_under(*folders: Path) -> list[bytes]:
    return [path.read_bytes() for folder in folders if folder.exists() for path in folder.rglob("*") if path.is_file()]


def echo_key(request: dict) -> tuple[int, dict[str, str], bytes]:
    """A 401 whose body repeats the credentials it was sent."""
    import json

    headers = request["headers"]
    sent = headers.get("Authorization") or request["body"].get("api_key") or ""
    body = {"error": {"message": f"Incorrect API key provided: {sent}", "code": "invalid_api_key"}}
    body["detail"] = {"error": f"Unauthorized: key {sent} is invalid"}
    return 401, {}, json.dumps(body).encode()


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_server) -> Path:
    """Keys in the environment, servers that echo them, and a config that names the variables."""
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("TAVILY_API_KEY", TAVILY_KEY)
    lm_server, search_server = fake_server(), fake_server()
    lm_server.respond = echo_key
    search_server.respond = echo_key
    config = tmp_path / "keys.toml"
    backbone = f'kind = "openai_compatible"\nmodel = "m"\napi_base = "{lm_server.url}/v1"\n'
    backbone += 'api_key_env = "OPENAI_API_KEY"\nnum_retries = 0'
    search = f'backend = "tavily"\ncache_path = "{tmp_path / "search-cache.sqlite"}"\n'
    search += f'tavily = {{ api_base_url = "{search_server.url}", api_key_env = "TAVILY_API_KEY" }}'
    run = f'runs_dir = "{tmp_path / "runs"}"\nlm_cache_dir = "{tmp_path / "lm-cache"}"'
    config.write_text(demo_config_toml(backbone=backbone, search=search, run=run), encoding="utf-8")
    return config


ASK_ADDISON = ["ask", "Which hormone is low in Addison disease?", "-o", "A: cortisol", "-o", "B: insulin"]


def test_ask_json_with_rejected_keys(reliability, planted: Path, capsys, caplog) -> None:
    with reliability.case(CATEGORY, "cli ask --json: model and search both reject (and echo) the keys") as case:
        caplog.set_level(logging.DEBUG)
        code = main([*ASK_ADDISON, "-c", str(planted), "--json"])
        out, err = capsys.readouterr()
        assert code == 2  # a rejected key stops with one line (issue 27), naming the service, never the key
        assert err.startswith("clearmed: error: main backbone")
        assert "authentication failed" in err
        assert err.count("\n") == 1
        case.leaked = leaks(out, err, caplog.text)
        assert case.leaked == 0


def test_ask_terminal_view_with_rejected_keys(reliability, planted: Path, capsys, caplog) -> None:
    with reliability.case(CATEGORY, "cli ask (terminal view): rejected keys") as case:
        caplog.set_level(logging.DEBUG)
        main([*ASK_ADDISON, "-c", str(planted)])
        out, err = capsys.readouterr()
        case.leaked = leaks(out, err, caplog.text)
        assert case.leaked == 0


def test_eval_run_folder_and_caches_hold_no_key(reliability, planted: Path, tmp_path: Path, capsys, caplog) -> None:
    with reliability.case(CATEGORY, "cli eval: run folder, search cache and LM cache") as case:
        caplog.set_level(logging.DEBUG)
        run_dir = tmp_path / "runs" / "eval"
        code = main(["eval", "--benchmark", "demo", "--limit", "2", "-c", str(planted), "--run-dir", str(run_dir)])
        out, err = capsys.readouterr()
        assert code == 2, err  # the rejected key stops the run before any record (issue 27)
        assert "authentication failed" in err
        assert (run_dir / "manifest.json").is_file()
        assert not (run_dir / "results.jsonl").exists() or not (run_dir / "results.jsonl").read_text()
        outputs = [
            out,
            err,
            caplog.text,
            *files_under(run_dir, tmp_path / "lm-cache", tmp_path / "search-cache.sqlite"),
        ]
        outputs += [p.read_bytes() for p in tmp_path.glob("search-cache.sqlite*")]
        case.leaked = leaks(*outputs)
        assert case.leaked == 0


def test_config_printout_holds_no_key(reliability, planted: Path, capsys) -> None:
    with reliability.case(CATEGORY, "cli config: the resolved config") as case:
        assert main(["config", "-c", str(planted)]) == 0
        out, err = capsys.readouterr()
        assert "OPENAI_API_KEY" in out  # the variable's name, never its value
        case.leaked = leaks(out, err)
        assert case.leaked == 0


def test_a_key_pasted_into_a_config_is_not_echoed(reliability, tmp_path: Path, capsys) -> None:
    with reliability.case(CATEGORY, "cli: a key pasted into the config file by mistake") as case:
        config = tmp_path / "pasted.toml"
        config.write_text(
            f'[backbones.main]\nkind = "hosted"\nmodel = "openai/gpt-4o"\napi_key = "{OPENAI_KEY}"\n', encoding="utf-8"
        )
        code = main(["config", "-c", str(config)])
        out, err = capsys.readouterr()
        assert code == 2
        assert "api_key_env" in err
        case.leaked = leaks(out, err)
        assert case.leaked == 0


@pytest.mark.parametrize("debug", [False, True])
def test_unexpected_error_carrying_a_key_is_redacted(
    reliability, monkeypatch: pytest.MonkeyPatch, capsys, debug: bool
) -> None:
    name = f"cli: unexpected error whose message holds a key ({'--debug traceback' if debug else 'one line'})"
    with reliability.case(CATEGORY, name) as case:
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)

        def explode(name, config, **kwargs):
            raise RuntimeError(f"client init failed for key={OPENAI_KEY}")

        monkeypatch.setattr("clearmed.api.assemble.build_program", explode)
        argv = ["--debug"] if debug else []
        code = main([*argv, "ask", "Which hormone?", "-o", "A: x", "-o", "B: y"])
        out, err = capsys.readouterr()
        assert code == 1
        assert "client init failed" in err
        case.leaked = leaks(out, err)
        assert case.leaked == 0


def test_step_errors_and_decisions_never_hold_a_key(reliability, monkeypatch: pytest.MonkeyPatch) -> None:
    with reliability.case(CATEGORY, "library: LM and search errors that quote the key") as case:
        from dspy import lm15

        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
        failure = lm15.AuthError(f"Incorrect API key provided: Bearer {OPENAI_KEY}")
        program, _, _ = build_toy_program(
            {
                **pathway_replies("A", "A", "A"),
                "parametric": failure,
                "source_quality": label_all("high"),
                "verifier": verifier_reply("consensus"),
            }
        )
        from clearmed.testing import QUESTION

        decision = program(question=QUESTION).decision
        case.leaked = leaks(decision.model_dump_json())
        assert decision.bundle.candidate("parametric").error is not None
        assert case.leaked == 0


def test_tavily_errors_never_hold_the_key(reliability, fake_server, monkeypatch: pytest.MonkeyPatch) -> None:
    with reliability.case(CATEGORY, "library: Tavily 401 that echoes the key") as case:
        monkeypatch.setenv("TAVILY_API_KEY", TAVILY_KEY)
        server = fake_server()
        server.respond = echo_key
        search = TavilySearch(TavilyOptions(api_base_url=server.url), timeout=5)
        with pytest.raises(FatalServiceError) as info:  # a rejected key stops the run (issue 27)
            search.search("addison disease", 3)
        assert info.value.cause == "auth"
        case.leaked = leaks(str(info.value), repr(info.value))
        assert case.leaked == 0


def test_run_folder_of_a_crashing_program_holds_no_key(
    reliability, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with reliability.case(CATEGORY, "run folder: a program that crashes with the key in its message") as case:
        from clearmed.config import parse_config
        from clearmed.evaluation import EvalSpec, run_evaluation
        from clearmed.testing import QUESTION

        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)

        class Crashing:
            def __call__(self, question):
                raise ConnectionError(f"proxy refused Authorization: Bearer {OPENAI_KEY}")

        config = parse_config(
            {"backbones": {"main": {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}}},
            source="test.toml",
        )
        spec = EvalSpec(program="clear", benchmark="toy", source="memory", questions=[QUESTION], run_dir=tmp_path / "r")
        run_evaluation(spec, config, Crashing(), show_progress=False)  # type: ignore[arg-type]
        case.leaked = leaks(*files_under(tmp_path / "r"))
        assert case.leaked == 0
