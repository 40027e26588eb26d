"""Run whole slide in the viewer: the shown slide in tiles on the run thread, its stitched heatmap over the
slide, and the part under any ROI in the result panels (the runs themselves live in the session, Qt-free,
kept on disk and restored with the dataset).

Tiles are the dataset's ROI size (the scale the model was trained at), overlapping by 1/8 and blended, read
from the reader the viewer has open (`core.tiled_eval.evaluate_slide`), so a pyramidal TIFF is never decoded
whole. The output scale is the model's own unless its canvases would pass the memory bound: then the
largest scale that fits is taken, and the messages say so; Run > Whole-slide output scale… sets one instead.
A result larger than the dataset keeps on disk is said, as the run starts, to be kept until the dataset is
closed only. The overlay's levels and the part's metrics are made on a worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QDoubleSpinBox, QLabel, QStatusBar, QVBoxLayout, QWidget

from ..core import metric_catalogue as catalogue
from ..core.metrics import ImageMetrics, image_metrics
from ..core.result import InferenceResult
from ..core.roi import Roi
from ..core.session import Session
from ..core.tiled_eval import TiledEvaluation, TilePlan
from ..core.tiling import (
    DEFAULT_MAX_CANVAS_BYTES,
    canvas_bytes,
    fitting_scale,
    output_size,
    stitched_bytes,
    tile_grid,
)
from . import settings
from .background import Background
from .main_menus import MainActions
from .message_area import MessageArea
from .open_slide import OpenSlide
from .result_panels import ResultPanels
from .run_controller import RunController
from .slide_overlay import overlay_pyramid
from .status_labels import count

#: Neighbouring tiles overlap by 1/8 of a tile: blended seams, and a seams map to check them.
OVERLAP_SHARE = 8
#: Where the chosen output scale is remembered (0: automatic).
SCALE_KEY = "whole_slide/output_scale"

#: (item id, result, metrics or None): how the window draws a result in the panels.
ShowPanels = Callable[[str, InferenceResult, Optional[ImageMetrics]], None]  # noqa: UP007 (run-time alias, 3.9)
ShowMetrics = Callable[[Optional[ImageMetrics]], None]  # noqa: UP007 (run-time alias, 3.9)


def gigabytes(size: int) -> str:
    return f"{size / 1e9:.1f} GB"


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
    """`run()` for the Run whole slide action; `show_part()` for whenever the ROI or the slide changes."""

    def __init__(self, session: Session, controller: RunController, open_slide: OpenSlide, panels: ResultPanels,
                 actions: MainActions, messages: MessageArea, status: QStatusBar, show_panels: ShowPanels,
                 show_metrics: ShowMetrics,
                 ready: Callable[[], bool], background: Background) -> None:
        super().__init__(controller)
        self.session, self.controller, self.open_slide, self.panels = session, controller, open_slide, panels
        self.actions, self.messages, self.status, self.show_panels = actions, messages, status, show_panels
        self.show_metrics, self.ready, self.background = show_metrics, ready, background
        controller.slideEvaluated.connect(session.add_slide_run)
        session.events.slide_run_added.connect(self._on_added)
        actions.slide_scale_action.triggered.connect(self.choose_scale)

    # --------------------------------------------------------------------------------------------- run
    def _tile(self) -> tuple[int, int] | None:
        dataset, reader = self.session.dataset, self.open_slide.reader
        if dataset is None or reader is None:
            return None
        roi = dataset.default_roi
        return min(roi.width, reader.size[0]), min(roi.height, reader.size[1])

    def _scales(self) -> tuple[Roi, int, float] | None:
        """(the region, the classes, the model's own output scale) of a run of the shown slide."""
        reader, tile, capabilities = self.open_slide.reader, self._tile(), self.session.capabilities
        if reader is None or tile is None or capabilities is None:
            return None
        return Roi.whole(*reader.size), len(capabilities.class_names) or 2, capabilities.input_size[0] / tile[0]

    def plan(self) -> tuple[TilePlan, str] | str:
        """The plan for the shown slide and a note on its output scale, or why it cannot run (one line)."""
        tile, scales = self._tile(), self._scales()
        if tile is None or scales is None:
            return "Select an image and open a backend first"
        region, classes, own = scales
        chosen = chosen_scale()
        scale = chosen or own
        needed = canvas_bytes(region, scale, classes, seams=True)
        note = ""
        if needed > DEFAULT_MAX_CANVAS_BYTES:
            fitting = fitting_scale(region, scale, classes, True, DEFAULT_MAX_CANVAS_BYTES)
            if chosen:
                return (f"At output scale {chosen:.4g} the stitched result needs {gigabytes(needed)}, over the "
                        f"{gigabytes(DEFAULT_MAX_CANVAS_BYTES)} bound: choose {fitting:.4g} or less (or Automatic) "
                        "in Run > Whole-slide output scale…")
            note = (f"output scale {fitting:.4g} (automatic: the model's own {own:.4g} would need "
                    f"{gigabytes(needed)}, over the {gigabytes(DEFAULT_MAX_CANVAS_BYTES)} bound)")
            scale = fitting
        elif chosen:
            note = f"output scale {chosen:.4g} (chosen in Run > Whole-slide output scale…)"
        plan = TilePlan(tile, overlap=min(tile) // OVERLAP_SHARE, seams=True,
                        output_scale=None if scale == own else scale)
        return plan, note

    def unkept(self, scale: float) -> str:
        """Why a run of the shown slide at output `scale` will not be restored when the dataset is reopened (its
        result is larger than the dataset keeps on disk), or "" when it will be."""
        store, scales = self.session.store, self._scales()
        if store is None or scales is None:
            return ""
        region, classes, _own = scales
        size = stitched_bytes(region, scale, classes, seams=True)
        if store.keeps(size):
            return ""
        return (f"its result ({gigabytes(size)}) is more than the {gigabytes(store.max_bytes)} this dataset keeps "
                "on disk: it is kept until the dataset is closed, and not restored when it is reopened")

    def run(self) -> bool:
        """Queue the current image's whole slide (False, with a note, when there is none or a run is going)."""
        session, reader, item = self.session, self.open_slide.reader, self.session.current
        if session.dataset is None or item is None or reader is None or not self.ready():
            self.status.showMessage("Select an image first", 3000)
            return False
        planned = self.plan()
        if isinstance(planned, str):
            self.messages.add("error", f"Whole slide of {item.id}: {planned}")
            return False
        plan, note = planned
        tiles = len(tile_grid(Roi.whole(*reader.size), plan.tile, plan.overlap, reader.size))
        scales = self._scales()
        unkept = self.unkept(plan.output_scale or scales[2]) if scales is not None else ""
        if not self.controller.run_slide(session.dataset, item, reader, plan, tiles):
            return False
        if unkept:  # said as the run starts, not after it
            self.messages.add("warning", f"Whole slide of {item.id}: {unkept}")
        self.actions.start_batch(tiles)
        text = f"Running the whole slide of {item.id} in {count(tiles, 'tile')}" + (f" at {note}" if note else "")
        if note:
            self.messages.add("info", text)
        self.status.showMessage(text + "…")
        return True

    def choose_scale(self) -> None:
        """Run > Whole-slide output scale…"""
        def need(value: float) -> str:
            scales = self._scales()
            if scales is None:
                return "Open a slide to see what its stitched result needs."
            region, classes, own = scales
            scale = value or fitting_scale(region, own, classes, True, DEFAULT_MAX_CANVAS_BYTES)
            width, height = output_size(region, scale)
            needed = canvas_bytes(region, scale, classes, seams=True)
            verdict = "fits" if needed <= DEFAULT_MAX_CANVAS_BYTES else "is over"
            unkept = self.unkept(scale)
            return (f"The shown slide at {scale:.4g}{' (automatic)' if not value else ''}: a {width} x {height} "
                    f"result, {gigabytes(needed)} while stitching, which {verdict} the "
                    f"{gigabytes(DEFAULT_MAX_CANVAS_BYTES)} bound. The model's own scale is {own:.4g}."
                    + (f" At this scale {unkept}." if unkept else ""))

        ScaleDialog(need, self.actions.window).exec()

    # ------------------------------------------------------------------------------------------ showing
    def show_overlay(self, item_id: str) -> None:
        """Lay `item_id`'s whole-slide run over the slide view (its levels made on a worker), or none."""
        run, overlay = self.session.slide_run_of(item_id), self.open_slide.view.overlay
        overlay.clear()
        self.actions.set_slide_overlay(False, False)
        if run is None:
            self.background.cancel("overlay")
            return

        def shown(pyramid: object) -> None:
            if self.open_slide.item_id == item_id and self.session.slide_run_of(item_id) is run:
                overlay.show(pyramid)  # type: ignore[arg-type]
                self.actions.set_slide_overlay(True, overlay.has_seams)

        self.background.submit("overlay", lambda: overlay_pyramid(run.stitched), shown)

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
        if mask is not None:
            def scored(metrics: ImageMetrics) -> None:
                if self.panels.result is result:  # the part is still shown
                    self.show_metrics(metrics)

            self.background.submit("part metrics", lambda: image_metrics(result, mask), scored)
        return True

    def _on_added(self, evaluation: TiledEvaluation, restored: bool) -> None:
        item, metrics = evaluation.item, evaluation.metrics
        if not restored:
            scores = "" if metrics is None else f": {catalogue.brief(catalogue.row_values(metrics))} over the slide"
            text = (f"Whole slide of {item.id}: {count(evaluation.tiles, 'tile')} in {evaluation.seconds:.1f} s at "
                    f"output scale {evaluation.stitched.scale:.4g}{scores}")
            self.messages.add("info", text)
            self.status.showMessage(text, 8000)
        if self.open_slide.item_id == item.id:
            self.show_overlay(item.id)
            self.show_part()
