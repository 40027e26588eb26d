"""Real industrial images from ../shared/data (skipped when absent): small grayscale slides, an empty mask,
and one large 3326x2504 slide."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.dataset.dataset import Dataset
from segscope.core.evaluate import DatasetSummary, evaluate_dataset
from segscope.core.files.fileio import read_image
from segscope.core.roi import ORIGINAL_DEFAULT_ROI, Roi
from segscope.core.stream.imaging import crop


@pytest.fixture
def backend(tiny_model_project):
    with EmbeddedBackend(tiny_model_project.pipeline, threads=2) as backend:
        yield backend


@pytest.mark.parametrize(("name", "count", "empty_id"), [("magnetic_tile", 6, "6"), ("pv_el_cells", 5, "5")])
def test_evaluate_real_datasets(shared_data, backend, name, count, empty_id):
    dataset = Dataset.open(shared_data / name)
    assert [i.id for i in dataset.items] == [str(n) for n in range(1, count + 1)]
    assert all(i.has_mask for i in dataset.items)
    summary = DatasetSummary()
    for evaluation in evaluate_dataset(backend, dataset):
        result, metrics = evaluation.result, evaluation.metrics
        width, height = cv2.imread(str(evaluation.item.image_path), cv2.IMREAD_UNCHANGED).shape[1::-1]
        # Every image is smaller than the original default ROI, so the whole image is cropped.
        assert not Roi(*ORIGINAL_DEFAULT_ROI).fits(width, height)
        assert result.roi == Roi(0, 0, width, height) and result.image_size == (width, height)
        assert result.probabilities.shape == (960, 960, 2)
        np.testing.assert_allclose(result.probabilities.sum(axis=-1), 1.0, atol=1e-5)
        for value in (metrics.soft_dice, metrics.soft_iou, *metrics.dice, *metrics.iou):
            assert 0.0 <= value <= 1.0
        for value in (metrics.precision, metrics.recall):  # n/a (NaN) only where its denominator is 0 (below)
            assert 0.0 <= value <= 1.0 or (np.isnan(value) and evaluation.item.id == empty_id)
        assert metrics.soft_iou == pytest.approx(metrics.soft_dice / (2 - metrics.soft_dice))
        if evaluation.item.id == empty_id:
            mask = cv2.imread(str(evaluation.item.mask_path), cv2.IMREAD_GRAYSCALE)
            assert not mask.any()
            margin = cv2.resize(result.probabilities[..., 1] - result.probabilities[..., 0], (width, height),
                                interpolation=cv2.INTER_LINEAR)
            false_alarms = int((margin > 0).sum())
            # Nothing to find: recall is n/a (Metrics Reloaded: undefined for an empty reference); precision and
            # Dice are 0 with any false alarm, and n/a without one (no foreground in either mask).
            assert np.isnan(metrics.recall)
            assert metrics.precision == 0.0 if false_alarms else np.isnan(metrics.precision)
            if false_alarms:
                assert metrics.foreground_dice == 0.0 == metrics.dice[1]
            else:
                assert np.isnan(metrics.foreground_dice) and metrics.dice[1] == 1.0
            # Soft Dice against an all-background one-hot: 2·Σp0 / (Σp0² + Σp1² + N).
            p = result.probabilities.astype(np.float64)
            expected = 2 * p[..., 0].sum() / ((p**2).sum() + p[..., 0].size + 1e-6)
            assert metrics.soft_dice == pytest.approx(expected, rel=1e-6)
        summary.add(metrics)
    assert summary.means()["images_with_masks"] == count


def test_large_slide_decodes_and_crops(shared_data, backend):
    path = shared_data / "large_unlabeled" / "pv_module_el.png"
    image = read_image(path)
    assert image.shape == (2504, 3326, 3) and image.dtype == np.uint8
    gray = cv2.imread(str(path), cv2.IMREAD_GRAYSCALE)
    np.testing.assert_array_equal(image[..., 0], gray)
    part, box = crop(image, Roi(*ORIGINAL_DEFAULT_ROI))  # x1 4000 and y1 2800 are clipped to 3326 and 2504
    assert box == Roi(2200, 1000, 3326, 2504) and part.shape == (1504, 1126, 3)
    np.testing.assert_array_equal(part, image[1000:2504, 2200:3326])
    dataset = Dataset.open(shared_data / "large_unlabeled")
    (item,) = dataset.items
    assert item.id == "pv_module_el" and not item.has_mask
    assert dataset.roi_for(item) == Roi(0, 0, 3326, 2504)  # the default ROI does not fit: whole slide
    result = backend.infer(path, Roi(1000, 500, 2000, 1500))
    assert result.roi == Roi(1000, 500, 2000, 1500) and result.image_size == (3326, 2504)
    assert result.probabilities.shape == (960, 960, 2)
