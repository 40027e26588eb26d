"""The session's results and what answers for each image: the newer of its newest run (while that was made on the
image's ROI by the open model) and its whole-slide run (the part under that ROI, whose numbers are the whole
slide's: `Answer.scored`), else its newest run marked stale. One rule (`SessionResults.answer`) for the panels, the row,
the headline, the docks and the export.

`SessionResults` is the part of `core.session.session.Session` that keeps the results: one bounded
`RunHistory` of ROI runs and, per image, its newest whole-slide run (kept within `SLIDE_RUN_BYTES`, the
newest always).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..backends.base import Capabilities
from ..dataset.dataset import Dataset
from ..errors import SegScopeError
from ..files.stamp import Stamp
from ..result import InferenceResult
from ..roi import Roi
from ..wholeslide.evaluate import TiledEvaluation
from .backend_state import BackendState
from .runs import RunHistory, RunRecord

#: Whole-slide runs kept in memory (their stitched canvases), newest first; the newest is always kept.
SLIDE_RUN_BYTES = 1536 << 20
#: Why an image's newest run no longer answers for it (`Answer.stale`).
ROI_CHANGED, OTHER_MODEL, IMAGE_CHANGED = "ROI changed", "another model", "image changed"
#: Where an answer comes from (`Answer.source`).
RUN, WHOLE_SLIDE = "run", "whole slide"


@dataclass(frozen=True)
class Answer:
    """What answers for an image: a result (`source`: its own run, or the part of its whole-slide run under its
    ROI; None: a run whose arrays the history dropped, known by its numbers only), the key that names it (a
    score of another key is not of this answer), and why it no longer answers (`stale`: "" when it does)."""

    result: InferenceResult | None = field(compare=False)
    key: tuple[object, ...]
    source: str
    stale: str = ""
    class_names: tuple[str, ...] = ()

    @property
    def scored(self) -> tuple[object, ...]:
        """What its numbers are of: its run; for a whole-slide run's part, the whole-slide run (its numbers are
        the slide's own, as `segscope eval --tile` gives them, whatever the ROI; the part is what the panels
        draw)."""
        return self.key[:2] if self.source == WHOLE_SLIDE else self.key


class SessionResults:
    """The results half of `Session` (a mixin: it reads the session's ROIs and backend)."""

    backend: BackendState | None
    roi_for: Callable[[str], Roi]
    _sizes: dict[str, tuple[int, int]]
    _dataset: Callable[[], Dataset]

    def __init__(self, history: RunHistory | None) -> None:
        self.history = history if history is not None else RunHistory()
        self.slide_runs: dict[str, TiledEvaluation] = {}  # by image id, oldest first
        self._slide_keys: dict[str, int] = {}  # by image id: which whole-slide run it is
        self._slide_after: dict[str, int] = {}  # by image id: the history's last run id when its slide run was kept
        self._slide_count = itertools.count(1)
        self._parts: dict[str, tuple[tuple[object, ...], InferenceResult | None]] = {}  # the part under each ROI
        self._image_changed: set[str] = set()  # images whose file changed after their newest run read it

    def _forget_results(self) -> None:
        """Another dataset: none of these images' results apply."""
        self.history.clear()
        self.slide_runs.clear()
        self._slide_keys.clear()
        self._slide_after.clear()
        self._parts.clear()
        self._image_changed.clear()

    @property
    def capabilities(self) -> Capabilities | None:
        """The open backend's (None before one is open)."""
        return self.backend.capabilities if self.backend is not None else None

    @property
    def class_names(self) -> tuple[str, ...]:
        """The model's classes (none before a backend is open)."""
        return self.backend.class_names if self.backend is not None else ()

    # ------------------------------------------------------------------------------------------ results
    def newest(self, item_id: str) -> RunRecord | None:
        """The newest run of an image (its arrays may have been dropped)."""
        return self.history.newest(item_id)

    def record(self, item_id: str) -> RunRecord | None:
        """The newest run of an image if it still has its arrays (the history drops old arrays)."""
        record = self.newest(item_id)
        return record if record is not None and record.result is not None else None

    def result(self, item_id: str) -> InferenceResult | None:
        """The arrays of what answers for the image (`answer`): its run, or its whole-slide run's part under its
        ROI; None: nothing does, or its run's arrays were dropped."""
        answer = self.answer(item_id)
        return answer.result if answer is not None else None

    def stale_reason(self, item_id: str) -> str:
        """Why the image's newest run no longer answers for it ("" when it does): `IMAGE_CHANGED` (its image file
        changed since the run read it, as last looked at by `check_images`), `ROI_CHANGED` (computed on another
        ROI than the image has now) or `OTHER_MODEL` (by another model than the one open)."""
        record = self.newest(item_id)
        if record is None:
            return ""
        if item_id in self._image_changed:
            return IMAGE_CHANGED
        if record.roi != self.roi_for(item_id):
            return ROI_CHANGED
        model = self.backend.model if self.backend is not None else ""
        return OTHER_MODEL if model and record.model and record.model != model else ""

    def is_stale(self, item_id: str) -> bool:
        return bool(self.stale_reason(item_id))

    def check_images(self, item_ids: Iterable[str]) -> list[str]:
        """Look at the image files of these images' newest runs (a `stat` each: call on a look, a focus, a run,
        a restore): returns those whose staleness by `IMAGE_CHANGED` changed, for their views to follow."""
        dataset, changed = self._dataset(), []
        for item_id in item_ids:
            if self._image_read(item_id) is None or item_id not in dataset:
                continue
            try:
                now = Stamp.of(dataset.item(item_id).image_path)
            except SegScopeError:
                now = Stamp()  # (unreadable now: not the image that was run)
            if self._image_seen(item_id, now):
                changed.append(item_id)
        return changed

    def _image_read(self, item_id: str) -> Stamp | None:
        """The image file as the image's newest run read it (None: no run, or one that did not say)."""
        record = self.newest(item_id)
        return record.result.image if record is not None and record.result is not None else None

    def _image_seen(self, item_id: str, now: Stamp) -> bool:
        """The image's file is `now` (as a `stat` found it, here or on a worker): whether its staleness by
        `IMAGE_CHANGED` changed."""
        read = self._image_read(item_id)
        if read is None:
            return False
        differs = not read.same(now)
        if differs == (item_id in self._image_changed):
            return False
        (self._image_changed.add if differs else self._image_changed.discard)(item_id)
        return True

    def slide_run_of(self, item_id: str) -> TiledEvaluation | None:
        """The image's newest whole-slide run kept in memory."""
        return self.slide_runs.get(item_id)

    def stitched_result(self, item_id: str, roi: Roi) -> InferenceResult | None:
        """The whole-slide run's output under `roi` of image `item_id` (None: no such run, or it did not cover
        the ROI); the same object for the same run and ROI."""
        run = self.slide_runs.get(item_id)
        if run is None:
            return None
        key = (self._slide_keys[item_id], roi)
        known = self._parts.get(item_id)
        if known is None or known[0] != key:
            known = (key, run.stitched.crop(roi))
            self._parts[item_id] = known
        return known[1]

    def answer(self, item_id: str) -> Answer | None:
        """What answers for the image now (see the module docstring); None: nothing does (never run)."""
        record = self.newest(item_id)
        stale = self.stale_reason(item_id)
        slide_newer = item_id in self.slide_runs and (record is None or self._slide_after[item_id] >= record.id)
        if record is not None and not stale and not slide_newer:
            return Answer(record.result, (RUN, record.id), RUN, "", record.class_names)
        if item_id in self.slide_runs and stale != IMAGE_CHANGED:  # (it may be of the old image too)
            roi = self.roi_for(item_id)
            part = self.stitched_result(item_id, roi)
            if part is not None:
                return Answer(part, (WHOLE_SLIDE, self._slide_keys[item_id], roi), WHOLE_SLIDE, "", self.class_names)
        if record is not None:
            return Answer(record.result, (RUN, record.id), RUN, stale, record.class_names)
        return None

    def answers(self, item_id: str) -> bool:
        """Whether something answers for the image (a run or a whole-slide run kept)."""
        return self.history.newest(item_id) is not None or item_id in self.slide_runs

    def answered_ids(self, dataset: Dataset | None) -> list[str]:
        """Images something answers for (a run or a whole-slide run), in dataset order."""
        ran = self.history.image_ids()
        if dataset is None or not (ran or self.slide_runs):  # (a dataset opened before any run: no walk)
            return []
        return [item.id for item in dataset.items if item.id in ran or item.id in self.slide_runs]

    @property
    def has_results(self) -> bool:
        """Whether any image has a result to show or export (`result`), in O(whole-slide runs kept): the newest
        run always keeps its arrays, and answers for its image (fresh or stale) unless a whole-slide part does."""
        return len(self.history) > 0 or any(self.stitched_result(i, self.roi_for(i)) is not None
                                            for i in self.slide_runs)

    # ------------------------------------------------------------------------------------------ storing
    def _keep_run(self, item_id: str, result: InferenceResult, restored: bool = False) -> RunRecord:
        """Keep a run's result (`restored`: an earlier session's, by a model not known)."""
        record = self.history.add(item_id, result, None if restored else self.capabilities)
        self._image_changed.discard(item_id)  # (a restored run's image is looked at as it is taken)
        self._sizes.setdefault(item_id, result.image_size)
        return record

    def _keep_slide_run(self, evaluation: TiledEvaluation) -> list[str]:
        """Keep a whole-slide run; returns the images whose older runs were let go to stay within the budget."""
        runs, item_id = self.slide_runs, evaluation.item.id
        runs.pop(item_id, None)
        runs[item_id] = evaluation
        self._slide_keys[item_id] = next(self._slide_count)
        self._slide_after[item_id] = len(self.history.records)  # (run ids count up from 1: a later run is newer)
        self._sizes.setdefault(item_id, evaluation.stitched.slide_size)
        total, dropped = 0, []
        for kept_id, run in reversed(list(runs.items())):  # newest first; the newest is always kept
            total += run.stitched.nbytes
            if total > SLIDE_RUN_BYTES and kept_id != item_id:
                del runs[kept_id]
                dropped.append(kept_id)
        return dropped
