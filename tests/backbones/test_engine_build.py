"""The portable llama.cpp build helper: ISA flags per CPU, never AMX, its own flag-keyed wheel cache."""

from __future__ import annotations

import os
import re
import tarfile
import tomllib
from pathlib import Path

import pytest

from clearmed.backbones import engine_build as eb

ROOT = Path(__file__).resolve().parents[2]
BASE = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma avx2 bmi1 bmi2"
AVX512 = "avx512f avx512cd avx512vl avx512dq avx512bw"
# A Sapphire Rapids VM as seen in /proc/cpuinfo: AVX-512 with VNNI/BF16/VBMI, and AMX advertised.
SAPPHIRE = f"{BASE} {AVX512} avx512vbmi avx512_vnni avx512_bf16 avx_vnni amx_bf16 amx_tile amx_int8"
# This project's machines: Ice Lake, AVX-512 + VNNI + VBMI, no BF16, no AMX.
ICELAKE = f"{BASE} {AVX512} avx512vbmi avx512_vnni"
# Real system info of the portable build on Ice Lake (llama_print_system_info).
ICELAKE_SYSTEM_INFO = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
    "AVX512_VBMI = 1 | AVX512_VNNI = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
)
# Processor 0 of /proc/cpuinfo on two ARM servers: Graviton2 (Neoverse N1) and Graviton3 (Neoverse V1, with SVE).
GRAVITON2 = (
    "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp "
    "asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
    "CPU variant\t: 0x3\nCPU part\t: 0xd0c\nCPU revision\t: 1\n\n"
)
GRAVITON3 = (
    "processor\t: 0\nBogoMIPS\t: 2100.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp "
    "asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm "
    "ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
    "CPU variant\t: 0x1\nCPU part\t: 0xd40\nCPU revision\t: 1\n\n"
)


def options(args: list[str]) -> dict[str, str]:
    return dict(arg.removeprefix("-D").split("=", 1) for arg in args)


def flags(text: str) -> frozenset[str]:
    return eb.cpu_flags(f"processor\t: 0\nflags\t\t: {text}\n\nprocessor\t: 1\nflags\t\t: sse\n")


def test_cpu_flags_reads_the_first_processor() -> None:
    assert flags("avx2 fma") == {"avx2", "fma"}
    assert eb.cpu_flags("no flags line here") == frozenset()
    assert {"asimd", "asimddp"} <= eb.cpu_flags(GRAVITON2)  # ARM calls them Features


def test_amx_cpu_gets_avx512_and_vnni_but_never_amx() -> None:
    opts = options(eb.cmake_args("x86_64", "Linux", flags(SAPPHIRE)))
    assert opts["GGML_NATIVE"] == "OFF"
    assert opts["GGML_AVX512"] == opts["GGML_AVX512_VNNI"] == opts["GGML_AVX512_BF16"] == "ON"
    assert opts["GGML_AVX_VNNI"] == "ON"
    assert opts["GGML_AMX_TILE"] == opts["GGML_AMX_INT8"] == opts["GGML_AMX_BF16"] == "OFF"


def test_avx2_only_cpu_gets_no_avx512() -> None:
    opts = options(eb.cmake_args("x86_64", "Linux", flags(BASE)))
    assert opts["GGML_AVX2"] == opts["GGML_FMA"] == opts["GGML_F16C"] == opts["GGML_BMI2"] == "ON"
    assert opts["GGML_AVX512"] == opts["GGML_AVX512_VNNI"] == opts["GGML_AVX512_VBMI"] == "OFF"


