"""Ascend profiles and msit accuracy comparisons, read from files written here to the documented formats.

No real Ascend output exists on this machine: every fixture below follows the column names of the CANN
profiling docs (op_summary, op_statistic), ais_bench's summary writer and msit/ait debug compare's CSV.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest

from segscope.core.cli import main
from segscope.core.errors import SegScopeError
from segscope.core.profiling.ascend import import_profile, load_ais_bench_summary, load_op_statistic, load_op_summary
from segscope.core.profiling.drift import Thresholds, load_drift_csv
from segscope.core.profiling.traces import load_chrome_trace

OP_SUMMARY_HEADER = ("Device_id,Model Name,Infer ID,Op Name,OP Type,Task Type,Task Start Time(us),Task Duration(us),"
                     "Task Wait Time(us),Block Dim,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
                     "Output Data Types,Output Formats,aicore_time(us),total_cycles")


def op_summary_rows(infer: int, t0: float) -> list[str]:
    """Three tasks per inference: conv (AI Core), relu (AI Core), a TransData (AI Vector Core)."""
    conv, relu, trans = 100.0 + 10 * infer, 20.0, 5.0
    return [
        f"0,unet,{infer},conv1,Conv2D,AI_CORE,{t0},{conv},0,2,\"1,3,960,960;16,3,3,3\",FLOAT16,NCHW,"
        f"\"1,16,480,480\",FLOAT16,NC1HWC0,{conv * 0.8},1000",
        f"0,unet,{infer},relu1,Relu,AI_CORE,{t0 + conv + 1},{relu},1,2,\"1,16,480,480\",FLOAT16,NC1HWC0,"
        f"\"1,16,480,480\",FLOAT16,NC1HWC0,{relu * 0.5},200",
        f"0,unet,{infer},trans_out,TransData,AI_VECTOR_CORE,{t0 + conv + relu + 2},{trans},1,1,\"1,1,960,960,16\","
        f"FLOAT16,NC1HWC0,\"1,2,960,960\",FLOAT16,NCHW,N/A,N/A",
    ]


def test_op_summary_per_operator_timeline_and_task_time(tmp_path):
    path = tmp_path / "op_summary_0_1.csv"
    path.write_text("\n".join([OP_SUMMARY_HEADER, *op_summary_rows(0, 1000.0), *op_summary_rows(1, 5000.0)]) + "\n")
    profile = load_op_summary(path)
    assert profile.kind == "msprof op_summary" and profile.runs == 2
    conv = profile.op("conv1")
    assert conv.type == "Conv2D" and conv.details["Task Type"] == "AI_CORE" and conv.details["Block Dim"] == "2"
    samples = np.array([100.0, 110.0]) / 1000
    assert conv.mean_ms == pytest.approx(samples.mean()) and conv.p95_ms == pytest.approx(np.percentile(samples, 95))
    assert profile.op("trans_out").mean_ms == pytest.approx(0.005)
    # per inference: first start to last end (conv + 1 + relu + 1 + trans), and the sums msprof's Advisor shows
    spans = [100 + 1 + 20 + 1 + 5, 110 + 1 + 20 + 1 + 5]
    assert profile.model_ms == pytest.approx(np.mean(spans) / 1000)
    assert profile.summary["task_time_ms"] == pytest.approx((100 + 110 + 2 * 25) / 2 / 1000)
    assert profile.summary["aicore_time_ms"] == pytest.approx((80 + 88 + 2 * 10) / 2 / 1000)
    assert [o.name for o in profile.ops] == ["conv1", "relu1", "trans_out"]
    assert sorted({e.lane for e in profile.timeline}) == [0, 1]
    relu = next(e for e in profile.timeline if e.name == "relu1" and e.lane == 1)
    assert relu.start_ms == pytest.approx(0.111) and relu.dur_ms == pytest.approx(0.02)


def test_op_summary_older_headers_without_units(tmp_path):
    path = tmp_path / "op_summary_0_1.csv"
    path.write_text("Op Name,OP Type,Task Type,Task Start Time,Task Duration,Block Dim,aicore_time\n"
                    "a,Conv2D,AI_CORE,0,300,8,250\nb,Add,AI_CORE,400,100,8,90\n")
    profile = load_op_summary(path)
    assert profile.runs == 1 and profile.op("a").mean_ms == pytest.approx(0.3)
    assert profile.model_ms == pytest.approx(0.5) and profile.op("b").share == pytest.approx(0.2)
    assert profile.summary["aicore_time_ms"] == pytest.approx(0.34)
    path.write_text("Op Name,Task Duration(us)\na,300\n")
    assert "aicore_time_ms" not in load_op_summary(path).summary  # not collected: not shown as 0


def test_op_statistic(tmp_path):
    path = tmp_path / "op_statistic_0_1.csv"
    path.write_text("Device_id,Model Name,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),"
                    "Max Time(us),Ratio(%)\n"
                    "0,unet,Conv2D,AI_CORE,26,2600,80,100,130,65.0\n0,unet,TransData,AI_VECTOR_CORE,4,1400,300,350,"
                    "400,35.0\n")
    profile = load_op_statistic(path)
    conv = profile.op("Conv2D")
    assert conv.calls == 26 and conv.mean_ms == pytest.approx(2.6) and conv.share == pytest.approx(0.65)
    assert math.isnan(conv.p95_ms)  # op_statistic has no percentile
    assert profile.model_ms == pytest.approx(4.0) and conv.details["Core Type"] == "AI_CORE"


def chrome_trace() -> dict:
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "CANN"}},
            {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "Ascend Hardware"}}]
    host = [{"ph": "X", "name": "aclmdlExecute", "pid": 1, "tid": 1, "ts": "0", "dur": 1000}]
    device = []
    for run, t0 in enumerate((100.0, 600.0)):
        device += [{"ph": "X", "name": "conv1", "pid": 2, "tid": 7, "ts": f"{t0:.3f}", "dur": 200 + 100 * run,
                    "args": {"Task Type": "AI_CORE"}},
                   {"ph": "X", "name": "trans_out", "pid": 2, "tid": 7, "ts": t0 + 350, "dur": 50,
                    "args": {"Task Type": "AI_VECTOR_CORE"}}]
    return {"traceEvents": meta + host + device}


def test_chrome_trace_keeps_the_chip_events(tmp_path):
    path = tmp_path / "msprof_20240101.json"
    path.write_text(json.dumps(chrome_trace()))
    profile = load_chrome_trace(path)
    assert {o.name for o in profile.ops} == {"conv1", "trans_out"}  # the host's aclmdlExecute is not an operator
    assert profile.runs == 2 and profile.device == "Ascend Hardware"
    assert profile.op("conv1").mean_ms == pytest.approx(0.25) and profile.op("conv1").type == "AI_CORE"
    assert profile.model_ms == pytest.approx((600 + 400 - 100) / 1000 / 2)
    assert min(e.start_ms for e in profile.timeline) == 0.0 and len(profile.timeline) == 4


@pytest.mark.parametrize("percentile_key", ["percentile(99%)", "P99"])
def test_ais_bench_summary(tmp_path, percentile_key):
    def stats(mean: float) -> dict:
        return {"min": mean * 0.9, "max": mean * 1.5, "mean": mean, "median": mean, percentile_key: mean * 1.4}

    path = tmp_path / "2024_01_01-10_00_00_summary.json"
    path.write_text(json.dumps({"NPU_compute_time": {**stats(16.08), "count": 100}, "H2D_latency": stats(0.97),
                                "D2H_latency": stats(0.06), "throughput": 62.18, "pid": 1}))
    profile = load_ais_bench_summary(path)
    assert profile.model_ms == 16.08 and profile.runs == 100 and profile.ops == ()
    assert profile.summary["NPU_compute_time.p99_ms"] == pytest.approx(16.08 * 1.4)
    assert profile.summary["H2D_latency.mean_ms"] == 0.97 and profile.summary["throughput"] == 62.18


def test_import_profile_recognises_each_format(tmp_path):
    (tmp_path / "a.csv").write_text(OP_SUMMARY_HEADER + "\n" + "\n".join(op_summary_rows(0, 0.0)) + "\n")
    (tmp_path / "b.csv").write_text("OP Type,Core Type,Count,Total Time(us),Ratio(%)\nRelu,AI_CORE,1,5,100\n")
    (tmp_path / "c.json").write_text(json.dumps(chrome_trace()["traceEvents"]))  # a bare list works too
    (tmp_path / "d.json").write_text(json.dumps({"NPU_compute_time": {"mean": 1.0}}))
    (tmp_path / "e.json").write_text(json.dumps([  # an ONNX Runtime profile written earlier
        {"cat": "Session", "name": "model_run", "ph": "X", "ts": 0, "dur": 100},
        {"cat": "Node", "name": "n_kernel_time", "ph": "X", "ts": 5, "dur": 50, "args": {"op_name": "Relu"}}]))
    kinds = [import_profile(tmp_path / name).kind for name in ("a.csv", "b.csv", "c.json", "d.json", "e.json")]
    assert kinds == ["msprof op_summary", "msprof op_statistic", "chrome trace", "ais_bench", "onnxruntime"]
    assert import_profile(tmp_path / "e.json").op("n").mean_ms == 0.05


@pytest.mark.parametrize("name, text, parts", [
    ("x.csv", "", ["x.csv", "not an msprof"]),
    ("x.csv", "Index,OpType,NPUDump,GroundTruth,CosineSimilarity\n", ["x.csv", "segscope drift"]),
    ("x.csv", "Op Name,Task Duration(us)\na,fast\n", ["x.csv:2", "'Task Duration(us)'", "'fast'", "msprof"]),
    ("x.csv", "Op Name,Task Duration(us)\n", ["x.csv", "no tasks"]),
    ("x.csv", "OP Type,Count,Total Time(us)\n", ["x.csv", "no operator types"]),
    ("x.csv", "OP Type,Count,Total Time\nRelu,many,5\n", ["x.csv:2", "'Count'", "'many'"]),
    ("x.json", '{"traceEvents": [', ["x.json:1:", "invalid JSON", "profile again"]),
    ("x.json", '{"NPU_compute_time": {"min": 1}}', ["x.json", "NPU_compute_time.mean", "ais_bench"]),
    ("x.json", '[{"ph": "X", "name": "a", "ts": "soon", "dur": 1}]', ["x.json", "traceEvents[0].ts", "'soon'"]),
    ("x.json", '[{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]',
     ["x.json", "no complete", "msprof --export"]),
    ("x.json", '"a string"', ["x.json", "not a profile SegScope reads"]),
])
def test_import_errors_name_the_file_and_field(tmp_path, name, text, parts):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SegScopeError) as raised:
        import_profile(path)
    message = str(raised.value)
    assert "\n" not in message and "log" not in message
    for part in parts:
        assert part.replace("x.", f"{tmp_path}/x.", 1) in message if part.startswith("x.") else part in message


def test_op_summary_without_duration_column(tmp_path):
    path = tmp_path / "op_summary_0_1.csv"
    path.write_text("Op Name,OP Type\na,Conv2D\n")
    with pytest.raises(SegScopeError, match=r"op_summary_0_1\.csv:1: no column 'Task Duration\(us\)'"):
        load_op_summary(path)


MSIT_HEADER = ("Index,OpType,NPUDump,DataType,Address,GroundTruth,DataType,TensorIndex,Shape,OverFlow,"
               "CosineSimilarity,MaxAbsoluteError,AccumulatedRelativeError,RelativeEuclideanDistance,"
               "KullbackLeiblerDivergence,StandardDeviation,MeanAbsoluteError,RootMeanSquareError,"
               "MaxRelativeError,MeanRelativeError,CompareFailReason")


def msit_row(i: int, op: str, cosine: str, red: str, kl: str, reason: str = "") -> str:
    return (f"{i},{op},{op.lower()}_{i},float16,0x1,{op.lower()}_{i},float32,{op.lower()}_{i}:output:0,"
            f"\"[1, 16, 480, 480]\",NO,{cosine},0.5,0.01,{red},{kl},(0.1;0.1),0.01,0.02,0.3,0.004,{reason}")


def write_msit(tmp_path) -> object:
    path = tmp_path / "result_20240101.csv"
    path.write_text("\n".join([MSIT_HEADER,
                               msit_row(0, "Conv", "0.99999", "0.001", "0.00001"),
                               msit_row(1, "Relu", "NaN", "NaN", "NaN", "this tensor is scalar"),
                               msit_row(2, "Conv", "0.995", "0.06", "0.0001"),  # first past a threshold
                               msit_row(3, "Add", "0.9", "0.3", "0.02"),
                               msit_row(4, "Softmax", "0.98", "0.01", "0.001")]) + "\n")
    return path


def test_drift_csv_ranked_with_the_first_failure(tmp_path):
    report = load_drift_csv(write_msit(tmp_path))
    first = report.first_failure
    assert first.line == 4 and first.npu == "conv_2" and first.failures == ("relative Euclidean 0.06 > 0.05",)
    assert [r.index for r in report.ranked()] == ["3", "4", "2", "0", "1"]  # worst cosine first, NaN last
    nan_row = report.rows[1]
    assert math.isnan(nan_row.metrics["cosine"]) and nan_row.failures == () and nan_row.reason
    assert report.rows[3].failures == ("cosine 0.9 < 0.99", "relative Euclidean 0.3 > 0.05", "KL 0.02 > 0.005")
    assert report.rows[0].metrics["rmse"] == 0.02 and report.rows[0].shape == "[1, 16, 480, 480]"
    looser = load_drift_csv(write_msit(tmp_path), Thresholds(cosine=0.95, relative_euclidean=0.1, kl=0.01))
    assert looser.first_failure.index == "3"


@pytest.mark.parametrize("text, parts", [
    ("", ["empty file"]),
    ("Index,OpType,NPUDump\n", [":1:", "no column GroundTruth, CosineSimilarity"]),
    (MSIT_HEADER + "\n", ["no compared tensors", "fusion"]),
    (MSIT_HEADER + "\n" + msit_row(0, "Conv", "high", "0", "0"), [":2:", "CosineSimilarity", "'high'"]),
    (MSIT_HEADER + "\n0,Conv,a\n", [":2:", "3 cells", "truncated"]),
])
def test_drift_errors(tmp_path, text, parts):
    path = tmp_path / "result.csv"
    path.write_text(text)
    with pytest.raises(SegScopeError) as raised:
        load_drift_csv(path)
    message = str(raised.value)
    assert message.startswith(str(path)) and "\n" not in message and "log" not in message
    for part in parts:
        assert part in message


def test_drift_and_profile_import_commands(tmp_path, capsys):
    out = io.StringIO()
    assert main(["drift", str(write_msit(tmp_path)), "--top", "3"], out) == 3  # a drift found: a failed check
    lines = out.getvalue().splitlines()
    assert lines[0] == "first drift (line 4): Conv conv_2 vs conv_2: relative Euclidean 0.06 > 0.05"
    assert len(lines) == 5 and "FAIL" in lines[2] and "add_3" in lines[2]
    out = io.StringIO()
    assert main(["drift", str(write_msit(tmp_path)), "--rel-euclidean", "0.5", "--kl", "1", "--cosine", "0.5",
                 "--json"], out) == 0
    doc = json.loads(out.getvalue())
    assert doc["first_failure"] is None and doc["thresholds"]["cosine"] == 0.5 and len(doc["ranked"]) == 5
    assert doc["ranked"][-1]["cosine"] is None  # NaN written as null: strict JSON

    summary = tmp_path / "op_summary_0_1.csv"
    summary.write_text(OP_SUMMARY_HEADER + "\n" + "\n".join(op_summary_rows(0, 0.0)) + "\n")
    out = io.StringIO()
    assert main(["profile", "--import", str(summary)], out) == 0
    text = out.getvalue()
    assert "msprof op_summary" in text and "trans_out" in text and "layout conversions: 1 nodes" in text
    assert "unfused Conv+BN/ReLU chains: 1" in text and "conv1 -> relu1" in text
    out = io.StringIO()
    assert main(["profile", "--import", str(summary), "--json"], out) == 0
    doc = json.loads(out.getvalue())
    assert doc["peak_gflops"] is None and [o["name"] for o in doc["ops"]] == ["conv1", "relu1", "trans_out"]


def test_compare_thresholds_and_verdict(tmp_path):
    np.save(tmp_path / "a.npy", np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    np.save(tmp_path / "b.npy", np.array([1.0, 2.0, 3.0, 5.0], np.float32))
    out = io.StringIO()
    assert main(["compare", str(tmp_path / "a.npy"), str(tmp_path / "a.npy")], out) == 0
    assert out.getvalue().splitlines()[-1].startswith("PASS (cosine >= 0.99, relative Euclidean <= 0.05")
    # b differs by 1 where |a| = sqrt(30): relative Euclidean 0.1826 > 0.05; cosine 34/sqrt(30*39) = 0.99400
    # passes 0.99; KL of a/10 against b/11 (both non-negative, so unshifted) is 0.00605 > 0.005
    p, q = np.array([1, 2, 3, 4]) / 10, np.array([1, 2, 3, 5]) / 11
    kl = float(np.sum(p * np.log(p / q)))
    out = io.StringIO()
    assert main(["compare", str(tmp_path / "a.npy"), str(tmp_path / "b.npy")], out) == 3  # FAIL's exit code
    expected = f"FAIL: relative Euclidean {1 / math.sqrt(30):.6g} > 0.05; KL {kl:.6g} > 0.005"
    assert out.getvalue().splitlines()[-1] == expected
    out = io.StringIO()
    assert main(["compare", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"), "--rel-euclidean", "0.2",
                 "--cosine", "0.995", "--kl", "1"], out) == 3
    assert out.getvalue().splitlines()[-1] == f"FAIL: cosine {34 / math.sqrt(30 * 39):.6g} < 0.995"
