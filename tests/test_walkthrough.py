"""docs/walkthrough.md run as a reader runs it: its ```bash blocks marked `<!-- walkthrough:run -->`, one after the
other in an empty folder, each exiting 0, against two fake OpenAI-compatible servers on 127.0.0.1 standing in for
the reader's `$MODEL_A_URL` and `$MODEL_B_URL`; then each block marked `<!-- walkthrough:shows FILE -->` equals the
first lines of FILE as the commands wrote it, so the page cannot drift from what clearmed does.

The fakes (`tests/reliability/fakes.py`) answer every CLEAR stage: model A with the gold; model B with a wrong
option on every other question when its prompt holds no evidence (Direct, and CLEAR's parametric pathway), the gold
when it does. So the suite's numbers are known: A 100% with either program, B 50% with Direct and 100% with CLEAR.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from clearmed.demo import demo_dir
from clearmed.evaluation import read_records
from clearmed.numbers.results_table import runs_frame
from tests.reliability.fakes import FakeOpenAI

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "walkthrough.md"
# A marker, then the fenced block right after it: its language and its text.
MARKED_BLOCK = re.compile(r"<!-- walkthrough:(run|shows (\S+)) -->\n```(\w+)\n(.*?)^```", re.DOTALL | re.MULTILINE)
# CSV columns that differ from one machine to the next (the digest covers the servers' addresses and the install's
# paths; seconds are measured), each with the shape its value must have.
VARYING = {"config_digest": re.compile(r"[0-9a-f]{16}"), "seconds": re.compile(r"\d+(\.\d+)?(e-\d+)?")}
SUITE = "runs/suites/walkthrough"


def marked_blocks(text: str) -> tuple[list[str], list[tuple[str, str, list[str]]]]:
    """The doc's runnable bash blocks, and its shown excerpts as (file, language, lines)."""
    runs: list[str] = []
    shows: list[tuple[str, str, list[str]]] = []
    for kind, path, language, body in MARKED_BLOCK.findall(text):
        if kind == "run":
            assert language == "bash", f"a walkthrough:run block is {language}, not bash"
            runs.append(body)
        else:
            shows.append((path, language, body.splitlines()))
    return runs, shows


def masked(lines: list[str]) -> list[list[str]]:
    """CSV lines as rows, the varying columns' values checked for their shape and replaced by '...'."""
    rows = list(csv.reader(lines))
    header = rows[0]
    for row in rows[1:]:
        for name, shape in VARYING.items():
            column = header.index(name)
            assert shape.fullmatch(row[column]), f"{name} {row[column]!r}"
            row[column] = "..."
    return rows


def demo_gold() -> dict[str, str]:
    """Question text -> gold letters ("B" or "B,C,D") of the demo's multiple-choice questions."""
    lines = (demo_dir() / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    questions = [json.loads(line) for line in lines]
    return {q["text"]: ",".join(q["gold_letters"]) for q in questions if q["gold_letters"]}


def model(*, wrong_from_memory: bool) -> Callable[[str], str]:
    """A fake model's answer to a prompt: the gold, or (`wrong_from_memory`) on every other question asked without
    evidence, an option that is not the gold."""
    gold = demo_gold()
    wrong = set(list(gold)[1::2]) if wrong_from_memory else set()

    def answer(user: str) -> str:
        text = next(text for text in gold if text in user)
        if text in wrong and "evidence ## ]]" not in user:
            return next(letter for letter in "ABCDE" if letter not in gold[text])
        return gold[text]

    return answer


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    with FakeOpenAI(model(wrong_from_memory=False)) as a, FakeOpenAI(model(wrong_from_memory=True)) as b:
        yield a, b


def test_the_markers_find_every_block_the_walkthrough_runs_and_shows() -> None:
    runs, shows = marked_blocks(DOC.read_text(encoding="utf-8"))
    assert [block.count("clearmed ") >= 1 for block in runs] == [False, True, True, True]  # configs, then commands
    assert [(path, language) for path, language, _ in shows] == [
        ("runs/walkthrough-compare/comparison.tex", "latex"),
        ("walkthrough.csv", "csv"),
    ]
    assert all(lines for _, _, lines in shows)


def test_the_walkthrough_runs_as_written_and_shows_what_it_writes(
    servers: tuple[FakeOpenAI, FakeOpenAI], tmp_path: Path
) -> None:
    a, b = servers
    runs, shows = marked_blocks(DOC.read_text(encoding="utf-8"))
    env = {
        **os.environ,
        "MODEL_A_URL": a.api_base,
        "MODEL_B_URL": b.api_base,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # this venv's `clearmed`
        "DSPY_CACHEDIR": str(tmp_path / "dspy-cache"),  # a cold LM cache: the LM call counts are the doc's
    }
    work = tmp_path / "walkthrough"
    work.mkdir()
    for block in runs:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{block}\nexit {done.returncode}\n{done.stderr[-3000:]}"

    for path, language, lines in shows:
        written = (work / path).read_text(encoding="utf-8").splitlines()[: len(lines)]
        if language == "csv":
            assert masked(written) == masked(lines), "\n".join(written)
        else:
            assert written == lines, "\n".join(written)

    # What the shown tables say, from the runs themselves: the fakes' accuracies, every cell merged from its two
    # shards of five questions, each run naming its model.
    runs_table = runs_frame(work / SUITE)
    accuracy = {(row.config, row.program): row.accuracy for row in runs_table.itertuples()}
    assert accuracy == {
        ("model-a", "direct"): 1.0,
        ("model-a", "clear"): 1.0,
        ("model-b", "direct"): 0.5,
        ("model-b", "clear"): 1.0,
    }
    assert (runs_table.model == runs_table.config).all()
    assert (runs_table.degraded == 0).all()
    for config in ("model-a", "model-b"):
        for program in ("direct", "clear"):
            cell = work / SUITE / config / "demo" / f"{program}-all-s0"
            shards = [cell.with_name(f"{cell.name}-shard{k}of2") for k in (1, 2)]
            assert [len(list(read_records(shard))) for shard in shards] == [5, 5]
            assert len(list(read_records(cell))) == 10
    with (work / "runs/walkthrough-compare/pairs.csv").open(encoding="utf-8") as pairs:
        baselines = {row["baseline"] for row in csv.DictReader(pairs)}
    assert baselines == {"model-b/demo/direct-all-s0"}
    assert {request["body"]["model"] for request in a.requests} == {"model-a"}
    assert {request["body"]["model"] for request in b.requests} == {"model-b"}
