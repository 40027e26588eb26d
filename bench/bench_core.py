"""Benchmark of `segscope eval` and the embedded stream: machine peak, per-image budget, overlap, runtimes.

Run: `python bench/bench_core.py [--images 4] [--rounds 5]` (a minute or two). Every figure comes from this
one run. Paired variants run interleaved (A B A B ...), so a neighbour's load hits both alike; each prints
its median and spread (min-max). Results are recorded in bench/RESULTS.md.

- Machine: CPU name, cores, load average, and the measured peaks of core.profiling.machine (best float32
  matmul through BLAS, best large copy) - measured, not a datasheet formula.
- Per-image budget of the sequential eval loop on demo slides at their default ROI (1800x1800 -> 960x960):
  read+decode, crop, resize, preprocess, infer, postprocess, mask read, metrics; the share outside the model.
- Eval throughput: core.evaluate.evaluate_dataset with overlap (read-ahead, scoring beside inference) vs
  without (the sequential loop), images/s, their ratio, and a check that both give the same metrics.
- Threads vs processes: two PNG decodes on two threads vs one after another (a ratio near 2 means OpenCV
  released the GIL, so a thread is enough and a process would only add copying of 11 MB tensors).
- GFLOP/s: 2 x the multiply-accumulates of every Conv/ConvTranspose/MatMul (ONNX shape inference) over the
  median ONNX Runtime run, against the measured peak.
- Runtimes on the same network: ONNX Runtime vs OpenCV DNN (interleaved), PyTorch eager when installed.
- Precision (`--precision`): the int8 QDQ model run by OpenVINO (what int8 uses) and by ONNX Runtime (its
  fallback), OpenVINO bf16 and OpenVINO fp32, each interleaved with ONNX Runtime fp32 on one tensor: median,
  spread, speed-up (paired rounds), effective GFLOP/s (the fp32 FLOP count) against the measured peak, and the
  foreground Dice of each against the masks beside fp32's; then the eval loop at int8 vs fp32.
- Transport: the original script's mxpi_dumpdata JSON with base64 float32 tensors vs the raw tensor bytes.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import onnx
from timing import interleaved
from timing import spread as _spread

from segscope.core.backends.base import InferenceRequest
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.backends.precision import OpenVinoSession, import_openvino, quantize_int8
from segscope.core.backends.precision import spread as calibration_spread
from segscope.core.backends.precision_check import PrecisionBackend
from segscope.core.dataset.dataset import Dataset
from segscope.core.dataset.demo import generate_demo_dataset
from segscope.core.evaluate import ImageEvaluation, evaluate_dataset, score
from segscope.core.profiling.machine import measure_peak
from segscope.core.stream.pipeline import DEFAULT_PIPELINE


def spread(values: list[float]) -> str:
    return _spread(values, 1000.0, "ms", 1)


def model_flops(path: Path) -> float:
    """2 x MACs of the convolutions and matmuls, from ONNX shape inference."""
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    graph = model.graph
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(graph.value_info) + list(graph.input) + list(graph.output)}
    shapes.update({init.name: list(init.dims) for init in graph.initializer})
    macs = 0
    for node in graph.node:
        if node.op_type == "Conv":
            out, weight = shapes[node.output[0]], shapes[node.input[1]]
            macs += int(np.prod(out)) * int(np.prod(weight[1:]))
        elif node.op_type == "ConvTranspose":
            inp, weight = shapes[node.input[0]], shapes[node.input[1]]
            macs += int(np.prod(inp)) * int(np.prod(weight[1:]))
        elif node.op_type in ("MatMul", "Gemm"):
            a, out = shapes[node.input[0]], shapes[node.output[0]]
            macs += int(np.prod(out)) * a[-1]
    return 2.0 * macs


def per_image_budget(backend: EmbeddedBackend, dataset: Dataset, rounds: int) -> dict[str, float]:
    """Median seconds per stage of the sequential loop: the backend's stages, then mask read and metrics."""
    per_stage: dict[str, list[float]] = {}
    for _ in range(rounds):
        for item in dataset.items:
            start = time.perf_counter()
            result = backend.infer(item.image_path, dataset.roi_for(item))
            inferred = time.perf_counter()
            mask = dataset.load_mask(item)
            masked = time.perf_counter()
            score(dataset, item, result)  # reads the mask again: metrics = score - mask read
            scored = time.perf_counter()
            stages = {"read+decode": result.timings["decode"],
                      **{k: v for k, v in result.timings.items() if k != "decode"},
                      "mask": masked - inferred, "metrics": (scored - masked) - (masked - inferred)}
            stages["total"] = (inferred - start) + (scored - masked)
            for stage, seconds in stages.items():
                per_stage.setdefault(stage, []).append(seconds)
            del mask
    return {stage: statistics.median(values) for stage, values in per_stage.items()}


