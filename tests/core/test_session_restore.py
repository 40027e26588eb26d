"""Session restore reads `.segscope-session/*.npz` as untrusted: a bad entry of any kind is skipped with one
line, the good ones are restored, and opening the dataset never fails, blocks or inflates past the bound."""

from __future__ import annotations

import io
import json
import os
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from segscope.core.dataset.dataset import Dataset
from segscope.core.result import InferenceResult
from segscope.core.roi import Roi
from segscope.core.session import restore
from segscope.core.session import store as session_store
from segscope.core.session.jobs import run_here
from segscope.core.session.restore import restored_entries
from segscope.core.session.session import Session
from segscope.core.session.store import STORE_DIR_NAME, SessionStore

from helpers import found_and_problems

W, H = 8, 6


def result() -> InferenceResult:
    p1 = np.zeros((H, W), np.float32)
    p1[:2, :2] = 1.0
    return InferenceResult(np.stack([1 - p1, p1], axis=-1), (p1 > 0.5).astype(np.uint8), Roi(0, 0, W, H), (W, H))


def npz(document: object = None, meta: bytes | None = None, **arrays: np.ndarray) -> bytes:
    """A store entry written here with NumPy alone (not by the code under test): `document` as its metadata's
    JSON, or `meta` as its raw bytes."""
    base = result()
    document = document or {"id": "b", "roi": [0, 0, W, H], "image_size": [W, H], "timings": {}, "backend": "x"}
    values = {"probabilities": base.probabilities, "argmax": base.argmax,
              "meta": np.frombuffer(meta if meta is not None else json.dumps(document).encode(), np.uint8)}
    values.update(arrays)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **values)
    return buffer.getvalue()


def lying_npz(shape: tuple[int, ...], data: bytes) -> bytes:
    """A store entry whose probabilities' header says `shape` (float32) over `data`, written here with zipfile."""
    base = result()
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, {"descr": "<f4", "fortran_order": False, "shape": shape})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("probabilities.npy", member.getvalue() + data)
        for name, array in (("argmax", base.argmax), ("meta", np.frombuffer(json.dumps(
                {"id": "b", "roi": [0, 0, W, H], "image_size": [W, H], "timings": {}}).encode(), np.uint8))):
            saved = io.BytesIO()
            np.save(saved, array)
            archive.writestr(f"{name}.npy", saved.getvalue())
    return buffer.getvalue()


