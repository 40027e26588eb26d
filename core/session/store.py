"""The session's results kept on disk, so reopening a dataset (even after a restart) restores its runs.

The newest result of each image is stored as `<dataset>/.segscope-session/<id>.npz` (probabilities, argmax,
ROI, image size, timings, backend), its newest whole-slide run as `slides/<id>.npz` (the stitched
probabilities, argmax, coverage and seams with the region, scale and tiling), each written atomically; the
folder is kept under `max_bytes` by dropping the oldest files; a whole-slide run larger than that on its own
is kept for the session only (`keeps`: the viewer says so when it plans the run) and its image's older stored
run is dropped, so reopening never brings back a run the user replaced. Metrics are not stored: they are
re-scored on load against the masks on disk, so a mask saved or edited elsewhere meanwhile can never leave an
old number behind. `submit` and `submit_slide` write in a background thread (a whole slide takes seconds to
compress); `flush` waits for the writes, `take_errors` collects what failed. A result is stored uncompressed: a
Run all writes one per image, and deflating a model's float32 output costs several times a small model's
inference (30 ms for a 128x128x2 output, saving a fifth of its bytes), CPU that the run needs; for the same reason
its file (the zip `np.savez` writes) is written by `_write_npz` in a few calls.
Stored files are read as untrusted (`read_stored`, `read_slide`): a damaged or hostile entry is skipped with
one line. Several viewers may share the store: each writes under a short lock, never removes another's write in
flight, and a run another viewer stored since this one read or wrote that image's file is replaced by the newer
run with a note (`take_notes`), not silently.

Results are written in batches: `submit` queues a result, and the store's thread writes what was queued as one
batch (`save_batch`: each file written and fsynced beside its place, then all moved into place under one hold of
the lock) at most once per `BATCH_SECONDS`: a result arriving after a quiet moment (one image's run) is written at
once, while a Run all of thousands of images takes the lock, counts and trims the folder once per batch, not once
per image. A crash (or a killed process) loses at most the results queued and not yet written: those of the last
`BATCH_SECONDS` of a run; every file stored stays whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import struct
import threading
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, TypeVar, cast

import numpy as np

from ..errors import InputError, SegScopeError, one_line
from ..files.fileio import clean_once, gone, publish, read_bytes, refuse_folder, remove_stale_temps, write_temp
from ..files.stamp import Stamp, short_lock
from ..files.untrusted_json import parse_json
from ..result import InferenceResult
from ..roi import Roi
from ..wholeslide.evaluate import TiledEvaluation, TilePlan
from ..wholeslide.tiling import Stitched

STORE_DIR_NAME = ".segscope-session"
SLIDES_DIR_NAME = "slides"
#: About 70 results of a 960x960x2 model.
DEFAULT_MAX_BYTES = 512 << 20
#: Once over its bound, the folder is trimmed to this share of it (so it is listed once per tenth of the bound).
TRIM_TO = 0.9
#: What one stored file may inflate to: an 8192 x 8192 model output of 3 classes and its argmax, or a
#: whole-slide run within the default bound.
MAX_INFLATED = 1 << 30
#: The least time between two batches of results written (`submit`): at most the results of this long a run are
#: lost when the viewer is killed.
BATCH_SECONDS = 0.5
#: Each stored kind's arrays: (dtype, number of dimensions); "seams" is optional in a slide.
_RESULT_ARRAYS: dict[str, tuple[Any, int]] = {"probabilities": (np.float32, 3), "argmax": (np.uint8, 2),
                                              "meta": (np.uint8, 1)}
_SLIDE_ARRAYS: dict[str, tuple[Any, int]] = {**_RESULT_ARRAYS, "covered": (np.uint8, 2), "seams": (np.float32, 2)}
_Stored = TypeVar("_Stored")
#: The zip records `_write_npz` writes (zipfile's layouts): a member's local header, its central directory entry,
#: the end of the central directory; and the DOS date stored for every member (1980-01-01: the files' own time is
#: what the store goes by).
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_CENTRAL_ENTRY = struct.Struct("<4s4B4HL2L5H2L")
_END_RECORD = struct.Struct("<4s4H2LH")
_DOS_DATE = 33
#: What a zip without ZIP64 records holds: its members' sizes and offsets are below this.
_ZIP32_BYTES = 0xFFFF_FFFF


@dataclass(frozen=True)
class StoredResult:
    image_id: str
    result: InferenceResult


@dataclass(frozen=True)
class StoredSlide:
    """A whole-slide run as stored: its stitched output and how it was made."""

    image_id: str
    stitched: Stitched
    tiles: int
    seconds: float
    plan: TilePlan | None


def _file_name(image_id: str) -> str:
    """A safe, unique file name for an id (ids are folder or file names; keep them readable)."""
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", image_id)[:60]
    return f"{readable}-{hashlib.sha256(image_id.encode()).hexdigest()[:8]}.npz"


class SessionStore:
    """Results of one dataset folder on disk; see the module docstring."""

    def __init__(self, dataset_root: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.folder = Path(dataset_root) / STORE_DIR_NAME
        self.slides_folder = self.folder / SLIDES_DIR_NAME
        self.max_bytes = max_bytes
        self._executor: ThreadPoolExecutor | None = None
        self._pending: set[Future[Path | None]] = set()  # writes not done yet (each removes itself when done)
        self._errors: list[str] = []
        self._usage: dict[str, int] | None = None  # the stored files, oldest first, and their sizes (`_trim`)
        self._used = 0
        self._known: dict[Path, Stamp] = {}  # each file as this store last read or wrote it (`_replace`)
        self._notes: list[str] = []
        self._queued: list[tuple[str, InferenceResult]] = []  # submitted, not yet taken by a batch
        self._queue_lock = threading.Lock()
        self._hurry = threading.Event()  # set while `flush` waits: a batch is written without waiting
        self._last_batch = -BATCH_SECONDS  # (`time.monotonic`) when the last batch was taken

    def submit(self, image_id: str, result: InferenceResult) -> None:
        """Store the result in the store's thread, in the next batch (`_save_queued`; results are never changed
        after a run, so no copy is needed)."""
        with self._queue_lock:
            self._queued.append((image_id, result))
            first = len(self._queued) == 1
        if first:
            self._submit(self._save_queued)

    def _save_queued(self) -> None:
        """Write the queued results as one batch: at once after `BATCH_SECONDS` without a write (a result of one
        image's run is stored as it arrives), else once that long has passed since the last batch (unless flushed),
        with those that arrived meanwhile (a Run all's)."""
        self._hurry.wait(self._last_batch + BATCH_SECONDS - time.monotonic())
        self._last_batch = time.monotonic()
        with self._queue_lock:
            queued, self._queued = self._queued, []
        if queued:
            self.save_batch(list(dict(queued).items()))  # (an image submitted twice: its newest)

    def submit_slide(self, evaluation: TiledEvaluation) -> None:
        """`save_slide` in the store's thread (a stitched run is never changed after it finished)."""
        self._submit(self.save_slide, evaluation)

    def _submit(self, save: Callable[..., Path | None], *args: Any) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="segscope-session-store")
        future = self._executor.submit(save, *args)
        self._pending.add(future)
        future.add_done_callback(self._collect)

    def _collect(self, future: Future[Path | None]) -> None:
        self._pending.discard(future)
        error = future.exception()
        if error is not None:
            self._errors.append(str(error))

    def take_errors(self) -> list[str]:
        """Messages of the writes that failed since the last call."""
        errors, self._errors = self._errors, []
        return errors

    def take_notes(self) -> list[str]:
        """What the writes since the last call replaced of another viewer's, one line each."""
        notes, self._notes = self._notes, []
        return notes

    def _replace(self, files: Sequence[tuple[Path, Callable[[BinaryIO], object], str]]) -> list[Path]:
        """Write each (path, what writes its bytes, image id) atomically: into a fsynced temporary file beside it
        (outside the lock: those files are this store's own), then all moved into place under one hold of the
        store's short lock. A file another viewer stored there since this store last read or wrote it is replaced
        by this newer run (the store keeps each image's newest), said in a note, never silently. A failure leaves
        the files not moved yet as they were."""
        try:
            self.folder.mkdir(exist_ok=True)
            for folder in {path.parent for path, _, _ in files}:
                folder.mkdir(exist_ok=True)
        except OSError as exc:
            raise SegScopeError(f"{self.folder}: cannot write here ({exc.strerror}); choose another folder") from None
        temps: list[Path] = []
        published = 0
        replaced: list[tuple[str, Stamp]] = []  # (image id, the other viewer's file)
        try:
            for path, write, _ in files:
                refuse_folder(path)
                clean_once(path.parent)
                temps.append(write_temp(path, write))
            with short_lock(self.folder, ".segscope-store.lock", "session store writer"):
                for (path, _, image_id), tmp in zip(files, temps):
                    now = Stamp.of(path)
                    known = self._known.get(path)
                    publish(tmp, path, overwrite=True)
                    published += 1
                    if known is not None and not now.missing and not known.same(now):
                        replaced.append((image_id, now))  # (a file not read yet: an earlier session's)
                    self._known[path] = Stamp.of(path)
        finally:
            for tmp in temps[published:]:  # (those moved into place are gone)
                tmp.unlink(missing_ok=True)
            if replaced:
                self._notes.append(_replaced_note(replaced, files[0][0].parent))
        return [path for path, _, _ in files]

    def flush(self) -> None:
        """Wait for every submitted write (the queued results written at once, not after `BATCH_SECONDS`)."""
        self._hurry.set()
        try:
            for future in list(self._pending):
                future.exception()
        finally:
            self._hurry.clear()

    def save(self, image_id: str, result: InferenceResult) -> Path:
        """Store the newest result of an image now (`save_batch` of one)."""
        return self.save_batch([(image_id, result)])[0]

    def save_batch(self, results: Sequence[tuple[str, InferenceResult]]) -> list[Path]:
        """Store the newest result of each image (replacing its older one; the ids distinct) as one write
        (`_replace`), then keep within `max_bytes`."""
        self._check_dataset()
        files = [(self.folder / _file_name(image_id), partial(_write_result, image_id, result), image_id)
                 for image_id, result in results]
        paths = self._replace(files)
        self._trim(keep=paths)
        return paths

    def _check_dataset(self) -> None:
        """A dataset folder renamed or removed since it was opened is not recreated by a store write."""
        error = gone(self.folder.parent, "results are kept for this session only")
        if error is not None:
            raise error

    def keeps(self, nbytes: int) -> bool:
        """Whether a whole-slide run whose arrays hold `nbytes` is stored (else it is kept for the session)."""
        return nbytes <= self.max_bytes

    def save_slide(self, evaluation: TiledEvaluation) -> Path | None:
        """Store an image's newest whole-slide run (replacing its older one), then keep within `max_bytes`.
        A run the store does not `keep` is not stored, and the image's older run is removed (None)."""
        stitched, image_id = evaluation.stitched, evaluation.item.id
        self._check_dataset()
        if not self.keeps(stitched.nbytes):
            (self.slides_folder / _file_name(image_id)).unlink(missing_ok=True)
            return None
        meta = {"id": image_id, "region": list(stitched.region.as_tuple()), "scale": stitched.scale,
                "slide_size": list(stitched.slide_size), "threshold": stitched.threshold, "tiles": evaluation.tiles,
                "seconds": evaluation.seconds, "plan": asdict(evaluation.plan) if evaluation.plan is not None else {}}
        arrays: dict[str, Any] = {"probabilities": stitched.probabilities, "argmax": stitched.argmax,
                                  "covered": np.packbits(stitched.covered, axis=-1)}
        if stitched.seams is not None:
            arrays["seams"] = stitched.seams
        packed = np.frombuffer(json.dumps(meta).encode(), np.uint8)
        paths = self._replace([(self.slides_folder / _file_name(image_id),
                                lambda file: np.savez_compressed(file, meta=packed, **arrays), image_id)])
        self._trim(keep=paths)
        return paths[0]

    def _trim(self, keep: Sequence[Path]) -> None:
        """Keep the folder under `max_bytes` after `keep` were written, dropping the oldest files. O(1) per file
        written: the store counts what it writes, and lists the folder only when that passes the bound (counting
        then what another viewer wrote or removed meanwhile), trimming to `TRIM_TO` of it so that listing stays
        rare."""
        usage = self._usage if self._usage is not None else self._list()
        for path in keep:
            size = self._known[path].size  # (as written: `_replace`)
            self._used += size - usage.pop(str(path), 0)
            usage[str(path)] = size  # the newest
        if self._used <= self.max_bytes:
            return
        usage, written = self._list(), {str(path) for path in keep}
        for name in list(usage):
            if self._used <= self.max_bytes * TRIM_TO:
                break
            if name not in written:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name)
                self._used -= usage.pop(name)
                self._known.pop(Path(name), None)

    def _list(self) -> dict[str, int]:
        """What the folder holds now (path: size), oldest first. (By `os.scandir` and strings: a full store holds
        thousands of files, listed on the store's thread while a Run all's and the window's threads wait for the
        interpreter lock.)"""
        files = []
        for folder in (self.folder, self.slides_folder):
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        if entry.name.endswith(".npz"):
                            with contextlib.suppress(FileNotFoundError):  # (another viewer's trim meanwhile)
                                files.append((entry.path, entry.stat(follow_symlinks=False)))
            except OSError:
                continue
        files.sort(key=lambda found: found[1].st_mtime_ns)
        self._usage = {path: found.st_size for path, found in files}
        self._used = sum(self._usage.values())
        return self._usage

    def results(self, first: Sequence[str] = ()) -> Iterator[StoredResult | str]:
        """Stored results, those of the images `first` first (the rows on screen), then the others oldest first,
        read one at a time as they are asked for (a store of thousands never sits in memory whole), and one line
        (a str) per entry that could not be read: it is skipped, since a stored result is only a cache of a run and
        nothing in this folder may stop a dataset from opening. Temporary files of writes a killed session left
        are removed (another viewer's write in flight is left alone)."""
        return _read_each(self.folder, read_stored, "stored result", self._known, first)

    def slides(self, first: Sequence[str] = ()) -> Iterator[StoredSlide | str]:
        """Stored whole-slide runs, as `results` gives results."""
        return _read_each(self.slides_folder, read_slide, "stored whole-slide run", self._known, first)


