"""The remote backend: the stream runs on an Ascend host, driven over SSH from this machine.

On open it connects (verifying the host key), uploads the worker bundle and the pipeline's project files
to the host's cache (once per content hash), and starts one worker that keeps the stream open for the
whole session. Each `infer` sends the image bytes (their ROI crop where that is exact, or a path on the
host) and the ROI, and gets back the argmax and quantised, compressed probabilities. A dropped connection
or a dead worker fails the request in progress; the next request reconnects and starts a fresh worker.

With the cache on (`core.cache.settings`: not `--no-cache`), what a request would send has a content key (the
xxh3-128 of the file's bytes, and the crop's box where its ROI crop travels) and the worker keeps it in the
host's input cache (`core.remote.host_cache`, `inputs/` beside the worker under the remote cache folder, capped
at the cache's size): a request goes as its key alone, and its bytes (the crop cut and encoded only then)
follow only where the host asks for them (NEED). Once the host has asked, the next requests carry their bytes
along (a first run sends as it would without a cache, the upload overlapping the host's work), until a request
finds its input already there.
"""

from __future__ import annotations

import posixpath
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..backends.base import (
    STAGES,
    Backend,
    Capabilities,
    ImageSource,
    InferenceRequest,
    InferenceResult,
    check_pixels,
    encode_png,
    keep_in_flight,
    prepare_ahead,
)
from ..backends.registry import backend_kind
from ..cache import settings
from ..errors import BackendError, SegScopeError
from ..files.fileio import read_bytes
from ..result import Placement
from ..roi import Roi
from . import protocol
from .client import WorkerLost, WorkerSession, worker_command
from .connection import SshConnection, SshOptions, SshTarget, parse_target
from .crop_upload import CropUpload
from .deploy import DEFAULT_CACHE_DIR, hash_command, parse_hashes, project_bundle, upload, worker_bundle

#: The folder of the host's input cache, beside the worker's under the remote cache folder.
HOST_INPUTS = "inputs"
#: How content keys are made (`_prepare`): changed whenever that changes, so a key made otherwise never hits.
KEY_SCHEME = 1


@dataclass
class _Payload:
    """One INFER request made ready: its metadata, its image bytes (`make` makes them; `blob` once made), its
    content key (None: the bytes always travel), where the crop it carries lies (None: the file or a path) and
    the seconds spent making it."""

    meta: dict[str, object]
    make: Callable[[], bytes] | None  # None: a path on the host, nothing to send
    placement: Placement | None
    seconds: float
    key: str | None = None
    blob: bytes | None = None

    def data(self) -> bytes:
        """The bytes to send, made once."""
        if self.blob is None:
            assert self.make is not None  # (a request by path has no key: the host never asks for bytes)
            started = time.perf_counter()
            self.blob = self.make()
            self.seconds += time.perf_counter() - started
        return self.blob


@dataclass(frozen=True)
class _Sent:
    """An INFER on its way or queued on the host: what `_finish` needs to wait for and place its result."""

    request: InferenceRequest
    payload: _Payload
    session: WorkerSession
    request_id: int
    upload_seconds: float
    bytes_sent: int
    sent_at: float  # perf_counter() when it had been sent
    key_alone: bool  # sent as its content key without its bytes: the host may ask for them (NEED), once


