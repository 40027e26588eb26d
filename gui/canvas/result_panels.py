"""Three linked result panels: softmax heatmap | argmax mask | ground truth (or the TP/FP/FN error map), under
their controls (`gui/canvas/panel_controls.py`), over the hover readout (`gui/canvas/panel_readout.py`). While two
runs are compared, the third panel may show run B's classes instead of the truth (`show_b`), titled so, the argmax
panel titled A's: the truth is not drawn then, so nothing edits it there.

Coordinates: every panel's scene is the slide itself. Each image is placed with `ImageItem.setRect` on the
ROI box, so a 960x960 model output and an 1800x1800 ground-truth crop cover the same slide pixels; the
hover readout is in slide coordinates without any bookkeeping, and the three ViewBoxes are linked on X and
Y (one camera).

Resolutions (what `panel_arrays()` returns is exactly what is drawn):
- heatmap and argmax: the backend's arrays at model resolution, untouched (a view, never resampled);
- ground truth and error map: ROI resolution, like `core.metrics.scores`' hard metrics, so the error map's
  TP/FP/FN pixel counts are the ones behind hard Dice/IoU. The prediction is brought to ROI resolution
  with `core.metrics.scores.argmax_at_roi`.

Speed: label images are uint8 with a 256-entry RGBA table (one lookup per pixel); setImage is always called
with explicit levels (no auto-level scan) and on views, never copies. Colour-bar drags only call
`setLevels`, which marks the image dirty; Qt coalesces repaints, so a fast drag renders once per frame.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRect, QRectF, Signal
from PySide6.QtGui import QImage, QPixmap, QTransform
from PySide6.QtWidgets import QVBoxLayout, QWidget

from ...core.errors import SegScopeError
from ...core.metrics.review import error_codes
from ...core.metrics.scores import argmax_at_roi
from ...core.result import InferenceResult
from ...core.roi import Roi
from ...core.session.panel_model import PanelInputs, PanelTitles, PreviewInputs, panel_inputs, pipeline_titles
from ...core.session.review import BOnScreen
from ...core.wording import class_name
from ..runtime.jobs import Jobs
from ..widgets import colormaps
from .panel_controls import PanelControls
from .panel_readout import HoverReadout, describe
from .result_panel import Notice, ResultPanel, contour
from .result_views import ExtraPanels

#: Opacity of the panels while their result no longer answers for the image (another ROI, another model).
STALE_OPACITY = 0.35
#: The title colour of the panel showing run B's classes instead of the truth.
B_TITLE_COLOR = "#e6b450"


class ResultPanels(QWidget):
    """Softmax heatmap, argmax and ground truth of one `InferenceResult`, with one camera and crosshair."""

    #: The hover readout, e.g. "slide (2512, 1380) | model (426, 480) | P background 0.035, defect 0.965 |
    #: predicted defect | true defect | TP" (no "true ..." part without a mask).
    hovered = Signal(str)
    #: a result was drawn (or the panels emptied): views of what they show may refresh
    shown = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._result: InferenceResult | None = None
        self._preview: PreviewInputs | None = None  # an image no result answers for yet: its ROI image and truth
        self._image_bgr: np.ndarray | None = None
        self._image_pixmap: QPixmap | None = None  # made from the BGR crop when overlay mode first needs it
        self._truth: np.ndarray | None = None  # class ids at ROI resolution
        self._predicted_roi: np.ndarray | None = None  # argmax at ROI resolution, made when first needed
        self._b: BOnScreen | None = None  # run B's classes, drawn in the truth's panel instead of the truth
        self._class_names: tuple[str, ...] = ()  # the open backend's
        self._result_names: tuple[str, ...] = ()  # of the model that made the result shown (when known)
        self._titles = PanelTitles()
        self._rect = QRectF()  # the ROI in slide pixels: where every image is drawn
        self._stale = ""  # why the result shown no longer answers for the image ("": it does)
        self._auto_fit = True  # refit on resize until the user pans or zooms

        self.controls = PanelControls(self.fit)
        self.class_combo, self.opacity_slider, self.banner = (self.controls.class_combo,
                                                              self.controls.opacity_slider, self.controls.banner)
        self.overlay_action, self.contour_action, self.error_map_action = (
            self.controls.overlay_action, self.controls.contour_action, self.controls.error_map_action)

        self.graphics = pg.GraphicsLayoutWidget()
        self.graphics.setBackground("#1b1d22")
        layout = self.graphics.ci
        self.heat = ResultPanel(layout, 0, 0, "Softmax")
        self.colorbar = pg.ColorBarItem(
            values=(0.0, 1.0), limits=(0.0, 1.0), rounding=0.01, width=15,
            colorMap=colormaps.heatmap_colormap(), colorMapMenu=False,
        )
        self.colorbar.setImageItem(self.heat.image)
        self.colorbar.setToolTip("Probability colour scale: drag its ends (the small diamonds) to stretch the "
                                 "colours over a narrower range")
        layout.addItem(self.colorbar, row=1, col=1)
        self.argmax = ResultPanel(layout, 0, 2, "Argmax", labels=True)
        self.truth = ResultPanel(layout, 0, 3, "Ground truth", labels=True)
        self.extra = ExtraPanels(layout, 4, self.heat.view, self)  # registered views (View > Panels)
        for col in (0, 2, 3):
            layout.layout.setColumnStretchFactor(col, 1)
        for panel in (self.argmax, self.truth):
            panel.view.setXLink(self.heat.view)
            panel.view.setYLink(self.heat.view)
        self.no_mask_text = pg.TextItem("no ground-truth mask", color=(200, 200, 200), anchor=(0.5, 0.5))
        self.no_mask_text.hide()
        self.truth.view.addItem(self.no_mask_text, ignoreBounds=True)
        self.graphics.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.hover = HoverReadout((self.heat, self.argmax, self.truth), self.graphics.viewport(), self)
        self.readout = self.hover.label
        self.heat.view.sigRangeChangedManually.connect(self._on_user_zoom)
        self.heat.view.sigResized.connect(self._on_resized)
        self.notice = Notice(self.graphics)  # over empty panels only: it never covers a result

        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(self.controls)
        column.addWidget(self.graphics, 1)
        column.addWidget(self.readout)
        self.class_combo.currentIndexChanged.connect(self._on_class_changed)
        self.overlay_action.toggled.connect(self._refresh_labels)
        self.contour_action.toggled.connect(self._refresh_labels)
        self.error_map_action.toggled.connect(self._refresh_truth)
        self.opacity_slider.valueChanged.connect(self._refresh_style)
        self.clear()

    # ----------------------------------------------------------------------------------------- public API
    def set_class_names(self, names: Sequence[str]) -> None:
        """Names for the class combo box and the readout (from the backend's capabilities)."""
        self._class_names = tuple(names)
        if self._result is not None:
            self._fill_class_combo(self._result.num_classes)

    def follow_card(self, pipeline: Path, jobs: Jobs) -> None:
        """Title the panels as the card of `pipeline`'s model says (read on a worker; the default titles stay
        where it cannot be read: the backend reports why)."""
        jobs.submit("card titles", lambda: pipeline_titles(pipeline), self.set_titles,
                    lambda _text, _details: self.set_titles(PanelTitles()))

    def set_titles(self, titles: PanelTitles) -> None:
        self._titles = titles
        self._set_titles()

    def show_result(
        self, result: InferenceResult, roi_image_bgr: np.ndarray | None, gt_roi: np.ndarray | None,
        class_names: Sequence[str] = (),
    ) -> None:
        """Display one result; `roi_image_bgr` and `gt_roi` are the ROI crops at ROI resolution, `class_names`
        those of the model that made it (default: the open backend's). A mask that does not fit raises."""
        inputs = panel_inputs(result, roi_image_bgr, gt_roi, class_names)
        if inputs.problem:
            raise SegScopeError(inputs.problem)
        self.show_inputs(inputs)

    def show_inputs(self, inputs: PanelInputs) -> None:
        """Display one result from its `panel_inputs` (only drawing is left for the GUI thread)."""
        result, roi = inputs.result, inputs.result.roi
        same_roi = self._result is not None and self._result.roi == roi
        self._result, self._preview = result, None
        self._result_names = inputs.class_names
        self._image_bgr = inputs.roi_image
        self._image_pixmap = None
        self._truth = inputs.truth
        self._predicted_roi = None
        if self._b is not None and self._b.roi != roi:
            self._b = None  # (of another ROI: the display says again what to show)
        self._fill_class_combo(result.num_classes)
        self._enable_error_map()
        self._rect = QRectF(roi.x0, roi.y0, roi.width, roi.height)
        for panel in (self.heat, self.argmax, self.truth):
            panel.set_rect(self._rect)
        self.no_mask_text.setPos(self._rect.center())
        self.colorbar.setOpacity(1.0)
        self.set_busy("")
        self._refresh_heatmap()
        self._refresh_labels()
        self.extra.show(result, self.current_class(), self._rect, self._truth)
        if not same_roi:
            self.fit()
        self.shown.emit()

    def show_preview(self, inputs: PreviewInputs) -> None:
        """Before anything answers for the image (never run): its ROI image in the first panel and its ground
        truth in the last, at once (`preview_inputs`, made on a worker); the middle panel says what to do."""
        self.clear()
        self._preview = inputs
        self._image_bgr = inputs.roi_image
        roi = inputs.roi
        self._rect = QRectF(roi.x0, roi.y0, roi.width, roi.height)
        for panel in (self.heat, self.argmax, self.truth):
            panel.set_rect(self._rect)
        self.no_mask_text.setPos(self._rect.center())
        self._refresh_truth()
        self.fit()
        self.shown.emit()

    def show_b(self, b: BOnScreen | None) -> None:
        """Run B's classes in the third panel instead of the truth (None: the truth again); ignored unless a result
        of B's ROI is shown."""
        if b is not None and (self._result is None or self._result.roi != b.roi):
            b = None
        if b is self._b:
            return
        self._b = b
        self._enable_error_map()
        self._refresh_truth()

    @property
    def b_shown(self) -> bool:
        """Whether the third panel shows run B's classes (not the truth)."""
        return self._b is not None

    @property
    def preview(self) -> PreviewInputs | None:
        """What the panels show of an image no result answers for (None: a result, or nothing)."""
        return self._preview

    def set_busy(self, text: str) -> None:
        """What is going on ("Loading…", "Running…", what to do next; "" for nothing): over the panels while
        they are empty, over the empty middle panel while an image's truth is previewed, else in a line above
        them, so it never covers a result."""
        empty = self._result is None
        self.notice.show_text(text if empty else "", self._middle_panel if self._preview is not None else None)
        self.banner.setText("" if empty else text)

    def _middle_panel(self) -> QRect:
        """Where the argmax panel lies in the panels' widget."""
        return self.graphics.mapFromScene(self.argmax.view.sceneBoundingRect()).boundingRect()

    def set_stale(self, reason: str) -> None:
        """Dim the panels while their result no longer answers for the image (`Session.stale_reason`, e.g.
        "ROI changed"; "" when it does)."""
        if reason != self._stale:
            self._stale = reason
            self._refresh_style()

    @property
    def stale(self) -> str:
        return self._stale

    def clear(self) -> None:
        self._stale = ""
        self._result_names = ()
        self._result = self._preview = self._image_bgr = self._image_pixmap = self._truth = self._predicted_roi = None
        self._b = None
        self.banner.setText("")
        self.hover.clear()
        for panel in (self.heat, self.argmax, self.truth):
            panel.clear()
        self.no_mask_text.hide()
        self.extra.clear()
        self.class_combo.blockSignals(True)
        self.class_combo.clear()
        self.class_combo.blockSignals(False)
        self.error_map_action.setEnabled(False)
        self.colorbar.setOpacity(0.0)  # nothing to scale: no bare labels under the notice (keeps its place)
        self._set_titles()

    def panel_arrays(self) -> dict[str, np.ndarray]:
        """What each panel draws, keyed "heatmap", "argmax" and "truth" or "error" (plus "image" when the
        ROI image is shown underneath); a panel that draws nothing is left out."""
        arrays: dict[str, np.ndarray] = {}
        if self._result is None:
            return arrays
        arrays["heatmap"] = self.heat.image.image
        arrays["argmax"] = self.argmax.image.image
        if self._b is not None:
            arrays["b"] = self.truth.image.image
        elif self._truth is not None:
            arrays["error" if self.error_map_action.isChecked() else "truth"] = self.truth.image.image
        if self.overlay_action.isChecked() and self._image_pixmap is not None and self._image_bgr is not None:
            arrays["image"] = self._image_bgr[..., ::-1]  # RGB, as the pixmap holds it
        return arrays

    def current_class(self) -> int:
        return max(self.class_combo.currentIndex(), 0)

    def set_levels(self, low: float, high: float) -> None:
        """Heatmap levels (probabilities mapped to the ends of the colour bar)."""
        self.colorbar.setLevels((low, high))

    def views(self) -> tuple[pg.ViewBox, pg.ViewBox, pg.ViewBox]:
        """The three linked ViewBoxes (heatmap, argmax, truth)."""
        return self.heat.view, self.argmax.view, self.truth.view

    def fit(self) -> None:
        """Zoom the (linked) panels to the ROI; they refit on resize until the user pans or zooms."""
        self._auto_fit = True
        if self._result is not None or self._preview is not None:
            self.heat.view.setRange(self._rect, padding=0.02)

    def readout_at(self, x: float, y: float) -> str:
        """The hover readout for slide position (x, y); also moves the crosshair there."""
        assert self._result is not None
        text = describe(self._result, x, y, self._class_name, self._truth, self._prediction, self.current_class(),
                        self._b.labels if self._b is not None else None)
        self.hover.place(x, y, text)
        self.hovered.emit(text)
        return text

    def _refresh_readout(self) -> None:
        if self.hover.position is not None and self._result is not None:
            self.readout_at(*self.hover.position)

    @property
    def result(self) -> InferenceResult | None:
        """The result on display (None when the panels are empty)."""
        return self._result

    @property
    def truth_drawn(self) -> bool:
        """Whether the ground truth is drawn (edits can go into it box by box)."""
        return self._truth is not None and self._b is None

    def update_truth(self, box: Roi, labels: np.ndarray) -> None:
        """Put edited ground-truth class ids `labels` into `box` (slide pixels, inside the ROI) and redraw.

        Only the box is recomputed (with a 1 px ring in contour mode, whose borders depend on neighbours):
        the panel's image wraps the drawn array without a copy, so the redraw is one repaint.
        """
        assert self._result is not None and self._truth is not None
        roi = self._result.roi
        x0, y0, x1, y1 = box.x0 - roi.x0, box.y0 - roi.y0, box.x1 - roi.x0, box.y1 - roi.y0
        self._truth[y0:y1, x0:x1] = labels
        drawn = self.truth.image.image
        if drawn is not self._truth:  # error map and/or contours: recompute what the box touches
            height, width = self._truth.shape
            gy0, gx0, gy1, gx1 = max(y0 - 2, 0), max(x0 - 2, 0), min(y1 + 2, height), min(x1 + 2, width)
            source = self._truth[gy0:gy1, gx0:gx1]
            if self.error_map_action.isChecked():
                source = error_codes(self._prediction()[gy0:gy1, gx0:gx1], source, self.current_class())
            patch = self._as_drawn(source)
            ry0, rx0, ry1, rx1 = max(y0 - 1, 0), max(x0 - 1, 0), min(y1 + 1, height), min(x1 + 1, width)
            drawn[ry0:ry1, rx0:rx1] = patch[ry0 - gy0 : ry1 - gy0, rx0 - gx0 : rx1 - gx0]
        self.truth.image.updateImage()
        self._refresh_readout()

    def predicted_at_roi(self) -> np.ndarray | None:
        """The argmax at ROI resolution (the prediction the error map and hard metrics score)."""
        if self._result is None:
            return None
        if self._predicted_roi is None:
            self._predicted_roi = argmax_at_roi(self._result)
        return self._predicted_roi

    def _on_user_zoom(self, *_args: object) -> None:
        self._auto_fit = False

    def _on_resized(self, *_args: object) -> None:
        self.notice.center()
        if self._auto_fit:
            self.fit()

    # ------------------------------------------------------------------------------------------ internals
    def _prediction(self) -> np.ndarray:
        """`predicted_at_roi()` while a result is shown (the callers only run then)."""
        predicted = self.predicted_at_roi()
        assert predicted is not None
        return predicted

    def _class_name(self, index: int) -> str:
        names = self._result_names or self._class_names
        return class_name(names, index)

    def _fill_class_combo(self, num_classes: int) -> None:
        previous = self.class_combo.currentIndex()
        default = previous if 0 <= previous < num_classes else min(1, num_classes - 1)
        self.class_combo.blockSignals(True)
        self.class_combo.clear()
        self.class_combo.addItems([self._class_name(i) for i in range(num_classes)])
        self.class_combo.setCurrentIndex(default)
        self.class_combo.blockSignals(False)

    def _on_class_changed(self) -> None:
        if self._result is not None:
            self._refresh_heatmap()
            self.extra.show(self._result, self.current_class(), self._rect, self._truth)
            if self.error_map_action.isChecked():
                self._refresh_truth()

    def _refresh_heatmap(self) -> None:
        assert self._result is not None
        probabilities = self._result.probabilities[..., self.current_class()]
        self.heat.image.setImage(probabilities, autoLevels=False, levels=self.colorbar.levels(), rect=self._rect)
        self._set_titles()

    def _refresh_labels(self) -> None:
        """Argmax and truth/error images (filled or contours)."""
        if self._result is not None:
            self.argmax.image.setImage(self._as_drawn(self._result.argmax), autoLevels=False, levels=(0, 255),
                                       rect=self._rect)
        self._refresh_truth()

    def _enable_error_map(self) -> None:
        self.error_map_action.setEnabled(self._truth is not None and self._b is None)

    def _refresh_truth(self) -> None:
        truth = self._preview.truth if self._preview is not None else self._truth
        self.no_mask_text.setVisible((self._result is not None or self._preview is not None) and truth is None
                                     and self._b is None)
        if self._b is not None:
            self.truth.image.setImage(self._as_drawn(self._b.labels), autoLevels=False, levels=(0, 255),
                                      rect=self._rect)
        elif truth is None:
            self.truth.image.clear()
        else:
            error_map = self.error_map_action.isChecked() and self._result is not None
            if error_map:
                labels = error_codes(self._prediction(), truth, self.current_class())
            else:
                labels = truth
            self.truth.image.setImage(self._as_drawn(labels), autoLevels=False, levels=(0, 255), rect=self._rect)
        self._refresh_style()
        self._refresh_readout()

    def _as_drawn(self, labels: np.ndarray) -> np.ndarray:
        return contour(labels) if self.overlay_action.isChecked() and self.contour_action.isChecked() else labels

    def _refresh_style(self) -> None:
        """Tables, opacity and the ROI image underneath, following the overlay switches."""
        overlay = self.overlay_action.isChecked()
        opacity = (self.opacity_slider.value() / 100 if overlay else 1.0) * (STALE_OPACITY if self._stale else 1.0)
        error_map = self.error_map_action.isChecked() and self.truth_drawn
        self.argmax.image.setLookupTable(colormaps.label_lut(overlay))
        self.truth.image.setLookupTable(colormaps.error_lut(overlay) if error_map else colormaps.label_lut(overlay))
        previewed = self._preview is not None  # the ROI image in the first panel, whatever the overlay switch
        if (overlay or previewed) and self._image_pixmap is None and self._image_bgr is not None:
            image = pg.functions.ndarray_to_qimage(np.ascontiguousarray(self._image_bgr), QImage.Format.Format_BGR888)
            self._image_pixmap = QPixmap.fromImage(image)
        pixmap = self._image_pixmap
        for panel in (self.heat, self.argmax, self.truth):
            panel.image.setOpacity(opacity)
            show_base = (overlay or previewed and panel is self.heat) and pixmap is not None
            if pixmap is not None and show_base and panel.base.pixmap().cacheKey() != pixmap.cacheKey():
                panel.base.setPixmap(pixmap)  # implicitly shared: no copy
                panel.base.setPos(self._rect.topLeft())
                # over the ROI (a preview's image is read at a coarser level of the slide: drawn larger)
                panel.base.setTransform(QTransform.fromScale(self._rect.width() / pixmap.width(),
                                                             self._rect.height() / pixmap.height()))
            panel.base.setVisible(show_base)
        self._set_titles()

    def _set_titles(self) -> None:
        heat_title = "Image" if self._preview is not None else self._titles.heat
        if self._result is not None:
            heat_title = f"{self._titles.heat}: {self._class_name(self.current_class())}"
        stale = f" <span style='color:#e6b450'>({self._stale}: run again)</span>" if self._stale else ""
        whose = "A: " if self._b is not None else ""  # (beside B, the model on screen's panels say so)
        self.heat.title.setText(whose + heat_title + stale)
        self.argmax.title.setText(whose + self._titles.labels)
        if self._b is not None:  # in amber, kept where a narrow panel cuts the title short
            self.truth.title.setText(html.escape(self._b.title(self._titles.labels), quote=False), color=B_TITLE_COLOR)
        elif self.error_map_action.isChecked() and self._truth is not None:
            legend = " ".join(
                f"<span style='color:#{r:02x}{g:02x}{b:02x}'>&#9632; {colormaps.ERROR_NAMES[code]}</span>"
                for code, (r, g, b) in colormaps.ERROR_COLORS.items()
            )
            self.truth.title.setText(f"Error map {legend}", color=None)
        else:
            self.truth.title.setText("Ground truth", color=None)

    def _on_mouse_moved(self, scene_pos) -> None:
        if self._result is None:
            return
        for panel in (self.heat, self.argmax, self.truth):
            if panel.view.sceneBoundingRect().contains(scene_pos):
                point = panel.view.mapSceneToView(scene_pos)
                self.readout_at(point.x(), point.y())
                return
