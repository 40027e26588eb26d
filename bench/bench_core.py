"""Benchmark of the embedded stream: per-stage time, model efficiency, runtimes and result transport.

Run: `python bench/bench_core.py` (about a minute). Every figure is measured in this one run and printed
as a median or a ratio, because these machines are noisy. Results are recorded in bench/RESULTS.md.

- Per-stage time: EmbeddedBackend on demo slides at the default ROI (1800x1800 -> 960x960).
- Outside-model share: (crop + resize + preprocess + postprocess) / infer; the goal is <= 10%.
  Decoding the 4000x3000 PNG is reported apart: it is file I/O the Ascend host does too (on the CPU).
- GFLOP/s: 2 x the multiply-accumulates of every Conv/ConvTranspose/MatMul (from ONNX shape inference)
  divided by the median ONNX Runtime run time; peak = cores x clock x FLOP/cycle/core, with 64 FLOP/cycle
  for AVX-512 FMA (2 units x 16 fp32 lanes x 2), 32 for AVX2 FMA, 8 otherwise.
- Runtimes on the same network: ONNX Runtime and OpenCV DNN on the ONNX file, PyTorch eager on the network
  as models/train_demo.py defines it (skipped when torch is not installed).
- Transport: the original script's mxpi_dumpdata JSON with base64 float32 tensors vs reading the raw
  tensor bytes (what GetProtobuf gives), for a 960x960x2 softmax + argmax.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import onnx

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.dataset import Dataset
from segscope.core.demo_data import generate_demo_dataset
from segscope.core.model_card import load_model_card
from segscope.core.pipeline import DEFAULT_PIPELINE

REPEATS = 7


def median_time(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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


def peak_gflops() -> tuple[float, str]:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    per_cycle = 64 if "avx512f" in flags else 32 if "fma" in flags and "avx2" in flags else 8
    mhz = max((float(line.split(":")[1]) for line in flags.splitlines() if line.startswith("cpu MHz")), default=0.0)
    cores = os.cpu_count() or 1
    return cores * mhz / 1000 * per_cycle, f"{cores} cores x {mhz / 1000:.2f} GHz x {per_cycle} FLOP/cycle"


def bench_stages(backend: EmbeddedBackend, dataset: Dataset) -> dict[str, float]:
    per_stage: dict[str, list[float]] = {}
    item = dataset.items[0]
    data = item.image_path.read_bytes()
    roi = dataset.roi_for(item)
    backend.infer(data, roi)  # warm-up
    for _ in range(REPEATS):
        for stage, seconds in backend.infer(data, roi).timings.items():
            per_stage.setdefault(stage, []).append(seconds)
    return {stage: statistics.median(values) for stage, values in per_stage.items()}


def bench_runtimes(backend: EmbeddedBackend, tensor: np.ndarray) -> dict[str, float]:
    card = backend.stream.card
    times = {"onnxruntime": median_time(lambda: backend.session.run(None, {card.input_name: tensor}))}
    net = cv2.dnn.readNetFromONNX(str(card.onnx))
    net.setPreferableBackend(cv2.dnn.DNN_BACKEND_OPENCV)

    def run_cv() -> None:
        net.setInput(tensor)
        net.forward(net.getUnconnectedOutLayersNames())

    try:
        times["opencv_dnn"] = median_time(run_cv, 3)
    except cv2.error as exc:
        print(f"  OpenCV DNN cannot run the model: {str(exc).splitlines()[0]}")
    torch_time = bench_torch(tensor)
    if torch_time is not None:
        times["pytorch_eager"] = torch_time
    return times


def bench_torch(tensor: np.ndarray) -> float | None:
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
    with torch.inference_mode():
        return median_time(lambda: net(x), 3)


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

    return median_time(from_json), median_time(from_raw, 50), len(document)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        generate_demo_dataset(Path(tmp) / "demo", count=1)
        dataset = Dataset.open(Path(tmp) / "demo")
        with EmbeddedBackend(DEFAULT_PIPELINE) as backend:
            stages = bench_stages(backend, dataset)
            card_path = backend.stream.card.path
            item = dataset.items[0]
            crop = cv2.imread(str(item.image_path))
            roi = dataset.roi_for(item)
            resized, _ = backend.stream.resize(crop[roi.y0 : roi.y1, roi.x0 : roi.x1])
            tensor = backend.stream.to_tensor(resized)
            times = bench_runtimes(backend, tensor)
    print(f"Embedded stream, demo model, 1800x1800 ROI -> 960x960 (median of {REPEATS}, {os.cpu_count()} cores):")
    for stage, seconds in stages.items():
        print(f"  {stage:<12} {seconds * 1000:8.1f} ms")
    outside = sum(stages[s] for s in ("crop", "resize", "preprocess", "postprocess"))
    print(f"  outside the model (crop+resize+preprocess+postprocess) / infer = {outside / stages['infer']:.1%} "
          f"(goal <= 10%); decode of the 4000x3000 PNG / infer = {stages['decode'] / stages['infer']:.1%}")

    flops = model_flops(load_model_card(card_path).onnx)
    peak, how = peak_gflops()
    achieved = flops / stages["infer"] / 1e9
    print(f"\nModel: {flops / 1e9:.2f} GFLOP per 960x960 image; achieved {achieved:.1f} GFLOP/s of a "
          f"theoretical {peak:.0f} GFLOP/s ({how}) = {achieved / peak:.1%} of peak")

    print("\nRuntimes on the same ONNX model (median per image):")
    for name, seconds in times.items():
        print(f"  {name:<14} {seconds * 1000:8.1f} ms   {seconds / times['onnxruntime']:5.2f}x ONNX Runtime")

    json_s, raw_s, size = bench_transport()
    print(f"\nResult transport for 960x960x2 float32 softmax + argmax: dumpdata JSON+base64 ({size / 1e6:.1f} MB) "
          f"{json_s * 1000:.1f} ms vs raw tensor bytes {raw_s * 1e6:.1f} us = {json_s / raw_s:,.0f}x slower")
    return 0


if __name__ == "__main__":
    sys.exit(main())
