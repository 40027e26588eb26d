"""Operator profiles of ONNX models: FLOPs counted by hand, real ONNX Runtime runs, roofline, where-to-look."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from segscope.core.cli import main
from segscope.core.errors import SegScopeError
from segscope.core.profiling.costs import Tensor, op_flops
from segscope.core.profiling.graph import graph_nodes
from segscope.core.profiling.insight import matched_ops, unfused_chains, where_to_look
from segscope.core.profiling.machine import MachinePeak, cpu_name, measure_peak
from segscope.core.profiling.model import OpStat, Profile, TimelineEvent
from segscope.core.profiling.ort_profile import parse_ort_events, profile_session
from segscope.core.profiling.roofline import COMPUTE, FAR_BELOW, MEMORY, classify
from segscope.core.profiling.run import profile_pipeline

PEAK = MachinePeak("test CPU", 100.0, 10.0)  # ridge 10 FLOP/byte

#: The hand-built graph's FLOPs, counted by hand (2 x multiply-adds; 1 per element for Relu):
#: conv1 3->4 ch 3x3 pad 1 on 8x8: 4*8*8 outputs x 3*3*3 MACs = 6912 MACs
#: relu on 1x4x8x8: 256; conv2 4->4 ch, group 2, 3x3: 256 outputs x 2*3*3 = 4608 MACs
#: gemm [1,256] x [256,10] + bias: 10 outputs x 256 MACs = 2560 MACs, + 10 bias adds
HAND_FLOPS = {"conv1": 2 * 6912, "relu": 256, "conv2": 2 * 4608, "flatten": 0, "gemm": 2 * 2560 + 10}
#: conv1 bytes: input 1x3x8x8, weight 4x3x3x3, bias 4, output 1x4x8x8, float32
CONV1_BYTES = 4 * (3 * 64 + 4 * 27 + 4 + 4 * 64)


def make_hand_model(path):
    rng = np.random.default_rng(0)
    init = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name) for name, shape in
            (("W1", (4, 3, 3, 3)), ("B1", (4,)), ("W2", (4, 2, 3, 3)), ("WG", (256, 10)), ("BG", (10,)))]
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
        helper.make_node("Conv", ["r1", "W2"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=2),
        helper.make_node("Flatten", ["c2"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "WG", "BG"], ["y"], name="gemm"),
    ]
    graph = helper.make_graph(nodes, "hand", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], initializer=init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def test_graph_flops_and_bytes_match_the_hand_count(tmp_path):
    nodes = {n.name: n for n in graph_nodes(make_hand_model(tmp_path / "hand.onnx"))}
    assert {name: n.flops for name, n in nodes.items()} == HAND_FLOPS
    assert nodes["conv1"].bytes == CONV1_BYTES
    assert all(n.complete for n in nodes.values())


def test_profile_of_a_real_session_aggregates_per_node(tmp_path):
    model = make_hand_model(tmp_path / "hand.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep every node
    feeds = [{"x": np.full((1, 3, 8, 8), i, np.float32)} for i in range(3)]
    peak = MachinePeak("test CPU", 100.0, 10.0)
    profile = profile_session(model, options, feeds, peak)
    assert profile.runs == 3  # the warm-up run is not counted
    assert {o.name: o.flops for o in profile.ops} == HAND_FLOPS
    assert profile.total_flops == sum(HAND_FLOPS.values())
    assert profile.peak is peak and profile.model_ms > 0
    assert [o.mean_ms for o in profile.ops] == sorted((o.mean_ms for o in profile.ops), reverse=True)
    assert 0 < sum(o.share for o in profile.ops) <= 1  # the rest is the runtime's own time between kernels
    assert all(o.p95_ms >= o.mean_ms * 0.999 or o.p95_ms > 0 for o in profile.ops)
    assert sorted({e.lane for e in profile.timeline}) == [0, 1, 2] and len(profile.timeline) == 15
    assert {e.name for e in profile.timeline} == set(HAND_FLOPS)


def test_fused_kernels_cost_what_they_replaced(tmp_path):
    """At ONNX Runtime's full optimisation conv1+relu become one NCHWc kernel (on CPUs where that layout
    applies): its FLOPs are the two nodes' hand counts and it names them; the model's total is unchanged."""
    model = make_hand_model(tmp_path / "hand.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    profile = profile_session(model, options, [{"x": np.ones((1, 3, 8, 8), np.float32)}], PEAK)
    assert profile.total_flops == sum(HAND_FLOPS.values())
    for op in profile.ops:
        replaced = op.details.get("graph nodes")
        if replaced:
            assert op.flops == sum(HAND_FLOPS[n] for n in replaced.split(";"))
            assert replaced.split(";") == ["conv1", "relu"] and op.bytes == CONV1_BYTES


def test_matched_ops_by_name_or_by_the_nodes_a_kernel_replaced():
    here = Profile("m.onnx", "onnxruntime", "cpu", 3.0, 1, (
        OpStat("r1_nchwc", "Conv", 2.0, 2.0, 0.6, details={"graph nodes": "conv1;relu"}),
        OpStat("/net/Add_1", "Add", 1.0, 1.0, 0.3), OpStat("only_here", "Cast", 0.1, 0.1, 0.03)))
    there = Profile("op_summary.csv", "msprof op_summary", "npu", 1.0, 1, (
        OpStat("conv1", "Conv2D", 0.5, 0.5, 0.5), OpStat("net_Add_1", "Add", 0.2, 0.2, 0.2)))
    pairs = matched_ops(here, there)
    assert [(name, a.name, b.name) for name, a, b in pairs] == [("conv1", "r1_nchwc", "conv1"),
                                                                ("/net/Add_1", "/net/Add_1", "net_Add_1")]


def ort_events(run_starts, kernels):
    """A hand-written ONNX Runtime trace: model_run events and node events (times in microseconds)."""
    events = [{"cat": "Session", "name": "model_run", "ph": "X", "ts": start, "dur": 1000} for start in run_starts]
    for name, op, ts, dur in kernels:
        events.append({"cat": "Node", "name": f"{name}_kernel_time", "ph": "X", "ts": ts, "dur": dur,
                       "args": {"op_name": op, "input_type_shape": [{"float": [1, 2, 4, 4]}, {"float": [3, 2, 1, 1]}],
                                "output_type_shape": [{"float": [1, 3, 4, 4]}], "provider": "CPUExecutionProvider"}})
    return events


def test_parse_ort_events_mean_p95_per_run_and_costs_from_the_trace():
    durations = [100, 200, 300, 1000]  # microseconds of "conv" in runs 1..4 (run 0 is the warm-up)
    kernels = [("conv", "Conv", 10, 5000)]
    kernels += [("conv", "Conv", 1000 * (i + 1) + 10, d) for i, d in enumerate(durations)]
    kernels += [("t", "Transpose", 1000 * (i + 1) + 500, 50) for i in range(4)]
    kernels += [("t", "Transpose", 1000 * (i + 1) + 600, 50) for i in range(4)]  # twice per run
    profile = parse_ort_events(ort_events([0, 1000, 2000, 3000, 4000], kernels), "trace.json", skip_runs=1)
    conv, transpose = profile.op("conv"), profile.op("t")
    ms = np.array(durations) / 1000
    assert conv.mean_ms == pytest.approx(ms.mean()) and conv.p95_ms == pytest.approx(np.percentile(ms, 95))
    assert transpose.calls == 2 and transpose.mean_ms == pytest.approx(0.1)
    assert conv.flops == 2 * (3 * 16) * 2  # 1x1 conv from the trace's shapes: 48 outputs x 2 input channels
    assert transpose.flops == 0 and transpose.bytes == 2 * 4 * (32 + 6 + 48)  # two calls
    assert profile.model_ms == 1.0 and conv.share == pytest.approx(ms.mean() / 1.0)


def test_parse_ort_events_errors_name_the_file():
    with pytest.raises(SegScopeError, match=r"trace\.json: no 'model_run' Session event"):
        parse_ort_events([{"cat": "Node", "name": "a_kernel_time", "ts": 0, "dur": 1}], "trace.json")
    with pytest.raises(SegScopeError, match=r"trace\.json: only warm-up runs"):
        parse_ort_events(ort_events([0], []), "trace.json", skip_runs=1)
    events = ort_events([0], [("conv", "Conv", 10, 5)])
    events[1]["dur"] = "fast"
    with pytest.raises(SegScopeError, match=r"trace\.json: event 1 \('conv_kernel_time'\) field 'dur' is 'fast'"):
        parse_ort_events(events, "trace.json")


def test_costs_of_other_operators():
    f = Tensor("float", (2, 5, 7))
    assert op_flops("MatMul", [f, Tensor("float", (2, 7, 3))], [Tensor("float", (2, 5, 3))]) == 2 * 30 * 7
    # ConvTranspose: every input element (1x4x3x3) feeds Cout/group x k x k = 2 x 2 x 2 outputs
    assert op_flops("ConvTranspose", [Tensor("float", (1, 4, 3, 3)), Tensor("float", (4, 2, 2, 2))],
                    [Tensor("float", (1, 2, 6, 6))]) == 2 * 36 * 8
    assert op_flops("MaxPool", [Tensor("float", (1, 1, 4, 4))], [Tensor("float", (1, 1, 2, 2))], (2, 2)) == 16
    assert op_flops("Conv", [f, Tensor("float", (3, None, 1))], [Tensor("float", (1, 3, 5))]) == 0  # unknown
    assert Tensor("int64", (2, 3)).nbytes == 48 and Tensor("float16", (4,)).nbytes == 8


@pytest.mark.parametrize("flops, nbytes, ms, bound, efficiency", [
    (1e9, 1e7, 12.5, COMPUTE, 0.8),   # 80 GFLOP/s at 100 FLOP/B: under the 100 GFLOP/s compute roof
    (1e8, 1e8, 20.0, MEMORY, 0.5),    # 5 GFLOP/s at 1 FLOP/B: the memory roof there is 10 GFLOP/s
    (1e9, 1e7, 1000.0, FAR_BELOW, 0.01),  # 1 GFLOP/s where 100 are possible
    (0, 1e8, 20.0, MEMORY, 0.5),      # data movement: 5 GB/s of 10
    (0, 1e8, 2000.0, FAR_BELOW, 0.005),
])
def test_roofline_classification_on_synthetic_timings(flops, nbytes, ms, bound, efficiency):
    point = classify(OpStat("op", "X", ms, ms, 0.0, flops=int(flops), bytes=int(nbytes)), PEAK)
    assert point.bound == bound
    assert point.efficiency == pytest.approx(efficiency)
    assert point.distance == pytest.approx(1 / efficiency)


def test_roofline_needs_time_and_bytes():
    assert classify(OpStat("op", "X", 0.0, 0.0, 0.0, flops=10, bytes=10), PEAK) is None
    assert classify(OpStat("op", "X", 1.0, 1.0, 0.0, flops=10, bytes=0), PEAK) is None


def test_measured_peaks_and_cpu_name(tmp_path):
    peak = measure_peak(matmul_size=128, copy_mib=4, repeats=2)
    assert math.isfinite(peak.peak_gflops) and peak.peak_gflops > 0
    assert math.isfinite(peak.bandwidth_gbs) and peak.bandwidth_gbs > 0
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nmodel name\t: Test Xeon 9000\n\nprocessor\t: 1\nmodel name\t: Test Xeon 9000\n")
    assert cpu_name(x86) == "Test Xeon 9000 (2 logical CPUs)"
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nCPU implementer\t: 0x48\nCPU part\t: 0xd01\n")
    assert "part 0xd01" in cpu_name(arm) and "0x48" in cpu_name(arm)
    assert cpu_name(tmp_path / "absent")  # falls back to the platform module


def synthetic_profile() -> Profile:
    # Against PEAK: conv_a 50 GFLOP/s of 100 (10 ms to gain), bn_a 0.5 of 1 GFLOP/s at 0.1 FLOP/B (1 ms),
    # relu_a and conv_b on their roofs, to_nhwc 2 GB/s of 10 (0.4 ms).
    ops = [OpStat("conv_a", "Conv", 20.0, 21.0, 0.8, flops=int(1e9), bytes=int(1e7)),
           OpStat("bn_a", "BatchNormalization", 2.0, 2.0, 0.08, flops=int(1e6), bytes=int(1e7)),
           OpStat("relu_a", "Relu", 1.0, 1.0, 0.04, flops=int(1e6), bytes=int(1e7)),
           OpStat("conv_b", "Conv", 1.0, 1.0, 0.04, flops=int(1e8), bytes=int(1e6)),
           OpStat("to_nhwc", "Transpose", 0.5, 0.5, 0.02, bytes=int(1e6))]
    order = ["conv_a", "bn_a", "relu_a", "conv_b", "to_nhwc"]
    timeline = tuple(TimelineEvent(n, next(o.type for o in ops if o.name == n), float(i), 0.5, 0)
                     for i, n in enumerate(order))
    return Profile("m.onnx", "onnxruntime", "cpu", 25.0, 1, tuple(ops), timeline, PEAK)


def test_where_to_look_names_the_operators():
    profile = synthetic_profile()
    assert unfused_chains(profile) == [["conv_a", "bn_a", "relu_a"]]  # conv_b stands alone
    lines = where_to_look(profile)
    assert lines[0].startswith("most time: conv_a (Conv, 20 ms, 80%); bn_a")
    assert lines[1] == ("furthest from the roof (time the roof would save): conv_a (Conv, 50% of its roof, "
                        "compute-bound, up to 10 ms); bn_a (BatchNormalization, 50% of its roof, memory-bound, "
                        "up to 1 ms); to_nhwc (Transpose, 20% of its roof, memory-bound, up to 0.4 ms)")
    assert any(line.startswith("layout conversions: 1 nodes") and "to_nhwc (Transpose)" in line for line in lines)
    assert any("unfused Conv+BN/ReLU chains: 1" in line and "conv_a -> bn_a -> relu_a" in line for line in lines)
    assert not any("above the measured roof" in line for line in lines)
    fast = Profile("m.onnx", "onnxruntime", "cpu", 25.0, 1, (OpStat("quick", "Conv", 5.0, 5.0, 0.2, flops=int(1e9),
                                                                    bytes=int(1e6)),), (), PEAK)  # 200 of 100 GFLOP/s
    above = [line for line in where_to_look(fast) if "above the measured roof" in line]
    assert len(above) == 1 and above[0].startswith("1 operator(s) ran above the measured roof (quick, 200% of its "
                                                   "compute roof): the compute roof is NumPy's BLAS")
    assert "memory roof" not in above[0]
    cached = Profile("m.onnx", "onnxruntime", "cpu", 25.0, 1, (OpStat("copy", "Cast", 1.0, 1.0, 0.2, flops=0,
                                                                      bytes=int(1e8)),), (), PEAK)
    above = [line for line in where_to_look(cached) if "above the measured roof" in line]
    assert len(above) == 1 and "(copy, " in above[0] and "of its memory roof" in above[0]
    assert "stay in the CPU's caches" in above[0] and "compute roof" not in above[0]


def test_profile_pipeline_and_cli_json(tiny_model_project, small_dataset, capsys):
    peak = MachinePeak("test CPU", 100.0, 10.0)
    profile = profile_pipeline(tiny_model_project.pipeline, small_dataset, images=2, peak=peak)
    conv = next(o for o in profile.ops if o.type == "Conv")
    assert conv.flops == 2 * 960 * 960 * 2 * 3  # 1x1 conv, 3 -> 2 channels, on the 960x960 model input
    assert profile.runs == 2

    import io
    out = io.StringIO()
    assert main(["profile", "--pipeline", str(tiny_model_project.pipeline), "--dataset", str(small_dataset),
                 "--images", "1", "--json"], out) == 0
    doc = json.loads(out.getvalue())
    assert list(doc) == ["model", "total_flops", "peak_gflops", "model_ms", "ops"]
    assert doc["model"] == str(tiny_model_project.onnx)
    assert doc["total_flops"] == sum(o["flops"] for o in doc["ops"]) >= conv.flops
    assert doc["peak_gflops"] > 0 and doc["model_ms"] > 0
    assert all(list(o) == ["name", "type", "flops", "bytes", "mean_ms", "p95_ms", "share"] for o in doc["ops"])

    out = io.StringIO()
    assert main(["profile", "--pipeline", str(tiny_model_project.pipeline), "--dataset", str(small_dataset),
                 "--images", "1"], out) == 0
    text = out.getvalue()
    assert "roofs (measured here)" in text and "where to look:" in text
    assert all(o["name"] in text for o in doc["ops"])  # full names, never truncated


def test_profile_cli_errors(tiny_model_project, tmp_path, capsys):
    assert main(["profile"]) == 2
    assert "give --dataset DIR" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["profile", "--pipeline", str(tiny_model_project.pipeline), "--dataset", str(empty)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(empty) in err
    assert main(["profile", "--dataset", str(empty), "--images", "0"]) == 2
    assert "--images must be at least 1" in capsys.readouterr().err
