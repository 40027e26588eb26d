"""The host's input cache: a repeat remote eval sends only content keys and gives the same numbers; a changed
file, a damaged entry or `--no-cache` sends the bytes again (real sshd on loopback, real worker)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from segscope.core.backends.base import InferenceRequest, InferenceResult
from segscope.core.backends.embedded import EmbeddedBackend
from segscope.core.cache import settings
from segscope.core.errors import SegScopeError
from segscope.core.remote.backend import RemoteBackend
from segscope.core.remote.host_cache import STRAY_AGE_S, InputCache
from segscope.core.roi import Roi

from .sshd import Sshd
from .test_cli_remote import BARE_HOST_PYTHON
from .test_crop_upload import textured_png
from helpers import run_cli

#: A textured 400x300 slide's crops (inside; at the edge, clipped), the whole image, a JPEG and a BMP file.
ROIS = [Roi(40, 30, 300, 220), Roi(250, 100, 400, 300)]
#: More than an INFER of a key alone (its metadata), far less than the smallest image here.
KEY_ONLY_BYTES = 400


def slide_requests() -> list[InferenceRequest]:
    png = textured_png(400, 300, seed=11)
    jpeg = textured_png(400, 300, seed=12, ext=".jpg")
    bmp = textured_png(200, 150, seed=13, ext=".bmp")
    return [InferenceRequest(png, roi) for roi in ROIS] + [InferenceRequest(png, None), InferenceRequest(jpeg, ROIS[0]),
                                                          InferenceRequest(bmp, None)]


@pytest.fixture
def remote(tiny_model_project, sshd: Sshd, ssh_options, worker_options, tmp_path: Path) -> Iterator[
        Callable[[], RemoteBackend]]:
    """Opens remote backends that share one remote cache folder of this test's (the host's input cache in it)."""
    options = {**worker_options, "cache_dir": str(tmp_path / "host-cache"), "probabilities": "float32"}
    opened: list[RemoteBackend] = []

    def open_one() -> RemoteBackend:
        opened.append(RemoteBackend(tiny_model_project.pipeline, sshd.target, ssh_options, **options))
        return opened[-1]

    yield open_one
    for backend in opened:
        backend.close()


def run(backend: RemoteBackend, requests: list[InferenceRequest]) -> tuple[list[InferenceResult], int]:
    """The results of `requests` in a fresh session of `backend`'s, and the bytes sent to the host for them."""
    results = [backend.infer(requests[0].image, requests[0].roi)]  # (starts the session: its HELLO)
    assert backend.session is not None
    before = backend.session.bytes_sent
    results += list(backend.infer_many(requests[1:]))
    return results, backend.session.bytes_sent - before


def host_entries(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "host-cache" / "inputs").glob("*.entry"))


def assert_same(got: list[InferenceResult], expected: list[InferenceResult]) -> None:
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert a.roi == b.roi and a.image_size == b.image_size
        np.testing.assert_array_equal(a.probabilities, b.probabilities)
        np.testing.assert_array_equal(a.argmax, b.argmax)


@pytest.mark.ssh
def test_a_repeat_sends_only_keys_and_gives_identical_results(tiny_model_project, remote, tmp_path: Path) -> None:
    requests = slide_requests()
    with EmbeddedBackend(tiny_model_project.pipeline) as local:
        expected = [local.infer(r.image, r.roi) for r in requests]
    with remote() as first:
        results, sent_first = run(first, requests)
        assert (first.keyed_requests, first.host_cache_hits) == (len(requests), 0)
    assert_same(results, expected)
    assert len(host_entries(tmp_path)) == 5  # the two crops, the whole PNG, the JPEG, the BMP
    assert sent_first > sum(len(r.image) for r in requests[3:])  # type: ignore[arg-type]  # the JPEG and BMP, whole
    with remote() as second:
        results, sent = run(second, requests)
        note = second.cache_note()
    assert_same(results, expected)
    assert sent < KEY_ONLY_BYTES * (len(requests) - 1)
    assert note is not None and note.startswith(f"{len(requests)} of {len(requests)} images came from the host's "
                                                "input cache") and "nothing uploaded" in note


