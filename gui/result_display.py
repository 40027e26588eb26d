"""What the result panels and the metrics show for the image on screen, as a view of the session: its newest
result (the ROI crop and the mask under it read on a worker, the panels drawn when they are back), or the part
of its whole-slide run under the ROI, dimmed with the row and every metric while it no longer answers for the
image (another ROI, another model)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from ..core.metrics.scores import ImageMetrics, image_metrics
from ..core.result import InferenceResult
from ..core.session.panel_model import PanelInputs, panel_inputs
from ..core.session.runs import RunRecord
from ..core.session.session import Session
from .dataset_rows import RowStatus
from .jobs import Jobs
from .metrics_display import MetricsDisplay
from .open_slide import OpenSlide
from .result_panels import ResultPanels
from .shortcuts import key


class ResultDisplay(QObject):
    """`show_current()` whenever the image on screen, its slide, its ROI or the model changes."""

    message = Signal(str, str)  # level, text
    shown = Signal(object, object)  # (InferenceResult, class names): a run's result is drawn

    def __init__(self, session: Session, open_slide: OpenSlide, panels: ResultPanels, metrics: MetricsDisplay,
                 rows: RowStatus, jobs: Jobs, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session, self.open_slide, self.panels, self.metrics = session, open_slide, panels, metrics
        self.rows, self.jobs = rows, jobs
        self._roi_note_said = False  # in this batch
        session.events.result_added.connect(self._on_result_added)
        session.events.result_restored.connect(lambda item_id, _record: self.redraw(item_id))

    def ready(self) -> bool:
        """Whether the selected item's slide is decoded and shown."""
        current = self.session.current
        return self.session.ready and current is not None and self.open_slide.shows(current.id)

    def _on_screen(self, item_id: str) -> bool:
        current = self.session.current
        return current is not None and current.id == item_id and self.ready()

    def run_hint(self) -> str:
        """What the panels say while the image on screen has no result."""
        backend = self.session.backend
        if backend is not None and backend.busy:
            return "Queued: the run is in progress"
        return f"Not run yet: press Run ({key('run_current')}) or Run all ({key('run_all')})"

    def start_batch(self) -> None:
        """A batch starts: its first pre-cropped result says so once."""
        self._roi_note_said = False

    def show_current(self) -> None:
        """The image on screen's whole-slide part or result, else the hint to run it."""
        current = self.session.current
        if current is None or self.show_part():
            return
        result = self.session.result(current.id)
        if result is not None:
            self.show_result(current.id, result)
        else:
            self.panels.clear()
            self.panels.set_busy(self.run_hint())
            self.metrics.show(None)

    def redraw(self, item_id: str) -> None:
        """Show the image's result again (after a restore, a new model or a blank mask made) when it is the one
        on screen."""
        result = self.session.result(item_id)
        if result is not None and self._on_screen(item_id) and not self.show_part():
            self.show_result(item_id, result)

    def show_result(self, item_id: str, result: InferenceResult) -> None:
        record = self.session.record(item_id)
        names = record.class_names if record is not None else ()
        self.show_panels(item_id, result, self.session.known_metrics(item_id), names)
        self.mark_if_stale()
        self.shown.emit(result, names)

    def show_panels(self, item_id: str, result: InferenceResult, metrics: ImageMetrics | None,
                    class_names: tuple[str, ...] = ()) -> None:
        self._show_inputs(item_id, self._panel_inputs(result, class_names)(), metrics)

    def _panel_inputs(self, result: InferenceResult, class_names: tuple[str, ...]) -> Callable[[], PanelInputs]:
        """What the panels need of `result` besides its arrays, as work for any thread (the reader and the
        mask on screen taken now)."""
        reader, mask, roi = self.open_slide.reader, self.session.mask, result.roi

        def make() -> PanelInputs:
            roi_image = reader.read_roi(roi) if reader is not None and roi.fits(*reader.size) else None
            gt = mask[roi.y0 : roi.y1, roi.x0 : roi.x1] if mask is not None else None
            return panel_inputs(result, roi_image, gt, class_names)
        return make

    def _show_inputs(self, item_id: str, inputs: PanelInputs, metrics: ImageMetrics | None) -> None:
        if inputs.problem:
            self.message.emit("error", f"{item_id}: {inputs.problem}")
        self.panels.show_inputs(inputs)
        self.metrics.show(metrics)

    def mark_if_stale(self) -> None:
        """Dim the panels and flag the row and every metric display while the shown result no longer answers
        for the image (computed on another ROI, or by another model)."""
        current = self.session.current
        if current is None:
            return
        reason = self.session.stale_reason(current.id)
        self.panels.set_stale(reason)
        self.rows.mark_stale(current.id, reason)
        self.metrics.set_stale(reason)

    def show_part(self) -> bool:
        """Show the whole-slide run's part under the current ROI in the panels, unless a run of this very ROI
        is there; False when there is nothing to show that way. Its metrics follow from a worker."""
        session = self.session
        current, roi = session.current, session.roi
        if current is None or roi is None or (session.result(current.id) is not None
                                              and not session.is_stale(current.id)):
            return False
        result = session.stitched_result(current.id, roi)
        if result is None:
            return False
        mask = session.mask
        self.show_panels(current.id, result, None)
        self.panels.set_stale("")
        self.rows.mark_stale(current.id, "")
        self.metrics.set_stale("")
        if mask is not None:
            def scored(metrics: ImageMetrics) -> None:
                if self.panels.result is result:  # the part is still shown
                    self.metrics.show(metrics)

            self.jobs.submit("part metrics", lambda: image_metrics(result, mask), scored)
        return True

    def _on_result_added(self, item_id: str, record: RunRecord) -> None:
        """A run's result: shown when it is of the image on screen, else only counted."""
        result = record.result
        note = result.roi_note if result is not None else ""
        if note and not self._roi_note_said:  # no crop in the stream: SegScope cropped the ROI (said once a batch)
            self._roi_note_said = True
            self.message.emit("info", f"{note}: each image's ROI was sent to the stream as its whole image")
        if result is None or not self._on_screen(item_id):
            return

        def shown(inputs: PanelInputs) -> None:
            current = self.session.current
            if current is not None and current.id == item_id and self.session.result(item_id) is result:
                self._show_inputs(item_id, inputs, self.session.known_metrics(item_id))
                self.mark_if_stale()
                self.shown.emit(result, inputs.class_names)

        self.jobs.submit("panels", self._panel_inputs(result, record.class_names), shown)
