"""The two-run queue the viewer steps (issue 42): a second model or backend (B) run over the images the session's
model (A) has answers for, on A's ROIs, each image compared as `segscope review --against` compares it
(`core.review.parity.image_parity`, the same gate), and one entry per place that flips.

`compare_steps` is the work (any thread; it opens B, runs it and closes it there): it yields each image's
`ImageParity` as it comes (`Compared`, with both runs' classes inside each flip's box, at most `MAX_PREVIEW` pixels,
for a view to show A beside B, and B's classes over the ROI). `ParityQueue` is the Qt-free model a view draws and
steps: its entries (every flip of every image compared, and one `dice` entry per image that fails the gate by its
Dice alone, its box the ROI), ranked as the CLI ranks images (the most flipped pixels first) and, within an image,
the largest flip first; the gate's tallies (`ParityRun`); the entry on screen (`current`); where the run stands
(`done` of `total`, `running`); B's classes of each image listed (`theirs`), for the panels to show B where the
reviewer looks. No entry is decided: a flip between two runs changes no truth, so there is nothing to accept or
remove; the reviewer steps and looks."""

from __future__ import annotations

import bisect
import math
import threading
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..backend_spec import BackendSpec, open_backend
from ..dataset.dataset import Dataset, DatasetItem
from ..errors import CancelledError, SegScopeError
from ..evaluate import evaluate_dataset
from ..events import Evented, Signal, SignalGroup
from ..metrics.scores import argmax_at_roi
from ..result import InferenceResult
from ..roi import Roi
from ..stream.input import StreamInput
from ..wording import class_name
from . import MIN_DICE
from .parity import FLIP_KINDS, ImageParity, ParityRun, image_parity
from .queue import DEFAULT_OPTIONS, QueueOptions

#: The kind of an entry for an image with no flip whose Dice is under the gate's.
LOW_DICE = "dice"
#: The largest box (pixels) whose classes in both runs an entry keeps for a view (A beside B).
MAX_PREVIEW = 256 * 256
#: Both runs' classes inside a box (slide pixels): (A's, B's), ROI resolution.
Preview = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class PackedLabels:
    """A label map kept zlib-compressed: a ROI's classes are long runs, so a 2048 x 2048 map of a few defects
    keeps tens of KB instead of 4 MiB (packed where B ran, unpacked when shown)."""

    shape: tuple[int, int]
    data: bytes

    @classmethod
    def of(cls, labels: np.ndarray) -> PackedLabels:
        return cls((labels.shape[0], labels.shape[1]), zlib.compress(np.ascontiguousarray(labels, np.uint8).data, 1))

    def unpack(self) -> np.ndarray:
        return np.frombuffer(zlib.decompress(self.data), np.uint8).reshape(self.shape)


@dataclass(frozen=True)
class Compared:
    """One image compared: its parity, the ROI both ran on, both runs' classes inside each flip's box (by box;
    boxes over `MAX_PREVIEW` pixels left out), and B's classes over the ROI (ROI resolution, packed; None: not
    kept)."""

    parity: ImageParity
    roi: Roi
    previews: dict[tuple[int, int, int, int], Preview] = field(default_factory=dict)
    theirs: PackedLabels | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ParityEntry:
    """One place where run B differs from run A: a flip (`kind` lost, gained or changed, `cls` its class in A,
    `to` in B) or an image whose Dice alone fails the gate (`LOW_DICE`, its box the ROI); `dice` is the image's."""

    image: str
    kind: str
    cls: int
    to: int
    bbox: tuple[int, int, int, int]  # slide pixels, x1 and y1 exclusive
    area: int
    dice: float  # NaN: neither run has any foreground
    image_rank: tuple  # the image's (`ImageParity.rank`)
    preview: Preview | None = field(default=None, compare=False, repr=False)  # A's and B's classes in the box

    @property
    def key(self) -> str:
        return f"{self.image}/{self.kind}/{self.cls}/{','.join(map(str, self.bbox))}"

    def rank(self) -> tuple:
        """Best first: the image's rank, then the largest flip, then the box."""
        return (self.image_rank, -self.area, self.bbox, self.kind)

    def what(self, class_names: Sequence[str] = ()) -> str:
        """The class as a line says it: "crack", "crack → pore" (changed), "" for a Dice entry."""
        if self.kind == LOW_DICE:
            return ""
        named = class_name(class_names, self.cls)
        return f"{named} → {class_name(class_names, self.to)}" if self.kind == "changed" else named


