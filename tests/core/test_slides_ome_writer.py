"""The pyramidal OME-TIFF writer: round trips through tifffile and the slide reader, levels by hand, safety."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tifffile

from segscope.core.errors import SegScopeError
from segscope.core.slides import open_slide
from segscope.core.slides.ome_writer import write_ome_tiff


def _mask(width: int, height: int) -> np.ndarray:
    rng = np.random.default_rng(4)
    return rng.integers(0, 3, (height, width), dtype=np.uint8)  # class indices, every pixel independent


def test_a_mask_round_trips_with_nearest_levels_and_ome_metadata(tmp_path: Path) -> None:
    mask = _mask(1301, 999)  # odd sides: levels round up
    path = write_ome_tiff(tmp_path / "mask.ome.tif", mask, (1301, 999), tile=256, pixel_size_um=(0.5, 0.25))
    with tifffile.TiffFile(path) as tif:
        assert tif.is_ome and len(tif.pages) == 1  # the reduced levels are SubIFDs of the first page
        assert 'PhysicalSizeX="0.5"' in tif.ome_metadata and 'PhysicalSizeY="0.25"' in tif.ome_metadata
        levels = [level.asarray() for level in tif.series[0].levels]
        assert tif.pages[0].is_tiled and tif.pages[0].compression == 8  # ADOBE_DEFLATE (zlib)
    # 1301x999 -> 651x500 -> 326x250 -> 163x125 (fits a 256 tile); each the top-left pixel of every 2x2
    assert [lv.shape for lv in levels] == [(999, 1301), (500, 651), (250, 326), (125, 163)]
    for k, level in enumerate(levels):
        np.testing.assert_array_equal(level, mask[::2 ** k, ::2 ** k])
    with open_slide(path) as slide:
        assert slide.kind == "tiff" and slide.pixel_size_um == pytest.approx((0.5, 0.25))
        np.testing.assert_array_equal(slide.read_region(1, 100, 50, 300, 200)[..., 0], mask[100:500:2, 200:800:2])


def test_a_heatmap_from_a_callable_is_written_tile_by_tile_with_area_levels(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    heat = rng.integers(0, 256, (600, 700, 3), dtype=np.uint8)
    asked: list[tuple[int, int, int, int]] = []

    def region(x: int, y: int, w: int, h: int) -> np.ndarray:
        asked.append((x, y, w, h))
        return heat[y:y + h, x:x + w]

    path = write_ome_tiff(tmp_path / "heat.ome.tif", region, (700, 600), channels=3, tile=128, resample="area")
    assert len(asked) == 6 * 5 and all(w <= 128 and h <= 128 for _, _, w, h in asked)  # each level-0 tile once
    with open_slide(path) as slide:
        np.testing.assert_array_equal(slide.read_region(0, 0, 0, 700, 600), heat)  # BGR in, BGR out (zlib)
        level1 = slide.read_region(1, 0, 0, 350, 300).astype(np.float64)
    by_hand = heat.astype(np.float64).reshape(300, 2, 350, 2, 3).mean(axis=(1, 3))  # the mean of each 2x2
    assert np.abs(level1 - by_hand).max() <= 0.5 + 1e-9


def test_jpeg_heatmaps_and_memmaps(tmp_path: Path) -> None:
    smooth = np.zeros((512, 640, 3), np.uint8)
    smooth[..., 0] = np.linspace(0, 255, 640, dtype=np.uint8)[None, :]
    smooth[..., 2] = np.linspace(0, 255, 512, dtype=np.uint8)[:, None]
    source = np.lib.format.open_memmap(tmp_path / "heat.npy", "w+", np.uint8, smooth.shape)
    source[:] = smooth
    path = write_ome_tiff(tmp_path / "heat.ome.tif", source, (640, 512), channels=3, tile=128, compression="jpeg",
                          resample="area")
    with open_slide(path) as slide:
        assert len(slide.levels) == 4  # 640x512 -> 320x256 -> 160x128 -> 80x64
        assert np.abs(slide.read_region(0, 0, 0, 640, 512).astype(int) - smooth).mean() < 2  # lossy, close


def test_bad_requests_are_one_line_and_nothing_is_left_behind(tmp_path: Path) -> None:
    mask = _mask(100, 80)
    target = tmp_path / "out.ome.tif"
    cases = [({"channels": 2}, "channels"), ({"tile": 100}, "tile"), ({"compression": "jpeg"}, "JPEG"),
             ({"resample": "cubic"}, "resample")]
    for options, what in cases:
        with pytest.raises(SegScopeError, match=what) as info:
            write_ome_tiff(target, mask, (100, 80), **options)  # type: ignore[arg-type]
        assert "\n" not in str(info.value)
    with pytest.raises(SegScopeError, match=r"needs uint8 of shape \(80, 100\)"):
        write_ome_tiff(target, mask.astype(np.uint16), (100, 80))

    def failing(x: int, y: int, w: int, h: int) -> np.ndarray:
        if y > 0:
            raise SegScopeError("the stitcher was cancelled")
        return mask[y:y + h, x:x + w]

    with pytest.raises(SegScopeError, match="cancelled"):
        write_ome_tiff(target, failing, (100, 80), tile=32)
    assert list(tmp_path.iterdir()) == []  # no partial file, no temporary level files
    write_ome_tiff(target, mask, (100, 80))
    with pytest.raises(SegScopeError, match="already exists"):
        write_ome_tiff(target, mask, (100, 80))
    write_ome_tiff(target, np.zeros_like(mask), (100, 80), overwrite=True)
    assert tifffile.imread(target).max() == 0
