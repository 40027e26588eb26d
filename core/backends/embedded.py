"""The embedded backend: runs a MindX `.pipeline` on the CPU with OpenCV and ONNX Runtime.

It emulates the stream element by element — opencv decode (BGR), ExternalObjects crop, opencv resize,
the model's AIPP, tensorinfer on the card's ONNX export — so a laptop without Ascend hardware gets the
results the Ascend host would give (up to fp16 rounding).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import cv2
import numpy as np
import onnxruntime as ort

from .. import imaging
from ..errors import BackendError, SegScopeError
from ..fileio import DEFAULT_MAX_PIXELS, decode_image, read_bytes
from ..model_card import ModelCard, load_model_card, postprocess
from ..pipeline import Pipeline, load_pipeline
from ..preprocess import check_aipp_color, decode_flag, make_tensor
from ..roi import Roi
from .base import Backend, Capabilities, ImageSource, InferenceResult


def open_session(card: ModelCard, threads: int | None = None) -> ort.InferenceSession:
    """One ONNX Runtime session per backend: full graph optimisation, one thread per core."""
    if card.onnx is None:
        raise SegScopeError(f"{card.path}: field 'onnx' is empty: the embedded backend needs an ONNX export")
    if not card.onnx.is_file():
        raise SegScopeError(f"{card.onnx}: ONNX model named by {card.path.name} not found")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads or os.cpu_count() or 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        return ort.InferenceSession(str(card.onnx), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises its own exception types for corrupt or unsupported files
        raise SegScopeError(f"{card.onnx}: ONNX Runtime cannot load the model ({exc})") from None


class EmbeddedStream:
    """The stream's stages as plain functions of arrays, shared by the embedded backend and test doubles."""

    def __init__(self, pipeline: Pipeline):
        stream = pipeline.stream
        unsupported = stream.unsupported_by_embedded()
        if unsupported:
            names = ", ".join(f"{e.name} ({e.factory})" for e in unsupported)
            raise SegScopeError(f"{pipeline.path}: stream {stream.name!r}: {names} not supported by the embedded "
                                "backend (still valid for MindX: run it on the Ascend host)")
        self.pipeline = pipeline
        decoder = stream.find("mxpi_imagedecoder")
        self.rgb = decoder is not None and decoder.props.get("outputDataFormat", "BGR").upper() == "RGB"
        resize = stream.find("mxpi_imageresize")
        self.resize_spec = (imaging.ResizeSpec.from_props(resize.props, f"{pipeline.path}: element {resize.name!r}")
                            if resize else None)
        model_path = pipeline.model_path()
        card_path = model_path.with_suffix(".json")
        if not model_path.exists() and not card_path.exists():
            raise SegScopeError(f"{pipeline.path}: modelPath {model_path} not found (nor its model card "
                                f"{card_path.name}); relative paths start at {pipeline.project_root}")
        self.card = load_model_card(card_path)
        if self.resize_spec and (self.resize_spec.width, self.resize_spec.height) != self.card.input_size:
            raise SegScopeError(
                f"{pipeline.path}: resize output {self.resize_spec.width}x{self.resize_spec.height} does not match "
                f"the model input {self.card.input_size[0]}x{self.card.input_size[1]} ({self.card.path.name})")

    def decode(self, data: bytes, source: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
        image = decode_image(data, source, decode_flag(self.card.preprocess), max_pixels)
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB) if self.rgb else image

    def resize(self, crop: np.ndarray) -> tuple[np.ndarray, imaging.ResizePlan]:
        """The resize plugin's output (the crop itself when the stream has no resize element)."""
        if self.resize_spec is None:
            return crop, imaging.ResizePlan(crop.shape[1::-1], (0, 0, *crop.shape[1::-1]))
        return imaging.resize(crop, self.resize_spec)

    def to_tensor(self, resized: np.ndarray, source: str = "<image>") -> np.ndarray:
        """The resized crop -> the network input, by the card's AIPP config or its preprocessing."""
        if resized.shape[1::-1] != self.card.input_size:
            raise SegScopeError(f"the resized crop is {resized.shape[1]}x{resized.shape[0]} but the model takes "
                                f"{self.card.input_size[0]}x{self.card.input_size[1]}: use a padding resizeType")
        if self.card.aipp is not None:
            check_aipp_color(self.card.preprocess, self.card.aipp, self.rgb, str(self.card.path))
        return make_tensor(resized, self.card.preprocess, self.card.aipp, self.rgb, source)


class EmbeddedBackend(Backend):
    """Run a `.pipeline` on this machine's CPU."""

    def __init__(self, pipeline: Pipeline | Path, threads: int | None = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS):
        self.stream = EmbeddedStream(pipeline if isinstance(pipeline, Pipeline) else load_pipeline(pipeline))
        self.max_pixels = max_pixels
        self.session: ort.InferenceSession | None = open_session(self.stream.card, threads)
        card = self.stream.card
        threads_used = self.session.get_session_options().intra_op_num_threads
        self.capabilities = Capabilities(
            name="embedded",
            device=f"CPU (ONNX Runtime {ort.__version__}, {threads_used} threads)",
            input_size=card.input_size,
            class_names=card.class_names,
            details={"model": str(card.onnx), "card": str(card.path), "pipeline": str(self.stream.pipeline.path),
                     "opencv": cv2.__version__, "onnxruntime": ort.__version__},
        )

    def infer(self, image: ImageSource, roi: Roi | None = None) -> InferenceResult:
        if self.session is None:
            raise BackendError("the embedded backend is closed; open a new one")
        timings: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(stage: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            timings[stage] = now - clock
            clock = now

        source = str(image) if isinstance(image, Path) else "<image bytes>"
        data = read_bytes(image) if isinstance(image, Path) else image
        decoded = self.stream.decode(data, source, self.max_pixels)
        lap("decode")
        height, width = decoded.shape[:2]
        crop, box = imaging.crop(decoded, roi or Roi.whole(width, height), source)
        lap("crop")
        resized, plan = self.stream.resize(crop)
        lap("resize")
        tensor = self.stream.to_tensor(resized, source)
        lap("preprocess")
        outputs = self.session.run(None, {self.stream.card.input_name: tensor})
        lap("infer")
        probabilities, argmax = postprocess(outputs, self.stream.card)
        probabilities = np.ascontiguousarray(imaging.uncrop_content(probabilities, plan))
        argmax = np.ascontiguousarray(imaging.uncrop_content(argmax, plan))
        lap("postprocess")
        return InferenceResult(probabilities, argmax, box, (width, height), timings, "embedded")

    def close(self) -> None:
        self.session = None
