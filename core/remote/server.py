"""The worker's serving process on the Ascend host (started by `worker.py`'s supervisor, which relays its
frames to and from the client and stops it if it does not end in time).

Frames arrive on a reader thread; requests run one at a time on the main thread, so a CANCEL can reach
the backend while it works and the client's next INFER (pipelined) is received and queued meanwhile; a
result is encoded and sent on a third thread while the next request runs (every other answer to a request
waits for the results before it, so answers leave in request order). The
worker sends one HELLO once the stream is open, then a RESULT or ERROR per INFER, and exits when stdin
closes (the client went away). The client's heartbeats are the supervisor's business: skipped here.

With `--input-cache DIR`, what a client sends under a content key is kept there (`core.remote.host_cache`): an
INFER that carries only the key is served from it, or answered NEED, and its bytes (DATA) awaited in its turn;
its RESULT says which (`cache`: "hit", "miss", or "sent" where the bytes came although the host held them).
"""

from __future__ import annotations

import argparse
import os
import platform
import queue
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import cv2
import numpy as np

from ..backends.base import Backend, ImageSource, InferenceResult
from ..backends.registry import BACKEND_KINDS, open_kind
from ..cache.settings import DEFAULT_SIZE_GB
from ..errors import CancelledError, SegScopeError
from ..files.fileio import DEFAULT_MAX_PIXELS, decode_image
from ..roi import Roi
from . import protocol as p
from .host_cache import MAX_KEY, InputCache


