"""This machine's measured peaks: the roofline's two roofs, measured here rather than assumed.

Compute: the best of a few float32 matrix products through NumPy's BLAS (all cores, FMA units), counted as
2·n³ FLOPs. Memory: the best of a few copies of an array far larger than the caches, counted as read +
write bytes. Both are what well-tuned code reaches on this machine, which is the fair roof for ONNX
Runtime's kernels; neither is a datasheet figure.
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class MachinePeak:
    cpu: str
    peak_gflops: float
    bandwidth_gbs: float

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the memory roof meets the compute roof."""
        return self.peak_gflops / self.bandwidth_gbs


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU model from /proc/cpuinfo ("model name" on x86, "Hardware"/"CPU part" on Arm), else platform."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    cores = text.count("\nprocessor") + text.startswith("processor")
    for key in ("model name", "Hardware", "Processor", "cpu model"):
        if fields.get(key):
            return f"{fields[key]} ({cores} logical CPUs)" if cores else fields[key]
    if fields.get("CPU part"):
        return f"{platform.machine()} CPU implementer {fields.get('CPU implementer', '?')} part {fields['CPU part']}"
    return platform.processor() or platform.machine() or "unknown CPU"


def _best_seconds(work: object, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        work()  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)


def measure_peak(matmul_size: int = 2048, copy_mib: int = 64, repeats: int = 4) -> MachinePeak:
    """Measure both roofs (about a second with the defaults)."""
    rng = np.random.default_rng(0)
    a = rng.random((matmul_size, matmul_size), dtype=np.float32)
    b = rng.random((matmul_size, matmul_size), dtype=np.float32)
    out = np.empty_like(a)
    np.matmul(a, b, out=out)  # warm the BLAS threads
    seconds = _best_seconds(lambda: np.matmul(a, b, out=out), repeats)
    gflops = 2 * matmul_size**3 / seconds / 1e9
    src = np.ones(copy_mib * (1 << 20) // 8, np.float64)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # fault the pages in
    seconds = _best_seconds(lambda: np.copyto(dst, src), repeats)
    bandwidth = 2 * src.nbytes / seconds / 1e9
    return MachinePeak(cpu_name(), gflops, bandwidth)
