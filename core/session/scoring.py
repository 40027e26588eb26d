"""The session's numbers: each image's metrics are those of what answers for it (`core.session.answers`) against
the truth the session names for it (`core.session.truth`), with the QA metrics asked for; where a whole-slide run
answers, the numbers are its slide's own (`Answer.scored`: scored over the stitched slide as `segscope eval --tile`
scores it, whatever the ROI, with no QA metrics). A score is kept with
the key it was made for (the answer, the truth's version, the QA metrics); when any of them changes the score
is stale, `score_due` is announced and a `ScoreJob` (taken here, run on any thread) brings the fresh one. No
view can show a number as fresh that is not: freshness is a comparison of keys, not an event someone must not
forget to send.

`SessionScores` is the part of `core.session.session.Session` that keeps them, with the metric that ranks the
images and the tables and means built from them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..dataset.dataset import Dataset, DatasetItem
from ..evaluate import DatasetSummary, evaluation_row, score
from ..metrics.catalogue import Metric
from ..metrics.running import RunningSummary
from ..metrics.scores import ImageMetrics
from ..quality.spec import MetricSpec
from ..result import InferenceResult
from ..roi import Roi
from ..wholeslide.evaluate import TiledEvaluation, score_stitched
from ..wholeslide.tiling import Stitched
from .answers import WHOLE_SLIDE, Answer
from .events import ItemChanged, ItemsChanged, Scored, ScoreDue, SessionEvents
from .truth import ImageTruth


@dataclass(frozen=True)
class ScoreKey:
    """What a score is of: an answer (`Answer.key`), a version of the truth, the QA metrics asked for."""

    answer: tuple[object, ...]
    truth: int
    quality: MetricSpec


@dataclass(frozen=True)
class ScoreJob:
    """What scoring one image needs, taken in the session's thread; `run()` may run on any other."""

    item_id: str
    key: ScoreKey
    dataset: Dataset
    item: DatasetItem
    result: InferenceResult
    mask: Callable[[], np.ndarray | None]  # the mask with unsaved edits (on screen, or recovered); None: the file
    quality: MetricSpec
    slide: Stitched | None = None  # a whole-slide run's stitched output: the slide is scored, not `result`

    def run(self) -> ImageMetrics | None:
        """The metrics (None: no mask), read and scored here; SegScopeError when the mask does not fit."""
        if self.slide is not None:
            return score_stitched(self.dataset, self.item, self.slide, self.mask())
        return score(self.dataset, self.item, self.result, self.mask(), self.quality).metrics


