"""Everything a view shows, derived from the session: pure functions of its state, so two views cannot disagree.

An image's row and, for the image on screen, the toolbar's headline, the Metrics dock, the panels' dimming and
the Review/Defects docks all read one `ItemView` (status, numbers, whether they are fresh and why not, the
truth they are of); the enabled actions are `actions`; what there is to export is `core.export.job.Exportable`
of the session (its `result` is what answers for each image). A view subscribes
to the session's events (`item_changed` for an image's views, the fields for the rest) and calls these.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..metrics.scores import ImageMetrics
from .answers import IMAGE_CHANGED, OTHER_MODEL, ROI_CHANGED, RUN, WHOLE_SLIDE, Answer
from .session import Session

#: A row's Status while its result no longer answers for the image, by `Answer.stale`.
STALE_STATUS = {ROI_CHANGED: ROI_CHANGED, OTHER_MODEL: "other model", IMAGE_CHANGED: IMAGE_CHANGED}
#: The note beside numbers that do not answer for the image, by `Answer.stale`, and while they are re-scored.
STALE_NOTES = {ROI_CHANGED: "ROI changed since this run: these numbers are of the old ROI — run again",
               OTHER_MODEL: "computed by another model than the one open — run again",
               IMAGE_CHANGED: "the image file changed since this run: these numbers are of the old image — run again"}
RESCORING = "re-scoring…"
DROPPED = "its run's arrays were dropped to save memory: run it again to score it against its mask now"
DONE, DONE_NO_MASK = "done", "done (no mask)"
#: The end of a row's Status while the image has unsaved mask edits (on screen, or recovered after a crash).
UNSAVED_MARK = " · unsaved"


@dataclass(frozen=True)
class ItemView:
    """What every view of one image shows: its row; for the image on screen also the headline and the docks."""

    item_id: str
    status: str  # "" (never run), "queued", "done", "whole slide", "ROI changed", "error", ... (+ UNSAVED_MARK)
    #: the numbers shown (None: none; of an older answer or truth unless `fresh`); a whole-slide run's are the
    #: slide's own (`Answer.scored`), whatever the ROI
    metrics: ImageMetrics | None
    fresh: bool  # the numbers are those of `answer` against the truth now
    note: str  # why the numbers do not answer for the image ("" when they do)
    truth: str  # what it is scored against: "mask.png", "mask_corrected.png + unsaved edits", "no mask"
    truth_kind: str  # the same in a word: "original", "corrected", "edited", "none" (`Truth.kind`)
    error: str = ""
    answer: Answer | None = None


def item_view(session: Session, item_id: str) -> ItemView:
    """The views of image `item_id`."""
    answer, outcome, truth = session.answer(item_id), session.outcome(item_id), session.truth(item_id)
    fresh = answer is None or session.is_fresh(item_id)
    if outcome is not None:
        status = outcome.kind
    elif answer is None:
        status = ""
    elif answer.stale:
        status = STALE_STATUS[answer.stale]
    elif answer.source == WHOLE_SLIDE:
        status = WHOLE_SLIDE
    else:
        status = DONE if truth.exists else DONE_NO_MASK
    note = STALE_NOTES[answer.stale] if answer is not None and answer.stale else ("" if fresh else RESCORING)
    if not fresh and answer is not None and answer.result is None:
        note = DROPPED
    return ItemView(item_id, status + (UNSAVED_MARK if truth.edits else ""),
                    session.known_metrics(item_id) if answer is not None else None, fresh, note, truth.label,
                    truth.kind, outcome.text if outcome is not None else "", answer)


def headline(session: Session) -> ItemView | None:
    """The views of the image on screen (None: none is)."""
    return item_view(session, session.current.id) if session.current is not None else None


def review_input(session: Session) -> tuple[Answer, np.ndarray] | None:
    """What the Review and Defects docks score: what answers for the image on screen and its mask on screen
    (None: nothing answers, or it has no mask)."""
    view, mask = headline(session), session.mask
    return None if view is None or view.answer is None or mask is None else (view.answer, mask)


@dataclass(frozen=True)
class Actions:
    """Which of the window's actions can be taken now."""

    run: bool  # Run (the image on screen) and Run whole slide
    run_all: bool
    cancel: bool
    export: bool
    cancel_export: bool
    undo_roi: bool
    redo_roi: bool
    save: bool  # the mask edits on screen
    discard: bool
    undo_edit: bool
    redo_edit: bool
    accept: bool  # Accept argmax / P >= t: the image on screen's own run answers for it (edits go on its ROI)
    edit: bool  # the mask tools may edit the truth on screen (not while run B's classes are shown in its panel)


def actions(session: Session) -> Actions:
    backend = session.backend
    busy = backend is not None and backend.busy
    # (a comparison runs model B on the thread that runs the model: a run would wait behind it)
    model = backend is not None and backend.capabilities is not None and not busy and not session.review.parity.running
    document = session.document if session.ready else None
    editor = document.editor if document is not None and not document.saving else None
    answer = session.answer(document.item.id) if document is not None and not document.saving else None
    edit = session.review.b_on_screen() is None
    return Actions(run=model and session.ready, run_all=model and session.dataset is not None, cancel=busy,
                   export=session.can_export, cancel_export=session.exporting,
                   undo_roi=session.roi_moves.can_undo, redo_roi=session.roi_moves.can_redo,
                   save=editor is not None and editor.dirty, discard=editor is not None and editor.dirty,
                   undo_edit=edit and editor is not None and editor.can_undo,
                   redo_edit=edit and editor is not None and editor.can_redo,
                   accept=edit and answer is not None and answer.source == RUN and answer.result is not None, edit=edit)
