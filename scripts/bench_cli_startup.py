"""Start-up time of the command line: process start to the help page, to the config list, and to the moment
`clearmed ask` would begin loading its model.

    python scripts/bench_cli_startup.py [--repeats 5] [--demo demo-01] [-c embedded]

Each command runs in a fresh interpreter, once unmeasured (so Python's bytecode cache is warm) and then
`--repeats` times; the median and the fastest wall time are printed, with the number of modules the command
imported and which of Optuna, matplotlib, Jinja2 and DSPy among them. `ask --demo` runs with an empty DSPy cache
(a scratch folder, so a cached answer cannot skip the model) and stops, through an audit hook, at the first import
of llama_cpp or the first child process (the engine self-check), whichever comes first: that is where loading the
model begins, so nothing is loaded. Numbers depend on what else shares the cores; run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

HEAVY = ("optuna", "matplotlib", "jinja2", "dspy")

# The child: run `clearmed ARGV`, then report (on stderr's last line) what it imported. For `ask`, the audit hook
# reports and ends the process where the model would begin to load.
_CHILD = """
import json, os, sys
def report(reached_model):
    heavy = [name for name in {heavy!r} if name in sys.modules]
    sys.stderr.write(json.dumps({{"modules": len(sys.modules), "heavy": heavy, "model": reached_model}}) + "\\n")
    sys.stderr.flush()
def stop_at_model_load(event, args):
    if (event == "import" and args[0] == "llama_cpp") or event == "subprocess.Popen":
        report(True)
        os._exit(0)
sys.addaudithook(stop_at_model_load)
from clearmed.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
report(False)
"""


@dataclass(frozen=True)
class Run:
    seconds: float  # wall time from spawning the interpreter to its exit
    modules: int
    heavy: list[str]
    reached_model: bool


def run_once(argv: list[str]) -> Run:
    with tempfile.TemporaryDirectory(prefix="clearmed-startup-") as empty_cache:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _CHILD.format(heavy=HEAVY), *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            env={**os.environ, "DSPY_CACHEDIR": empty_cache},
        )
        elapsed = time.perf_counter() - started
    lines = done.stderr.strip().splitlines()
    try:
        report = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise SystemExit(f"clearmed {' '.join(argv)} failed: {done.stderr.strip()[-500:]}") from None
    return Run(elapsed, int(report["modules"]), list(report["heavy"]), bool(report["model"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="measured runs per command (default 5)")
    parser.add_argument("--demo", default="demo-01", help="the demo question `ask` starts on")
    parser.add_argument("-c", "--config", default="embedded", help="the config `ask` loads (default embedded)")
    args = parser.parse_args()
    commands = {
        "clearmed --help": ["--help"],
        "clearmed ask --help": ["ask", "--help"],
        "clearmed config --list": ["config", "--list"],
        f"clearmed ask --demo {args.demo} (to the model load)": ["ask", "--demo", args.demo, "-c", args.config],
    }
    print(f"{'command':<52} {'median s':>9} {'min s':>7} {'modules':>8}  heavy modules imported")
    for label, argv in commands.items():
        run_once(argv)  # warm-up: bytecode cache
        runs = [run_once(argv) for _ in range(args.repeats)]
        times = [run.seconds for run in runs]
        last = runs[-1]
        note = "" if last.reached_model or argv[0] != "ask" or "--help" in argv else "  (ended before the model loaded)"
        heavy = ", ".join(last.heavy) or "-"
        print(f"{label:<52} {statistics.median(times):>9.2f} {min(times):>7.2f} {last.modules:>8}  {heavy}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
