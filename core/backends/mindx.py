"""The MindX SDK backend: runs a `.pipeline` on an Ascend host through the SDK's `StreamManagerApi`.

It follows `docs/mindx-sdk-contract.md` (the shared contract):

- Every string handed to the SDK is `bytes`; `GetResult`'s second argument is the appsink index (0).
- The SDK runs one set of streams per process: `InitManager` once, `CreateMultipleStreams` once (with the
  pipeline's `modelPath` made absolute, since the SDK resolves it against the working directory) and
  `DestroyAllStreams` once: on `close`, when opening fails, after a fatal stream error, and at exit.
  A second backend in the same process is refused with a message saying so.
- All SDK calls run on one daemon thread: the SDK wants a single caller thread, and `GetProtobuf` has no
  timeout, so the caller waits with one and a stuck call can neither hang the app nor its exit.
- Results (`transport`):
  - "protobuf" (the default): `SendData` + `GetProtobuf` on the tensorinfer key, raw tensor bytes read
    with `np.frombuffer` (dtype from `tensorDataType`). A `mxpi_dumpdata` right before the appsink is left
    out of the stream it creates, because it replaces the buffer (and its metadata) with JSON.
  - "json": `SendData` + `GetResult` on a stream that ends in `mxpi_dumpdata` (base64 JSON, slow).
  - "unique_id": `SendDataWithUniqueId` + `GetResultWithUniqueId` on such a stream.
  The first send fixes the SDK's mode, so one backend uses one transport for all its requests.
- `infer_many` keeps up to `in_flight` images in the stream: it sends ahead and collects in order (by
  unique id, or first-in first-out from the appsink queue, which keeps one result per input).
- A result without a tensorinfer entry (no valid ROI box: the crop plugin passes the buffer on) is an
  error, never an empty result. Output roles (softmax/argmax...) come from the model card.
"""

from __future__ import annotations

import atexit
import base64
import json
import math
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from .. import imaging
from ..compat import TIMEOUTS
from ..emulation import Crop, drive_problem, resize_specs, sized, stream_crop
from ..errors import BackendError, CancelledError, SegScopeError
from ..fileio import DEFAULT_MAX_PIXELS, decode_image, image_header_size, read_bytes
from ..model_card import load_model_card, postprocess
from ..pipeline import Element, Pipeline, Stream, load_pipeline
from ..remote.crop_upload import encode_png
from ..result import Placement
from ..roi import Roi
from .base import Backend, Capabilities, ImageSource, InferenceRequest, InferenceResult, check_pixels, keep_in_flight
from .mindx_devices import StreamDealer, copy_per_device
from .mindx_env import MindXSdk, import_sdk

TRANSPORTS = ("auto", "protobuf", "json", "unique_id")

#: The SDK's appsink queue holds at most this many results.
MAX_IN_FLIGHT = 256

#: `MxpiTensor.tensorDataType` -> numpy dtype (MxBase TensorDataType.h).
TENSOR_DTYPES = {0: "<f4", 1: "<f2", 2: "i1", 3: "<i4", 4: "u1", 6: "<i2", 7: "<u2", 8: "<u4", 9: "<i8",
                 10: "<u8", 11: "<f8", 12: "?"}

#: Return codes (MxBase ErrorCodes.h) and what they mean.
ERROR_MEANINGS = {
    -1: "not initialised, or the send failed",
    1001: "general failure", 1002: "internal error (GetResult timed out)",
    1004: "invalid parameter (also a failed opencv decode)", 1011: "timeout",
    1013: "initialisation failed (e.g. a bad plugin property)", 1016: "not found",
    2001: "crop failed: no valid ROI box", 2006: "JPEG decode failed",
    6001: "stream already exists", 6002: "stream does not exist", 6003: "stream state change failed",
    6004: "stream creation failed", 6005: "invalid stream config", 6006: "invalid link or plugin id",
    6008: "transmission mode mismatch (plain vs unique-id sends)", 6010: "stream timeout",
    6014: "unknown plugin factory", 6015: "invalid plugin properties",
    7011: "metadata key missing", 7013: "metadata is null",
}
_LOG_HINT = "details are in the MindX log (~/log/mindxsdk/logs or $MX_SDK_HOME/logs)"
_RESTART = ("the MindX streams are destroyed; restart segscope to run again "
            "(the SDK creates streams once per process)")


def error_meaning(code: int) -> str:
    if code in ERROR_MEANINGS:
        return ERROR_MEANINGS[code]
    if 3001 <= code <= 3010:
        return "model inference failed"
    if 5001 <= code <= 5003:
        return "queue error"
    return "ACL/CANN error" if code >= 100000 else "unknown code"


