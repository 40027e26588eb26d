"""The slide the viewer has open: its reader's lifetime, and runs of its ROI read from it (no decode per run).

A viewer run of the shown image reads the stream's crop box from the open reader and sends those pixels
instead of the file, so a 16k x 16k PNG is not decoded again and a pyramidal TIFF is never decoded whole;
results equal a run on the file. Which streams can take a region read, and what is sent for a stream without
a crop, is `core.stream.input`'s one rule (`StreamInput.region_source`); the others run on the file.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject

from ...core.session.backend_state import BackendState
from ...core.slides import SlideReader
from ...core.stream.input import RegionSource, StreamInput
from .slide_view import SlideView


class OpenSlide(QObject):
    """The one owner of which item's slide is shown and its reader (the view draws it; `reader=None` empties
    the view). A reader replaced while a run may still read it is closed when the run ends (`idle`)."""

    def __init__(self, view: SlideView, backend: BackendState[Any], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.view, self.backend = view, backend
        self.item_id: str | None = None
        self.reader: SlideReader | None = None
        self._retired: list[SlideReader] = []
        backend.events.busy.connect(self._on_busy)

    def set(self, item_id: str | None, reader: SlideReader | None) -> None:
        if self.reader is not None and self.reader is not reader:
            self._retired.append(self.reader)
        self.item_id, self.reader = item_id, reader
        if reader is None:
            self.view.clear()
        if not self.backend.busy:
            self.idle()

    def _on_busy(self, busy: bool, _old: bool) -> None:
        if not busy:
            self.idle()  # the run that may have read them ended

    def shows(self, item_id: str) -> bool:
        """Whether the view shows `item_id`'s slide, decoded and with its ROI."""
        return self.item_id == item_id and self.view.roi() is not None

    def idle(self) -> None:
        """No run reads a retired reader any more: close them."""
        for reader in self._retired:
            reader.close()
        self._retired.clear()

    def sources(self, stream: StreamInput) -> dict[str, RegionSource]:
        """Region requests for the shown item (none where the stream needs the file)."""
        source = stream.region_source(self.reader) if self.reader is not None else None
        return {self.item_id: source} if source is not None and self.item_id is not None else {}

    def close(self) -> None:
        """Stop the view's tile reads and close every reader (the window closes; no run is left)."""
        self.view.shutdown()
        self.set(None, None)
        self.idle()
