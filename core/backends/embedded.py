"""The embedded backend: runs a MindX `.pipeline` on the CPU with OpenCV and ONNX Runtime.

It emulates the stream element by element, in the stream's order (core.stream.emulation): opencv decode, then the
ExternalObjects crop, opencv resizes and image normalisations as the stream orders them (a normalisation
before a resize is resized as float32; padding pads what is there at that point), the model's AIPP,
tensorinfer on the card's ONNX export, semantic segmentation post-processing — so a laptop without Ascend
hardware gets the results the Ascend host would give (up to fp16 rounding).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, Union

import cv2
import numpy as np
import onnxruntime as ort

from ..cache.decoded import image_region
from ..card.card import ModelCard
from ..card.onnx_graph import read_graph
from ..card.reader import load_model_card, postprocess
from ..errors import BackendError, SegScopeError
from ..files.fileio import DEFAULT_MAX_PIXELS, decode_image, read_bytes
from ..files.imageheader import header_size
from ..result import Placement
from ..roi import Roi
from ..stream import dvpp, imaging
from ..stream.emulation import Crop, Normalize, plan_stream, sized
from ..stream.loader import load_pipeline
from ..stream.pipeline import Pipeline
from ..stream.preprocess import check_aipp_color, decode_flag, make_tensor
from .base import Backend, Capabilities, ImageSource, InferenceRequest, InferenceResult, check_pixels, read_ahead
from .pool import DevicePool, device_pool

# ONNX Runtime's own log (its default logger, used before a session has its own) says nothing SegScope's
# one-line errors do not: only what would abort the process is left.
ort.set_default_logger_severity(4)

#: A decoded image: H x W x C on the opencv path, NV12 planes on the DVPP path.
Image = Union[np.ndarray, dvpp.Nv12]  # noqa: UP007 (a run-time alias: Python 3.9 has no X | Y)


class ModelSession(Protocol):
    """What runs the network: an ONNX Runtime session, or a faster stand-in (core.backends.precision)."""

    def run(self, output_names: None, feeds: dict[str, np.ndarray]) -> list[np.ndarray]: ...


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
    # Idle pool threads sleep instead of spinning: the cores are shared with the decode and scoring threads of
    # an overlapped eval, which spinning took ~80-110 ms of CPU per demo image from (bench/RESULTS.md).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 4  # fatal only: a refused model is SegScope's one line, not ORT's coloured log
    read_graph(card.onnx)  # the file and its external weights checked (size, holes, references) as ORT loads them
    try:
        return ort.InferenceSession(str(card.onnx), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # ORT raises its own exception types for corrupt or unsupported files
        raise SegScopeError(f"{card.onnx}: ONNX Runtime cannot load the model ({exc})") from None


class EmbeddedStream:
    """The stream's stages as plain functions of arrays (core.stream.emulation reads which stages there are)."""

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline
        self.plan = plan_stream(pipeline)
        self.rgb = self.plan.decoder.rgb
        model_path = pipeline.model_path()
        card_path = model_path.with_suffix(".json")
        if not model_path.exists() and not card_path.exists():
            raise SegScopeError(f"{pipeline.path}: no model card {card_path} for modelPath {model_path} (the "
                                "embedded backend runs the ONNX export a card names; `segscope card MODEL.onnx` "
                                f"writes one); relative paths start at {pipeline.project_root}")
        self.card = load_model_card(card_path)
        self.stages = sized(self.plan.stages, self.card.input_size)
        self.resize_specs = tuple(s for s in self.stages if isinstance(s, imaging.ResizeSpec))
        aipp = self.card.aipp
        if self.plan.decoder.dvpp != bool(aipp and aipp.yuv_input):
            given = "NV12 (DVPP decode)" if self.plan.decoder.dvpp else "an opencv image"
            wanted = aipp.input_format if aipp else "no AIPP (an RGB/BGR tensor)"
            raise SegScopeError(f"{pipeline.path}: the stream gives the model {given} but its card "
                                f"{self.card.path.name} expects {wanted}: match the decoder's cvProcessor to "
                                "the model's AIPP input_format")
        if aipp is not None and self._gives_float():
            raise SegScopeError(f"{pipeline.path}: the stream gives the model float32 pixels (the decoder's "
                                "dataType or an mxpi_imagenormalize dataType FLOAT32) but the AIPP config of "
                                f"{self.card.path.name} takes uint8 (RGB888_U8): MindX's tensorinfer would refuse "
                                "the tensor; normalise in one place")
        last = self.resize_specs[-1] if self.resize_specs else None
        if last and last.resize_type in ("Resizer_Stretch", "Resizer_KeepAspectRatio_Fit") \
                and (last.width, last.height) != self.card.input_size:
            raise SegScopeError(
                f"{pipeline.path}: resize output {last.width}x{last.height} does not match the model input "
                f"{self.card.input_size[0]}x{self.card.input_size[1]} ({self.card.path.name})")

    def _gives_float(self) -> bool:
        """Whether the image reaching the model is float32 (each normalisation converts, or keeps, the type)."""
        float32 = self.plan.decoder.float32
        for stage in self.stages:
            if isinstance(stage, Normalize):
                float32 = stage.data_type == "FLOAT32" or (stage.data_type == "auto" and float32)
        return float32

    @property
    def crops(self) -> bool:
        """Whether the stream crops SegScope's ROI (else it resizes the whole image it is sent, as MindX does)."""
        return self.plan.crop is not None

    def decode(self, data: bytes, source: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image:
        if self.plan.decoder.dvpp:  # DVPP decodes to YUV whatever the model's channels
            return dvpp.decode(decode_image(data, source, cv2.IMREAD_COLOR, max_pixels))
        return self._formatted(decode_image(data, source, decode_flag(self.card.preprocess), max_pixels))

    def decoded(self, pixels: np.ndarray, source: str = "<image array>") -> Image:
        """What the decoder gives for already-decoded BGR pixels (a slide region): the opencv decoder's
        8-bit BGR of a lossless file is those pixels, then its outputDataFormat/dataType. Streams whose
        decoder would give something else for the file are refused, not approximated."""
        check_pixels(pixels, source)
        if self.plan.decoder.dvpp:
            raise SegScopeError(f"{self.pipeline.path}: the stream decodes with DVPP (NV12, chroma shared by "
                                "2x2 pixels), so a region read cannot give the pixels its decode of the whole "
                                "file would: run the file itself, or give mxpi_imagedecoder cvProcessor opencv")
        if decode_flag(self.card.preprocess) != cv2.IMREAD_COLOR:
            raise SegScopeError(f"{self.card.path}: the model takes {self.card.preprocess.channels} channels "
                                "(the file's alpha), which a region read (BGR) does not carry: run the file itself")
        return self._formatted(pixels)

    def _formatted(self, image: np.ndarray) -> np.ndarray:
        """The opencv decoder's BGR -> its outputDataFormat and dataType."""
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB) if self.rgb else image
        return image.astype(np.float32) if self.plan.decoder.float32 else image

    @staticmethod
    def size(image: Image) -> tuple[int, int]:
        """(width, height) of a decoded, cropped or resized image."""
        return image.size if isinstance(image, dvpp.Nv12) else (image.shape[1], image.shape[0])

    def crop(self, image: Image, roi: Roi, crop: Crop, source: str) -> tuple[Image, Roi]:
        """The crop plugin's box (widened by its expand ratios) and crop."""
        if any(crop.expand):
            roi = imaging.expand_box(roi, crop.expand, *self.size(image))
        if isinstance(image, dvpp.Nv12):
            return dvpp.crop(image, roi, source)
        return imaging.crop(image, roi, source)

    def run_stages(self, image: Image, roi: Roi | None, source: str,
                   timings: dict[str, float] | None = None) -> tuple[Image, bool, Roi, tuple[int, int],
                                                                     imaging.ResizePlan]:
        """The decoded image through the stream's elements in its order: (what reaches the model, whether it
        is RGB, the box cropped in the image's pixels (all of it without a crop), the crop's size, and where
        the crop lies in the model input). `roi` is the crop's box (None: the whole image); a stream without
        a crop refuses one, as MindX would ignore it. Seconds per kind of stage are added to `timings`."""
        width, height = self.size(image)
        whole = Roi.whole(width, height)
        if roi is not None and roi != whole and not self.crops:
            raise SegScopeError(f"{self.pipeline.path}: the stream has no mxpi_imagecrop, so MindX ignores an ROI "
                                f"and resizes the whole image; crop ROI {roi} before the stream (segscope eval "
                                "--roi and the viewer do)")
        rgb, box, crop_size, plans = self.rgb, whole, (width, height), []
        for stage in self.stages:
            clock = time.perf_counter()
            if isinstance(stage, Crop):
                image, box = self.crop(image, roi or whole, stage, source)
                crop_size, kind = self.size(image), "crop"
            elif isinstance(stage, Normalize):  # host images only (core.stream.emulation)
                image, rgb, kind = stage.apply(image, rgb), stage.output_rgb(rgb), "preprocess"  # type: ignore[arg-type]
            elif isinstance(image, dvpp.Nv12):  # Stretch only (core.stream.emulation)
                plans.append(imaging.plan_resize(*self.size(image), stage))
                image, kind = dvpp.resize(image, (stage.width, stage.height), stage.interpolation), "resize"
            else:
                image, plan = imaging.resize(image, stage, rgb)
                plans.append(plan)
                kind = "resize"
            if timings is not None:
                timings[kind] = timings.get(kind, 0.0) + time.perf_counter() - clock
        return image, rgb, box, crop_size, imaging.chain_plans(plans, crop_size)

    def segment(self, outputs: list[np.ndarray], crop_size: tuple[int, int], plan: imaging.ResizePlan,
                argmax: np.ndarray) -> np.ndarray:
        """The class map the stream's semantic segmentation post-processor gives, at model resolution."""
        seg = self.plan.segmentation
        if seg is None:
            return argmax
        last = self.resize_specs[-1].resize_type if self.resize_specs else ""
        keep_aspect = last in ("Resizer_KeepAspectRatio_Fit", "Resizer_KeepAspectRatio_FastRCNN")
        classes = seg.to_crop(seg.class_map(outputs[0]), crop_size, plan, keep_aspect)
        # Back onto the model-resolution grid SegScope reports (nearest), so it lines up with probabilities.
        return cv2.resize(classes, argmax.shape[::-1], interpolation=cv2.INTER_NEAREST)

    def to_tensor(self, image: Image, rgb: bool, source: str = "<image>") -> np.ndarray:
        """What reaches the model (`run_stages`) -> the network input, by the card's AIPP config (YUV444 from
        DVPP's NV12) or its preprocessing."""
        pixels = image.yuv444() if isinstance(image, dvpp.Nv12) else image
        self.check_model_image(pixels, rgb)
        return make_tensor(pixels, self.card.preprocess, self.card.aipp, rgb, source)

    def check_model_image(self, pixels: np.ndarray, rgb: bool) -> None:
        """What reaches the model has its input size, and the card's colour is what its AIPP gives."""
        if pixels.shape[1::-1] != self.card.input_size:
            raise SegScopeError(f"the resized crop is {pixels.shape[1]}x{pixels.shape[0]} but the model takes "
                                f"{self.card.input_size[0]}x{self.card.input_size[1]}: use a padding resizeType")
        if self.card.aipp is not None:
            check_aipp_color(self.card.preprocess, self.card.aipp, rgb, str(self.card.path))

    def prepare(self, image: ImageSource, roi: Roi | None, max_pixels: int = DEFAULT_MAX_PIXELS) -> _Prepared:
        """Read, decode, run the stream's elements up to the model and make the network input (`to_tensor`).
        A file's crop box comes through the decoded-input cache where the box is the decoder's pixels
        (`region_of`): the stream then runs on that region, as on a slide region read."""
        clock = time.perf_counter()
        placement = None
        if isinstance(image, np.ndarray):
            source = "<image array>"
            decoded = self.decoded(image, source)
        else:
            source = str(image) if isinstance(image, Path) else "<image bytes>"
            data = read_bytes(image) if isinstance(image, Path) else image
            placement = self.region_of(data, roi) if isinstance(image, Path) else None
            region = image_region(data, source, placement.box, max_pixels) if placement is not None else None
            if region is not None:
                decoded, roi = self._formatted(region), None
            else:
                placement, decoded = None, self.decode(data, source, max_pixels)
        timings = {"decode": time.perf_counter() - clock, "crop": 0.0, "resize": 0.0, "preprocess": 0.0}
        pixels, rgb, box, crop_size, plan = self.run_stages(decoded, roi, source, timings)
        clock = time.perf_counter()
        tensor = self.to_tensor(pixels, rgb, source)
        timings["preprocess"] += time.perf_counter() - clock
        if placement is not None:
            return _Prepared(tensor, plan, placement.to_slide(box), placement.slide_size, crop_size, timings)
        return _Prepared(tensor, plan, box, self.size(decoded), crop_size, timings)

    def region_of(self, data: bytes, roi: Roi | None) -> Placement | None:
        """Where the stream's crop of `roi` (None: the whole image) lies in the file `data`, when the opencv
        decoder's BGR pixels of that box are all the stream needs of the file; None where the whole decode
        must run (DVPP, a 4-channel model, a header that cannot be read, a box the crop would refuse: the
        decode says why)."""
        if self.plan.decoder.dvpp or decode_flag(self.card.preprocess) != cv2.IMREAD_COLOR:
            return None
        size = header_size(data)
        if size is None:
            return None
        whole = Roi.whole(*size)
        if roi is not None and roi != whole and not self.crops:
            return None  # refused by run_stages
        box = imaging.crop_box(roi, self.plan.expand, *size) if roi is not None else whole
        return Placement(box, size) if imaging.croppable(box, *size) else None

    def finish(self, outputs: list[np.ndarray], prepared: _Prepared, timings: dict[str, float],
               backend: str) -> InferenceResult:
        """The model's outputs for one prepared image -> its result, post-processed back onto the crop;
        `timings` (the stages so far) gains "postprocess"."""
        clock = time.perf_counter()
        probabilities, argmax, threshold = postprocess(outputs, self.card)
        probabilities = np.ascontiguousarray(imaging.uncrop_content(probabilities, prepared.plan))
        argmax = np.ascontiguousarray(imaging.uncrop_content(argmax, prepared.plan))
        argmax = self.segment(outputs, prepared.crop_size, prepared.plan, argmax)
        timings["postprocess"] = time.perf_counter() - clock
        return InferenceResult(probabilities, argmax, prepared.box, prepared.image_size, timings, backend, threshold)


