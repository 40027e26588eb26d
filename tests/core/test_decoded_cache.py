"""The decoded-input cache: a hit is bit-identical to a decode, a changed file never hits, a damaged or cut
short entry is a miss, the store stays under its cap; decoding only the rows an ROI needs changes no pixel."""

from __future__ import annotations

import json
import logging
import os
import signal
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.cache import settings
from segscope.core.cache.decoded import IMAGE, TRUTH, image_region, read_truth
from segscope.core.cache.store import STRAY_AGE_S, SWEPT_NAME, EntryStore
from segscope.core.dataset.dataset import Dataset
from segscope.core.errors import SegScopeError
from segscope.core.evaluate import evaluate_dataset
from segscope.core.files.fileio import decode_box, decode_image
from segscope.core.files.png import decode as png_decode
from segscope.core.files.png import top_rows as png_top_rows
from segscope.core.roi import Roi

EXPAND = {"leftExpandRatio": "0.1", "rightExpandRatio": "0.25", "upExpandRatio": "0.05", "downExpandRatio": "0.3"}
ROIS = [Roi(40, 30, 300, 220), Roi(250, 100, 400, 300), Roi(0, 0, 90, 70)]


def noise(height: int, width: int, channels: int | None = 3, dtype: type = np.uint8, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (height, width) if channels is None else (height, width, channels)
    return rng.integers(0, np.iinfo(dtype).max, shape, dtype=dtype, endpoint=True)


def png(array: np.ndarray, *params: int) -> bytes:
    ok, buf = cv2.imencode(".png", array, list(params))
    assert ok
    return buf.tobytes()


def store() -> EntryStore:
    found = settings.decoded_store()
    assert found is not None
    return found


# -- decoding only what an ROI needs, faster, the same pixels ----------------------------------------------------

def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def handmade_png(rows: np.ndarray, colour: int, extra: list[bytes] = (), interlace: int = 0) -> bytes:  # type: ignore[assignment]
    """A PNG written here from the specification: 8-bit samples, filter 0 on every row."""
    height, width = rows.shape[:2]
    header = struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, interlace)
    raw = b"".join(b"\x00" + row.tobytes() for row in rows)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + b"".join(extra) + \
        _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b"")


VARIANTS = {
    "bgr": lambda: png(noise(240, 130)), "bgra": lambda: png(noise(240, 130, 4)),
    "gray": lambda: png(noise(240, 130, None)), "gray16": lambda: png(noise(240, 130, None, np.uint16)),
    "bgr16": lambda: png(noise(240, 130, 3, np.uint16)),
    "level9": lambda: png(noise(240, 130), cv2.IMWRITE_PNG_COMPRESSION, 9),
    "palette": lambda: handmade_png(noise(240, 130, None) % 7, 3, [_chunk(b"PLTE", bytes(range(21)))]),
    "rgb+trns": lambda: handmade_png(noise(240, 130), 2, [_chunk(b"tRNS", b"\x00\x01\x00\x02\x00\x03")]),
    "gray+alpha": lambda: handmade_png(noise(240, 130, 2), 4),
}
BOXES = [None, Roi(0, 0, 130, 1), Roi(17, 40, 99, 97), Roi(0, 200, 130, 240)]


@pytest.mark.parametrize("kind", sorted(VARIANTS))
def test_a_png_decoded_alone_or_to_a_box_gives_opencvs_pixels(kind: str) -> None:
    data = VARIANTS[kind]()
    for flags in (cv2.IMREAD_COLOR, cv2.IMREAD_UNCHANGED):
        whole = cv2.imdecode(np.frombuffer(data, np.uint8), flags)  # OpenCV itself, the file whole
        for box in BOXES:
            if box is not None:
                part = cv2.imdecode(np.frombuffer(png_top_rows(data, box.y1) or data, np.uint8), flags)
                np.testing.assert_array_equal(part[: box.y1], whole[: box.y1])
            fast = png_decode(data, flags, box.as_tuple() if box else None)
            if kind in ("bgr", "bgra", "gray", "level9"):  # libpng through imagecodecs
                expected = whole if box is None else whole[box.y0 : box.y1, box.x0 : box.x1]
                np.testing.assert_array_equal(fast, expected)
                assert fast.dtype == expected.dtype and fast.flags.c_contiguous
            else:
                assert fast is None  # a conversion OpenCV makes: OpenCV decodes it
    expected = decode_image(data)
    for box in BOXES[1:]:
        np.testing.assert_array_equal(decode_box(data, "p.png", box), expected[box.y0 : box.y1, box.x0 : box.x1])


