"""Exit codes that tell the truth (issue 50, item 2): a run that ends with degraded questions exits 4 with one line
(how many, and that a rerun redoes them), its folder summarized all the same; a suite goes on past such a cell,
names it in its closing line and exits 4; the rerun once the server is mended redoes them and exits 0. The codes are
`clearmed.core.exit_codes.ExitCode`, and the README's table is read against it.

The broken backbone is a fake OpenAI-compatible server answering HTTP 503 (a transient error: the question degrades)
until it is mended. A refused connection (a closed port) may instead stop the run as a fatal error (exit 2): either
way it exits non-zero with one line."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import clearmed
from clearmed.api.evaluate import LeftToRedo, left_to_redo
from clearmed.cli.main import main
from clearmed.core.exit_codes import ExitCode
from clearmed.testing import UNREACHABLE_BACKBONE, demo_config_toml
from tests.backbones.fake_openai import Reply, ScriptedOpenAI
from tests.cli.scripted_cli import config_toml, scripted

README = Path(__file__).resolve().parents[2] / "README.md"
DIRECT_ANSWER = "[[ ## rationale ## ]]\nbecause\n\n[[ ## answer ## ]]\nA\n\n[[ ## completed ## ]]"
UNAVAILABLE: Reply = (503, {"error": {"message": "server overloaded", "type": "server_error", "code": None}}, {})
PROGRAM = 'json_fallback = false\nmcq_decoding = "generate"'


class Backbone(ScriptedOpenAI):
    """A fake OpenAI-compatible server that answers 503 to every call until `mend()`, then the Direct answer."""

    def __init__(self) -> None:
        super().__init__(DIRECT_ANSWER)
        self.script = [UNAVAILABLE] * 10_000

    def mend(self) -> None:
        self.script.clear()

    def config(self, path: Path) -> Path:
        backbone = (
            f'kind = "openai_compatible"\nmodel = "m"\napi_base = "{self.api_base}"\nnum_retries = 0\ncache = false'
        )
        path.write_text(demo_config_toml(backbone=backbone, program=PROGRAM), encoding="utf-8")
        return path


@pytest.fixture
def broken() -> Iterator[Backbone]:
    server = Backbone()
    with server:
        yield server


def eval_argv(config: Path, run_dir: Path) -> list[str]:
    """The issue's repro: `clearmed eval --program direct --benchmark demo --limit 3`."""
    return ["eval", "--program", "direct", "--benchmark", "demo", "--limit", "3", "-c", str(config), "--run-dir",
            str(run_dir)]  # fmt: skip


def said_lines(err: str) -> list[str]:
    """The lines clearmed says as itself (its errors and endings), not progress or warnings."""
    return [line for line in err.splitlines() if line.startswith("clearmed:")]


