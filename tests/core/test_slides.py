"""Slide readers: the registry, the OpenCV reader's region reads and levels."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.errors import SegScopeError
from segscope.core.roi import Roi
from segscope.core.slides import open_slide, slide_kind_for


def _slide(tmp_path: Path, width: int = 5000, height: int = 3000) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(7)
    image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    path = tmp_path / "slide.png"
    assert cv2.imwrite(str(path), image)
    return path, image


def test_png_region_read_is_the_decoded_file_cropped(tmp_path: Path) -> None:
    path, image = _slide(tmp_path)
    with open_slide(path) as slide:
        assert slide.kind == "opencv"
        assert slide.size == (5000, 3000)
        region = slide.read_region(0, 4100, 2500, 900, 500)
        np.testing.assert_array_equal(region, image[2500:3000, 4100:5000])
        assert region.flags.c_contiguous
        np.testing.assert_array_equal(slide.read_roi(Roi(10, 20, 30, 45)), image[20:45, 10:30])


def test_levels_halve_until_the_base_fits_and_are_area_averages(tmp_path: Path) -> None:
    path, image = _slide(tmp_path)
    with open_slide(path) as slide:
        # 5000x3000 -> 2500x1500 (longest side 2500 > 2048) -> 1250x750
        assert [(lv.width, lv.height) for lv in slide.levels] == [(5000, 3000), (2500, 1500), (1250, 750)]
        assert [lv.downsample for lv in slide.levels] == [1.0, 2.0, 4.0]
        mean2 = image[:2, :2].reshape(-1, 3).astype(float).mean(axis=0)  # one level-1 pixel = a 2x2 block
        np.testing.assert_allclose(slide.read_region(1, 0, 0, 1, 1)[0, 0], mean2, atol=0.51)
        assert slide.level_for(1.0) == 0 and slide.level_for(3.0) == 1 and slide.level_for(100.0) == 2


def test_regions_outside_the_level_and_unknown_files_are_one_line_errors(tmp_path: Path) -> None:
    path, _ = _slide(tmp_path, 64, 32)
    with open_slide(path) as slide:
        with pytest.raises(SegScopeError, match="outside level 0"):
            slide.read_region(0, 60, 0, 5, 5)
        with pytest.raises(SegScopeError, match="no level 3"):
            slide.read_region(3, 0, 0, 1, 1)
    text = tmp_path / "notes.txt"
    text.write_text("not an image")
    with pytest.raises(SegScopeError, match="no slide reader reads this file: it is a text file"):
        slide_kind_for(text)
    damaged = tmp_path / "image.png"
    damaged.write_bytes(b"\x00garbage, not the PNG signature" * 10)
    with pytest.raises(SegScopeError, match=r"image\.png: no slide reader reads this file: it is a file named \.png "
                       "that holds no image"):
        slide_kind_for(damaged)
    with pytest.raises(SegScopeError, match="missing.png"):
        open_slide(tmp_path / "missing.png")


@pytest.mark.parametrize("installed", [True, False])
def test_the_vendor_reader_asks_for_its_install_only_where_it_is_missing(tmp_path: Path, monkeypatch,
                                                                          installed: bool) -> None:
    from segscope.core.slides import openslide_reader

    if not installed:
        monkeypatch.setattr(openslide_reader, "_openslide", lambda: None)
    elif openslide_reader._openslide() is None:
        pytest.skip('OpenSlide is the optional extra: pip install "segscope[slides]"')
    text = tmp_path / "notes.txt"
    text.write_text("not an image")
    with pytest.raises(SegScopeError) as error:
        slide_kind_for(text)
    asks = 'vendor slides (needs pip install "segscope[slides]")' in str(error.value)
    assert asks is not installed
