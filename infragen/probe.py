"""`infragen hardware probe`: measures the machine it runs on and writes a `--hardware` file for `estimate`.

Reads /proc and /sys and runs a STREAM-like read kernel in one child process per core (stdlib only, no numpy).
It is I/O and timing: sizing never imports it; the file it writes is read back by sizing/hardware.py.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import time
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

#: Buffer the kernels stream, as a multiple of the last-level cache (STREAM's rule: at least 4x the caches).
CACHE_MULTIPLE = 8
#: Smallest buffer streamed in all, bytes (when the cache size cannot be read).
MIN_BUFFER_BYTES = 256 * 1024 * 1024
#: CpuModel's SIMD vocabulary and the /proc/cpuinfo flags that show each.
_SIMD_FLAGS = (("avx2", "avx2"), ("avx512", "avx512f"), ("avx512_bf16", "avx512_bf16"), ("amx", "amx_tile"),
               ("neon", "asimd"), ("sve", "sve"), ("sve2", "sve2"))


@dataclass(frozen=True)
class CpuInfo:
    """What /proc/cpuinfo says about the CPUs this process can see."""

    model_name: str
    vendor: str
    """amd, intel, arm or the raw vendor id lower-cased."""
    flags: frozenset[str]
    logical_cpus: int
    physical_cores: int
    sockets: int
    clock_ghz: float | None
    """`cpu MHz` of the first CPU (in a VM usually the nominal clock), None when absent (most arm64 kernels)."""
    family_model: str
    """`family F model M` (x86) or the CPU part (arm), for the record."""


def parse_cpuinfo(text: str) -> CpuInfo:
    """Parse /proc/cpuinfo text (x86 or arm64 layout)."""
    blocks = [b for b in text.strip().split("\n\n") if b.strip()]
    procs: list[dict[str, str]] = []
    for block in blocks:
        entry: dict[str, str] = {}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            entry[key.strip()] = value.strip()
        if "processor" in entry:
            procs.append(entry)
    if not procs:
        raise ValueError("no processor entries in /proc/cpuinfo")
    first = procs[0]
    flags = frozenset((first.get("flags") or first.get("Features") or "").split())
    cores = {(p.get("physical id", "0"), p.get("core id", p["processor"])) for p in procs}
    sockets = {p.get("physical id", "0") for p in procs}
    vendor_id = first.get("vendor_id", "").lower()
    vendor = {"authenticamd": "amd", "genuineintel": "intel"}.get(vendor_id, vendor_id or "arm")
    mhz = first.get("cpu MHz")
    if "cpu family" in first:
        family_model = f"family {first['cpu family']} model {first.get('model', '?')}"
    else:
        family_model = f"implementer {first.get('CPU implementer', '?')} part {first.get('CPU part', '?')}"
    return CpuInfo(
        model_name=first.get("model name") or first.get("Model") or "unknown CPU",
        vendor=vendor,
        flags=flags,
        logical_cpus=len(procs),
        physical_cores=len(cores),
        sockets=len(sockets),
        clock_ghz=round(float(mhz) / 1000, 3) if mhz else None,
        family_model=family_model,
    )


def simd_features(flags: frozenset[str]) -> list[str]:
    """The CpuModel SIMD names whose /proc/cpuinfo flag is present."""
    return [name for name, flag in _SIMD_FLAGS if flag in flags]


#: AVX-512 FP32 FLOP/cycle/core by vendor and x86 family (two FMA pipes x their width x 2), with where it was read;
#: the pipe count and width are not probed (flags do not show them).
_AVX512_FLOPS: tuple[tuple[str, int | None, int, str], ...] = (
    ("amd", 25, 32, "Zen 4 runs 512-bit instructions on pairs of its two 256-bit FMA pipes: 8 fp32 lanes x 2 (FMA) "
                    "x 2 (cpus.yaml epyc-genoa and its sources)"),
    ("amd", 26, 64, "Zen 5 widened the FMA pipes to 512 bits: 16 fp32 lanes x 2 (FMA) x 2 (numberworld.org "
                    "'Zen5's AVX512 Teardown', 2024; mobile Zen 5 parts keep 256-bit pipes: 32 there)"),
    ("intel", None, 64, "Xeon Scalable cores have two 512-bit FMA units: 16 fp32 lanes x 2 (FMA) x 2 (cpus.yaml's "
                        "Skylake to Sapphire Rapids Xeons; some Silver/Bronze and client parts have one: 32)"),
)


def fp32_flops_per_cycle(flags: frozenset[str], vendor: str = "", family: int | None = None) -> tuple[int | None, str]:
    """FP32 FLOP/cycle/core from the vector width the flags show, and how it was derived.

    AVX2 (no AVX-512): 8 fp32 lanes x 2 (FMA) x two FMA pipes (Zen 2-5, Haswell and later: assumed, not probed).
    AVX-512: depends on how wide the FMA pipes are, which the flags do not show: by vendor and family
    (_AVX512_FLOPS; Zen 4 32, Zen 5 and Intel Xeons 64); an AVX-512 CPU not in that table is left out.
    """
    if "fma" not in flags or "avx2" not in flags:
        return None, "no AVX2+FMA flag: FP32 FLOP/cycle not derived; fill in fp32_flops_per_cycle_per_core"
    if "avx512f" not in flags:
        return 32, "8 fp32 lanes (AVX2) x 2 (FMA) x 2 FMA pipes (pipe count assumed, not probed)"
    for who, fam, flops, how in _AVX512_FLOPS:
        if vendor == who and (fam is None or fam == family):
            return flops, f"{how}; assumed from the vendor and family, not probed"
    return None, (f"AVX-512 on {vendor or 'this vendor'} family {family}: FMA pipe width unknown, FP32 FLOP/cycle "
                  "not derived; fill in fp32_flops_per_cycle_per_core")


def last_level_cache_bytes(sys_cpu: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int | None:
    """Size of the largest cache sysfs lists for cpu0, bytes (None when unreadable)."""
    sizes = []
    for index in sorted(sys_cpu.glob("index*")):
        try:
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        unit = {"K": 1024, "M": 1024**2}.get(text[-1:], 1)
        digits = text.rstrip("KM")
        if digits.isdigit():
            sizes.append(int(digits) * unit)
    return max(sizes) if sizes else None


def _read_kernel(args: tuple[int, int]) -> tuple[float, float, float]:
    """One process: best read and copy rates over `repeats` passes of a private `n`-byte buffer.

    Read = bytes.find of an absent byte (memchr: vector loads, nothing written); copy = memoryview slice
    assignment (memcpy; STREAM counts read + write bytes). Timed with the process's own CPU clock, so time the
    scheduler gave to other processes on a shared machine is not counted; wall-clock read rate returned too.
    """
    n, repeats = args
    src = b"\x02" * n  # written once, so every page is real memory (not the shared zero page)
    dst = bytearray(n)
    dst[:] = src
    view_src, view_dst = memoryview(src), memoryview(dst)
    best_read = best_copy = best_wall = float("inf")
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.thread_time()
        src.find(b"\x01")
        best_read = min(best_read, time.thread_time() - cpu)
        best_wall = min(best_wall, time.perf_counter() - wall)
        cpu = time.thread_time()
        view_dst[:] = view_src
        best_copy = min(best_copy, time.thread_time() - cpu)
    tiny = 1e-9
    return n / max(best_read, tiny), 2 * n / max(best_copy, tiny), n / max(best_wall, tiny)


@dataclass(frozen=True)
class Bandwidth:
    """Aggregate rates of all processes, bytes/s."""

    read_bytes_per_s: float
    copy_bytes_per_s: float
    read_wall_bytes_per_s: float
    processes: int
    buffer_bytes: int
    repeats: int


def measure_bandwidth(processes: int, buffer_bytes: int, repeats: int = 10) -> Bandwidth:
    """Run the kernels in `processes` processes at once, each on buffer_bytes / processes of its own memory."""
    per_process = max(1, buffer_bytes // processes)
    with get_context("spawn").Pool(processes) as pool:
        results = pool.map(_read_kernel, [(per_process, repeats)] * processes)
    return Bandwidth(
        read_bytes_per_s=sum(r[0] for r in results),
        copy_bytes_per_s=sum(r[1] for r in results),
        read_wall_bytes_per_s=sum(r[2] for r in results),
        processes=processes,
        buffer_bytes=per_process * processes,
        repeats=repeats,
    )


def memory_gib(meminfo: str) -> float | None:
    """MemTotal of /proc/meminfo text, GiB."""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024**2, 1)
    return None


def hardware_document(info: CpuInfo, bw: Bandwidth, mem_gib: float | None, today: str) -> dict[str, Any]:
    """The `--hardware` YAML document (HardwareFile fields) for a probed CPU machine."""
    family = info.family_model.split()[1] if info.family_model.startswith("family ") else ""
    flops, flops_how = fp32_flops_per_cycle(info.flags, info.vendor, int(family) if family.isdigit() else None)
    arch = "arm64" if platform.machine() in ("aarch64", "arm64") else "x86_64"
    cpu: dict[str, Any] = {
        "id": "probed-" + "-".join(info.model_name.lower().replace("(r)", "").replace("(tm)", "").split())[:40],
        "display_name": info.model_name,
        "vendor": info.vendor,
        "arch": arch,
        "microarchitecture": info.family_model,
        "simd": simd_features(info.flags),
        "source": (f"infragen hardware probe {today}: /proc/cpuinfo ({info.model_name}, {info.family_model}, "
                   f"flags); FP32 FLOP/cycle = {flops_how}; clock = cpu MHz"),
        "confidence": "medium",
    }
    if flops is not None:
        cpu["fp32_flops_per_cycle_per_core"] = flops
    if info.clock_ghz is not None:
        cpu["sustained_clock_ghz"] = info.clock_ghz
    if info.logical_cpus and info.physical_cores:
        cpu["threads_per_core"] = max(1, info.logical_cpus // info.physical_cores)
    doc: dict[str, Any] = {
        "name": f"probed {info.model_name} ({info.physical_cores} cores)",
        "cpu": cpu,
        "vcpus": info.logical_cpus,
        "physical_cores": info.physical_cores,
        "cpu_sockets": max(1, info.sockets),
    }
    if mem_gib is not None:
        doc["memory_gib"] = mem_gib
    doc["measured"] = {
        "memory_bandwidth_gb_per_s": round(bw.read_bytes_per_s / 1e9, 2),
        "copy_bandwidth_gb_per_s": round(bw.copy_bytes_per_s / 1e9, 2),
        "wall_clock_read_bandwidth_gb_per_s": round(bw.read_wall_bytes_per_s / 1e9, 2),
        "processes": bw.processes,
        "buffer_mib": bw.buffer_bytes // 1024**2,
        "method": (f"read: memchr over {bw.buffer_bytes // 1024**2} MiB "
                   f"split over {bw.processes} processes run at once, best of {bw.repeats} passes, each timed "
                   "by its process's CPU clock; copy: memcpy of the same buffers, read + write bytes"),
        "as_of": today,
    }
    return doc


def probe(repeats: int = 10, buffer_bytes: int | None = None) -> dict[str, Any]:
    """Measure this machine (Linux) and return its hardware document (buffer: default 8 x LLC, >= 256 MiB)."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        meminfo = Path("/proc/meminfo").read_text()
    except OSError as exc:
        from infragen.errors import InputError

        raise InputError(f"hardware probe reads /proc/cpuinfo and /proc/meminfo (Linux only): {exc}") from None
    info = parse_cpuinfo(cpuinfo)
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else info.logical_cpus
    processes = max(1, min(usable, info.physical_cores))
    llc = last_level_cache_bytes()
    if buffer_bytes is None:
        buffer_bytes = max(MIN_BUFFER_BYTES, CACHE_MULTIPLE * (llc or 0))
    bw = measure_bandwidth(processes, buffer_bytes, repeats)
    today = _dt.datetime.now(_dt.UTC).date().isoformat()
    return hardware_document(info, bw, memory_gib(meminfo), today)
