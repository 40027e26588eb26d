"""The editing tools without a window: brush, eraser, fill, lasso and "accept the prediction" through the
mask document, clipped to the ROI and to the probability limit; expected masks are built here with NumPy."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from segscope.core.dataset.dataset import Dataset
from segscope.core.editing.document import MaskDocument
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi

W, H = 20, 16
ROI = Roi(4, 3, 16, 12)  # 12 x 9, the model's resolution too (no resampling)
SPLIT = 10  # slide column where P(class 1) jumps from 0.2 to 0.9


@pytest.fixture
def document(tmp_path, write_png):
    truth = np.zeros((H, W), np.uint8)
    truth[0:2, 0:2] = 255  # a 0/255 mask, foreground outside the ROI
    write_png(tmp_path / "d" / "a" / "image.png", np.full((H, W, 3), 128, np.uint8))
    write_png(tmp_path / "d" / "a" / "mask.png", truth)
    dataset = Dataset.open(tmp_path / "d")
    item = dataset.item("a")
    return MaskDocument(dataset, item, (W, H), dataset.load_mask(item))


@pytest.fixture
def kinds(document):
    """The kinds of change the document announced."""
    seen = []
    document.events.changed.connect(seen.append)
    return seen


@pytest.fixture
def result():
    slide_x = np.arange(ROI.x0, ROI.x1)[None, :].repeat(ROI.height, axis=0)
    p1 = np.where(slide_x >= SPLIT, 0.9, 0.2).astype(np.float32)
    probabilities = np.stack([1 - p1, p1], axis=-1)
    return InferenceResult(probabilities, (p1 > 0.5).astype(np.uint8), ROI, (W, H))


def inside_roi() -> np.ndarray:
    where = np.zeros((H, W), bool)
    where[ROI.y0:ROI.y1, ROI.x0:ROI.x1] = True
    return where


def test_a_brush_drag_paints_only_inside_the_roi_and_is_one_undo_step(document, result, kinds):
    original = document.mask.copy()
    document.begin_stroke(result)
    document.stroke(result, [(-5.0, 7.0), (10.0, 7.0)], 1, 1)
    document.stroke(result, [(10.0, 7.0), (30.0, 7.0)], 1, 1)
    box = document.end_stroke()
    mask = document.mask
    changed = mask != original
    assert not (changed & ~inside_roi()).any()  # the ROI's edge clips the stroke
    assert (mask[7, ROI.x0:ROI.x1] == 255).all()  # the whole centre row of the ROI is painted
    assert (mask[ROI.y0, :] == original[ROI.y0, :]).all()  # radius 1 does not reach 4 rows up
    assert box is not None and changed.any()
    assert set(kinds) == {"edit"} and document.dirty
    document.undo()  # the drag is undone as one step
    np.testing.assert_array_equal(document.mask, original)


def test_the_probability_limit_keeps_the_brush_where_the_class_is_likely(document, result):
    document.stroke(result, [(0.0, 7.0), (30.0, 7.0)], 0, 1, limit=0.5)
    row = document.mask[7]
    columns = np.arange(W)
    expected = np.where((columns >= SPLIT) & (columns < ROI.x1), 255, 0)
    np.testing.assert_array_equal(row, expected)


def test_the_eraser_erases_class_0(document, result):
    document.accept_prediction(result)  # class 1 right of SPLIT inside the ROI
    document.stroke(result, [(0.0, 5.0), (30.0, 5.0)], 0, 0)
    assert (document.mask[5] == 0).all()
    assert (document.mask[6, SPLIT:ROI.x1] == 255).all()


def test_fill_floods_the_clicked_region_within_the_roi(document, result):
    original = document.mask.copy()
    document.fill(result, (8, 6), 1)
    expected = original.copy()
    expected[inside_roi()] = 255  # the ROI's background is one region; the corner block lies outside
    np.testing.assert_array_equal(document.mask, expected)


def test_fill_outside_the_roi_changes_nothing(document, result, kinds):
    original = document.mask.copy()
    assert document.fill(result, (1, 14), 1) is None
    np.testing.assert_array_equal(document.mask, original)
    assert kinds == []


def test_a_lasso_polygon_fills_its_inside_and_border(document, result):
    document.polygon(result, [(6.0, 5.0), (9.0, 5.0), (9.0, 8.0), (6.0, 8.0)], 1)
    expected = np.zeros((H, W), bool)
    expected[5:9, 6:10] = True
    np.testing.assert_array_equal(document.mask[ROI.y0:ROI.y1] == 255, expected[ROI.y0:ROI.y1])


def test_accept_prediction_replaces_the_roi_with_the_thresholded_class(document, result):
    original = document.mask.copy()
    document.accept_prediction(result, threshold=0.1, class_index=1)  # P >= 0.1 everywhere in the ROI
    expected = original.copy()
    expected[inside_roi()] = 255
    np.testing.assert_array_equal(document.mask, expected)
    document.accept_prediction(result)  # the argmax: class 1 right of SPLIT
    expected[ROI.y0:ROI.y1, ROI.x0:SPLIT] = 0
    np.testing.assert_array_equal(document.mask, expected)
    document.undo()
    document.redo()
    np.testing.assert_array_equal(document.mask, expected)


def as_slide_map(clip) -> np.ndarray:
    """Where a clip lets a tool paint, as a slide-sized map."""
    where = np.zeros((H, W), bool)
    box = clip.box
    where[box.y0:box.y1, box.x0:box.x1] = True if clip.allowed is None else clip.allowed
    return where


def test_clip_maps_follow_the_result_and_the_limit(document, result):
    limited = document.clip_map(result, 1, 0.5)
    assert document.clip_map(result, 1, 0.5) is limited  # reused on every mouse move
    expected = inside_roi()
    expected[:, :SPLIT] = False
    np.testing.assert_array_equal(as_slide_map(limited), expected)
    assert limited.allowed.shape == (ROI.height, ROI.width)  # nothing slide-sized
    np.testing.assert_array_equal(as_slide_map(document.clip_map(result)), inside_roi())
    other = InferenceResult(result.probabilities.copy(), result.argmax, ROI, (W, H))
    assert document.clip_map(other, 1, 0.5) is not limited  # another result gets its own map


def test_edits_go_into_the_loaded_mask_and_discard_reverts_it(document, result, kinds):
    loaded = document.mask
    original = loaded.copy()
    assert document.disk_mask is loaded
    document.stroke(result, [(5.0, 5.0), (14.0, 10.0)], 2, 1)
    document.fill(result, (15, 3), 1)
    assert document.mask is loaded and not np.array_equal(loaded, original)  # no slide-sized copy
    assert document.disk_mask is None  # the mask as on disk is not in memory while edited: a run reads the file
    document.undo()
    document.undo()
    assert document.disk_mask is loaded  # every edit undone: the array is the file's again
    document.stroke(result, [(5.0, 5.0), (14.0, 10.0)], 2, 1)
    document.discard()
    assert document.mask is loaded and document.disk_mask is loaded and document.editor is None
    np.testing.assert_array_equal(loaded, original)
    assert kinds == ["edit"] * 5 + ["discard"]


def test_after_a_save_the_saved_mask_is_the_disk_mask_and_discard_returns_to_it(document, result, kinds):
    document.stroke(result, [(5.0, 5.0), (14.0, 10.0)], 2, 1)
    saved = document.mask.copy()
    written = document.save("corrected")
    np.testing.assert_array_equal(document.disk_mask, saved)
    document.stroke(result, [(5.0, 10.0), (14.0, 4.0)], 2, 0)
    assert not np.array_equal(document.mask, saved)
    np.testing.assert_array_equal(document.disk_mask, saved)  # its own copy, kept by the save
    document.discard()
    np.testing.assert_array_equal(document.mask, saved)
    np.testing.assert_array_equal(cv2.imread(str(written), cv2.IMREAD_UNCHANGED), saved)
    assert kinds == ["edit", "save", "edit", "discard"]


@pytest.mark.parametrize(("disk", "painted"), [("0/1", 1), ("0/255", 255), ("none", 255)])
def test_the_brush_paints_in_the_mask_files_convention(document, result, disk, painted):
    mask = {"0/1": np.eye(H, W, dtype=np.uint8), "0/255": np.eye(H, W, dtype=np.uint8) * 255, "none": None}[disk]
    other = MaskDocument(document.dataset, document.item, (W, H), mask)
    other.stroke(result, [(8.0, 6.0)], 1, 1)
    assert other.mask[6, 8] == painted and set(np.unique(other.mask)) == {0, painted}
