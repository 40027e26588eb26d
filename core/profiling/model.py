"""What every profile source becomes: one table of operators, one timeline, one summary.

ONNX Runtime's profiler on this CPU, msprof's op_summary / op_statistic CSV and Chrome-trace timeline, and
ais_bench's summary JSON all load into a `Profile`, so the table, timeline, roofline and "where to look"
lines work the same on the .om on the chip and on the ONNX export here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .machine import MachinePeak


@dataclass(frozen=True)
class OpStat:
    """One operator (a graph node, an Ascend task, or an op type in op_statistic), times per model run."""

    name: str
    type: str
    mean_ms: float
    p95_ms: float
    share: float  # of the mean whole-model time
    calls: int = 1  # executions per model run
    flops: int = 0  # per model run; 0 when unknown
    bytes: int = 0
    details: dict[str, str] = field(default_factory=dict)  # source-specific columns (Task Type, Block Dim...)


@dataclass(frozen=True)
class TimelineEvent:
    name: str
    type: str
    start_ms: float  # from the start of the first run shown
    dur_ms: float
    lane: int = 0  # the run (ONNX Runtime), or the stream / thread


@dataclass(frozen=True)
class Profile:
    source: str  # the file or model it came from
    kind: str  # "onnxruntime", "msprof op_summary", "msprof op_statistic", "chrome trace", "ais_bench"
    device: str
    model_ms: float  # mean whole-model time (NaN when the source does not say)
    runs: int
    ops: tuple[OpStat, ...]
    timeline: tuple[TimelineEvent, ...] = ()
    peak: MachinePeak | None = None
    summary: dict[str, float] = field(default_factory=dict)  # e.g. ais_bench's H2D/D2H latencies

    @property
    def total_flops(self) -> int:
        return sum(op.flops for op in self.ops)

    def op(self, name: str) -> OpStat | None:
        return next((o for o in self.ops if o.name == name), None)


def mean_p95(samples: list[float]) -> tuple[float, float]:
    """Mean and 95th percentile (linear interpolation, NumPy's default) of per-run times."""
    values = np.asarray(samples, dtype=np.float64)
    return float(values.mean()), float(np.percentile(values, 95))


def with_shares(ops: list[OpStat], model_ms: float) -> tuple[OpStat, ...]:
    """The ops sorted by mean time (largest first), each with its share of `model_ms`."""
    import dataclasses

    total = model_ms if model_ms > 0 else sum(o.mean_ms for o in ops)
    ranked = sorted(ops, key=lambda o: o.mean_ms, reverse=True)
    return tuple(dataclasses.replace(o, share=o.mean_ms / total if total > 0 else 0.0) for o in ranked)
