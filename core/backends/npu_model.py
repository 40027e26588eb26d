"""What the backends that run a bare Ascend `.om` share (`mindx_model`: the MindX SDK's Model API; `aisbench`).

Everything around the model runs on the CPU exactly as on the embedded backend (`EmbeddedStream`: opencv
decode, the crop of the ROI, the resizes, the card's preprocessing, and after the model its post-processing),
so one card gives the same numbers on ONNX Runtime with its `.onnx` and on the NPU with its `.om`. Where the
card names an AIPP config, that config is compiled into the `.om` (`segscope card`'s ATC command bakes it in):
the `.om` gets the resized crop as mxpi_tensorinfer hands it over, uint8 1 x H x W x 3 in the decoder's channel
order, and the chip does the AIPP. Without one, SegScope makes the normalised tensor in the card's layout, in
the `.om`'s input type (float32, or float16 for an `.om` converted with fp16 inputs).

At open, a SHA-256 the card records for the `.om` must match the file, and the `.om`'s metadata as the API
reports them (`OmFacts`: shapes, types, input format, dynamic gears) are checked against the card, each
mismatch in one line.
"""

from __future__ import annotations

import abc
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..card.card import ModelCard
from ..card.check import check_model_outputs
from ..card.model_files import check_model_path
from ..card.onnx_graph import ELEM_TYPES, GraphInfo, TensorInfo
from ..errors import BackendError, SegScopeError
from ..files.fileio import DEFAULT_MAX_PIXELS
from ..roi import Roi
from ..stream.loader import load_pipeline
from ..stream.pipeline import Pipeline
from .base import Backend, Capabilities, ImageSource, InferenceRequest, InferenceResult, read_ahead
from .embedded import EmbeddedStream, Image, _Prepared
from .pool import DevicePool, device_pool

#: An API's data type names (base.dtype, aclruntime.dtype) -> NumPy's.
_NUMPY_NAMES = {"double": "float64"}
_ONNX_CODES = {name: code for code, name in ELEM_TYPES.items()}


@dataclass(frozen=True)
class OmTensor:
    name: str
    dtype: str  # NumPy's name for it
    shape: tuple[int, ...]  # -1: a dynamic dimension


@dataclass(frozen=True)
class OmFacts:
    """A loaded `.om` as its API describes it."""

    inputs: tuple[OmTensor, ...]
    outputs: tuple[OmTensor, ...]
    input_format: str | None = None  # "NCHW" / "NHWC" when the API says
    gears: tuple[tuple[int, ...], ...] = ()  # dynamic batch ([b]) or resolution ([h, w]) gears when it says


def dtype_name(value: object) -> str:
    """An API's data type (an enum member such as `base.dtype.float16` or `aclruntime.dtype.float16`, or its
    text) as NumPy's name for it."""
    name = str(getattr(value, "name", value)).rsplit(".", 1)[-1]
    return _NUMPY_NAMES.get(name, name)


def _expected_input(card: ModelCard) -> tuple[tuple[int, ...], tuple[str, ...], str]:
    """(shape, accepted types, layout) of the `.om` input the card implies."""
    width, height = card.input_size
    if card.aipp is not None:  # interleaved pixels in, whatever the network's own layout
        return (1, height, width, 3), ("uint8",), "NHWC"
    channels, layout = card.preprocess.channels, card.preprocess.layout
    shape = (1, channels, height, width) if layout == "NCHW" else (1, height, width, channels)
    return shape, ("float32", "float16"), layout


