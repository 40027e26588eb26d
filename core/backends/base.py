"""The one interface every inference backend implements (embedded, MindX SDK, remote over SSH).

A backend is opened on a loaded `.pipeline` file, runs one image + ROI at a time through the stream and
returns an `InferenceResult`. Use it as a context manager so the stream is always torn down.
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, TypeVar, Union

import cv2
import numpy as np

from ..errors import SegScopeError
from ..result import STAGES, InferenceResult, Placement
from ..roi import Roi

__all__ = ["STAGES", "Backend", "Capabilities", "ImageSource", "InferenceRequest", "InferenceResult", "Placement",
           "check_pixels", "encode_png"]

#: An encoded image file's bytes, the path of one (on the machine that runs the stream), or pixels already
#: decoded: an H x W x 3 BGR uint8 array, the pixels the stream's decoder would give (a slide region read,
#: core.slides). The embedded backend uses an array as its decoder's output; the others send it as a
#: lossless PNG (`encode_png`).
ImageSource = Union[bytes, Path, np.ndarray]  # noqa: UP007 (a run-time alias: Python 3.9 has no X | Y)


#: zlib level of `encode_png`: 1 is several times faster to write than the default and still lossless.
PNG_LEVEL = 1


def encode_png(pixels: np.ndarray, source: str) -> bytes:
    """Decoded pixels as a lossless PNG, which the stream's opencv decoder gives back bit for bit."""
    ok, png = cv2.imencode(".png", pixels, [cv2.IMWRITE_PNG_COMPRESSION, PNG_LEVEL])
    if not ok:
        raise SegScopeError(f"{source}: OpenCV could not encode the {pixels.shape[1]}x{pixels.shape[0]} pixels "
                            "as PNG")
    return png.tobytes()


def check_pixels(image: np.ndarray, source: str = "<image array>") -> np.ndarray:
    """`image` if it is decoded pixels a backend takes (H x W x 3 BGR uint8), else a one-line error."""
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3 or 0 in image.shape:
        raise SegScopeError(f"{source}: decoded pixels must be H x W x 3 BGR uint8 (as the stream's opencv "
                            f"decoder gives them), got a {'x'.join(map(str, image.shape))} {image.dtype} array")
    return image



@dataclass(frozen=True)
class Capabilities:
    """What a backend is and what its model expects."""

    name: str  # "embedded", "mindx", "remote"
    device: str  # e.g. "CPU (ONNX Runtime 1.19, 2 threads)", "Ascend310 device 0", "user@host: mindx"
    input_size: tuple[int, int]  # model input (width, height)
    class_names: tuple[str, ...]
    details: dict[str, str] = field(default_factory=dict)  # versions, model file, etc.


@dataclass(frozen=True)
class InferenceRequest:
    """One item of a batch run: an image and the ROI to crop (None = the backend's default rule).

    With `placement` (a region of a larger slide, core.slides.requests) `infer_many` reports the result's
    ROI and image size in that slide's pixels."""

    image: ImageSource
    roi: Roi | None = None
    placement: Placement | None = None

    def place(self, result: InferenceResult) -> InferenceResult:
        """`result` in the slide's pixels where the request has a placement."""
        return self.placement.place(result) if self.placement else result


BackendT = TypeVar("BackendT", bound="Backend")
PreparedT = TypeVar("PreparedT")


def prepare_ahead(requests: Iterable[InferenceRequest], prepare: Callable[[InferenceRequest], PreparedT],
                  depth: int, name: str) -> Generator[tuple[InferenceRequest, PreparedT], None, None]:
    """(request, prepare(request)) in order, the next `depth` requests prepared on threads named `name` while
    the caller works on the current one. A request that fails to prepare (or to be made) raises in its turn,
    after the ones before it; closing the iterator early drops what was prepared ahead."""
    depth = max(1, depth)
    pending: deque[tuple[InferenceRequest, Future[PreparedT]]] = deque()
    pool = ThreadPoolExecutor(depth, thread_name_prefix=name)
    ahead = iter(requests)
    try:
        while True:
            try:
                request = next(ahead, None)
            except Exception:
                while pending:
                    yield _prepared(pending)
                raise
            if request is None:
                break
            pending.append((request, pool.submit(prepare, request)))
            if len(pending) > depth:
                yield _prepared(pending)
        while pending:
            yield _prepared(pending)
    finally:  # closed early (cancel, an error): drop what was read ahead, wait for the one in progress
        pool.shutdown(wait=True, cancel_futures=True)


def _prepared(pending: deque[tuple[InferenceRequest, Future[PreparedT]]]) -> tuple[InferenceRequest, PreparedT]:
    request, prepared = pending.popleft()
    return request, prepared.result()


def read_ahead(requests: Iterable[InferenceRequest], prepare: Callable[[InferenceRequest], PreparedT],
               run: Callable[[PreparedT], InferenceResult], depth: int, name: str) -> Iterator[InferenceResult]:
    """`run(prepare(r))` for each request in order, placed (`InferenceRequest.place`), with the next `depth`
    requests prepared meanwhile (`prepare_ahead`, which says where errors come)."""
    ahead = prepare_ahead(requests, prepare, depth, name)
    try:
        for request, prepared in ahead:
            yield request.place(run(prepared))
    finally:
        ahead.close()


SubmittedT = TypeVar("SubmittedT")
_END = object()


def keep_in_flight(items: Iterable[PreparedT], submit: Callable[[PreparedT], SubmittedT],
                   collect: Callable[[SubmittedT], InferenceResult], depth: int,
                   drop: Callable[[list[SubmittedT]], None]) -> Iterator[InferenceResult]:
    """`collect(submit(item))` for each item in order, with up to `depth` items submitted before the oldest
    is collected (a stream or a host works on them meanwhile). An item that cannot be made or submitted
    raises in its turn, after the results of those before it; closing early hands what is still submitted
    to `drop`."""
    pending: deque[SubmittedT] = deque()
    ahead = iter(items)
    try:
        while True:
            try:
                item = next(ahead, _END)
                if item is _END:
                    break
                pending.append(submit(item))  # type: ignore[arg-type]
            except Exception:
                while pending:
                    yield collect(pending.popleft())
                raise
            if len(pending) >= depth:
                yield collect(pending.popleft())
        while pending:
            yield collect(pending.popleft())
    finally:
        if pending:
            drop(list(pending))


class Backend(abc.ABC):
    """Base class of all backends: open in `__init__`, `infer` per image, `close` once."""

    capabilities: Capabilities
    #: Whether decoded pixels (an array) go in as they are; False where they are encoded again (the MindX stream
    #: takes files), so the remote worker keeps what it was sent rather than its decode.
    takes_pixels: ClassVar[bool] = True

    @abc.abstractmethod
    def infer(self, image: ImageSource, roi: Roi | None = None) -> InferenceResult:
        """Run one image through the stream; `roi=None` crops the whole image (or array)."""

    def infer_many(self, requests: Iterable[InferenceRequest]) -> Iterator[InferenceResult]:
        """Results in request order; backends that can keep several images in flight override this."""
        for request in requests:
            yield request.place(self.infer(request.image, request.roi))

    def cancel(self) -> None:  # noqa: B027 - optional hook, a no-op where a request cannot be interrupted
        """Ask a running `infer` (from another thread) to stop with `CancelledError`."""

    def cache_note(self) -> str | None:
        """One line on the inputs the backend's own cache served since it opened (the remote host's), or None."""
        return None

    @abc.abstractmethod
    def close(self) -> None:
        """Release the stream/session/connection; safe to call twice."""

    def __enter__(self: BackendT) -> BackendT:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
