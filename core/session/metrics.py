"""The session's metrics: each image's last scored metrics, whether its mask changed since (stale), re-scoring
and QA metrics as jobs for any thread, the metric that ranks the images, and the tables and means built from
them.

`SessionMetrics` is the part of `core.session.session.Session` that keeps them; the session calls `_scored` when a run
is stored and `_invalidate` when the mask on screen changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from ..dataset.dataset import Dataset
from ..editing.document import MaskDocument
from ..evaluate import DatasetSummary, evaluation_row
from ..metrics import catalogue
from ..metrics.catalogue import Metric
from ..metrics.scores import ImageMetrics, image_metrics, truth_at_roi
from ..quality.scoring import image_quality
from ..quality.spec import ImageQuality, MetricSpec
from ..result import InferenceResult
from ..roi import Roi
from .events import SessionEvents


@dataclass(frozen=True)
class ScoreJob:
    """What re-scoring one image needs, taken in the session's thread; `run()` may run on any other."""

    item_id: str
    generation: int  # the image's scoring generation when taken: an edit since makes the answer stale
    result: InferenceResult
    mask: Callable[[], np.ndarray | None]  # the mask on screen, or a read of the file
    source: str

    def run(self) -> ImageMetrics | None:
        mask = self.mask()
        return None if mask is None else image_metrics(self.result, mask, self.source)


@dataclass(frozen=True)
class QualityJob:
    """What computing one image's QA metrics needs, taken in the session's thread; `run()` may run on any
    other, and `SessionMetrics.set_quality` takes the answer (dropped when the image's metrics are no longer
    `basis`: an edit or a new run since)."""

    item_id: str
    basis: ImageMetrics  # the metrics the QA metrics extend
    spec: MetricSpec
    result: InferenceResult
    mask: Callable[[], np.ndarray | None]  # as `ScoreJob.mask`
    source: str

    def run(self) -> ImageQuality | None:
        mask = self.mask()
        return None if mask is None else image_quality(self.spec, self.result,
                                                       truth_at_roi(self.result, mask, self.source))


