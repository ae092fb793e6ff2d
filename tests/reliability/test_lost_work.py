"""Lost work: evaluations killed with SIGKILL at random moments, then resumed; concurrent writers.

A resumed run must end with exactly the results of an uninterrupted run: every question once, none missing,
none duplicated, the same answers, and the run folder's other files in place. A second writer of the same
run folder is refused without touching it. The evaluations use a scripted model (a few ms per call), so
each kill lands somewhere inside a real run: while a question is answered, while its line is written, or
while the folder is being set up.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from clearmed.api import assemble
from clearmed.cli.main import main
from clearmed.config import parse_config
from clearmed.evaluation import EvalSpec, read_records, run_evaluation
from clearmed.evaluation.store import RESULTS
from clearmed.signatures.records import Question
from clearmed.signatures.records.settings import ProgramSettings
from clearmed.testing import (
    QUESTION,
    build_toy_program,
    demo_config_toml,
    label_all,
    pathway_replies,
    scripted_lm,
    verifier_reply,
)

pytestmark = pytest.mark.reliability

CATEGORY = "lost work"
CONFIG = parse_config(
    {"backbones": {"main": {"kind": "openai_compatible", "model": "m", "api_base": "http://127.0.0.1:9/v1"}}},
    source="test.toml",
)
N_QUESTIONS = 16


def slow(reply: object, seconds: float):
    def answer(call):
        time.sleep(seconds)
        return reply

    return answer


def script(delay: float) -> dict[str, object]:
    replies = pathway_replies("A", "A", "B")  # a conflict: the audit path runs too
    return {
        **{stage: slow(reply, delay) for stage, reply in replies.items()},
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus"),
        "followup_query": {"query": "thyroid"},
        "audit": {
            "rationale": "no",
            "clearly_supports_challenger": False,
            "aligned_with_question": True,
            "supports_exact_option": True,
        },
    }


def questions() -> list[Question]:
    return [
        QUESTION.model_copy(update={"id": f"q{i:02d}", "gold_letters": ["A" if i % 3 else "B"]})
        for i in range(N_QUESTIONS)
    ]


def spec(run_dir: Path) -> EvalSpec:
    return EvalSpec(program="clear", benchmark="toy", source="memory", questions=questions(), run_dir=run_dir)


def evaluate(run_dir: Path, delay: float = 0.0) -> None:
    program, _, _ = build_toy_program(script(delay), settings=ProgramSettings(json_fallback=False))
    run_evaluation(spec(run_dir), CONFIG, program, show_progress=False)


def fingerprint(run_dir: Path) -> list[tuple[object, ...]]:
    """What must survive a kill: which questions, in which order, with which outcome and score."""
    return [
        (r.question_id, r.index, r.decision.status, r.decision.letters, r.decision.route, r.decision.deciding_rule)
        + ((r.score.correct,) if r.score else (None,))
        for r in sorted(read_records(run_dir), key=lambda record: record.index)
    ]


def losses(run_dir: Path, reference: list[tuple[object, ...]]) -> tuple[int, str]:
    """Missing, duplicated or changed results compared with an uninterrupted run."""
    lines = [line for line in (run_dir / RESULTS).read_bytes().split(b"\n") if line.strip()]
    ids = Counter(json.loads(line)["question_id"] for line in lines)
    duplicates = sum(count - 1 for count in ids.values())
    got = fingerprint(run_dir)
    missing = len({row[0] for row in reference} - {row[0] for row in got})
    changed = sum(1 for row in got if row not in reference)
    absent = [name for name in ("manifest.json", "config.json") if not (run_dir / name).is_file()]
    lost = duplicates + missing + changed + len(absent)
    return lost, f"duplicates {duplicates}, missing {missing}, changed {changed}, files absent {absent}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[object, ...]]:
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    evaluate(run_dir)
    rows = fingerprint(run_dir)
    assert len(rows) == N_QUESTIONS
    return rows


def fork_eval(run_dir: Path, delay: float) -> int:
    """Run the evaluation in a forked child (instant start, everything already imported)."""
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            evaluate(run_dir, delay)
        except BaseException:
            code = 3
        os._exit(code)
    return pid


def kill_after(pid: int, seconds: float) -> bool:
    """SIGKILL `pid` after `seconds` unless it finished first; True when the kill landed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return False
        time.sleep(0.002)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return True


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_sigkill_at_random_points_then_resume_loses_nothing(reliability, reference, tmp_path: Path, seed: int) -> None:
    with reliability.case(CATEGORY, f"SIGKILL at random points, 4 kills (seed {seed})") as case:
        rng = random.Random(seed)
        run_dir = tmp_path / "run"
        kills = 0
        for _ in range(4):
            # One question costs ~3 x 4 ms of scripted model time; kill anywhere in the first ~third of the rest.
            kills += kill_after(fork_eval(run_dir, delay=0.004), rng.uniform(0.0, 0.15))
        evaluate(run_dir)  # the final resume runs to completion
        case.lost, case.note = losses(run_dir, reference)
        case.note += f"; {kills} kills landed"
        assert case.lost == 0, case.note
        assert kills >= 1