def test_only_plain_pngs_are_shortened_and_a_damaged_or_cut_file_is_still_refused() -> None:
    data = png(noise(200, 100))
    assert png_top_rows(data, 200) is None and png_top_rows(data, 0) is None  # nothing to leave out
    damaged_header = data[:20] + bytes([data[20] ^ 1]) + data[21:]
    assert png_top_rows(damaged_header, 50) is None  # its checksum is wrong: decoded as is, and refused
    assert png_top_rows(cv2.imencode(".jpg", noise(40, 40))[1].tobytes(), 10) is None
    interlaced = handmade_png(noise(60, 50), 2, interlace=1)
    assert png_top_rows(interlaced, 10) is None
    box = Roi(0, 0, 100, 10)
    for cut in (len(data) * 9 // 10, len(data) - 20, len(data) - 3):  # within the rows left out, or in its end
        with pytest.raises(SegScopeError, match="damaged or truncated"):
            decode_box(data[:cut], "cut.png", box)
    flipped = bytearray(data)
    flipped[60] ^= 0x40  # inside the first image data chunk: its checksum no longer matches
    with pytest.raises(SegScopeError, match="damaged or truncated"):
        decode_box(bytes(flipped), "flipped.png", box)


_ORIENTATION_6 = b"II*\x00" + struct.pack("<IHHHII", 8, 1, 0x0112, 3, 1, 6) + struct.pack("<I", 0)  # EXIF: turn 90


def turned(kind: str, image: np.ndarray) -> bytes:
    """`image` as a JPEG or PNG whose EXIF orientation (6) OpenCV applies: the decoded image is turned."""
    if kind == "jpeg":
        data = cv2.imencode(".jpg", image)[1].tobytes()
        app1 = b"Exif\x00\x00" + _ORIENTATION_6
        return data[:2] + b"\xff\xe1" + struct.pack(">H", len(app1) + 2) + app1 + data[2:]
    data = png(image)
    return data[:33] + _chunk(b"eXIf", _ORIENTATION_6) + data[33:]


@pytest.mark.parametrize("kind", ["jpeg", "png"])
def test_an_image_the_decoder_turns_is_decoded_whole_as_before(tiny_model_project, tmp_path, kind) -> None:
    image = noise(200, 300)
    data = turned(kind, image)
    assert cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR).shape == (300, 200, 3)  # turned
    assert decode_box(data, "t", Roi(10, 10, 150, 120)) is None
    path = tmp_path / f"turned.{kind}"
    path.write_bytes(data)
    with EmbeddedBackend(tiny_model_project.pipeline) as backend:
        for roi in (Roi(10, 10, 150, 120), Roi(20, 150, 190, 290), None):
            whole = backend.prepare(data, roi)  # bytes: the whole decode, as before the cache
            from_file = backend.prepare(path, roi)
            np.testing.assert_array_equal(from_file.tensor, whole.tensor)
            assert (from_file.box, from_file.image_size) == (whole.box, whole.image_size)
    mask = tmp_path / "mask.png"
    mask.write_bytes(turned("png", noise(200, 300, None)))
    expected = cv2.imdecode(np.fromfile(str(mask), np.uint8), cv2.IMREAD_UNCHANGED)  # masks are read unturned
    np.testing.assert_array_equal(read_truth(mask).whole(), expected)


# -- a hit is a decode ---------------------------------------------------------------------------------------

def _edit(props: dict[str, str]):  # type: ignore[no-untyped-def]
    def edit(data: dict) -> None:
        data["unet_mindspore"]["mxpi_imagecrop0"]["props"].update(props)
    return edit


@pytest.mark.parametrize("expand", [False, True])
def test_prepared_from_the_cache_is_bit_identical_to_the_whole_decode(tiny_model_project, tmp_path, expand) -> None:
    pipeline = tiny_model_project.write_pipeline("p.pipeline", _edit(EXPAND if expand else {}))
    path = tmp_path / "slide.png"
    path.write_bytes(png(noise(300, 400)))
    rois = [*ROIS, None]
    with EmbeddedBackend(pipeline) as backend:
        wholes = [backend.prepare(path.read_bytes(), roi) for roi in rois]  # bytes: decoded whole, then cropped
        missed = [backend.prepare(path, roi) for roi in rois]
        assert store().use()[IMAGE] == (0, 4)
        mark = store().mark()
        hits = [backend.prepare(path, roi) for roi in rois]
        assert store().use(mark)[IMAGE] == (4, 4)
    for whole, *cached in zip(wholes, missed, hits):
        for prepared in cached:
            np.testing.assert_array_equal(prepared.tensor, whole.tensor)
            assert (prepared.box, prepared.image_size, prepared.crop_size) == \
                (whole.box, whole.image_size, whole.crop_size)


