"""The result panels as a view of the session: they draw what answers for the image on screen
(`core.session.views.headline`: its run, or the part of its whole-slide run under its ROI) with the mask on
screen, dimmed while it no longer answers for the image (another ROI, another model), or say why there is
nothing to draw (loading, queued, not run, unreadable). Before anything answers for it (never run, or running)
they show its ROI image and its ground truth under the ROI at once, with what to do next. The ROI crop and the
mask under it are read on a worker and drawn when they are back. While two runs are compared and the current place's
image is on screen, the third panel shows run B's classes instead of the truth (`SessionReview.b_on_screen`)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from ...core.dataset.dataset import DatasetItem
from ...core.result import InferenceResult
from ...core.roi import Roi
from ...core.session.answers import RUN, Answer
from ...core.session.backend_state import BackendOpened
from ...core.session.events import FAILED, QUEUED, UNREADABLE, MaskChanged
from ...core.session.panel_model import PanelInputs, PreviewInputs, panel_inputs, preview_inputs
from ...core.session.session import Session
from ...core.session.views import headline
from ..canvas.open_slide import OpenSlide
from ..canvas.result_panels import ResultPanels
from ..runtime.jobs import Jobs
from ..widgets.shortcuts import key


class ResultDisplay(QObject):
    """Keeps `panels` on what answers for the image on screen; `shown` when a run's result is drawn (the mask
    tools edit on it)."""

    message = Signal(str, str)  # level, text
    shown = Signal(object, object)  # (InferenceResult, class names): a run's result is drawn

    def __init__(self, session: Session, open_slide: OpenSlide, panels: ResultPanels, jobs: Jobs,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session, self.open_slide, self.panels, self.jobs = session, open_slide, panels, jobs
        self._drawn: tuple[object, ...] | None = None  # what the panels draw (or are reading): answer, mask
        events = session.events
        events.current.connect(self._on_current)
        events.document.connect(lambda _document, _old: self.refresh())
        events.item_changed.connect(lambda changed: self._on_items_changed((changed.item_id,)))
        events.items_changed.connect(lambda changed: self._on_items_changed(changed.item_ids))
        events.mask_changed.connect(self._on_mask_changed)
        session.review.parity.events.current.connect(lambda _entry, _old: self._show_b())
        if session.backend is not None:
            session.backend.events.opened.connect(self._on_backend_opened)

    def ready(self) -> bool:
        """Whether the selected item's slide is decoded and shown."""
        current = self.session.current
        return self.session.ready and current is not None and self.open_slide.shows(current.id)

    def _on_current(self, item: DatasetItem | None, _old: DatasetItem | None) -> None:
        if item is not None and _old is not None and item.id == _old.id:
            return  # the same image (its saved mask adopted): nothing to redraw
        self._drawn = None
        self.panels.clear()
        if item is not None:
            self.panels.set_busy(f"Loading {item.id}…")

    def _on_items_changed(self, item_ids: tuple[str, ...]) -> None:
        current = self.session.current
        if current is not None and current.id in item_ids:
            self.refresh()

    def _on_mask_changed(self, changed: MaskChanged) -> None:
        """The mask on screen changed as a whole (not an edit, which the mask tools draw themselves)."""
        if changed.kind in ("discard", "restore"):
            self.refresh(force=True)

    def _on_backend_opened(self, opened: BackendOpened) -> None:
        """Another model: the panels name its classes (results of another model keep theirs, dimmed)."""
        self.panels.set_class_names(opened.capabilities.class_names)
        self.panels.follow_card(opened.choice.pipeline, self.jobs)
        self.refresh(force=True)

    def hint(self) -> str:
        """What the panels say while nothing answers for the image on screen."""
        view, current = headline(self.session), self.session.current
        outcome = self.session.outcome(current.id) if current is not None else None
        if current is not None and outcome is not None and outcome.kind == UNREADABLE:
            return f"{current.id} cannot be opened: {outcome.text}"
        if current is not None and outcome is not None and outcome.kind == FAILED:
            return (f"{current.id} failed: {outcome.text}\nFix what this names, then run it again (Run, "
                    f"{key('run_current')}); Messages (View menu) keeps the details")
        if view is not None and view.status.startswith(QUEUED) and current is not None:
            return f"Running {current.id}…"
        return f"Not run yet: press Run ({key('run_current')}) or Run all ({key('run_all')})"

    def refresh(self, force: bool = False) -> None:
        """Draw what answers for the image on screen, when that is not what the panels draw already."""
        view = headline(self.session)
        if view is None or not self.ready():
            if view is not None and view.error:
                self.panels.set_busy(self.hint())
            return
        answer = view.answer
        if answer is None and not view.error:
            self._preview(force)
            return
        if answer is None or answer.result is None:
            self._drawn = None
            self.panels.clear()
            self.panels.set_busy(self.hint())
            return
        mask = self.session.mask
        drawn = (answer.key, id(answer.result), mask is not None, id(self.session.document))
        if force or drawn != self._drawn:
            self._drawn = drawn
            self.jobs.submit("panels", self._panel_inputs(answer), lambda inputs: self._show(answer, inputs))
        self.panels.set_stale(answer.stale)

    def _preview(self, force: bool) -> None:
        """Nothing answers for the image on screen yet: its ROI image and truth under the ROI, read on a worker."""
        current, mask = self.session.current, self.session.mask
        assert current is not None  # (a view)
        roi = self.session.roi_for(current.id)
        classes = len(self.session.class_names) or 2
        drawn = ("preview", roi, classes, mask is not None, id(self.session.document))
        if force or drawn != self._drawn:
            self._drawn = drawn
            self.panels.clear()
            self.jobs.submit("panels", self._preview_inputs(roi, classes),
                             lambda inputs: self._show_preview(drawn, inputs))
        self.panels.set_busy(self.hint())

    def _preview_inputs(self, roi: Roi, classes: int) -> Callable[[], PreviewInputs]:
        """The ROI image and the truth under it, as work for any thread (the reader and the mask taken now)."""
        reader, mask = self.open_slide.reader, self.session.mask

        def make() -> PreviewInputs:
            return preview_inputs(reader, roi, mask[roi.y0 : roi.y1, roi.x0 : roi.x1] if mask is not None else None,
                                  classes)
        return make

    def _show_preview(self, drawn: tuple[object, ...], inputs: PreviewInputs) -> None:
        if drawn != self._drawn:
            return  # something else is drawn by now
        self.panels.show_preview(inputs)
        hint = self.hint()
        self.panels.set_busy(hint + (f"\nGround truth: {inputs.problem}" if inputs.problem else ""))

    def redraw(self) -> None:
        """Draw again (the mask tools made a blank mask for an image that had none)."""
        self.refresh(force=True)

    def _panel_inputs(self, answer: Answer) -> Callable[[], PanelInputs]:
        """What the panels need of the answer besides its arrays, as work for any thread (the reader and the
        mask on screen taken now)."""
        reader, mask = self.open_slide.reader, self.session.mask
        result = answer.result
        assert result is not None
        roi = result.roi

        def make() -> PanelInputs:
            roi_image = reader.read_roi(roi) if reader is not None and roi.fits(*reader.size) else None
            gt = mask[roi.y0 : roi.y1, roi.x0 : roi.x1] if mask is not None else None
            return panel_inputs(result, roi_image, gt, answer.class_names)
        return make

    def _show_b(self) -> None:
        """Run B's classes in the truth's panel while the two runs' current entry is on screen, else the truth
        (`SessionReview.b_on_screen`)."""
        self.panels.show_b(self.session.review.b_on_screen())

    def _show(self, answer: Answer, inputs: PanelInputs) -> None:
        view = headline(self.session)
        if view is None or view.answer is None or view.answer.key != answer.key:
            return  # something else answers by now (its own drawing is on the way)
        if inputs.problem:
            self.message.emit("error", f"{view.item_id}: {inputs.problem}")
        self.panels.show_inputs(inputs)
        self.panels.set_stale(view.answer.stale)
        self._show_b()
        if answer.source == RUN:
            result: InferenceResult = inputs.result
            self.shown.emit(result, inputs.class_names)
