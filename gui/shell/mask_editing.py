"""Mask editing in the viewer: tools on the ground-truth panel, undo/redo, save, crash recovery.

The user corrects the ground truth (or a prediction accepted as a starting point) on the third result panel,
next to the heatmap and argmax, where the ROI is shown at full resolution. Every edit goes to the
full-slide mask held by the session's `MaskDocument` (its `core.editing.annotation.MaskEditor` keeps compact undo
deltas) and is clipped to the ROI, the part the user sees; the panel redraws only the changed box. After an
edit the session re-scores the image (rate-limited).

`MaskEditing` is a view of the session: it takes the session, the result panels it draws on, the window's job
runner (a save encodes and writes on a worker; the tools wait until it is written) and a host widget (for
shortcuts and questions), and says what the window should do through signals. Edits a crash left come back
through the session as the dataset opens (`Session.adopt_recovered`: announced, marked, scored); this asks once
whether to keep them. The pointer tools (brush, eraser, fill, lasso) are `mask_tools.py`'s, the
actions, toolbar and Edit menu `mask_toolbar.py`'s, auto-save, recovery and the prompts `mask_recovery.py`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, QRectF, Qt, QTimer, Signal
from PySide6.QtWidgets import QWidget

from ...core.dataset.dataset import DatasetItem
from ...core.editing.annotation import MaskEditor
from ...core.editing.document import MaskDocument, mask_source
from ...core.editing.files import SavedMask, discard_recovery
from ...core.errors import SegScopeError
from ...core.files.stamp import WriteConflict
from ...core.metrics.scores import mask_piece_labels
from ...core.result import InferenceResult
from ...core.roi import Roi
from ...core.session.backend_state import BackendOpened
from ...core.session.events import EditsRecovered, MaskChanged, SaveConflict
from ...core.session.session import Session
from ...core.session.views import actions
from ...core.wording import class_name
from ..canvas.result_panels import ResultPanels
from ..editing.mask_canvas import EditLayer
from ..editing.mask_recovery import Autosaver, Button, ask_conflict, ask_restore, ask_unsaved
from ..editing.mask_toolbar import MaskEditActions
from ..editing.mask_tools import PointerTools
from ..runtime.jobs import AUTOSAVE, Jobs

#: Views of the mask (the error review) refresh this long after the last edit, not on every mouse move.
EDIT_SETTLE_MS = 300
#: Why the tools edit nothing while two runs are compared.
B_SHOWN = ("The third panel shows run B, not the truth: the mask tools edit nothing there (Ctrl+Shift+Q goes back "
           "to the truth)")


class MaskEditing(QObject):
    """The mask editing of one window (`window.editing`): tools, state, save and recovery."""

    dirtyChanged = Signal(bool)
    #: An image's mask changed (edits settled, a save, a discard): views of the mask may refresh.
    maskEdited = Signal(str)
    #: A save finished: the file written
    saved = Signal(Path)
    #: (level, text) for the message area
    message = Signal(str, str)
    #: (text, milliseconds) for the status bar
    note = Signal(str, int)

    def __init__(self, session: Session, panels: ResultPanels, jobs: Jobs, host: QWidget) -> None:
        super().__init__(host)
        self.session, self.panels, self.jobs, self.host = session, panels, jobs, host
        self.item: DatasetItem | None = None  # the image whose document the tools edit
        self.layer = EditLayer(self._can_edit)
        panels.truth.view.addItem(self.layer, ignoreBounds=True)

        self._settle_timer = QTimer(self, singleShot=True, interval=EDIT_SETTLE_MS)
        self._settle_timer.timeout.connect(self.edits_settled)
        self.autosaver = Autosaver(self.autosave, jobs, session.autosave, self)
        self.autosaver.failed.connect(lambda text: self.message.emit("warning", text))

        self.actions = MaskEditActions(host, self)
        self.tools = PointerTools(self.layer, self.actions, self)
        self.actions.toolChanged.connect(self._on_tool_changed)
        self.actions.radius_spin.valueChanged.connect(self._update_preview)
        session.events.document.connect(self._on_document)
        session.events.mask_changed.connect(self._on_mask_changed)
        session.events.edits_recovered.connect(self._on_recovered)
        session.events.save_conflict.connect(self._on_conflict)
        # The enabled tools follow the session: the image on screen, its mask, what answers for it (`_sync_state`).
        session.events.current.connect(lambda _item, _old: self._sync_state())
        session.events.mask_changed.connect(lambda _changed: self._sync_state())
        session.events.item_changed.connect(lambda changed: self._on_items_changed((changed.item_id,)))
        session.events.items_changed.connect(lambda changed: self._on_items_changed(changed.item_ids))
        session.review.parity.events.current.connect(lambda _entry, _old: self._sync_state())  # (run B shown or not)
        if session.backend is not None:
            session.backend.events.opened.connect(self._on_backend_opened)
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
            self.note.emit("Edit the mask on the Ground truth panel (middle button: pan)" if actions(self.session).edit
                           else B_SHOWN, 4000)

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
        self.actions.set_class_names([class_name(names, i) for i in range(result.num_classes)])

    def _on_backend_opened(self, opened: BackendOpened) -> None:
        """Another model is open: paint its classes until a result says otherwise."""
        if self.shown_result() is None:
            self.actions.set_class_names(list(opened.capabilities.class_names))

    def _on_document(self, document: MaskDocument | None, _old: MaskDocument | None) -> None:
        """Another image is shown (its mask is the session's new document): the tools start clean; edits a
        crash left are its edits already (`_on_mask_changed` "restore")."""
        self._drop_editor()
        self.item = document.item if document is not None else None

    def _on_recovered(self, recovered: EditsRecovered) -> None:
        """Edits a crash left are back (the session said so, their rows say unsaved): keep them, or delete them."""
        QTimer.singleShot(0, self, lambda: self._ask_recovered(recovered))  # after the open that found them

    def _ask_recovered(self, recovered: EditsRecovered) -> None:
        if not ask_restore(self.host, recovered.item_ids, recovered.saved_at):
            self.autosaver.wait()
            self.session.discard_recovered(recovered.item_ids)

    def _on_conflict(self, conflict: SaveConflict) -> None:
        """A save found the mask changed by another writer (the session said so; nothing was written): ask."""
        QTimer.singleShot(0, self, lambda: self._ask_conflict(conflict))  # after the save's answer (not once closed)

    def _ask_conflict(self, conflict: SaveConflict) -> None:
        choice = ask_conflict(self.host, conflict)
        if choice == "overwrite":
            self.save(overwrite=True)
        elif choice is not None:
            try:
                job = self.session.resolve_conflict(conflict, choice)
            except SegScopeError as exc:
                self.message.emit("warning", str(exc))
                return
            self.autosaver.timer.stop()
            # after an auto-save still writing (its lane runs one job at a time): it cannot recreate the recovery
            # file this answer removes, and the window does not wait for it
            self.jobs.submit(job.name, job.work, job.done, job.failed, lane=AUTOSAVE)

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
            self.autosaver.timer.stop()
            self.session.discard()  # (its recovery file removed now, and again after an auto-save still writing it)
            self.autosaver.after_write(partial(discard_recovery, document.source, self.session.recovery_dir))
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
        record = session.record(session.current.id)  # its own run (a whole-slide part takes no edits)
        return result if record is not None and record.result is result else None

    def _can_edit(self) -> bool:
        document = self.document
        saving = document is not None and document.saving
        return self.tool != "pan" and self.shown_result() is not None and not saving and actions(self.session).edit

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
        editor = document.ensure_editor(result.num_classes if result else max(len(names), 2))
        self.item = document.item
        self.autosaver.saved_version = editor.version
        return editor

    def document_for_edit(self) -> MaskDocument | None:
        """The document, with its editor, when the panels show a result of this image to edit on and its truth
        (not run B's classes: said) (problems go to the messages)."""
        if self.shown_result() is None:
            return None
        if not actions(self.session).edit:
            self.note.emit(B_SHOWN, 4000)
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
        if box is None or document is None or editor is None or result is None or not self.panels.truth_drawn:
            return  # (the document announced the edit; a blank mask made for it is drawn whole)
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
        """The tools' enabled state as the session derives it (`core.session.views.actions`); the auto-saver and
        `dirtyChanged` follow the edits."""
        can, tools = actions(self.session), self.actions
        for action, enabled in ((tools.undo_action, can.undo_edit), (tools.redo_action, can.redo_edit),
                                (tools.save_action, can.save), (tools.accept_argmax_action, can.accept),
                                (tools.accept_threshold_action, can.accept)):
            action.setEnabled(enabled)
        self.autosaver.follow(can.save)
        self.dirtyChanged.emit(self.dirty)

    def _on_items_changed(self, item_ids: tuple[str, ...]) -> None:
        current = self.session.current
        if current is not None and current.id in item_ids:  # (another image's change changes no tool)
            self._sync_state()

    def edits_settled(self) -> None:
        """The edits paused: views of the mask refresh (the session re-scores by itself)."""
        document = self.document
        if document is not None:
            self.maskEdited.emit(document.item.id)

    def _on_mask_changed(self, changed: MaskChanged) -> None:
        """A save, a discard or recovered edits changed the mask on screen: views of it refresh."""
        if changed.kind == "edit":
            return
        if changed.kind == "restore" and self.editor is not None:
            self.autosaver.saved_version = self.editor.version  # the recovery file holds them already
        self._settle_timer.stop()
        self.maskEdited.emit(changed.item_id)

    # ------------------------------------------------------------------------------------------- saving
    def save(self, then: Callable[[], object] | None = None, overwrite: bool = False) -> bool:
        """Save the edited mask the chosen way (Ctrl+S): it is encoded and written on a worker while the window
        goes on (the tools wait until it is written); `then()` runs once it is. False when no save started.
        A mask another writer changed meanwhile is not overwritten (the session asks, `_on_conflict`) unless
        `overwrite`."""
        document = self.document
        if document is None or document.editor is None or not document.dirty:
            self.note.emit("No unsaved mask edits", 3000)
            return False
        if document.saving:
            return False
        mode, item = self.actions.save_mode(), document.item
        self.tools.end_stroke()
        self.autosaver.timer.stop()  # no auto-save may rewrite the recovery file the save removes
        autosaving = self.autosaver.job
        try:
            job = self.session.save_job(mode, autosaving.wait if autosaving is not None else None, overwrite)
        except SegScopeError as exc:
            self.message.emit("error", f"Saving the mask of {item.id}: {exc}")
            return False

        def written(answer: tuple[SavedMask, np.ndarray] | WriteConflict) -> None:
            job.done(answer)  # the session adopts the saved mask (and says so), or asks: the views follow
            if isinstance(answer, WriteConflict):
                self._sync_state()
                return
            self.item = document.item
            self.saved.emit(answer[0].path)
            if then is not None:
                then()

        def failed(text: str, details: str) -> None:
            if job.failed is not None:
                job.failed(text, details)  # (the session says why: the tools follow)

        self.note.emit(f"Saving the mask of {item.id}…", 3000)
        self.jobs.submit(job.name, job.work, written, failed)
        self._sync_state()  # saving: no edits until it is written (the one state the session does not announce)
        return True

    # ----------------------------------------------------------------------------------------- recovery
    def autosave(self) -> None:
        """Write the recovery file from a copy of the mask in the worker thread (the timer calls this)."""
        editor, item = self.editor, self.item
        if editor is not None and item is not None:
            self.autosaver.submit(editor, mask_source(item), self.session.recovery_dir)

    def _drop_editor(self) -> None:
        self.tools.reset()
        self.autosaver.timer.stop()
        self._settle_timer.stop()
        self._sync_state()