def _check(call: str, code: int, message: bytes = b"", hint: str = "") -> None:
    """A non-zero return code as a one-line BackendError with the SDK's own message(s)."""
    if code != 0:
        lines = message.decode("utf-8", "replace").splitlines()
        text = " | ".join(line.strip() for line in lines if line.strip())
        raise BackendError(f"MindX {call} failed with code {code} ({error_meaning(code)}): "
                           f"{text or _LOG_HINT}{hint}")


class _SdkThread:
    """One daemon thread that makes every SDK call, in submission order."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = \
            queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="mindx-sdk", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                    future.set_exception(exc)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._jobs.put((future, fn, args))
        return future

    def stop(self) -> None:
        self._jobs.put(None)


@dataclass
class _ProcessState:
    """What the SDK allows once per process."""

    session: _SdkSession | None = None
    streams_used: bool = False
    atexit_registered: bool = False


_PROCESS = _ProcessState()


def _destroy_at_exit() -> None:
    if _PROCESS.session is not None:
        try:
            _PROCESS.session.destroy()
        except SegScopeError:
            pass  # nothing left to tell at exit


class _SdkSession:
    """The process's StreamManagerApi: initialised once, streams created once and destroyed once."""

    def __init__(self, sdk: MindXSdk) -> None:
        self.sdk = sdk
        self.thread = _SdkThread()
        self.stuck = False  # a call never returned: the thread is blocked for good
        self.destroyed = False
        self.api = self.call(sdk.api.StreamManagerApi)

    @classmethod
    def open(cls, sdk: MindXSdk, config: bytes) -> _SdkSession:
        if _PROCESS.session is not None:
            raise BackendError("a MindX backend is already open in this process (the SDK runs one set of "
                               "streams per process): close it before opening another")
        if _PROCESS.streams_used:
            raise BackendError("MindX streams were already created and destroyed in this process and the SDK "
                               "cannot create them again: restart segscope to open a pipeline")
        session = cls(sdk)
        _PROCESS.session, _PROCESS.streams_used = session, True
        if not _PROCESS.atexit_registered:
            atexit.register(_destroy_at_exit)
            _PROCESS.atexit_registered = True
        try:
            _check("InitManager", session.call(session.api.InitManager))
            _check("CreateMultipleStreams", session.call(session.api.CreateMultipleStreams, config))
        except BaseException:
            session.destroy(quiet=True)
            raise
        return session

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None,
             cancel: threading.Event | None = None) -> Any:
        """Run `fn(*args)` on the SDK thread; TimeoutError after `timeout` s (the call goes on there)."""
        if self.stuck:
            raise BackendError(f"the MindX SDK thread is blocked in an earlier call; {_RESTART}")
        future = self.thread.submit(fn, *args)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return future.result(timeout=0.05)
            except TIMEOUTS:
                if cancel is not None and cancel.is_set():
                    raise CancelledError("MindX request cancelled") from None
                if deadline is not None and time.monotonic() > deadline:
                    self.stuck = True
                    raise

    def destroy(self, quiet: bool = False) -> None:
        """DestroyAllStreams once: on the SDK thread, or from here when a call blocks that thread
        (a GetProtobuf waiting for a result that will not come); destroying the streams releases it."""
        if self.destroyed:
            return
        self.destroyed = True
        try:
            future = None if self.stuck else self.thread.submit(self.api.DestroyAllStreams)
            try:
                code = self.api.DestroyAllStreams() if future is None else future.result(timeout=5)
            except TIMEOUTS:
                assert future is not None  # only the future's result times out
                code = self.api.DestroyAllStreams() if future.cancel() else future.result(timeout=60)
            if not quiet:
                _check("DestroyAllStreams", code)
        except TIMEOUTS:
            if not quiet:
                raise BackendError("MindX DestroyAllStreams did not return within 60 s") from None
        finally:
            self.thread.stop()
            _PROCESS.session = None


@dataclass
class _Pending:
    """An image sent into the stream, waiting for its result."""

    ticket: int | None  # the unique id, or None for first-in first-out collection
    roi: Roi  # as requested
    box: Roi  # as cropped: x1/y1 clipped to the image
    image_size: tuple[int, int]
    source: str
    timings: dict[str, float] = field(default_factory=dict)
    placement: Placement | None = None  # the request's (a slide region): results map back to the slide
    stream: bytes = b""  # the stream (device) it was sent to
    sent: float = 0.0  # time.perf_counter() at the send


