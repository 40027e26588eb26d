"""The viewer's review queue (issue 42): the dataset's disagreements between prediction and truth, likely label
errors first, one key per decision.

The queue is the session's (`Session.review`, `core.session.review`): this view fills it (each image's entries are
made on the job runner once its numbers are fresh: after a run, after every decision's re-scoring), draws it in the
Review queue dock, and dispatches the keys to it: A accepts the prediction's component into the truth, D removes the
truth's component, K keeps the truth (reviewed), U undoes the last decision on the image, J / Shift+J step without
deciding. Each decision is one undoable edit of the mask document (auto-saved to its recovery file as every edit),
logged beside the dataset (the log read at open and written on the runner's autosave lane, one thread in order,
never on the GUI thread; what waits is written at close), and the queue moves on; moving to an entry of another
image saves the edited mask first, then loads that image (opened ahead while the reviewer decided), and the panels
zoom to the entry.

Compare with… (Ctrl+Shift+B) runs a second model or backend (B, a model file picked, on the backend chosen in the
dock) over the images run, on the backend lane after any run queued there, and the dock lists where B differs from
what answers for each image (A), the most different first, with the gate `segscope review --against` applies; J /
Shift+J step those places (their image loaded, the panels zoomed to the place, A's argmax in the middle panel
and B's in the third instead of the truth, the mask tools off, `ResultDisplay` and `MaskEditing` following the
session's `SessionReview.b_on_screen`; under the list the place in both runs side by side), Cancel stops after the
image in flight, and Ctrl+Shift+Q (or "Truth's queue") goes back, the truth in its panel again. A, D, K and U do
nothing there: a flip between two runs changes no truth.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Union

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QWidget

from ...core.dataset.dataset import Dataset
from ...core.errors import SegScopeError
from ...core.result import InferenceResult
from ...core.review.compare import ParityEntry
from ...core.review.log import LOG, LogWriter
from ...core.review.queue import ReviewEntry
from ...core.roi import Roi
from ...core.session.events import Scored
from ...core.session.review import ReviewJob
from ...core.session.session import Session
from ...core.stream.source import resolve_source
from ...core.wording import plural
from ..docks.review_queue_panel import ParityRow, ReviewQueuePanel, Row
from ..runtime.coalesce import Coalescer
from ..runtime.jobs import AUTOSAVE, BACKEND, Jobs
from ..widgets.docking import dock_seen, make_dock, show_dock
from ..widgets.shortcuts import shortcut_action
from .mask_editing import MaskEditing
from .scoring import IN_FLIGHT

#: An entry either queue lists.
AnyEntry = Union[ReviewEntry, ParityEntry]
#: What the file dialog of Compare with… offers.
MODEL_FILTER = "Models (*.json *.onnx *.om *.pipeline);;All files (*)"


class ReviewQueueTools(QObject):
    """The review queue's dock, keys and navigation of one window; see the module docstring. `select(item_id)`
    makes an image current (the dataset list's choice), `zoom(box)` zooms the panels to a slide box, `prefetch(item_id)`
    opens an image's slide ahead."""

    #: (level, text) for the message area
    message = Signal(str, str)
    #: (text, milliseconds) for the status bar
    note = Signal(str, int)

    def __init__(self, session: Session, jobs: Jobs, editing: MaskEditing, select: Callable[[str], object],
                 zoom: Callable[[Roi], object], prefetch: Callable[[str], object], host: QWidget) -> None:
        super().__init__(host)
        self.session, self.jobs, self.editing, self.select, self.zoom = session, jobs, editing, select, zoom
        self.prefetch = prefetch
        self.review = session.review
        self.queue = self.review.queue
        self.queue.deferred = True  # the log is read and written on a worker (`_read_log`, `_write_log`)
        self._writers: list[LogWriter] = []  # every log written to, flushed at close (`shutdown`)
        self.panel = ReviewQueuePanel()
        self.dock = make_dock(host, "Review queue", self.panel)
        self.active = False  # the queue is filled from the first time it is asked for
        self._undo_due = False  # U was pressed while the decision's image was not on screen: undo once it is
        self._running: set[str] = set()
        self._waiting: dict[str, None] = {}  # images due, in order, sent `IN_FLIGHT` at a time (`_pump`)

        def action(text: str, key: str, tip: str, slot: Callable[[], object]) -> QAction:
            return shortcut_action(host, text, key, tip, slot)

        self.show_action = action("&Review queue", "review_queue", "Show the dataset's disagreements, likely label "
                                  "errors first", self.start)
        self.accept_action = action("Accept", "review_accept", "Accept the prediction's component into the truth",
                                    lambda: self.decide("accept"))
        self.remove_action = action("Remove", "review_remove", "Remove the truth's component",
                                    lambda: self.decide("remove"))
        self.keep_action = action("Keep", "review_keep", "Keep the truth as it is (reviewed)",
                                  lambda: self.decide("keep"))
        self.undo_action = action("Undo", "review_undo", "Undo the last decision on this image", self.undo)
        self.next_action = action("Next", "review_next", "Next entry not reviewed", lambda: self.step(1))
        self.prev_action = action("Previous", "review_prev", "Previous entry not reviewed", lambda: self.step(-1))
        self.compare_action = action("Compare with…", "review_compare", "Compare the model on screen (A) with "
                                     "another model or backend (B) over the images run: where their defects differ, "
                                     "most first, and the gate (no defect gained, lost or changed, Dice ≥ 0.99)",
                                     self.ask_compare)
        self.compare_action.setIconText("Compare with…")  # (a button's text drops a trailing "…" otherwise)
        self.cancel_compare_action = QAction("Cancel", host)
        self.cancel_compare_action.setToolTip("Stop comparing after the image in flight (what is compared stays "
                                              "listed)")
        self.cancel_compare_action.triggered.connect(self.review.cancel_compare)
        self.back_action = QAction("Truth's queue", host)
        self.back_action.setToolTip("Back to the disagreements with the truth (Ctrl+Shift+Q); the comparison is let "
                                    "go")
        self.back_action.triggered.connect(self.start)
        for button, shown in zip(self.panel.buttons, (self.accept_action, self.remove_action, self.keep_action,
                                                      self.undo_action, self.next_action)):
            button.setDefaultAction(shown)
        for button, shown in zip(self.panel.compare_buttons, (self.compare_action, self.cancel_compare_action,
                                                              self.back_action)):
            button.setDefaultAction(shown)
        #: what the window adds to its Inspect menu
        self.entries: tuple[QAction | None, ...] = (
            None, self.show_action, self.accept_action, self.remove_action, self.keep_action, self.undo_action,
            self.next_action, self.prev_action, self.compare_action, self.dock.toggleViewAction())
        self._timer = Coalescer(self.refresh, parent=self)
        self.queue.events.changed.connect(self._timer.request)
        self.queue.events.changed.connect(self._look_ahead)  # (an image scored later may hold the next entry)
        self.queue.events.current.connect(self._on_current)
        self.parity = self.review.parity
        self.parity.events.changed.connect(self._timer.request)
        self.parity.events.changed.connect(lambda: self.cancel_compare_action.setEnabled(self.parity.running))
        self.parity.events.current.connect(self._on_current)
        session.events.scored.connect(self._on_scored)
        session.events.dataset.connect(self._read_log)
        self.queue.events.write_due.connect(self._write_log)
        self.panel.entryActivated.connect(self._go_to)
        self.dock.visibilityChanged.connect(self._on_visible)

    def _on_visible(self, visible: bool) -> None:
        if visible:  # (its rows are drawn only while it is on screen)
            self._timer.request()

    # ------------------------------------------------------------------------------------------- the log
    def _read_log(self, _dataset: Dataset | None, _old: Dataset | None) -> None:
        """Another dataset: its log read on the autosave lane (before any decision of it is written there)."""
        log = self.queue.log
        if log is not None:
            self.jobs.submit("review-log", log.read, partial(self.queue.adopt_log, log),
                             lambda text, _details: self.message.emit("error", f"Review log: {text}"), lane=AUTOSAVE)

    def _write_log(self) -> None:
        """A decision waits: written on the autosave lane, in order (one that fails waits for the next)."""
        writer = self.queue.writer
        if writer is None:
            return
        if writer not in self._writers:
            self._writers.append(writer)
        self.jobs.submit(None, writer.flush, None,
                         lambda text, _details: self.message.emit("error", f"Review log: {text}"), lane=AUTOSAVE)

    def shutdown(self) -> None:
        """The window closes: stop a comparison after its image in flight, and write the decisions still waiting
        here (the runner drops the writes queued on it)."""
        self.review.cancel_compare()
        for writer in self._writers:
            try:
                writer.flush()
            except SegScopeError as exc:
                LOG.error("%s", exc)

    # ------------------------------------------------------------------------------------ filling the queue
    def start(self) -> None:
        """Show the dock, fill the queue from every image whose numbers are fresh, and go to the first entry (two
        runs compared are let go)."""
        if self.parity.active:
            self.review.cancel_compare()
            self.parity.close()
        show_dock(self.dock)
        if not self.active:
            self.active = True
            for item_id in self.review.due():  # (once, when asked for: then image by image as each is scored)
                self._submit(item_id)
        if self.queue.current is None:
            self.queue.step(1)
        self._timer.request()

    def _on_scored(self, scored: Scored) -> None:
        if self.active:
            self._submit(scored.item_id)

    def _submit(self, item_id: str) -> None:
        """List the image's entries in the background: a few images at a time (as the scorer sends its jobs), so
        10,000 images asked for at once never crowd the runner's lane ahead of everything else."""
        self._waiting[item_id] = None
        self._pump()

    def _pump(self) -> None:
        while self._waiting and len(self._running) < IN_FLIGHT:
            item_id = next(iter(self._waiting))
            del self._waiting[item_id]
            job = self.review.job(item_id)  # (taken when sent: what answers for the image then)
            if job is None or item_id in self._running:
                continue
            self._running.add(item_id)
            self.jobs.submit(f"review:{item_id}", job.run, partial(self._adopt, job), partial(self._failed, item_id))

    def _adopt(self, job: ReviewJob, entries: list[ReviewEntry]) -> None:
        self._running.discard(job.item_id)
        self.review.adopt(job, entries)
        if self.queue.current is None:
            self.queue.step(1)
        self._submit(job.item_id)  # (its numbers changed meanwhile: the newer entries)

    def _failed(self, item_id: str, text: str, _details: str) -> None:
        self._running.discard(item_id)
        self.message.emit("error", f"{item_id}: cannot list its disagreements: {text}")
        self._pump()

    # ---------------------------------------------------------------------------------- two runs compared
    def ask_compare(self) -> None:
        """Compare with…: B's model picked in a file dialog (the model on screen offered: Open with another
        backend chosen in the dock compares its two ports), then `compare`."""
        backend = self.session.backend
        start = str(backend.choice.pipeline) if backend is not None else ""
        path, _ = QFileDialog.getOpenFileName(self.dock, "Compare with: model B", start, MODEL_FILTER)
        if path:
            self.compare(Path(path), self.panel.backend_kind())

    def compare(self, path: Path, kind: str | None = None) -> bool:
        """Run B (the model at `path`, on backend `kind`; None: A's) over the images run and list where it differs;
        False (and said) when it cannot start."""
        backend = self.session.backend
        if backend is None:
            return False
        if backend.busy:
            self.note.emit("A run is in progress: compare once it ends (or cancel it, Esc)", 4000)
            return False
        try:
            resolved = resolve_source(path)
            if resolved.path is None:
                raise SegScopeError(f"{path.name} has no model card beside it: build one first (File > Build model "
                                    "card…)")
            choice = dataclasses.replace(backend.choice, pipeline=resolved.path, kind=kind or backend.choice.kind)
            job = self.review.compare(choice.spec(), f"{resolved.path.name} on {choice.kind}")
        except SegScopeError as exc:
            self.message.emit("error", f"Compare with: {exc}")
            return False
        show_dock(self.dock)
        self.jobs.stream(job.name, job.work, job.each, job.finished, self._compare_failed, lane=BACKEND)
        return True

    def _compare_failed(self, text: str, details: str) -> None:
        self.review.compare_failed(text)
        self.message.emit("error", f"Compare with: {text}")

    def _go_to(self, entry: AnyEntry) -> None:
        if isinstance(entry, ParityEntry):
            self.parity.go_to(entry)
        else:
            self.queue.go_to(entry)

    # ----------------------------------------------------------------------------------------- the keys
    def decide(self, decision: str) -> None:
        """The current entry decided (one undoable edit), then on to the next."""
        if self._nothing_to_decide():
            return
        entry = self.queue.current
        if entry is None:
            self.note.emit("No entry to decide: open the review queue (Ctrl+Shift+Q) after a run", 4000)
            return
        if not self._on_screen(entry) or self.editing.document_for_edit() is None:
            self.note.emit(f"{entry.image} is still loading: decide once it is shown", 3000)
            return
        try:
            box = self.review.decide(decision)
        except SegScopeError as exc:
            self.note.emit(str(exc), 4000)
            return
        self.editing.changed(box)
        self.editing.edit_finished()

    def _nothing_to_decide(self) -> bool:
        """Two runs compared are listed: a decision has nothing to change (said)."""
        if self.parity.active:
            self.note.emit("Two runs compared: nothing to decide (a flip between runs changes no truth); J / Shift+J "
                           "step, Ctrl+Shift+Q goes back to the truth's queue", 4000)
        return self.parity.active

    def undo(self) -> None:
        """Take back the last decision: at once when its image is on screen, else once it is shown again."""
        if self._nothing_to_decide():
            return
        entry = self.queue.last_decided()
        if entry is None:
            self.note.emit("No review decision to undo", 3000)
            return
        self._undo_due = True
        if self.queue.current == entry:
            self._navigate()
        else:
            self.queue.go_to(entry)  # (navigates there)

    def _undo_now(self) -> None:
        self._undo_due = False
        try:
            box = self.review.undo()
        except SegScopeError as exc:
            self.note.emit(str(exc), 4000)
            return
        self.editing.changed(box)
        self.editing.edit_finished()

    def step(self, offset: int) -> None:
        stepped = self.parity.step(offset) if self.parity.active else self.queue.step(offset)
        if stepped is None:
            self.note.emit("No more entries to review that way", 3000)

    # ------------------------------------------------------------------------------------------ navigation
    def _on_screen(self, entry: ReviewEntry) -> bool:
        """Whether the entry's image is shown with its result, its mask not being saved (edits go to it)."""
        current, document = self.session.current, self.session.document
        return (current is not None and current.id == entry.image and self.editing.shown_result() is not None
                and document is not None and not document.saving)

    def _on_current(self, _entry: AnyEntry | None, _old: AnyEntry | None) -> None:
        self._timer.request()
        self._navigate()

    def _current(self) -> AnyEntry | None:
        """The entry on screen, of the queue listed."""
        return self.parity.current if self.parity.active else self.queue.current

    def _navigate(self) -> None:
        """Go to the current entry: zoom when its image is on screen (and take back a decision when asked), else
        save the edits on screen first (this runs again once they are written), then load the image."""
        entry = self._current()
        if entry is None:
            return
        current, document = self.session.current, self.session.document
        if current is not None and current.id == entry.image:
            if self.editing.shown_result() is not None:
                self.zoom(Roi(*entry.bbox))
            if self._undo_due and isinstance(entry, ReviewEntry) and self._on_screen(entry):
                self._undo_now()
            self._look_ahead()
        elif document is not None and document.saving:
            return  # (the save's end navigates)
        elif self.editing.dirty:
            self.editing.save(then=self._navigate)
        else:
            self.select(entry.image)

    def _look_ahead(self) -> None:
        """Open the next entry's slide while the reviewer decides on this one, when it is another image's."""
        entry, ahead = self._current(), self.parity.peek(1) if self.parity.active else self.queue.peek(1)
        if entry is not None and ahead is not None and ahead.image != entry.image:
            self.prefetch(ahead.image)

    def result_shown(self, _result: InferenceResult, _class_names: object = ()) -> None:
        """A result is drawn: when it is the current entry's image, zoom to the entry."""
        self._navigate()

    # ------------------------------------------------------------------------------------------- drawing
    def refresh(self) -> None:
        """Draw the queue (only while its dock is on screen: it catches up when shown)."""
        if not dock_seen(self.dock):
            return
        if self.parity.active:
            self._draw_parity()
            return
        queue, names = self.queue, self.session.class_names
        rows: list[Row] = [(rank, entry, entry.what(names), queue.decision(entry) or "")
                           for rank, entry in enumerate(queue.entries(), 1)]
        pending = queue.pending()
        if not rows:
            summary = (f"Listing the disagreements of {len(self._running) + len(self._waiting)} images…"
                       if self._running or self._waiting else
                       "No disagreement between the predictions and the truths of the images run" if self.active
                       else "Review queue: Ctrl+Shift+Q lists the disagreements of the images run")
        else:
            summary = (f"{pending} of {len(rows)} to review. A: accept the prediction, D: remove the truth's, "
                       "K: keep the truth, U: undo, J / Shift+J: next / previous")
        if queue.reading:
            summary = "Reading the review log (the decisions of earlier sessions)… " + summary
        self.panel.show_entries(rows, queue.current, summary)

    def _draw_parity(self) -> None:
        parity, names = self.parity, self.session.class_names
        rows: list[ParityRow] = [(rank, entry, entry.what(names)) for rank, entry in enumerate(parity.entries(), 1)]
        where = f"A: the results on screen, B: {parity.b}"
        if parity.running:
            where = f"Comparing {parity.run.images} of {plural(parity.total, 'image')}… " + where
        if parity.skipped:
            where += f"; {plural(parity.skipped, 'image')} not run by A, not compared (Run all first)"
        tip = (f"The gate: {parity.rule()}.\nThe panels show A's result and, in the truth's place, B's argmax "
               "(the mask tools edit nothing meanwhile), zoomed to the place; under the list, the place in A (left) "
               "and B (right). J / Shift+J: next / previous place; A, D, K and U do "
               "not apply (a flip between two runs changes no truth); Ctrl+Shift+Q: back to the truth's queue")
        self.panel.show_parity(rows, parity.current, f"{parity.verdict()}. {where}", tip)
