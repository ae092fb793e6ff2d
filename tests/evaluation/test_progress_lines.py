"""Progress in batch logs: a run whose console is no terminal prints a line every N questions or T seconds, and one at
the end, with done/total, the accuracy and dollars so far, and the ETA; on a terminal it draws the bar instead."""

from __future__ import annotations

import io
import itertools
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from clearmed.api import assemble
from clearmed.cli.main import main
from clearmed.config import parse_config
from clearmed.evaluation import EvalSpec, progress, read_records, run_evaluation
from clearmed.evaluation.progress import ProgressLines
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


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Each reading of the lines' clock is 3 s after the one before: a question takes 3 s, whatever the machine."""
    now = [-3.0]

    def tick() -> float:
        now[0] += 3.0
        return now[0]

    monkeypatch.setattr(progress, "monotonic", tick)
    return now


@pytest.mark.parametrize("threads", [1, 4])
def test_a_batch_log_gets_lines_at_a_pace_that_suits_the_run_and_one_at_the_end(
    tmp_path: Path, threads: int, fake_clock: list[float]
) -> None:
    console, out = log()
    run(tmp_path / "run", 60, console=console, threads=threads)
    lines = progress_lines(out.getvalue())
    # 3 s a question: lines at 12 s (10 s in), 24 s, 48 s, 96 s (each gap as long as the run so far), then 60 s
    # apart (156 s), and the last at 180 s.
    assert [(line["done"], line["total"], line["share"]) for line in lines] == [
        ("4", "60", "7"),
        ("8", "60", "13"),
        ("16", "60", "27"),
        ("32", "60", "53"),
        ("52", "60", "87"),
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
    assert float(lines[0]["usd"]) < float(lines[3]["usd"]) < float(last["usd"])  # dollars so far, growing
    assert last["eta"] == "0:00:00"
    assert "━" not in out.getvalue()  # and no bar drawn at the end as well


def test_a_fast_eval_prints_only_its_last_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """200 questions in 2 s (10 ms each) print one line, not one every 25 questions (8 lines and the last)."""
    now = [0.0]

    def tick() -> float:
        now[0] += 0.01
        return now[0]

    monkeypatch.setattr(progress, "monotonic", tick)
    console, out = log()
    run(tmp_path / "run", 200, console=console)
    assert [line["done"] for line in progress_lines(out.getvalue())] == ["200"]


def test_a_resumed_run_counts_from_what_the_folder_holds(tmp_path: Path, fake_clock: list[float]) -> None:
    console, out = log()
    run(tmp_path / "run", 60, console=console, stop_after=30)
    # the stop prints the last line
    assert [line["done"] for line in progress_lines(out.getvalue())] == ["4", "8", "16", "30"]
    console, out = log()
    fake_clock[0] = -3.0  # a new process
    run(tmp_path / "run", 60, console=console)
    lines = progress_lines(out.getvalue())
    assert [line["done"] for line in lines] == ["34", "38", "46", "60"]  # paced from this process's start
    assert int(lines[0]["scored"]) >= 30  # the accuracy covers the earlier questions too
    assert lines[0]["eta"] == "0:01:18"  # 26 left at this process's 3 s a question, not the 30 earlier ones


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


def test_slow_questions_get_a_line_as_the_gaps_grow_to_60_seconds_with_the_eta_at_this_pace() -> None:
    console, out = log()
    now = [100.0]
    lines = ProgressLines(console, "clear on medqa", total=1000, done=400, clock=lambda: now[0])
    for seconds, tally in (
        (5, Tally(1, 1, 0.5)),
        (9.9, Tally(2, 2, 1.0)),  # under 10 s from the start: no line yet
        (10, Tally(2, 3, 1.5)),  # 10 s: the first line
        (19, Tally(3, 4, 2)),
        (20, Tally(3, 5, 2.5)),  # 10 s after the first (a gap as long as the run was then)
        (39, Tally(3, 6, 3)),
        (40, Tally(4, 7, 3.5)),  # 20 s after the second
        (79, Tally(4, 8, 4)),
        (80, Tally(4, 9, 4)),  # 40 s after the third, as long as the run was then
        (139, Tally(4, 10, 4)),
        (140, Tally(5, 11, 4)),  # 60 s after the fourth: never longer apart, however long the run
        (141, Tally(5, 12, 4)),
    ):
        now[0] = 100.0 + seconds
        lines.tick(tally)
    lines.end(Tally(5, 12, 4.0))  # the last line
    printed = out.getvalue().splitlines()
    assert printed == [
        # 3 questions in 10 s at this pace: 597 left take 0:33:10 more
        "clear on medqa: 403/1000 (40%)  acc 66.7% (2/3)  $1.50  elapsed 0:00:10  ETA 0:33:10",
        "clear on medqa: 405/1000 (40%)  acc 60.0% (3/5)  $2.50  elapsed 0:00:20  ETA 0:39:40",
        "clear on medqa: 407/1000 (41%)  acc 57.1% (4/7)  $3.50  elapsed 0:00:40  ETA 0:56:29",
        "clear on medqa: 409/1000 (41%)  acc 44.4% (4/9)  $4.00  elapsed 0:01:20  ETA 1:27:33",
        "clear on medqa: 411/1000 (41%)  acc 45.5% (5/11)  $4.00  elapsed 0:02:20  ETA 2:04:56",
        "clear on medqa: 412/1000 (41%)  acc 41.7% (5/12)  $4.00  elapsed 0:02:21  ETA 1:55:09",
    ]


def printed_after(seconds_each: float, questions: int) -> list[str]:
    """The lines printed for `questions` that take `seconds_each`, on a fake clock."""
    now = [0.0]
    console, out = log()
    lines = ProgressLines(console, "x", total=questions, done=0, clock=lambda: now[0])
    for _ in range(questions):
        now[0] += seconds_each
        lines.tick(Tally(0, 0, 0.0))
    lines.end(Tally(0, 0, 0.0))
    return out.getvalue().splitlines()


@pytest.mark.parametrize(
    ("seconds_each", "questions", "most"),
    [
        (0.002, 1000, 1),  # 2 s: the last line only (one every 25 questions printed 40)
        (0.1, 1000, 5),  # 100 s: at 10, 20, 40, 80 s and the end
        (1.0, 600, 13),  # 10 minutes: 10, 20, 40, 80 s, then a minute apart (140 ... 560 s), and the end
    ],
)
def test_a_short_run_prints_few_lines(seconds_each: float, questions: int, most: int) -> None:
    printed = printed_after(seconds_each, questions)
    assert len(printed) == most
    assert printed[-1].startswith(f"x: {questions}/{questions} (100%)")


def test_a_long_run_prints_a_line_every_minute() -> None:
    now = [0.0]
    console, out = log()
    lines = ProgressLines(console, "x", total=7200, done=0, clock=lambda: now[0])
    for _ in range(7200):  # two hours, a question a second
        now[0] += 1.0
        lines.tick(Tally(0, 0, 0.0))
    elapsed = (line.split("elapsed ")[1].split()[0] for line in out.getvalue().splitlines())
    times = [
        float(timedelta(hours=int(h), minutes=int(m), seconds=int(s)).total_seconds())
        for h, m, s in (clock.split(":") for clock in elapsed)
    ]
    assert times[:6] == [10.0, 20.0, 40.0, 80.0, 140.0, 200.0]
    assert {later - earlier for earlier, later in itertools.pairwise(times[3:-1])} == {60.0}
    assert len(times) == 4 + (7200 - 80) // 60 + 1  # and the last


def test_lines_keep_to_10_and_60_seconds() -> None:
    assert (progress.MIN_GAP, progress.PROGRESS_SECONDS) == (10.0, 60.0)
    assert [progress.next_gap(elapsed) for elapsed in (0, 9.9, 10, 35, 60, 61, 3600)] == [10, 10, 10, 35, 60, 60, 60]


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