@pytest.mark.ssh
def test_a_file_changed_in_place_is_sent_again_and_scored_fresh(tiny_model_project, remote, tmp_path: Path) -> None:
    """One byte of a BMP (its whole file travels) and one pixel of a stored PNG (its crop travels), each file's
    size and time kept: a changed file has another key."""
    image = np.random.default_rng(3).integers(0, 256, (150, 200, 3), dtype=np.uint8)
    bmp, stored_png = tmp_path / "slide.bmp", tmp_path / "slide.png"
    assert cv2.imwrite(str(bmp), image) and cv2.imwrite(str(stored_png), image, [cv2.IMWRITE_PNG_COMPRESSION, 0])
    requests = [InferenceRequest(bmp, None), InferenceRequest(stored_png, Roi(10, 10, 120, 100))]
    with remote() as first:
        run(first, requests)
    for path, pixel, flags in ((bmp, (0, -1, 2), []), (stored_png, (20, 30, 1), [cv2.IMWRITE_PNG_COMPRESSION, 0])):
        changed = image.copy()  # BMP: the top-right pixel's red, the file's last byte (rows run bottom-up)
        changed[pixel] = 255 - image[pixel]  # PNG: a pixel inside the crop
        before = path.stat()
        data = cv2.imencode(path.suffix, changed, flags)[1].tobytes()
        assert len(data) == before.st_size
        path.write_bytes(data)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert path.stat().st_mtime_ns == before.st_mtime_ns and path.stat().st_size == before.st_size
    assert sum(a != b for a, b in zip(bmp.read_bytes(), cv2.imencode(".bmp", image)[1].tobytes())) == 1
    with remote() as second:
        results, sent = run(second, requests[::-1])
        assert second.host_cache_hits == 0
    assert sent > bmp.stat().st_size  # the BMP went whole (the PNG's crop first, outside `sent`)
    with EmbeddedBackend(tiny_model_project.pipeline) as local:
        assert_same(results, [local.infer(r.image, r.roi) for r in requests[::-1]])
        stale = [local.infer(cv2.imencode(path.suffix, image)[1].tobytes(), r.roi)
                 for path, r in zip((stored_png, bmp), requests[::-1])]
    for fresh, old in zip(results, stale):
        assert not np.array_equal(fresh.probabilities, old.probabilities)


