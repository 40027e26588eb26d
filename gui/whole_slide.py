"""Run whole slide in the viewer: the shown slide in tiles on the run thread, its stitched heatmap over the
slide, and the part under any ROI in the result panels (the run itself lives in the session, Qt-free).

Tiles are the dataset's ROI size (the scale the model was trained at), overlapping by 1/8 and blended, read
from the reader the viewer has open (`core.tiled_eval.evaluate_slide`), so a pyramidal TIFF is never decoded
whole.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

from PySide6.QtWidgets import QStatusBar

from ..core import metric_catalogue as catalogue
from ..core.metrics import ImageMetrics, image_metrics
from ..core.result import InferenceResult
from ..core.roi import Roi
from ..core.session import Session
from ..core.tiled_eval import TiledEvaluation, TilePlan
from ..core.tiling import tile_grid
from .main_menus import MainActions
from .message_area import MessageArea
from .open_slide import OpenSlide
from .result_panels import ResultPanels
from .run_controller import RunController
from .status_labels import count

#: Neighbouring tiles overlap by 1/8 of a tile: blended seams, and a seams map to check them.
OVERLAP_SHARE = 8

#: (item id, result, metrics or None): how the window draws a result in the panels.
ShowPanels = Callable[[str, InferenceResult, Optional[ImageMetrics]], None]  # noqa: UP007 (run-time alias, 3.9)


class WholeSlide:
    """`run()` for the Run whole slide action; `show_part()` for whenever the ROI or the slide changes."""

    def __init__(self, session: Session, controller: RunController, open_slide: OpenSlide, panels: ResultPanels,
                 actions: MainActions, messages: MessageArea, status: QStatusBar, show_panels: ShowPanels,
                 ready: Callable[[], bool]) -> None:
        self.session, self.controller, self.open_slide, self.panels = session, controller, open_slide, panels
        self.actions, self.messages, self.status, self.show_panels, self.ready = (actions, messages, status,
                                                                                  show_panels, ready)
        controller.slideEvaluated.connect(session.add_slide_run)
        session.events.slide_run_added.connect(self._on_added)

    def run(self) -> bool:
        """Queue the current image's whole slide (False, with a note, when there is none or a run is going)."""
        session, reader, item = self.session, self.open_slide.reader, self.session.current
        if session.dataset is None or item is None or reader is None or not self.ready():
            self.status.showMessage("Select an image first", 3000)
            return False
        roi = session.dataset.default_roi
        tile = (min(roi.width, reader.size[0]), min(roi.height, reader.size[1]))
        plan = TilePlan(tile, overlap=min(tile) // OVERLAP_SHARE, seams=True)
        tiles = len(tile_grid(Roi.whole(*reader.size), plan.tile, plan.overlap, reader.size))
        if not self.controller.run_slide(session.dataset, item, reader, plan, tiles):
            return False
        self.actions.start_batch(tiles)
        self.status.showMessage(f"Running the whole slide of {item.id} in {count(tiles, 'tile')}…")
        return True

    def show_overlay(self, item_id: str) -> None:
        """Lay the whole-slide run over the slide view when it is of `item_id` (the slide just shown)."""
        run = self.session.slide_run
        if run is not None and run.item.id == item_id:
            self.open_slide.view.overlay.show(run.stitched)

    def show_part(self) -> bool:
        """Show the whole-slide run's part under the current ROI in the panels, unless a run of this very ROI
        is there; False when there is nothing to show that way."""
        session = self.session
        current, roi = session.current, session.roi
        if current is None or roi is None or (session.result(current.id) is not None
                                              and not session.is_stale(current.id)):
            return False
        result = session.stitched_result(current.id, roi)
        if result is None:
            return False
        mask = session.mask
        self.show_panels(current.id, result, image_metrics(result, mask) if mask is not None else None)
        self.panels.set_stale(False)
        return True

    def _on_added(self, evaluation: TiledEvaluation) -> None:
        item, metrics = evaluation.item, evaluation.metrics
        scores = "" if metrics is None else f": {catalogue.brief(catalogue.row_values(metrics))} over the slide"
        text = f"Whole slide of {item.id}: {count(evaluation.tiles, 'tile')} in {evaluation.seconds:.1f} s{scores}"
        self.messages.add("info", text)
        self.status.showMessage(text, 8000)
        if self.open_slide.item_id == item.id:
            self.show_overlay(item.id)
            self.show_part()
