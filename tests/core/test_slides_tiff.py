"""The tifffile slide reader on generated tiled/pyramidal TIFFs: levels, region reads, colours, pixel size."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import cv2
import numpy as np
import pytest
import tifffile

from segscope.core.errors import SegScopeError
from segscope.core.slides import open_slide, slide_kind_for
from segscope.core.slides.synthetic import write_pyramidal_tiff
from segscope.core.slides.tiff_reader import TiffSlide, wants_tiff_reader

#: Boxes (x, y, w, h) inside one tile, across tile seams, at the right/bottom edge, and one pixel.
BOXES = [(3, 5, 40, 30), (200, 240, 130, 100), (0, 0, 1, 1)]


def _boxes(width: int, height: int) -> list[tuple[int, int, int, int]]:
    return [*BOXES, (width - 37, height - 21, 37, 21)]


@pytest.mark.parametrize("compression,subifds", [("jpeg", True), ("zlib", False), ("none", True)])
def test_pyramid_levels_and_regions_equal_whole_level_decodes(tmp_path: Path, compression: str,
                                                              subifds: bool) -> None:
    path = write_pyramidal_tiff(tmp_path / "slide.tif", (1500, 1000), tile=256, compression=compression,
                                subifds=subifds)
    with open_slide(path) as slide:
        assert slide.kind == "tiff"
        # 1500x1000 halved, rounding up, until one 256 tile holds it: 750x500, 375x250, 188x125
        assert [(lv.width, lv.height) for lv in slide.levels] == [(1500, 1000), (750, 500), (375, 250), (188, 125)]
        assert slide.levels[3].downsample == pytest.approx(1500 / 188)
        assert slide.pixel_size_um == pytest.approx((0.25, 0.25))
        opencv = cv2.imread(str(path), cv2.IMREAD_COLOR)  # level 0 as the stream's decoder reads the file
        for level, lv in enumerate(slide.levels):
            whole = tifffile.imread(path, series=0, level=level)[..., ::-1]  # RGB -> BGR by hand
            assert whole.shape[:2] == (lv.height, lv.width)
            for x, y, w, h in _boxes(lv.width, lv.height):
                if x + w > lv.width or y + h > lv.height:
                    continue
                region = slide.read_region(level, x, y, w, h)
                assert region.flags.c_contiguous
                np.testing.assert_array_equal(region, whole[y:y + h, x:x + w])
                if level == 0:
                    np.testing.assert_array_equal(region, opencv[y:y + h, x:x + w])
        with pytest.raises(SegScopeError, match="outside level 1"):
            slide.read_region(1, 700, 0, 51, 10)


def _write(path: Path, array: np.ndarray, **options) -> Path:  # type: ignore[no-untyped-def]
    tifffile.imwrite(path, array, tile=(64, 64), compression="zlib", **options)
    return path


COLOUR_CASES = {
    "gray8": (lambda rng: rng.integers(0, 256, (128, 192), dtype=np.uint8), {"photometric": "minisblack"}),
    "gray16": (lambda rng: rng.integers(0, 65536, (128, 192), dtype=np.uint16), {"photometric": "minisblack"}),
    "rgb16": (lambda rng: rng.integers(0, 65536, (128, 192, 3), dtype=np.uint16), {"photometric": "rgb"}),
    "rgba": (lambda rng: rng.integers(0, 256, (128, 192, 4), dtype=np.uint8),
             {"photometric": "rgb", "extrasamples": ["unassalpha"]}),
    "rgba-associated": (lambda rng: rng.integers(0, 256, (128, 192, 4), dtype=np.uint8),
                        {"photometric": "rgb", "extrasamples": ["assocalpha"]}),
    "rgb-planar": (lambda rng: rng.integers(0, 256, (3, 128, 192), dtype=np.uint8),
                   {"photometric": "rgb", "planarconfig": "separate"}),
}


@pytest.mark.parametrize("case", list(COLOUR_CASES))
def test_colours_and_depths_come_out_as_opencv_decodes_the_file(tmp_path: Path, case: str) -> None:
    # Whole tiles only: OpenCV 4.11 (Python 3.9's) reads 16-bit gray edge tiles as zeros.
    make, options = COLOUR_CASES[case]
    path = _write(tmp_path / f"{case}.tif", make(np.random.default_rng(2)), **options)
    expected = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert expected is not None and expected.dtype == np.uint8
    with open_slide(path) as slide:
        assert slide.kind == "tiff" and slide.size == (192, 128)
        np.testing.assert_array_equal(slide.read_region(0, 0, 0, 192, 128), expected)
        np.testing.assert_array_equal(slide.read_region(0, 60, 61, 70, 50), expected[61:111, 60:130])


def test_16_bit_scaling_by_hand(tmp_path: Path) -> None:
    gray = np.array([[0, 255, 256, 65535]], np.uint16)
    rgb = np.array([[[0, 128, 255], [65535, 32767, 383]]], np.uint16)
    with open_slide(_write(tmp_path / "g.tif", gray, photometric="minisblack")) as slide:
        assert slide.read_region(0, 0, 0, 4, 1)[0, :, 0].tolist() == [0, 0, 1, 255]  # the high byte
    with open_slide(_write(tmp_path / "c.tif", rgb, photometric="rgb")) as slide:
        # round(v * 255 / 65535), in BGR order
        assert slide.read_region(0, 0, 0, 2, 1)[0].tolist() == [[1, 0, 0], [1, 127, 255]]


def test_only_the_tiles_a_region_touches_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_pyramidal_tiff(tmp_path / "s.tif", (2048, 2048), tile=256, compression="zlib", levels=1)
    reads: list[int] = []
    original = TiffSlide._segment_bytes

    def counting(self, page, index):  # type: ignore[no-untyped-def]
        reads.append(index)
        return original(self, page, index)

    monkeypatch.setattr(TiffSlide, "_segment_bytes", counting)
    with open_slide(path) as slide:
        slide.read_region(0, 10, 10, 20, 20)
        assert reads == [0]
        reads.clear()
        slide.read_region(0, 250, 500, 10, 30)  # columns 0-1, rows 1-2 of an 8-tile-wide grid
        assert sorted(reads) == [8, 9, 16, 17]


def test_threads_read_regions_concurrently(tmp_path: Path) -> None:
    path = write_pyramidal_tiff(tmp_path / "s.tif", (1200, 900), tile=128, compression="jpeg", levels=2)
    whole = tifffile.imread(path)[..., ::-1]
    rng = np.random.default_rng(5)
    boxes = [(int(x), int(y), 100, 80) for x, y in zip(rng.integers(0, 1100, 64), rng.integers(0, 820, 64))]
    with open_slide(path) as slide, ThreadPoolExecutor(8) as pool:
        regions = list(pool.map(lambda b: slide.read_region(0, *b), boxes))
    for (x, y, w, h), region in zip(boxes, regions):
        np.testing.assert_array_equal(region, whole[y:y + h, x:x + w])


def test_which_reader_takes_a_tiff(tmp_path: Path) -> None:
    image = np.random.default_rng(1).integers(0, 256, (120, 160, 3), dtype=np.uint8)
    strips = tmp_path / "strips.tif"
    tifffile.imwrite(strips, image, photometric="rgb", rowsperstrip=16)
    tiled = _write(tmp_path / "tiled.tif", image, photometric="rgb")
    assert slide_kind_for(strips).name == "opencv" and slide_kind_for(tiled).name == "tiff"
    head = strips.read_bytes()[:4096]
    assert wants_tiff_reader(strips, head, max_pixels=160 * 120 - 1)  # too big to decode whole: read by strips
    with TiffSlide.open(strips) as slide:
        np.testing.assert_array_equal(slide.read_region(0, 5, 10, 150, 100), image[10:110, 5:155, ::-1])
    png = tmp_path / "x.png"
    assert cv2.imwrite(str(png), image)
    assert slide_kind_for(png).name == "opencv"


def test_pixel_size_from_ome_or_resolution_tags(tmp_path: Path) -> None:
    image = np.zeros((64, 64, 3), np.uint8)
    ome = tmp_path / "a.ome.tif"
    tifffile.imwrite(ome, image, tile=(32, 32), photometric="rgb", ome=True,
                     metadata={"PhysicalSizeX": 250, "PhysicalSizeXUnit": "nm", "PhysicalSizeY": 0.5})
    inch = _write(tmp_path / "inch.tif", image, photometric="rgb", resolution=(50800, 25400),
                  resolutionunit="INCH")
    bare = _write(tmp_path / "bare.tif", image, photometric="rgb")
    with open_slide(ome) as a, open_slide(inch) as b, open_slide(bare) as c:
        assert a.pixel_size_um == pytest.approx((0.25, 0.5))
        assert b.pixel_size_um == pytest.approx((0.5, 1.0))  # 25400 um per inch / pixels per inch
        assert c.pixel_size_um is None


def test_unreadable_samples_are_one_line(tmp_path: Path) -> None:
    floats = _write(tmp_path / "f.tif", np.zeros((64, 64), np.float32), photometric="minisblack")
    palette = _write(tmp_path / "p.tif", np.zeros((64, 64), np.uint8), photometric="palette",
                     colormap=np.zeros((3, 256), np.uint16))
    for path, what in ((floats, "float32"), (palette, "PALETTE")):
        with pytest.raises(SegScopeError, match=what) as info:
            TiffSlide.open(path)
        assert "\n" not in str(info.value) and path.name in str(info.value)
    broken = tmp_path / "broken.tif"
    broken.write_bytes(b"II*\x00" + b"\xff" * 40)
    with pytest.raises(SegScopeError, match="broken.tif") as info:
        TiffSlide.open(broken)
    assert "\n" not in str(info.value)


def test_the_generator_refuses_bad_options_in_one_line(tmp_path: Path) -> None:
    for options, what in (({"compression": "lzma"}, "compression"), ({"tile": 100}, "tile")):
        with pytest.raises(SegScopeError, match=what):
            write_pyramidal_tiff(tmp_path / "x.tif", (64, 64), **options)  # type: ignore[arg-type]
    assert not (tmp_path / "x.tif").exists()