@pytest.mark.parametrize("seed", [7, 8, 9])
def test_torn_last_line_at_a_random_byte_is_redone(reliability, reference, tmp_path: Path, seed: int) -> None:
    with reliability.case(CATEGORY, f"kill mid-write: last line torn at a random byte (seed {seed})") as case:
        rng = random.Random(seed)
        run_dir = tmp_path / "run"
        program, _, _ = build_toy_program(script(0.0), settings=ProgramSettings(json_fallback=False))
        run_evaluation(spec(run_dir), CONFIG, program, show_progress=False, stop_after=rng.randint(2, 10))
        path = run_dir / RESULTS
        data = path.read_bytes()
        last_start = data.rstrip(b"\n").rfind(b"\n") + 1
        cut = rng.randint(last_start + 1, len(data) - 1)  # the kernel wrote only part of the last line
        path.write_bytes(data[:cut])
        evaluate(run_dir)
        case.lost, case.note = losses(run_dir, reference)
        assert case.lost == 0, case.note


@pytest.mark.parametrize("seed", [12, 13])
def test_a_damaged_line_anywhere_is_set_aside_and_redone(reliability, reference, tmp_path: Path, seed: int) -> None:
    with reliability.case(CATEGORY, f"a record that no longer loads, mid-file (seed {seed})") as case:
        rng = random.Random(seed)
        run_dir = tmp_path / "run"
        program, _, _ = build_toy_program(script(0.0), settings=ProgramSettings(json_fallback=False))
        run_evaluation(spec(run_dir), CONFIG, program, show_progress=False, stop_after=rng.randint(4, 10))
        path = run_dir / RESULTS
        lines = path.read_bytes().splitlines()
        victim = rng.randrange(len(lines) - 1)  # not the last line: a torn tail has its own test above
        record = json.loads(lines[victim])
        record["seconds"] = None  # as the old code wrote a NaN: null, which the record refuses on reload
        lines[victim] = json.dumps(record).encode()
        path.write_bytes(b"".join(line + b"\n" for line in lines))
        with pytest.warns(UserWarning, match=rf"results.jsonl:{victim + 1}: damaged line"):
            assert len(list(read_records(run_dir))) == len(lines) - 1  # the rest of the run still reads
        evaluate(run_dir)
        case.lost, case.note = losses(run_dir, reference)
        assert case.lost == 0, case.note
        assert len((run_dir / "results.unreadable.jsonl").read_bytes().splitlines()) == 1  # kept, not dropped


def test_kill_before_the_config_snapshot_is_repaired(reliability, reference, tmp_path: Path) -> None:
    with reliability.case(CATEGORY, "kill between the manifest and the config snapshot") as case:
        run_dir = tmp_path / "run"
        program, _, _ = build_toy_program(script(0.0), settings=ProgramSettings(json_fallback=False))
        run_evaluation(spec(run_dir), CONFIG, program, show_progress=False, stop_after=0)
        (run_dir / "config.json").unlink()  # the process died right after writing the manifest
        evaluate(run_dir)
        case.lost, case.note = losses(run_dir, reference)
        assert case.lost == 0, case.note


