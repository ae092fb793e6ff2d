"""Logs that read in a file: outside a terminal the CLI wraps no line, and `index build`, `index warm` and `compile`
print eval's progress lines (at the pace of `evaluation.progress.next_gap`), with no empty lines, no bars and no
carriage-return frames."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
import tqdm  # type: ignore[import-untyped]

from clearmed.api import assemble
from clearmed.cli.main import main
from clearmed.core.console import LogLines, user_console
from clearmed.evaluation import progress
from clearmed.testing import ScriptedCall, demo_config_toml, label_all, verifier_reply
from tests.optimize.echo_lm import echo_lm

# eval's form: "label: done/total unit (share)  elapsed H:MM:SS  ETA H:MM:SS", or "label: done unit  elapsed ..."
LINE = re.compile(
    r"^(?P<label>[^:]+): (?P<done>\d+)(?:/(?P<total>\d+))? (?P<unit>[a-zA-Z ]+?)(?: \((?P<share>\d+)%\))?  "
    r"elapsed \d+:\d\d:\d\d(?:  ETA (?:\d+:\d\d:\d\d|-))?$"
)
LONG = "a-folder-whose-name-is-long-enough-to-pass-eighty-columns-on-its-own-" * 2


def progress_lines(err: str) -> list[tuple[str, str, str | None]]:
    return [(m["label"], m["done"], m["total"]) for line in err.splitlines() if (m := LINE.match(line))]


@pytest.fixture
def ten_seconds_a_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each reading of the progress clock is 10 s after the one before, whatever the machine's pace."""
    now = [0.0]

    def tick() -> float:
        now[0] += 10.0
        return now[0]

    monkeypatch.setattr(progress, "monotonic", tick)


def write_corpus(path: Path, rows: int) -> Path:
    lines = (
        json.dumps({"id": f"d{i}", "title": f"doc {i}", "text": f"thyroid note {i % 97} iodine"}) for i in range(rows)
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_config(tmp_path: Path, corpus: Path) -> Path:
    table = f'backend = "bm25s"\npath = "{corpus}"\nindex_dir = "{tmp_path / "index"}"'
    config = tmp_path / "c.toml"
    config.write_text(demo_config_toml(corpus=table, program="local_k = 4"), encoding="utf-8")
    return config


def test_a_long_path_printed_to_a_log_is_one_line() -> None:
    out = io.StringIO()
    user_console(file=out).print(f"artifact: /runs/{LONG}/compiled  (use it with --program-artifact ...)")
    assert out.getvalue() == f"artifact: /runs/{LONG}/compiled  (use it with --program-artifact ...)\n"
    screen = Screen()
    user_console(file=screen).print(f"artifact: /runs/{LONG}/compiled")
    assert len(screen.getvalue().splitlines()) > 1  # a terminal wraps at its width, as a reader expects


class Screen(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_index_build_prints_progress_lines_into_a_log_and_no_empty_line(
    tmp_path: Path, ten_seconds_a_reading: None, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "notes.jsonl", 3000)
    assert main(["index", "build", "--path", str(corpus), "--out", str(tmp_path / "index"), "--name", "notes"]) == 0
    err = capsys.readouterr().err
    # a reading at each 1,000 passages, 10 s apart: lines at 10 s and 20 s, then the last (all rows read)
    assert progress_lines(err) == [("indexing notes", done, "3000") for done in ("1000", "2000", "3000")]
    assert "indexing notes: 1000/3000 rows (33%)  elapsed 0:00:10  ETA 0:00:20" in err.splitlines()
    assert "" not in err.splitlines()


def test_index_warm_prints_progress_lines_for_the_build_and_the_searches_and_no_empty_line(
    tmp_path: Path, ten_seconds_a_reading: None, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, write_corpus(tmp_path / "notes.jsonl", 2500))
    argv = ["index", "warm", "--benchmark", "demo", "--program", "medrag", "-c", str(config)]
    assert main([*argv, "--out", str(tmp_path / "hits.sqlite")]) == 0
    err = capsys.readouterr().err
    assert "" not in err.splitlines()
    lines = progress_lines(err)
    # the first build of the index counts passages (no total is known ahead), then the 12 demo questions are
    # searched, a reading each: lines 10, 10, 20 and 40 s apart, then the last
    assert lines == [
        ("index of notes", "1000", None),
        ("index of notes", "2000", None),
        ("index of notes", "2500", None),
        *(("searching notes", done, "12") for done in ("1", "2", "4", "8", "12")),
    ]
    assert len(err.splitlines()) == len(lines)  # nothing else


def _answer_a(call: ScriptedCall) -> dict[str, object]:
    cited: dict[str, object] = {"cited_ids": []} if "evidence" in call.user else {}
    return {"rationale": "because", **cited, "answer": "A"}


def test_compile_writes_a_log_without_carriage_returns_and_with_progress_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lm, _ = echo_lm(
        {
            "parametric": _answer_a,
            "local_answer": _answer_a,
            "dynamic_answer": _answer_a,
            "source_quality": label_all("high"),
            "verifier": verifier_reply("consensus"),
        }
    )
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})
    out = tmp_path / LONG
    argv = ["compile", "--optimizer", "bootstrap", "--benchmark", "demo", "--train", "2", "--val", "2"]
    assert main([*argv, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "\r" not in captured.err
    assert "it/s" not in captured.err  # no bar's last frame either
    assert "" not in captured.err.splitlines()
    assert "| after |" in captured.out
    assert [(label, total) for label, _, total in progress_lines(captured.err)] == [
        ("clear with bootstrap, val before", "2"),
        ("clear with bootstrap, optimizing", None),
        ("clear with bootstrap, val after", "2"),
    ]
    assert f"artifact: {out}  (use it with --program-artifact {out})" in captured.err.splitlines()


def test_a_bar_drawn_into_a_log_leaves_the_lines_around_it() -> None:
    out = io.StringIO()
    log = LogLines(out)
    print("before", file=log)
    for _ in tqdm.tqdm(range(50), file=log, mininterval=0):
        pass
    for _ in tqdm.tqdm(range(5), file=log, leave=False, mininterval=0):
        pass
    bar = tqdm.tqdm(total=3, file=log)
    print("while a bar is open", file=log)
    bar.update(3)
    bar.close()
    log.write("no newline yet")
    log.write("\n")
    assert out.getvalue() == "before\nwhile a bar is open\nno newline yet\n"
