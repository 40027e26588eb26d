"""Operator profile of the embedded backend's model: ONNX Runtime's profiler over N dataset images.

The session is the embedded backend's own (`open_session`: same optimisation level and threads) with
`SessionOptions.enable_profiling` on. One warm-up run is discarded; each measured run is one image fed
exactly as the stream feeds it (decode, ROI crop, resize, AIPP). ONNX Runtime writes a Chrome-trace JSON:
a `cat: "Session"` event `model_run` per run and a `cat: "Node"` event `<node>_kernel_time` per kernel with
`args.op_name`, `args.input_type_shape` and `args.output_type_shape` (ONNX Runtime's profiling docs).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ..errors import SegScopeError
from .costs import Tensor, op_bytes, op_flops
from .graph import GraphNode, chain_costs, graph_nodes, replaced_nodes
from .machine import MachinePeak
from .model import OpStat, Profile, TimelineEvent, mean_p95, with_shares
from .traces import microseconds

KERNEL_SUFFIX = "_kernel_time"
NCHWC_SUFFIX = "_nchwc"  # ONNX Runtime's name for a kernel it moved to the blocked NCHWc layout
GRAPH_NODES = "graph nodes"  # OpStat.details key: the ONNX nodes a fused kernel replaced, ";"-separated


def _event_tensors(shapes: object) -> tuple[Tensor, ...]:
    """ONNX Runtime's `[{"float": [1, 3, 960, 960]}, ...]` as tensors."""
    if not isinstance(shapes, list):
        return ()
    tensors = []
    for entry in shapes:
        if isinstance(entry, dict) and len(entry) == 1:
            (dtype, dims), = entry.items()
            if isinstance(dims, list) and all(isinstance(d, int) for d in dims):
                tensors.append(Tensor(str(dtype), tuple(dims)))
    return tuple(tensors)


def _times(event: dict, index: int, source: str) -> tuple[float, float]:
    """An event's (ts, dur) in microseconds; a file's bad value is named by event index and field."""
    where = f"event {index} ({event.get('name')!r}) field"
    return (microseconds(event.get("ts"), Path(source), f"{where} 'ts'"),
            microseconds(event.get("dur"), Path(source), f"{where} 'dur'"))


def _runs(events: list[dict], source: str) -> list[tuple[float, float]]:
    runs = sorted(_times(e, i, source) for i, e in enumerate(events)
                  if isinstance(e, dict) and e.get("cat") == "Session" and e.get("name") == "model_run")
    if not runs:
        raise SegScopeError(f"{source}: no 'model_run' Session event: not an ONNX Runtime profile, or the "
                            "session ran no inference before end_profiling()")
    return runs


def parse_ort_events(events: list[dict], source: str, graph: Iterable[GraphNode] = (), skip_runs: int = 0,
                     device: str = "CPU (ONNX Runtime)", peak: MachinePeak | None = None) -> Profile:
    """Aggregate an ONNX Runtime profile per node: mean/p95 per run, costs from the graph or the trace."""
    graph = list(graph)
    nodes = {n.name: n for n in graph}
    runs = _runs(events, source)[skip_runs:]
    if not runs:
        raise SegScopeError(f"{source}: only warm-up runs were profiled; profile at least one image")
    kernels = sorted(((_times(e, i, source), e) for i, e in enumerate(events) if isinstance(e, dict)
                      and e.get("cat") == "Node" and str(e.get("name", "")).endswith(KERNEL_SUFFIX)),
                     key=lambda kernel: kernel[0])
    times: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(runs))
    calls: dict[str, int] = defaultdict(int)
    first: dict[str, dict] = {}
    timeline = []
    for (ts, dur), event in kernels:
        run = next((i for i, (start, dur) in enumerate(runs) if start <= ts <= start + dur), None)
        if run is None:
            continue  # a warm-up run's kernel
        name = event["name"][: -len(KERNEL_SUFFIX)]
        args = event.get("args")
        args = args if isinstance(args, dict) else {}
        first.setdefault(name, args)
        times[name][run] += dur / 1000
        if run == 0:
            calls[name] += 1
        timeline.append(TimelineEvent(name, str(args.get("op_name", "?")), (ts - runs[run][0]) / 1000, dur / 1000, run))
    ops = []
    for name, per_run in times.items():
        args = first[name]
        node = nodes.get(name)
        replaced = replaced_nodes(graph, name[: -len(NCHWC_SUFFIX)]) if name.endswith(NCHWC_SUFFIX) else []
        fused = chain_costs(replaced)
        details = {"provider": str(args.get("provider", ""))}
        if replaced:
            details[GRAPH_NODES] = ";".join(n.name for n in replaced)
        if node is not None and node.complete:
            flops, nbytes = node.flops, node.bytes
        elif fused is not None:
            flops, nbytes = fused
        else:  # a node ONNX Runtime made (layout reorder) or one shape inference could not size
            inputs = _event_tensors(args.get("input_type_shape"))
            outputs = _event_tensors(args.get("output_type_shape"))
            flops, nbytes = op_flops(str(args.get("op_name", "")), inputs, outputs), op_bytes(inputs, outputs)
        mean, p95 = mean_p95(per_run)
        count = max(calls[name], 1)
        ops.append(OpStat(name, str(args.get("op_name", "?")), mean, p95, 0.0, count, flops * count, nbytes * count,
                          details))
    model_ms = float(np.mean([dur for _, dur in runs])) / 1000
    return Profile(source, "onnxruntime", device, model_ms, len(runs), with_shares(ops, model_ms),
                   tuple(timeline), peak)


def profile_session(model_path: Path, session_options: object, feeds: list[dict[str, np.ndarray]],
                    peak: MachinePeak | None = None, device: str = "CPU") -> Profile:
    """Profile `feeds` (one dict per run, after one warm-up run of the first) on a new session."""
    import onnxruntime as ort

    if not feeds:
        raise SegScopeError(f"{model_path}: nothing to profile: no input images")
    options = session_options
    with tempfile.TemporaryDirectory(prefix="segscope-profile-") as folder:
        options.enable_profiling = True  # type: ignore[attr-defined]
        options.profile_file_prefix = os.path.join(folder, "ort")  # type: ignore[attr-defined]
        try:
            session = ort.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # ORT raises its own exception types
            raise SegScopeError(f"{model_path}: ONNX Runtime cannot load the model ({exc})") from None
        for feed in [feeds[0], *feeds]:
            session.run(None, feed)
        trace = Path(session.end_profiling())
        events = json.loads(trace.read_text(encoding="utf-8"))
    level = str(options.graph_optimization_level).rsplit(".", 1)[-1]  # type: ignore[attr-defined]
    threads = options.intra_op_num_threads  # type: ignore[attr-defined]
    device = f"{device}; ONNX Runtime {ort.__version__}, {threads} threads, {level}"
    return parse_ort_events(events, str(model_path), graph_nodes(model_path), skip_runs=1, device=device, peak=peak)