def _sink_feeder(stream: Stream) -> Element | None:
    """The element right before the stream's appsink, if there is exactly one."""
    feeders = [e for e in stream.elements.values() if stream.output_element.name in e.next]
    return feeders[0] if len(feeders) == 1 else None


def _without_element(config: dict[str, Any], stream: str, name: str) -> None:
    """Drop element `name` from a pipeline JSON, linking what fed it to what it fed."""
    elements = config[stream]
    removed = elements.pop(name)
    after = removed.get("next", [])
    for element in elements.values():
        if not isinstance(element, dict) or "next" not in element:
            continue
        links = [element["next"]] if isinstance(element["next"], str) else element["next"]
        if any(link.split(":")[0] == name for link in links):
            element["next"] = after


def _tensor(key: str, index: int, code: int, shape: list[int], data: bytes) -> np.ndarray:
    dtype = TENSOR_DTYPES.get(code)
    if dtype is None:
        raise BackendError(f"{key}: output {index} has tensorDataType {code}, not a MindX tensor type")
    expected = math.prod(shape) * np.dtype(dtype).itemsize
    if len(data) != expected:
        raise BackendError(f"{key}: output {index} holds {len(data)} bytes but shape {shape} of "
                           f"{np.dtype(dtype)} needs {expected} (mxpi_dumpdata with dumpMemoryData false "
                           f"sends no tensor data)")
    return np.frombuffer(data, dtype).reshape(shape)