RUNNER = """
import sys, time
from clearmed.api import assemble
from clearmed.testing import label_all, pathway_replies, scripted_lm, verifier_reply

def slow(reply):
    def answer(call):
        time.sleep(0.02)
        return reply
    return answer

script = {stage: slow(reply) for stage, reply in pathway_replies("A", "A", "A").items()}
script.update({"source_quality": label_all("high"), "verifier": verifier_reply("consensus")})
lm, _ = scripted_lm(script)
assemble.build_role_lms = lambda config, roles=("main", "assessor"): {"main": lm}
from clearmed.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def medqa_file(path: Path, n: int) -> Path:
    rows = []
    for i in range(n):
        options = {"A": "Cortisol", "B": "Insulin", "C": "Thyroxine", "D": "Growth hormone"}
        rows.append(
            {
                "question": f"Question {i}: which hormone is low in Addison disease?",
                "options": options,
                "answer_idx": "A",
                "answer": "Cortisol",
                "realidx": i,
            }
        )
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def cli_config(tmp_path: Path) -> Path:
    config = tmp_path / "scripted.toml"
    config.write_text(demo_config_toml(program="local_k = 2\ndynamic_k = 2"), encoding="utf-8")
    return config


@pytest.fixture
def scripted_cli(monkeypatch: pytest.MonkeyPatch):
    replies = {
        **pathway_replies("A", "A", "A"),
        "source_quality": label_all("high"),
        "verifier": verifier_reply("consensus"),
    }
    lm, engine = scripted_lm(replies)
    monkeypatch.setattr(assemble, "build_role_lms", lambda config, roles=("main", "assessor"): {"main": lm})
    return engine


def test_sigkill_of_a_real_clearmed_eval_process_then_resume(
    reliability, scripted_cli, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case(CATEGORY, "SIGKILL of a `clearmed eval` process, resumed by the same command") as case:
        source, config = medqa_file(tmp_path / "medqa.jsonl", 12), cli_config(tmp_path)

        def argv(run_dir: Path) -> list[str]:
            return [
                "eval",
                "--benchmark",
                "medqa",
                "--source",
                str(source),
                "-c",
                str(config),
                "--run-dir",
                str(run_dir),
            ]

        assert main(argv(tmp_path / "reference")) == 0
        reference = fingerprint(tmp_path / "reference")
        run_dir = tmp_path / "run"
        process = subprocess.Popen(
            [sys.executable, "-c", RUNNER, *argv(run_dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=tmp_path,
        )
        results = run_dir / RESULTS
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not results.exists() or results.read_bytes().count(b"\n") < 3):
            time.sleep(0.01)
        time.sleep(random.Random(11).uniform(0.0, 0.1))
        process.send_signal(signal.SIGKILL)
        process.wait()
        done_before = results.read_bytes().count(b"\n")
        assert 3 <= done_before < 12, f"the kill must land mid-run ({done_before} of 12 done)"
        capsys.readouterr()
        assert main(argv(run_dir)) == 0
        case.lost, case.note = losses(run_dir, reference)
        case.lost += 0 if (run_dir / "summary.json").is_file() else 1
        assert case.lost == 0, case.note


def test_a_second_writer_is_refused_and_changes_nothing(
    reliability, scripted_cli, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with reliability.case(CATEGORY, "two evals writing the same run folder") as case:
        run_dir = tmp_path / "run"
        pid = fork_eval(run_dir, delay=0.05)
        try:
            lock = run_dir / ".lock"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not (lock.exists() and lock.read_text().strip() == str(pid)):
                time.sleep(0.005)
            before = (run_dir / RESULTS).read_bytes() if (run_dir / RESULTS).exists() else b""
            with pytest.raises(Exception, match="another clearmed eval"):
                evaluate(run_dir)
            source, config = medqa_file(tmp_path / "medqa.jsonl", 4), cli_config(tmp_path)
            capsys.readouterr()
            code = main(
                ["eval", "--benchmark", "medqa", "--source", str(source), "-c", str(config), "--run-dir", str(run_dir)]
            )
            err = capsys.readouterr().err
            assert code == 2, err
            assert "another clearmed eval" in err, err
            assert "Traceback" not in err, err
            after = (run_dir / RESULTS).read_bytes() if (run_dir / RESULTS).exists() else b""
            assert after.startswith(before)  # the refused writer added and removed nothing
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        results = run_dir / RESULTS
        lines = [line for line in results.read_bytes().split(b"\n") if line.strip()] if results.exists() else []
        ids = [json.loads(line)["question_id"] for line in lines]
        case.lost = len(ids) - len(set(ids))
        assert case.lost == 0
