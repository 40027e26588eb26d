"""What a session announces (`Session.events`): one signal per evented field, `(new, old)`, and one typed payload
per change of an image's state. Views subscribe to these in their constructors and derive what they show from
the session (`core.session.views`); nothing pushes into a view from outside."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..dataset.dataset import Dataset, DatasetItem
from ..editing.document import MaskDocument
from ..events import Signal, SignalGroup
from ..metrics.catalogue import Metric
from ..metrics.scores import ImageMetrics
from ..quality.spec import MetricSpec
from ..roi import Roi
from ..wholeslide.evaluate import TiledEvaluation
from .runs import RunRecord
from .truth import ImageTruth

#: `Outcome.kind`s: what a run asked of an image did while no result of it answers for it.
QUEUED, FAILED, UNREADABLE, CANCELLED, NOT_RUN = "queued", "error", "unreadable", "cancelled", "not run"


@dataclass(frozen=True)
class Outcome:
    """What the last run of an image did when it gave no result: queued, failed (why), cancelled, not run."""

    kind: str
    text: str = ""
    details: str = ""


@dataclass(frozen=True)
class RoiChanged:
    item_id: str
    roi: Roi


@dataclass(frozen=True)
class ResultAdded:
    """A run's result is stored (`restored`: one an earlier session kept on disk)."""

    item_id: str
    record: RunRecord
    restored: bool = False


@dataclass(frozen=True)
class SlideRunAdded:
    item_id: str
    run: TiledEvaluation
    restored: bool = False


@dataclass(frozen=True)
class TruthChanged:
    item_id: str
    truth: ImageTruth


@dataclass(frozen=True)
class MaskChanged:
    """The mask on screen changed: "edit" (also undo/redo), "save", "discard" or "restore" (recovered edits)."""

    item_id: str
    kind: str


@dataclass(frozen=True)
class EditsRecovered:
    """Unsaved edits a crash left were found as the dataset opened: they are these images' edits again (the
    newest auto-saved at `saved_at`, a `time.time()`)."""

    item_ids: tuple[str, ...]
    saved_at: float


@dataclass(frozen=True)
class SaveConflict:
    """A save of `item_id`'s edits (`mode`) wrote nothing: another viewer or program changed `path` since the
    mask was read (`text` says how). The edits stay unsaved: the user picks keep mine as a copy, take theirs or
    overwrite (`Session.resolve_conflict`)."""

    item_id: str
    mode: str
    path: Path
    text: str


@dataclass(frozen=True)
class Scored:
    """An image's numbers are fresh: those of what answers for it against its truth (None: no mask)."""

    item_id: str
    metrics: ImageMetrics | None


@dataclass(frozen=True)
class ScoreDue:
    """An image's numbers no longer answer for it: a `Session.score_job` is due."""

    item_id: str


@dataclass(frozen=True)
class ItemChanged:
    """Something an image's row (and, for the current image, the headline and the docks) derive from changed."""

    item_id: str


@dataclass(frozen=True)
class ItemsChanged:
    """`ItemChanged` for many images at once (a run queued or ended, another model, another mask rule): one
    event, so that a change of every image of a large dataset costs its views one refresh."""

    item_ids: tuple[str, ...]


@dataclass(frozen=True)
class RunTimed:
    """A stage timed after a run (the viewer's "render": drawing its result) joined the run's `timings`."""

    item_id: str
    record: RunRecord
    stage: str


@dataclass(frozen=True)
class Message:
    """A line for the messages: level "info", "warning" or "error"."""

    level: str
    text: str
    details: str = ""


class SessionEvents(SignalGroup):
    """The session's signals: its evented fields emit `(new, old)` (None where there is none), the rest one
    payload each."""

    dataset = Signal(Dataset, Dataset)
    current = Signal(DatasetItem, DatasetItem)
    document = Signal(MaskDocument, MaskDocument)
    ranking = Signal(Metric, Metric)
    quality = Signal(MetricSpec, MetricSpec)
    exporting = Signal(bool, bool)
    shown_class = Signal(int, int)
    roi_changed = Signal(RoiChanged)
    result_added = Signal(ResultAdded)
    slide_run_added = Signal(SlideRunAdded)
    truth_changed = Signal(TruthChanged)
    mask_changed = Signal(MaskChanged)
    edits_recovered = Signal(EditsRecovered)
    save_conflict = Signal(SaveConflict)
    scored = Signal(Scored)
    score_due = Signal(ScoreDue)
    item_changed = Signal(ItemChanged)
    items_changed = Signal(ItemsChanged)
    run_timed = Signal(RunTimed)
    message = Signal(Message)
