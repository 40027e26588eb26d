"""The one interface every inference backend implements (embedded, MindX SDK, remote over SSH).

A backend is opened on a loaded `.pipeline` file, runs one image + ROI at a time through the stream and
returns an `InferenceResult`. Use it as a context manager so the stream is always torn down.
"""

from __future__ import annotations

import abc
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar, Union

from ..result import STAGES, InferenceResult
from ..roi import Roi

__all__ = ["STAGES", "Backend", "Capabilities", "ImageSource", "InferenceRequest", "InferenceResult"]

#: An encoded image file's bytes, or the path of one (on the machine that runs the stream).
ImageSource = Union[bytes, Path]



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
    """One item of a batch run: an image and the ROI to crop (None = the backend's default rule)."""

    image: ImageSource
    roi: Roi | None = None


BackendT = TypeVar("BackendT", bound="Backend")
PreparedT = TypeVar("PreparedT")


def read_ahead(requests: Iterable[InferenceRequest], prepare: Callable[[InferenceRequest], PreparedT],
               run: Callable[[PreparedT], InferenceResult], depth: int, name: str) -> Iterator[InferenceResult]:
    """`run(prepare(r))` for each request in order, with the next `depth` requests prepared on threads named
    `name` while the current one runs. A request that fails to prepare (or to be made) raises in its turn,
    after the results before it; closing the iterator early drops what was prepared ahead."""
    depth = max(1, depth)
    pending: deque[Future[PreparedT]] = deque()
    pool = ThreadPoolExecutor(depth, thread_name_prefix=name)
    ahead = iter(requests)
    try:
        while True:
            try:
                request = next(ahead, None)
            except Exception:
                while pending:
                    yield run(pending.popleft().result())
                raise
            if request is None:
                break
            pending.append(pool.submit(prepare, request))
            if len(pending) > depth:
                yield run(pending.popleft().result())
        while pending:
            yield run(pending.popleft().result())
    finally:  # closed early (cancel, an error): drop what was read ahead, wait for the one in progress
        pool.shutdown(wait=True, cancel_futures=True)


class Backend(abc.ABC):
    """Base class of all backends: open in `__init__`, `infer` per image, `close` once."""

    capabilities: Capabilities

    @abc.abstractmethod
    def infer(self, image: ImageSource, roi: Roi | None = None) -> InferenceResult:
        """Run one image through the stream; `roi=None` crops the whole image."""

    def infer_many(self, requests: Iterable[InferenceRequest]) -> Iterator[InferenceResult]:
        """Results in request order; backends that can keep several images in flight override this."""
        for request in requests:
            yield self.infer(request.image, request.roi)

    def cancel(self) -> None:  # noqa: B027 - optional hook, a no-op where a request cannot be interrupted
        """Ask a running `infer` (from another thread) to stop with `CancelledError`."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the stream/session/connection; safe to call twice."""

    def __enter__(self: BackendT) -> BackendT:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
