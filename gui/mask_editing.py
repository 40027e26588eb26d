"""Mask editing in the viewer: tools on the ground-truth panel, undo/redo, save, crash recovery.

The user corrects the ground truth (or a prediction accepted as a starting point) on the third result panel,
next to the heatmap and argmax, where the ROI is shown at full resolution. Every edit goes to the
full-slide mask held by a `core.annotation.MaskEditor` (which keeps compact undo deltas) and is clipped to
the ROI, the part the user sees; the panel redraws only the changed box. After an edit the current result's
metrics are recomputed against the edited mask (rate-limited).

Unsaved edits are flagged in the window title and the dataset list, asked about before the image or the
dataset changes and before the window closes, and auto-saved every few seconds to a recovery file by a
worker thread (on a copy of the mask); reopening the image after a crash offers them back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import QObject, QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QLabel,
    QMenu,
    QMessageBox,
    QSlider,
    QSpinBox,
    QToolBar,
    QToolButton,
)

from ..core.annotation import (
    MaskEditor,
    SaveMode,
    allowed_map,
    discard_recovery,
    find_recovery,
    prediction_labels,
    write_recovery,
)
from ..core.dataset import DatasetItem, backup_mask_path
from ..core.errors import SegScopeError
from ..core.mask_document import MaskDocument, mask_source
from ..core.metrics import mask_piece_labels
from ..core.result import InferenceResult
from ..core.roi import Roi
from . import settings
from .mask_canvas import EditLayer
from .shortcuts import check_box_for, key, shortcut_action

if TYPE_CHECKING:
    from .main_window import MainWindow

TOOLS = ("pan", "brush", "eraser", "fill", "lasso")
#: Auto-save period while there are unsaved edits: a crash loses at most this much work.
AUTOSAVE_MS = 3000
#: Metrics are recomputed this long after the last edit (a drag is not re-scored on every mouse move).
METRICS_DELAY_MS = 300
UNSAVED_MARK = " · unsaved"
MAX_RADIUS = 500
SAVE_MODE_KEY = "editing/save_mode"


def slide_point(pos: QPointF) -> tuple[float, float]:
    """A position in the view (pixel x covers [x, x + 1)) as mask pixel coordinates (pixel x centred on x)."""
    return pos.x() - 0.5, pos.y() - 0.5


def _clip(box: Roi, roi: Roi) -> Roi | None:
    clipped = Roi(max(box.x0, roi.x0), max(box.y0, roi.y0), min(box.x1, roi.x1), min(box.y1, roi.y1))
    return clipped if clipped.x0 < clipped.x1 and clipped.y0 < clipped.y1 else None


class MaskEditing(QObject):
    """The editing tools, actions and state of one main window (`window.editing`)."""

    dirtyChanged = Signal(bool)
    #: An image's mask was edited and its metrics recomputed (rate-limited): views of the mask may refresh.
    maskEdited = Signal(str)
    _autosaved = Signal(int, str)  # version, error text ("" when written)

    def __init__(self, window: MainWindow) -> None:
        super().__init__(window)
        self.window = window
        self.panels = window.panels
        self.item: DatasetItem | None = None  # the image whose document the tools edit
        self._last_point: tuple[float, float] | None = None  # brush/eraser drag in progress
        self._path: list[QPointF] = []  # lasso or polygon in progress
        self._dragged = False
        self._allowed_cache: dict[tuple, np.ndarray] = {}
        self._autosave_job: Future | None = None
        self._autosaved_version = 0
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="segscope-autosave")

        self.layer = EditLayer(self._can_edit)
        self.panels.truth.view.addItem(self.layer, ignoreBounds=True)
        self.layer.pressed.connect(self._on_press)
        self.layer.moved.connect(self._on_move)
        self.layer.released.connect(self._on_release)
        self.layer.doubleClicked.connect(self._on_double_click)

        self._metrics_timer = QTimer(self, singleShot=True, interval=METRICS_DELAY_MS)
        self._metrics_timer.timeout.connect(self.update_metrics)
        self._autosave_timer = QTimer(self, interval=AUTOSAVE_MS)
        self._autosave_timer.timeout.connect(self.autosave)
        self._autosaved.connect(self._on_autosaved)

        self._build_actions()
        self._build_toolbar()
        self._build_menu()
        window.session.events.document_changed.connect(self._on_document_changed)
        self.set_tool("pan")
        self._sync_state()

    # ------------------------------------------------------------------------------------------ building
    def _action(self, text: str, action_id: str, tip: str, slot: Callable, checkable: bool = False) -> QAction:
        return shortcut_action(self.window, text, action_id, tip, slot, checkable)

    def _build_actions(self) -> None:
        a = self._action
        tips = {
            "pan": "Pan and zoom the panels (no editing); the middle button and the wheel always navigate",
            "brush": "Paint the chosen class on the Ground truth panel; [ and ] change the size",
            "eraser": "Erase to background on the Ground truth panel; [ and ] change the size",
            "fill": "Flood-fill the clicked region (inside the ROI) with the chosen class",
            "lasso": "Drag a lasso, or click corners and double-click, to fill a polygon with the chosen class",
        }
        self.tool_group = QActionGroup(self)
        self.tool_actions: dict[str, QAction] = {}
        for tool in TOOLS:
            action = a(tool.capitalize(), f"tool_{tool}", tips[tool], lambda _=False, t=tool: self.set_tool(t), True)
            self.tool_group.addAction(action)
            self.tool_actions[tool] = action
        self.smaller_action = a("Smaller brush", "brush_smaller", "Smaller brush", lambda: self.step_radius(-1))
        self.bigger_action = a("Bigger brush", "brush_bigger", "Bigger brush", lambda: self.step_radius(1))
        self.limit_action = a("P ≥ t only", "probability_limit",
                              "Brush, fill and lasso paint only where the chosen class's probability is at least "
                              "the threshold", lambda: None, True)
        self.accept_argmax_action = a("Accept argmax", "accept_argmax",
                                      "Replace the ROI's mask with the prediction (argmax): a starting point",
                                      lambda: self.accept_prediction(None))
        self.accept_threshold_action = a("Accept P ≥ t", "accept_threshold",
                                         "Replace the ROI's mask with the chosen class where its probability is "
                                         "at least the threshold", lambda: self.accept_prediction(self.threshold()))
        self.undo_action = a("Undo", "undo", "Undo the last mask edit", self.undo)
        self.redo_action = a("Redo", "redo", "Redo the mask edit", self.redo)
        self.redo_action.setShortcuts([QKeySequence(key("redo")), QKeySequence(key("redo_alt"))])
        self.save_action = a("Save mask", "save_mask", "Save the edited mask", self.save)
        self.save_mode_group = QActionGroup(self)
        self.save_mode_actions: dict[str, QAction] = {}
        for mode, text in (("corrected", "Save beside the original (mask_corrected.png)"),
                           ("replace", "Replace the original (keeps a backup, mask.orig.png)")):
            action = QAction(text, self, checkable=True)
            action.setToolTip(text)
            action.triggered.connect(lambda _=False, m=mode: self.set_save_mode(m))
            self.save_mode_group.addAction(action)
            self.save_mode_actions[mode] = action
        self.save_mode_actions[self.save_mode()].setChecked(True)

    def _build_toolbar(self) -> None:
        bar = QToolBar("Mask editing")
        bar.setObjectName("toolbar_mask_editing")
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        for action in self.tool_actions.values():
            bar.addAction(action)
        self.radius_spin = QSpinBox()
        self.radius_spin.setRange(1, MAX_RADIUS)
        self.radius_spin.setValue(8)
        self.radius_spin.setPrefix("r ")
        self.radius_spin.setSuffix(" px")
        self.radius_spin.setToolTip(f"Brush and eraser radius in slide pixels ({key('brush_smaller')} / "
                                    f"{key('brush_bigger')})")
        self.radius_spin.valueChanged.connect(self._update_preview)
        bar.addWidget(self.radius_spin)
        bar.addSeparator()
        self.class_combo = QComboBox()
        self.class_combo.setToolTip("Class the brush, fill and lasso paint, and whose probability the "
                                    "threshold tools use")
        self.class_combo.setMinimumContentsLength(8)
        bar.addWidget(QLabel(" Paint class "))
        bar.addWidget(self.class_combo)
        bar.addWidget(check_box_for(self.limit_action))
        self.threshold_slider = QSlider(Qt.Orientation.Horizontal)
        self.threshold_slider.setRange(0, 100)
        self.threshold_slider.setValue(50)
        self.threshold_slider.setMaximumWidth(120)
        self.threshold_slider.setToolTip("Probability threshold t of the chosen class, for 'P ≥ t only' and "
                                         "'Accept P ≥ t'")
        self.threshold_label = QLabel()
        self.threshold_label.setMinimumWidth(48)
        self.threshold_slider.valueChanged.connect(lambda v: self.threshold_label.setText(f"t {v / 100:.2f}"))
        self.threshold_label.setText(f"t {self.threshold():.2f}")
        bar.addWidget(self.threshold_slider)
        bar.addWidget(self.threshold_label)
        bar.addSeparator()
        for entry in (self.accept_argmax_action, self.accept_threshold_action, None, self.undo_action,
                      self.redo_action):
            if entry is None:
                bar.addSeparator()
            else:
                bar.addAction(entry)
        save_button = QToolButton()
        save_button.setDefaultAction(self.save_action)
        save_button.setPopupMode(QToolButton.ToolButtonPopupMode.MenuButtonPopup)
        save_menu = QMenu(save_button)
        save_menu.setToolTipsVisible(True)
        save_menu.addActions(list(self.save_mode_actions.values()))
        save_button.setMenu(save_menu)
        bar.addWidget(save_button)
        self.toolbar = bar
        self.window.addToolBarBreak()
        self.window.addToolBar(bar)

    def _build_menu(self) -> None:
        menu = QMenu("&Edit", self.window)
        for action in (self.undo_action, self.redo_action, None, *self.tool_actions.values(), self.smaller_action,
                       self.bigger_action, self.limit_action, None, self.accept_argmax_action,
                       self.accept_threshold_action, None, self.save_action):
            menu.addAction(action) if action else menu.addSeparator()
        mode_menu = menu.addMenu("Save mode")
        mode_menu.addActions(list(self.save_mode_actions.values()))
        menus = self.window.menuBar().actions()
        if len(menus) > 1:
            self.window.menuBar().insertMenu(menus[1], menu)  # after File
        else:
            self.window.menuBar().addMenu(menu)
        self.menu = menu

    # ------------------------------------------------------------------------------------ the document
    @property
    def document(self) -> MaskDocument | None:
        """The mask document of the image on screen (the session's), once its slide is loaded."""
        session = self.window.session
        return session.document if session.ready else None

    @property
    def editor(self) -> MaskEditor | None:
        document = self.document
        return document.editor if document is not None else None

    @property
    def recovery_dir(self) -> Path | None:
        """Where auto-saved edits go (None: beside each mask, core.annotation's default)."""
        return self.window.session.recovery_dir

    @recovery_dir.setter
    def recovery_dir(self, folder: Path | None) -> None:
        self.window.session.recovery_dir = folder
        if self.window.session.document is not None:
            self.window.session.document.recovery_dir = folder

    # ------------------------------------------------------------------------------------ tool settings
    @property
    def tool(self) -> str:
        return next(t for t, a in self.tool_actions.items() if a.isChecked())

    def set_tool(self, tool: str) -> None:
        self.tool_actions[tool].setChecked(True)
        self._cancel_path()
        self.layer.setCursor(Qt.CursorShape.OpenHandCursor if tool == "pan" else Qt.CursorShape.CrossCursor)
        self._update_preview()
        if tool != "pan":
            self.window.statusBar().showMessage("Edit the mask on the Ground truth panel (middle button: pan)", 4000)

    def radius(self) -> int:
        return self.radius_spin.value()

    def step_radius(self, direction: int) -> None:
        """`[` / `]`: about 20% smaller / bigger, at least 1 px."""
        r = self.radius()
        self.radius_spin.setValue(max(r + 1, round(r * 1.2)) if direction > 0 else min(r - 1, round(r / 1.2)))

    def threshold(self) -> float:
        return self.threshold_slider.value() / 100

    def class_index(self) -> int:
        return max(self.class_combo.currentIndex(), 0)

    def save_mode(self) -> SaveMode:
        mode = settings.settings().value(SAVE_MODE_KEY, "corrected")
        return "replace" if mode == "replace" else "corrected"

    def set_save_mode(self, mode: SaveMode) -> None:
        settings.settings().setValue(SAVE_MODE_KEY, mode)
        self.save_mode_actions[mode].setChecked(True)

    def _update_preview(self) -> None:
        self.layer.set_brush_radius(self.radius() + 0.5 if self.tool in ("brush", "eraser") else 0)

    # ---------------------------------------------------------------------------------- window hooks
    def result_shown(self, result: InferenceResult) -> None:
        """The panels show `result`: editing happens on its ROI."""
        roi = result.roi
        self.layer.set_rect(QRectF(roi.x0, roi.y0, roi.width, roi.height))
        self._allowed_cache.clear()  # keyed by the shown result's id: never outlives it
        names = self.window.capabilities.class_names if self.window.capabilities else ()
        wanted = [names[i] if i < len(names) else f"class {i}" for i in range(result.num_classes)]
        if [self.class_combo.itemText(i) for i in range(self.class_combo.count())] != wanted:
            previous = self.class_index()
            self.class_combo.clear()
            self.class_combo.addItems(wanted)
            self.class_combo.setCurrentIndex(previous if 0 < previous < len(wanted) else min(1, len(wanted) - 1))
        self._sync_state()

    def slide_loaded(self, item: DatasetItem) -> None:
        """A new image is shown (its mask is the session's document): start clean, offer edits a crash left."""
        self._drop_editor()
        self.item = item
        try:
            recovery = find_recovery(mask_source(item), self.recovery_dir)
        except SegScopeError as exc:
            self.window.messages.add("warning", f"{item.id}: {exc}")
            return
        if recovery is None:
            return
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(recovery.saved_at))
        answer = QMessageBox.question(
            self.window, "Restore unsaved edits",
            f"Unsaved mask edits of {item.id} from {when} were kept after SegScope stopped.\n\nRestore them?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.Yes)
        if answer != QMessageBox.StandardButton.Yes:
            discard_recovery(mask_source(item), self.recovery_dir)
            return
        try:
            editor = self._ensure_editor()
            editor.replace(recovery.mask)
        except SegScopeError as exc:
            self.window.messages.add("error", f"{item.id}: cannot restore the edits: {exc}")
            return
        self.window.messages.add("info", f"{item.id}: restored the unsaved edits from {when}")
        self._sync_state()

    def confirm_leave(self) -> bool:
        """Before the image, the dataset or the window goes: ask about unsaved edits (Save/Discard/Cancel).
        Returns whether leaving may go on."""
        if self.editor is None or not self.editor.dirty or self.item is None:
            return True
        buttons = (QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
                   | QMessageBox.StandardButton.Cancel)
        answer = QMessageBox.question(self.window, "Unsaved mask edits",
                                      f"The mask of {self.item.id} has unsaved edits. Save them?", buttons,
                                      QMessageBox.StandardButton.Save)
        if answer == QMessageBox.StandardButton.Save:
            return self.save()
        if answer == QMessageBox.StandardButton.Discard:
            self.discard()
            return True
        return False

    def discard(self) -> None:
        """Forget the unsaved edits of the current image, and their recovery file; the metrics go back to
        those of the mask on disk (the session re-scores)."""
        document = self.document
        if document is not None and document.editor is not None:
            self._wait_autosave()
            document.discard()
        self._drop_editor()

    def shutdown(self) -> None:
        self._autosave_timer.stop()
        self._metrics_timer.stop()
        self._executor.shutdown(wait=True)

    # -------------------------------------------------------------------------------------- editing
    def _result(self) -> InferenceResult | None:
        """The result on the panels when it belongs to the image being edited."""
        window, result = self.window, self.panels.result
        if result is None or window.current is None or not window.slide_ready():
            return None
        return result if window.session.result(window.current.id) is result else None

    def _can_edit(self) -> bool:
        return self.tool != "pan" and self._result() is not None

    def _ensure_editor(self) -> MaskEditor:
        """The editor of the current image, made on the first edit (a blank mask for an image without one)."""
        document = self.document
        if document is None:
            raise SegScopeError("the image is still loading: edit once it is shown")
        if document.editor is not None:
            return document.editor
        window = self.window
        names = window.capabilities.class_names if window.capabilities else ()
        result = self._result()
        had_mask = document.mask is not None
        editor = document.ensure_editor(result.num_classes if result else max(len(names), 2))
        self.item = document.item
        if not had_mask and result is not None and window.current is not None:
            window.show_result(window.current.id, result)  # the truth panel gets the blank mask
        self._autosaved_version = editor.version
        return editor

    def _allowed(self, result: InferenceResult, limited: bool) -> np.ndarray:
        """Where an edit may paint: the ROI, and with the probability limit only where P(class) >= t."""
        cache_key = (id(result), self.class_index(), self.threshold()) if limited else (result.roi, result.image_size)
        allowed = self._allowed_cache.get(cache_key)
        if allowed is None:
            if limited:
                allowed = allowed_map(result, self.class_index(), self.threshold())
            else:
                allowed = np.zeros(result.image_size[::-1], bool)
                roi = result.roi
                allowed[roi.y0 : roi.y1, roi.x0 : roi.x1] = True
            if len(self._allowed_cache) > 4:
                self._allowed_cache.clear()
            self._allowed_cache[cache_key] = allowed
        return allowed

    def _editor_for_edit(self) -> MaskEditor | None:
        """The editor, when the panels show a result of this image to edit on (problems go to the messages)."""
        if self._result() is None:
            return None
        try:
            return self._ensure_editor()
        except SegScopeError as exc:
            self.window.messages.add("error", str(exc))
            return None

    def _edit(self, operation: Callable[[MaskEditor, np.ndarray], Roi | None], limited: bool = True) -> None:
        """Run one editor operation with the current clip map; show what it changed."""
        editor = self._editor_for_edit()
        if editor is not None:
            self._changed(operation(editor, self._allowed(self._result(), limited and self.limit_action.isChecked())))

    def _paint_value(self) -> int:
        assert self.editor is not None
        return self.editor.value_of(0 if self.tool == "eraser" else self.class_index())

    def _on_press(self, pos: QPointF) -> None:
        tool = self.tool
        if tool in ("brush", "eraser"):
            editor = self._editor_for_edit()
            if editor is None:
                return
            editor.begin_edit()  # the whole drag is one undo step
            self._last_point = slide_point(pos)
            self._stroke_to(pos)
        elif tool == "fill":
            seed = (int(np.floor(pos.x())), int(np.floor(pos.y())))
            self._edit(lambda e, a: e.fill(seed, self._paint_value(), a))
            self._edit_finished()
        elif tool == "lasso":
            self._dragged = False
            self._path.append(pos)
            self.layer.set_path(self._path)

    def _stroke_to(self, pos: QPointF) -> None:
        start, end = self._last_point, slide_point(pos)
        self._last_point = end
        limited = self.tool == "brush"  # the eraser always erases
        self._edit(lambda e, a: e.stroke([start, end], self.radius(), self._paint_value(), a), limited)

    def _on_move(self, pos: QPointF) -> None:
        if self._last_point is not None:
            self._stroke_to(pos)
        elif self.tool == "lasso" and self._path:
            if not self._dragged and (pos - self._path[-1]).manhattanLength() < 1:
                return
            self._dragged = True
            self._path.append(pos)
            self.layer.set_path(self._path)

    def _on_release(self, pos: QPointF) -> None:
        if self._last_point is not None:
            self._last_point = None
            if self.editor is not None:
                self._changed(self.editor.end_edit())
            self._edit_finished()
        elif self.tool == "lasso" and self._dragged:
            self._fill_path()
        # a lasso click without a drag keeps its point as a polygon corner

    def _on_double_click(self, _pos: QPointF) -> None:
        if self.tool == "lasso":
            self._fill_path()

    def _fill_path(self) -> None:
        points = [slide_point(p) for p in self._path]
        self._cancel_path()
        if len(points) >= 3:
            self._edit(lambda e, a: e.polygon(points, self._paint_value(), a))
            self._edit_finished()

    def _cancel_path(self) -> None:
        self._path = []
        self._dragged = False
        self.layer.set_path([])

    def accept_prediction(self, threshold: float | None) -> None:
        """Replace the ROI's mask with the prediction (argmax, or class >= threshold): one undo step."""
        result = self._result()
        if result is None:
            self.window.statusBar().showMessage("Run the image first: there is no prediction to accept", 4000)
            return
        labels = prediction_labels(result, threshold, self.class_index())
        self._edit(lambda e, _a: e.accept_prediction(labels, result.roi), limited=False)
        self._edit_finished()

    def undo(self) -> None:
        if self.editor is not None:
            self._last_point = None
            self._changed(self.editor.undo())
            self._edit_finished()

    def redo(self) -> None:
        if self.editor is not None:
            self._changed(self.editor.redo())
            self._edit_finished()

    def _changed(self, box: Roi | None) -> None:
        """Redraw the part of `box` the truth panel shows (a box from undo may lie partly outside the ROI)."""
        result, document = self.panels.result, self.document
        editor = document.editor if document is not None else None
        if result is not self._result():
            return
        if box is None or document is None or editor is None or result is None:
            return
        document.edited()
        shown = _clip(box, result.roi)
        if shown is not None:
            piece = editor.mask[shown.y0 : shown.y1, shown.x0 : shown.x1]
            self.panels.update_truth(shown, self._labels(piece))
        self._metrics_timer.start()

    def _labels(self, piece: np.ndarray) -> np.ndarray:
        """Class ids of mask pixels by the whole mask's convention (`mask_to_labels` decides 0/1 vs 0/255
        from the array it gets, which a small piece cannot tell)."""
        editor = self.editor
        assert editor is not None
        return mask_piece_labels(piece, editor.num_classes, editor.foreground)

    def _edit_finished(self) -> None:
        self._sync_state()

    # ------------------------------------------------------------------------------- state and metrics
    @property
    def dirty(self) -> bool:
        return self.editor is not None and self.editor.dirty

    def _sync_state(self) -> None:
        dirty = self.dirty
        self.window.setWindowModified(dirty)
        self.undo_action.setEnabled(self.editor is not None and self.editor.can_undo)
        self.redo_action.setEnabled(self.editor is not None and self.editor.can_redo)
        self.save_action.setEnabled(dirty)
        result = self._result() is not None
        for action in (self.accept_argmax_action, self.accept_threshold_action):
            action.setEnabled(result)
        if self.item is not None:
            self._mark(self.item.id, dirty)
        if dirty and not self._autosave_timer.isActive():
            self._autosave_timer.start()
        elif not dirty:
            self._autosave_timer.stop()
        self.dirtyChanged.emit(dirty)

    def _mark(self, item_id: str, dirty: bool) -> None:
        """The dataset list's status ends with " · unsaved" while the image has unsaved edits."""
        dataset = self.window.dataset
        if dataset is None or not any(i.id == item_id for i in dataset.items):
            return
        model = self.window.dataset_panel.model
        row = model.row(item_id)
        status = row.status.removesuffix(UNSAVED_MARK) + (UNSAVED_MARK if dirty else "")
        if status != row.status:
            model.update(item_id, status, None, row.error)

    def update_metrics(self) -> None:
        """Have the session re-score the edited image (the metrics panel, toolbar and dataset list follow)."""
        document = self.document
        if document is None:
            return
        try:
            self.window.session.refresh_metrics(document.item.id)
        except SegScopeError as exc:
            self.window.messages.add("error", f"{document.item.id}: {exc}")
            return
        self._mark(document.item.id, self.dirty)
        self.maskEdited.emit(document.item.id)

    def _on_document_changed(self, document: MaskDocument, kind: str) -> None:
        """A save or discard changed the mask on screen: views of it refresh."""
        if kind != "edit":
            self._metrics_timer.stop()
            self.maskEdited.emit(document.item.id)

    # ------------------------------------------------------------------------------------------- saving
    def save(self) -> bool:
        """Save the edited mask the chosen way (Ctrl+S); returns False when it could not be written."""
        document = self.document
        if document is None or document.editor is None or not document.dirty:
            self.window.statusBar().showMessage("No unsaved mask edits", 3000)
            return True
        mode = self.save_mode()
        item = document.item
        source = document.source
        self._wait_autosave()
        QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            written = document.save(mode)  # the session re-scores on the saved mask
        except SegScopeError as exc:
            self.window.messages.add("error", f"Saving the mask of {item.id}: {exc}")
            return False
        finally:
            QApplication.restoreOverrideCursor()
        self.item = document.item
        kept = (f"; the original is kept as {backup_mask_path(source).name}" if mode == "replace"
                and backup_mask_path(source).exists() else "")
        self.window.messages.add("info", f"Saved the mask of {item.id} to {written}{kept}")
        self._sync_state()
        return True

    # ----------------------------------------------------------------------------------------- recovery
    def autosave(self) -> None:
        """Write the recovery file from a copy of the mask in the worker thread (the timer calls this)."""
        editor, item = self.editor, self.item
        if editor is None or item is None or not editor.dirty or self._autosave_job is not None:
            return
        version = editor.version
        if version == self._autosaved_version:
            return
        snapshot = editor.mask.copy()
        source = mask_source(item)
        job = self._executor.submit(write_recovery, snapshot, source, self.recovery_dir)
        self._autosave_job = job
        job.add_done_callback(lambda done: self._autosaved.emit(version, _error_text(done)))

    def _on_autosaved(self, version: int, error: str) -> None:
        self._autosave_job = None
        if error:
            self.window.messages.add("warning", f"Auto-save of the mask edits failed: {error}")
        else:
            self._autosaved_version = version

    def _wait_autosave(self) -> None:
        """Let a running auto-save finish, so it cannot recreate a recovery file after a save or discard."""
        if self._autosave_job is not None:
            self._autosave_job.exception()
            self._autosave_job = None

    def _drop_editor(self) -> None:
        self._wait_autosave()
        if self.item is not None:
            self._mark(self.item.id, False)
        self._last_point = None
        self._cancel_path()
        self._allowed_cache.clear()
        self._autosave_timer.stop()
        self._metrics_timer.stop()
        self._sync_state()


def _error_text(job: Future) -> str:
    error = job.exception()
    return "" if error is None else str(error)