def write(data: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(data)


def symlink_to_a_good_entry(path: Path) -> None:
    target = path.parent.parent / "elsewhere.npz"
    target.write_bytes(npz())
    path.symlink_to(target)


#: fault -> how the entry `b.npz` is damaged
FAULTS = {
    "empty": write(b""),
    "truncated": write(npz()[:200]),
    "not a zip": write(b"PK\x03\x04 garbage" * 10),
    "symbolic link": symlink_to_a_good_entry,
    "FIFO": lambda p: os.mkfifo(p),
    "folder": lambda p: p.mkdir(),
    "an extra member": write(npz(extra=np.zeros(3))),
    "object arrays": write(npz(probabilities=np.array([{"a": 1}], dtype=object))),
    "wrong dtype": write(npz(probabilities=result().probabilities.astype(np.float64))),
    "a header over its data": write(lying_npz((H, W, 2), result().probabilities.tobytes()[:-4])),
    "a header of 40 GB": write(lying_npz((100_000, 50_000, 2), result().probabilities.tobytes())),
    "argmax of another size": write(npz(argmax=np.zeros((H + 1, W), np.uint8))),
    "NaN probabilities": write(npz(probabilities=np.full((H, W, 2), np.nan, np.float32))),
    "argmax past the classes": write(npz(argmax=np.full((H, W), 7, np.uint8))),
    "metadata not JSON": write(npz(meta=b"{not json")),
    "metadata nested 100k deep": write(npz(meta=("[" * 100_000 + "]" * 100_000).encode())),
    "metadata Infinity": write(npz(meta=b'{"id": "b", "roi": [0, 0, Infinity, 6]}')),
    "ROI outside the image": write(npz({"id": "b", "roi": [0, 0, W + 5, H], "image_size": [W, H], "timings": {}})),
    "timings not numbers": write(npz({"id": "b", "roi": [0, 0, W, H], "image_size": [W, H], "timings": {"a": "x"}})),
}


@pytest.fixture
def dataset(tmp_path: Path, write_png) -> Dataset:
    truth = np.zeros((H, W), np.uint8)
    truth[:2, :2] = 255
    for name in ("a", "b"):
        write_png(tmp_path / "d" / name / "image.png", np.full((H, W, 3), 128, np.uint8))
        write_png(tmp_path / "d" / name / "mask.png", truth)
    return Dataset.open(tmp_path / "d")


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_bad_entry_is_skipped_with_one_line_and_the_rest_restored(dataset, fault):
    store = SessionStore(dataset.root)
    store.save("a", result())
    bad = store.folder / "b.npz"
    FAULTS[fault](bad)
    session = Session()
    messages = []
    session.events.message.connect(messages.append)
    run_here(session.open_dataset(dataset))  # never raises, never blocks
    notes = [m.text for m in messages if m.level == "warning"]
    assert session.metrics("a") is not None and session.metrics("b") is None
    assert len(notes) == 1 and str(bad) in notes[0]
    assert "\n" not in notes[0] and len(notes[0]) < 600


def test_an_entry_inflating_past_the_bound_is_skipped_before_it_is_inflated(dataset, monkeypatch):
    monkeypatch.setattr(session_store, "MAX_INFLATED", 1 << 20)
    store = SessionStore(dataset.root)
    store.folder.mkdir()
    big = np.zeros((512, 512, 2), np.float32)  # 2 MiB of zeros: a few kilobytes compressed
    (store.folder / "b.npz").write_bytes(npz(probabilities=big, argmax=np.zeros((512, 512), np.uint8)))
    assert (store.folder / "b.npz").stat().st_size < 50_000
    stored, problems = found_and_problems(store.results())
    assert stored == [] and len(problems) == 1 and "inflates to 2,359," in problems[0]


def test_temporary_files_of_a_killed_write_are_removed(dataset):
    store = SessionStore(dataset.root)
    store.save("a", result())
    debris = store.folder / ".a-12345678.npz.0123abcd.tmp"  # an earlier SegScope's name: no process id in it
    debris.write_bytes(b"half")
    recent = store.folder / ".b-12345678.npz.0123abcd.tmp"  # maybe a live writer of such a version: kept
    recent.write_bytes(b"half")
    day_ago = time.time() - 2 * 24 * 3600
    os.utime(debris, (day_ago, day_ago))
    stored, problems = found_and_problems(store.results())
    assert [s.image_id for s in stored] == ["a"] and problems == [] and not debris.exists() and recent.exists()


def test_a_store_that_is_a_file_restores_nothing(dataset):
    (dataset.root / STORE_DIR_NAME).write_text("not a folder")
    session = Session()
    messages = []
    session.events.message.connect(messages.append)
    run_here(session.open_dataset(dataset))
    assert [m.level for m in messages] == ["info"] and session.metrics("a") is None  # (opened: nothing else)


def slide_npz(document: dict[str, object] | None = None, **arrays: np.ndarray) -> bytes:
    """A stored whole-slide run written with NumPy alone: the 8 x 6 result stitched at scale 1 over the whole
    slide, its coverage packed 8 px a byte, a seams map."""
    base = result()
    meta = {"id": "b", "region": [0, 0, W, H], "scale": 1.0, "slide_size": [W, H], "threshold": None,
            "tiles": 4, "seconds": 1.5, "plan": {"tile": [4, 4], "overlap": 1}, **(document or {})}
    values = {"probabilities": base.probabilities, "argmax": base.argmax,
              "covered": np.packbits(np.ones((H, W), bool), axis=-1), "seams": np.zeros((H, W), np.float32),
              "meta": np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **values)
    return buffer.getvalue()


SLIDE_FAULTS = {
    "coverage of another size": slide_npz(covered=np.zeros((H, W), np.uint8)),
    "seams of another size": slide_npz(seams=np.zeros((H, W + 1), np.float32)),
    "object coverage": slide_npz(covered=np.array([[{"a": 1}]], dtype=object)),
    "region outside the slide": slide_npz({"region": [0, 0, W + 1, H]}),
    "scale zero": slide_npz({"scale": 0.0}),
    "plan not a tiling": slide_npz({"plan": {"tile": [4, "x"]}}),
    "plan with a field TilePlan lacks": slide_npz({"plan": {"tile": [4, 4], "colour": 1}}),
    "threshold a string": slide_npz({"threshold": "0.5"}),
}


@pytest.mark.parametrize("fault", list(SLIDE_FAULTS))
def test_a_bad_whole_slide_run_is_skipped_with_one_line(dataset, fault):
    store = SessionStore(dataset.root)
    store.slides_folder.mkdir(parents=True)
    (store.slides_folder / "a.npz").write_bytes(slide_npz({"id": "a"}))
    bad = store.slides_folder / "b.npz"
    bad.write_bytes(SLIDE_FAULTS[fault])
    slides, problems = found_and_problems(store.slides())
    assert [s.image_id for s in slides] == ["a"] and slides[0].plan is not None and slides[0].plan.overlap == 1
    assert slides[0].stitched.covered.all() and slides[0].stitched.covered.shape == (H, W)
    assert len(problems) == 1 and str(bad) in problems[0] and "\n" not in problems[0]


def test_a_whole_slide_run_stored_at_an_integer_scale_is_restored(dataset):
    """JSON writes 1.0 as 1.0 but another writer may write 1: both are the scale 1."""
    store = SessionStore(dataset.root)
    store.slides_folder.mkdir(parents=True)
    (store.slides_folder / "a.npz").write_bytes(slide_npz({"id": "a", "scale": 1}))
    slides, problems = found_and_problems(store.slides())
    assert problems == [] and [s.stitched.scale for s in slides] == [1.0]


def test_stored_results_are_read_one_at_a_time(tmp_path: Path) -> None:
    """The reader does not hold the store whole: an entry damaged after the first was read is found damaged."""
    store = SessionStore(tmp_path)
    for n, image_id in enumerate("abc"):
        path = store.save(image_id, result())
        os.utime(path, ns=(n * 10**9, n * 10**9))  # oldest first: a, b, c
    entries = store.results()
    first = next(entries)
    assert not isinstance(first, str) and first.image_id == "a"
    (store.folder / Path(store.save("b", result())).name).write_bytes(b"not a zip")  # b, after a was read
    rest = list(entries)
    assert [e.image_id for e in rest if not isinstance(e, str)] == ["c"]
    assert len([e for e in rest if isinstance(e, str) and "not restored" in e]) == 1


def test_the_rows_asked_first_are_read_first_then_the_others_oldest_first(tmp_path: Path) -> None:
    """Reopening restores the rows on screen before the rest: the images asked first come in the order asked (an id
    with nothing stored, or asked twice, changes nothing), then the others oldest first."""
    store = SessionStore(tmp_path)
    for n, image_id in enumerate(["a", "b/1", "c", "d", "e"]):
        path = store.save(image_id, result())
        os.utime(path, ns=(n * 10**9, n * 10**9))  # oldest first: a, b/1, c, d, e
    order = [e.image_id for e in store.results(["d", "none", "b/1", "d"]) if not isinstance(e, str)]
    assert order == ["d", "b/1", "a", "c", "e"]
    assert [e.image_id for e in store.results() if not isinstance(e, str)] == ["a", "b/1", "c", "d", "e"]


def test_a_reopen_restores_the_datasets_first_rows_first(dataset, monkeypatch) -> None:
    """The rows a dataset shows when it opens come back first: b (stored last) before a, then, past the first
    rows (here one), the rest oldest first."""
    store = SessionStore(dataset.root)
    for n, image_id in enumerate(["b", "a"]):  # a stored after b
        os.utime(store.save(image_id, result()), ns=(n * 10**9, n * 10**9))
    order = [r.image_id for r in restored_entries(store, dataset)]
    assert order == ["a", "b"]  # the dataset's order, whatever the age
    monkeypatch.setattr(restore, "FIRST_ROWS", 0)
    assert [r.image_id for r in restored_entries(store, dataset)] == ["b", "a"]  # then oldest first


def test_the_store_keeps_the_newest_files_within_its_bound_with_another_writers_files_counted(tmp_path) -> None:
    """Room for five and a half entries: when the store's own writes pass it (at six), the folder is listed and
    the oldest go until 90 % of the bound is left (four entries), another viewer's file counted and removed like
    any. By hand: image0, image1, the other's, image2..4; image5 is the store's sixth: of seven files image0,
    image1 and the other's go (image2..5 left); image6; image7 is the sixth again: image2 and image3 go; image8:
    image4..8 are left."""
    store = SessionStore(tmp_path)
    names = {}

    def save(image_id: str) -> Path:
        path = names[image_id] = store.save(image_id, result())
        time.sleep(0.02)  # distinct modification times (the filesystem's clock ticks in milliseconds)
        return path

    size = save("image0").stat().st_size  # every entry here has this size, within a few bytes
    store.max_bytes = int(5.5 * size)
    second = save("image1")
    other = store.folder / "written-by-another-viewer.npz"
    other.write_bytes(second.read_bytes())
    time.sleep(0.02)
    for n in range(2, 9):
        save(f"image{n}")
    assert {p.name for p in store.folder.glob("*.npz")} == {names[f"image{n}"].name for n in range(4, 9)}
