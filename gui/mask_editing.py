"""Mask editing in the viewer: tools on the ground-truth panel, undo/redo, save, crash recovery.

The user corrects the ground truth (or a prediction accepted as a starting point) on the third result panel,
next to the heatmap and argmax, where the ROI is shown at full resolution. Every edit goes to the
full-slide mask held by the session's `MaskDocument` (its `core.editing.annotation.MaskEditor` keeps compact undo
deltas) and is clipped to the ROI, the part the user sees; the panel redraws only the changed box. After an
edit the session re-scores the image (rate-limited).

`MaskEditing` is a view of the session: it takes the session, the result panels it draws on, the dataset
list's model it marks " · unsaved", the window's job runner (a save encodes and writes on a worker;
the tools wait until it is written) and a host widget (for shortcuts and questions), and says what the
window should do through signals. The pointer tools (brush, eraser, fill, lasso) are `mask_tools.py`'s, the
actions, toolbar and Edit menu `mask_toolbar.py`'s, auto-save, recovery and the prompts `mask_recovery.py`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, QRectF, Qt, QTimer, Signal
from PySide6.QtWidgets import QWidget

from ..core.dataset.dataset import DatasetItem, backup_mask_path
from ..core.editing.annotation import MaskEditor
from ..core.editing.document import MaskDocument, mask_source
from ..core.editing.files import discard_recovery, find_recovery
from ..core.errors import SegScopeError
from ..core.metrics.scores import mask_piece_labels
from ..core.result import InferenceResult
from ..core.roi import Roi
from ..core.session.session import Session
from .dataset_panel import ImageTableModel
from .jobs import Jobs
from .mask_canvas import EditLayer
from .mask_recovery import Autosaver, Button, ask_restore, ask_unsaved, saved_when
from .mask_toolbar import MaskEditActions
from .mask_tools import PointerTools
from .result_panels import ResultPanels

#: Views of the mask (the error review) refresh this long after the last edit, not on every mouse move.
EDIT_SETTLE_MS = 300
UNSAVED_MARK = " · unsaved"


class MaskEditing(QObject):
    """The mask editing of one window (`window.editing`): tools, state, save and recovery."""

    dirtyChanged = Signal(bool)
    #: An image's mask changed (edits settled, a save, a discard): views of the mask may refresh.
    maskEdited = Signal(str)
    #: The first edit of an image without a mask made a blank one: the window redraws the image's result.
    blankMaskMade = Signal(str)
    #: A save finished: the file written
    saved = Signal(Path)
    #: (level, text) for the message area
    message = Signal(str, str)
    #: (text, milliseconds) for the status bar
    note = Signal(str, int)

    def __init__(self, session: Session, panels: ResultPanels, rows: ImageTableModel, jobs: Jobs,
                 host: QWidget) -> None:
        super().__init__(host)
        self.session, self.panels, self.rows, self.jobs, self.host = session, panels, rows, jobs, host
        self.item: DatasetItem | None = None  # the image whose document the tools edit
        self.layer = EditLayer(self._can_edit)
        panels.truth.view.addItem(self.layer, ignoreBounds=True)

        self._settle_timer = QTimer(self, singleShot=True, interval=EDIT_SETTLE_MS)
        self._settle_timer.timeout.connect(self.edits_settled)
        self.autosaver = Autosaver(self.autosave, jobs, self)
        self.autosaver.failed.connect(lambda text: self.message.emit("warning", text))

        self.actions = MaskEditActions(host, self)
        self.tools = PointerTools(self.layer, self.actions, self)
        self.actions.toolChanged.connect(self._on_tool_changed)
        self.actions.radius_spin.valueChanged.connect(self._update_preview)
        session.events.document_changed.connect(self._on_document_changed)
        self.actions.set_tool("pan")
        self._sync_state()

    # ------------------------------------------------------------------------------------ the document
    @property
    def document(self) -> MaskDocument | None:
        """The mask document of the image on screen (the session's), once its slide is loaded."""
        return self.session.document if self.session.ready else None

    @property
    def editor(self) -> MaskEditor | None:
        document = self.document
        return document.editor if document is not None else None

    @property
    def tool(self) -> str:
        return self.actions.tool

    def _on_tool_changed(self, tool: str) -> None:
        self.tools.cancel_path()
        cursor = {"pan": Qt.CursorShape.OpenHandCursor, "brush": Qt.CursorShape.BlankCursor,
                  "eraser": Qt.CursorShape.BlankCursor}.get(tool, Qt.CursorShape.CrossCursor)
        self.layer.setCursor(cursor)  # a brush is drawn as its outline at its size (the layer's preview)
        self._update_preview()
        if tool != "pan":
            self.note.emit("Edit the mask on the Ground truth panel (middle button: pan)", 4000)

    def _update_preview(self) -> None:
        self.layer.set_brush_radius(self.actions.brush_radius())

    # ---------------------------------------------------------------------------------- window hooks
    def result_shown(self, result: InferenceResult, class_names: tuple[str, ...] = ()) -> None:
        """The panels show `result` (of a model with `class_names`; default: the open one's): editing happens on
        its ROI, with its classes."""
        roi = result.roi
        self.layer.set_rect(QRectF(roi.x0, roi.y0, roi.width, roi.height))
        capabilities = self.session.capabilities
        names = class_names or (capabilities.class_names if capabilities else ())
        self.actions.set_class_names([names[i] if i < len(names) else f"class {i}" for i in range(result.num_classes)])
        self._sync_state()

    def model_changed(self, class_names: tuple[str, ...]) -> None:
        """Another model is open: paint its classes until a result says otherwise."""
        if self.shown_result() is None:
            self.actions.set_class_names(list(class_names))

    def slide_loaded(self, item: DatasetItem) -> None:
        """A new image is shown (its mask is the session's document): start clean, offer edits a crash left."""
        self._drop_editor()
        self.item = item
        recovery_dir = self.session.recovery_dir
        try:
            recovery = find_recovery(mask_source(item), recovery_dir)
        except SegScopeError as exc:
            self.message.emit("warning", f"{item.id}: {exc}")
            return
        if recovery is None:
            return
        if not ask_restore(self.host, item.id, recovery):
            discard_recovery(mask_source(item), recovery_dir)
            return
        try:
            editor = self._ensure_editor()
            editor.replace(recovery.mask)
        except SegScopeError as exc:
            self.message.emit("error", f"{item.id}: cannot restore the edits: {exc}")
            return
        self.message.emit("info", f"{item.id}: restored the unsaved edits from {saved_when(recovery)}")
        self._sync_state()

    def confirm_leave(self, retry: Callable[[], object]) -> bool:
        """Before the image, the dataset or the window goes: ask about unsaved edits (Save/Discard/Cancel).
        Returns whether leaving may go on now; after Save it may not yet: the save runs in the background and
        `retry()` is called once the mask is written (a failed save says why and leaves the edits)."""
        document = self.document
        if document is not None and document.saving:
            self.note.emit("The mask is being saved: try again when it is written", 4000)
            return False
        if self.editor is None or not self.editor.dirty or self.item is None:
            return True
        answer = ask_unsaved(self.host, self.item.id)
        if answer == Button.Save:
            self.save(then=retry)
            return False
        if answer == Button.Discard:
            self.discard()
            return True
        return False

    def discard(self) -> None:
        """Forget the unsaved edits of the current image, and their recovery file; the metrics go back to
        those of the mask on disk (the session re-scores)."""
        document = self.document
        if document is not None and document.editor is not None:
            self.autosaver.wait()
            document.discard()
        self._drop_editor()

    def shutdown(self) -> None:
        self._settle_timer.stop()
        self.autosaver.shutdown()

    # -------------------------------------------------------------------------------------- editing
    def shown_result(self) -> InferenceResult | None:
        """The result on the panels when it belongs to the image being edited."""
        session, result = self.session, self.panels.result
        if result is None or session.current is None or not session.ready:
            return None
        return result if session.result(session.current.id) is result else None

    def _can_edit(self) -> bool:
        document = self.document
        return self.tool != "pan" and self.shown_result() is not None and not (document is not None and document.saving)

    def _ensure_editor(self) -> MaskEditor:
        """The editor of the current image, made on the first edit (a blank mask for an image without one)."""
        document = self.document
        if document is None:
            raise SegScopeError("the image is still loading: edit once it is shown")
        if document.editor is not None:
            return document.editor
        capabilities = self.session.capabilities
        names = capabilities.class_names if capabilities else ()
        result = self.shown_result()
        had_mask = document.mask is not None
        editor = document.ensure_editor(result.num_classes if result else max(len(names), 2))
        self.item = document.item
        if not had_mask and result is not None:
            self.blankMaskMade.emit(document.item.id)  # the truth panel gets the blank mask
        self.autosaver.saved_version = editor.version
        return editor

    def document_for_edit(self) -> MaskDocument | None:
        """The document, with its editor, when the panels show a result of this image to edit on (problems
        go to the messages)."""
        if self.shown_result() is None:
            return None
        try:
            self._ensure_editor()
        except SegScopeError as exc:
            self.message.emit("error", str(exc))
            return None
        return self.document

    def accept_prediction(self, threshold: float | None) -> None:
        """Replace the ROI's mask with the prediction (argmax, or class >= threshold): one undo step."""
        result = self.shown_result()
        if result is None:
            self.note.emit("Run the image first: there is no prediction to accept", 4000)
            return
        class_index = self.actions.class_index()
        self.tools.edit(lambda document, shown: document.accept_prediction(shown, threshold, class_index))
        self.edit_finished()

    def undo(self) -> None:
        document = self.document
        if document is not None and document.editor is not None:
            self.tools.end_stroke()
            self.changed(document.undo())
            self.edit_finished()

    def redo(self) -> None:
        document = self.document
        if document is not None and document.editor is not None:
            self.changed(document.redo())
            self.edit_finished()

    def changed(self, box: Roi | None) -> None:
        """Redraw the part of `box` the truth panel shows (a box from undo may lie partly outside the ROI)."""
        result, document = self.panels.result, self.document
        editor = document.editor if document is not None else None
        if result is not self.shown_result():
            return
        if box is None or document is None or editor is None or result is None:
            return  # (the document announced the edit itself)
        shown = box.intersection(result.roi)
        if shown is not None:
            piece = editor.mask[shown.y0 : shown.y1, shown.x0 : shown.x1]
            self.panels.update_truth(shown, self._labels(piece))
        self._settle_timer.start()

    def _labels(self, piece: np.ndarray) -> np.ndarray:
        """Class ids of mask pixels by the whole mask's convention (`mask_to_labels` decides 0/1 vs 0/255
        from the array it gets, which a small piece cannot tell)."""
        editor = self.editor
        assert editor is not None
        return mask_piece_labels(piece, editor.num_classes, editor.foreground)

    def edit_finished(self) -> None:
        self._sync_state()

    # ------------------------------------------------------------------------------- state and metrics
    @property
    def dirty(self) -> bool:
        return self.editor is not None and self.editor.dirty

    def _sync_state(self) -> None:
        dirty = self.dirty
        actions = self.actions
        saving = self.document is not None and self.document.saving
        actions.undo_action.setEnabled(self.editor is not None and self.editor.can_undo and not saving)
        actions.redo_action.setEnabled(self.editor is not None and self.editor.can_redo and not saving)
        actions.save_action.setEnabled(dirty and not saving)
        result = self.shown_result() is not None and not saving
        for action in (actions.accept_argmax_action, actions.accept_threshold_action):
            action.setEnabled(result)
        if self.item is not None:
            self._mark(self.item.id, dirty)
        self.autosaver.follow(dirty and not saving)
        self.dirtyChanged.emit(dirty)

    def _mark(self, item_id: str, dirty: bool) -> None:
        """The dataset list's status ends with " · unsaved" while the image has unsaved edits."""
        dataset = self.session.dataset
        if dataset is None or not any(i.id == item_id for i in dataset.items):
            return
        model = self.rows
        row = model.row(item_id)
        status = row.status.removesuffix(UNSAVED_MARK) + (UNSAVED_MARK if dirty else "")
        if status != row.status:
            model.update(item_id, status, None, row.error)

    def edits_settled(self) -> None:
        """The edits paused: the list's mark follows, and views of the mask refresh (the session re-scores)."""
        document = self.document
        if document is None:
            return
        self._mark(document.item.id, self.dirty)
        self.maskEdited.emit(document.item.id)

    def _on_document_changed(self, document: MaskDocument, kind: str) -> None:
        """A save or discard changed the mask on screen: views of it refresh."""
        if kind != "edit":
            self._settle_timer.stop()
            self.maskEdited.emit(document.item.id)

    # ------------------------------------------------------------------------------------------- saving
    def save(self, then: Callable[[], object] | None = None) -> bool:
        """Save the edited mask the chosen way (Ctrl+S): it is encoded and written on a worker while the window
        goes on (the tools wait until it is written); `then()` runs once it is. False when no save started."""
        document = self.document
        if document is None or document.editor is None or not document.dirty:
            self.note.emit("No unsaved mask edits", 3000)
            return False
        if document.saving:
            return False
        mode, item, source = self.actions.save_mode(), document.item, document.source
        self.tools.end_stroke()
        self.autosaver.timer.stop()  # no auto-save may rewrite the recovery file the save removes
        autosaving = self.autosaver.job
        try:
            work = document.save_job(mode)
        except SegScopeError as exc:
            self.message.emit("error", f"Saving the mask of {item.id}: {exc}")
            return False

        def write() -> tuple[Path, np.ndarray]:
            if autosaving is not None:
                autosaving.wait()  # let a running auto-save finish first
            return work()

        def written(answer: tuple[Path, np.ndarray]) -> None:
            path, copy = answer
            document.saved(path, copy)  # the session re-scores on the saved mask
            self.item = document.item
            kept = (f"; the original is kept as {backup_mask_path(source).name}" if mode == "replace"
                    and backup_mask_path(source).exists() else "")
            self.message.emit("info", f"Saved the mask of {item.id} to {path}{kept}")
            self._sync_state()
            self.saved.emit(path)
            if then is not None:
                then()

        def failed(text: str, _details: str) -> None:
            document.save_failed()
            self.message.emit("error", f"Saving the mask of {item.id}: {text}")
            self._sync_state()

        self.note.emit(f"Saving the mask of {item.id}…", 3000)
        self.jobs.submit(f"save:{item.id}", write, written, failed)
        self._sync_state()
        return True

    # ----------------------------------------------------------------------------------------- recovery
    def autosave(self) -> None:
        """Write the recovery file from a copy of the mask in the worker thread (the timer calls this)."""
        editor, item = self.editor, self.item
        if editor is not None and item is not None:
            self.autosaver.submit(editor, mask_source(item), self.session.recovery_dir)

    def _drop_editor(self) -> None:
        self.autosaver.wait()
        if self.item is not None:
            self._mark(self.item.id, False)
        self.tools.reset()
        self.autosaver.timer.stop()
        self._settle_timer.stop()
        self._sync_state()