def test_avx512_sub_options_need_the_whole_avx512_base_set() -> None:
    # Knights Landing has AVX-512F/CD but not VL/DQ/BW (-mavx512bw code would crash there), and a VM can mask
    # VL/DQ/BW the same way while passing VBMI/VNNI/BF16 through. With GCC and Clang each sub-option compiles
    # AVX-512 code of its own, so none may be on without the base set.
    masked = options(
        eb.cmake_args("x86_64", "Linux", flags(f"{BASE} avx512f avx512cd avx512vbmi avx512_vnni avx512_bf16"))
    )
    assert masked["GGML_AVX512"] == "OFF"
    assert masked["GGML_AVX512_VBMI"] == masked["GGML_AVX512_VNNI"] == masked["GGML_AVX512_BF16"] == "OFF"
    # With the base set, each sub-option follows its own flag.
    icelake = options(eb.cmake_args("x86_64", "Linux", flags(ICELAKE)))
    assert icelake["GGML_AVX512"] == icelake["GGML_AVX512_VBMI"] == icelake["GGML_AVX512_VNNI"] == "ON"
    assert icelake["GGML_AVX512_BF16"] == "OFF"


# ggml-cpu's build rules inside the llama-cpp-python sdist, and the /proc/cpuinfo flag of each x86 -m flag.
GGML_CPU_CMAKE = "vendor/llama.cpp/ggml/src/ggml-cpu/CMakeLists.txt"
SDIST_NAME = f"llama_cpp_python-{eb.ENGINE_VERSION}"
GCC_FLAG_CPU = {
    "-msse4.2": "sse4_2", "-mavx": "avx", "-mf16c": "f16c", "-mfma": "fma", "-mavx2": "avx2", "-mbmi2": "bmi2",
    "-mavxvnni": "avx_vnni", "-mavx512f": "avx512f", "-mavx512cd": "avx512cd", "-mavx512vl": "avx512vl",
    "-mavx512dq": "avx512dq", "-mavx512bw": "avx512bw", "-mavx512vbmi": "avx512vbmi",
    "-mavx512vnni": "avx512_vnni", "-mavx512bf16": "avx512_bf16",
    "-mamx-tile": "amx_tile", "-mamx-int8": "amx_int8", "-mamx-bf16": "amx_bf16",
}  # fmt: skip


def vendored_ggml_cpu_cmake() -> str | None:
    """ggml-cpu's CMakeLists.txt from the pinned sdist, or None when no copy is at hand.

    Looked for in $CLEARMED_ENGINE_SOURCE (the sdist, its unpacked tree, or a folder holding either), then in
    ``<cache>/engine-source`` (``pip download --no-deps --no-binary :all: llama-cpp-python==<pin> -d`` there).
    """
    places = [os.environ.get("CLEARMED_ENGINE_SOURCE", ""), str(eb.default_cache_root() / "engine-source")]
    for place in filter(None, places):
        root = Path(place).expanduser()
        for tree in (root, root / SDIST_NAME):
            if (tree / GGML_CPU_CMAKE).is_file():
                return (tree / GGML_CPU_CMAKE).read_text(encoding="utf-8")
        for sdist in (root, root / f"{SDIST_NAME}.tar.gz"):
            if sdist.is_file() and tarfile.is_tarfile(sdist):
                with tarfile.open(sdist) as tar:
                    for member in tar:  # streams: stops at the file instead of listing 70 MB of members
                        if member.name == f"{SDIST_NAME}/{GGML_CPU_CMAKE}":
                            content = tar.extractfile(member)
                            return content.read().decode("utf-8") if content else None
    return None


def gcc_arch_flags(cmake: str) -> dict[str, list[str]]:
    """GGML option -> the -m flags ggml's x86 rules pass to GCC and Clang when GGML_NATIVE is off."""
    x86 = cmake.split('GGML_SYSTEM_ARCH STREQUAL "x86"', 1)[1]
    gcc = x86.split("list(APPEND ARCH_FLAGS -march=native)", 1)[1].split("if (GGML_BACKEND_DL)", 1)[0]
    return {
        option: re.findall(r"list\(APPEND ARCH_FLAGS (-m[\w.-]+)\)", body)
        for option, body in re.findall(r"if \((GGML_\w+)\)(.*?)endif\(\)", gcc, re.DOTALL)
    }


