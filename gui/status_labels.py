"""The main window's status bar: the backend, the last run's timings, the dataset means, the hover readout."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QStatusBar

from ..core.backends.base import Capabilities
from ..core.evaluate import DatasetSummary
from ..core.metrics import catalogue
from ..core.session.events import ResultAdded
from ..core.session.session import Session
from .compact import ElidedLabel

#: The slide view's hover readout starts with this; it is cleared when the mouse leaves the slide.
HOVER_PREFIX = "slide x="


def count(n: int, noun: str) -> str:
    """"1 image", "3 images"."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


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
        for label in (self.usage_label, self.timings_label, self.means_label, self.backend_label):
            bar.addPermanentWidget(label)
        if session is not None:
            session.events.result_added.connect(self._on_result_added)
            session.events.dataset.connect(lambda _dataset, _old: self.clear_timings())

    def backend_opening(self, description: str) -> None:
        self.backend_label.setText(f"backend: opening {description}…")
        self.usage_label.setText("")

    def backend_failed(self, description: str) -> None:
        self.backend_label.setText(f"backend: none ({description} failed to open: see Messages)")

    def show_usage(self, rows: list[dict[str, Any]], lines: list[str]) -> None:
        """Images per device or cluster worker since the backend opened (`UsageLog.as_dicts()`, `.lines()`)."""
        self.usage_label.setText(" · ".join(f"{row['name']}: {count(row['images'], 'image')}" for row in rows))
        self.usage_label.setToolTip("Since the backend opened, per device or cluster worker:\n" + "\n".join(lines))

    def backend_ready(self, capabilities: Capabilities) -> None:
        self.backend_label.setText(f"{capabilities.name} · {capabilities.device}")
        self.backend_label.setToolTip("\n".join(f"{k}: {v}" for k, v in capabilities.details.items()))

    def _on_result_added(self, added: ResultAdded) -> None:
        if not added.restored:  # (an earlier session's run is no run of this one)
            self.last_run(added.item_id, added.record.timings)

    def last_run(self, item_id: str, timings: dict[str, float]) -> None:
        self.timings_label.setText(f"last run {sum(timings.values()) * 1000:.0f} ms")
        self.timings_label.setToolTip(f"Per-stage times of the last inference ({item_id}):\n" + timings_text(timings))

    def clear_timings(self) -> None:
        self.timings_label.setText("")

    def show_means(self, summary: DatasetSummary) -> None:
        means = summary.means()
        images = int(means["images_with_masks"])
        self.means_label.setText("" if not images else f"mean {catalogue.brief(means)} ({count(images, 'image')})")

    def hover(self, text: str) -> None:
        """The slide's readout while the mouse is over it (cleared when it leaves, "")."""
        if text:
            self.bar.showMessage(text)
        elif self.bar.currentMessage().startswith(HOVER_PREFIX):
            self.bar.clearMessage()