def parity_entries(compared: Compared, min_dice: float = MIN_DICE) -> list[ParityEntry]:
    """An image's entries: one per flip; without a flip, one `LOW_DICE` entry over its ROI when its Dice fails the
    gate; none when it passes."""
    parity, roi_box = compared.parity, compared.roi.as_tuple()
    rank = parity.rank()
    entries = [ParityEntry(parity.image, flip.kind, flip.cls, flip.to if flip.kind == "changed" else flip.cls,
                           flip.bbox, flip.area, parity.dice, rank, compared.previews.get(flip.bbox))
               for flip in parity.flips]
    if not entries and not parity.passed(min_dice):
        width, height = roi_box[2] - roi_box[0], roi_box[3] - roi_box[1]
        entries.append(ParityEntry(parity.image, LOW_DICE, 0, 0, roi_box, width * height, parity.dice, rank))
    return entries


def compare_steps(spec: BackendSpec, dataset: Dataset, items: Sequence[DatasetItem],
                  first: Mapping[str, InferenceResult], cancel: threading.Event,
                  options: QueueOptions = DEFAULT_OPTIONS) -> Iterator[Compared]:
    """Open B (`spec`), run it over `items` on the ROI of A's result for each (`first`, by id; the ROI reaches B's
    stream by its own rule, as a run's does), no truth read, and yield each image's parity with A; B is closed when
    this ends, is closed, fails or sees `cancel` set. A result of another shape (its ROI, its classes) is refused in
    one line naming the image."""
    orders = {item.id: n for n, item in enumerate(dataset.items)}
    rois = {item.id: first[item.id].roi for item in items}
    stream = StreamInput.of(spec.pipeline)
    with open_backend(spec) as backend:
        try:
            for evaluation in evaluate_dataset(backend, dataset, items=list(items), cancel=cancel, rois=rois,
                                               stream=stream, truths=False):
                a, b = first[evaluation.item.id], evaluation.result
                if b.roi != a.roi:
                    raise SegScopeError(f"{evaluation.item.image_path}: B read the ROI {b.roi}, A's result is of "
                                        f"{a.roi}; run A again on this image")
                if b.num_classes != a.num_classes:
                    raise SegScopeError(f"{spec.pipeline}: {b.num_classes} classes, but the model on screen has "
                                        f"{a.num_classes}; compare models of the same classes")
                ours, theirs = argmax_at_roi(a), argmax_at_roi(b)
                parity = image_parity(evaluation.item.id, orders[evaluation.item.id], ours, theirs, a.roi,
                                      a.num_classes, options)
                yield Compared(parity, a.roi, _previews(parity, a.roi, ours, theirs),
                               PackedLabels.of(theirs))
                if cancel.is_set():
                    return
        except CancelledError:
            return


def _previews(parity: ImageParity, roi: Roi, ours: np.ndarray, theirs: np.ndarray) -> dict[tuple[int, int, int, int],
                                                                                           Preview]:
    previews = {}
    for flip in parity.flips:
        x0, y0, x1, y1 = flip.bbox
        if (x1 - x0) * (y1 - y0) <= MAX_PREVIEW:
            window = (slice(y0 - roi.y0, y1 - roi.y0), slice(x0 - roi.x0, x1 - roi.x0))
            previews[flip.bbox] = (ours[window].copy(), theirs[window].copy())
    return previews


class ParityEvents(SignalGroup):
    #: The entries, the tallies or the run's progress changed.
    changed = Signal()
    #: The entry on screen: (new, old), either None.
    current = Signal(object, object)


