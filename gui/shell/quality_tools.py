"""The viewer's QA metrics (core/quality): which are computed, the Defects and Reliability docks, and the
keys that step through the current image's missed defects.

The chosen metrics (Inspect > QA metrics…, remembered) are the session's (`Session.set_quality_spec`): every
image is scored by them beside its Dice, on the run's lane and on every re-scoring (an edit, a save, a whole-slide
part), against the truth its numbers are of, and they reach every view through the metric catalogue: the Metrics
dock, the dataset table's ranking column, the filter, Worst first and the histogram. The Defects dock lists the
defects of the numbers the Metrics dock shows (`core.session.views.headline`), so the two cannot disagree.

`QualityTools` is a view of the session: it makes its docks and actions on `host`, and the window places
them (beside the Error regions and Timing docks, in the Inspect menu) and takes its messages; the docks are filled
only while on screen.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDockWidget, QInputDialog, QWidget

from ...core.errors import SegScopeError
from ...core.quality.spec import MetricSpec
from ...core.session.session import Session
from ...core.session.views import headline
from ..docks.defects_panel import DefectsPanel, defect_rows
from ..docks.reliability_panel import ReliabilityPanel
from ..runtime.coalesce import Coalescer
from ..runtime.settings import settings
from ..widgets.docking import dock_seen, make_dock
from ..widgets.shortcuts import shortcut_action

SETTING = "quality/metrics"


class QualityTools(QObject):
    """The QA metrics' choice, docks and miss stepping of one window; see the module docstring."""

    #: (level, text) for the message area
    message = Signal(str, str)
    #: (text, milliseconds) for the status bar
    note = Signal(str, int)

    def __init__(self, session: Session, host: QWidget) -> None:
        super().__init__(host)
        self.session, self.host = session, host
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
        self._timer = Coalescer(self.refresh, parent=self)  # (the Reliability dock reads every image's numbers)
        events = session.events
        for event in (events.current, events.item_changed, events.items_changed, events.dataset, events.document):
            event.connect(lambda *_args: self._request())
        self._shown: set[QDockWidget] = set()  # the docks shown (as their visibilityChanged said: no call into Qt)
        for dock in (self.defects_dock, self.reliability_dock):
            dock.visibilityChanged.connect(lambda visible, dock=dock: self._on_visible(dock, visible))
        self.set_spec(str(settings().value(SETTING, "") or ""), remember=False)

    def _request(self) -> None:
        """A refresh soon, where a dock is shown (a dock shown later asks for one: `_on_visible`)."""
        if self._shown:
            self._timer.request()

    def _on_visible(self, dock: QDockWidget, visible: bool) -> None:
        if visible:  # (a dock behind another fills its list once it is on screen)
            self._shown.add(dock)
            self._timer.request()
        else:
            self._shown.discard(dock)

    # ------------------------------------------------------------------------------------------ the choice
    def set_spec(self, text: str, remember: bool = True) -> MetricSpec:
        """Compute the QA metrics listed in `text` (`--metrics`' syntax) from the next run on; SegScopeError
        for a bad list (the choice stays as it was)."""
        spec = MetricSpec.parse(text)
        self.session.set_quality_spec(spec)
        if remember:
            settings().setValue(SETTING, text)
        self._timer.request()
        return spec

    def choose(self) -> None:
        spec = self.session.quality
        current = ",".join(f"nsd@{spec.nsd_tolerance:g}" if n == "nsd" else n for n in spec.names)
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
        """Show the defects of the image on screen's numbers and the reliability diagrams (the docks on screen)."""
        session = self.session
        view = headline(session)
        metrics = view.metrics if view is not None and view.answer is not None else None
        result = view.answer.result if view is not None and view.answer is not None else None
        quality = metrics.quality if metrics is not None else None
        if dock_seen(self.defects_dock):
            rows = []
            if metrics is None or result is None:
                note = "Run an image that has a ground-truth mask to list its defects"
            elif quality is None or "defect_f1" not in quality.spec.names:
                note = ("Computing…" if "defect_f1" in session.quality.names else
                        "Choose defect_f1 in Inspect > QA metrics… to list the defects")
            else:  # the defects of the numbers shown, marked as they are (stale, re-scoring)
                rows, note = defect_rows(quality, result.roi, session.class_names), view.note if view else ""
            self.defects.show_defects(rows, note)
        if dock_seen(self.reliability_dock):
            pooled, images = session.running.reliability()  # kept as images are scored: no walk
            self.reliability.show_reliability(quality.reliability if quality is not None else None, pooled, images)

    def step(self, offset: int) -> None:
        """Zoom to the next (previous) missed defect of the current image."""
        if not dock_seen(self.defects_dock):
            self.defects_dock.show()
            self.defects_dock.raise_()
            self.refresh()  # its list is filled only while it is on screen
        if self.defects.step_miss(offset) is None:
            self.note.emit("No missed defect listed for this image", 4000)