@pytest.mark.ssh
def test_a_damaged_or_cut_short_host_entry_is_a_miss(tiny_model_project, remote, tmp_path: Path) -> None:
    requests = slide_requests()[:3]
    with remote() as first:
        expected, _ = run(first, requests)
    entries = host_entries(tmp_path)
    assert len(entries) == 3
    whole = [p.read_bytes() for p in entries]
    entries[0].write_bytes(whole[0][: len(whole[0]) // 2])  # cut short, as a full disk would leave it
    flipped = bytearray(whole[1])
    flipped[-100] ^= 1  # one bit of the payload
    entries[1].write_bytes(bytes(flipped))
    with remote() as second:
        assert_same(run(second, requests)[0], expected)
        assert second.host_cache_hits <= 1  # the first damaged entry is asked for by key: a miss, sent again
    assert [p.read_bytes() for p in entries] == whole  # stored again, whole
    with remote() as third:
        assert_same(run(third, requests)[0], expected)
        assert third.host_cache_hits == 3


@pytest.mark.ssh
def test_no_cache_sends_every_image_as_before(remote, tmp_path: Path) -> None:
    settings.configure(enabled=False)  # what --no-cache configures
    requests = slide_requests()
    for _ in range(2):
        with remote() as backend:
            _, sent = run(backend, requests)
            assert backend.keyed_requests == 0 and backend.cache_note() is None
    assert sent > sum(len(r.image) for r in requests[2:])  # type: ignore[arg-type]  # the files, whole
    assert not (tmp_path / "host-cache" / "inputs").exists()


@pytest.mark.ssh
def test_the_cli_says_what_came_from_the_host_cache(sshd: Sshd, ssh_home: Path, tiny_model_project, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture) -> None:
    dataset = tmp_path / "dataset"
    for item in ("1", "2", "3"):
        (dataset / item).mkdir(parents=True)
        (dataset / item / "image.png").write_bytes(textured_png(400, 300, seed=int(item)))
        assert cv2.imwrite(str(dataset / item / "mask.png"), (np.arange(300 * 400).reshape(300, 400) % 7 == 0)
                           .astype(np.uint8))
    common = ["eval", "--dataset", dataset, "--pipeline", tiny_model_project.pipeline, "--roi", "40,30,300,220"]
    host_python = BARE_HOST_PYTHON or sys.executable  # CI: a bare 3.9 host keeps the cache with NumPy alone
    remote = [*common, "--remote", "ascend", "--remote-python", host_python, "--remote-cache",
              tmp_path / "host-cache", "--accept-new-host-key"]
    code, local = run_cli(*common)
    assert code == 0
    lines = []
    for extra in ([], [], ["--no-cache"]):
        capsys.readouterr()
        code, out = run_cli(*remote, *extra)
        assert code == 0 and out == local  # every per-image line and the means, digit for digit
        lines.append([line for line in capsys.readouterr().err.splitlines() if "host's input cache" in line])
    assert [len(found) for found in lines] == [1, 1, 0]
    assert "0 of 3 images came from the host's input cache" in lines[0][0]
    assert "3 of 3 images came from the host's input cache" in lines[1][0]



# -- the store on the host, on its own ---------------------------------------------------------------------------

def test_the_host_cache_stays_under_its_cap_evicting_the_least_recently_used(tmp_path: Path) -> None:
    pixels = [np.full((100, 100, 3), i, np.uint8) for i in range(5)]  # 30,000 bytes each, plus a header
    cache = InputCache(tmp_path, 125_000)  # room for four (an entry may take a quarter of the cap)
    for i, image in enumerate(pixels[:4]):
        cache.put(f"k{i}", image)
        os.utime(cache._path(f"k{i}"), (1000 + i, 1000 + i))  # stored one after another
    found = cache.get("k0")  # used again: now the most recent
    assert found is not None and found.flags.writeable
    np.testing.assert_array_equal(found, pixels[0])
    cache.put("k4", pixels[4])
    assert [cache.holds(f"k{i}") for i in range(5)] == [True, False, True, True, True]  # k1: the least recent
    assert sum(p.stat().st_size for p in tmp_path.iterdir()) <= 125_000
    cache.put("big", bytes(31_251))  # over a quarter of the cap: not kept
    assert not cache.holds("big") and cache.get("k2") is not None
    cache.put("file", b"\x89PNG not decoded")
    assert cache.get("file") == b"\x89PNG not decoded" and cache.get("absent") is None


def test_an_entry_under_another_key_or_an_old_interrupted_write_is_never_read(tmp_path: Path) -> None:
    cache = InputCache(tmp_path, 1 << 20)
    cache.put("a", b"bytes of a")
    os.replace(cache._path("a"), cache._path("b"))  # a's entry where b's would be
    assert cache.get("b") is None and not cache.holds("b")  # refused, and removed
    old, fresh = tmp_path / "x.entry.1234.part", tmp_path / "y.entry.5678.part"
    for part in (old, fresh):
        part.write_bytes(b"half an entry")
    os.utime(old, (0, 0))
    InputCache(tmp_path, 1 << 20)
    assert not old.exists() and fresh.exists()  # a write may still be going on in another worker
    assert STRAY_AGE_S >= 60


@pytest.mark.ssh
def test_a_bad_image_asked_for_by_the_host_fails_in_its_place(remote) -> None:
    """A PNG cut short (its header whole): its key goes first; its crop fails only when the host asks for it,
    then the host drops that request and serves on."""
    good, roi = textured_png(120, 90, seed=7), Roi(10, 10, 100, 80)
    truncated = good[:200]
    with remote() as backend:
        backend.infer(good, roi)  # kept on the host: the batch below sends keys alone from its first hit on
        results = backend.infer_many([InferenceRequest(good, roi), InferenceRequest(truncated, roi),
                                      InferenceRequest(good, roi)])
        assert next(results).roi == roi
        with pytest.raises(SegScopeError, match="<image bytes>: not a readable image"):
            next(results)
        assert backend.infer(good, roi).roi == roi
        assert (backend.keyed_requests, backend.host_cache_hits) == (3, 2) and not backend.session.dead
