"""Datasets of whole slides: both layouts find slides, sizes come without a decode, masks read by region."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import tifffile

from segscope.core.dataset.dataset import Dataset
from segscope.core.errors import SegScopeError
from segscope.core.files import fileio
from segscope.core.roi import Roi
from segscope.core.slides import slide_size
from segscope.core.slides.masks import MaskReader
from segscope.core.slides.synthetic import write_pyramidal_tiff


def _mask(width: int, height: int, high: int = 255) -> np.ndarray:
    mask = np.zeros((height, width), np.uint8 if high == 255 else np.uint16)
    cv2.circle(mask, (width // 2, height // 3), min(width, height) // 4, high, -1)
    mask[5, 7] = high  # a lone pixel, so a one-pixel shift shows
    return mask


def test_both_layouts_take_pyramidal_slides_and_size_them_without_the_pixel_guard(tmp_path: Path) -> None:
    root = tmp_path / "data"
    (root / "case1").mkdir(parents=True)
    write_pyramidal_tiff(root / "case1" / "image.tif", (3000, 2000), tile=256, compression="jpeg")
    tifffile.imwrite(root / "case1" / "mask.tif", _mask(3000, 2000), tile=(256, 256), compression="zlib")
    write_pyramidal_tiff(root / "flat.svs", (1200, 800), tile=128, compression="zlib")  # a TIFF named .svs
    assert cv2.imwrite(str(root / "small.png"), np.zeros((40, 60, 3), np.uint8))
    dataset = Dataset.open(root, max_pixels=1_000_000)  # smaller than both slides
    assert [(i.id, i.image_path.name, i.mask_path and i.mask_path.name) for i in dataset.items] == [
        ("case1", "image.tif", "mask.tif"), ("flat", "flat.svs", None), ("small", "small.png", None)]
    sizes = [dataset.image_size(item) for item in dataset.items]
    assert sizes == [(3000, 2000), (1200, 800), (60, 40)]
    big_png = tmp_path / "big.png"
    assert cv2.imwrite(str(big_png), np.zeros((1100, 1000, 3), np.uint8))
    with pytest.raises(SegScopeError, match="over the limit") as info:  # decoded whole: the guard applies
        slide_size(big_png, max_pixels=1_000_000)
    assert "\n" not in str(info.value)


def test_a_tiff_size_comes_from_its_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_pyramidal_tiff(tmp_path / "s.tif", (1500, 900), tile=128, compression="zlib")

    def no_whole_reads(path: Path) -> bytes:
        raise AssertionError(f"{path} was read whole")

    monkeypatch.setattr(fileio, "read_bytes", no_whole_reads)
    assert fileio.image_size(path) == (1500, 900)


@pytest.mark.parametrize("high", [255, 1])
def test_a_tiled_mask_reads_by_region_as_the_whole_mask_reads(tmp_path: Path, high: int) -> None:
    mask = _mask(700, 500, high)
    if high == 1:
        mask = mask.astype(np.uint16)  # 16-bit 0/1, kept 0/1
    path = tmp_path / "mask.tif"
    tifffile.imwrite(path, mask, tile=(64, 64), compression="zlib")
    whole = fileio.read_mask(path)
    np.testing.assert_array_equal(whole, mask.astype(np.uint8))
    with MaskReader(path, max_pixels=1000) as reader:  # region reads: no whole decode, no guard
        assert reader.size == (700, 500)
        for roi in (Roi(0, 0, 10, 10), Roi(300, 100, 650, 420), Roi(600, 450, 700, 500)):
            region = reader.read_roi(roi)
            assert region.dtype == np.uint8
            np.testing.assert_array_equal(region, mask[roi.y0:roi.y1, roi.x0:roi.x1].astype(np.uint8))
        with pytest.raises(SegScopeError, match="outside") as info:
            reader.read_roi(Roi(650, 0, 710, 10))
        assert "\n" not in str(info.value)


def test_a_png_mask_opens_for_regions_too(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    assert cv2.imwrite(str(root / "a.png"), np.zeros((120, 160, 3), np.uint8))
    mask = _mask(160, 120)
    assert cv2.imwrite(str(root / "a_mask.png"), mask)
    dataset = Dataset.open(root)
    reader = dataset.open_mask(dataset.items[0])
    assert reader is not None
    with reader:
        np.testing.assert_array_equal(reader.read_roi(Roi(3, 4, 100, 90)), mask[4:90, 3:100])