def decode_in_threads(data: bytes, rounds: int) -> dict[str, list[float]]:
    """Two decodes of one PNG: one after the other vs on two threads at once."""
    def decode() -> None:
        cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)

    def two_threads() -> None:
        workers = [threading.Thread(target=decode) for _ in range(2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()

    return interleaved({"sequential": lambda: (decode(), decode()), "two threads": two_threads}, rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4, help="demo slides (default 4)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per comparison (default 5)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    peak = measure_peak()
    cores = os.cpu_count() or 1
    print(f"Machine: {peak.cpu}, {cores} cores; load average {load_before[0]:.2f} (1 min) before the run")
    print(f"  measured peak {peak.peak_gflops:.0f} GFLOP/s float32 (BLAS matmul), {peak.bandwidth_gbs:.1f} GB/s copy "
          "(measured again beside the model; its share uses the higher)")
    with tempfile.TemporaryDirectory() as tmp:
        generate_demo_dataset(Path(tmp) / "demo", count=args.images)
        dataset = Dataset.open(Path(tmp) / "demo")
        with EmbeddedBackend(DEFAULT_PIPELINE) as backend:
            report_budget(backend, dataset, args.rounds)
            report_eval(backend, dataset, args.rounds)
            report_decode_threads(dataset, args.rounds)
            tensor = backend.prepare(dataset.items[0].image_path, dataset.roi_for(dataset.items[0])).tensor
            report_model(backend, tensor, peak.peak_gflops, args.rounds)
            report_precision(backend, dataset, tensor, peak.peak_gflops, args.rounds, Path(tmp) / "int8")

    json_s, raw_s, size = bench_transport()
    print(f"\nResult transport for 960x960x2 float32 softmax + argmax: dumpdata JSON+base64 ({size / 1e6:.1f} MB) "
          f"{json_s * 1000:.1f} ms vs raw tensor bytes {raw_s * 1e6:.1f} us = {json_s / raw_s:,.0f}x slower")
    print(f"\nLoad average {os.getloadavg()[0]:.2f} (1 min) after the run")
    return 0


def report_budget(backend: EmbeddedBackend, dataset: Dataset, rounds: int) -> None:
    budget = per_image_budget(backend, dataset, max(1, rounds // 2))
    total = budget.pop("total")
    print(f"\nPer-image budget of the sequential eval loop, demo slide 4000x3000 PNG, ROI 1800x1800 -> 960x960 "
          f"(medians over {len(dataset)} slides):")
    for stage, seconds in budget.items():
        print(f"  {stage:<12} {seconds * 1000:8.1f} ms  {seconds / total:6.1%}")
    print(f"  {'total':<12} {total * 1000:8.1f} ms; outside the model {1 - budget['infer'] / total:.1%} of the wall")


def report_eval(backend: EmbeddedBackend, dataset: Dataset, rounds: int) -> None:
    outcomes: dict[tuple[bool, int], list[ImageEvaluation]] = {}

    single = EmbeddedBackend(DEFAULT_PIPELINE, threads=1)

    def run(overlap: bool, read_ahead: int = 1, chosen: EmbeddedBackend = backend) -> Callable[[], object]:
        def evaluate() -> None:
            default, chosen.read_ahead = chosen.read_ahead, read_ahead
            outcomes[overlap, read_ahead] = list(evaluate_dataset(chosen, dataset, overlap=overlap))
            chosen.read_ahead = default
        return evaluate

    with single:
        times = interleaved({"old (sequential)": run(False), "1 read ahead": run(True, 1),
                             "2 read ahead (default)": run(True, 2), "ORT 1 thread, 3 ahead": run(True, 3, single)},
                            rounds)
    n = len(dataset)
    print(f"\nsegscope eval loop over {n} demo slides, interleaved x{rounds} (seconds per image):")
    for name, values in times.items():
        print(f"  {name:<22} {spread([v / n for v in values])}  = "
              f"{n / statistics.median(values):.2f} images/s")
    old, one_ahead, default, one_thread = (statistics.median(v) for v in times.values())
    pairs = [a / b for a, b in zip(times["old (sequential)"], times["2 read ahead (default)"])]
    print(f"  images/s default/old = {old / default:.2f}x (paired rounds: min {min(pairs):.2f}, max {max(pairs):.2f}); "
          f"identical metrics: {len({repr([e.metrics for e in o]) for o in outcomes.values()}) == 1}")
    print(f"  vs the default: one image read ahead {default / one_ahead:.2f}x images/s, ONNX Runtime on 1 thread "
          f"(decode on the other core; 3 read ahead) {default / one_thread:.2f}x")
    infer = sum(e.result.timings["infer"] for e in outcomes[True, 2])  # the last default run's model time
    print(f"  default: the model is {infer / default:.0%} of the wall, outside the model {1 - infer / default:.0%} "
          "(median wall; the model time of the last default round)")


def report_decode_threads(dataset: Dataset, rounds: int) -> None:
    times = decode_in_threads(dataset.items[0].image_path.read_bytes(), rounds)
    print("\nTwo decodes of the 4000x3000 PNG (threads vs processes: does OpenCV release the GIL?):")
    for name, values in times.items():
        print(f"  {name:<12} {spread(values)}")
    ratio = statistics.median(times["sequential"]) / statistics.median(times["two threads"])
    print(f"  sequential / two threads = {ratio:.2f}x (2.0 = the GIL is released and both cores decode)")


def report_model(backend: EmbeddedBackend, tensor: np.ndarray, peak: float, rounds: int) -> None:
    card = backend.stream.card
    session = backend.session
    assert session is not None
    variants: dict[str, Callable[[], object]] = {"onnxruntime": lambda: session.run(None, {card.input_name: tensor})}
    net = cv2.dnn.readNetFromONNX(str(card.onnx))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)

    def run_cv() -> None:
        net.setInput(tensor)
        net.forward(net.getUnconnectedOutLayersNames())

    try:
        run_cv()
        variants["opencv_dnn"] = run_cv
    except cv2.error as exc:
        print(f"  OpenCV DNN cannot run the model: {str(exc).splitlines()[0]}")
    torch_run = torch_runner(tensor)
    if torch_run is not None:
        variants["pytorch_eager"] = torch_run
    times = interleaved(variants, rounds)
    again = measure_peak().peak_gflops
    print(f"\nPeak measured again beside the model: {again:.0f} GFLOP/s")
    peak = max(peak, again)
    ort_s = statistics.median(times["onnxruntime"])
    flops = model_flops(card.onnx)  # type: ignore[arg-type]
    achieved = flops / ort_s / 1e9
    print(f"\nModel: {flops / 1e9:.2f} GFLOP per 960x960 image; ONNX Runtime achieves {achieved:.1f} GFLOP/s "
          f"= {achieved / peak:.1%} of the measured {peak:.0f} GFLOP/s")
    print(f"Runtimes on the same network, interleaved x{rounds}:")
    for name, values in times.items():
        print(f"  {name:<14} {spread(values)}  {statistics.median(values) / ort_s:5.2f}x ONNX Runtime")


def report_precision(backend: EmbeddedBackend, dataset: Dataset, tensor: np.ndarray, peak: float, rounds: int,
                     cache: Path) -> None:
    import onnxruntime as ort

    card = backend.stream.card
    assert backend.session is not None and card.onnx is not None
    openvino = import_openvino()
    requests = [InferenceRequest(item.image_path, dataset.roi_for(item)) for item in calibration_spread(dataset.items)]
    start = time.perf_counter()
    int8_model = quantize_int8(backend, [backend.prepare(r.image, r.roi).tensor for r in requests], cache)
    print(f"\nPrecision variants (--precision); int8 calibrated on {len(requests)} ROIs in "
          f"{time.perf_counter() - start:.1f} s (prepare + quantize)")
    threads = backend.session.get_session_options().intra_op_num_threads
    sessions: dict[str, object] = {"fp32 ORT": backend.session}
    if openvino is not None:
        sessions["int8 OpenVINO"] = OpenVinoSession(openvino, int8_model, "f32", threads)
    sessions["int8 ORT"] = ort.InferenceSession(str(int8_model), backend.session.get_session_options(),
                                                providers=["CPUExecutionProvider"])
    if openvino is not None:
        sessions["bf16 OpenVINO"] = OpenVinoSession(openvino, card.onnx, "bf16", threads)
        sessions["fp32 OpenVINO"] = OpenVinoSession(openvino, card.onnx, "f32", threads)
    else:
        print("  OpenVINO not installed (pip install -e '.[fast]'): its variants skipped")
    feeds = {card.input_name: tensor}
    times = interleaved({name: (lambda s=s: s.run(None, feeds)) for name, s in sessions.items()},  # type: ignore
                        rounds * 2, pause=0.2)
    flops = model_flops(card.onnx)
    dice: dict[str, list[float]] = {name: [] for name in sessions}
    for item in dataset.items:
        prepared = backend.prepare(item.image_path, dataset.roi_for(item))
        for name, session in sessions.items():
            metrics = score(dataset, item, backend.run(prepared, session)).metrics  # type: ignore[arg-type]
            dice[name].append(metrics.foreground_dice if metrics else float("nan"))
    base = times["fp32 ORT"]
    fp32_dice = statistics.mean(dice["fp32 ORT"])
    print(f"Model alone on one 960x960 tensor, interleaved x{rounds * 2} (0.2 s pause before each call); "
          "speed-up vs ONNX Runtime fp32 "
          f"(paired rounds min-max); effective GFLOP/s = {flops / 1e9:.2f} GFLOP / time, vs the measured peak; "
          f"foreground Dice over {len(dataset)} slides:")
    for name, values in times.items():
        pairs = [b / v for b, v in zip(base, values)]
        gflops = flops / statistics.median(values) / 1e9
        change = statistics.mean(dice[name]) - fp32_dice
        print(f"  {name:<14} {spread(values)}  {statistics.median(base) / statistics.median(values):4.2f}x "
              f"({min(pairs):.2f}-{max(pairs):.2f})  {gflops:5.1f} GFLOP/s = {gflops / peak:5.1%} of peak  "
              f"Dice {statistics.mean(dice[name]):.6f} ({change:+.6f})")
    fast_name = "int8 OpenVINO" if openvino is not None else "int8 ORT"
    fast = PrecisionBackend(backend, "int8", sessions[fast_name], fast_name)  # type: ignore[arg-type]
    loops = interleaved({"fp32": lambda: list(evaluate_dataset(backend, dataset)),
                         "int8": lambda: list(evaluate_dataset(fast, dataset))}, rounds)
    n = len(dataset)
    print(f"segscope eval loop (overlapped) over {n} slides, interleaved x{rounds}, seconds per image:")
    for name, values in loops.items():
        print(f"  {name:<5} {spread([v / n for v in values])}  = {n / statistics.median(values):.2f} images/s")
    print(f"  images/s int8 ({fast_name}) / fp32 = "
          f"{statistics.median(loops['fp32']) / statistics.median(loops['int8']):.2f}x")


def torch_runner(tensor: np.ndarray) -> Callable[[], object] | None:
    """The demo network in PyTorch eager mode, if torch is installed (the `train` extra).

    It is built from models/train_demo.py with fresh weights: run time does not depend on weight values,
    so this times the same computation the ONNX file holds (plus BatchNorm, which the export folds away).
    """
    if importlib.util.find_spec("torch") is None:
        print("  PyTorch not installed (pip install -e '.[train]'): eager comparison skipped")
        return None
    import torch

    spec = importlib.util.spec_from_file_location("train_demo", Path(__file__).parents[1] / "models" / "train_demo.py")
    train_demo = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(train_demo)  # type: ignore[union-attr]
    net = train_demo.MindSporeStyleOutputs(train_demo.UNet()).eval()
    torch.set_num_threads(os.cpu_count() or 1)
    x = torch.from_numpy(tensor)

    def run() -> None:
        with torch.inference_mode():
            net(x)

    return run


def bench_transport() -> tuple[float, float, int]:
    """Seconds to decode the dumpdata JSON (base64) vs the raw tensor bytes; JSON size in bytes."""
    rng = np.random.default_rng(0)
    softmax = rng.random((1, 960, 960, 2), dtype=np.float32)
    argmax = softmax.argmax(-1).astype(np.int32)
    raw = [softmax.tobytes(), argmax.tobytes()]
    tensors = [{"tensorDataType": 0 if i == 0 else 3, "tensorShape": list(a.shape),
                "dataStr": base64.b64encode(b).decode()}
               for i, (a, b) in enumerate(zip((softmax, argmax), raw))]
    content = json.dumps({"tensorPackageVec": [{"tensorVec": tensors}]})
    document = json.dumps({"metaData": [{"key": "mxpi_tensorinfer0", "content": content}]})

    def from_json() -> None:
        vec = json.loads(json.loads(document)["metaData"][0]["content"])["tensorPackageVec"][0]["tensorVec"]
        np.frombuffer(base64.b64decode(vec[0]["dataStr"]), np.float32).reshape(vec[0]["tensorShape"])
        np.frombuffer(base64.b64decode(vec[1]["dataStr"]), np.int32).reshape(vec[1]["tensorShape"])

    def from_raw() -> None:  # bytes(...) stands for the one copy protobuf parsing makes
        np.frombuffer(bytearray(raw[0]), "<f4").reshape(softmax.shape)
        np.frombuffer(bytearray(raw[1]), "<i4").reshape(argmax.shape)

    times = interleaved({"json": from_json, "raw": from_raw}, 7)
    return statistics.median(times["json"]), statistics.median(times["raw"]), len(document)


if __name__ == "__main__":
    sys.exit(main())
