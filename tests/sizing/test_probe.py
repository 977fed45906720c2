"""`infragen hardware probe` and measured bandwidth in --hardware files: parsing, the document, the model's use."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from infragen.catalog import load_catalog
from infragen.cli import main
from infragen.probe import Bandwidth, hardware_document, measure_bandwidth, memory_gib, parse_cpuinfo
from infragen.sizing.constants import load_constants
from infragen.sizing.cpu_performance import cpu_setup, effective_bandwidth
from infragen.sizing.estimate import estimate
from infragen.sizing.hardware import hardware_from_document, load_hardware_file
from infragen.sizing.memory import gguf_weight_bytes
from tests.sizing.conftest import LLAMA3_8B

X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
cpu MHz\t\t: 2445.406
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse2 avx fma avx2 f16c

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
cpu MHz\t\t: 2445.406
physical id\t: 0
core id\t\t: 1
flags\t\t: fpu sse2 avx fma avx2 f16c
"""
ARM = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm sve sve2
CPU implementer\t: 0x41
CPU part\t: 0xd4f

processor\t: 1
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm sve sve2
CPU implementer\t: 0x41
CPU part\t: 0xd4f
"""
BW = Bandwidth(read_bytes_per_s=30e9, copy_bytes_per_s=27e9, read_wall_bytes_per_s=6e9, processes=2,
               buffer_bytes=256 * 1024**2, repeats=10)


def test_x86_cpuinfo() -> None:
    info = parse_cpuinfo(X86)
    assert (info.vendor, info.logical_cpus, info.physical_cores, info.sockets) == ("amd", 2, 2, 1)
    assert info.clock_ghz == 2.445
    assert info.family_model == "family 25 model 1"


def test_arm_cpuinfo_has_no_clock_and_neon_sve() -> None:
    info = parse_cpuinfo(ARM)
    assert info.clock_ghz is None and info.vendor == "arm" and info.logical_cpus == 2
    doc = hardware_document(info, BW, 16.0, "2026-12-03")
    assert doc["cpu"]["simd"] == ["neon", "sve", "sve2"]
    assert "fp32_flops_per_cycle_per_core" not in doc["cpu"]  # not derived without AVX2+FMA: never guessed


def test_meminfo() -> None:
    assert memory_gib("MemTotal:       24683620 kB\nMemFree: 1 kB\n") == 23.5


def test_document_loads_as_a_hardware_file_with_the_measured_bandwidth() -> None:
    doc = hardware_document(parse_cpuinfo(X86), BW, 23.5, "2026-12-03")
    hw = hardware_from_document(doc, load_catalog(), where="probe")
    assert hw.measured_memory_bandwidth_gb_per_s == 30.0
    assert hw.cpu is not None and hw.cpu.simd == ["avx2"] and hw.cpu.fp32_flops_per_cycle_per_core == 32
    assert hw.cpu.memory_bandwidth_gb_per_s is None  # no datasheet figure is invented
    est = estimate(LLAMA3_8B, hw, precision="q4_0", engine="llama.cpp", input_len=1, output_len=128,
                   concurrency=1)
    assert est.fits and any("measured on the machine" in n for n in est.notes)


def test_measured_bandwidth_uses_its_own_fraction_and_no_thread_limit() -> None:
    doc = hardware_document(parse_cpuinfo(X86), BW, 23.5, "2026-12-03")
    hw = hardware_from_document(doc, load_catalog(), where="probe")
    assert hw.cpu is not None
    c = load_constants().cpu
    measured = cpu_setup(hw.cpu, 2, measured_bandwidth_gb_per_s=30.0)
    assert effective_bandwidth(measured) == pytest.approx(c.measured_bandwidth_fraction * 30e9)
    datasheet = cpu_setup(hw.cpu.model_copy(update={"memory_bandwidth_gb_per_s": 30.0}), 2)
    assert effective_bandwidth(datasheet) == pytest.approx(
        min(c.generation_bandwidth_fraction * 30e9, 2 * c.per_thread_bandwidth_gb_per_s * 1e9))


def test_generation_speed_follows_the_measured_bandwidth() -> None:
    doc = hardware_document(parse_cpuinfo(X86), BW, 23.5, "2026-12-03")
    doc["measured"]["memory_bandwidth_gb_per_s"] = 10.0  # 2 cores: above ~50 GB/s 8B is compute-bound
    slow = hardware_from_document(doc, load_catalog(), where="probe")
    doc["measured"]["memory_bandwidth_gb_per_s"] = 20.0
    fast = hardware_from_document(doc, load_catalog(), where="probe")
    kw = dict(precision="q4_0", engine="llama.cpp", input_len=1, output_len=128, concurrency=1)
    a, b = estimate(LLAMA3_8B, slow, **kw), estimate(LLAMA3_8B, fast, **kw)  # type: ignore[arg-type]
    assert b.output_tokens_per_s == pytest.approx(2 * a.output_tokens_per_s, rel=0.02)
    frac = load_constants().cpu.measured_bandwidth_fraction
    weights = gguf_weight_bytes(LLAMA3_8B, "q4_0")
    assert a.tpot_ms == pytest.approx(1e3 * weights / (frac * 10e9), rel=0.02)  # KV of ~65 tokens is small


def test_bad_measured_field_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = hardware_document(parse_cpuinfo(X86), BW, 23.5, "2026-12-03")
    doc["measured"]["memory_bandwidth_gb_per_s"] = -1
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(SystemExit) as exc:
        main(["estimate", "--model", "llama-3.1-8b", "--precision", "q4_0", "--hardware", str(path),
              "--input-len", "10", "--output-len", "10", "--concurrency", "1"])
    assert exc.value.code == 2
    assert "measured.memory_bandwidth_gb_per_s" in capsys.readouterr().err


def test_kernel_measures_something_plausible() -> None:
    bw = measure_bandwidth(1, 4 * 1024**2, repeats=2)
    assert bw.read_bytes_per_s > 1e8 and bw.copy_bytes_per_s > 1e8 and bw.buffer_bytes == 4 * 1024**2


def test_cli_probe_writes_a_file_estimate_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["hardware", "probe", "--repeats", "1", "--buffer-mib", "4"])
    text = capsys.readouterr().out
    assert text.startswith("# Written by `infragen hardware probe`")
    path = tmp_path / "machine.yaml"
    path.write_text(text)
    hw = load_hardware_file(path, load_catalog())
    assert hw.measured_memory_bandwidth_gb_per_s is not None and hw.measured_memory_bandwidth_gb_per_s > 0
    assert hw.physical_cores is not None and hw.physical_cores >= 1


@pytest.mark.parametrize(("vendor_id", "family", "flags", "flops"), [
    ("AuthenticAMD", 25, "fma avx2", 32),            # Zen 3, AVX2 (this project's 2026-12-03 VM)
    ("AuthenticAMD", 25, "fma avx2 avx512f", 32),    # Zen 4: AVX-512 double-pumped on 256-bit pipes
    ("AuthenticAMD", 26, "fma avx2 avx512f", 64),    # Zen 5: 512-bit pipes
    ("GenuineIntel", 6, "fma avx2 avx512f", 64),     # Xeon Scalable: two 512-bit FMA units
    ("GenuineIntel", 6, "fma avx2", 32),
    ("HygonGenuine", 24, "fma avx2 avx512f", None),  # AVX-512 of unknown width: never guessed
])
def test_fp32_flops_per_cycle_follow_the_fma_pipe_width(vendor_id: str, family: int, flags: str,
                                                        flops: int | None) -> None:
    text = X86.replace("AuthenticAMD", vendor_id).replace("cpu family\t: 25", f"cpu family\t: {family}") \
        .replace("fpu sse2 avx fma avx2 f16c", f"fpu sse2 avx f16c {flags}")
    doc = hardware_document(parse_cpuinfo(text), BW, 23.5, "2026-12-04")
    assert doc["cpu"].get("fp32_flops_per_cycle_per_core") == flops
    assert ("not probed" in doc["cpu"]["source"]) == (flops is not None)