class Worker:
    """One client's session: a frame reader thread and a request loop."""

    def __init__(self, out: BinaryIO, roots: tuple[Path, ...] = (), inputs: InputCache | None = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS):
        self.out = out
        self.roots = roots  # the folders INFER paths may name
        self.inputs = inputs  # the host's input cache (None: off)
        self.max_pixels = max_pixels
        self.write_lock = threading.Lock()
        self.requests: queue.Queue[p.Message | None] = queue.Queue()
        #: DATA frames (id, bytes) for the request waiting on its NEED; (id, None): it was cancelled; None: EOF.
        self.uploads: queue.Queue[tuple[int, bytes | None] | None] = queue.Queue()
        self.waited = 0.0  # seconds the current request waited for its bytes
        self.state_lock = threading.Lock()
        self.cancelled: set[int] = set()
        self.current: int | None = None
        self.backend: Backend | None = None
        self.exit_code = p.EXIT_OK
        #: Results to encode and send (`send_results`), in request order; None: no more.
        self.results: queue.Queue[Callable[[], p.Message] | None] = queue.Queue()

    def send(self, msg_type: p.MsgType, meta: dict, blobs: tuple[bytes, ...] = ()) -> None:
        frame = p.encode(p.Message(msg_type, meta, blobs))
        with self.write_lock:
            self.out.write(frame)
            self.out.flush()

    def answer(self, msg_type: p.MsgType, meta: dict) -> None:
        """Send a request's answer other than its RESULT, after the results of the requests before it."""
        self.results.join()
        self.send(msg_type, meta)

    def error(self, request_id: int | None, kind: str, message: str) -> None:
        self.answer(p.MsgType.ERROR, {"id": request_id, "kind": kind, "message": message})

    def send_results(self) -> None:
        """Results thread: encode and send each result as it comes (the next request runs meanwhile)."""
        while True:
            make = self.results.get()
            try:
                if make is None:
                    return
                message = make()
                try:
                    self.send(message.type, message.meta, message.blobs)
                except p.ProtocolError as exc:  # a result over the frame limit
                    self.send(p.MsgType.ERROR, {"id": message.meta.get("id"), "kind": "error", "message": str(exc)})
            except OSError:  # the client is gone: what is left is dropped (the reader sees the end of input)
                pass
            except Exception:  # noqa: BLE001 - a bug making one result: report it, keep this thread serving
                traceback.print_exc()  # (its request is then answered by the client's timeout, never a hang)
            finally:
                self.results.task_done()

    def read_frames(self, stdin: int) -> None:
        """Reader thread: queue INFERs, apply CANCELs at once; at EOF or a bad frame, wind the worker down."""
        try:
            while (msg := p.read_message(lambda n: read_exact(stdin, n), p.TO_WORKER)) is not None:
                if msg.type == p.MsgType.CANCEL:
                    self.cancel(msg.meta.get("id"))
                elif msg.type == p.MsgType.INFER:
                    self.requests.put(msg)
                elif msg.type == p.MsgType.DATA:
                    request_id = msg.meta.get("id")
                    if type(request_id) is not int or len(msg.blobs) != 1:
                        raise p.ProtocolError("DATA frame without an integer 'id' and one blob")
                    self.uploads.put((request_id, msg.blobs[0]))
        except p.ProtocolError as exc:
            self.exit_code = p.EXIT_PROTOCOL
            self.error(None, "protocol", f"the worker rejected a frame from the client: {exc}")
        except OSError:
            pass
        finally:
            self.requests.put(None)
            self.uploads.put(None)
            with self.state_lock:
                running = self.current is not None
            if running and self.backend is not None:
                self.backend.cancel()

    def cancel(self, request_id: object) -> None:
        if not isinstance(request_id, int):
            return
        with self.state_lock:
            self.cancelled.add(request_id)
            running = self.current == request_id
        if running:
            self.uploads.put((request_id, None))  # in case it waits for its bytes
            if self.backend is not None:
                self.backend.cancel()

    def serve(self, backend: Backend) -> None:
        self.backend = backend
        sender = threading.Thread(target=self.send_results, name="results", daemon=True)
        sender.start()
        try:
            while (msg := self.requests.get()) is not None:
                self.handle(backend, msg)
        finally:
            self.results.put(None)
            sender.join()

    def handle(self, backend: Backend, msg: p.Message) -> None:
        started = time.perf_counter()
        request_id = msg.meta.get("id")
        if not isinstance(request_id, int):
            self.error(None, "error", "malformed INFER: no integer 'id'")
            return
        with self.state_lock:
            if request_id in self.cancelled:
                self.cancelled.discard(request_id)
                self.error(request_id, "cancelled", "cancelled before it started")
                return
            self.current = request_id
            self.waited = 0.0
        try:
            request = parse_request(msg, self.roots)
            clock = time.perf_counter()
            image, cached = self.image(request_id, request, backend)
            taken = time.perf_counter() - clock - self.waited  # reading (or decoding) a cached input
            result = backend.infer(image, request.roi)
            if request_id in self.cancelled:
                raise CancelledError("cancelled")
            result.timings["decode"] = result.timings.get("decode", 0.0) + taken
            self.results.put(lambda: result_message(request_id, result, request.probabilities, cached, started))
        except CancelledError:
            self.error(request_id, "cancelled", "cancelled")
        except SegScopeError as exc:
            self.error(request_id, "error", str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug or an SDK surprise: report it, keep serving
            traceback.print_exc()
            self.error(request_id, "error", f"worker failure ({type(exc).__name__}: {exc})")
        finally:
            with self.state_lock:
                self.current = None
                self.cancelled.discard(request_id)

    def image(self, request_id: int, request: Request, backend: Backend) -> tuple[ImageSource, str | None]:
        """What to run for `request` and where it came from ("hit", "miss", "sent"; None: no key): the input
        cache's entry for its key, else the bytes sent with it or asked for (NEED), kept under the key (decoded,
        where they are a crop's pixels and the backend takes pixels: the decode it would make)."""
        if request.key is None:
            assert request.image is not None  # (`parse_request`: a request without a key carries its image)
            return request.image, None
        found = self.inputs.get(request.key) if self.inputs is not None and request.image is None else None
        if found is not None:
            return found, "hit"
        data = request.image if request.image is not None else self.wait_for_data(request_id)
        assert isinstance(data, bytes)  # (`parse_request`: a key comes with bytes or nothing)
        if self.inputs is None:
            return data, "miss"
        state = "sent" if request.image is not None and self.inputs.holds(request.key) else "miss"
        kept: bytes | np.ndarray = data
        if request.decoded and backend.takes_pixels:
            kept = decode_image(data, "<image bytes>", cv2.IMREAD_COLOR, self.max_pixels)
        self.inputs.put(request.key, kept)  # (also where held: what was sent replaces an entry however it is)
        return kept, state

    def wait_for_data(self, request_id: int) -> bytes:
        """Ask the client for the bytes of `request_id` (NEED) and wait for them (DATA) or its cancel; the wait
        is kept in `waited` (the upload's time, not the request's work)."""
        clock = time.perf_counter()
        self.answer(p.MsgType.NEED, {"id": request_id})
        try:
            while True:
                item = self.uploads.get()
                if item is None:
                    self.uploads.put(None)  # the client's input ended: a later wait (a queued request's) ends too
                    break
                if item[0] == request_id:
                    if item[1] is None:
                        break
                    return item[1]
            raise CancelledError("cancelled")
        finally:
            self.waited = time.perf_counter() - clock


def result_message(request_id: int, result: InferenceResult, dtype: str, cached: str | None,
                   started: float) -> p.Message:
    """The RESULT of request `request_id` (started at `started`), its arrays encoded as `dtype`; an ERROR
    where they cannot be."""
    clock = time.perf_counter()
    try:
        array_meta, blobs = p.encode_arrays(result.probabilities, result.argmax, dtype)
    except Exception as exc:  # noqa: BLE001 - a bug: report it, keep serving
        traceback.print_exc()
        return p.Message(p.MsgType.ERROR, {"id": request_id, "kind": "error",
                                           "message": f"worker failure ({type(exc).__name__}: {exc})"})
    timings = dict(result.timings)
    timings["postprocess"] = timings.get("postprocess", 0.0) + time.perf_counter() - clock
    return p.Message(p.MsgType.RESULT, {
        "id": request_id, "roi": list(result.roi.as_tuple()), "image_size": list(result.image_size),
        "timings": timings, "backend": result.backend, "worker_seconds": time.perf_counter() - started,
        "threshold": result.threshold, **({"cache": cached} if cached else {}), **array_meta,
    }, blobs)


@dataclass(frozen=True)
class Request:
    """A well-formed INFER: its image (bytes or a host path; None: only its key came), ROI, probability encoding,
    content key (None: not to be cached) and whether its bytes are a crop's lossless pixels (`decoded`)."""

    image: ImageSource | None
    roi: Roi | None
    probabilities: str
    key: str | None = None
    decoded: bool = False


def read_exact(fd: int, n: int) -> bytes:
    """`n` bytes from a file descriptor, fewer only at end of file.

    Unbuffered on purpose: a daemon thread blocked in a buffered read aborts the interpreter at exit.
    """
    chunks: list[bytes] = []
    while n > 0 and (chunk := os.read(fd, n)):
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def readable_path(path: str, roots: tuple[Path, ...]) -> Path:
    """`path` (symbolic links resolved) when it lies inside one of `roots`, else a refusal."""
    real = Path(os.path.realpath(path))
    if not any(real == root or root in real.parents for root in roots):
        raise SegScopeError(f"{path}: outside the dataset and project folders the client named "
                            f"({', '.join(map(str, roots))}); the worker reads no other host file")
    return real


def parse_request(msg: p.Message, roots: tuple[Path, ...] = ()) -> Request:
    """The `Request` of a well-formed INFER; a host path must lie inside `roots`."""
    meta, blobs = msg.meta, msg.blobs
    path, key, decoded = meta.get("path"), meta.get("key"), meta.get("decoded", False)
    if path is not None and (not isinstance(path, str) or blobs or "\0" in path or key is not None):
        raise SegScopeError("malformed INFER: 'path' must be a string and come without image bytes or key")
    if key is not None and not (isinstance(key, str) and 0 < len(key) <= MAX_KEY and key.isprintable()
                                and key.isascii()):
        raise SegScopeError(f"malformed INFER: key must be printable ASCII of 1 to {MAX_KEY} characters")
    if type(decoded) is not bool:
        raise SegScopeError("malformed INFER: decoded must be true or false")
    if path is None and len(blobs) != 1 and not (key is not None and not blobs):  # a key may come alone
        raise SegScopeError(f"malformed INFER: expected one image blob, got {len(blobs)}")
    box = meta.get("roi")
    if box is not None and not (isinstance(box, list) and len(box) == 4 and all(type(v) is int for v in box)):
        raise SegScopeError(f"malformed INFER: roi must be [x0, y0, x1, y1] integers, got {box!r}")
    dtype = meta.get("probabilities", "uint8")
    if dtype not in p.PROBABILITY_DTYPES:
        raise SegScopeError(f"malformed INFER: probabilities must be one of {p.PROBABILITY_DTYPES}, got {dtype!r}")
    roi = Roi(*box) if box is not None else None
    if roi is not None:
        roi.validate("INFER roi")
    image = readable_path(path, roots) if path is not None else (blobs[0] if blobs else None)
    return Request(image, roi, dtype, key, decoded)


def versions() -> dict[str, str]:
    return {"python": platform.python_version(), "numpy": np.__version__, "opencv": cv2.__version__,
            "host": platform.node(), "platform": platform.platform()}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="segscope-worker", description="SegScope's worker on the Ascend host")
    parser.add_argument("--pipeline", type=Path, required=True, help="the .pipeline file on this host")
    parser.add_argument("--backend", choices=BACKEND_KINDS, default="auto")
    parser.add_argument("--max-pixels", type=int, default=None)
    parser.add_argument("--dataset", type=Path, default=None, help="the folder INFER paths may name, beside the "
                                                                   "pipeline's project")
    parser.add_argument("--input-cache", type=Path, default=None, help="keep the inputs sent under a content key "
                                                                       "here (core.remote.host_cache)")
    parser.add_argument("--input-cache-bytes", type=int, default=int(DEFAULT_SIZE_GB * (1 << 30)),
                        help="its size cap")
    return parser.parse_args(argv)


