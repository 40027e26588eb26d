"""Roofline classification of operators against this machine's measured roofs.

An operator doing F FLOPs over B bytes in t seconds achieves F/t FLOP/s at arithmetic intensity F/B. The
roof at that intensity is min(peak, intensity x bandwidth): below the ridge (peak / bandwidth) the memory
roof bounds it, above it the compute roof. Its efficiency is achieved / roof; far below both roofs
(efficiency under `far_below`, default 10 %) means neither compute nor bandwidth explains its time:
overheads, poor kernels, threads waiting. Operators with no FLOPs (data movement) are judged by bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .machine import MachinePeak
from .model import OpStat

COMPUTE, MEMORY, FAR_BELOW = "compute-bound", "memory-bound", "far below both"


@dataclass(frozen=True)
class RooflinePoint:
    name: str
    intensity: float  # FLOP/byte (0 for data movement)
    gflops: float  # achieved
    gbs: float  # achieved bandwidth
    roof_gflops: float
    efficiency: float  # achieved / roof, in [0, 1+]
    bound: str

    @property
    def distance(self) -> float:
        """How many times faster the roof would allow (1 = on the roof)."""
        return 1.0 / self.efficiency if self.efficiency > 0 else math.inf


def classify(op: OpStat, peak: MachinePeak, far_below: float = 0.1) -> RooflinePoint | None:
    """The operator's roofline point; None without a time or bytes to judge it by."""
    if op.mean_ms <= 0 or op.bytes <= 0:
        return None
    seconds = op.mean_ms / 1000
    gflops, gbs = op.flops / seconds / 1e9, op.bytes / seconds / 1e9
    intensity = op.flops / op.bytes
    if op.flops > 0:
        roof = min(peak.peak_gflops, intensity * peak.bandwidth_gbs)
        efficiency = gflops / roof
        side = COMPUTE if intensity >= peak.ridge else MEMORY
    else:
        roof, efficiency, side = 0.0, gbs / peak.bandwidth_gbs, MEMORY
    return RooflinePoint(op.name, intensity, gflops, gbs, roof, efficiency,
                         FAR_BELOW if efficiency < far_below else side)