def check_facts(card: ModelCard, om: Path, facts: OmFacts) -> None:
    """The `.om` as its API describes it against the card; the first mismatch as one BackendError line."""
    def error(field: str, problem: str) -> BackendError:
        return BackendError(f"{card.path}: {field}: {problem} in {om.name}")

    if card.aipp is not None and card.aipp.input_format != "RGB888_U8":
        raise error("aipp", f"the AIPP config takes {card.aipp.input_format} (DVPP's YUV), which only the stream "
                            "makes: run the card's pipeline with --backend mindx")
    if len(facts.inputs) != 1:
        raise error("input", f"SegScope feeds one image tensor but the .om takes {len(facts.inputs)} inputs")
    tensor = facts.inputs[0]
    shape, dtypes, layout = _expected_input(card)
    if tensor.dtype not in dtypes:
        hint = ("the card names an AIPP config, so the .om should take uint8 pixels: convert it with that "
                "config (atc --insert_op_conf), or drop 'aipp' from the card") if card.aipp is not None else \
            ("it takes pixels, so an AIPP config is compiled in: name that config in the card's 'aipp'"
             if tensor.dtype == "uint8" else "SegScope feeds float32 or float16")
        raise error("input", f"the .om takes {tensor.dtype}; {hint}")
    if len(tensor.shape) != 4 or tensor.shape[0] not in (1, -1) or any(
            have not in (-1, want) for have, want in zip(tensor.shape[1:], shape[1:])):
        raise error("input", f"the .om takes {list(tensor.shape)} but the card gives {list(shape)} ({layout}; "
                             "input.width, height, channels and layout, or the AIPP's 3 channels)")
    gears = [gear for gear in facts.gears if gear]
    if tensor.shape[0] == -1 and gears and all(len(g) == 1 for g in gears) and (1,) not in gears:
        raise error("input", f"the .om's dynamic batch gears are {', '.join(str(g[0]) for g in gears)}, without "
                             "1: SegScope feeds one image at a time (convert with a gear of 1)")
    if -1 in tensor.shape[1:] and gears and all(len(g) == 2 for g in gears) and shape[1:3] not in gears:
        raise error("input", f"the .om's resolution gears ({', '.join(f'{h}x{w}' for h, w in gears)}, height x "
                             f"width) leave out the card's {shape[1]}x{shape[2]}")
    if card.aipp is None and facts.input_format not in (None, layout):
        raise error("input.layout", f"{layout} but the .om's input format is {facts.input_format}")
    check_model_outputs(card, _as_graph(om, facts, dynamic_batch=tensor.shape[0] == -1))


def _as_graph(om: Path, facts: OmFacts, dynamic_batch: bool) -> GraphInfo:
    """The `.om`'s outputs in the form the card's output checks read (a dynamic batch reads as unknown)."""
    def info(tensor: OmTensor) -> TensorInfo:
        dims = tuple("?" if d < 0 or (i == 0 and dynamic_batch) else d for i, d in enumerate(tensor.shape))
        return TensorInfo(tensor.name, _ONNX_CODES.get(tensor.dtype, 0), dims)

    outputs = tuple(info(t) for t in facts.outputs)
    return GraphInfo(om, tuple(info(t) for t in facts.inputs), outputs, ("",) * len(outputs))


class _OmStream(EmbeddedStream):
    """The embedded stream up to the `.om`'s input: with an AIPP card, the resized crop itself."""

    def to_tensor(self, resized: Image, rgb: bool, source: str = "<image>") -> np.ndarray:
        if self.card.aipp is None or not isinstance(resized, np.ndarray):
            return super().to_tensor(resized, rgb, source)
        self.check_model_image(resized, rgb)
        if resized.dtype != np.uint8 or resized.ndim != 3 or resized.shape[2] != 3:
            raise SegScopeError(f"{source}: the .om's AIPP takes 8-bit 3-channel pixels (RGB888_U8), but the stream "
                                f"gives {'x'.join(map(str, resized.shape))} {resized.dtype}: decode as uint8 BGR/RGB")
        return np.ascontiguousarray(resized[None])


def _om_path(pipeline: Pipeline, card: ModelCard) -> Path:
    """The `.om` to run: the card's `om` when the card is run without a pipeline, else the stream's modelPath."""
    if pipeline.card is not None:
        if card.om is None:
            raise BackendError(f"{card.path}: field 'om' is empty: name the Ascend model this card describes "
                               "(segscope card MODEL.om writes it)")
        om = card.om
    else:
        om = pipeline.model_path()
    if not om.is_file():
        named = f"named by {card.path.name}" if pipeline.card else f"of {pipeline.path.name}"
        raise BackendError(f"{om}: the .om {named} not found; copy it there (ATC makes it on the Ascend host)")
    check_model_path(om, "Ascend model (.om)")
    if om == card.om:
        card.check_recorded("om", om)
    return om