class SessionMetrics:
    """The metrics half of `Session` (a mixin: it reads the session's results, document and dataset)."""

    events: SessionEvents
    document: MaskDocument | None
    _dataset: Callable[[], Dataset]
    result: Callable[[str], InferenceResult | None]
    roi_for: Callable[[str], Roi]

    def __init__(self) -> None:
        self._metrics: dict[str, ImageMetrics | None] = {}
        self._stale_metrics: set[str] = set()
        self._generations: dict[str, int] = {}  # per image: bumped whenever its metrics go stale
        self.ranking: Metric = catalogue.lookup(catalogue.DEFAULT_RANKING)

    def _forget_metrics(self) -> None:
        """Another dataset: none of these images' metrics apply."""
        self._metrics.clear()
        self._stale_metrics.clear()

    def _scored(self, item_id: str, metrics: ImageMetrics | None) -> None:
        """A new run's metrics (scored on the mask file); a re-score of the old result taken before is stale."""
        self._metrics[item_id] = metrics
        self._stale_metrics.discard(item_id)
        self._generations[item_id] = self._generations.get(item_id, 0) + 1

    def metrics(self, item_id: str) -> ImageMetrics | None:
        """The image's metrics against the mask on screen or on disk, re-scored here when stale (headless
        callers; a window takes `score_job` to a worker and shows `known_metrics` meanwhile)."""
        job = self.score_job(item_id)
        if job is not None:
            self._adopt(job, job.run(), announce=False)
        return self._metrics.get(item_id)

    def known_metrics(self, item_id: str) -> ImageMetrics | None:
        """The image's last scored metrics, never re-scored here (they may be stale: `metrics_stale`)."""
        return self._metrics.get(item_id)

    def metrics_stale(self, item_id: str) -> bool:
        """Whether the mask changed since the image's metrics were scored (a re-score is due)."""
        return item_id in self._stale_metrics

    def has_metrics(self, item_id: str) -> bool:
        """Whether the image was run (its metrics may still be None: no mask)."""
        return item_id in self._metrics

    def score_job(self, item_id: str) -> ScoreJob | None:
        """What re-scoring a stale image needs, captured now (None: nothing to re-score). The job reads the
        mask on screen without copying it: an edit during the run makes its answer stale (`adopt_score`)."""
        if item_id not in self._stale_metrics:
            return None
        result = self.result(item_id)
        if result is None:  # the arrays were dropped: the last scored metrics stay
            self._stale_metrics.discard(item_id)
            return None
        return ScoreJob(item_id, self._generations.get(item_id, 0), result, *self._truth(item_id))

    def quality_job(self, item_id: str, spec: MetricSpec) -> QualityJob | None:
        """What computing the image's QA metrics by `spec` needs, captured now, against the mask `score_job`
        scores (None: no fresh metrics to extend, or no result in memory)."""
        basis, result = self._metrics.get(item_id), self.result(item_id)
        if basis is None or result is None or item_id in self._stale_metrics:
            return None
        return QualityJob(item_id, basis, spec, result, *self._truth(item_id))

    def _truth(self, item_id: str) -> tuple[Callable[[], np.ndarray | None], str]:
        """The image's ground truth as a read for any thread (the mask on screen, as it is then, not copied:
        an edit meanwhile makes the answer stale), and its file's name."""
        document = self.document if self.document is not None and self.document.item.id == item_id else None
        if document is not None:
            held = document.mask
            return (lambda: held), str(document.item.truth_path or document.source)
        dataset, item = self._dataset(), self._dataset().item(item_id)
        return (lambda: dataset.load_mask(item)), str(item.truth_path)

    def adopt_score(self, job: ScoreJob, metrics: ImageMetrics | None) -> bool:
        """Take a finished job's metrics and announce them; False (ignored) when the mask or the result
        changed since the job was taken."""
        return self._adopt(job, metrics, announce=True)

    def _adopt(self, job: ScoreJob, metrics: ImageMetrics | None, announce: bool) -> bool:
        if self._generations.get(job.item_id, 0) != job.generation or job.item_id not in self._stale_metrics:
            return False
        self._stale_metrics.discard(job.item_id)
        self._metrics[job.item_id] = metrics
        if announce:
            self.events.metrics_changed.emit(job.item_id, metrics)
        return True

    def set_quality(self, item_id: str, basis: ImageMetrics, quality: ImageQuality) -> bool:
        """Add QA metrics computed elsewhere (a worker) against the metrics `basis` to the image's metrics and
        announce them; False (dropped) when its metrics are no longer `basis` (an edit, a new run since)."""
        if self._metrics.get(item_id) is not basis or item_id in self._stale_metrics:
            return False
        self._metrics[item_id] = replace(basis, quality=quality)
        self.events.metrics_changed.emit(item_id, self._metrics[item_id])
        return True

    def refresh_metrics(self, item_id: str) -> None:
        """Re-score a stale image in place and announce its metrics (headless callers)."""
        if item_id in self._metrics:
            self.events.metrics_changed.emit(item_id, self.metrics(item_id))

    def _invalidate(self, item_id: str) -> None:
        self._stale_metrics.add(item_id)
        self._generations[item_id] = self._generations.get(item_id, 0) + 1
        self.events.metrics_stale.emit(item_id)

    def ranking_values(self, item_ids: list[str] | None = None) -> dict[str, float | None]:
        """The ranking metric of the images run so far (or `item_ids`), None where it is n/a or there is no mask
        (of the last scored metrics: never re-scores here)."""
        ids = item_ids if item_ids is not None else list(self._metrics)
        return {item_id: self.ranking.of(self._metrics.get(item_id)) for item_id in ids if self.has_metrics(item_id)}

    def summary(self, item_ids: list[str] | None = None) -> DatasetSummary:
        """Means of the last scored metrics over the images run so far (or `item_ids`) that have masks
        (never re-scores: cheap enough for every change)."""
        summary = DatasetSummary()
        for item_id in item_ids if item_ids is not None else list(self._metrics):
            summary.add(self._metrics.get(item_id))
        return summary

    def metrics_table(self, item_ids: list[str] | None = None) -> tuple[list[dict[str, object]], dict[str, object]]:
        """Rows (one per image run, or per image of `item_ids`) and their means, for `write_metrics`."""
        return self.metrics_table_job(item_ids)()

    def metrics_table_job(self, item_ids: list[str] | None = None
                          ) -> Callable[[], tuple[list[dict[str, object]], dict[str, object]]]:
        """`metrics_table` as work for any thread, taken now: stale images are re-scored in it (their jobs),
        the others keep their scored metrics (nothing here changes)."""
        dataset = self._dataset()
        wanted = set(item_ids) if item_ids is not None else None
        taken = []
        for item in dataset.items:
            if item.id in self._metrics and (wanted is None or item.id in wanted):
                result = self.result(item.id)
                roi = result.roi if result is not None else self.roi_for(item.id)
                taken.append((item, roi, self._metrics[item.id], self.score_job(item.id),
                              result.timings if result else None, result.roi_note if result else ""))

        def table() -> tuple[list[dict[str, object]], dict[str, object]]:
            rows, summary = [], DatasetSummary()
            for item, roi, metrics, job, timings, roi_note in taken:
                scored = job.run() if job is not None else metrics
                rows.append(evaluation_row(item, roi, scored, timings, roi_note))
                summary.add(scored)
            return rows, dict(summary.means())
        return table
