"""Chrome-trace timelines (msprof's `msprof_*.json` / `trace_view.json`, any `chrome://tracing` file).

A trace is a JSON list of events, or an object with `traceEvents`. Complete events (`"ph": "X"`) carry
`name`, `ts` and `dur` in microseconds (msprof writes `ts` as a string), `pid`, `tid` and `args`; metadata
events (`"ph": "M"`, `name: "process_name"`) name the processes. msprof puts the operators run on the chip
in the "Ascend Hardware" process (older CANN: "Task Scheduler"); when one is present only its events count.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from pathlib import Path

from ..errors import InputError, SegScopeError
from ..files import fileio
from .model import OpStat, Profile, TimelineEvent, mean_p95, with_shares

DEVICE_PROCESSES = ("Ascend Hardware", "Task Scheduler", "AI Core")
#: Profiles (timelines of many runs) may be large, but a JSON document ten times its size in memory is not.
MAX_PROFILE_BYTES = 512 << 20


def read_json(path: Path) -> object:
    try:
        return fileio.read_json(path, "profile", MAX_PROFILE_BYTES)
    except InputError as exc:
        if not exc.problem.startswith("invalid JSON"):
            raise
        raise InputError(path, f"{exc.problem}; the file is truncated if the profiler was stopped early: profile "
                               "again", exc.position) from None


def per_run_stats(calls: dict[str, list[float]], types: dict[str, str], runs: int,
                  details: dict[str, dict[str, str]] | None = None) -> list[OpStat]:
    """Ops from each name's call durations (ms), over `runs` iterations that ran the same operators.

    When a name ran once per run its samples are its calls; otherwise each call is scaled by calls per run.
    """
    ops = []
    for name, durations in calls.items():
        per_run = len(durations) / runs
        samples = durations if len(durations) == runs else [d * per_run for d in durations]
        mean, p95 = mean_p95(samples)
        ops.append(OpStat(name, types.get(name, "?"), mean, p95, 0.0, max(1, round(per_run)),
                          details=(details or {}).get(name, {})))
    return ops


def usual_runs(calls: dict[str, list[float]]) -> int:
    """The iterations a trace holds: how often its operators most commonly ran."""
    counts = Counter(len(d) for d in calls.values())
    return counts.most_common(1)[0][0] if counts else 1


def microseconds(value: object, path: Path, where: str) -> float:
    """A time in microseconds (msprof writes some as strings); anything but a finite number is named."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise SegScopeError(f"{path}: {where} is {value!r}, not a number of microseconds; is this the trace as "
                            "the profiler wrote it (msprof --export, ONNX Runtime's end_profiling)?")
    return number


def load_chrome_trace(path: Path, data: object = None) -> Profile:
    data = read_json(path) if data is None else data
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise SegScopeError(f"{path}: no trace events: expected a JSON list of events or {{\"traceEvents\": [...]}}")
    names = {e.get("pid"): str(e["args"].get("name", "")) for e in events if isinstance(e, dict)
             and e.get("ph") == "M" and e.get("name") == "process_name" and isinstance(e.get("args"), dict)}
    device_pids = {pid for pid, name in names.items() if any(d in name for d in DEVICE_PROCESSES)}
    complete = [(i, e) for i, e in enumerate(events)
                if isinstance(e, dict) and e.get("ph") == "X" and (not device_pids or e.get("pid") in device_pids)]
    if not complete:
        raise SegScopeError(f"{path}: no complete (\"ph\": \"X\") events"
                            f"{' in the Ascend Hardware process' if device_pids else ''}: export the timeline "
                            "with msprof --export=on after the run finished")
    lanes: dict[tuple[object, object], int] = {}
    parsed = []
    for i, e in complete:
        start = microseconds(e.get("ts"), path, f"traceEvents[{i}].ts")
        dur = microseconds(e.get("dur"), path, f"traceEvents[{i}].dur")
        args = e.get("args")
        args = args if isinstance(args, dict) else {}
        op_type = str(args.get("OP Type") or args.get("op_name") or args.get("Task Type") or e.get("cat") or "?")
        lane = lanes.setdefault((e.get("pid"), e.get("tid")), len(lanes))
        parsed.append((str(e.get("name", "?")), op_type, start, dur, lane))
    origin = min(p[2] for p in parsed)
    calls: dict[str, list[float]] = defaultdict(list)
    types: dict[str, str] = {}
    for name, op_type, _, dur, _ in parsed:
        calls[name].append(dur / 1000)
        types.setdefault(name, op_type)
    runs = usual_runs(calls)
    span_ms = (max(p[2] + p[3] for p in parsed) - origin) / 1000 / runs
    timeline = tuple(TimelineEvent(n, t, (s - origin) / 1000, d / 1000, lane) for n, t, s, d, lane in parsed)
    device = ", ".join(names[p] for p in sorted(device_pids, key=str)) or "trace"
    return Profile(str(path), "chrome trace", device, span_ms, runs,
                   with_shares(per_run_stats(calls, types, runs), span_ms), timeline)
