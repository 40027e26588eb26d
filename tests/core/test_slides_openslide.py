"""The OpenSlide reader: a generic tiled TIFF read by OpenSlide equals tifffile's reads; vendor detection."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tifffile

from segscope.core.errors import SegScopeError
from segscope.core.slides import open_slide, openslide_reader, slide_kind_for
from segscope.core.slides.openslide_reader import OpenSlideSlide
from segscope.core.slides.synthetic import write_pyramidal_tiff
from segscope.core.slides.tiff_reader import TiffSlide

pytest.importorskip("openslide", reason='OpenSlide is the optional extra: pip install "segscope[slides]"')


def test_openslide_reads_a_generic_tiled_tiff_as_tifffile_does(tmp_path: Path) -> None:
    # Reduced levels as top-level pages: the layout OpenSlide's generic TIFF driver reads.
    path = write_pyramidal_tiff(tmp_path / "slide.tif", (1500, 1000), tile=256, compression="jpeg", subifds=False)
    assert slide_kind_for(path).name == "tiff"  # a generic TIFF stays with tifffile
    with OpenSlideSlide.open(path) as opened, TiffSlide.open(path) as tiff:
        assert opened.kind == "openslide"
        assert [(lv.width, lv.height) for lv in opened.levels] == [(lv.width, lv.height) for lv in tiff.levels]
        assert opened.pixel_size_um == pytest.approx((0.25, 0.25)) == tiff.pixel_size_um
        for level in (0, 1, 2):  # downsamples 1, 2, 4 (level 3's is 1500/188, see the module doc)
            lv = opened.levels[level]
            for x, y, w, h in [(0, 0, 64, 48), (200, 150, 130, 90), (lv.width - 33, lv.height - 17, 33, 17)]:
                region = opened.read_region(level, x, y, w, h)
                assert region.dtype == np.uint8 and region.flags.c_contiguous
                np.testing.assert_array_equal(region, tiff.read_region(level, x, y, w, h))


def write_aperio(path: Path) -> Path:
    """A small slide OpenSlide's Aperio driver recognises: 768x512 and a 384x256 level, JPEG tiles."""
    image = np.random.default_rng(0).integers(0, 256, (512, 768, 3), dtype=np.uint8)
    header = "Aperio Image Library v12.0.0\n768x512 [0,0 768x512] (256x256) JPEG Q=70"
    with tifffile.TiffWriter(path) as writer:
        writer.write(image, tile=(256, 256), photometric="rgb", compression="jpeg", metadata=None,
                     description=f"{header}|AppMag = 20|MPP = 0.5")
        writer.write(image[::2, ::2], tile=(256, 256), photometric="rgb", compression="jpeg", metadata=None,
                     description=f"{header} -> 384x256")
    return path


def test_a_vendor_slide_goes_to_openslide(tmp_path: Path) -> None:
    path = write_aperio(tmp_path / "fake.svs")
    assert slide_kind_for(path).name == "openslide"
    with open_slide(path) as slide:
        assert slide.kind == "openslide" and slide.pixel_size_um == (0.5, 0.5)
        assert [(lv.width, lv.height, lv.downsample) for lv in slide.levels] == [(768, 512, 1.0), (384, 256, 2.0)]
        expected = tifffile.imread(path, key=1)[20:70, 10:110, ::-1]  # the page decoded whole, RGB -> BGR
        np.testing.assert_array_equal(slide.read_region(1, 10, 20, 100, 50), expected)


def test_without_openslide_only_its_own_formats_ask_for_the_extra(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openslide_reader, "_openslide", lambda: None)
    mrxs = tmp_path / "scan.mrxs"
    mrxs.write_bytes(b"not read without OpenSlide")
    assert slide_kind_for(mrxs).name == "openslide"
    with pytest.raises(SegScopeError, match=r'pip install "segscope\[slides\]"') as info:
        open_slide(mrxs)
    assert "\n" not in str(info.value) and "scan.mrxs" in str(info.value)
    tiff = write_pyramidal_tiff(tmp_path / "slide.svs", (300, 200), tile=64, compression="zlib", subifds=False)
    assert slide_kind_for(tiff).name == "tiff"  # TIFF-based vendor files: tifffile reads them meanwhile


def test_a_file_openslide_cannot_read_is_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken.mrxs"
    broken.write_bytes(b"[GENERAL]\nnothing here\n")
    with pytest.raises(SegScopeError, match="broken.mrxs") as info:
        OpenSlideSlide.open(broken)
    assert "\n" not in str(info.value)


def test_openslide_calls_from_several_threads_run_one_at_a_time(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads detecting, opening, reading and closing real slides at once (as the slide loader, the tile
    layer and a whole-slide run do): every call into the OpenSlide library is made alone, and each answer
    is right."""
    import openslide

    vendor_slide = write_aperio(tmp_path / "fake.svs")
    generic = write_pyramidal_tiff(tmp_path / "generic.tif", (600, 400), tile=256, compression="jpeg", subifds=False)
    expected = tifffile.imread(vendor_slide, key=1)[20:70, 10:110, ::-1]
    inside, most = [0], [0]
    guard = threading.Lock()

    def alone(call):  # the real OpenSlide call, counting how many run at once
        def counted(*args, **kwargs):
            with guard:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            try:
                time.sleep(0.002)  # let another thread in, were there no lock
                return call(*args, **kwargs)
            finally:
                with guard:
                    inside[0] -= 1
        return counted

    for name in ("detect_vendor", "open", "read_region", "close"):
        monkeypatch.setattr(openslide.lowlevel, name, alone(getattr(openslide.lowlevel, name)))
    failures: list[str] = []

    def work(index: int) -> None:
        for _ in range(8):
            if slide_kind_for(vendor_slide).name != "openslide" or slide_kind_for(generic).name != "tiff":
                failures.append(f"thread {index}: wrong kind")
            with open_slide(vendor_slide) as slide:
                if not np.array_equal(slide.read_region(1, 10, 20, 100, 50), expected):
                    failures.append(f"thread {index}: wrong pixels")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert most[0] == 1