class OmBackend(Backend):
    """The stream's CPU stages around an `.om` that an Ascend API runs; subclasses load and run the model."""

    kind: ClassVar[str]  # the registry's name for it
    api: ClassVar[str]  # the API, for messages

    def __init__(self, source: Path | Pipeline, device: int | None = None, *, sdk_home: Path | None = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS, read_ahead: int = 2):
        pipeline = source if isinstance(source, Pipeline) else load_pipeline(source)
        self.stream = _OmStream(pipeline)
        card = self.stream.card
        if self.stream.plan.decoder.dvpp:
            raise BackendError(f"{pipeline.path}: the stream decodes with DVPP for a YUV AIPP, which only the stream "
                               "itself runs: use --backend mindx, or an opencv decoder")
        self.om = _om_path(pipeline, card)
        self.device = int(pipeline.stream.config.get("deviceId") or 0) if device is None else device
        self.max_pixels, self.read_ahead = max_pixels, read_ahead
        self._lock = threading.Lock()
        facts, version = self._load(sdk_home)
        self._open = True
        try:
            check_facts(card, self.om, facts)
        except BaseException:
            self.close()
            raise
        self._input_dtype = np.dtype(facts.inputs[0].dtype)
        self.capabilities = Capabilities(
            name=self.kind, device=f"Ascend device {self.device} ({self.api} {version})",
            input_size=card.input_size, class_names=card.class_names,
            details={"model": str(self.om), **card.truth_details(), "card": str(card.path), "api_version": version,
                     "aipp": "compiled into the .om (runs on the NPU)" if card.aipp else "none (CPU preprocessing)",
                     **({"pipeline": str(pipeline.path)} if pipeline.card is None else {})})

    @abc.abstractmethod
    def _load(self, sdk_home: Path | None) -> tuple[OmFacts, str]:
        """Load `self.om` on `self.device`; its facts and the API's version."""

    @abc.abstractmethod
    def _execute(self, tensor: np.ndarray) -> tuple[list[np.ndarray], float | None]:
        """The model's outputs on the host for one input, and the NPU's own time for it in seconds if known."""

    @abc.abstractmethod
    def _release(self) -> None:
        """Free the model (once)."""

    def failure(self, what: str, detail: object, hint: str) -> BackendError:
        """One line: which API, device and step failed, what it said, and what to do."""
        said = str(detail).strip() or type(detail).__name__
        said = said[1:-1].strip() if said.startswith("(") and said.endswith(")") else said  # MxBase's " (Code = ...) "
        return BackendError(f"{self.api} on device {self.device}: {what} failed ({said}) for {self.om.name}: {hint}")

    def infer(self, image: ImageSource, roi: Roi | None = None) -> InferenceResult:
        return self.run(self.stream.prepare(image, roi, self.max_pixels))

    def infer_many(self, requests: Iterable[InferenceRequest]) -> Iterator[InferenceResult]:
        """Results in request order; the next images are read and preprocessed while the NPU runs one."""
        return read_ahead(requests, lambda r: self.stream.prepare(r.image, r.roi, self.max_pixels), self.run,
                          self.read_ahead, f"segscope-{self.kind}")

    def run(self, prepared: _Prepared) -> InferenceResult:
        """The `.om` on one prepared image, then the card's post-processing; "device" is the NPU's share of
        the model call when the API reports it ("infer" is then the rest: copies and host overhead)."""
        tensor = np.ascontiguousarray(prepared.tensor, dtype=self._input_dtype)
        timings = dict(prepared.timings)
        with self._lock:
            if not self._open:
                raise BackendError(f"the {self.kind} backend is closed; open a new one")
            start = time.perf_counter()
            outputs, device_s = self._execute(tensor)
            elapsed = time.perf_counter() - start
        timings["infer"] = elapsed if device_s is None else max(0.0, elapsed - device_s)
        if device_s is not None:
            timings["device"] = device_s
        card = self.stream.card
        if len(outputs) != len(card.outputs):
            raise BackendError(f"{card.path}: lists {len(card.outputs)} outputs but {self.om.name} returned "
                               f"{len(outputs)}: fix the card's 'outputs'")
        return self.stream.finish(outputs, prepared, timings, self.kind)

    def close(self) -> None:
        with self._lock:
            if getattr(self, "_open", False):
                self._open = False
                self._release()

    @classmethod
    def open_here(cls, source: Path, max_pixels: int = DEFAULT_MAX_PIXELS, sdk_home: Path | None = None) -> OmBackend:
        """On the pipeline's device (the registry's opener; see `core.backends.registry`)."""
        return cls(source, sdk_home=sdk_home, max_pixels=max_pixels)

    @classmethod
    def open_on_devices(cls, source: Path, devices: Sequence[int], max_pixels: int = DEFAULT_MAX_PIXELS,
                        sdk_home: Path | None = None) -> DevicePool:
        """One backend per device (`--devices`), each image to the first free one."""
        pipeline = load_pipeline(source)
        return device_pool(lambda device: cls(pipeline, device, sdk_home=sdk_home, max_pixels=max_pixels),
                           devices, "device")
