"""Every file the product reads: mask conventions, sizes from headers, and one line for every fault.

Permission faults are made real: when the suite runs as root (which reads anything), the command runs in a
child without the capabilities that let root ignore file permissions (`setpriv`), else as the user.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.errors import SegScopeError
from segscope.core.files import fileio
from segscope.core.files.fileio import decode_image, read_mask


def encoded(image: np.ndarray, suffix: str) -> bytes:
    ok, buf = cv2.imencode(suffix, image)
    assert ok
    return buf.tobytes()


# --- mask conventions -----------------------------------------------------------------------------------

LABELS = np.array([[0, 1, 1, 0], [0, 0, 1, 1]], np.uint8)  # what every binary convention below stores


@pytest.mark.parametrize("stored, suffix", [
    (LABELS * 255, ".png"), (LABELS, ".png"), (LABELS.astype(np.uint16), ".png"),
    (LABELS.astype(np.uint16) * 65535, ".png"), (LABELS.astype(np.uint16) * 255, ".tif"),
    (LABELS * 255, ".bmp"), (np.dstack([LABELS * 255] * 3), ".png"),
], ids=["0/255", "0/1", "16-bit 0/1", "16-bit 0/65535", "16-bit 0/255 tiff", "bmp", "gray as rgb"])
def test_binary_mask_conventions_read_the_same_classes(tmp_path, stored, suffix):
    from segscope.core.dataset.masks import mask_to_labels

    path = tmp_path / f"m{suffix}"
    path.write_bytes(encoded(stored, suffix))
    mask = read_mask(path)
    assert mask.dtype == np.uint8
    np.testing.assert_array_equal(mask_to_labels(mask, 2), LABELS)


def test_class_index_masks_keep_their_indices(tmp_path):
    from segscope.core.dataset.masks import mask_to_labels

    indices = np.array([[0, 1, 2], [3, 2, 1]], np.uint16)
    path = tmp_path / "classes.png"
    path.write_bytes(encoded(indices, ".png"))
    np.testing.assert_array_equal(mask_to_labels(read_mask(path), 4), indices)
    with pytest.raises(SegScopeError, match=r"values 0, 1, 2, 3 are not a mask convention for this 3-class model "
                                            r"\(3 not among class indices 0..2\)"):
        mask_to_labels(read_mask(path), 3)


def test_a_16_bit_binary_mask_scores_like_its_8_bit_twin(tiny_model_project, small_dataset):
    """The campaign's case: a 16-bit 0/1 mask was scaled to all zeros and scored hard Dice 0."""
    from segscope.core import cli

    def scores() -> list[float]:
        out = io.StringIO()
        assert cli.main(["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline),
                         "--json"], out) == 0
        return [row.get("foreground_dice") for row in json.loads(out.getvalue())["images"]]

    reference = scores()
    for item in ("1", "2", "10"):
        mask = cv2.imread(str(small_dataset / item / "mask.png"), cv2.IMREAD_GRAYSCALE)
        cv2.imwrite(str(small_dataset / item / "mask.png"), (mask > 0).astype(np.uint16))
    assert scores() == reference and min(v for v in reference if v is not None) > 0.5


def test_other_16_bit_values_and_colour_masks_are_refused(tmp_path):
    ramp = np.array([[0, 1000, 65535]], np.uint16)
    (tmp_path / "ramp.png").write_bytes(encoded(ramp, ".png"))
    with pytest.raises(SegScopeError, match=r"ramp.png: 16-bit mask values 1000, 65535 are no mask convention"):
        read_mask(tmp_path / "ramp.png")
    red = np.zeros((2, 2, 3), np.uint8)
    red[0, 0] = (0, 0, 255)
    (tmp_path / "red.png").write_bytes(encoded(red, ".png"))
    with pytest.raises(SegScopeError, match=r"red.png: a colour mask \(its channels differ\)"):
        read_mask(tmp_path / "red.png")


# --- sizes from headers, before decoding --------------------------------------------------------------


def tiff_claiming(width: int, height: int) -> bytes:
    """A small real TIFF whose first directory is patched to claim `width` x `height`."""
    data = bytearray(encoded(np.zeros((2, 2), np.uint8), ".tif"))
    order = "<" if data[:2] == b"II" else ">"
    offset = struct.unpack(order + "I", data[4:8])[0]
    count = struct.unpack(order + "H", data[offset : offset + 2])[0]
    for k in range(count):
        at = offset + 2 + 12 * k
        tag, kind = struct.unpack(order + "HH", data[at : at + 4])
        if tag in (256, 257):
            value = width if tag == 256 else height
            data[at + 2 : at + 4] = struct.pack(order + "H", 4)  # LONG
            data[at + 8 : at + 12] = struct.pack(order + "I", value)
    return bytes(data)


def png_claiming(width: int, height: int) -> bytes:
    data = bytearray(encoded(np.zeros((2, 2), np.uint8), ".png"))
    data[16:24] = struct.pack(">II", width, height)
    return bytes(data)


def bmp_claiming(width: int, height: int) -> bytes:
    data = bytearray(encoded(np.zeros((2, 2), np.uint8), ".bmp"))
    data[18:26] = struct.pack("<ii", width, height)
    return bytes(data)


def pgm_claiming(width: int, height: int) -> bytes:
    return f"P5\n{width} {height}\n255\n".encode() + b"\0" * 16


@pytest.mark.parametrize("make", [png_claiming, tiff_claiming, bmp_claiming, pgm_claiming])
def test_header_sizes_are_checked_before_decoding(monkeypatch, make):
    def no_decoding(*args):
        raise AssertionError("decoded although the header is over the limit")

    monkeypatch.setattr(cv2, "imdecode", no_decoding)
    with pytest.raises(SegScopeError, match=r"bomb\.png: image is 30000x30000 = 900,000,000 pixels"):
        decode_image(make(30000, 30000), "bomb.png")  # a TIFF (or BMP, PGM) named .png is judged as what it is


