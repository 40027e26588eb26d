"""The commands added since the first reliability round, given hostile arguments and contents: each case is one
line on stderr with exit 2 (or a named FAIL), never an internal error; non-finite numbers are never a PASS.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from segscope.core.cli.output import EXIT_FAIL

from helpers import run_cli


def assert_one_line(capsys, code: int, *parts: str) -> str:
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("segscope: error: "), (code, err)
    assert all(part in err for part in parts), err
    return err


@pytest.fixture
def model(tmp_path: Path, byo) -> Path:
    return byo.Net().save(tmp_path / "net.onnx")


@pytest.mark.parametrize(("flags", "expected"), [
    (["--std", "0"], "--std: '0': must be > 0"),
    (["--scale", "0"], "--scale: '0': must be > 0"),
    (["--scale", "-1/255"], "must be > 0"),
    (["--scale", "nan"], "give a finite number"),
    (["--mean", "1,2"], "--mean: 2 numbers for a 3-channel input"),
    (["--std", "1,1,1,1"], "--std: 4 numbers for a 3-channel input"),
    (["--threshold", "inf"], "give a finite number"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_card_arguments(tmp_path, model, capsys, flags, expected):
    code, out = run_cli("card", model, "--out", tmp_path / "p", *flags)
    assert_one_line(capsys, code, expected)
    assert out == "" and not (tmp_path / "p" / "models").exists()


@pytest.mark.parametrize(("flags", "expected"), [
    (["--devices", "²"], "--devices: expected comma-separated device ids"),
    (["--devices", "٣"], "--devices: expected comma-separated device ids"),
    (["--cluster", "tcp://localhost:notaport"], "a port in 1..65535"),
    (["--cluster", "tcp://localhost:0"], "a port in 1..65535"),
    (["--cluster", "tcp://:8786"], "expected a scheduler address"),
    (["--precision", "int8", "--precision-check", "²"], "expected a whole number"),
    (["--tile", "--precision", "int8", "--precision-cache", "c"], "--precision int8: not available with --tile"),
    (["--precision", "bf16", "--precision-cache", "c"], "--precision-cache: only applies with --precision int8"),
    (["--tile", "1", "--output-scale", "1", "--max-tiles", "100"],
     "64x48 slide pixels in 1x1 tiles are 3,072 tiles, over the limit of 100"),
    (["--tile", "1"], "--tile: a 1 px tile is below the model's edge margin"),
    (["--tile", "8", "--output-scale", "1", "--max-canvas", "0.00001"], "or less, or raise --max-canvas"),
    (["--tile", "30000"], "over the limit of 400,000,000: give a smaller --tile, or raise --max-pixels"),
    (["--max-tiles", "5"], "--max-tiles: only applies with --tile"),
    (["--tile", "--max-canvas", "nan"], "expected a positive number of GiB"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_eval_arguments(tiny_model_project, small_dataset, capsys, flags, expected):
    code, out = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, *flags)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and expected in err, err
    assert out == ""


@pytest.mark.skipif(not __import__("importlib").util.find_spec("distributed"), reason="needs Dask distributed")
def test_a_tls_cluster_without_certificates_is_one_line(tiny_model_project, small_dataset, capsys):
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline, "--cluster",
                      "tls://127.0.0.1:8786")
    assert_one_line(capsys, code, "names no TLS certificates")


TRACE_EVENT = {"ph": "X", "name": "conv", "ts": 0, "dur": 10, "pid": 1, "tid": 1, "args": {}}
ORT_EVENTS = [{"cat": "Session", "name": "model_run", "ts": 0, "dur": 100},
              {"cat": "Node", "name": "a_kernel_time", "ts": 10, "dur": 5, "args": {"op_name": "Conv"}},
              {"cat": "Node", "name": "b_kernel_time", "ts": 10, "dur": 5, "args": {"op_name": "Relu"}}]


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("trace.json", {"traceEvents": [{**TRACE_EVENT, "dur": "inf"}]}, "'inf', not a number of microseconds"),
    ("trace.json", {"traceEvents": [{**TRACE_EVENT, "ts": "nan"}]}, "'nan', not a number of microseconds"),
    ("trace.json", {"traceEvents": [{**TRACE_EVENT, "dur": True}]}, "not a number of microseconds"),
    ("trace.json", {"traceEvents": [{"ph": "M", "name": "process_name", "args": None, "pid": 1}, TRACE_EVENT]},
     None),
    ("trace.json", {"traceEvents": [{**TRACE_EVENT, "name": "n" * 200_000}]}, None),
    ("summary.json", {"NPU_compute_time": {"mean": 1.5, "count": "ten"}}, "count is 'ten'"),
    ("summary.json", {"NPU_compute_time": {"mean": True}}, "NPU_compute_time.mean missing or not a number"),
    ("ort.json", ORT_EVENTS, None),  # two kernels at the same time: ordered, not compared as dicts
    ("op_summary_0_1.csv", "Op Name,OP Type,Task Duration(us)\nconv,Conv2D,inf\n", "holds 'inf', not a number"),
    ("op_statistic_0_1.csv", "OP Type,Count,Total Time(us)\nConv,1e400,5\n", "holds '1e400', not a number"),
])
def test_profile_contents(tmp_path, capsys, name, content, expected):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    code, out = run_cli("profile", "--import", path)
    if expected is None:
        assert code == 0 and capsys.readouterr().err == ""
        return
    assert_one_line(capsys, code, str(path), expected)


DRIFT_HEADER = "Index,OpType,NPUDump,GroundTruth,CosineSimilarity,RelativeEuclideanDistance,KullbackLeiblerDivergence"


@pytest.mark.parametrize(("rows", "flags", "verdict"), [
    (["0,Conv,c,C,0.5,0.9,0.9"], ["--cosine", "nan"], "argument --cosine: expected a cosine similarity in [-1, 1]"),
    (["0,Conv,c,C,0.5,0.9,0.9"], ["--cosine", "2"], "argument --cosine: expected a cosine similarity in [-1, 1], "
                                                   "got '2'"),
    (["0,Conv,c,C,0.5,0.9,0.9"], ["--kl", "inf"], "argument --kl: expected a finite number >= 0"),
    (["0,Conv,c,C,0.5,0.9,0.9"], ["--kl", "-1"], "argument --kl: expected a finite number >= 0, got '-1'"),
    (["0,Conv,c,C,0.5,0.9,0.9"], ["--rel-euclidean", "-0.1"], "argument --rel-euclidean: expected a finite number "
                                                             ">= 0, got '-0.1'"),
    (["0,Conv,c,C,inf,0.01,0.001"], [], "first drift (line 2): Conv c vs C: cosine is inf"),
    (["0,Conv,c,C,0.999,0.01,-inf"], [], "KL is -inf"),
    (["0,Conv,c,C,NaN,NaN,NaN", "1,Relu,r,R,0.999,0.01,0.001"], [], "PASS: none of 1 compared tensors is past"
                                                                      " the thresholds; 1 rows had nothing to judge"),
    (["0,Conv,c,C,NaN,,NaN"], [], "none of its 1 rows has a CosineSimilarity"),
])
def test_drift_never_passes_what_it_cannot_judge(tmp_path, capsys, rows, flags, verdict):
    path = tmp_path / "result_1.csv"
    path.write_text("\n".join([DRIFT_HEADER, *rows]) + "\n")
    code, out = run_cli("drift", path, *flags)
    err = capsys.readouterr().err
    assert verdict in (out + err)
    expected_code = 2 if not out else EXIT_FAIL if out.startswith("first drift") else 0
    assert code == expected_code and (out == "" or err == "")


@pytest.mark.parametrize("as_json", [False, True])
def test_drift_exits_3_on_drift_and_0_without(tmp_path, capsys, as_json):
    """A drift found is a failed check, exit 3 as compare's FAIL; the same file under looser thresholds passes."""
    path = tmp_path / "result_1.csv"
    # cosine 0.95 < the default 0.99 on the second row: a drift at line 3 (the header is line 1)
    path.write_text("\n".join([DRIFT_HEADER, "0,Conv,c,C,0.9999,0.001,0.0001", "1,Relu,r,R,0.95,0.01,0.001"]) + "\n")
    json_flag = ["--json"] if as_json else []
    code, out = run_cli("drift", path, *json_flag)
    assert code == EXIT_FAIL == 3
    if as_json:
        assert json.loads(out)["first_failure"]["line"] == 3
    else:
        assert out.startswith("first drift (line 3): Relu r vs R: ")
    code, out = run_cli("drift", path, "--cosine", "0.9", *json_flag)
    assert code == 0
    assert (json.loads(out)["first_failure"] is None) if as_json else out.startswith("PASS: none of 2 compared")
    assert capsys.readouterr().err == ""


