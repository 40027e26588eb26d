"""Reading images like the MindX opencv decoder, safe writes, and ROI boxes."""

from __future__ import annotations

import struct

import cv2
import numpy as np
import pytest

from segscope.core.errors import SegScopeError
from segscope.core.files.fileio import (
    atomic_write_bytes,
    decode_image,
    image_header_size,
    image_size,
    read_image,
    read_mask,
    write_image,
)
from segscope.core.roi import Roi


def encoded(image: np.ndarray, suffix: str = ".png") -> bytes:
    ok, buf = cv2.imencode(suffix, image)
    assert ok
    return buf.tobytes()


@pytest.mark.parametrize("suffix", [".png", ".jpg", ".tif", ".bmp", ".webp", ".ppm", ".pgm"])
def test_header_sizes_without_decoding(suffix):
    image = np.zeros((30, 70, 3), np.uint8) if suffix != ".pgm" else np.zeros((30, 70), np.uint8)
    assert image_header_size(encoded(image, suffix)) == (70, 30)


def test_no_header_size_for_what_is_not_an_image():
    assert image_header_size(b"") is None
    assert image_header_size(b"just some text, long enough to look like a header" * 3) is None


def test_decompression_bomb_is_refused_from_the_header():
    data = bytearray(encoded(np.zeros((2, 2), np.uint8)))
    data[16:24] = struct.pack(">II", 100_000, 100_000)  # claims 10 gigapixels; never decoded
    with pytest.raises(SegScopeError) as info:
        decode_image(bytes(data), "bomb.png")
    assert str(info.value) == ("bomb.png: image is 100000x100000 = 10,000,000,000 pixels, over the limit of "
                               "400,000,000 (raise it with --max-pixels if the file is trusted)")


def test_gray_and_16_bit_images_become_8_bit_bgr(tmp_path, write_png):
    gray = np.array([[0, 100, 255]], np.uint8)
    path = write_png(tmp_path / "ünïcødé" / "gray.png", gray)
    image = read_image(path)
    assert image.shape == (1, 3, 3) and image.dtype == np.uint8
    np.testing.assert_array_equal(image, np.dstack([gray, gray, gray]))
    deep = write_png(tmp_path / "deep.png", np.array([[0, 257, 65535]], np.uint16))
    with pytest.raises(SegScopeError, match="16-bit mask values 257, 65535 are no mask convention"):
        read_mask(deep)  # never scaled to 8 bits by a guess
    assert image_size(path) == (3, 1)
    tif = write_png(tmp_path / "t.tif", np.zeros((4, 5, 3), np.uint8))
    assert image_size(tif) == (5, 4)


def test_unreadable_files(tmp_path):
    with pytest.raises(SegScopeError, match="file not found"):
        read_image(tmp_path / "absent.png")
    (tmp_path / "folder.png").mkdir()
    with pytest.raises(SegScopeError, match=r"folder\.png: is a folder, not a file"):
        read_image(tmp_path / "folder.png")


def test_atomic_write_refuses_a_folder_even_with_overwrite(tmp_path):
    folder = tmp_path / "out"
    (folder / "kept").mkdir(parents=True)
    for overwrite in (False, True):
        with pytest.raises(SegScopeError, match=r"out: is a folder; give the path of a file to write$"):
            atomic_write_bytes(folder, b"x", overwrite=overwrite)
    assert [p.name for p in folder.iterdir()] == ["kept"] and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_atomic_write_refuses_then_replaces(tmp_path):
    target = tmp_path / "sub" / "a.bin"
    atomic_write_bytes(target, b"one")
    with pytest.raises(SegScopeError, match=r"a\.bin: already exists \(use --overwrite to replace it\)"):
        atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"one"
    atomic_write_bytes(target, b"two", overwrite=True)
    assert target.read_bytes() == b"two"
    assert [p.name for p in target.parent.iterdir()] == ["a.bin"]
    write_image(tmp_path / "m.png", np.full((2, 3), 7, np.uint8))
    written = cv2.imread(str(tmp_path / "m.png"), cv2.IMREAD_UNCHANGED)
    np.testing.assert_array_equal(written, np.full((2, 3), 7))


def test_roi():
    roi = Roi.parse(" 10, 20 ,110,220")
    assert roi == Roi(10, 20, 110, 220) and (roi.width, roi.height) == (100, 200)
    assert str(roi) == "10,20,110,220" and roi.as_tuple() == (10, 20, 110, 220)
    assert roi.fits(110, 220) and not roi.fits(109, 220) and not roi.fits(110, 219)
    assert Roi.whole(64, 48) == Roi(0, 0, 64, 48)
    # Clamping moves the box inside the image and only shrinks it when it is larger than the image.
    assert Roi(90, 200, 130, 260).clamped(100, 240) == Roi(60, 180, 100, 240)
    assert Roi(0, 0, 500, 10).clamped(100, 240) == Roi(0, 0, 100, 10)
    for text in ("1,2,3", "1,2,3,x", "3,0,2,5", "0,4,5,4", "-1,0,5,5"):
        with pytest.raises(SegScopeError, match="^--roi: "):
            Roi.parse(text)
    with pytest.raises(SegScopeError, match="^sidecar: "):
        Roi.parse("1,2", field="sidecar")