def test_eval_numbers_are_identical_cold_warm_and_without_the_cache(tiny_model_project, small_dataset) -> None:
    def run() -> list[object]:
        with EmbeddedBackend(tiny_model_project.pipeline) as backend:
            return [repr(e.metrics) for e in evaluate_dataset(backend, Dataset.open(small_dataset), Roi(5, 4, 60, 40))]

    cold, warm = run(), run()
    settings.configure(enabled=False)
    assert settings.decoded_store() is None
    off = run()
    assert cold == warm == off and len(cold) == 4
    settings.configure()
    assert store().use()[TRUTH] == (0, 3)  # three masks, decoded by the first run (and read by the second)


@pytest.mark.parametrize("kind", ["binary255", "binary01", "empty", "classes", "gray", "sixteen", "odd", "colour"])
def test_a_truth_mask_from_the_cache_is_the_files_values_and_counts(tmp_path: Path, kind: str) -> None:
    rng = np.random.default_rng(5)
    values = {"binary255": rng.choice([0, 255], (90, 70)), "binary01": rng.choice([0, 1], (90, 70)),
              "empty": np.zeros((90, 70)), "classes": rng.integers(0, 4, (90, 70)),
              "gray": rng.integers(0, 256, (90, 70)), "sixteen": rng.choice([0, 65535], (90, 70)),
              "odd": rng.choice([0, 300, 65535], (90, 70)), "colour": rng.choice([0, 255], (90, 70, 3))}[kind]
    path = tmp_path / "mask.png"
    path.write_bytes(png(values.astype(np.uint16 if kind in ("sixteen", "odd") else np.uint8)))
    if kind in ("odd", "colour"):  # no mask convention: refused every time, nothing stored
        for _ in range(2):
            with pytest.raises(SegScopeError, match="mask"):
                read_truth(path)
        assert store().use() == {TRUTH: (0, 1)}
        return
    # By hand from OpenCV's decode: a 0/65535 mask is read as 0/255.
    decoded = cv2.imdecode(np.fromfile(str(path), np.uint8), cv2.IMREAD_UNCHANGED)
    expected = np.where(decoded > 0, 255, 0).astype(np.uint8) if kind == "sixteen" else decoded
    counted = np.bincount(expected.ravel(), minlength=256)
    np.testing.assert_array_equal(read_truth(path).counts, counted)  # decoded and stored
    for _ in range(2):
        read = read_truth(path)
        found = read.whole()
        np.testing.assert_array_equal(found, expected)
        assert found.dtype == np.uint8 and found.flags.c_contiguous
        assert read.size == (70, 90)
        # a region is unpacked alone: boxes starting and ending inside a byte of packed bits, and the edges
        for box in (Roi(0, 0, 70, 90), Roi(3, 5, 4, 6), Roi(7, 0, 9, 90), Roi(13, 40, 70, 41), Roi(8, 8, 64, 80)):
            np.testing.assert_array_equal(read.region(box), expected[box.y0 : box.y1, box.x0 : box.x1])
    np.testing.assert_array_equal(read_truth(path).counts, counted)
    assert store().use(1)[TRUTH] == (1, 1)  # one entry for the file: every later read a hit


# -- a changed file is never served ----------------------------------------------------------------------------

def test_a_file_changed_in_place_with_its_size_and_time_kept_is_decoded_again(tmp_path: Path) -> None:
    path = tmp_path / "slide.bmp"  # BMP: no checksum, so one byte changed is still a valid image
    image = noise(40, 48)  # rows of 144 bytes: no padding, the file ends with the top row's last pixel
    assert cv2.imwrite(str(path), image)
    box = Roi(0, 0, 48, 40)
    first = image_region(path.read_bytes(), str(path), box)
    before = path.stat()
    with open(path, "r+b") as f:  # the last byte: the top-right pixel's red (BMP rows run bottom-up)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([255 - image[0, -1, 2]]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    second = image_region(path.read_bytes(), str(path), box)
    assert second[0, -1, 2] == 255 - image[0, -1, 2] and first[0, -1, 2] == image[0, -1, 2]
    np.testing.assert_array_equal(second[1:], image[1:])
    assert store().use()[IMAGE] == (0, 2)


