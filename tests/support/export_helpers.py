"""A session with results of known shapes, for the export's plan and dialog tests: ROI runs and whole-slide
runs made of arrays the test chooses (no model run), on a dataset of real files, as the viewer's session
holds them (`core.export.job.ExportSession`)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import tifffile

from segscope.core.dataset.dataset import Dataset
from segscope.core.export.plan import PlannedFile
from segscope.core.metrics import catalogue
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.session.truth import ImageTruth
from segscope.core.wholeslide.evaluate import TiledEvaluation
from segscope.core.wholeslide.tiling import Stitched


class FakeSession:
    """The session's export-facing state: its dataset, current image, ROI results and whole-slide runs."""

    def __init__(self, dataset: Dataset, results: dict[str, InferenceResult],
                 runs: dict[str, TiledEvaluation] | None = None, current: str | None = None):
        self.dataset, self._results, self._runs = dataset, results, runs or {}
        self.current = dataset.item(current) if current else None
        self.ranking = catalogue.lookup(catalogue.DEFAULT_RANKING)

    @property
    def result_ids(self) -> list[str]:
        return [item.id for item in self.dataset.items if item.id in self._results]

    def result(self, item_id: str) -> InferenceResult | None:
        return self._results.get(item_id)

    def slide_run_of(self, item_id: str) -> TiledEvaluation | None:
        return self._runs.get(item_id)

    def metrics_table_job(self, item_ids=None):
        return lambda: ([{"id": i} for i in item_ids or self.result_ids], {"images_with_masks": 0})

    def truth(self, item_id: str) -> ImageTruth:
        return ImageTruth(self.dataset.truth(self.dataset.item(item_id)), 0)

    def edited_mask(self, item_id: str):
        return lambda: None


def write_image(path: Path, width: int, height: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), np.zeros((height, width, 3), np.uint8))
    return path


def probabilities(height: int, width: int, seed: int = 0) -> np.ndarray:
    """Two-class probabilities: smooth blobs with some noise, so files compress as real ones do, not to nothing."""
    rng = np.random.default_rng(seed)
    p = cv2.GaussianBlur(rng.random((height, width), np.float32), (0, 0), 3)
    p = np.clip((p - p.mean()) * 20 + 0.5 + rng.normal(0, 0.02, p.shape), 0, 1).astype(np.float32)
    return np.stack([1 - p, p], axis=-1)


def roi_result(roi: Roi, image_size: tuple[int, int], model: int = 96, seed: int = 0) -> InferenceResult:
    probs = probabilities(model, model, seed)
    return InferenceResult(probs, (probs[..., 1] > 0.5).astype(np.uint8), roi, image_size, backend="embedded")


def slide_run(dataset: Dataset, item_id: str, width: int, height: int, seed: int = 1) -> TiledEvaluation:
    """A whole-slide run of `item_id` stitched at `width` x `height` output pixels (scale 1)."""
    probs = probabilities(height, width, seed)
    stitched = Stitched(Roi(0, 0, width, height), 1.0, (width, height), probs,
                        (probs[..., 1] > 0.5).astype(np.uint8), None, np.ones((height, width), bool))
    return TiledEvaluation(dataset.item(item_id), stitched, tiles=4, metrics=None, seconds=1.0)


def shaped_run(dataset: Dataset, item_id: str, width: int, height: int) -> TiledEvaluation:
    """A whole-slide run with the shapes of a `width` x `height` output and no memory behind them (planning
    reads shapes only): the size of a real large slide's run, without its gigabytes."""
    probs = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (height, width, 2), (0, 0, 0))
    argmax = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), (height, width), (0, 0))
    covered = np.lib.stride_tricks.as_strided(np.ones(1, bool), (height, width), (0, 0))
    stitched = Stitched(Roi(0, 0, width, height), 1.0, (width, height), probs, argmax, None, covered)
    return TiledEvaluation(dataset.item(item_id), stitched, tiles=208, metrics=None, seconds=1.0)


def check_written(out, planned: PlannedFile):
    """The file as planned: its pixels, channels and dtype, and its bytes within the stated accuracy."""
    path = out / planned.name
    size = path.stat().st_size
    if planned.bytes is not None:
        assert size == planned.bytes if planned.exact else 0 < size <= planned.bytes, (planned, size)
    if planned.format.startswith("pyramidal OME-TIFF"):
        with tifffile.TiffFile(path) as tif:
            level0 = tif.series[0].levels[0]
            shape, dtype = level0.shape, level0.dtype
            assert len(tif.series[0].levels) > 1  # a pyramid
    elif planned.format == "NumPy .npy":
        array = np.load(path, mmap_mode="r")
        shape, dtype = array.shape, array.dtype
    elif planned.format in ("PNG", "TIFF"):
        array = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        shape, dtype = array.shape, array.dtype
    else:
        assert planned.size is None
        return
    width, height = planned.size
    assert shape == ((height, width, planned.channels) if planned.channels > 1 else (height, width)), planned
    assert str(dtype) == (planned.dtype or "uint8"), planned
