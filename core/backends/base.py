"""The one interface every inference backend implements (embedded, MindX SDK, remote over SSH).

A backend is opened on a loaded `.pipeline` file, runs one image + ROI at a time through the stream and
returns an `InferenceResult`. Use it as a context manager so the stream is always torn down.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator
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