class SessionScores:
    """The metrics half of `Session` (a mixin: it reads the session's answers, truths, document and dataset)."""

    events: SessionEvents
    dataset: Dataset | None
    quality: MetricSpec
    ranking: Metric
    _dataset: Callable[[], Dataset]
    answer: Callable[[str], Answer | None]
    truth: Callable[[str], ImageTruth]
    truth_version: Callable[[str], int]
    edited_mask: Callable[[str], Callable[[], np.ndarray | None]]
    roi_for: Callable[[str], Roi]
    answered_ids: Callable[[Dataset | None], list[str]]
    answers: Callable[[str], bool]
    slide_run_of: Callable[[str], TiledEvaluation | None]

    def __init__(self) -> None:
        #: Each scored image's last metrics and what they were scored for (two dictionaries, not one of pairs: a
        #: pair is one more object per image for the garbage collector's full walks, the window's stalls).
        self._scores: dict[str, ImageMetrics | None] = {}
        self._score_keys: dict[str, ScoreKey] = {}
        #: The means over the images something answers for, kept as each one changes (`summary` without medians).
        self.running = RunningSummary()

    def _forget_scores(self) -> None:
        """Another dataset: none of these images' metrics apply."""
        self._scores.clear()
        self._score_keys.clear()
        self.running.clear()

    def score_key(self, item_id: str) -> ScoreKey | None:
        """What the image's numbers must be of now (None: nothing answers for it)."""
        return self._key_of(item_id, self.answer(item_id))

    def _key_of(self, item_id: str, answer: Answer | None) -> ScoreKey | None:
        """`score_key` of the image whose answer is `answer` (taken once by a caller that needs both)."""
        return None if answer is None else ScoreKey(answer.scored, self.truth_version(item_id), self.quality)

    def _is_known(self, item_id: str, key: ScoreKey | None) -> bool:
        """Whether the image's last score was made for `key` (its `score_key` now: then it is fresh)."""
        return key is not None and self._score_keys.get(item_id) == key

    def known_metrics(self, item_id: str) -> ImageMetrics | None:
        """The image's last scored metrics (they may be stale: `is_fresh`)."""
        return self._scores.get(item_id)

    def is_fresh(self, item_id: str) -> bool:
        """Whether the image's last scored metrics are of what answers for it against its truth now."""
        return self._is_known(item_id, self.score_key(item_id))

    def has_metrics(self, item_id: str) -> bool:
        """Whether something answers for the image (a run or a whole-slide run; its metrics may be None: no
        mask)."""
        return self.score_key(item_id) is not None

    def metrics(self, item_id: str) -> ImageMetrics | None:
        """The image's fresh metrics, scored here when stale (headless callers; a window takes `score_job` to a
        worker and shows `known_metrics`, marked, meanwhile)."""
        job = self.score_job(item_id)
        if job is not None:
            self.adopt_score(job, job.run())
        return self.known_metrics(item_id)

    def due(self) -> list[str]:
        """The images whose numbers are stale and can be scored again, in dataset order."""
        return [item_id for item_id in self.answered_ids(self.dataset) if self.score_job(item_id) is not None]

    def score_job(self, item_id: str) -> ScoreJob | None:
        """What scoring a stale image needs, captured now (None: it is fresh, nothing answers for it, or its run's
        arrays were dropped). The job reads an edited mask in place: an edit meanwhile makes its answer stale
        (`adopt_score`)."""
        answer = self.answer(item_id)
        key = self._key_of(item_id, answer)
        if answer is None or answer.result is None or key is None or self._is_known(item_id, key):
            return None
        dataset = self._dataset()
        run = self.slide_run_of(item_id) if answer.source == WHOLE_SLIDE else None
        return ScoreJob(item_id, key, dataset, dataset.item(item_id), answer.result, self.edited_mask(item_id),
                        self.quality, run.stitched if run is not None else None)

    def adopt_score(self, job: ScoreJob, metrics: ImageMetrics | None) -> bool:
        """Take a finished job's metrics and announce them; False (ignored) when what they are of changed since
        the job was taken (the next job answers instead)."""
        if job.key != self.score_key(job.item_id):
            return False
        self._scored(job.item_id, job.key, metrics)
        return True

    def _scored(self, item_id: str, key: ScoreKey, metrics: ImageMetrics | None) -> None:
        """Keep a score made for `key` (a run's own, or a job's) and announce what follows (what answers is taken
        once: a Run all stores a result per image through here)."""
        self._scores[item_id] = metrics
        self._score_keys[item_id] = key
        answer = self.answer(item_id)
        fresh = key == self._key_of(item_id, answer)
        if fresh:
            self.events.scored.emit(Scored(item_id, metrics))
        self._announce(item_id, not fresh and answer is not None and answer.result is not None)

    def _item_changed(self, item_id: str) -> None:
        """Announce that what the image's views derive from changed, and that a score is due when one is."""
        self._announce(item_id, None)

    def _announce(self, item_id: str, due: bool | None) -> None:
        """`_item_changed`, whether a score is due known already (None: asked once the views are told)."""
        self._count(item_id)
        self.events.item_changed.emit(ItemChanged(item_id))
        if due if due is not None else self._score_due(item_id):
            self.events.score_due.emit(ScoreDue(item_id))

    def _count(self, item_id: str) -> None:
        """The image's entry in the running means: its last metrics while something answers for it, marked as
        its whole slide's when its whole-slide run answers."""
        if not self.answers(item_id):
            self.running.set(item_id, None)
            return
        answer = self.answer(item_id)
        self.running.set(item_id, self.known_metrics(item_id), answer is not None and answer.source == WHOLE_SLIDE)

    def _items_changed(self, item_ids: Sequence[str]) -> None:
        """`_item_changed` of many images, announced in one event."""
        for item_id in item_ids:
            self._count(item_id)
        self.events.items_changed.emit(ItemsChanged(tuple(item_ids)))
        for item_id in item_ids:
            if self._score_due(item_id):
                self.events.score_due.emit(ScoreDue(item_id))

    def _score_due(self, item_id: str) -> bool:
        """Whether the image's numbers are stale and its answer has the arrays to score them again."""
        answer = self.answer(item_id)
        return answer is not None and answer.result is not None and not self._is_known(item_id,
                                                                                       self._key_of(item_id, answer))

    # ------------------------------------------------------------------------------------ over images
    def _scored_ids(self, item_ids: list[str] | None) -> list[str]:
        return [i for i in (item_ids if item_ids is not None else self.answered_ids(self.dataset)) if i in self._scores]

    def ranking_values(self, item_ids: list[str] | None = None) -> dict[str, float | None]:
        """The ranking metric of the images something answers for (or `item_ids`), None where it is n/a or
        there is no mask (of the last scored metrics: never re-scores here)."""
        return {item_id: self.ranking.of(self.known_metrics(item_id)) for item_id in self._scored_ids(item_ids)}

    def summary(self, item_ids: list[str] | None = None) -> DatasetSummary:
        """Means of the last scored metrics over the images something answers for (or `item_ids`) that have
        masks (never re-scores; O(images): a view that follows every change reads `running`)."""
        summary = DatasetSummary()
        for item_id in self._scored_ids(item_ids):
            summary.add(self.known_metrics(item_id))
        return summary

    def metrics_table(self, item_ids: list[str] | None = None) -> tuple[list[dict[str, object]], dict[str, object]]:
        """Rows (one per image something answers for, or per image of `item_ids`) and their means."""
        return self.metrics_table_job(item_ids)()

    def metrics_table_job(self, item_ids: list[str] | None = None
                          ) -> Callable[[], tuple[list[dict[str, object]], dict[str, object]]]:
        """`metrics_table` as work for any thread, taken now: stale images are scored in it (their jobs), the
        others keep their scored metrics (nothing here changes); each row names the truth it is scored against,
        as `eval`'s do ("edited" with unsaved edits)."""
        dataset = self._dataset()
        wanted = set(item_ids) if item_ids is not None else None
        taken = []
        for item in dataset.items:
            answer = self.answer(item.id)
            if answer is not None and (wanted is None or item.id in wanted):
                result, run = answer.result, self.slide_run_of(item.id) if answer.source == WHOLE_SLIDE else None
                region = run.stitched.region if run is not None else None  # (the numbers are the slide's)
                taken.append((item, region or (result.roi if result is not None else self.roi_for(item.id)),
                              self.known_metrics(item.id), self.score_job(item.id),
                              result.timings if result is not None else None,
                              result.roi_note if result is not None else "", self.truth(item.id)))

        def table() -> tuple[list[dict[str, object]], dict[str, object]]:
            rows, summary = [], DatasetSummary()
            for item, roi, metrics, job, timings, roi_note, truth in taken:
                scored = job.run() if job is not None else metrics
                rows.append(evaluation_row(item, roi, scored, timings, roi_note, truth if scored is not None else None,
                                           dataset.root))
                summary.add(scored)
            return rows, dict(summary.means())
        return table