class RemoteBackend(Backend):
    """Run a `.pipeline` on a host over SSH (`core.backend_spec.open_backend` opens it for a `RemoteHost`).

    `probabilities` sets how probabilities travel: "uint8" (smallest, within 1/510), "float16" (within
    2^-12) or "float32" (exact: metrics match a local run to the last digit). `host_pipeline` names a
    pipeline already on the host (nothing is uploaded then). With `host_dataset` (a folder on the host), a
    `Path` given to `infer` is a file on the host, not one to upload; the worker reads files only there and
    in the pipeline's project. With `crop_upload` (the default), an 8-bit PNG's ROI crop travels instead of
    the whole file where that is exact (core.remote.crop_upload). Decoded pixels (an array) travel as a
    lossless PNG. `timeout`: the longest the host may stay silent (its worker says it is alive every few
    seconds, also while it loads a model or infers) before the worker is stopped and the wait ends. The host's
    input cache is on where this process's cache is (`core.cache.settings`), with its size cap.
    """

    def __init__(self, pipeline: Path, target: SshTarget | str, ssh: SshOptions | None = None, *,
                 python: str = "python3", set_env: str | None = None, cache_dir: str = DEFAULT_CACHE_DIR,
                 host_pipeline: str | None = None, worker_backend: str = "auto",
                 probabilities: str = protocol.DEFAULT_PROBABILITIES,
                 max_pixels: int | None = None, host_dataset: str | None = None,
                 timeout: float = protocol.DEFAULT_TIMEOUT, crop_upload: bool = True):
        if probabilities not in protocol.PROBABILITY_DTYPES:
            raise SegScopeError(f"probabilities: choose one of {', '.join(protocol.PROBABILITY_DTYPES)}, "
                                f"got {probabilities!r}")
        backend_kind(worker_backend, "worker backend")  # the worker opens any kind of the registry
        self.connection = SshConnection(parse_target(target) if isinstance(target, str) else target,
                                        ssh or SshOptions())
        self.probabilities = probabilities
        self.host_dataset = host_dataset
        if not timeout > 0:
            raise SegScopeError(f"remote timeout: expected a positive number of seconds, got {timeout!r}")
        self.timeout = timeout
        self._cache_dir = cache_dir
        self._project = None if host_pipeline else project_bundle(pipeline)
        self._host_pipeline = host_pipeline
        #: Where exact (core.remote.crop_upload), requests carry the ROI crop, not the whole file.
        self.crop_upload = CropUpload.for_pipeline(pipeline, max_pixels) \
            if crop_upload and self._project is not None else None
        self._command_options = (python, worker_backend, max_pixels, set_env)
        cache = settings.current()
        #: The host's input cache's size cap (None: off, every request carries its bytes).
        self.host_cache_bytes = cache.size_bytes if cache.on else None
        self._expect_miss = False  # the host asked for the last request's bytes: send the next ones along
        #: Requests sent by content key, and how many of them the host's input cache served (nothing uploaded).
        self.keyed_requests = self.host_cache_hits = 0
        self._inputs_folder = ""
        self._cancel = threading.Event()
        self._busy = threading.Lock()  # held by a running `infer`; `close` from another thread waits for it
        self.session: WorkerSession | None = None
        #: Bytes (sent, received) over the channel by the last `infer`: its request and its result.
        self.last_transfer = (0, 0)
        try:
            self._start()
        except BaseException as exc:
            self.close(exc)
            raise
        hello = self.hello
        self.capabilities = Capabilities(
            name="remote",
            device=f"{self.connection.label}: {hello.get('backend')}, {hello.get('device')}",
            input_size=(int(hello["input_size"][0]), int(hello["input_size"][1])),
            class_names=tuple(str(c) for c in hello["class_names"]),
            details={**{k: str(v) for k, v in hello.get("details", {}).items()},
                     **{k: str(v) for k, v in hello.get("versions", {}).items()},
                     "host": self.connection.label, "remote backend": str(hello.get("backend")),
                     "fallback reason": str(hello.get("fallback_reason", ""))},
        )

    @property
    def hello(self) -> dict:
        """The running worker's HELLO: backend, device, versions, pid."""
        return self.session.hello if self.session else {}

    def _start(self) -> None:
        """Connect if needed, upload what is missing on the host, start a worker and read its HELLO."""
        if not self.connection.alive:
            self.connection.connect()
        python, backend, max_pixels, set_env = self._command_options
        label = self.connection.label

        def hash_files(paths: list[str]) -> dict[str, str | None]:
            status, output, errors = self.connection.run(hash_command(python, paths), timeout=self.timeout)
            if status != 0:
                raise BackendError(f"{label}: cannot check the cache files with {python} on the host "
                                    f"(exit status {status}: {(output + errors).strip()[-200:]}); set the remote "
                                    "python")
            return parse_hashes(output, paths, label)

        sftp = self.connection.sftp(self.timeout)
        try:
            worker_dir = upload(sftp, self._cache_dir, worker_bundle(), label, hash_files)
            if self._project is not None:
                bundle, pipeline_in_bundle = self._project
                pipeline = f"{upload(sftp, self._cache_dir, bundle, label, hash_files)}/{pipeline_in_bundle}"
            else:
                pipeline = str(self._host_pipeline)
        finally:
            sftp.close()
        self._inputs_folder = posixpath.join(posixpath.dirname(worker_dir), HOST_INPUTS)
        inputs = (self._inputs_folder, self.host_cache_bytes) if self.host_cache_bytes is not None else None
        launch = worker_command(python, worker_dir, pipeline, backend, max_pixels, set_env, self.host_dataset,
                                self.timeout, inputs)
        self.session = WorkerSession(self.connection, launch, self.timeout)

    def _ready_session(self) -> WorkerSession:
        session = self.session
        if session is None or session.dead or not self.connection.alive or session.channel.exit_status_ready():
            if session is not None:
                session.close(grace=0.5)
                self.session = None
            self._start()
        assert self.session is not None
        return self.session

    def infer(self, image: ImageSource, roi: Roi | None = None) -> InferenceResult:
        self._cancel.clear()
        request = InferenceRequest(image, roi)
        return self._finish(self._submit(request, self._prepare(request)), time.perf_counter())

    def infer_many(self, requests: Iterable[InferenceRequest]) -> Iterator[InferenceResult]:
        """Results in request order, pipelined: while the host works on one request the next is already
        sent (the worker queues it, so its upload overlaps the inference) and the one after it is read (and
        cropped) here on a second thread. A request that fails to prepare raises in its turn, after the
        results before it; closing early (an error, a cancel) asks the worker to drop what it has queued. A
        batch (a run) starts by sending keys alone, whatever the last one found in the host's input cache."""
        self._cancel.clear()
        self._expect_miss = False
        last_answer = [time.perf_counter()]

        def collect(sent: _Sent) -> InferenceResult:
            result = self._finish(sent, last_answer[0])
            last_answer[0] = time.perf_counter()
            return result

        ahead = prepare_ahead(requests, self._prepare, 1, "segscope-remote-prepare")
        try:  # two in flight: one on the host, one queued behind it
            yield from keep_in_flight(ahead, lambda item: self._submit(*item), collect, 2, self._drop)
        finally:
            ahead.close()

    def _prepare(self, request: InferenceRequest) -> _Payload:
        """The INFER of one request: a path on the host, the ROI crop, or the file; by content key where the
        host's input cache is on, its bytes made only where they go along (`_expect_miss`) or are asked for."""
        started = time.perf_counter()
        image, roi = request.image, request.roi
        meta: dict[str, object] = {"roi": list(roi.as_tuple()) if roi else None, "probabilities": self.probabilities}
        if isinstance(image, Path) and self.host_dataset:
            meta["path"] = image.as_posix()
            return _Payload(meta, None, None, time.perf_counter() - started)
        if isinstance(image, np.ndarray):  # decoded pixels: as a lossless PNG, which the host decodes back
            pixels = check_pixels(image)
            payload = _Payload(meta, lambda: encode_png(pixels, "<image array>"), None, 0.0)
        else:
            data = read_bytes(image) if isinstance(image, Path) else bytes(image)
            payload = self._file_payload(meta, data, str(image) if isinstance(image, Path) else "<image bytes>",
                                         roi)
        if payload.key is None or self._expect_miss:
            payload.data()
        payload.seconds += time.perf_counter() - started
        return payload

    def _file_payload(self, meta: dict[str, object], data: bytes, source: str, roi: Roi | None) -> _Payload:
        """A file's INFER: its ROI crop where that is exact (`CropUpload`), else the file; keyed by the file's
        content (and the crop's box) where the host's input cache is on."""
        cropper = self.crop_upload
        placement = cropper.placement(data, roi, source) if cropper is not None else None
        if cropper is not None and placement is not None:  # the crop's PNG, made when it is sent
            meta["roi"] = [0, 0, placement.box.width, placement.box.height]
            meta["decoded"] = True  # its pixels are what the host's decoder gives: it may keep them decoded
            payload = _Payload(meta, lambda: cropper.png(data, placement, source), placement, 0.0)
        else:
            crop = cropper.crop(data, roi, source) if cropper is not None else None
            if crop is not None:  # a box the plugin clips: cut here by the whole decode, never keyed
                meta["roi"] = [0, 0, crop.placement.box.width, crop.placement.box.height]
                return _Payload(meta, lambda: crop.png, crop.placement, 0.0)
            payload = _Payload(meta, lambda: data, None, 0.0)
        if self.host_cache_bytes is not None:
            from ..cache.store import content_digest  # xxhash: the client's (with the cache on)

            box = f"/{placement.box.as_tuple()}" if placement is not None else ""
            payload.key = meta["key"] = f"{KEY_SCHEME}/{content_digest(data)}{box}"
        return payload

    def _submit(self, request: InferenceRequest, payload: _Payload) -> _Sent:
        """Send one prepared request to the worker (started again first if it died) without waiting."""
        with self._busy:
            session = self._ready_session()
            sent = session.bytes_sent
            blobs = (payload.blob,) if payload.blob is not None else ()
            try:
                request_id, upload_seconds = session.send_request(payload.meta, blobs)
            except WorkerLost:
                self.session = None
                raise
            return _Sent(request, payload, session, request_id, upload_seconds, session.bytes_sent - sent,
                         time.perf_counter(), not blobs)

    def _finish(self, sent: _Sent, previous_done: float) -> InferenceResult:
        """Wait for `sent`'s result and place it. Its wait starts once it was sent, or once the answer before
        it arrived (`previous_done`), so a request queued behind another is not charged for that one. Where
        the host asks for its bytes, they are made and sent then."""
        with self._busy:
            session = sent.session
            received, uploaded = session.bytes_received, session.bytes_sent
            try:
                # a NEED for bytes that went along (or for a path on the host) is the host's protocol error
                msg = session.receive_result(sent.request_id, self._cancel,
                                             sent.payload.data if sent.key_alone else None)
            except WorkerLost:
                if self.session is session:
                    self.session = None
                raise
            self.last_transfer = (sent.bytes_sent + session.bytes_sent - uploaded,
                                  session.bytes_received - received)
        if sent.payload.key is not None:
            state = msg.meta.get("cache")
            self._expect_miss = state == "miss"
            self.keyed_requests += 1
            self.host_cache_hits += state == "hit"
        result = self._result(msg, sent.upload_seconds, max(previous_done, sent.sent_at))
        result.timings["upload"] += sent.payload.seconds  # reading (and cropping) the image here is part of sending it
        placement = sent.payload.placement
        return sent.request.place(placement.place(result) if placement is not None else result)

    def cache_note(self) -> str | None:
        keyed, hits = self.keyed_requests, self.host_cache_hits
        if not keyed:
            return None
        rest = "" if hits == keyed else "; the others were sent and kept for the next run"
        return (f"{hits} of {keyed} images came from the host's input cache ({self._inputs_folder} on "
                f"{self.connection.label}): nothing uploaded for them{rest}")

    def _drop(self, abandoned: list[_Sent]) -> None:
        """Ask the worker to drop requests nobody will wait for (their late answers are skipped)."""
        with self._busy:
            for sent in abandoned:
                if sent.session is not self.session or sent.session.dead:
                    continue
                try:
                    sent.session.cancel_request(sent.request_id)
                except (BackendError, OSError):
                    return  # the worker is gone: nothing to drop

    def _result(self, msg: protocol.Message, upload_seconds: float, waiting_since: float) -> InferenceResult:
        probabilities, argmax = protocol.decode_arrays(msg.meta, msg.blobs)
        waited = time.perf_counter() - waiting_since
        meta = msg.meta
        try:
            roi = Roi(*(int(v) for v in meta["roi"]))
            width, height = (int(v) for v in meta["image_size"])
            timings = {k: float(v) for k, v in meta["timings"].items() if k in STAGES}
            worker_seconds = float(meta["worker_seconds"])
            threshold = None if meta.get("threshold") is None else float(meta["threshold"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise protocol.ProtocolError(f"{self.connection.label}: RESULT metadata is malformed") from None
        timings["upload"] = upload_seconds
        # Everything after the upload not spent in the worker: the answer's transfer and decoding here.
        timings["download"] = max(0.0, waited - worker_seconds)
        return InferenceResult(probabilities, argmax, roi, (width, height), timings,
                               f"remote:{meta.get('backend', '')}", threshold)

    def cancel(self) -> None:
        self._cancel.set()

    def close(self, exc: BaseException | None = None) -> None:
        """Stop the worker and disconnect; a request running in another thread is cancelled first. Where
        `exc` is the user's Ctrl+C, in a second or two (`WorkerSession.close_after`)."""
        self._cancel.set()
        with self._busy:
            if self.session is not None:
                self.session.close_after(exc)
                self.session = None
            self.connection.close()

    def __exit__(self, *exc_info: object) -> None:
        exc = exc_info[1] if len(exc_info) > 1 else None
        self.close(exc if isinstance(exc, BaseException) else None)

