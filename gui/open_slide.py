"""The slide the viewer has open: its reader's lifetime, and runs of its ROI read from it (no decode per run).

A viewer run of the shown image reads the stream's crop box from the open reader and sends those pixels
(`core.slides.requests.region_request`) instead of the file, so a 16k x 16k PNG is not decoded again and a
pyramidal TIFF is never decoded whole; results equal a run on the file. Streams whose decode a region
cannot reproduce (DVPP) run on the file as before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject

from ..core import imaging
from ..core.backends.base import InferenceRequest
from ..core.emulation import expand_ratios
from ..core.errors import SegScopeError
from ..core.pipeline import load_pipeline
from ..core.roi import Roi
from ..core.slides import SlideReader
from ..core.slides.requests import region_request
from .slide_view import SlideView


def region_expand(pipeline_path: Path) -> tuple[float, float, float, float] | None:
    """The stream's crop expand ratios where a region read gives its decoder's pixels (an opencv decoder),
    else None (DVPP decode, or a pipeline that does not load: the file run reports that). Read once per
    version of the file (every Run asks)."""
    try:
        return _region_expand(pipeline_path, pipeline_path.stat().st_mtime_ns)
    except OSError:
        return None


@functools.lru_cache(maxsize=8)
def _region_expand(pipeline_path: Path, _version: int) -> tuple[float, float, float, float] | None:
    try:
        pipeline = load_pipeline(pipeline_path)
        decoder = next((e for e in pipeline.stream.driven_path if e.factory == "mxpi_imagedecoder"), None)
        if decoder is None or imaging.processor(decoder.props) == "ascend":
            return None
        return expand_ratios(pipeline)
    except SegScopeError:
        return None


class OpenSlide(QObject):
    """The one owner of which item's slide is shown and its reader (the view draws it; `reader=None` empties
    the view). A reader replaced while a run may still read it is closed when the run ends (`idle`)."""

    def __init__(self, view: SlideView, busy: Callable[[], bool], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.view, self.busy = view, busy
        self.item_id: str | None = None
        self.reader: SlideReader | None = None
        self._retired: list[SlideReader] = []

    def set(self, item_id: str | None, reader: SlideReader | None) -> None:
        if self.reader is not None and self.reader is not reader:
            self._retired.append(self.reader)
        self.item_id, self.reader = item_id, reader
        if reader is None:
            self.view.clear()
        if not self.busy():
            self.idle()

    def idle(self) -> None:
        """No run reads a retired reader any more: close them."""
        for reader in self._retired:
            reader.close()
        self._retired.clear()

    def sources(self, pipeline_path: Path) -> dict[str, Callable[[Roi], InferenceRequest]]:
        """Region requests for the shown item (none where the stream needs the file)."""
        reader, expand = self.reader, region_expand(pipeline_path)
        if reader is None or self.item_id is None or expand is None:
            return {}
        return {self.item_id: lambda roi: region_request(reader, roi, expand)}

    def close(self) -> None:
        """Stop the view's tile reads and close every reader (the window closes; no run is left)."""
        self.view.shutdown()
        self.set(None, None)
        self.idle()
