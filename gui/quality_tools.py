"""The viewer's QA metrics (core/quality): which are computed, the Defects and Reliability docks, and the
keys that step through the current image's missed defects.

The chosen metrics (Inspect > QA metrics…, remembered) are computed for every image of a run on the run's
lane, beside its Dice (`apply_spec`: `RunController.set_quality`), and reach every view through the metric
catalogue: the Metrics dock, the dataset table's ranking column, the filter, Worst first and the histogram.
An image whose metrics lack them (scored before they were chosen, or re-scored after a mask edit) has them
computed by the session's `QualityJob` on a worker when it is the current one, then handed to the session
(`Session.set_quality`), which drops them if the image's metrics changed meanwhile.

`QualityTools` is a view of the session: it makes its docks and actions on `host`, and the window places
them (beside the Review and Timing docks, in the Inspect menu) and takes its messages; the docks are filled
only while on screen.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QInputDialog, QWidget

from ..core.errors import SegScopeError
from ..core.quality.calibration import Reliability
from ..core.quality.spec import ImageQuality, MetricSpec
from ..core.session.metrics import QualityJob
from ..core.session.session import Session
from .defects_panel import DefectsPanel, defect_rows
from .jobs import Jobs
from .reliability_panel import ReliabilityPanel
from .settings import settings
from .shortcuts import shortcut_action
from .window_layout import dock_seen, make_dock

SETTING = "quality/metrics"


class QualityTools(QObject):
    """The QA metrics' choice, docks and miss stepping of one window; see the module docstring."""

    #: (level, text) for the message area
    message = Signal(str, str)
    #: (text, milliseconds) for the status bar
    note = Signal(str, int)

    def __init__(self, session: Session, jobs: Jobs, apply_spec: Callable[[MetricSpec], None],
                 host: QWidget) -> None:
        super().__init__(host)
        self.session, self.jobs, self.apply_spec, self.host = session, jobs, apply_spec, host
        self.defects = DefectsPanel()
        self.reliability = ReliabilityPanel()
        self.defects_dock = make_dock(host, "Defects", self.defects)
        self.reliability_dock = make_dock(host, "Reliability", self.reliability)
        self.choose_action = shortcut_action(host, "&QA metrics…", "quality_metrics", "Choose the QA metrics "
                                             "computed beside Dice (HD95, NSD, clDice, defect F1, ECE)", self.choose)
        self.next_miss_action = shortcut_action(host, "Next missed defect", "next_miss", "Zoom to the next "
                                                "missed defect (FN) of the current image", lambda: self.step(1))
        self.prev_miss_action = shortcut_action(host, "Previous missed defect", "prev_miss", "Zoom to the "
                                                "previous missed defect (FN)", lambda: self.step(-1))
        self.prev_miss_action.setIconText("◂ Miss")  # what the dock's buttons show: they must stay narrow
        self.next_miss_action.setIconText("Miss ▸")
        self.defects.prev_button.setDefaultAction(self.prev_miss_action)
        self.defects.next_button.setDefaultAction(self.next_miss_action)
        #: what the window adds to its Inspect menu
        self.entries: tuple[QAction | None, ...] = (
            None, self.choose_action, self.prev_miss_action, self.next_miss_action,
            self.defects_dock.toggleViewAction(), self.reliability_dock.toggleViewAction())
        self._pending: tuple[str, int] | None = None  # (item id, id of its metrics) being computed
        self._timer = QTimer(self, singleShot=True, interval=0)
        self._timer.timeout.connect(self.refresh)
        events = session.events
        for event in (events.current_changed, events.metrics_changed, events.dataset_opened, events.slide_loaded):
            event.connect(lambda *_args: self._timer.start())
        for dock in (self.defects_dock, self.reliability_dock):
            dock.visibilityChanged.connect(lambda visible: visible and self._timer.start())
        self.spec = MetricSpec()
        self.set_spec(str(settings().value(SETTING, "") or ""), remember=False)

    # ------------------------------------------------------------------------------------------ the choice
    def set_spec(self, text: str, remember: bool = True) -> MetricSpec:
        """Compute the QA metrics listed in `text` (`--metrics`' syntax) from the next run on; SegScopeError
        for a bad list (the choice stays as it was)."""
        self.spec = MetricSpec.parse(text)
        self.apply_spec(self.spec)
        if remember:
            settings().setValue(SETTING, text)
        self._timer.start()
        return self.spec

    def choose(self) -> None:
        current = ",".join(f"nsd@{self.spec.nsd_tolerance:g}" if n == "nsd" else n for n in self.spec.names)
        text, ok = QInputDialog.getText(self.host, "QA metrics", "Metrics computed beside Dice for each image run "
                                        "(hd95, nsd@T, cldice, defect_f1, ece, all; empty: none):", text=current)
        if not ok:
            return
        try:
            self.set_spec(text)
        except SegScopeError as exc:
            self.message.emit("error", str(exc))

    # ------------------------------------------------------------------------------------------ the views
    def refresh(self) -> None:
        """Show the current image's defects and the reliability diagrams (the docks on screen); compute what
        the image lacks."""
        session, item = self.session, self.session.current
        result = session.result(item.id) if item is not None else None
        metrics = session.known_metrics(item.id) if item is not None and result is not None else None
        quality = metrics.quality if metrics is not None else None
        if dock_seen(self.defects_dock):
            if metrics is None:
                note = "Run an image that has a ground-truth mask to list its defects"
            elif quality is None or "defect_f1" not in quality.spec.names:
                note = ("Computing…" if "defect_f1" in self.spec.names else
                        "Choose defect_f1 in Inspect > QA metrics… to list the defects")
            else:
                note = ""
            rows = defect_rows(quality, result.roi, session.class_names) if not note and result else []
            self.defects.show_defects(rows, note)
        if dock_seen(self.reliability_dock):
            pooled, images = Reliability.empty(), 0
            for item_id in session.result_ids:
                known = session.known_metrics(item_id)
                if known is not None and known.quality is not None and known.quality.reliability is not None:
                    pooled, images = pooled + known.quality.reliability, images + 1
            self.reliability.show_reliability(quality.reliability if quality is not None else None, pooled, images)
        if item is not None and metrics is not None and self.spec and (quality is None or quality.spec != self.spec):
            self._compute(item.id)

    def _compute(self, item_id: str) -> None:
        """The current image's QA metrics by the chosen spec, on a worker (once per image and metrics)."""
        basis = self.session.known_metrics(item_id)
        if self._pending == (item_id, id(basis)):
            return
        job = self.session.quality_job(item_id, self.spec)
        if job is None:
            return
        self._pending = (item_id, id(basis))
        self.jobs.submit("quality", job.run, partial(self._on_computed, job), partial(self._on_failed, item_id))

    def _on_computed(self, job: QualityJob, quality: ImageQuality | None) -> None:
        self._pending = None
        if quality is not None and quality.spec == self.spec:
            self.session.set_quality(job.item_id, job.basis, quality)  # announces metrics_changed: the views follow

    def _on_failed(self, item_id: str, text: str, _details: str) -> None:
        self._pending = None
        self.message.emit("error", f"QA metrics of {item_id}: {text}")

    def step(self, offset: int) -> None:
        """Zoom to the next (previous) missed defect of the current image."""
        if not dock_seen(self.defects_dock):
            self.defects_dock.show()
            self.defects_dock.raise_()
            self.refresh()  # its list is filled only while it is on screen
        if self.defects.step_miss(offset) is None:
            self.note.emit("No missed defect listed for this image", 4000)
