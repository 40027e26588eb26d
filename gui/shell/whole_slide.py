"""Run whole slide in the viewer: the shown slide in tiles on the backend's lane (the session's
`run_whole_slide` job), and its stitched heatmap over the slide; the part under any ROI answers for the image in
the panels, and the slide's own numbers in the row, the headline and the Metrics dock (the session's rule,
`Answer.scored`; the runs live in the session, kept on disk and restored with the dataset).

Tiles are the dataset's ROI size (the scale the model was trained at), overlapping by twice the model's edge
effect and each counted only inside it, the slide's borders mirrored (`core.wholeslide.plan`), read
from the reader the viewer has open (`core.wholeslide.evaluate.evaluate_slide`), so a pyramidal TIFF is never decoded
whole. The output scale is the model's own unless its canvases would pass the memory bound: then the
largest scale that fits is taken, and the messages say so; Run > Whole-slide output scale… sets one instead
(the policy is the session's, `Session.whole_slide_plan`; this module asks and shows).
A result larger than the dataset keeps on disk is said, as the run starts, to be kept until the dataset is
closed only. The overlay's levels are made on a worker.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QDoubleSpinBox, QLabel, QVBoxLayout, QWidget

from ...core.errors import SegScopeError
from ...core.session.events import SlideRunAdded
from ...core.session.session import Session
from ...core.wholeslide.plan import SlideRun, gigabytes
from ...core.wording import plural
from ..canvas.open_slide import OpenSlide
from ..canvas.slide_overlay import overlay_pyramid
from ..runtime import settings
from ..runtime.jobs import Jobs
from ..runtime.run_controller import RunController

#: Where the chosen output scale is remembered (0: automatic).
SCALE_KEY = "whole_slide/output_scale"


def chosen_scale() -> float:
    """The output scale the user set (0: automatic)."""
    try:
        return float(str(settings.settings().value(SCALE_KEY, 0.0)))
    except ValueError:
        return 0.0


class ScaleDialog(QDialog):
    """Run > Whole-slide output scale…: Automatic, or output pixels per slide pixel, with what the shown
    slide's canvases would need at that scale."""

    def __init__(self, need: Callable[[float], str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Whole-slide output scale")
        self.need = need
        self.spin = QDoubleSpinBox()
        self.spin.setRange(0.0, 1.0)
        self.spin.setDecimals(4)
        self.spin.setSingleStep(0.05)
        self.spin.setSpecialValueText("Automatic")
        self.spin.setValue(chosen_scale())
        self.spin.setToolTip("Output pixels per slide pixel of the stitched result. Automatic: the model's own "
                             "scale, or the largest that fits the memory bound")
        self.info = QLabel("")
        self.info.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        for widget in (QLabel("Output pixels per slide pixel of the stitched result:"), self.spin, self.info,
                       buttons):
            layout.addWidget(widget)
        self.spin.valueChanged.connect(lambda value: self.info.setText(need(value)))
        self.info.setText(need(self.spin.value()))

    def accept(self) -> None:
        settings.settings().setValue(SCALE_KEY, self.spin.value())
        super().accept()


class WholeSlide(QObject):
    """`run()` for the Run whole slide action; `show_overlay()` whenever another slide is shown (the part under
    the ROI is the display's `show_part`)."""

    message = Signal(str, str)  # level, text
    note = Signal(str, int)  # the status bar's text, for so many ms (0: until the next)
    #: (the shown slide has a whole-slide run over it, and one whose tiles overlapped): View's overlay toggles
    overlayChanged = Signal(bool, bool)

    def __init__(self, session: Session, controller: RunController, open_slide: OpenSlide, jobs: Jobs,
                 host: QWidget) -> None:
        super().__init__(controller)
        self.session, self.controller, self.open_slide = session, controller, open_slide
        self.jobs, self.host = jobs, host
        session.events.slide_run_added.connect(self._on_added)
        session.events.document.connect(lambda document, _old: self.show_overlay(document.item.id if document
                                                                                 else None))

    # --------------------------------------------------------------------------------------------- run
    def slide_run(self) -> SlideRun | None:
        """A run of the shown slide with the open model (None: no slide or no backend)."""
        reader = self.open_slide.reader
        return self.session.slide_run(reader.size) if reader is not None else None

    def run(self) -> bool:
        """Queue the current image's whole slide (False, with a note, when there is none or a run is going)."""
        session, reader, item = self.session, self.open_slide.reader, self.session.current
        if session.dataset is None or item is None or reader is None or not self.open_slide.shows(item.id):
            self.note.emit("Select an image first", 3000)
            return False
        run = self.slide_run()
        try:
            planned = session.whole_slide_plan(reader.size, chosen_scale())
        except SegScopeError as exc:
            self.message.emit("error", f"Whole slide of {item.id}: {exc}")
            return False
        assert run is not None  # planned
        plan, tiles, note = planned.plan, planned.tiles, planned.scale_note
        unkept = session.unkept(run, plan.output_scale or run.own_scale)
        if not self.controller.run(session.run_whole_slide(reader, plan, tiles)):
            return False
        if unkept:  # said as the run starts, not after it
            self.message.emit("warning", f"Whole slide of {item.id}: {unkept}")
        text = f"Running the whole slide of {item.id} in {plural(tiles, 'tile')}" + (f" at {note}" if note else "")
        self.message.emit("info", f"{text}: {run.overlap_note(plan)}")
        self.note.emit(text + "…", 0)
        return True

    def choose_scale(self) -> None:
        """Run > Whole-slide output scale…"""
        def need(value: float) -> str:
            run = self.slide_run()
            if run is None:
                return "Open a slide to see what its stitched result needs."
            scale = value or run.fitting(run.own_scale)
            width, height = run.output_size(scale)
            needed = run.needed(scale)
            verdict = "fits" if needed <= run.max_bytes else "is over"
            unkept = self.session.unkept(run, scale)
            return (f"The shown slide at {scale:.4g}{' (automatic)' if not value else ''}: a {width} x {height} "
                    f"result, {gigabytes(needed)} while stitching, which {verdict} the "
                    f"{gigabytes(run.max_bytes)} bound. The model's own scale is {run.own_scale:.4g}."
                    + (f" At this scale {unkept}." if unkept else ""))

        ScaleDialog(need, self.host).exec()

    # ------------------------------------------------------------------------------------------ showing
    def show_overlay(self, item_id: str | None) -> None:
        """Lay `item_id`'s whole-slide run over the slide view (its levels made on a worker), or none."""
        run, overlay = self.session.slide_run_of(item_id) if item_id else None, self.open_slide.view.overlay
        overlay.clear()
        self.overlayChanged.emit(False, False)
        if run is None:
            self.jobs.cancel("overlay")
            return

        def shown(pyramid: object) -> None:
            if self.open_slide.item_id == item_id and self.session.slide_run_of(item_id) is run:
                overlay.show(pyramid)  # type: ignore[arg-type]
                self.overlayChanged.emit(True, overlay.has_seams)

        self.jobs.submit("overlay", lambda: overlay_pyramid(run.stitched), shown)

    def _on_added(self, added: SlideRunAdded) -> None:
        """A whole-slide run of the shown slide lies over it (the panels show its part: the session says so)."""
        if not added.restored:
            self.note.emit(f"Whole slide of {added.item_id} done", 8000)
        if self.open_slide.item_id == added.item_id:
            self.show_overlay(added.item_id)