def _write_result(image_id: str, result: InferenceResult, file: BinaryIO) -> None:
    """A stored result's bytes (`read_stored` reads them), uncompressed (see the module docstring); its image's
    stamp as its fields (`vars`: `asdict` takes 30 times as long)."""
    meta = {"id": image_id, "roi": list(result.roi.as_tuple()), "image_size": list(result.image_size),
            "timings": result.timings, "backend": result.backend, "threshold": result.threshold,
            "roi_note": result.roi_note, **({"image": vars(result.image)} if result.image else {})}
    _write_npz(file, {"probabilities": result.probabilities, "argmax": result.argmax,
                      "meta": np.frombuffer(json.dumps(meta).encode(), np.uint8)})


def _npy_header(array: np.ndarray) -> bytes:
    """The .npy (version 1.0) header `np.save` writes before `array`'s bytes, by NumPy's own writer."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(array))
    return header.getvalue()


def _write_npz(file: BinaryIO, arrays: dict[str, Any]) -> None:
    """What `np.savez` writes (a zip of uncompressed .npy members, which `_read_arrays` and `np.load` read), in a
    few calls and without copying the arrays: the store's thread spent more of its interpreter time in zipfile's
    and NumPy's per-member writers than anywhere else (bench/bench_store.py). A file too large for a zip without
    ZIP64 records (`_ZIP32_BYTES`) is left to `np.savez`."""
    members = [(f"{name}.npy".encode(), _npy_header(array), array)
               for name, array in ((name, np.ascontiguousarray(array)) for name, array in arrays.items())]
    if sum(_LOCAL_HEADER.size + len(name) + len(header) + array.nbytes for name, header, array in members) \
            >= _ZIP32_BYTES:
        np.savez(file, **arrays)
        return
    entries, offset = [], 0
    for name, header, array in members:
        size, crc = len(header) + array.nbytes, zlib.crc32(array.data, zlib.crc32(header))  # (no copy: C-ordered)
        file.write(_LOCAL_HEADER.pack(b"PK\x03\x04", 20, 0, 0, 0, 0, _DOS_DATE, crc, size, size, len(name), 0)
                   + name + header)
        file.write(array.data)
        entries.append(_CENTRAL_ENTRY.pack(b"PK\x01\x02", 20, 3, 20, 0, 0, 0, 0, _DOS_DATE, crc, size, size,
                                           len(name), 0, 0, 0, 0, 0o600 << 16, offset) + name)
        offset += _LOCAL_HEADER.size + len(name) + size
    directory = b"".join(entries)
    file.write(directory + _END_RECORD.pack(b"PK\x05\x06", 0, 0, len(entries), len(entries), len(directory), offset,
                                            0))


def _replaced_note(replaced: Sequence[tuple[str, Stamp]], folder: Path) -> str:
    """One line for the runs of other viewers a batch replaced (a Run all beside another viewer's: one line a
    batch, not one an image)."""
    if len(replaced) == 1:
        image_id, stamp = replaced[0]
        when = time.strftime("%H:%M:%S", time.localtime(stamp.mtime_ns / 1e9))
        return f"{image_id}: the run another viewer stored at {when} is replaced in {folder} by this viewer's newer run"
    named = ", ".join(image_id for image_id, _ in replaced[:3]) + (", …" if len(replaced) > 3 else "")
    return (f"{len(replaced)} runs other viewers stored ({named}) are replaced in {folder} by this viewer's newer "
            "runs")


def _read_each(folder: Path, read: Callable[[Path], _Stored], what: str, known: dict[Path, Stamp],
               first: Sequence[str]) -> Iterator[_Stored | str]:
    """Each entry of `folder` read, the images `first` first (`known`: each file as it was read, for the store's
    later writes)."""
    try:
        entries = {p.name: (p, p.lstat().st_mtime_ns) for p in folder.iterdir() if p.name.endswith(".npz")}
    except OSError:
        return  # no store (or not a folder): nothing to restore
    remove_stale_temps(folder)  # (not another viewer's write in flight: `fileio.stale_temp`)
    ahead = [entries.pop(name) for name in dict.fromkeys(map(_file_name, first)) if name in entries]
    for path, _ in [*ahead, *sorted(entries.values(), key=lambda entry: entry[1])]:
        try:
            stamp = Stamp.of(path)  # (before the read: a write meanwhile is then seen as another viewer's)
            stored = read(path)
            known.setdefault(path, stamp)  # (not over a stamp of this store's own later write)
            yield stored
        except Exception as exc:  # noqa: BLE001 - any damage to a cache entry only skips it
            detail = exc.problem if isinstance(exc, InputError) else exc if isinstance(exc, SegScopeError) \
                else f"{type(exc).__name__}: {exc}"
            yield one_line(f"{path}: {what} not restored ({detail}); it is ignored")


def _array(archive: zipfile.ZipFile, name: str, dtype: type, ndim: int) -> np.ndarray:
    """One member of a stored result, its header checked before its data is inflated, then its data read into the
    array (the header parsed once: parsing it costs more than reading a small result's bytes)."""
    with archive.open(f"{name}.npy") as member:
        version = np.lib.format.read_magic(member)
        header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, found = header(member)
        if found != np.dtype(dtype) or len(shape) != ndim or fortran or 0 in shape:
            raise SegScopeError(f"{name} is {found} {shape}, not a {ndim}-D {np.dtype(dtype)} array")
        size, held = math.prod(shape) * found.itemsize, archive.getinfo(f"{name}.npy").file_size
        if size > held:
            raise SegScopeError(f"{name} is {found} {shape}: {size:,} bytes, more than the {held:,} it holds")
        array = np.empty(shape, found)
        if cast(io.BufferedIOBase, member).readinto(array.data.cast("B")) != size:  # (reads on to the size)
            raise SegScopeError(f"{name} holds fewer bytes than its {found} {shape}")
    return array


def _read_arrays(path: Path, kinds: dict[str, tuple[Any, int]], required: int) -> dict[str, Any]:
    """A stored file's arrays, read as untrusted: a regular file (no symlink) of at most `MAX_INFLATED`, a zip
    holding the first `required` arrays of `kinds` (and maybe the others) inflating to at most `MAX_INFLATED`,
    each array's type and shape checked before it is inflated; "meta" parsed as bounded JSON."""
    data = read_bytes(path, "stored result", MAX_INFLATED, follow_symlinks=False)
    names = [f"{name}.npy" for name in kinds]
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = {info.filename: info.file_size for info in archive.infolist()}
        if not set(names[:required]) <= set(members) <= set(names):
            raise SegScopeError(f"holds {sorted(members)}, not {names[:required]}")
        if sum(members.values()) > MAX_INFLATED:
            raise SegScopeError(f"inflates to {sum(members.values()):,} bytes, over the limit of {MAX_INFLATED:,}")
        arrays: dict[str, Any] = {name: _array(archive, name, *kinds[name]) for name in kinds
                                  if f"{name}.npy" in members}
    arrays["meta"] = parse_json(bytes(arrays["meta"]).decode("utf-8"), path)
    if not isinstance(arrays["meta"], dict):
        raise SegScopeError("its metadata is not a JSON object")
    _check_classes(arrays["probabilities"], arrays["argmax"])
    return arrays


def _check_classes(probabilities: np.ndarray, argmax: np.ndarray) -> None:
    if probabilities.shape[:2] != argmax.shape:
        raise SegScopeError(f"probabilities {probabilities.shape} and argmax {argmax.shape} differ in size")
    if not (probabilities.min() >= 0.0 and probabilities.max() <= 1.0) or argmax.max() >= probabilities.shape[2]:
        raise SegScopeError("its probabilities are not in [0, 1] (or NaN), or its argmax names a class it lacks")


def read_stored(path: Path) -> StoredResult:
    """One stored result (`_read_arrays`), every metadata field checked."""
    arrays = _read_arrays(path, _RESULT_ARRAYS, required=3)
    probabilities, argmax, meta = arrays["probabilities"], arrays["argmax"], arrays["meta"]
    box, size, timings = Roi(*_field(meta, "roi", 4)), _field(meta, "image_size", 2), meta.get("timings")
    if box.width <= 0 or box.height <= 0 or not box.fits(*size):
        raise SegScopeError(f"its ROI {box} does not lie in its {size[0]}x{size[1]} image")
    if not (isinstance(timings, dict) and all(type(v) in (int, float) for v in timings.values())
            and isinstance(meta.get("id"), str) and isinstance(meta.get("backend", ""), str)):
        raise SegScopeError("its metadata (id, timings, backend) is malformed")
    threshold, roi_note = _threshold(meta), meta.get("roi_note", "")
    if not isinstance(roi_note, str):
        raise SegScopeError("its metadata field roi_note is not a string")
    result = InferenceResult(probabilities, argmax, box, (size[0], size[1]),
                             {str(k): float(v) for k, v in timings.items()}, meta.get("backend", ""),
                             threshold, roi_note, _image(meta.get("image")))
    return StoredResult(meta["id"], result)


def read_slide(path: Path) -> StoredSlide:
    """One stored whole-slide run (`_read_arrays`), every metadata field checked."""
    arrays = _read_arrays(path, _SLIDE_ARRAYS, required=4)
    probabilities, meta, seams = arrays["probabilities"], arrays["meta"], arrays.get("seams")
    height, width = probabilities.shape[:2]
    if arrays["covered"].shape != (height, (width + 7) // 8) or (seams is not None and seams.shape != (height, width)):
        raise SegScopeError("its coverage or seams do not have its probabilities' size")
    covered = np.unpackbits(arrays["covered"], axis=-1, count=width).astype(bool)
    region, slide_size = Roi(*_field(meta, "region", 4)), _field(meta, "slide_size", 2)
    scale, tiles, seconds = meta.get("scale"), meta.get("tiles"), meta.get("seconds")
    if not (type(scale) in (int, float) and scale > 0 and type(tiles) is int and tiles >= 0
            and type(seconds) in (int, float) and isinstance(meta.get("id"), str)):
        raise SegScopeError("its metadata (id, scale, tiles, seconds) is malformed")
    if region.width <= 0 or region.height <= 0 or not region.fits(*slide_size):
        raise SegScopeError(f"its region {region} does not lie in its {slide_size[0]}x{slide_size[1]} slide")
    stitched = Stitched(region, float(scale), (slide_size[0], slide_size[1]), probabilities, arrays["argmax"], seams,
                        covered, _threshold(meta))
    return StoredSlide(meta["id"], stitched, tiles, float(seconds), _plan(meta.get("plan")))


def _image(image: object) -> Stamp | None:
    """The stored identity of the run's image file (none in results stored before it was kept)."""
    if image is None:
        return None
    if not (isinstance(image, dict) and set(image) == {"size", "mtime_ns", "inode", "sha256"}
            and all(type(image[k]) is int for k in ("size", "mtime_ns", "inode")) and isinstance(image["sha256"], str)):
        raise SegScopeError("its metadata field image is not a file's size, time, inode and SHA-256")
    return Stamp(image["size"], image["mtime_ns"], image["inode"], image["sha256"])


def _threshold(meta: dict[str, Any]) -> float | None:
    threshold = meta.get("threshold")
    if not (threshold is None or type(threshold) in (int, float)):
        raise SegScopeError("its metadata field threshold is not a number")
    return None if threshold is None else float(threshold)


def _plan(plan: object) -> TilePlan | None:
    """The stored tiling (an empty object: none), its fields those of `TilePlan`."""
    if plan == {}:
        return None
    tile = plan.get("tile") if isinstance(plan, dict) else None
    if not (isinstance(plan, dict) and isinstance(tile, list) and len(tile) == 2
            and all(type(v) is int and v > 0 for v in tile)):
        raise SegScopeError("its metadata field plan is not a tiling")
    fields: dict[str, Any] = {"margin": 0, **plan, "tile": (tile[0], tile[1])}  # stored before margins: none
    try:
        return TilePlan(**fields)
    except TypeError:  # a field TilePlan does not have
        raise SegScopeError("its metadata field plan is not a tiling") from None


def _field(meta: dict[str, object], key: str, count: int) -> list[int]:
    """`count` non-negative integers from the metadata."""
    value = meta.get(key)
    if not (isinstance(value, list) and len(value) == count and all(type(v) is int and v >= 0 for v in value)):
        raise SegScopeError(f"its metadata field {key} is not {count} non-negative integers")
    return value