@dataclass(frozen=True)
class _Prepared:
    """One image made ready for the model: its tensor and what post-processing needs to map results back."""

    tensor: np.ndarray
    plan: imaging.ResizePlan
    box: Roi  # the crop actually taken, in slide pixels
    image_size: tuple[int, int]
    crop_size: tuple[int, int]
    timings: dict[str, float]


class EmbeddedBackend(Backend):
    """Run a `.pipeline` on this machine's CPU."""

    def __init__(self, pipeline: Pipeline | Path, threads: int | None = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS, read_ahead: int = 2):
        self.stream = EmbeddedStream(pipeline if isinstance(pipeline, Pipeline) else load_pipeline(pipeline))
        self.max_pixels = max_pixels
        # Images `infer_many` prepares, each on its own thread, beside the one run: two decode on both cores
        # while the model runs (1.17-1.5x images/s over one on 2 cores, bench/RESULTS.md).
        self.read_ahead = read_ahead
        self.session: ort.InferenceSession | None = open_session(self.stream.card, threads)
        card = self.stream.card
        threads_used = self.session.get_session_options().intra_op_num_threads
        self.capabilities = Capabilities(
            name="embedded",
            device=f"CPU (ONNX Runtime {ort.__version__}, {threads_used} threads)",
            input_size=card.input_size,
            class_names=card.class_names,
            details={"model": str(card.onnx), "card": str(card.path), "pipeline": str(self.stream.pipeline.path),
                     **card.truth_details(),
                     "opencv": cv2.__version__, "onnxruntime": ort.__version__,
                     **({"note": dvpp.NOTE} if self.stream.plan.decoder.dvpp else {}),
                     **({"stream": self.stream.pipeline.choice()} if self.stream.pipeline.has_choices else {})},
        )

    def infer(self, image: ImageSource, roi: Roi | None = None) -> InferenceResult:
        return self.run(self.prepare(image, roi))

    def infer_many(self, requests: Iterable[InferenceRequest]) -> Iterator[InferenceResult]:
        """Results in request order; the next image is read, decoded and made a tensor on a second thread
        while the current one is inferred (OpenCV and ONNX Runtime release the GIL, so a thread suffices).

        An image that fails to prepare (or a request that fails to be made) raises when its turn comes, after
        the results before it.
        """
        return read_ahead(requests, lambda r: self.prepare(r.image, r.roi), self.run, self.read_ahead,
                          "segscope-prepare")

    def prepare(self, image: ImageSource, roi: Roi | None = None) -> _Prepared:
        """Read, decode, run the stream's elements up to the model and make the network input."""
        return self.stream.prepare(image, roi, self.max_pixels)

    def run(self, prepared: _Prepared, session: ModelSession | None = None) -> InferenceResult:
        """The model (this backend's session, or `session` in its place) and the post-processing of one
        prepared image."""
        if self.session is None:
            raise BackendError("the embedded backend is closed; open a new one")
        timings = dict(prepared.timings)
        start = time.perf_counter()
        outputs = (session or self.session).run(None, {self.stream.card.input_name: prepared.tensor})
        timings["infer"] = time.perf_counter() - start
        return self.stream.finish(outputs, prepared, timings, "embedded")

    def close(self) -> None:
        self.session = None


def open_here(pipeline: Path, max_pixels: int, sdk_home: Path | None) -> EmbeddedBackend:
    """The registry's opener (`core.backends.registry`); no SDK is involved."""
    return EmbeddedBackend(pipeline, max_pixels=max_pixels)


def open_on_devices(pipeline: Path, devices: Sequence[int], max_pixels: int = DEFAULT_MAX_PIXELS,
                    sdk_home: Path | None = None) -> DevicePool:
    """One ONNX Runtime session per id, the cores split between them (`--devices` on the embedded backend)."""
    loaded = load_pipeline(pipeline)
    threads = max(1, (os.cpu_count() or 1) // len(devices))
    return device_pool(lambda _device: EmbeddedBackend(loaded, threads=threads, max_pixels=max_pixels), devices,
                       "session")

