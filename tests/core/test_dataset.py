"""Dataset layouts, per-image ROIs in the sidecar and the default ROI rule."""

from __future__ import annotations

import json
import re

import cv2
import numpy as np
import pytest

from segscope.core.dataset.dataset import Dataset
from segscope.core.errors import SegScopeError
from segscope.core.roi import ORIGINAL_DEFAULT_ROI, Roi

GRAY = np.full((6, 8), 128, np.uint8)


def test_folder_layout_in_natural_order_with_optional_masks(tmp_path, write_png):
    for item in ("10", "2", "1", "b", "A"):
        write_png(tmp_path / item / "image.png", GRAY)
    for item in ("1", "10"):
        write_png(tmp_path / item / "mask.png", GRAY)
    (tmp_path / "empty").mkdir()  # a folder without image.* is not an item
    write_png(tmp_path / "notes" / "photo.png", GRAY)
    dataset = Dataset.open(tmp_path)
    assert [i.id for i in dataset.items] == ["1", "2", "10", "A", "b"]
    assert len(dataset) == 5
    one = dataset.item("1")
    assert one.image_path == tmp_path / "1" / "image.png" and one.mask_path == tmp_path / "1" / "mask.png"
    assert one.has_mask and not dataset.item("2").has_mask
    assert dataset.load_mask(dataset.item("2")) is None
    np.testing.assert_array_equal(dataset.load_mask(one), GRAY)


def test_jpg_and_tif_images(tmp_path, write_png):
    write_png(tmp_path / "1" / "image.jpg", np.full((6, 8, 3), 100, np.uint8))
    write_png(tmp_path / "2" / "image.tif", np.full((5, 9, 3), 100, np.uint8))
    write_png(tmp_path / "2" / "mask.png", np.zeros((5, 9), np.uint8))
    dataset = Dataset.open(tmp_path)
    assert [i.image_path.name for i in dataset.items] == ["image.jpg", "image.tif"]
    assert dataset.image_size(dataset.items[0]) == (8, 6)
    assert dataset.image_size(dataset.items[1]) == (9, 5)  # TIFF: no header shortcut, decoded


def test_flat_layout(tmp_path, write_png):
    for name in ("img10.png", "img2.png", "img1.jpg", "img1_mask.png", "img2_mask.png"):
        write_png(tmp_path / name, GRAY)
    (tmp_path / "readme.txt").write_text("not an image")
    dataset = Dataset.open(tmp_path)
    found = [(i.id, i.image_path.name, i.mask_path.name if i.mask_path else None) for i in dataset.items]
    assert found == [("img1", "img1.jpg", "img1_mask.png"), ("img2", "img2.png", "img2_mask.png"),
                     ("img10", "img10.png", None)]


def test_missing_and_empty_dataset(tmp_path):
    with pytest.raises(SegScopeError, match="dataset folder not found") as info:
        Dataset.open(tmp_path / "absent")
    assert str(tmp_path / "absent") in str(info.value)
    with pytest.raises(SegScopeError, match="no images found"):
        Dataset.open(tmp_path)


def test_default_roi_rule(tmp_path, write_png):
    write_png(tmp_path / "small" / "image.png", np.zeros((300, 400), np.uint8))
    write_png(tmp_path / "slide" / "image.png", np.zeros((3000, 4000), np.uint8))
    write_png(tmp_path / "edge" / "image.png", np.zeros((2800, 4000), np.uint8))  # the box just fits
    dataset = Dataset.open(tmp_path)
    original = Roi(*ORIGINAL_DEFAULT_ROI)
    assert dataset.roi_for(dataset.item("slide")) == original == Roi(2200, 1000, 4000, 2800)
    assert dataset.roi_for(dataset.item("edge")) == original
    assert dataset.roi_for(dataset.item("small")) == Roi(0, 0, 400, 300)
    assert dataset.roi_for(dataset.item("small"), (3999, 3000)) == Roi(0, 0, 3999, 3000)
    custom = Dataset.open(tmp_path, default_roi=Roi(10, 20, 110, 220))
    assert custom.roi_for(custom.item("small")) == Roi(10, 20, 110, 220)
    assert custom.roi_for(custom.item("small"), (100, 300)) == Roi(0, 0, 100, 300)


