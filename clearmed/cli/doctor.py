"""`clearmed doctor`: can this machine run the chosen config, and how fast?

    clearmed doctor [-c CONFIG] [--no-bench]

The arguments parse into a `DoctorRequest` through `clearmed.api.doctor.check_config`, which says each finding as it
makes it (printed here while the engine check runs) and returns the report. Exit 0 when everything the config needs
works, 1 otherwise.
"""

from __future__ import annotations

import argparse

from clearmed.api.doctor import DoctorRequest, check_config
from clearmed.cli.main import add_config_arguments, parsed_request


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    doctor = subparsers.add_parser("doctor", help="check the engine, the model and the backends of a config")
    add_config_arguments(doctor)
    doctor.add_argument("--no-bench", action="store_true", help="a short self-check instead of the speed test")
    doctor.set_defaults(func=cmd_doctor)


def cmd_doctor(args: argparse.Namespace) -> int:
    report = check_config(parsed_request(DoctorRequest, args), say=print)
    print("doctor: all checks passed" if report.healthy else "doctor: some checks failed (see above)")
    return 0 if report.healthy else 1
