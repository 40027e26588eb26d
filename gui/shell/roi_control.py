"""The slide view's ROI as a view of the session's: the session owns the ROI (one owner), the slide view
follows it, and the user's drags, Reset ROI and undo/redo of ROI moves go to the session."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from ...core.errors import SegScopeError
from ...core.roi import Roi
from ...core.session.events import RoiChanged
from ...core.session.session import Session
from ..canvas.slide_view import SlideView


class RoiControl(QObject):
    """Keeps `slide`'s ROI and `session`'s in step; `ready()` says whether the current slide is shown."""

    #: (level, text) for the message area
    message = Signal(str, str)
    #: a short note for the status bar
    note = Signal(str)
    #: undo/redo moved the ROI of another image than the current one: show it
    showItem = Signal(str)

    def __init__(self, session: Session, slide: SlideView, ready: Callable[[], bool],
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session, self.slide, self.ready = session, slide, ready
        slide.roiChanged.connect(self.set_roi)
        slide.resetRoiRequested.connect(self.reset)
        session.events.roi_changed.connect(self._on_session_roi)

    def set_roi(self, roi: Roi) -> None:
        """The user moved the ROI in the view: the session owns it (the view follows the session)."""
        if self.session.dataset is None or not self.ready():
            return
        self._guarded(lambda: self.session.set_roi(roi))

    def sync(self) -> None:
        """Before a run: the session holds exactly the ROI on screen."""
        roi = self.slide.roi()
        if roi is not None and roi != self.session.roi:
            self.set_roi(roi)

    def _on_session_roi(self, changed: RoiChanged) -> None:
        current = self.session.current
        if current is not None and changed.item_id == current.id and self.ready() and self.slide.roi() != changed.roi:
            self.slide.set_roi(changed.roi)

    def reset(self) -> None:
        if self.session.dataset is not None and self.ready():
            self._guarded(self.session.reset_roi)

    def undo(self) -> None:
        self._step(self.session.undo_roi)

    def redo(self) -> None:
        self._step(self.session.redo_roi)

    def _step(self, step: Callable[[], str | None]) -> None:
        try:
            item_id = step()
        except SegScopeError as exc:
            self.message.emit("warning", str(exc))
            return
        current = self.session.current
        if item_id is None:
            self.note.emit("No ROI move to undo or redo")
        elif current is None or item_id != current.id:
            self.showItem.emit(item_id)

    def _guarded(self, change: Callable[[], object]) -> None:
        """Run a session change; an unwritable sidecar is a warning (the ROI is set for this session)."""
        try:
            change()
        except SegScopeError as exc:
            self.message.emit("warning", str(exc))
