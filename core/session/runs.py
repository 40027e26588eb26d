"""Run history of a session, run-to-run comparison and where the time goes.

Every inference the user makes is kept as a `RunRecord` (what ran, on what, when, how long each stage took,
and the result arrays) so two runs of the same image, e.g. the Ascend stream and the embedded reference on
the same ROI, can be compared with the same numbers `segscope compare` prints. The history keeps the arrays
of the most recent runs up to a memory budget; older runs keep their timings.
"""

from __future__ import annotations

import csv
import io
import itertools
import time
from collections import deque
from collections.abc import Iterable, Iterator, KeysView
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..backends.base import Capabilities
from ..errors import SegScopeError
from ..files.fileio import atomic_write_bytes
from ..metrics.scores import compare_tensors
from ..result import STAGES, InferenceResult
from ..roi import Roi

#: Stage order of timing tables: the stream's (a remote run's "upload" and "download" among them), then what the
#: GUI adds. A stage is shown only where a run reported it: a local run moves nothing, so it has no transfer.
STAGE_ORDER = (*STAGES, "render")
#: Arrays kept for comparison by default: about 130 runs of a 960x960x2 model.
DEFAULT_MAX_RESULT_BYTES = 1 << 30


@dataclass
class RunRecord:
    """One inference. `timings` are seconds per stage; a stage timed after the run (the viewer's "render") joins
    them through `Session.add_timing`."""

    id: int
    image_id: str
    backend: str
    model: str  # the model file as the backend reports it ("" when unknown)
    roi: Roi
    time: float  # time.time() when the result arrived
    timings: dict[str, float]
    result: InferenceResult | None  # None once the history dropped the arrays to stay in its budget
    class_names: tuple[str, ...] = ()  # of the model that ran it (empty when unknown: a restored run)

    @property
    def total_time(self) -> float:
        return sum(self.timings.values())

    def timeline(self) -> list[tuple[str, float, float]]:
        """(stage, start, duration) in seconds from the run's start, stages in stream order."""
        stages = ordered_stages(self.timings)
        starts = itertools.accumulate((self.timings[s] for s in stages), initial=0.0)
        return [(s, start, self.timings[s]) for s, start in zip(stages, starts)]


def ordered_stages(stages: Iterable[str]) -> list[str]:
    """Known stages in stream order, then any others alphabetically."""
    present = set(stages)
    return [s for s in STAGE_ORDER if s in present] + sorted(present - set(STAGE_ORDER))


class RunHistory:
    """The session's runs, oldest first, indexed by image: adding a run costs O(1), whatever the history holds."""

    def __init__(self, max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES) -> None:
        self.max_result_bytes = max_result_bytes
        self.records: list[RunRecord] = []  # (read-only outside: `add` and `clear` keep the indexes)
        self._by_image: dict[str, list[RunRecord]] = {}  # each image's runs, oldest first
        self._holding: deque[RunRecord] = deque()  # runs that still hold their arrays, oldest first
        self._held_bytes = 0

    def add(self, image_id: str, result: InferenceResult, capabilities: Capabilities | None = None) -> RunRecord:
        """Record a result (its `backend` and `timings`, and the model file from the backend's details)."""
        model = capabilities.details.get("model", "") if capabilities else ""
        backend = result.backend or (capabilities.name if capabilities else "")
        record = RunRecord(len(self.records) + 1, image_id, backend, model, result.roi, time.time(),
                           dict(result.timings), result, capabilities.class_names if capabilities else ())
        self.records.append(record)
        self._by_image.setdefault(image_id, []).append(record)
        self._holding.append(record)
        self._held_bytes += _array_bytes(result)
        self._trim()
        return record

    def _trim(self) -> None:
        """Drop the oldest runs' arrays until the rest fit the budget; the newest run always keeps its arrays."""
        while self._held_bytes > self.max_result_bytes and len(self._holding) > 1:
            oldest = self._holding.popleft()
            if oldest.result is not None:
                self._held_bytes -= _array_bytes(oldest.result)
                oldest.result = None

    def clear(self) -> None:
        self.records.clear()
        self._by_image.clear()
        self._holding.clear()
        self._held_bytes = 0

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[RunRecord]:
        return iter(self.records)

    def newest(self, image_id: str) -> RunRecord | None:
        """The image's newest run (its arrays may have been dropped)."""
        runs = self._by_image.get(image_id)
        return runs[-1] if runs else None

    def image_ids(self) -> KeysView[str]:
        """The images with at least one run."""
        return self._by_image.keys()

    def for_image(self, image_id: str) -> list[RunRecord]:
        return list(self._by_image.get(image_id, ()))

    def latest_per_image(self, backend: str | None = None) -> list[RunRecord]:
        """The newest run of each image (of one backend when given): the rows of a dataset timing table."""
        latest: dict[str, RunRecord] = {}
        for record in self.records:
            if backend is None or record.backend == backend:
                latest[record.image_id] = record
        return list(latest.values())