class ParityQueue:
    """Two runs compared, as the viewer steps them; see the module docstring."""

    current = Evented[Optional[ParityEntry]](None)

    def __init__(self) -> None:
        self.events = ParityEvents()
        self.active = False  # the view shows this queue (from `start` until `close`)
        self.running = False
        self.b = ""  # what B is, in a few words
        self.run = ParityRun()
        self.total = 0  # images asked for
        self.skipped = 0  # images of the dataset A has no answer for (not compared)
        self.error = ""  # why the run stopped short ("" it did not)
        self._order: list[tuple[tuple, str]] = []
        self._entries: dict[str, ParityEntry] = {}
        # B's classes (ROI resolution, packed: tens of KB a ROI of a few defects) of the images listed only (an
        # image B agrees on keeps nothing), let go by `start` and `close`; the one shown last kept unpacked
        self._theirs: dict[str, tuple[Roi, PackedLabels]] = {}
        self._unpacked: tuple[str, np.ndarray] | None = None

    def start(self, b: str, total: int, skipped: int, min_dice: float = MIN_DICE) -> None:
        """A new comparison with `b` over `total` images: no entry yet."""
        self.active, self.running, self.b, self.error = True, True, b, ""
        self.run, self.total, self.skipped = ParityRun(min_dice), total, skipped
        self._let_go()

    def add(self, compared: Compared) -> None:
        """One image compared."""
        self.run.add(compared.parity)
        entries = parity_entries(compared, self.run.min_dice)
        if entries and compared.theirs is not None:
            self._theirs[compared.parity.image] = (compared.roi, compared.theirs)
        for entry in entries:
            if entry.key not in self._entries:
                bisect.insort(self._order, (entry.rank(), entry.key))
                self._entries[entry.key] = entry
        self.events.changed.emit()

    def finish(self, error: str = "") -> None:
        """The run ended (`error`: why it stopped short; cancelled says so too)."""
        self.running, self.error = False, error
        self.events.changed.emit()

    def close(self) -> None:
        """Back to the truth's queue: what was compared is let go."""
        self.active = self.running = False
        self.run, self.total, self.skipped, self.error = ParityRun(), 0, 0, ""
        self._let_go()

    def _let_go(self) -> None:
        """No entry, no B classes kept, none current (and the view told)."""
        self._order.clear()
        self._entries.clear()
        self._theirs.clear()
        self._unpacked = None
        self.current = None
        self.events.changed.emit()

    def theirs(self, image: str) -> tuple[Roi, np.ndarray] | None:
        """B's classes of a listed image over the ROI it was compared on: (ROI, uint8 labels at ROI resolution);
        None when it has no entry (or they were not kept). The same array while the same image is asked for."""
        kept = self._theirs.get(image)
        if kept is None:
            return None
        roi, packed = kept
        if self._unpacked is None or self._unpacked[0] != image:
            self._unpacked = (image, packed.unpack())
        return roi, self._unpacked[1]

    def entries(self) -> list[ParityEntry]:
        return [self._entries[key] for _, key in self._order]

    def __len__(self) -> int:
        return len(self._order)

    def step(self, offset: int = 1) -> ParityEntry | None:
        """The next (1) or previous (-1) entry after the current one, wrapping around, made current (from the top
        when there is none); None when there is no entry."""
        found = self.peek(offset)
        if found is not None:
            self.current = found
        return found

    def peek(self, offset: int = 1) -> ParityEntry | None:
        """The entry `step(offset)` would make current, left as it is (the viewer loads its image ahead)."""
        count = len(self._order)
        if not count:
            return None
        current = self.current
        if current is None or current.key not in self._entries:
            index = 0 if offset > 0 else count - 1
        else:
            here = bisect.bisect_left(self._order, (current.rank(), current.key))
            index = (here + offset) % count
        return self._entries[self._order[index][1]]

    def go_to(self, entry: ParityEntry) -> None:
        if entry.key in self._entries:
            self.current = self._entries[entry.key]

    def verdict(self) -> str:
        """The gate's verdict on the images compared so far, in one line."""
        run = self.run
        flips = ", ".join(f"{run.flips[kind]} {kind}" for kind in FLIP_KINDS)
        lowest = "" if math.isnan(run.lowest_dice) else f", lowest Dice {run.lowest_dice:.4f}"
        state = ("so far" if self.running else f"stopped short ({self.error})" if self.error else
                 "PASSED" if run.passed else "FAILED")
        return f"Gate {state}: {run.failed} of {run.images} images compared fail ({flips}{lowest})"

    def rule(self) -> str:
        """The gate's rule, as `segscope review --against` states it."""
        return str(self.run.gate()["rule"])