def serve(argv: list[str] | None, stdin: int, out: BinaryIO) -> int:
    """Open the stream, say hello, serve until stdin closes; the exit code."""
    args = parse_args(argv)
    roots = [args.pipeline.resolve().parent.parent] + ([args.dataset] if args.dataset else [])
    inputs = None
    if args.input_cache is not None:
        try:
            inputs = InputCache(args.input_cache, args.input_cache_bytes)
        except OSError as exc:
            print(f"segscope worker: cannot use the input cache {args.input_cache} ({exc.strerror or exc}); every "
                  "image is sent", file=sys.stderr)
    worker = Worker(out, tuple(Path(os.path.realpath(root)) for root in roots), inputs,
                    args.max_pixels or DEFAULT_MAX_PIXELS)
    threading.Thread(target=worker.read_frames, args=(stdin,), name="frames", daemon=True).start()
    try:
        backend, note = open_kind(args.backend, args.pipeline, args.max_pixels)
    except SegScopeError as exc:
        worker.error(None, "startup", str(exc))
        return p.EXIT_STARTUP
    try:
        caps = backend.capabilities
        worker.send(p.MsgType.HELLO, {
            "protocol": p.PROTOCOL_VERSION, "backend": caps.name, "device": caps.device,
            "input_size": list(caps.input_size), "class_names": list(caps.class_names), "details": caps.details,
            "fallback_reason": note, "versions": versions(), "pid": os.getpid(), "pgid": os.getpgid(0),
        })
        worker.serve(backend)
    except BrokenPipeError:  # the client is gone
        pass
    finally:
        backend.close()
    return worker.exit_code
