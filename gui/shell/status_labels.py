"""The main window's status bar: the backend, the last run's timings, the dataset means, the hover readout and the
parts' notes (`note`: cut in the middle where even the labels' least widths leave too little room)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSizeGrip, QStatusBar

from ...core.backends.base import Capabilities
from ...core.metrics import catalogue
from ...core.session.events import ResultAdded
from ...core.session.session import Session
from ...core.wording import plural
from ..runtime.coalesce import Coalescer
from ..widgets.compact import ElidedLabel

#: The slide view's hover readout starts with this; it is cleared when the mouse leaves the slide.
HOVER_PREFIX = "slide x="
#: Qt's largest widget size (QWIDGETSIZE_MAX): no maximum.
NO_MAXIMUM = 16777215
#: How often the status bar's texts (the last run's timings, the dataset means) change at most while results keep
#: coming (milliseconds): each new text lays the whole bar out and repaints it, and four a second can be read.
STATUS_MS = 250
#: Pixels the status bar keeps around its message and between its permanent labels.
MESSAGE_MARGIN, LABEL_SPACING = 24, 8


def duration(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 60}:{seconds % 60:02d}" if seconds >= 60 else f"{seconds} s"


def timings_text(timings: dict[str, float]) -> str:
    return "\n".join(f"{stage} {seconds * 1000:.0f} ms" for stage, seconds in timings.items())


class StatusLabels:
    """The permanent labels of `bar` (right side) and the hover readout in its message area."""

    def __init__(self, bar: QStatusBar, session: Session | None = None) -> None:
        self.bar = bar
        self.backend_label = ElidedLabel("backend: opening…")
        self.backend_label.setToolTip("The active backend and its device (Backend… to change)")
        self.timings_label = ElidedLabel("")
        self.timings_label.setToolTip("Per-stage times of the last inference")
        self.means_label = ElidedLabel("")
        self.means_label.setToolTip("Dataset means over the images run so far that have masks")
        self.usage_label = ElidedLabel("")
        self.labels = (self.usage_label, self.timings_label, self.means_label, self.backend_label)
        for label in self.labels:
            bar.addPermanentWidget(label)
        bar.messageChanged.connect(self._make_room)
        self._last_run: tuple[str, dict[str, float]] | None = None  # the newest run's, drawn at a bounded rate
        self.timings_refresh = Coalescer(self._show_last_run, STATUS_MS, bar)
        if session is not None:
            session.events.result_added.connect(self._on_result_added)
            session.events.dataset.connect(lambda _dataset, _old: self.clear_timings())

    def _make_room(self, message: str) -> None:
        """A message (a note, the hover readout) is drawn left of the permanent labels: they give up width for
        it, the least needed first (`GIVE_UP`: the devices' use, the last run's timings, the backend, the dataset
        means last), each eliding what no longer fits (whole on hover), so the message is not cut while there is
        room and one label is cut before three are."""
        shown = [label for label in self.labels if label.isVisible()]
        texts = [label for label in shown if label.text()]
        for label in texts:
            label.setMaximumWidth(NO_MAXIMUM)
        grip = sum(w.width() for w in self.bar.findChildren(QSizeGrip) if w.isVisible())
        spare = (self.bar.width() - self.bar.fontMetrics().horizontalAdvance(message) - MESSAGE_MARGIN - grip
                 - sum(label.minimumWidth() + LABEL_SPACING for label in shown if not label.text()))
        missing = sum(label.sizeHint().width() + LABEL_SPACING for label in texts) - spare
        if not message:
            return
        for label in sorted(texts, key=self._give_up_order().index):
            if missing <= 0:
                break
            width = label.sizeHint().width()
            kept = max(label.minimumWidth(), width - missing)
            label.setMaximumWidth(kept)
            missing -= width - kept

    def _set(self, label: ElidedLabel, text: str) -> None:
        """A label's new text; while a message shows, the labels make room for it again (a label that grew, e.g.
        the means after a run, would otherwise push the message under them). The same text again is no change
        (a new text lays the whole status bar out and repaints it)."""
        if text == label.text():
            return
        label.setText(text)
        message = self.bar.currentMessage()
        if message:
            self._make_room(message)

    def note(self, text: str, ms: int = 0) -> None:
        """A message for `ms` milliseconds (0: until the next), cut in the middle with "…" where it is wider than
        all the permanent labels can give up for it (a long path keeps its start and its file name)."""
        self.bar.showMessage(self.fitting(text), ms)

    def fitting(self, message: str) -> str:
        """`message`, cut in the middle to the widest room the labels can leave it (each at its least width)."""
        grip = sum(w.width() for w in self.bar.findChildren(QSizeGrip) if w.isVisible())
        room = (self.bar.width() - MESSAGE_MARGIN - grip
                - sum(label.minimumWidth() + LABEL_SPACING for label in self.labels if label.isVisible()))
        return self.bar.fontMetrics().elidedText(message, Qt.TextElideMode.ElideMiddle, max(room, 0))

    def _give_up_order(self) -> list[ElidedLabel]:
        """Which label gives its width up first for a message: the least needed first."""
        return [self.usage_label, self.timings_label, self.backend_label, self.means_label]

    def backend_opening(self, description: str) -> None:
        self._set(self.backend_label, f"backend: opening {description}…")
        self._set(self.usage_label, "")

    def backend_failed(self, description: str) -> None:
        self._set(self.backend_label, f"backend: none ({description} failed to open: see Messages)")

    def show_usage(self, rows: list[dict[str, Any]], lines: list[str]) -> None:
        """Images per device or cluster worker since the backend opened (`UsageLog.as_dicts()`, `.lines()`)."""
        self._set(self.usage_label, " · ".join(f"{row['name']}: {plural(row['images'], 'image')}" for row in rows))
        self.usage_label.setToolTip("Since the backend opened, per device or cluster worker:\n" + "\n".join(lines))

    def backend_ready(self, capabilities: Capabilities) -> None:
        self._set(self.backend_label, f"{capabilities.name} · {capabilities.device}")
        self.backend_label.setToolTip("\n".join(f"{k}: {v}" for k, v in capabilities.details.items()))

    def _on_result_added(self, added: ResultAdded) -> None:
        if not added.restored:  # (an earlier session's run is no run of this one)
            self._last_run = (added.item_id, dict(added.record.timings))  # (as it arrived: "render" comes later)
            self.timings_refresh.request()

    def _show_last_run(self) -> None:
        if self._last_run is None:
            return
        (item_id, timings), self._last_run = self._last_run, None
        self._set(self.timings_label, f"last run {sum(timings.values()) * 1000:.0f} ms")
        self.timings_label.setToolTip(f"Per-stage times of the last inference ({item_id}):\n" + timings_text(timings))

    def clear_timings(self) -> None:
        self._last_run = None
        self._set(self.timings_label, "")

    def show_means(self, means: Mapping[str, Any]) -> None:
        """The dataset means (`core.metrics.catalogue.means`' shape) in brief."""
        images = int(means["images_with_masks"])
        self._set(self.means_label, "" if not images else f"mean {catalogue.brief_means(means)}")
        if self.timings_refresh.pending:  # (the last run's timings with them: one repaint of the bar, not two)
            self.timings_refresh.flush()

    def hover(self, text: str) -> None:
        """The slide's readout while the mouse is over it (cleared when it leaves, "")."""
        if text:
            self.bar.showMessage(self.fitting(text))
        elif self.bar.currentMessage().startswith(HOVER_PREFIX):
            self.bar.clearMessage()