def test_drift_help_names_its_exit_codes(capsys):
    code, _ = run_cli("drift", "--help")
    assert code == 0 and "3 drift found" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(("candidate", "verdict"), [
    (np.full((4, 4), np.nan, np.float32), "FAIL: the candidate holds 16 NaN and 0 infinite values"),
    (np.where(np.arange(16).reshape(4, 4) < 8, np.nan, 0.5).astype(np.float32), "the candidate holds 8 NaN"),
    (np.where(np.arange(16).reshape(4, 4) == 0, np.inf, 0.5).astype(np.float32), "holds 0 NaN and 1 infinite"),
    (np.full((4, 4), 1e308, np.float64), "FAIL: "),  # finite inputs whose metrics overflow: never a PASS
])
def test_compare_fails_non_finite_tensors_without_warnings(tmp_path, capsys, candidate, verdict):
    np.save(tmp_path / "ref.npy", np.full((4, 4), 0.5, candidate.dtype))
    np.save(tmp_path / "cand.npy", candidate)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would fail here
        code, out = run_cli("compare", tmp_path / "ref.npy", tmp_path / "cand.npy")
        json_code, document = run_cli("compare", tmp_path / "ref.npy", tmp_path / "cand.npy", "--json")
    assert code == json_code == 3 and capsys.readouterr().err == ""  # FAIL's exit code
    assert out.splitlines()[-1].startswith("FAIL: ") and verdict in out.splitlines()[-1] and "PASS" not in out
    assert json.loads(document)["verdict"] == out.splitlines()[-1]


def test_a_closed_stdout_stops_the_export_in_one_line(tiny_model_project, small_dataset, tmp_path):
    """`eval --export X | head -1`: an export is all or nothing, so the folder is left as it was."""
    for copy in range(20):  # lines still to come once the reader has left
        shutil.copytree(small_dataset / "1", small_dataset / f"copy{copy}")
    out_dir = tmp_path / "out"
    command = [sys.executable, "-m", "segscope.core.cli", "eval", "--dataset", str(small_dataset), "--pipeline",
               str(tiny_model_project.pipeline), "--export", str(out_dir), "--export-kinds", "mask"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None and child.stdout.readline().startswith("image: ")
        child.stdout.close()  # what `head -1` does once it has its line
        err = child.stderr.read() if child.stderr else ""
        code = child.wait(timeout=120)
    assert code == 2 and err.count("\n") == 1 and "standard output was closed by its reader" in err, err
    assert "export folder is left as it was" in err
    assert sorted(os.listdir(tmp_path)) == ["dataset", "project"]  # no export folder, nothing beside it