def test_the_gating_covers_what_the_vendored_ggml_compiles_for_gcc() -> None:
    cmake = vendored_ggml_cpu_cmake()
    if cmake is None:
        pytest.skip(
            f"no {eb.ENGINE_REQUIREMENT} sdist; fetch it with: pip download --no-deps --no-binary :all: "
            f"{eb.ENGINE_REQUIREMENT} -d {eb.default_cache_root() / 'engine-source'}"
        )
    rules = gcc_arch_flags(cmake)
    needs = dict(eb._X86_OPTIONS)
    assert set(needs) | set(eb._AMX_OPTIONS) <= set(rules), "ggml's GCC rules changed shape"
    base = {GCC_FLAG_CPU[flag] for flag in rules["GGML_AVX512"]}
    assert base == set(needs["GGML_AVX512"])
    for option, cpu in needs.items():
        compiled = {GCC_FLAG_CPU[flag] for flag in rules[option]}
        assert compiled <= set(cpu), f"{option} compiles {compiled} but is gated on {cpu}"
        if option != "GGML_AVX512" and any(flag.startswith("-mavx512") for flag in rules[option]):
            # Its -mavx512* flag has a block of its own, outside GGML_AVX512's: GGML_AVX512=OFF does not hold it back.
            assert base <= set(cpu), f"{option} compiles AVX-512 code on its own but does not need {base}"


def test_every_x86_option_is_stated_explicitly() -> None:
    # Nothing is left to GGML_NATIVE's defaults, so the wheel depends only on the flags read.
    opts = options(eb.cmake_args("x86_64", "Linux", flags(ICELAKE)))
    stated = {name for name, _ in eb._X86_OPTIONS} | set(eb._AMX_OPTIONS)
    assert stated <= set(opts)


def test_x86_without_cpuinfo_uses_the_avx2_baseline() -> None:
    opts = options(eb.cmake_args("x86_64", "Darwin", frozenset()))
    assert opts["GGML_NATIVE"] == "OFF"
    assert opts["GGML_AVX2"] == "ON"
    assert opts["GGML_AVX512"] == "OFF"


@pytest.mark.parametrize(("machine", "system"), [("arm64", "Darwin"), ("aarch64", "Linux")])
def test_arm_keeps_llama_cpp_defaults(machine: str, system: str) -> None:
    assert eb.cmake_args(machine, system, frozenset({"asimd"})) == ["-DLLAVA_BUILD=OFF"]


def test_system_info_parsing_and_build_comparison() -> None:
    reported = eb.system_info_features(ICELAKE_SYSTEM_INFO)
    assert reported["AVX512_VNNI"] is True
    wanted = eb.expected_features(eb.cmake_args("x86_64", "Linux", flags(ICELAKE)))
    assert eb.build_mismatch(wanted, reported) == []
    native_with_amx = ICELAKE_SYSTEM_INFO + "AMX_INT8 = 1 | "
    assert "AMX_INT8=on (wanted off)" in eb.build_mismatch(wanted, eb.system_info_features(native_with_amx))
    avx2_build = eb.system_info_features("CPU : AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 |")
    assert "AVX512=off (wanted on)" in eb.build_mismatch(wanted, avx2_build)


def test_install_is_current() -> None:
    args = eb.cmake_args("x86_64", "Linux", flags(ICELAKE))
    assert eb.install_is_current(None, args) == (False, "llama-cpp-python is not installed")
    old = {"version": "0.3.2", "system_info": ICELAKE_SYSTEM_INFO}
    assert eb.install_is_current(old, args)[0] is False
    assert eb.install_is_current({"version": eb.ENGINE_VERSION, "system_info": ICELAKE_SYSTEM_INFO}, args) == (
        True,
        "up to date",
    )
    amx = {"version": eb.ENGINE_VERSION, "system_info": ICELAKE_SYSTEM_INFO + "AMX_INT8 = 1 |"}
    current, reason = eb.install_is_current(amx, args)
    assert not current
    assert "AMX_INT8" in reason


