"""Progress in batch logs: a run whose console is no terminal prints a line every N questions or T seconds, and one at
the end, with done/total, the accuracy and dollars so far, and the ETA; on a terminal it draws the bar instead."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from clearmed import assemble
from clearmed.cli.main import main
from clearmed.config import parse_config
from clearmed.evaluation import EvalSpec, read_records, run_evaluation
from clearmed.evaluation.progress import PROGRESS_EVERY, ProgressLines
from clearmed.testing import UNREACHABLE_BACKBONE, demo_config_toml, scripted_lm
from clearmed.testing.synthetic_run import synthetic_program, synthetic_questions

LINE = re.compile(
    r"^(?P<label>.+?): (?P<done>\d+)/(?P<total>\d+) \((?P<share>\d+)%\)  acc (?P<acc>[\d.]+%|-) "
    r"\((?P<correct>\d+)/(?P<scored>\d+)\)  \$(?P<usd>[\d.]+)  elapsed \d+:\d\d:\d\d  ETA (?P<eta>\d+:\d\d:\d\d|-)$"
)
# $1,000 per million prompt tokens: each synthetic question costs real-looking dollars.
PRICED = parse_config(
    {
        "backbones": {
            "main": {
                "kind": "openai_compatible",
                "model": "scripted",
                "api_base": "http://127.0.0.1:9/v1",
                "price": {"input": 1000.0, "output": 2000.0},
            }
        }
    },
    source="priced.toml",
)


def progress_lines(text: str) -> list[dict[str, str]]:
    return [match.groupdict() for line in text.splitlines() if (match := LINE.match(line))]


def run(run_dir: Path, n: int, *, console: Console, threads: int = 1, stop_after: int | None = None) -> None:
    spec = EvalSpec(
        program="clear", benchmark="synthetic", source="synthetic", questions=synthetic_questions(n), run_dir=run_dir
    )
    program, _ = synthetic_program()
    run_evaluation(spec, PRICED, program, num_threads=threads, console=console, stop_after=stop_after)


def log() -> tuple[Console, io.StringIO]:
    """A console writing to a file, as a Slurm job's stderr is."""
    out = io.StringIO()
    return Console(file=out, width=200), out


@pytest.mark.parametrize("threads", [1, 4])
def test_a_batch_log_gets_a_line_every_25_questions_and_one_at_the_end(tmp_path: Path, threads: int) -> None:
    console, out = log()
    run(tmp_path / "run", 60, console=console, threads=threads)
    lines = progress_lines(out.getvalue())
    assert PROGRESS_EVERY == 25
    assert [(line["done"], line["total"], line["share"]) for line in lines] == [
        ("25", "60", "42"),
        ("50", "60", "83"),
        ("60", "60", "100"),
    ]
    assert {line["label"] for line in lines} == {"clear on synthetic"}
    records = list(read_records(tmp_path / "run"))
    scored = [r for r in records if r.score is not None and not r.degraded]
    correct = sum(r.score.correct for r in scored if r.score is not None)
    last = lines[-1]
    assert (int(last["correct"]), int(last["scored"])) == (correct, len(scored))
    assert last["acc"] == f"{correct / len(scored):.1%}"
    assert 0 < correct < len(scored)  # the synthetic questions are not all right, nor all wrong
    total = sum(r.cost_usd or 0.0 for r in records)  # what the spend log holds: every question's calls
    assert total > 1
    assert float(last["usd"]) == pytest.approx(total, abs=0.006)
    assert float(lines[0]["usd"]) < float(lines[1]["usd"]) < float(last["usd"])  # dollars so far, growing
    assert last["eta"] == "0:00:00"
    assert "━" not in out.getvalue()  # and no bar drawn at the end as well