def test_sidecar_roundtrip_is_atomic_and_survives_reopen(tmp_path, write_png):
    for item in ("1", "2"):
        write_png(tmp_path / item / "image.png", GRAY)
    dataset = Dataset.open(tmp_path)
    dataset.set_roi(dataset.item("2"), Roi(1, 2, 5, 6))
    dataset.set_roi(dataset.item("1"), Roi(0, 0, 3, 3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1", "2", "segscope.json"]  # no temp file left
    stored = json.loads((tmp_path / "segscope.json").read_text())
    assert stored["rois"] == {"1": [0, 0, 3, 3], "2": [1, 2, 5, 6]}
    assert stored["default_roi"] == list(ORIGINAL_DEFAULT_ROI)
    reopened = Dataset.open(tmp_path)
    assert reopened.roi_for(reopened.item("2")) == Roi(1, 2, 5, 6)
    assert reopened.stored_roi(reopened.item("1")) == Roi(0, 0, 3, 3)
    reopened.reset_roi(reopened.item("2"))
    again = Dataset.open(tmp_path)
    assert again.stored_roi(again.item("2")) is None
    assert again.roi_for(again.item("2")) == Roi(0, 0, 8, 6)  # back to the default rule
    with pytest.raises(SegScopeError, match="ROI of 1"):
        again.set_roi(again.item("1"), Roi(5, 5, 2, 2))
    assert Dataset.open(tmp_path).stored_roi(again.item("1")) == Roi(0, 0, 3, 3)


def test_sidecar_default_roi_is_used(tmp_path, write_png):
    write_png(tmp_path / "1" / "image.png", np.zeros((100, 200), np.uint8))
    (tmp_path / "segscope.json").write_text(json.dumps({"default_roi": [10, 10, 60, 40], "rois": {}}))
    dataset = Dataset.open(tmp_path)
    assert dataset.roi_for(dataset.item("1")) == Roi(10, 10, 60, 40)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The trailing comma is column 28 (Python 3.13 points there, older ones at the '}' after it).
        ('{"rois": {"1": [0, 0, 3, 3],}}', re.compile(r"segscope\.json:1:(28|29): invalid JSON")),
        ('["not", "an", "object"]', "expected {\"rois\""),
        ('{"rois": [1, 2]}', "expected {\"rois\""),
        ('{"rois": {"1": [0, 0, 3]}}', "rois.1 must be [x0, y0, x1, y1] integers, got [0, 0, 3]"),
        ('{"rois": {"1": [0, 0, 3.5, 3]}}', "rois.1 must be [x0, y0, x1, y1] integers"),
        ('{"rois": {"1": [5, 0, 3, 3]}}', "rois.1: (5, 0, 3, 3) is not a box"),
        ('{"default_roi": "2200,1000,4000,2800"}', "default_roi must be [x0, y0, x1, y1] integers"),
    ],
)
def test_bad_sidecar_errors_name_the_file(tmp_path, write_png, text, expected):
    write_png(tmp_path / "1" / "image.png", GRAY)
    (tmp_path / "segscope.json").write_text(text)
    with pytest.raises(SegScopeError) as info:
        Dataset.open(tmp_path)
    message = str(info.value)
    found = expected.search(message) if isinstance(expected, re.Pattern) else expected in message
    assert str(tmp_path / "segscope.json") in message and found and "\n" not in message


def test_masks_are_read_as_grayscale(tmp_path, write_png):
    write_png(tmp_path / "1" / "image.png", GRAY)
    colour = np.zeros((6, 8, 3), np.uint8)
    colour[2:4, 3:5] = 255
    write_png(tmp_path / "1" / "mask.png", colour)
    mask = Dataset.open(tmp_path).load_mask(Dataset.open(tmp_path).items[0])
    np.testing.assert_array_equal(mask, cv2.cvtColor(colour, cv2.COLOR_BGR2GRAY))
