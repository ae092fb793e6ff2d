"""Build and install llama.cpp (llama-cpp-python) for this machine, portably and never with AMX.

Why this exists: llama-cpp-python is an sdist, and its default build is ``-march=native`` (GGML_NATIVE).
On a CPU that *advertises* AMX (Sapphire Rapids and later, common in clouds) that build compiles the AMX
kernels, and on VMs that cannot execute AMX tiles the first multi-token decode dies with SIGILL. So the
build turns GGML_NATIVE off and names every instruction-set option explicitly: the x86 extensions the CPU
reports (AVX2/FMA/F16C/BMI2, the AVX-512 family, VNNI), and AMX always off.

Why it builds its own wheel: pip caches a wheel built from an sdist under the sdist's URL, not under
CMAKE_ARGS, so a machine that once built a native wheel gets it back on every later install. This helper
builds with pip's cache off and keeps the wheel in its own cache, keyed by (version, cmake arguments) and,
off x86, by the CPU: there llama.cpp's defaults compile for the build machine (-mcpu=native), so a wheel built
on one ARM CPU is no wheel for another that shares the home directory.

It needs only the standard library: it runs before clearmed is installed
(``python3 backbones/engine_build.py``) and after (``python -m clearmed.backbones.engine_build``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

ENGINE_PACKAGE: Final = "llama-cpp-python"
ENGINE_VERSION: Final = "0.3.36"
ENGINE_REQUIREMENT: Final = f"{ENGINE_PACKAGE}=={ENGINE_VERSION}"

REINSTALL_COMMAND: Final = "python -m clearmed.backbones.engine_build --force"

# GGML_AVX512 compiles with -mavx512{f,cd,vl,dq,bw}; the CPU must have all five.
_AVX512_BASE: Final = ("avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw")
# GGML option -> the /proc/cpuinfo flags it needs. Ordered as ggml lists them; AMX is deliberately absent (see
# the module docstring). With GCC and Clang each AVX-512 sub-option adds its own -mavx512vbmi/-mavx512vnni/
# -mavx512bf16 whether GGML_AVX512 is on or not (only MSVC nests them inside /arch:AVX512); those flags imply
# AVX-512F (VBMI and BF16 also BW) to the compiler and switch on ggml's __AVX512F__ code, so each sub-option
# needs the whole base set as well as its own flag.
_X86_OPTIONS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("GGML_SSE42", ("sse4_2",)),
    ("GGML_AVX", ("avx",)),
    ("GGML_F16C", ("f16c",)),
    ("GGML_FMA", ("fma",)),
    ("GGML_AVX2", ("avx2",)),
    ("GGML_BMI2", ("bmi2",)),
    ("GGML_AVX_VNNI", ("avx_vnni",)),
    ("GGML_AVX512", _AVX512_BASE),
    ("GGML_AVX512_VBMI", (*_AVX512_BASE, "avx512vbmi")),
    ("GGML_AVX512_VNNI", (*_AVX512_BASE, "avx512_vnni")),
    ("GGML_AVX512_BF16", (*_AVX512_BASE, "avx512_bf16")),
)
_AMX_OPTIONS: Final = ("GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16")
# Not needed by the Python bindings, and the slowest part of the build.
_COMMON_ARGS: Final = ("-DLLAVA_BUILD=OFF",)
X86_MACHINES: Final = frozenset({"x86_64", "amd64", "AMD64", "i686", "i386"})


class EngineBuildError(RuntimeError):
    """The engine could not be built or installed; the message is one line for the user."""


# The /proc/cpuinfo fields that say which instructions a CPU runs: x86 "flags" and model numbers, ARM "Features"
# and part numbers (what GCC's -mcpu=native reads). Clock speeds and BogoMIPS vary between boots, so they stay out.
_CPUINFO_IDENTITY_FIELDS: Final = (
    "vendor_id", "cpu family", "model", "flags",
    "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "Features",
)  # fmt: skip
# What macOS says about its CPU (brand, x86 feature words, and the hw.optional.* capability table).
_SYSCTL_IDENTITY_NAMES: Final = (
    "machdep.cpu.brand_string", "machdep.cpu.features", "machdep.cpu.leaf7_features", "hw.optional",
)  # fmt: skip


def _cpuinfo_fields(cpuinfo: str) -> dict[str, str]:
    """The first value of each field in a /proc/cpuinfo text: processor 0's, in every kernel's layout."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The instruction-set flags of the first processor in a /proc/cpuinfo text (ARM calls them Features)."""
    fields = _cpuinfo_fields(cpuinfo)
    return frozenset(fields.get("flags", fields.get("Features", "")).split())