def test_a_resumed_run_counts_from_what_the_folder_holds(tmp_path: Path) -> None:
    console, out = log()
    run(tmp_path / "run", 60, console=console, stop_after=30)
    assert [line["done"] for line in progress_lines(out.getvalue())] == ["25", "30"]  # the stop prints the last line
    console, out = log()
    run(tmp_path / "run", 60, console=console)
    lines = progress_lines(out.getvalue())
    assert [line["done"] for line in lines] == ["55", "60"]  # 25 questions after the 30 already done, then the end
    assert int(lines[0]["scored"]) >= 50  # the accuracy covers the earlier questions too


def test_a_terminal_gets_the_bar_and_no_lines(tmp_path: Path) -> None:
    out = io.StringIO()
    run(tmp_path / "run", 30, console=Console(file=out, width=200, force_terminal=True))
    assert progress_lines(out.getvalue()) == []
    assert "30/30" in out.getvalue()


def test_no_progress_asked_prints_none(tmp_path: Path) -> None:
    console, out = log()
    spec = EvalSpec(
        program="clear", benchmark="synthetic", source="s", questions=synthetic_questions(3), run_dir=tmp_path / "r"
    )
    run_evaluation(spec, PRICED, synthetic_program()[0], console=console, show_progress=False)
    assert out.getvalue() == ""


class Tally:
    def __init__(self, correct: int, scored: int, usd: float) -> None:
        self.correct, self.scored, self.usd = correct, scored, usd

    def spent_so_far(self) -> float:
        return self.usd


def test_slow_questions_get_a_line_every_60_seconds_with_the_eta_at_this_pace() -> None:
    console, out = log()
    now = [100.0]
    lines = ProgressLines(console, "clear on medqa", total=1000, done=400, clock=lambda: now[0])
    for seconds, tally in (
        (20, Tally(1, 1, 0.5)),
        (50, Tally(2, 2, 1.0)),
        (61, Tally(2, 3, 1.5)),
        (90, Tally(3, 4, 2)),
    ):
        now[0] = 100.0 + seconds
        lines.tick(tally)
    lines.end(Tally(3, 4, 2.0))
    printed = out.getvalue().splitlines()
    assert printed == [
        # 3 questions in 61 s at this pace: 597 left take 3:22:19 more
        "clear on medqa: 403/1000 (40%)  acc 66.7% (2/3)  $1.50  elapsed 0:01:01  ETA 3:22:19",
        "clear on medqa: 404/1000 (40%)  acc 75.0% (3/4)  $2.00  elapsed 0:01:30  ETA 3:43:30",
    ]


def test_the_end_line_is_not_printed_twice_and_an_empty_run_prints_none() -> None:
    console, out = log()
    lines = ProgressLines(console, "x", total=2, done=1, clock=lambda: 0.0)
    lines.end(Tally(0, 0, 0.0))
    assert out.getvalue() == ""  # nothing ran in this process
    lines.tick(Tally(1, 1, 0.0))
    lines.end(Tally(1, 1, 0.0))
    assert out.getvalue().splitlines() == ["x: 2/2 (100%)  acc 100.0% (1/1)  $0.00  elapsed 0:00:00  ETA 0:00:00"]


def test_clearmed_eval_prints_its_lines_to_a_captured_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "priced.toml"
    config.write_text(
        demo_config_toml(
            backbone=UNREACHABLE_BACKBONE + "\nprice = { input = 1000.0, output = 2000.0 }",
            program="json_fallback = false",
        ),
        encoding="utf-8",
    )
    lm, _ = scripted_lm({"parametric": {"rationale": "because", "answer": "A"}, "response": {"response": "rest"}})
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})
    argv = ["eval", "--program", "direct", "--benchmark", "demo", "-c", str(config), "--run-dir", str(tmp_path / "r")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    (line,) = progress_lines(err)  # fewer than 25 questions: the line at the end
    summary: dict[str, Any] = json.loads((tmp_path / "r" / "summary.json").read_text())
    planned = str(summary["planned"])
    assert (line["label"], line["done"], line["total"]) == ("direct on demo", planned, planned)
    assert float(line["usd"]) == pytest.approx(summary["spend"]["usd"], abs=0.006)
    assert float(line["usd"]) > 0
