"""The viewer's QA metrics (core/quality): which are computed, the Defects and Reliability docks, and the
keys that step through the current image's missed defects.

The chosen metrics (Inspect > QA metrics…, remembered) are computed for every image of a run on the run's
worker thread, beside its Dice (`RunController.set_quality`), and reach every view through the metric
catalogue: the Metrics dock, the dataset table's ranking column, the filter, Worst first and the histogram.
An image whose metrics lack them (scored before they were chosen, or re-scored after a mask edit) has them
computed on a thread of its own when it is the current one, then handed to the session
(`Session.set_quality`), which drops them if the image's metrics changed meanwhile.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QInputDialog, QMainWindow

from ..core.errors import SegScopeError
from ..core.metrics.scores import ImageMetrics, truth_at_roi
from ..core.quality.calibration import Reliability
from ..core.quality.scoring import image_quality
from ..core.quality.spec import ImageQuality, MetricSpec
from ..core.result import InferenceResult
from .defects_panel import DefectsPanel, defect_rows
from .main_menus import add_entries
from .reliability_panel import ReliabilityPanel
from .settings import settings
from .shortcuts import shortcut_action
from .window_layout import make_dock, tab_dock

SETTING = "quality/metrics"


class QualityTools(QObject):
    """Built by the main window after its inspection tools; see the module docstring."""

    computed = Signal(str, object, object)  # item id, the metrics it was computed against, ImageQuality
    failed = Signal(str, str)  # item id, what went wrong

    def __init__(self, window: QMainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.session = window.session  # type: ignore[attr-defined]
        inspection = window.inspection  # type: ignore[attr-defined]
        self.defects = DefectsPanel()
        self.reliability = ReliabilityPanel()
        self.defects_dock = make_dock(window, "Defects", self.defects)
        self.reliability_dock = make_dock(window, "Reliability", self.reliability)
        tab_dock(window, self.defects_dock, inspection.review_dock)
        tab_dock(window, self.reliability_dock, inspection.timing_dock)
        self.choose_action = shortcut_action(window, "&QA metrics…", "quality_metrics", "Choose the QA metrics "
                                             "computed beside Dice (HD95, NSD, clDice, defect F1, ECE)", self.choose)
        self.next_miss_action = shortcut_action(window, "Next missed defect", "next_miss", "Zoom to the next "
                                                "missed defect (FN) of the current image", lambda: self.step(1))
        self.prev_miss_action = shortcut_action(window, "Previous missed defect", "prev_miss", "Zoom to the "
                                                "previous missed defect (FN)", lambda: self.step(-1))
        self.prev_miss_action.setIconText("◂ Miss")  # what the dock's buttons show: they must stay narrow
        self.next_miss_action.setIconText("Miss ▸")
        self.defects.prev_button.setDefaultAction(self.prev_miss_action)
        self.defects.next_button.setDefaultAction(self.next_miss_action)
        add_entries(inspection.menu, (None, self.choose_action, self.prev_miss_action, self.next_miss_action,
                                      self.defects_dock.toggleViewAction(), self.reliability_dock.toggleViewAction()))
        self.defects.defectActivated.connect(inspection.zoom_to_box)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="segscope-quality")
        self._pending: tuple[str, int] | None = None
        self.computed.connect(self._on_computed)
        self.failed.connect(self._on_failed)
        self._timer = QTimer(self, singleShot=True, interval=0)
        self._timer.timeout.connect(self.refresh)
        events = self.session.events
        for event in (events.current_changed, events.metrics_changed, events.dataset_opened, events.slide_loaded):
            event.connect(lambda *_args: self._timer.start())
        window.destroyed.connect(lambda *_args: self._pool.shutdown(wait=False))
        self.spec = MetricSpec()
        self.set_spec(str(settings().value(SETTING, "") or ""), remember=False)

    # ------------------------------------------------------------------------------------------ the choice
    def set_spec(self, text: str, remember: bool = True) -> MetricSpec:
        """Compute the QA metrics listed in `text` (`--metrics`' syntax) from the next run on; SegScopeError
        for a bad list (the choice stays as it was)."""
        self.spec = MetricSpec.parse(text)
        self.window.controller.set_quality(self.spec)  # type: ignore[attr-defined]
        if remember:
            settings().setValue(SETTING, text)
        self._timer.start()
        return self.spec

    def choose(self) -> None:
        current = ",".join(f"nsd@{self.spec.nsd_tolerance:g}" if n == "nsd" else n for n in self.spec.names)
        text, ok = QInputDialog.getText(self.window, "QA metrics", "Metrics computed beside Dice for each image run "
                                        "(hd95, nsd@T, cldice, defect_f1, ece, all; empty: none):", text=current)
        if not ok:
            return
        try:
            self.set_spec(text)
        except SegScopeError as exc:
            self.window.messages.add("error", str(exc))  # type: ignore[attr-defined]

    # ------------------------------------------------------------------------------------------ the views
    def _current(self) -> tuple[str, InferenceResult, ImageMetrics | None] | None:
        item = self.session.current
        result = self.session.result(item.id) if item is not None else None
        return None if item is None or result is None else (item.id, result, self.session.known_metrics(item.id))

    def refresh(self) -> None:
        """Show the current image's defects and the reliability diagrams; compute what the image lacks."""
        current = self._current()
        quality = current[2].quality if current is not None and current[2] is not None else None
        if current is None or current[2] is None:
            note = "Run an image that has a ground-truth mask to list its defects"
        elif quality is None or "defect_f1" not in quality.spec.names:
            note = ("Computing…" if "defect_f1" in self.spec.names else
                    "Choose defect_f1 in Inspect > QA metrics… to list the defects")
        else:
            note = ""
        self.defects.show_defects([] if note else defect_rows(quality, current[1].roi,  # type: ignore[index]
                                                              self.session.class_names), note)
        pooled, images = Reliability.empty(), 0
        for item_id in self.session.result_ids:
            metrics = self.session.known_metrics(item_id)
            if metrics is not None and metrics.quality is not None and metrics.quality.reliability is not None:
                pooled, images = pooled + metrics.quality.reliability, images + 1
        self.reliability.show_reliability(quality.reliability if quality is not None else None, pooled, images)
        if current is not None and current[2] is not None and self.spec and (quality is None
                                                                             or quality.spec != self.spec):
            self._compute(*current)  # type: ignore[arg-type]

    def _compute(self, item_id: str, result: InferenceResult, basis: ImageMetrics) -> None:
        if self._pending == (item_id, id(basis)):
            return
        self._pending = (item_id, id(basis))
        document = self.session.document
        try:
            if document is not None and document.item.id == item_id and document.mask is not None:
                roi_mask = truth_at_roi(result, document.mask, str(document.source)).copy()  # edits go on meanwhile
            else:
                dataset = self.session.dataset
                mask = dataset.load_mask(dataset.item(item_id)) if dataset is not None else None
                if mask is None:
                    return
                roi_mask = truth_at_roi(result, mask).copy()
        except SegScopeError as exc:  # the mask no longer fits the result: its Dice says so too
            self.window.messages.add("error", f"QA metrics of {item_id}: {exc}")  # type: ignore[attr-defined]
            return
        spec = self.spec
        future = self._pool.submit(image_quality, spec, result, roi_mask)

        def done(finished: Future[ImageQuality]) -> None:  # on the worker thread: the signals queue it over
            error = finished.exception()
            if error is None:
                self.computed.emit(item_id, basis, finished.result())
            else:
                self.failed.emit(item_id, f"{type(error).__name__}: {error}")

        future.add_done_callback(done)

    def _on_computed(self, item_id: str, basis: ImageMetrics, quality: ImageQuality) -> None:
        self._pending = None
        if quality.spec == self.spec:
            self.session.set_quality(item_id, basis, quality)  # announces metrics_changed: the views follow

    def _on_failed(self, item_id: str, text: str) -> None:
        self._pending = None
        self.window.messages.add("error", f"QA metrics of {item_id} failed: {text} (a bug: please report it)")  # type: ignore[attr-defined]

    def step(self, offset: int) -> None:
        """Zoom to the next (previous) missed defect of the current image."""
        if not self.defects_dock.isVisible():
            self.defects_dock.show()
            self.defects_dock.raise_()
        if self.defects.step_miss(offset) is None:
            self.window.statusBar().showMessage("No missed defect listed for this image", 4000)