def test_a_file_of_no_known_format_is_not_decoded(monkeypatch):
    monkeypatch.setattr(cv2, "imdecode", lambda *a: pytest.fail("decoded"))
    with pytest.raises(SegScopeError, match="x.png: not a readable image"):
        decode_image(b"\x00\x00\x00\x0cjP  \r\n\x87\n" + b"\0" * 64, "x.png")  # JPEG 2000: no size checked here


# --- one line for every fault of every file read ------------------------------------------------------


def run_cli(args: list[str], drop_privileges: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "segscope.core.cli", *args]
    if drop_privileges and os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: a permission error cannot be made real")
        command = [setpriv, "--inh-caps=-all", "--bounding-set=-dac_override,-dac_read_search", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


def assert_refused(done: subprocess.CompletedProcess, *parts: object) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("segscope: error: "), done.stderr
    for part in parts:
        assert str(part) in done.stderr, done.stderr


def replace_with_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def make_unreadable(path: Path) -> None:
    os.chmod(path, 0)


FAULTS = {
    "folder": (replace_with_folder, "is a folder"),
    "unreadable": (make_unreadable, "cannot read (Permission denied)"),
    "absurd header": (lambda p: p.write_bytes(tiff_claiming(30000, 30000)), "30000x30000"),
    "damaged": (lambda p: p.write_bytes(p.read_bytes()[:80] + b"\xff" * 64), "not a readable image"),
}


@pytest.mark.parametrize("which", ["image.png", "mask.png"])
@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_of_an_image_or_mask_is_one_line(tiny_model_project, small_dataset, which, fault):
    target = small_dataset / "2" / which
    change, expected = FAULTS[fault]
    change(target)
    done = run_cli(["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline)],
                   drop_privileges=fault == "unreadable")
    assert_refused(done, target, expected)


SIDECAR_FAULTS = {
    "folder": (lambda p: p.mkdir(), "is a folder"),
    "unreadable": (lambda p: (p.write_text("{}"), os.chmod(p, 0)), "cannot read (Permission denied)"),
    "not UTF-8": (lambda p: p.write_bytes(b'{"rois": {"1": "\xff"}}'), "not UTF-8"),
    "a list": (lambda p: p.write_text("[1, 2]"), "expected {"),
    "rois a string": (lambda p: p.write_text('{"rois": "1,2,3,4"}'), "expected {"),
    "roi of booleans": (lambda p: p.write_text('{"rois": {"1": [true, 0, 10, 10]}}'), "rois.1"),
    "roi of floats": (lambda p: p.write_text('{"rois": {"1": [0.5, 0, 10, 10]}}'), "rois.1"),
    "deep nesting": (lambda p: p.write_text("[" * 100000 + "]" * 100000), "segscope.json"),
    "default_roi a number": (lambda p: p.write_text('{"default_roi": 7}'), "default_roi"),
}


@pytest.mark.parametrize("fault", list(SIDECAR_FAULTS))
def test_each_fault_of_the_roi_sidecar_is_one_line(tiny_model_project, small_dataset, fault):
    sidecar = small_dataset / "segscope.json"
    change, expected = SIDECAR_FAULTS[fault]
    change(sidecar)
    done = run_cli(["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline)],
                   drop_privileges=fault == "unreadable")
    assert_refused(done, sidecar, expected)


NPY_FAULTS = {
    "folder": (replace_with_folder, "is a folder"),
    "unreadable": (make_unreadable, "cannot read (Permission denied)"),
    "truncated": (lambda p: p.write_bytes(p.read_bytes()[:-8]), "truncated"),
    "strings": (lambda p: np.save(p, np.array(["a", "b"])), "numeric tensor"),
    "bad header": (lambda p: p.write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': 1}    \n"), "header"),
}


@pytest.mark.parametrize("fault", list(NPY_FAULTS))
def test_each_fault_of_a_tensor_is_one_line(tmp_path, fault):
    good, bad = tmp_path / "good.npy", tmp_path / "bad.npy"
    np.save(good, np.ones((2, 3), np.float32))
    np.save(bad, np.ones((2, 3), np.float32))
    change, expected = NPY_FAULTS[fault]
    change(bad)
    assert_refused(run_cli(["compare", str(good), str(bad)], drop_privileges=fault == "unreadable"), bad, expected)


@pytest.mark.parametrize("damage", ["png", "tiff", "jpeg"])
def test_library_noise_stays_off_the_terminal(tiny_model_project, small_dataset, damage):
    """libpng's `libpng error:` and OpenCV's `[ WARN ]`/`[ERROR]` lines would precede SegScope's line."""
    broken = small_dataset / "2" / "image.png"
    image = cv2.imread(str(broken))
    if damage == "png":
        data = bytearray(broken.read_bytes())
        at = data.find(b"IDAT") + 10
        data[at : at + 40] = b"x" * 40
    elif damage == "tiff":
        data = bytearray(encoded(image, ".tif")[:200])
    else:
        data = bytearray(encoded(image, ".jpg")[:300])
    broken.write_bytes(bytes(data))
    done = run_cli(["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline)])
    assert_refused(done, broken, "not a readable image")


def test_the_stderr_capture_passes_other_lines_on(capfd):
    with fileio.native_stderr_captured():
        os.write(2, b"libpng error: IDAT: invalid stored block lengths\n")
        os.write(2, b"a line of someone else's\n")
    assert capfd.readouterr().err == "a line of someone else's\n"
