"""Profiles the Ascend tools already write, read into the same `Profile` as ONNX Runtime's.

- msprof `op_summary_*.csv`: one row per task — Op Name, OP Type, Task Type, Task Start Time(us),
  Task Duration(us), Block Dim, Input Shapes, Output Shapes, aicore_time(us), and Infer ID when several
  inferences were profiled (CANN profiling docs, "op_summary"; older CANN wrote the headers without "(us)").
- msprof `op_statistic_*.csv`: one row per operator type — OP Type, Core Type, Count, Total Time(us),
  Avg/Min/Max Time(us), Ratio(%) ("op_statistic").
- ais_bench `{out}/{ts}_summary.json`: NPU_compute_time, H2D_latency, D2H_latency, each with min, max, mean,
  median and a percentile ("percentile(99%)", or "P99" in newer ais_bench), plus throughput = 1000 x batch /
  NPU_compute_time.mean (ait benchmark docs).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path

from ..errors import SegScopeError
from ..files.fileio import open_regular, read_csv
from .model import OpStat, Profile, TimelineEvent, with_shares
from .traces import MAX_PROFILE_BYTES, load_chrome_trace, per_run_stats, read_json, usual_runs

NOT_AVAILABLE = ("", "N/A", "NA", "-", "nan", "NaN")


class _Csv:
    """A CSV with named columns; lookups accept the documented name with or without its "(us)" unit."""

    def __init__(self, path: Path, kind: str):
        self.path, self.kind = path, kind
        rows = read_csv(path, f"msprof {kind}", MAX_PROFILE_BYTES)
        if not rows:
            raise SegScopeError(f"{path}: empty file; expected msprof's {kind}")
        self.header = [h.strip() for h in rows[0][1]]
        self.rows = [(line, r) for line, r in rows[1:] if any(c.strip() for c in r)]

    def column(self, *names: str, required: bool = True) -> int | None:
        for name in names:
            for candidate in (name, f"{name}(us)", name.replace("(us)", "")):
                if candidate in self.header:
                    return self.header.index(candidate)
        if required:
            raise SegScopeError(f"{self.path}:1: no column {names[0]!r} in the header ({', '.join(self.header[:6])}"
                                f"{', ...' if len(self.header) > 6 else ''}); expected msprof's {self.kind} as "
                                "msprof --export writes it")
        return None

    def text(self, row: list[str], index: int | None) -> str:
        return row[index].strip() if index is not None and index < len(row) else ""

    def number(self, line: int, row: list[str], index: int | None, required: bool = True) -> float:
        value = self.text(row, index)
        if value in NOT_AVAILABLE and not required:
            return math.nan
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number):
            name = self.header[index] if index is not None else "?"
            raise SegScopeError(f"{self.path}:{line}: column {name!r} holds {value!r}, not a number; rerun msprof "
                                "--export, or profile with --task-time=l1 so every column is collected")
        return number


def load_op_summary(path: Path) -> Profile:
    table = _Csv(path, "op_summary_*.csv")
    name_col, dur_col = table.column("Op Name"), table.column("Task Duration(us)")
    type_col, task_col = table.column("OP Type", required=False), table.column("Task Type", required=False)
    start_col = table.column("Task Start Time(us)", required=False)
    block_col = table.column("Block Dim", required=False)
    aicore_col, infer_col = table.column("aicore_time(us)", required=False), table.column("Infer ID", required=False)
    shape_cols = {k: table.column(k, required=False) for k in ("Input Shapes", "Output Shapes")}
    calls: dict[str, list[float]] = defaultdict(list)
    types: dict[str, str] = {}
    details: dict[str, dict[str, str]] = {}
    tasks = []
    aicore_ms = 0.0
    for line, row in table.rows:
        name = table.text(row, name_col)
        dur_ms = table.number(line, row, dur_col) / 1000
        start = table.number(line, row, start_col, required=False) if start_col is not None else math.nan
        aicore = table.number(line, row, aicore_col, required=False) if aicore_col is not None else math.nan
        aicore_ms += 0.0 if math.isnan(aicore) else aicore / 1000
        calls[name].append(dur_ms)
        types.setdefault(name, table.text(row, type_col) or table.text(row, task_col) or "?")
        details.setdefault(name, {"Task Type": table.text(row, task_col), "Block Dim": table.text(row, block_col),
                                  **{k: table.text(row, c) for k, c in shape_cols.items() if c is not None}})
        tasks.append((name, types[name], start, dur_ms, table.text(row, infer_col)))
    if not tasks:
        raise SegScopeError(f"{path}: header only, no tasks: the profiled run executed nothing on the chip")
    infer_ids = sorted({t[4] for t in tasks if t[4]}, key=lambda s: (len(s), s))
    runs = len(infer_ids) or usual_runs(calls)
    task_ms = sum(t[3] for t in tasks) / runs
    timeline: tuple[TimelineEvent, ...] = ()
    span_ms = math.nan
    if all(not math.isnan(t[2]) for t in tasks):
        lane_of = {iid: i for i, iid in enumerate(infer_ids)}
        origins: dict[int, float] = {}
        for t in tasks:
            lane = lane_of.get(t[4], 0)
            origins[lane] = min(origins.get(lane, t[2]), t[2])
        timeline = tuple(TimelineEvent(n, ty, (s - origins[lane_of.get(i, 0)]) / 1000, d, lane_of.get(i, 0))
                         for n, ty, s, d, i in tasks)
        ends: dict[int, float] = defaultdict(float)
        for e in timeline:
            ends[e.lane] = max(ends[e.lane], e.start_ms + e.dur_ms)
        span_ms = sum(ends.values()) / len(ends)  # first task start to last task end, per inference
    model_ms = span_ms if not math.isnan(span_ms) else task_ms
    summary = {"task_time_ms": task_ms}
    if aicore_col is not None:
        summary["aicore_time_ms"] = aicore_ms / runs  # Advisor's "AI Core time" beside the task time
    if not math.isnan(span_ms):
        summary["span_ms"] = span_ms
    return Profile(str(path), "msprof op_summary", "Ascend (msprof)", model_ms, runs,
                   with_shares(per_run_stats(calls, types, runs, details), model_ms), timeline, summary=summary)


def load_op_statistic(path: Path) -> Profile:
    table = _Csv(path, "op_statistic_*.csv")
    type_col, count_col = table.column("OP Type"), table.column("Count")
    total_col, ratio_col = table.column("Total Time(us)"), table.column("Ratio(%)", "Ratio", required=False)
    core_col, max_col = table.column("Core Type", required=False), table.column("Max Time(us)", required=False)
    ops = []
    for line, row in table.rows:
        total_ms = table.number(line, row, total_col) / 1000
        ratio = table.number(line, row, ratio_col, required=False) if ratio_col is not None else math.nan
        op_type = table.text(row, type_col)
        ops.append(OpStat(op_type, op_type, total_ms, math.nan, ratio / 100 if not math.isnan(ratio) else math.nan,
                          int(table.number(line, row, count_col)),
                          details={"Core Type": table.text(row, core_col), "Max Time(us)": table.text(row, max_col)}))
    if not ops:
        raise SegScopeError(f"{path}: header only, no operator types")
    total = sum(o.mean_ms for o in ops)
    if any(math.isnan(o.share) for o in ops):
        ops = list(with_shares(ops, total))
    return Profile(str(path), "msprof op_statistic", "Ascend (msprof)", total, 1,
                   tuple(sorted(ops, key=lambda o: o.mean_ms, reverse=True)), summary={"total_time_ms": total})


_PERCENTILE = re.compile(r"^(?:percentile\((\d+(?:\.\d+)?)%\)|P(\d+(?:\.\d+)?))$")


def load_ais_bench_summary(path: Path, data: object = None) -> Profile:
    data = read_json(path) if data is None else data
    if not isinstance(data, dict):
        raise SegScopeError(f"{path}: expected a JSON object (ais_bench's *_summary.json)")
    summary: dict[str, float] = {}
    for section in ("NPU_compute_time", "H2D_latency", "D2H_latency"):
        stats = data.get(section)
        if stats is None and section != "NPU_compute_time":
            continue
        if not isinstance(stats, dict) or type(stats.get("mean")) not in (int, float):
            raise SegScopeError(f"{path}: field {section}.mean missing or not a number; is this the "
                                "*_summary.json that ais_bench wrote beside its outputs?")
        for key, value in stats.items():
            match = _PERCENTILE.match(str(key))
            label = f"p{match.group(1) or match.group(2)}" if match else str(key)
            if type(value) in (int, float) and (match or label in ("min", "max", "mean", "median")):
                summary[f"{section}.{label}_ms"] = float(value)
    if type(data.get("throughput")) in (int, float):
        summary["throughput"] = float(data["throughput"])
    count = data["NPU_compute_time"].get("count", 0)
    if type(count) is not int or count < 0:
        raise SegScopeError(f"{path}: field NPU_compute_time.count is {count!r}, not a number of runs; is this the "
                            "*_summary.json that ais_bench wrote beside its outputs?")
    return Profile(str(path), "ais_bench", "Ascend (ais_bench)", summary["NPU_compute_time.mean_ms"], count, (),
                   summary=summary)


def _csv_header(path: Path) -> str:
    with open_regular(path, "profile") as f:
        lines = f.read(4096).decode("utf-8-sig", errors="replace").splitlines()
    return lines[0] if lines else ""


def is_drift_csv(path: Path) -> bool:
    """Whether `path` is a msit/ait debug compare result (a CSV with a CosineSimilarity column)."""
    return Path(path).suffix.lower() == ".csv" and "CosineSimilarity" in _csv_header(path)


def import_profile(path: Path) -> Profile:
    """Load any supported profile, recognised by its content rather than its name."""
    from .ort_profile import parse_ort_events

    path = Path(path)
    if path.suffix.lower() == ".csv":
        first = _csv_header(path)
        if is_drift_csv(path):
            raise SegScopeError(f"{path}: an accuracy comparison (msit/ait debug compare), not a profile: open it "
                                "with segscope drift")
        if "Task Duration" in first:
            return load_op_summary(path)
        if "Total Time" in first and "Count" in first:
            return load_op_statistic(path)
        raise SegScopeError(f"{path}:1: not an msprof op_summary or op_statistic CSV (no 'Task Duration' or "
                            "'Total Time' column); give op_summary_*.csv or op_statistic_*.csv from msprof's "
                            "summary folder")
    data = read_json(path)
    if isinstance(data, dict) and "NPU_compute_time" in data:
        return load_ais_bench_summary(path, data)
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if isinstance(events, list) and any(isinstance(e, dict) and e.get("name") == "model_run" for e in events):
        return parse_ort_events(events, str(path))
    if isinstance(events, list):
        return load_chrome_trace(path, data)
    raise SegScopeError(f"{path}: not a profile SegScope reads: expected msprof's op_summary/op_statistic CSV, "
                        "its Chrome-trace JSON, an ONNX Runtime profile or ais_bench's *_summary.json")
