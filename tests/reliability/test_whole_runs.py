"""Whole runs that finish (issue 48): no input, resume or merge silently loses, duplicates or flips a question.

Inputs that cannot be right are refused in one line before anything runs (an id listed twice, a benchmark file changed
since the run began, a merge over a merged run that was resumed since); a merge killed before its manifest is redone;
a suite redoes degraded cells as `clearmed eval` does; the summary's dollars and retries are the spend log's. The
runs use the scripted CLI (tests/cli/scripted_cli.py): every backbone is one scripted LM, priced.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from dspy import lm15

from clearmed.cli.main import main
from clearmed.evaluation import read_records
from clearmed.evaluation.shard import ids_digest
from clearmed.evaluation.store import MANIFEST, RESULTS, load_manifest
from clearmed.testing import ScriptedCall
from tests.cli.scripted_cli import answer, config_toml, scripted

pytestmark = pytest.mark.reliability

OPTIONS = {"A": "Cortisol", "B": "Insulin", "C": "Thyroxine", "D": "Aldosterone"}
RATE_LIMITED = lm15.RateLimitError("too many requests", retry_after=0.0, status=429)


def write_config(tmp: Path) -> Path:
    path = tmp / "remote.toml"
    path.write_text(config_toml(run=f'runs_dir = "{tmp / "runs"}"'), encoding="utf-8")
    return path


def medqa_file(path: Path, golds: str) -> Path:
    """A MedQA file, one row per gold letter (the loader's ids are positions: medqa:<stem>:0, ...)."""
    rows = [
        {"question": f"Question {i}: which hormone is low here?", "options": OPTIONS, "answer_idx": gold}
        for i, gold in enumerate(golds)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def medqa_eval(tmp_path: Path, *extra: str) -> tuple[list[str], Path, Path]:
    """`clearmed eval` over a 3-question MedQA file (golds A, B, C) into tmp_path/run: the command, the file, the
    folder."""
    source = medqa_file(tmp_path / "m.jsonl", "ABC")
    run_dir = tmp_path / "run"
    argv = ["eval", "--benchmark", "medqa", "--source", str(source), "--run-dir", str(run_dir), *extra]
    return [*argv, "-c", str(write_config(tmp_path))], source, run_dir


def fails_first(times: int):
    """The dynamic pathway's answer, except its first `times` calls: a rate limit (no retries here), so their
    questions are degraded."""
    count = itertools.count()

    def dynamic_answer(call: ScriptedCall) -> object:
        return RATE_LIMITED if next(count) < times else answer(call)

    return dynamic_answer


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def degraded_ids(folder: Path) -> list[str]:
    return [record.question_id for record in read_records(folder) if record.degraded]


# --------------------------------------------------------------------------------------------- 3. an id twice


def test_an_id_listed_twice_in_ids_is_refused_naming_it_before_anything_runs(
    reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case("bad input", "--ids lists a question twice: one line naming it, nothing run"):
        engine = scripted(monkeypatch)
        ids = tmp_path / "ids.txt"
        ids.write_text("medqa:m:0\nmedqa:m:2\nmedqa:m:0\n")
        argv, _, run_dir = medqa_eval(tmp_path, "--ids", str(ids))
        assert main(argv) == 2
        line = one_line(capsys.readouterr().err)
        assert "'medqa:m:0' is listed twice" in line
        assert engine.calls == []
        assert not run_dir.exists()


def test_a_run_folder_that_lists_a_question_twice_is_refused_on_resume(
    reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case(
        "bad input", "a manifest naming a question twice (older clearmed): refused, not scored twice"
    ):
        engine = scripted(monkeypatch)
        run_dir = tmp_path / "run"
        argv = ["eval", "--benchmark", "demo", "--limit", "2", "-c", str(write_config(tmp_path))]
        argv += ["--run-dir", str(run_dir)]
        assert main([*argv, "--stop-after", "0"]) == 0
        manifest = json.loads((run_dir / MANIFEST).read_text())
        first, second = manifest["question_ids"]
        manifest["question_ids"] = [second, first, second]  # as an --ids list with a repeat made it before
        (run_dir / MANIFEST).write_text(json.dumps(manifest))
        capsys.readouterr()
        assert main(argv) == 2
        line = one_line(capsys.readouterr().err)
        assert f"the question {second!r} is listed twice" in line
        assert engine.calls == []


def test_shards_of_a_list_that_repeats_an_id_are_refused_by_the_merge(
    reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case("bad input", "merge of shards whose list repeats an id: one line, nothing written"):
        scripted(monkeypatch)
        config = write_config(tmp_path)
        ids = tmp_path / "ids.txt"
        ids.write_text("demo-01\ndemo-02\ndemo-03\n")
        shards = [tmp_path / f"shard{k}" for k in (1, 2)]
        for k, folder in enumerate(shards, start=1):
            argv = ["eval", "--benchmark", "demo", "--ids", str(ids), "-c", str(config), "--shard", f"{k}/2"]
            assert main([*argv, "--run-dir", str(folder)]) == 0
        # what an older clearmed made of the list demo-01, demo-02, demo-01: shard 1 holds demo-01 twice
        repeated = ["demo-01", "demo-02", "demo-01"]
        for folder, question_ids in zip(shards, (["demo-01", "demo-01"], ["demo-02"]), strict=True):
            manifest = json.loads((folder / MANIFEST).read_text())
            manifest["question_ids"] = question_ids
            manifest.pop("question_digests", None)
            manifest["shard"]["ids_digest"] = ids_digest(repeated)
            (folder / MANIFEST).write_text(json.dumps(manifest))
        capsys.readouterr()
        out = tmp_path / "merged"
        assert main(["merge", *map(str, shards), "--out", str(out)]) == 2
        assert "the shards name the question 'demo-01' twice" in one_line(capsys.readouterr().err)
        assert not out.exists()


# --------------------------------------------------------------------------------------------- 6. a changed file


def test_a_benchmark_file_changed_since_the_run_began_is_refused_before_anything_runs(
    reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case("bad input", "benchmark file changed between runs (gold mended, row inserted): refused"):
        engine = scripted(monkeypatch)
        argv, source, run_dir = medqa_eval(tmp_path)
        assert main([*argv, "--stop-after", "2"]) == 0
        calls = len(engine.calls)
        records = (run_dir / RESULTS).read_bytes()
        capsys.readouterr()

        medqa_file(source, "ADC")  # the second question's gold mended
        assert main(argv) == 2
        line = one_line(capsys.readouterr().err)
        assert "1 of this run's questions changed in the benchmark since it began (first: medqa:m:1" in line

        rows = source.read_text().splitlines()  # the gold back, and a row inserted at the top: every id moves
        medqa_file(source, "ABC")
        source.write_text(rows[0].replace("Question 0", "Question new") + "\n" + source.read_text())
        assert main(argv) == 2
        assert "3 of this run's questions changed" in one_line(capsys.readouterr().err)
        assert len(engine.calls) == calls  # nothing ran
        assert (run_dir / RESULTS).read_bytes() == records

        medqa_file(source, "ABC")  # the file as the run began: it resumes and finishes
        assert main(argv) == 0
        assert sorted(r.question_id for r in read_records(run_dir)) == ["medqa:m:0", "medqa:m:1", "medqa:m:2"]


def test_a_run_folder_from_before_question_digests_resumes_with_a_note(
    reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case("lost work", "a run folder without question digests (older clearmed): resumed, with a note"):
        scripted(monkeypatch)
        argv, _, run_dir = medqa_eval(tmp_path)
        assert main([*argv, "--stop-after", "1"]) == 0
        capsys.readouterr()
        manifest = json.loads((run_dir / MANIFEST).read_text())
        manifest.pop("question_digests", None)
        (run_dir / MANIFEST).write_text(json.dumps(manifest))
        capsys.readouterr()
        assert main(argv) == 0
        assert "keeps no digest of its questions" in " ".join(capsys.readouterr().err.split())  # the console wraps
        assert len(list(read_records(run_dir))) == 3
        assert load_manifest(run_dir / MANIFEST).question_digests is None  # the note again on every resume


# --------------------------------------------------------------------------------------------- 4 and 10. merges


def shards_of_a_degraded_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[Path]]:
    """Two shards of 4 demo questions; the dynamic pathway fails once, so shard 1's first question is degraded."""
    scripted(monkeypatch, dynamic_answer=fails_first(1))
    config = write_config(tmp_path)
    shards = [tmp_path / f"shard{k}" for k in (1, 2)]
    for k, folder in enumerate(shards, start=1):
        argv = ["eval", "--benchmark", "demo", "--limit", "4", "-c", str(config), "--shard", f"{k}/2"]
        assert main([*argv, "--run-dir", str(folder)]) == (4 if k == 1 else 0)  # 4: degraded questions left
    assert len(degraded_ids(shards[0])) == 1
    return config, shards


def test_merging_again_into_a_merged_run_that_was_resumed_is_refused(
    reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case("lost work", "merge again over a merged run that a resume mended: refused, resume kept"):
        config, shards = shards_of_a_degraded_run(tmp_path, monkeypatch)
        out = tmp_path / "merged"
        merge = ["merge", *map(str, shards), "--out", str(out)]
        assert main(merge) == 4  # the merged run holds the degraded question (issue 58: exit 4, as eval's)
        assert main(merge) == 4  # the same merge again rewrites the same run
        assert len(degraded_ids(out)) == 1
        scripted(monkeypatch)  # the service mended: the merged run resumes and redoes its degraded question
        assert main(["eval", "--benchmark", "demo", "--limit", "4", "-c", str(config), "--run-dir", str(out)]) == 0
        assert degraded_ids(out) == []
        resumed = {name: (out / name).read_bytes() for name in (RESULTS, "spend.jsonl", "summary.json")}
        capsys.readouterr()
        assert main(merge) == 2
        line = one_line(capsys.readouterr().err)
        assert "holds this run merged and changed since" in line
        assert f"--run-dir {out}" in line
        assert {name: (out / name).read_bytes() for name in resumed} == resumed  # the resume is not undone


def test_a_merge_killed_before_its_manifest_is_redone(
    reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case("lost work", "merge killed before its manifest: the next merge redoes it"):
        from clearmed.evaluation.store import RunStore

        _, shards = shards_of_a_degraded_run(tmp_path, monkeypatch)
        out = tmp_path / "merged"
        merge = ["merge", *map(str, shards), "--out", str(out)]
        real = RunStore.write_manifest

        def killed(store: RunStore, manifest: object) -> None:
            if store.directory == out:
                raise KeyboardInterrupt  # the kill lands after every other file, before the manifest
            real(store, manifest)  # type: ignore[arg-type]

        monkeypatch.setattr(RunStore, "write_manifest", killed)
        assert main(merge) == 130
        assert not (out / MANIFEST).exists()
        assert (out / RESULTS).is_file()
        monkeypatch.setattr(RunStore, "write_manifest", real)
        assert main(merge) == 4  # done, and it holds the shards' degraded question
        records = list(read_records(out))
        assert sorted(r.question_id for r in records) == sorted(
            r.question_id for folder in shards for r in read_records(folder)
        )
        shard_spend = b"".join((folder / "spend.jsonl").read_bytes() for folder in shards)
        assert (out / "spend.jsonl").read_bytes() == shard_spend  # each shard's spend once


# --------------------------------------------------------------------------------------------- 5 and 10. suites


def suite_argv(tmp_path: Path, *extra: str) -> list[str]:
    config = write_config(tmp_path)
    matrix = ["--program", "clear", "--benchmark", "demo", "-c", str(config), "--limit", "4"]
    return ["suite", *matrix, "--out", str(tmp_path / "suite"), *extra]


def test_a_suite_rerun_redoes_a_cell_with_degraded_questions(
    reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case("lost work", "suite rerun over a cell with degraded questions: redone, not 'done before'"):
        scripted(monkeypatch, dynamic_answer=fails_first(1))
        argv = suite_argv(tmp_path)
        assert main(argv) == 4  # the cell is left with a degraded question: the suite says so
        cell = tmp_path / "suite" / "remote" / "demo" / "clear-n4-s0"
        assert len(degraded_ids(cell)) == 1
        capsys.readouterr()
        engine = scripted(monkeypatch)
        assert main(argv) == 0
        assert "done before" not in capsys.readouterr().err
        assert degraded_ids(cell) == []
        assert {call.stage for call in engine.calls} >= {"dynamic_answer"}  # the failed stage was asked again
        assert main(argv) == 0
        assert "done before" in capsys.readouterr().err  # and now it is done


def test_a_sharded_suite_resumes_its_merged_cell_and_redoes_a_half_written_merge(
    reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case("lost work", "sharded suite: degraded merged cell resumed, half-written merge redone"):
        scripted(monkeypatch, dynamic_answer=fails_first(1))
        argv = suite_argv(tmp_path, "--shards", "2")
        assert main(argv) == 4  # merged with its degraded question, which the rerun redoes in the merged folder
        cell = tmp_path / "suite" / "remote" / "demo" / "clear-n4-s0"
        assert len(degraded_ids(cell)) == 1
        scripted(monkeypatch)
        assert main(argv) == 0  # the merged cell is resumed in place (a merge again would be refused)
        assert degraded_ids(cell) == []
        assert len(list(read_records(cell))) == 4

        import shutil

        kept = {"config.json", RESULTS, "spend.jsonl", ".lock"}  # as a merge killed before its manifest leaves it
        for entry in cell.iterdir():
            if entry.name not in kept:
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        capsys.readouterr()
        assert main(argv) == 0
        err = capsys.readouterr().err
        assert "not empty and holds no run" not in err
        assert (cell / MANIFEST).is_file()
        assert len(list(read_records(cell))) == 4


# --------------------------------------------------------------------------------------------- 8. one ledger


def test_the_summary_dollars_and_retries_are_the_spend_logs_across_a_kill(
    reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with reliability.case("lost work", "summary dollars and retries after a kill: the spend log's, not the records'"):
        from clearmed.evaluation.spend import Prices
        from clearmed.evaluation.spend_log import SpendLog
        from clearmed.signatures.records import CallUsage

        scripted(monkeypatch)
        run_dir = tmp_path / "run"
        argv = ["eval", "--benchmark", "demo", "--limit", "3", "-c", str(write_config(tmp_path))]
        argv += ["--run-dir", str(run_dir)]
        assert main(argv) == 0
        # A kill after the last question's calls were paid (and logged) but before its record was written, during a
        # call that had retried twice: the resume pays for the question again.
        lines = (run_dir / RESULTS).read_bytes().splitlines(keepends=True)
        (run_dir / RESULTS).write_bytes(b"".join(lines[:-1]))
        (run_dir / "summary.json").unlink()
        killed = json.loads(lines[-1])["question_id"]
        SpendLog(run_dir, Prices({})).add(killed, CallUsage(stage="parametric", retries=2), usd=0.5)
        assert main(argv) == 0
        summary = json.loads((run_dir / "summary.json").read_text())
        logged = [json.loads(line) for line in (run_dir / "spend.jsonl").read_text().splitlines()]
        records = list(read_records(run_dir))
        assert summary["spend"]["usd"] == pytest.approx(sum(entry["usd"] or 0 for entry in logged))
        assert summary["spend"]["usd"] > sum(r.cost_usd or 0 for r in records) + 0.5  # the first attempt counts too
        assert summary["spend"]["retries"] == 2
        stages = {stage["stage"]: stage for stage in summary["spend"]["by_stage"]}
        assert stages["parametric"]["retries"] == 2
        assert sum(stage["usd"] for stage in stages.values()) == pytest.approx(summary["spend"]["usd"])
        # compare and the HTML report summarise the folder again: the same dollars and retries as summary.json.
        from clearmed.numbers.compare import load_runs
        from clearmed.report.html_report import load_run_views

        (compared,) = load_runs([run_dir])
        (viewed,) = load_run_views([run_dir])
        for again in (compared.summary, viewed.summary):
            assert again.spend is not None
            assert (again.spend.usd, again.spend.retries) == (pytest.approx(summary["spend"]["usd"]), 2)


# --------------------------------------------------------------------------------------------- 11. small ones


def test_ids_are_honoured_with_the_demo_bundle(reliability, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with reliability.case("bad input", "--ids with the demo bundle: exactly those questions, in order"):
        scripted(monkeypatch)
        ids = tmp_path / "ids.txt"
        ids.write_text("demo-03\ndemo-01\n")
        run_dir = tmp_path / "run"
        argv = ["eval", "--benchmark", "demo", "--ids", str(ids), "-c", str(write_config(tmp_path))]
        assert main([*argv, "--run-dir", str(run_dir)]) == 0
        assert load_manifest(run_dir / MANIFEST).question_ids == ["demo-03", "demo-01"]
        assert sorted(r.question_id for r in read_records(run_dir)) == ["demo-01", "demo-03"]


def test_index_build_takes_dash_c_as_the_readme_says(
    reliability, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case("bad input", "`index build -c FILE` (the README's form) reads the config"):
        config = tmp_path / "no-corpus.toml"
        config.write_text("[run]\nnum_threads = 1\n")
        assert main(["index", "build", "-c", str(config)]) == 2
        line = one_line(capsys.readouterr().err)
        assert f"{config}: no [corpus] table" in line  # it read the file: -c is --config


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_a_second_ctrl_c_cuts_a_python_api_run(reliability, tmp_path: Path) -> None:
    with reliability.case("lost work", "Python API: a second Ctrl-C cuts the attempts in flight, as the CLI's does"):
        import dspy

        from clearmed import evaluate
        from clearmed.core.retries import RetriesCut, reset_cut, retries_cut
        from clearmed.testing import demo_config_toml

        ended: list[str] = []

        class Hanging(dspy.Module):
            """Each question waits on its LM attempt until the retries are cut (or 10 s pass)."""

            program_name = "hanging"

            def forward(self, question: object) -> dspy.Prediction:
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    if retries_cut():
                        ended.append("cut")
                        raise RetriesCut("retries cut short")
                    time.sleep(0.02)
                ended.append("timed out")
                raise TimeoutError

        def press_twice() -> None:
            for _ in range(2):
                time.sleep(0.5)
                os.kill(os.getpid(), signal.SIGINT)

        config = tmp_path / "config.toml"
        config.write_text(demo_config_toml())
        questions = [{"question": f"Question {i}?", "options": ["a", "b"], "answer": "A"} for i in range(2)]
        presser = threading.Thread(target=press_twice)
        started = time.monotonic()
        presser.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                evaluate(Hanging(), questions, config=config, run_dir=tmp_path / "run", num_threads=2)
            presser.join()
            while len(ended) < 2 and time.monotonic() - started < 12:
                time.sleep(0.05)
            assert ended == ["cut", "cut"]
            assert time.monotonic() - started < 5
        finally:
            reset_cut()