def test_wheel_cache_is_keyed_by_the_build_arguments(tmp_path: Path) -> None:
    icelake = eb.wheel_cache_dir(eb.cmake_args("x86_64", "Linux", flags(ICELAKE)), tmp_path)
    avx2 = eb.wheel_cache_dir(eb.cmake_args("x86_64", "Linux", flags(BASE)), tmp_path)
    assert icelake != avx2
    assert icelake.parent == tmp_path / "engine-wheels"
    assert icelake.name.startswith(eb.ENGINE_VERSION)


class Recorder:
    def __init__(self, wheel_dir_holder: list[Path]) -> None:
        self.commands: list[tuple[list[str], dict[str, str] | None]] = []
        self.wheel_dir_holder = wheel_dir_holder

    def __call__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.commands.append((command, env))
        if "wheel" in command:  # pretend pip built the wheel
            out = Path(command[command.index("-w") + 1])
            (out / f"llama_cpp_python-{eb.ENGINE_VERSION}-cp311-cp311-linux_x86_64.whl").write_bytes(b"whl")


@pytest.fixture
def icelake_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eb, "read_cpu_flags", lambda: flags(ICELAKE))
    monkeypatch.setattr(eb.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(eb.platform, "system", lambda: "Linux")


@pytest.mark.usefixtures("icelake_machine")
def test_ensure_engine_skips_a_matching_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(
        eb, "installed_engine", lambda python: {"version": eb.ENGINE_VERSION, "system_info": ICELAKE_SYSTEM_INFO}
    )
    recorder = Recorder([])
    monkeypatch.setattr(eb, "_run", recorder)
    message, wheel = eb.ensure_engine(cache_root=tmp_path)
    assert wheel is None
    assert "already installed" in message
    assert recorder.commands == []


@pytest.mark.usefixtures("icelake_machine")
def test_ensure_engine_builds_without_pips_cache_then_reuses_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A native AMX wheel is installed (as pip's cache would serve it): it must be replaced.
    native = {"version": eb.ENGINE_VERSION, "system_info": ICELAKE_SYSTEM_INFO + "AMX_INT8 = 1 |"}
    monkeypatch.setattr(eb, "installed_engine", lambda python: native)
    recorder = Recorder([])
    monkeypatch.setattr(eb, "_run", recorder)
    _, wheel = eb.ensure_engine(cache_root=tmp_path)
    build, build_env = recorder.commands[0]
    assert build[build.index("pip") + 1] == "wheel"
    assert "--no-cache-dir" in build
    assert eb.ENGINE_REQUIREMENT in build
    assert build_env is not None
    assert "-DGGML_AMX_INT8=OFF" in build_env["CMAKE_ARGS"].split()
    assert "-DGGML_NATIVE=OFF" in build_env["CMAKE_ARGS"].split()
    install = recorder.commands[1][0]
    assert "--force-reinstall" in install
    assert str(wheel) in install
    # A second venv on the same machine reuses the flag-keyed wheel: no compile.
    recorder.commands.clear()
    eb.ensure_engine(cache_root=tmp_path)
    assert not any("wheel" in command for command, _ in recorder.commands)
    assert any("--force-reinstall" in command for command, _ in recorder.commands)


def build_dir_on(monkeypatch: pytest.MonkeyPatch, cache: Path, machine: str, cpuinfo: str) -> Path:
    """The folder `ensure_engine` keeps its wheel in on a Linux machine with this /proc/cpuinfo."""
    monkeypatch.setattr(eb.platform, "machine", lambda: machine)
    monkeypatch.setattr(eb.platform, "system", lambda: "Linux")
    monkeypatch.setattr(eb, "read_cpuinfo", lambda path=None: cpuinfo)
    monkeypatch.setattr(eb, "installed_engine", lambda python: None)
    monkeypatch.setattr(eb, "_run", Recorder([]))
    _, wheel = eb.ensure_engine(cache_root=cache)
    assert wheel is not None
    return wheel.parent


def test_arm_wheels_are_keyed_on_the_cpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # llama.cpp's ARM default compiles with -mcpu=native: a Graviton3 wheel (SVE) is no wheel for a Graviton2
    # that shares the home directory, although both get the same CMAKE_ARGS.
    graviton2 = build_dir_on(monkeypatch, tmp_path, "aarch64", GRAVITON2)
    graviton3 = build_dir_on(monkeypatch, tmp_path, "aarch64", GRAVITON3)
    assert graviton2 != graviton3
    assert eb.cmake_args("aarch64", "Linux", eb.cpu_flags(GRAVITON2)) == eb.cmake_args(
        "aarch64", "Linux", eb.cpu_flags(GRAVITON3)
    )
    # Stable on one machine: what changes between boots (BogoMIPS) is not in the key.
    assert build_dir_on(monkeypatch, tmp_path, "aarch64", GRAVITON2.replace("243.75", "250.00")) == graviton2


def test_x86_wheels_are_shared_by_cpus_with_the_same_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # On x86 the arguments name every instruction set, so the key is the arguments alone, as it always was.
    ice_lake = build_dir_on(monkeypatch, tmp_path, "x86_64", f"model\t\t: 106\nflags\t\t: {ICELAKE}\n")
    sapphire = build_dir_on(monkeypatch, tmp_path, "x86_64", f"model\t\t: 143\nflags\t\t: {ICELAKE}\n")
    assert ice_lake == sapphire == eb.wheel_cache_dir(eb.cmake_args("x86_64", "Linux", flags(ICELAKE)), tmp_path)


def test_macos_cpu_identity_comes_from_sysctl(monkeypatch: pytest.MonkeyPatch) -> None:
    m1 = {
        "machdep.cpu.brand_string": "machdep.cpu.brand_string: Apple M1\n",
        "hw.optional": "hw.optional.arm.FEAT_I8MM: 0\n",
    }
    m2 = {
        "machdep.cpu.brand_string": "machdep.cpu.brand_string: Apple M2\n",
        "hw.optional": "hw.optional.arm.FEAT_I8MM: 1\n",
    }
    monkeypatch.setattr(eb, "_sysctl", lambda name: m1.get(name, ""))
    on_m1 = eb.wheel_cpu("arm64", "Darwin")
    assert "Apple M1" in on_m1
    assert "hw.optional.arm.FEAT_I8MM: 0" in on_m1
    assert eb.wheel_cpu("arm64", "Darwin") == on_m1
    monkeypatch.setattr(eb, "_sysctl", lambda name: m2.get(name, ""))
    assert eb.wheel_cpu("arm64", "Darwin") != on_m1


def test_sysctl_without_the_name_or_the_command_is_empty() -> None:
    assert eb._sysctl("clearmed.no.such.name") == ""


def test_pyproject_pins_the_same_engine_version() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert eb.ENGINE_REQUIREMENT in project["optional-dependencies"]["embedded"]


def test_readme_main_command_builds_the_engine_before_the_install() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- ci:main -->", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    command = " ".join(line for line in block.splitlines() if line.strip() and not line.startswith("#"))
    assert re.search(r"backbones/engine_build\.py.*pip install -e", command), command
    assert "CMAKE_ARGS" not in command  # the helper owns the flags


def test_main_prints_the_cmake_args(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eb, "read_cpu_flags", lambda: flags(SAPPHIRE))
    monkeypatch.setattr(eb.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(eb.platform, "system", lambda: "Linux")
    assert eb.main(["--print-cmake-args"]) == 0
    out = capsys.readouterr().out
    assert "-DGGML_AMX_INT8=OFF" in out
    assert "-DGGML_AVX512=ON" in out


def test_main_reports_a_failed_build_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(**_: object) -> None:
        raise eb.EngineBuildError("command failed with exit code 1: pip wheel ...")

    monkeypatch.setattr(eb, "ensure_engine", fail)
    assert eb.main([]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "exit code 1" in err