def _array_bytes(result: InferenceResult) -> int:
    return result.probabilities.nbytes + result.argmax.nbytes


@dataclass(frozen=True)
class RunComparison:
    reference: RunRecord
    candidate: RunRecord
    metrics: dict[str, float]  # compare_tensors of the probabilities: what `segscope compare` prints
    argmax_disagreement: float  # share of pixels whose predicted class differs
    difference: np.ndarray  # H x W float32: the largest |p_ref - p_cand| over the classes, per pixel


def _arrays(record: RunRecord) -> InferenceResult:
    if record.result is None:
        raise SegScopeError(f"run {record.id} ({record.image_id}, {record.backend}): its arrays were dropped to "
                            "save memory; run the image again to compare")
    return record.result


def compare_runs(reference: RunRecord, candidate: RunRecord) -> RunComparison:
    """Compare two runs of the same image and ROI (e.g. reference = embedded, candidate = Ascend)."""
    if reference.image_id != candidate.image_id or reference.roi != candidate.roi:
        raise SegScopeError(f"runs {reference.id} and {candidate.id} differ in image or ROI "
                            f"({reference.image_id} at {reference.roi} vs {candidate.image_id} at {candidate.roi}); "
                            "compare runs of the same image and ROI")
    a, b = _arrays(reference), _arrays(candidate)
    metrics = compare_tensors(a.probabilities, b.probabilities)
    difference = np.abs(a.probabilities.astype(np.float32) - b.probabilities.astype(np.float32)).max(axis=-1)
    return RunComparison(reference, candidate, metrics, float(np.mean(a.argmax != b.argmax)), difference)


@dataclass(frozen=True)
class StageStats:
    stage: str
    runs: int
    mean: float  # seconds
    p95: float  # seconds, linear interpolation between order statistics (numpy's default)


def timing_table(records: Iterable[RunRecord]) -> list[StageStats]:
    """Mean and 95th percentile per stage over `records`, plus a "total" row of each run's sum."""
    records = list(records)
    per_stage: dict[str, list[float]] = {}
    for record in records:
        for stage, seconds in record.timings.items():
            per_stage.setdefault(stage, []).append(seconds)
    columns = [(s, per_stage[s]) for s in ordered_stages(per_stage)]
    if records:
        columns.append(("total", [r.total_time for r in records]))
    return [StageStats(stage, len(values), float(np.mean(values)), float(np.percentile(values, 95)))
            for stage, values in columns]


def write_timing_csv(table: list[StageStats], path: Path, overwrite: bool = False) -> Path:
    """The timing table as CSV (stage, runs, mean_ms, p95_ms), written atomically."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["stage", "runs", "mean_ms", "p95_ms"])
    writer.writerows([s.stage, s.runs, f"{s.mean * 1000:.3f}", f"{s.p95 * 1000:.3f}"] for s in table)
    return atomic_write_bytes(Path(path), text.getvalue().encode(), overwrite)