class MindXBackend(Backend):
    """Run a `.pipeline` through the MindX SDK on this (Ascend) machine."""

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
        self.in_flight = in_flight
        self.timeout_s = timeout_s
        self.max_pixels = max_pixels
        self._devices = tuple(devices) if devices is not None else None
        # Every SDK version takes index 0 for appsrc0; sending by element name needs a recent one.
        appsrc = stream.input_element.name
        self._appsrc: int | bytes = 0 if appsrc == "appsrc0" else appsrc.encode()
        self._key = infer_element.name
        self._cancel = threading.Event()
        self._session: _SdkSession | None = None
        config = self._stream_config(stream, where)
        self.sdk = import_sdk(sdk_home)
        self._session = _SdkSession.open(self.sdk, config)
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
                     "card": str(self.card.path), "pipeline": str(self.pipeline.path),
                     **({"stream": self.pipeline.choice()} if self.pipeline.has_choices else {})},
        )

    def _stream_config(self, stream: Stream, where: str) -> bytes:
        """The pipeline JSON for CreateMultipleStreams, shaped for the chosen transport."""
        config = json.loads(self.pipeline.with_absolute_paths())
        feeder = _sink_feeder(stream)
        dump = feeder if feeder is not None and feeder.factory == "mxpi_dumpdata" \
            and not feeder.props.get("location") else None
        if self.transport == "protobuf" and dump is not None:
            _without_element(config, stream.name, dump.name)
        devices = self._devices or (int(stream.config.get("deviceId") or 0),)
        names = copy_per_device(config, stream.name, devices) if self._devices else [stream.name]
        self._dealer = StreamDealer(names, [f"device {d}" for d in devices])
        if self.transport == "protobuf":
            return json.dumps(config).encode()
        if dump is None:
            raise BackendError(f"{where}: transport {self.transport!r} reads mxpi_dumpdata's JSON, but no "
                               f"mxpi_dumpdata (without 'location') feeds the appsink: "
                               f"use transport 'protobuf'")

        def keys(prop: str) -> list[str]:
            return [k.strip() for k in dump.props.get(prop, "").split(",") if k.strip()]

        if (keys("requiredMetaDataKeys") and self._key not in keys("requiredMetaDataKeys")) \
                or self._key in keys("filterMetaDataKeys"):
            raise BackendError(f"{where}, element {dump.name!r}: its metadata keys leave out {self._key!r}: "
                               f"set requiredMetaDataKeys to {self._key!r}")
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

    def _open_session(self) -> _SdkSession:
        if self._session is None or self._session.destroyed:
            raise BackendError(f"the MindX backend is closed; {_RESTART}")
        return self._session

    def _submit(self, request: InferenceRequest) -> _Pending:
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
            if self.transport == "unique_id":
                ticket = session.call(session.api.SendDataWithUniqueId, stream, self._appsrc, item)
                if ticket < 0:
                    _check("SendDataWithUniqueId", ticket)
            else:
                _check("SendData", session.call(session.api.SendData, stream, self._appsrc, item))
                ticket = None
        except BaseException:
            self._dealer.done(stream.decode(), start, ok=False)
            raise
        # The crop plugin widens the box by its expand ratios and clips x1/y1.
        crop = imaging.crop_box(roi, self._crop.expand, *size) if self._crop else roi
        return _Pending(ticket, roi, crop, size, source, {"upload": time.perf_counter() - start}, request.placement,
                        stream, start)

    def _receive_call(self, pending: _Pending) -> tuple[Callable[..., Any], tuple[Any, ...], str]:
        api, timeout_ms = self._open_session().api, int(self.timeout_s * 1000)
        if self.transport == "protobuf":
            keys = self.sdk.api.StringVector()
            keys.push_back(self._key.encode())
            return api.GetProtobuf, (pending.stream, 0, keys), "GetProtobuf"
        if self.transport == "json":
            return api.GetResult, (pending.stream, 0, timeout_ms), "GetResult"
        return api.GetResultWithUniqueId, (pending.stream, pending.ticket, timeout_ms), "GetResultWithUniqueId"

    def _collect(self, pending: _Pending) -> InferenceResult:
        session = self._open_session()
        fn, args, call = self._receive_call(pending)
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
        tensors = self._parse_protobuf(output, pending) if call == "GetProtobuf" \
            else self._parse_json(call, output, pending)
        if len(tensors) != len(self.card.outputs):
            raise BackendError(f"{self.card.path}: lists {len(self.card.outputs)} outputs but {self._key} "
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

    def _drain(self, pending: list[_Pending]) -> None:
        """Consume the results of abandoned requests so later requests get their own (calls are queued)."""
        session = self._session
        if session is None or session.destroyed or session.stuck:
            return
        for item in pending:
            fn, args, _ = self._receive_call(item)
            session.thread.submit(fn, *args)

    # -- results ------------------------------------------------------------------------------------------

    def _no_result(self, pending: _Pending) -> BackendError:
        width, height = pending.image_size
        return BackendError(f"MindX stream {pending.stream.decode()!r} returned no {self._key} result for "
                            f"ROI {pending.roi} of the {width}x{height} image {pending.source}: the crop "
                            f"plugin found no valid box (keep it inside the image, 1..8192 px per side) or a "
                            f"plugin failed ({_LOG_HINT})")

    def _parse_protobuf(self, outputs: Any, pending: _Pending) -> list[np.ndarray]:
        package_list = None
        for output in outputs:
            _check("GetProtobuf", output.errorCode, output.messageName)
            if output.messageName == self._key.encode():
                package_list = self.sdk.proto.MxpiTensorPackageList()
                package_list.ParseFromString(output.messageBuf)
        if package_list is None or not package_list.tensorPackageVec:
            raise self._no_result(pending)
        return [_tensor(self._key, i, t.tensorDataType, list(t.tensorShape), t.dataStr)
                for i, t in enumerate(package_list.tensorPackageVec[0].tensorVec)]

    def _parse_json(self, call: str, output: Any, pending: _Pending) -> list[np.ndarray]:
        if output.errorCode != 0:
            hint = ""
            if output.errorCode == 2001:
                hint = f" (ROI {pending.roi} of the {pending.image_size[0]}x{pending.image_size[1]} image " \
                       f"{pending.source}: keep it inside the image, 1..8192 px per side)"
            if output.errorCode == 1002 and self.transport == "json":
                # The late result would be read as the next image's: results are out of step for good.
                self._fail(f"MindX GetResult timed out after {self.timeout_s:g} s for {pending.source}")
            _check(call, output.errorCode, output.data, hint)
        try:
            document = json.loads(output.data)
            entry = next((m for m in document.get("metaData", []) if m.get("key") == self._key), None)
            if entry is None:
                raise self._no_result(pending)
            packages = json.loads(entry["content"]).get("tensorPackageVec") or []
            if not packages:
                raise self._no_result(pending)
            tensors = packages[0].get("tensorVec", [])
            return [_tensor(self._key, i, int(t.get("tensorDataType", 0)), [int(d) for d in t["tensorShape"]],
                            base64.b64decode(t.get("dataStr", "")))
                    for i, t in enumerate(tensors)]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BackendError(f"MindX {call}: the result is not mxpi_dumpdata JSON of {self._key} "
                               f"({exc})") from None

    # -- teardown -----------------------------------------------------------------------------------------

    def _fail(self, message: str) -> NoReturn:
        """A fatal stream error: destroy the streams and raise."""
        if self._session is not None:
            self._session.destroy(quiet=True)
        raise BackendError(f"{message}; {_RESTART}")

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.destroy()