def test_a_run_with_degraded_questions_exits_4_in_one_line_and_its_rerun_once_mended_exits_0(
    broken: Backbone, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    argv = eval_argv(broken.config(tmp_path / "broken.toml"), run_dir)
    assert main(argv) == 4
    out, err = capsys.readouterr()
    assert said_lines(err) == [err.splitlines()[-1]]  # one line, and the last
    endpoint = broken.api_base.removesuffix("/v1")  # the failures name where they came from (issue 58)
    assert said_lines(err)[0] == (
        f"clearmed: 3 of 3 questions degraded (failed after their retries: parametric; at {endpoint}); summary "
        "written; rerun the same command to resume and redo them"
    )
    assert "| direct | demo | 3/3 |" in out  # the tables still printed
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert (summary["planned"], summary["evaluated"], summary["degraded"]) == (3, 3, 3)
    assert (run_dir / "summary.md").is_file()
    assert (run_dir / "report" / "index.html").is_file()
    calls = len(broken.requests)

    # --keep-degraded keeps them on resume: nothing is redone, and the run still is not done
    assert main([*argv, "--keep-degraded"]) == 4
    (line,) = said_lines(capsys.readouterr().err)
    assert line.endswith("; summary written; rerun without --keep-degraded to resume and redo them")
    assert len(broken.requests) == calls

    broken.mend()
    assert main(argv) == 0
    assert said_lines(capsys.readouterr().err) == []
    assert len(broken.requests) == calls + 3  # the three degraded questions redone, nothing else
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert (summary["evaluated"], summary["degraded"]) == (3, 0)


def test_the_python_api_returns_the_summary_whose_degraded_count_says_what_a_rerun_redoes(
    broken: Backbone, tmp_path: Path
) -> None:
    config = broken.config(tmp_path / "broken.toml")
    summary = clearmed.evaluate(
        "direct", "demo", config=str(config), limit=3, run_dir=str(tmp_path / "run"), show_progress=False
    )
    assert (summary.degraded, summary.degraded_stages) == (3, {"parametric": 3})
    assert left_to_redo(summary) == LeftToRedo(degraded=3, unrecorded=0)
    assert str(left_to_redo(summary)) == "3 degraded"
    # a question planned and never recorded (a record that could not be written) is left to redo too
    unrecorded = summary.model_copy(update={"planned": 5})
    assert str(left_to_redo(unrecorded)) == "3 degraded, 2 not recorded"
    assert not left_to_redo(summary.model_copy(update={"degraded": 0}))
    assert left_to_redo(unrecorded, partial=True) == LeftToRedo(3, 0)  # stop_after stopped it there on purpose


def test_the_closed_port_repro_exits_non_zero_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "closed.toml"
    backbone = UNREACHABLE_BACKBONE + "\nnum_retries = 0\ncache = false"
    config.write_text(demo_config_toml(backbone=backbone, program=PROGRAM), encoding="utf-8")
    code = main(eval_argv(config, tmp_path / "run"))
    err = capsys.readouterr().err
    assert code in (2, 4), err  # a refused connection stops the run (2), or degrades every question (4)
    (line,) = said_lines(err)
    if code == 4:
        assert line.startswith("clearmed: 3 of 3 questions degraded (failed after their retries: parametric)")
    else:
        assert "127.0.0.1:9" in line


def suite_file(tmp_path: Path, configs: list[Path], shards: int = 1) -> Path:
    """Direct on 3 demo questions with each config, in order (a config's cell is named by its file)."""
    path = tmp_path / "suite.toml"
    path.write_text(
        f'out = "{tmp_path / "suite"}"\nconfigs = {json.dumps([str(c) for c in configs])}\nprograms = ["direct"]\n'
        f'benchmarks = ["demo"]\nlimit = 3\nshards = {shards}\n',
        encoding="utf-8",
    )
    return path


def test_a_suite_goes_past_a_degraded_cell_names_it_exits_4_and_its_rerun_once_mended_exits_0(
    broken: Backbone, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    healthy = Backbone()
    with healthy:
        healthy.mend()
        # the broken cell first: the suite goes on to the good one
        path = suite_file(tmp_path, [broken.config(tmp_path / "bad.toml"), healthy.config(tmp_path / "good.toml")])
        bad_cell = tmp_path / "suite" / "bad" / "demo" / "direct-n3-s0"
        good_cell = tmp_path / "suite" / "good" / "demo" / "direct-n3-s0"
        assert main(["suite", str(path)]) == 4
        err = capsys.readouterr().err
        assert err.splitlines()[-1] == (
            f"suite: 1 of 2 cells failed: {bad_cell} (3 degraded); rerun the same suite command to redo their "
            "questions (the comparisons follow once every cell is done)"
        )
        assert "cells done" not in err
        assert json.loads((bad_cell / "summary.json").read_text())["degraded"] == 3
        assert json.loads((good_cell / "summary.json").read_text())["degraded"] == 0  # the cell after it ran
        assert not (tmp_path / "suite" / "compare").exists()

        broken.mend()
        calls = len(broken.requests), len(healthy.requests)
        assert main(["suite", str(path)]) == 0
        err = capsys.readouterr().err
        assert f"done before: {good_cell}" in err
        assert "cells failed" not in err
        assert (len(broken.requests), len(healthy.requests)) == (calls[0] + 3, calls[1])  # only the degraded redone
        assert json.loads((bad_cell / "summary.json").read_text())["degraded"] == 0
        assert (tmp_path / "suite" / "compare" / "demo" / "comparison.md").is_file()


def test_a_sharded_suite_cell_with_degraded_shards_is_merged_named_and_redone_in_its_folder(
    broken: Backbone, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = suite_file(tmp_path, [broken.config(tmp_path / "bad.toml")], shards=2)
    cell = tmp_path / "suite" / "bad" / "demo" / "direct-n3-s0"
    assert main(["suite", str(path)]) == 4
    err = capsys.readouterr().err
    assert len([line for line in said_lines(err) if "questions degraded" in line]) == 2  # both shards ran
    assert err.splitlines()[-1].startswith(f"suite: 1 of 1 cells failed: {cell} (3 degraded); ")  # merged
    assert json.loads((cell / "summary.json").read_text())["degraded"] == 3

    broken.mend()
    calls = len(broken.requests)
    assert main(["suite", str(path)]) == 0
    summary = json.loads((cell / "summary.json").read_text())
    assert (summary["evaluated"], summary["degraded"]) == (3, 0)
    assert len(broken.requests) == calls + 3  # redone in the merged folder, once each


def test_ctrl_c_in_a_run_exits_130(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(call: object) -> object:
        raise KeyboardInterrupt

    scripted(monkeypatch, parametric=interrupted)
    config = tmp_path / "scripted.toml"
    config.write_text(config_toml(), encoding="utf-8")
    assert main(eval_argv(config, tmp_path / "run")) == 130
    # Raised inside a question (not the main thread's Ctrl-C, which lets it finish): the line still says how to resume.
    assert said_lines(capsys.readouterr().err) == ["clearmed: interrupted; rerun the same command to resume"]


def test_the_exit_codes_are_the_shell_s_and_argparse_s_and_the_readme_and_help_list_each_of_the_code_s(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert ExitCode.INTERRUPTED == 128 + signal.SIGINT  # the shell's status of a process killed by SIGINT
    with pytest.raises(SystemExit) as usage:
        main(["eval", "--no-such-option"])
    assert usage.value.code == ExitCode.USAGE  # argparse's own exit code for bad arguments
    readme = README.read_text(encoding="utf-8")
    table = readme.split("| code | meaning |\n|---|---|\n", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for row in table.splitlines():
        code, meaning = row.removeprefix("| ").removesuffix(" |").split(" | ")
        rows[code] = meaning
    assert rows == {str(code.value): code.meaning for code in ExitCode}
    for argv in (["--help"], ["eval", "--help"], ["suite", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        shown = capsys.readouterr().out
        assert all(f"  {code.value:>3}  {code.meaning}" in shown for code in ExitCode), argv
