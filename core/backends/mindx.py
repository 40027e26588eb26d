"""The MindX SDK backend: runs a `.pipeline` on an Ascend host through the SDK's `StreamManagerApi`.

It follows `docs/mindx-sdk-contract.md` (the shared contract):

- Every string handed to the SDK is `bytes`; `GetResult`'s second argument is the appsink index (0).
- The SDK runs one set of streams per process: `InitManager` once, `CreateMultipleStreams` once (with the
  pipeline's `modelPath` made absolute, since the SDK resolves it against the working directory) and
  `DestroyAllStreams` once: on `close`, when opening fails, after a fatal stream error, and at exit.
  A second backend in the same process is refused with a message saying so.
- All SDK calls run on one daemon thread (`mindx_sdk`): the SDK wants a single caller thread, and
  `GetProtobuf` has no timeout, so the caller waits with one and a stuck call can neither hang the app nor
  its exit.
- Results come back by one of three transports (`mindx_transports`): "protobuf" (the default), "json" or
  "unique_id"; `--devices` copies the stream once per device (`mindx_devices`).
- `infer_many` keeps up to `in_flight` images in the stream: it sends ahead and collects in order (by
  unique id, or first-in first-out from the appsink queue, which keeps one result per input).
- Output roles (softmax/argmax...) come from the model card.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

import numpy as np

from ..card.reader import load_model_card, postprocess
from ..compat import TIMEOUTS
from ..errors import BackendError, SegScopeError
from ..files.fileio import DEFAULT_MAX_PIXELS, decode_image, image_header_size, read_bytes
from ..roi import Roi
from ..stream import imaging
from ..stream.emulation import Crop, drive_problem, resize_specs, sized, stream_crop
from ..stream.loader import load_pipeline
from ..stream.pipeline import Pipeline, Stream
from .base import (
    Backend,
    Capabilities,
    ImageSource,
    InferenceRequest,
    InferenceResult,
    check_pixels,
    encode_png,
    keep_in_flight,
)
from .mindx_devices import StreamDealer, copy_per_device
from .mindx_env import import_sdk, sdk_problem
from .mindx_sdk import RESTART_HINT, SdkSession
from .mindx_transports import TRANSPORTS, Pending, Transport

#: The SDK's appsink queue holds at most this many results.
MAX_IN_FLIGHT = 256


class MindXBackend(Backend):
    """Run a `.pipeline` through the MindX SDK on this (Ascend) machine."""

    takes_pixels = False  # a decoded array is encoded to PNG again for the stream's decoder

    def __init__(self, pipeline: Path | Pipeline, sdk_home: Path | None = None, *, transport: str = "auto",
                 in_flight: int = 4, timeout_s: float = 30.0, max_pixels: int = DEFAULT_MAX_PIXELS,
                 devices: Sequence[int] | None = None):
        self.pipeline = pipeline if isinstance(pipeline, Pipeline) else load_pipeline(pipeline)
        stream = self.pipeline.stream
        where = f"{self.pipeline.path}: stream {stream.name!r}"
        problem = drive_problem(stream)
        if problem:
            raise BackendError(f"{self.pipeline.path}: {problem}: SegScope sends images")
        if stream.input_element.factory != "appsrc" or stream.output_element.factory != "appsink":
            raise BackendError(f"{where}: must start with an appsrc and end with an appsink")
        if transport not in TRANSPORTS:
            raise BackendError(f"MindX transport {transport!r}: use one of {', '.join(TRANSPORTS)}")
        if not 1 <= in_flight <= MAX_IN_FLIGHT:
            raise BackendError(f"MindX in_flight {in_flight}: use 1..{MAX_IN_FLIGHT} "
                               f"(the appsink queue's size)")
        infer_element = stream.model_element
        if infer_element is None:
            raise BackendError(f"{where}: runs no model (no mxpi_tensorinfer or mxpi_modelinfer element)")
        model_path = self.pipeline.model_path()
        if not model_path.is_file():
            raise BackendError(f"{where}: modelPath {model_path} not found "
                               f"(relative paths start at {self.pipeline.project_root})")
        self.card = load_model_card(model_path)
        try:
            self._resizes: tuple[imaging.ResizeSpec, ...] | None = \
                sized(resize_specs(self.pipeline), self.card.input_size)
            crop = stream_crop(self.pipeline)
        except SegScopeError:
            self._resizes = None  # a resize or crop SegScope cannot place: outputs are returned uncropped
            crop = next((Crop(e.name) for e in stream.driven_path if e.factory == "mxpi_imagecrop"), None)
        #: The stream's crop of the ROI box (None: the SDK resizes the whole image and ignores the box).
        self._crop = crop
        self.transport = "protobuf" if transport == "auto" else transport
        self._results = Transport(self.transport, infer_element.name, timeout_s)
        self.in_flight = in_flight
        self.timeout_s = timeout_s
        self.max_pixels = max_pixels
        self._devices = tuple(devices) if devices is not None else None
        # Every SDK version takes index 0 for appsrc0; sending by element name needs a recent one.
        appsrc = stream.input_element.name
        self._appsrc: int | bytes = 0 if appsrc == "appsrc0" else appsrc.encode()
        self._cancel = threading.Event()
        self._session: SdkSession | None = None
        config = self._stream_config(stream, where)
        self.sdk = import_sdk(sdk_home)
        self._session = SdkSession.open(self.sdk, config)
        device = stream.config.get("deviceId", "0")
        if self._devices is not None:
            device = ",".join(map(str, self._devices))
            self.usage = self._dealer.usage
            self.in_flight = in_flight * len(self._devices)
        self.capabilities = Capabilities(
            name="mindx",
            device=f"Ascend device{'s' if self._devices and len(self._devices) > 1 else ''} {device} "
                   f"(MindX SDK {self.sdk.version})",
            input_size=self.card.input_size,
            class_names=self.card.class_names,
            details={"sdk": str(self.sdk.home or "PYTHONPATH"), "sdk_version": self.sdk.version,
                     "transport": self.transport, "in_flight": str(in_flight), "model": str(model_path),
                     **self.card.truth_details(), "card": str(self.card.path), "pipeline": str(self.pipeline.path),
                     **({"stream": self.pipeline.choice()} if self.pipeline.has_choices else {})},
        )

    def _stream_config(self, stream: Stream, where: str) -> bytes:
        """The pipeline JSON for CreateMultipleStreams, shaped for the chosen transport, the stream copied once
        per device with `--devices`."""
        config = json.loads(self.pipeline.with_absolute_paths())
        self._results.shape(config, stream, where)
        devices = self._devices or (int(stream.config.get("deviceId") or 0),)
        names = copy_per_device(config, stream.name, devices) if self._devices else [stream.name]
        self._dealer = StreamDealer(names, [f"device {d}" for d in devices])
        return json.dumps(config).encode()

    # -- requests ---------------------------------------------------------------------------------------

    def infer(self, image: ImageSource, roi: Roi | None = None) -> InferenceResult:
        self._cancel.clear()
        return self._collect(self._submit(InferenceRequest(image, roi)))

    def infer_many(self, requests: Iterable[InferenceRequest]) -> Iterator[InferenceResult]:
        """Results in request order, with up to `in_flight` images in the stream at once. A request that
        cannot be made or sent (an unreadable file) raises in its turn, after the results before it."""
        self._cancel.clear()
        return keep_in_flight(requests, self._submit, self._collect, self.in_flight, self._drain)

    def cancel(self) -> None:
        self._cancel.set()

    def _open_session(self) -> SdkSession:
        if self._session is None or self._session.destroyed:
            raise BackendError(f"the MindX backend is closed; {RESTART_HINT}")
        return self._session

    def _submit(self, request: InferenceRequest) -> Pending:
        session = self._open_session()
        image = request.image
        if isinstance(image, np.ndarray):  # decoded pixels: as a lossless PNG, which the decoder gives back
            source = "<image array>"
            data = encode_png(check_pixels(image), source)
        else:
            source = str(image) if isinstance(image, Path) else "<image bytes>"
            data = read_bytes(image) if isinstance(image, Path) else image
        size = image_header_size(data)
        if size is None:  # not PNG/JPEG: decode here just to learn the size
            decoded = decode_image(data, source, max_pixels=self.max_pixels)
            size = (decoded.shape[1], decoded.shape[0])
        roi = request.roi or Roi.whole(*size)
        if self._crop is None and roi != Roi.whole(*size):
            raise BackendError(f"{self.pipeline.path}: the stream has no mxpi_imagecrop, so MindX ignores an ROI and "
                               f"resizes the whole image; crop ROI {roi} before the stream (segscope eval --roi "
                               "and the viewer do)")
        api = self.sdk.api
        item = api.MxDataInput()
        item.data = data
        box = api.RoiBox()
        box.x0, box.y0, box.x1, box.y1 = (float(v) for v in roi.as_tuple())
        boxes = api.RoiBoxVector()
        boxes.push_back(box)
        item.roiBoxs = boxes
        start = time.perf_counter()
        stream = self._dealer.take().encode()
        try:
            ticket = self._results.send(session, stream, self._appsrc, item)
        except BaseException:
            self._dealer.done(stream.decode(), start, ok=False)
            raise
        # The crop plugin widens the box by its expand ratios and clips x1/y1.
        crop = imaging.crop_box(roi, self._crop.expand, *size) if self._crop else roi
        return Pending(ticket, roi, crop, size, source, {"upload": time.perf_counter() - start}, request.placement,
                        stream, start)

    def _collect(self, pending: Pending) -> InferenceResult:
        session = self._open_session()
        fn, args, call = self._results.receive_call(session, self.sdk, pending)
        start = time.perf_counter()
        received = False
        try:  # GetProtobuf has no timeout of its own; the others get a margin over theirs
            output = session.call(fn, *args, timeout=self.timeout_s + (0 if call == "GetProtobuf" else 10),
                                  cancel=self._cancel)
            received = True
        except TIMEOUTS:
            self._fail(f"MindX {call} returned nothing within {self.timeout_s:g} s for {pending.source}")
        finally:
            self._dealer.done(pending.stream.decode(), pending.sent, ok=received)
        pending.timings["infer"] = time.perf_counter() - start
        start = time.perf_counter()
        tensors = self._results.tensors(self.sdk, call, output, pending, self._fail)
        if len(tensors) != len(self.card.outputs):
            raise BackendError(f"{self.card.path}: lists {len(self.card.outputs)} outputs but {self._results.key} "
                               f"returned {len(tensors)}: fix the card's 'outputs'")
        probabilities, argmax, threshold = postprocess(tensors, self.card)
        if self._resizes is not None:
            plan = imaging.plan_chain(pending.box.width, pending.box.height, self._resizes)
            probabilities = np.ascontiguousarray(imaging.uncrop_content(probabilities, plan))
            argmax = np.ascontiguousarray(imaging.uncrop_content(argmax, plan))
        pending.timings["postprocess"] = time.perf_counter() - start
        result = InferenceResult(probabilities, argmax, pending.box, pending.image_size, pending.timings, "mindx",
                                 threshold)
        return pending.placement.place(result) if pending.placement else result

    def _drain(self, pending: list[Pending]) -> None:
        """Consume the results of abandoned requests so later requests get their own (calls are queued)."""
        session = self._session
        if session is None or session.destroyed or session.stuck:
            return
        for item in pending:
            fn, args, _ = self._results.receive_call(session, self.sdk, item)
            session.thread.submit(fn, *args)

    # -- teardown -----------------------------------------------------------------------------------------

    def _fail(self, message: str) -> NoReturn:
        """A fatal stream error: destroy the streams and raise."""
        if self._session is not None:
            self._session.destroy(quiet=True)
        raise BackendError(f"{message}; {RESTART_HINT}")

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.destroy()


def open_here(pipeline: Path, max_pixels: int, sdk_home: Path | None) -> MindXBackend:
    """The stream on the pipeline's device (the registry's opener; see `core.backends.registry`)."""
    return MindXBackend(pipeline, sdk_home, max_pixels=max_pixels)


def open_on_devices(pipeline: Path, devices: Sequence[int], max_pixels: int, sdk_home: Path | None) -> MindXBackend:
    """The stream copied once per device, in one process (`mindx_devices`)."""
    return MindXBackend(pipeline, sdk_home, max_pixels=max_pixels, devices=devices)


def unavailable(sdk_home: Path | None) -> str:
    """Why the SDK cannot be found here ("" when it can), nothing imported."""
    return sdk_problem(sdk_home)