def test_a_truncated_or_replaced_image_is_never_served(tiny_model_project, tmp_path: Path) -> None:
    path = tmp_path / "slide.png"
    data = png(noise(300, 400))
    path.write_bytes(data)
    with EmbeddedBackend(tiny_model_project.pipeline) as backend:
        backend.prepare(path, ROIS[0])  # stored
        stat = path.stat()
        path.write_bytes(data[: len(data) // 2])
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        with pytest.raises(SegScopeError, match="damaged or truncated"):
            backend.prepare(path, ROIS[0])
        other = noise(300, 400, seed=9)
        replacement = tmp_path / "new.png"
        replacement.write_bytes(png(other))
        os.replace(replacement, path)  # another file (inode) at the same path
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        replaced = backend.prepare(path, ROIS[0])
        np.testing.assert_array_equal(replaced.tensor, backend.prepare(png(other), ROIS[0]).tensor)


# -- damaged entries, killed writers, the cap ----------------------------------------------------------------

def _entry_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.val"))


def test_a_damaged_or_cut_short_entry_is_a_miss_and_the_numbers_stay_right(tiny_model_project, small_dataset,
                                                                            private_cache, caplog) -> None:
    def run() -> list[str]:
        with EmbeddedBackend(tiny_model_project.pipeline) as backend:
            return [repr((e.metrics, e.result.probabilities.tobytes()))
                    for e in evaluate_dataset(backend, Dataset.open(small_dataset), Roi(5, 4, 60, 40))]

    reference = run()
    files = _entry_files(private_cache / settings.DECODED)
    assert len(files) == 7  # 4 images, 3 masks
    for index, path in enumerate(files):
        data = bytearray(path.read_bytes())
        if index % 2:
            data[-1] ^= 0x10  # one bit of a pixel or a mask word flipped
        else:
            del data[len(data) // 2 :]  # cut short, as by a kill after the index was written
        path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        assert run() == reference
    assert "damaged entry" in caplog.text
    mark = store().mark()
    assert run() == reference and store().use(mark) == {IMAGE: (4, 4), TRUTH: (3, 3)}  # stored anew, then hit


_KILLED_WRITER = """
import os, signal, sys
import numpy as np
import diskcache.core
from segscope.core.cache.store import EntryStore

real_open = open
class Half:
    def __init__(self, f): self.f = f
    def __enter__(self): return self
    def __exit__(self, *a): self.f.close()
    def write(self, chunk):
        self.f.write(chunk[: len(chunk) // 2]); self.f.flush()
        os.kill(os.getpid(), signal.SIGKILL)  # killed in the middle of writing the entry
def killing_open(path, mode="r", *args, **kwargs):
    f = real_open(path, mode, *args, **kwargs)
    return Half(f) if str(path).endswith(".val") and "x" in mode else f
diskcache.core.open = killing_open
store = EntryStore(sys.argv[1], 1 << 30)
store.put("k", [np.arange(1 << 20, dtype=np.uint8)], {})
"""


def test_a_writer_killed_midway_leaves_no_entry(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    done = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(folder)], capture_output=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    stray = _entry_files(folder)
    assert len(stray) == 1 and stray[0].stat().st_size < 1 << 20  # the half-written file is there
    entries = EntryStore(folder, 1 << 30)
    try:
        assert entries.get("k", IMAGE) is None  # a miss, not half an entry
        assert entries.info().stray_files == 1
        os.utime(stray[0], (0, 0))  # an hour old: the first store opened here an hour after the last look removes it
    finally:
        entries.close()
    EntryStore(folder, 1 << 30).close()
    assert stray[0].exists()  # (strays were looked for within the hour: not again, the folder is not walked)
    os.utime(folder / SWEPT_NAME, (time.time() - STRAY_AGE_S - 1,) * 2)
    entries = EntryStore(folder, 1 << 30)
    try:
        assert entries.info().stray_files == 0 and not stray[0].exists()
        assert entries.put("k", [np.arange(10, dtype=np.uint8)], {})
        found = entries.get("k", IMAGE)
        assert found is not None and found.arrays[0].tolist() == list(range(10))
    finally:
        entries.close()


def test_entries_an_hour_old_are_not_taken_for_strays(tmp_path: Path) -> None:
    """The look for interrupted writes compares the files in the store's nested folders with the names its index
    holds: entries of any age stay, and read back whole."""
    folder = tmp_path / "store"
    entries = EntryStore(folder, 1 << 30)
    try:
        for n in range(3):
            assert entries.put(f"k{n}", [np.full(1 << 17, n, np.uint8)], {})  # (each big enough to be a file)
    finally:
        entries.close()
    files = _entry_files(folder)
    assert len(files) == 3
    for path in [*files, folder / SWEPT_NAME]:
        os.utime(path, (time.time() - STRAY_AGE_S - 1,) * 2)
    entries = EntryStore(folder, 1 << 30)
    try:
        assert all(path.exists() for path in files) and entries.info().stray_files == 0
        for n in range(3):
            found = entries.get(f"k{n}", IMAGE)
            assert found is not None and found.arrays[0].shape == (1 << 17,) and int(found.arrays[0][0]) == n
    finally:
        entries.close()


def test_the_store_stays_under_its_cap_evicting_the_least_recently_used(tmp_path: Path) -> None:
    cap = 8 << 20
    entries = EntryStore(tmp_path / "store", cap)
    try:
        one_mb = np.zeros(1 << 20, np.uint8)
        for i in range(30):
            assert entries.put(f"k{i}", [one_mb + (i % 200)], {"i": i})
            if i >= 1:
                assert entries.get("k0", IMAGE) is not None  # read after every write: the most recently used
            assert entries.info().bytes <= cap
        assert entries.get("k1", IMAGE) is None and entries.get("k29", IMAGE) is not None
        found = entries.get("k0", IMAGE)
        assert found is not None and found.meta == {"i": 0} and not found.arrays[0].any()
        assert not entries.put("big", [np.zeros(cap // 2, np.uint8)], {})  # over a quarter of the cap: not kept
        assert entries.info().entries < 8
    finally:
        entries.close()


def test_tests_never_use_the_users_cache(private_cache: Path) -> None:
    assert settings.current().folder == private_cache
    assert str(Path.home() / ".cache") not in str(store().folder)


# -- the command line ----------------------------------------------------------------------------------------

def test_images_with_the_same_content_are_said_to_share_one_entry(tiny_model_project, small_dataset,
                                                                   tmp_path: Path, capsys) -> None:
    import shutil

    from segscope.core.cli import main

    shutil.copytree(small_dataset / "1", small_dataset / "4")  # image 4 is image 1's copy: 5 images, 4 contents
    command = ["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline),
               "--cache-dir", str(tmp_path / "mine")]
    assert main(command) == 0 and main(command) == 0
    second = capsys.readouterr().err
    assert ("4 of 4 distinct images and 3 of 3 truth masks came from the decoded-input cache" in second
            and second.rstrip().endswith("the run read 5 images: 1 with the same content as another (one cache "
                                         "entry for both)"))


def test_eval_says_what_came_from_the_cache_and_cache_info_and_clear(tiny_model_project, small_dataset,
                                                                     tmp_path: Path, capsys) -> None:
    from segscope.core.cli import main

    folder = tmp_path / "mine"
    command = ["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline),
               "--cache-dir", str(folder)]
    assert main(command) == 0
    first = capsys.readouterr()
    assert main(command) == 0
    second = capsys.readouterr()
    assert first.out == second.out
    assert "0 of 4 images and 0 of 3 truth masks came from the decoded-input cache" in first.err
    assert f"4 of 4 images and 3 of 3 truth masks came from the decoded-input cache ({folder / 'decoded'})" \
        in second.err
    assert main(["cache", "info", "--json", "--cache-dir", str(folder)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["decoded"]["entries"] == 7 and 0 < info["decoded"]["bytes"] <= info["decoded"]["size_limit"]
    assert main(["cache", "clear", "--cache-dir", str(folder)]) == 0
    assert "removed 7 entries" in capsys.readouterr().out
    assert main(["eval", *command[1:], "--no-cache"]) == 0
    assert capsys.readouterr().out == first.out
    assert main(["cache", "info", "--json", "--cache-dir", str(folder)]) == 0
    assert json.loads(capsys.readouterr().out)["decoded"]["entries"] == 0  # --no-cache wrote nothing


def test_a_damaged_index_leaves_the_run_decoding_and_cache_clear_mends_it(tiny_model_project, small_dataset,
                                                                         private_cache, capsys) -> None:
    from segscope.core.cli import main

    command = ["eval", "--dataset", str(small_dataset), "--pipeline", str(tiny_model_project.pipeline)]

    def as_a_new_process() -> None:  # the store this process holds let go of (another folder's opened instead)
        settings.configure(private_cache / "elsewhere")
        settings.decoded_store()
        settings.configure()

    assert main(command) == 0
    reference = capsys.readouterr().out
    as_a_new_process()
    (private_cache / settings.DECODED / "cache.db").write_bytes(b"not a database at all" * 100)
    assert main(command) == 0
    damaged = capsys.readouterr()
    assert damaged.out == reference and "`segscope cache clear` empties a damaged" in damaged.err
    assert main(["cache", "clear"]) == 0
    capsys.readouterr()
    as_a_new_process()
    assert main(command) == 0 and main(command) == 0
    assert "4 of 4 images and 3 of 3 truth masks came from the decoded-input cache" in capsys.readouterr().err
