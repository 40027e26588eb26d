"""Evaluating a dataset with the embedded backend on the tiny model."""

from __future__ import annotations

import threading

import cv2
import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.dataset.dataset import Dataset
from segscope.core.errors import CancelledError, SegScopeError
from segscope.core.evaluate import DatasetSummary, evaluate_dataset
from segscope.core.metrics.scores import image_metrics
from segscope.core.roi import Roi


@pytest.fixture
def backend(tiny_model_project):
    with EmbeddedBackend(tiny_model_project.pipeline, threads=1) as backend:
        yield backend


def test_every_image_in_order_with_metrics_where_there_is_a_mask(backend, small_dataset):
    dataset = Dataset.open(small_dataset)
    evaluations = list(evaluate_dataset(backend, dataset))
    assert [e.item.id for e in evaluations] == ["1", "2", "3", "10"]
    summary = DatasetSummary()
    for evaluation in evaluations:
        summary.add(evaluation.metrics)
        assert evaluation.result.roi == Roi(0, 0, 64, 48)  # 64x48 slides: the default ROI does not fit
        if evaluation.item.id == "3":
            assert evaluation.metrics is None
            continue
        mask = cv2.imread(str(evaluation.item.mask_path), cv2.IMREAD_GRAYSCALE)
        expected = image_metrics(backend.infer(evaluation.item.image_path, Roi(0, 0, 64, 48)), mask)
        assert evaluation.metrics == expected
        # The tiny model finds dark ellipses on a light surface well.
        assert expected.soft_dice > 0.6 and expected.foreground_dice > 0.8
    means = summary.means()
    with_masks = [e.metrics for e in evaluations if e.metrics is not None]
    assert means["images_with_masks"] == 3
    assert means["soft_dice"] == pytest.approx(np.mean([m.soft_dice for m in with_masks]), rel=1e-12)
    assert means["soft_iou"] == pytest.approx(np.mean([m.soft_iou for m in with_masks]), rel=1e-12)
    assert means["foreground_dice"] == pytest.approx(np.mean([m.foreground_dice for m in with_masks]),
                                                     rel=1e-12)


def test_roi_override_stored_rois_and_item_subset(backend, small_dataset):
    dataset = Dataset.open(small_dataset)
    dataset.set_roi(dataset.item("2"), Roi(4, 4, 36, 28))
    rois = {e.item.id: e.result.roi for e in evaluate_dataset(backend, dataset)}
    whole = Roi(0, 0, 64, 48)
    assert rois == {"1": whole, "2": Roi(4, 4, 36, 28), "3": whole, "10": whole}
    chosen = [dataset.item("10"), dataset.item("2")]
    overridden = list(evaluate_dataset(backend, dataset, roi=Roi(8, 8, 40, 40), items=chosen))
    assert [(e.item.id, e.result.roi) for e in overridden] == [("10", Roi(8, 8, 40, 40)),
                                                                 ("2", Roi(8, 8, 40, 40))]


def test_cancel(backend, small_dataset):
    dataset = Dataset.open(small_dataset)
    cancel = threading.Event()
    seen = []
    with pytest.raises(CancelledError, match="cancelled after 2"):
        for evaluation in evaluate_dataset(backend, dataset, cancel=cancel):
            seen.append(evaluation.item.id)
            cancel.set()
    assert seen == ["1"]


def test_summary_without_masks_is_none():
    means = DatasetSummary().means()
    assert means["images_with_masks"] == 0 and means["soft_dice"] is None and means["foreground_dice"] is None


@pytest.mark.parametrize("stray_inside_roi", [True, False])
def test_a_mask_off_the_conventions_is_refused_wherever_the_value_lies(backend, tmp_path, write_png,
                                                                       stray_inside_roi):
    """Scoring never reads a guessed truth: a mask holding a value that is no convention is refused, naming the file
    and its values, even where the ROI leaves that pixel out (as `eval` refuses it before its first image)."""
    rng = np.random.default_rng(5)
    for name in ("a", "b"):
        write_png(tmp_path / name / "image.png", rng.integers(150, 230, (48, 64, 3), dtype=np.uint8))
        mask = np.zeros((48, 64), np.uint8)
        mask[10:20, 10:30] = 255
        mask[40, 60] = 128  # neither 0/255 nor 0/1, at a pixel the ROI below leaves out
        if stray_inside_roi:
            mask[12, 12] = 128
        write_png(tmp_path / name / "mask.png", mask)
    dataset = Dataset.open(tmp_path)
    with pytest.raises(SegScopeError, match=r"a/mask.png: values 0, 128, 255 are not a mask convention for this "
                                            r"2-class model \(128 not among binary 0/255 or 0/1\)"):
        list(evaluate_dataset(backend, dataset, roi=Roi(0, 0, 40, 32)))