def read_cpuinfo(path: Path = Path("/proc/cpuinfo")) -> str:
    """The text of /proc/cpuinfo, or "" where there is none (macOS, Windows)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def read_cpu_flags(path: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    return cpu_flags(read_cpuinfo(path))


def _sysctl(name: str) -> str:
    """``sysctl <name>`` output, or "" when the name or the command is missing."""
    try:
        done = subprocess.run(["sysctl", name], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def cpu_identity(machine: str, system: str) -> str:
    """What code built or checked on this CPU depends on: the architecture and the CPU's instruction sets.

    Stable on one machine (no clock speeds or counters), different for CPUs that differ in their instruction
    sets or model: /proc/cpuinfo on Linux, sysctl on macOS, the processor string elsewhere.
    """
    lines = [f"machine: {machine}", f"system: {system}"]
    if system == "Linux":
        fields = _cpuinfo_fields(read_cpuinfo())
        fields.update(
            {name: " ".join(sorted(fields[name].split())) for name in ("flags", "Features") if name in fields}
        )
        lines += [f"{name}: {fields[name]}" for name in _CPUINFO_IDENTITY_FIELDS if name in fields]
    elif system == "Darwin":
        lines += sorted(line.strip() for name in _SYSCTL_IDENTITY_NAMES for line in _sysctl(name).splitlines())
    else:
        lines.append(f"processor: {platform.processor()}")
    return "\n".join(line for line in lines if line)


def wheel_cpu(machine: str, system: str) -> str:
    """The CPU a wheel built with ``cmake_args`` is specific to, beyond the arguments; "" when it is not.

    On x86 the arguments name every instruction set, so any CPU with those flags shares the wheel. Elsewhere
    llama.cpp's defaults compile for the build machine's CPU, so its identity is part of the wheel's key.
    """
    return "" if machine in X86_MACHINES else cpu_identity(machine, system)


def cmake_args(machine: str, system: str, flags: frozenset[str]) -> list[str]:
    """The CMAKE_ARGS for this platform: explicit ISA options on x86, llama.cpp's defaults elsewhere.

    On x86 every option is stated ON or OFF, so nothing depends on the build machine beyond ``flags``
    and a wheel is valid on any CPU with at least those flags. On ARM (Apple silicon, Graviton) there is
    no AMX hazard, and llama.cpp's defaults (Metal on macOS) are what its maintainers test.
    """
    args = list(_COMMON_ARGS)
    if machine not in X86_MACHINES:
        return args
    if system != "Linux" or not flags:
        # No /proc/cpuinfo to read: the AVX2 baseline (every x86-64 CPU since 2013) is the safe choice.
        flags = frozenset({"sse4_2", "avx", "f16c", "fma", "avx2", "bmi2"})
    args.append("-DGGML_NATIVE=OFF")
    for option, needs in _X86_OPTIONS:
        args.append(f"-D{option}={'ON' if all(flag in flags for flag in needs) else 'OFF'}")
    args.extend(f"-D{option}=OFF" for option in _AMX_OPTIONS)
    return args


def expected_features(args: Sequence[str]) -> dict[str, bool]:
    """The x86 features (as llama.cpp's system info names them) a build with ``args`` must report."""
    names = {
        "GGML_AVX": "AVX",
        "GGML_AVX2": "AVX2",
        "GGML_F16C": "F16C",
        "GGML_FMA": "FMA",
        "GGML_BMI2": "BMI2",
        "GGML_AVX_VNNI": "AVX_VNNI",
        "GGML_AVX512": "AVX512",
        "GGML_AVX512_VBMI": "AVX512_VBMI",
        "GGML_AVX512_VNNI": "AVX512_VNNI",
        "GGML_AVX512_BF16": "AVX512_BF16",
        "GGML_AMX_INT8": "AMX_INT8",
    }
    wanted: dict[str, bool] = {}
    for arg in args:
        option, _, value = arg.removeprefix("-D").partition("=")
        if option in names:
            wanted[names[option]] = value == "ON"
    return wanted


def system_info_features(system_info: str) -> dict[str, bool]:
    """``AVX2 = 1 | AMX_INT8 = 1 | ...`` (llama_print_system_info) as a mapping of the features named."""
    features: dict[str, bool] = {}
    for part in system_info.replace(":", "|").split("|"):
        name, sep, value = part.partition("=")
        if sep and value.strip() in {"0", "1"}:
            features[name.strip()] = value.strip() == "1"
    return features


def build_mismatch(wanted: Mapping[str, bool], reported: Mapping[str, bool]) -> list[str]:
    """Features the installed build has but should not, or lacks but should have (AMX counts when present)."""
    problems = []
    for name, on in sorted(wanted.items()):
        have = reported.get(name, False)
        if have != on:
            problems.append(f"{name}={'on' if have else 'off'} (wanted {'on' if on else 'off'})")
    if reported.get("AMX_INT8") and "AMX_INT8" not in wanted:
        problems.append("AMX_INT8=on (wanted off)")
    return problems


def wheel_cache_dir(args: Sequence[str], cache_root: Path, cpu: str = "") -> Path:
    """Where a wheel built with ``args`` (for ``cpu``, see `wheel_cpu`) is kept."""
    # Without a CPU the key is what it always was, so x86 wheels built before the CPU joined it are still found.
    key_parts = [ENGINE_REQUIREMENT, *args, *([f"cpu={cpu}"] if cpu else [])]
    key = hashlib.sha256(json.dumps(key_parts).encode()).hexdigest()[:16]
    return cache_root / "engine-wheels" / f"{ENGINE_VERSION}-{key}"


def default_cache_root() -> Path:
    explicit = os.environ.get("CLEARMED_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clearmed"


_PROBE = (
    "import json, llama_cpp; "
    "print(json.dumps({'version': llama_cpp.__version__, "
    "'system_info': llama_cpp.llama_print_system_info().decode('utf-8', 'replace')}))"
)


def installed_engine(python: str = sys.executable) -> dict[str, str] | None:
    """Version and system info of the llama_cpp importable by ``python``, or None (loads no model)."""
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    try:
        info = json.loads(done.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return None
    return info if isinstance(info, dict) else None


def install_is_current(info: Mapping[str, str] | None, args: Sequence[str]) -> tuple[bool, str]:
    """Whether an installed engine matches the wanted version and build; the reason when it does not."""
    if info is None:
        return False, f"{ENGINE_PACKAGE} is not installed"
    if info.get("version") != ENGINE_VERSION:
        return False, f"{ENGINE_PACKAGE} {info.get('version')} is installed, {ENGINE_VERSION} is wanted"
    problems = build_mismatch(expected_features(args), system_info_features(info.get("system_info", "")))
    if problems:
        return False, "the installed build differs: " + ", ".join(problems)
    return True, "up to date"


def _run(command: list[str], env: Mapping[str, str] | None = None) -> None:
    print("+ " + shlex.join(command), flush=True)
    done = subprocess.run(command, env=None if env is None else dict(env), check=False)
    if done.returncode != 0:
        raise EngineBuildError(f"command failed with exit code {done.returncode}: {shlex.join(command)}")


def ensure_engine(
    *, force: bool = False, cache_root: Path | None = None, python: str = sys.executable
) -> tuple[str, Path | None]:
    """Install the portable engine into ``python``'s environment unless an identical build is there."""
    machine, system = platform.machine(), platform.system()
    args = cmake_args(machine, system, read_cpu_flags())
    if not force:
        current, reason = install_is_current(installed_engine(python), args)
        if current:
            return "engine already installed (" + " ".join(args) + ")", None
        print(f"clearmed: installing the llama.cpp engine: {reason}", flush=True)
    wheel_dir = wheel_cache_dir(args, cache_root or default_cache_root(), wheel_cpu(machine, system))
    wheels = sorted(wheel_dir.glob("llama_cpp_python-*.whl"))
    if force or not wheels:
        wheel_dir.mkdir(parents=True, exist_ok=True)
        for stale in wheels:
            stale.unlink()
        env = {**os.environ, "CMAKE_ARGS": " ".join(args)}
        print(f"clearmed: compiling {ENGINE_REQUIREMENT} (a few minutes) with CMAKE_ARGS={' '.join(args)}", flush=True)
        _run(
            [python, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--no-binary", ENGINE_PACKAGE,
             ENGINE_REQUIREMENT, "-w", str(wheel_dir)],
            env,
        )  # fmt: skip
        wheels = sorted(wheel_dir.glob("llama_cpp_python-*.whl"))
        if not wheels:
            raise EngineBuildError(f"pip built no wheel into {wheel_dir}")
    # --force-reinstall replaces a wheel pip may have served from its own cache; deps come with the project.
    _run([python, "-m", "pip", "install", "--force-reinstall", "--no-deps", str(wheels[-1])])
    _run([python, "-m", "pip", "install", str(wheels[-1])])  # its dependencies, from its own metadata
    return "engine installed from " + str(wheels[-1]), wheels[-1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--force", action="store_true", help="rebuild and reinstall even if the build matches")
    parser.add_argument("--print-cmake-args", action="store_true", help="print the CMAKE_ARGS for this machine")
    options = parser.parse_args(argv)
    if options.print_cmake_args:
        print(" ".join(cmake_args(platform.machine(), platform.system(), read_cpu_flags())))
        return 0
    try:
        message, _ = ensure_engine(force=options.force)
    except EngineBuildError as exc:
        print(f"clearmed: {exc}", file=sys.stderr)
        return 1
    print(f"clearmed: {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
