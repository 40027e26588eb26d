"""The session's results kept on disk, so reopening a dataset (even after a restart) restores its runs.

The newest result of each image is stored as `<dataset>/.segscope-session/<id>.npz` (probabilities, argmax,
ROI, image size, timings, backend), written atomically; the folder is kept under `max_bytes` by dropping the
oldest files. Metrics are not stored: they are re-scored on load against the masks on disk, so a mask saved
or edited elsewhere meanwhile can never leave an old number behind. `submit` writes in a background thread
(compressing a result takes tens of milliseconds); `flush` waits for the writes, `take_errors` collects
what failed.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import InputError, SegScopeError, one_line
from .fileio import TEMP_NAME, atomic_write_bytes, read_bytes
from .result import InferenceResult
from .roi import Roi
from .untrusted_json import parse_json

STORE_DIR_NAME = ".segscope-session"
#: About 70 results of a 960x960x2 model (npz-compressed they are usually much smaller).
DEFAULT_MAX_BYTES = 512 << 20
#: What one stored result may inflate to: an 8192 x 8192 model output of 3 classes, and its argmax.
MAX_INFLATED = 1 << 30
_MEMBERS = ("probabilities.npy", "argmax.npy", "meta.npy")


@dataclass(frozen=True)
class StoredResult:
    image_id: str
    result: InferenceResult


def _file_name(image_id: str) -> str:
    """A safe, unique file name for an id (ids are folder or file names; keep them readable)."""
    readable = re.sub(r"[^A-Za-z0-9._-]", "_", image_id)[:60]
    return f"{readable}-{hashlib.sha256(image_id.encode()).hexdigest()[:8]}.npz"


class SessionStore:
    """Results of one dataset folder on disk; see the module docstring."""

    def __init__(self, dataset_root: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.folder = Path(dataset_root) / STORE_DIR_NAME
        self.max_bytes = max_bytes
        self._executor: ThreadPoolExecutor | None = None
        self._pending: list[Future[Path]] = []
        self._errors: list[str] = []

    def submit(self, image_id: str, result: InferenceResult) -> None:
        """`save` in the store's thread (results are never changed after a run, so no copy is needed)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="segscope-session-store")
        self._pending = [f for f in self._pending if not f.done()]
        future = self._executor.submit(self.save, image_id, result)
        future.add_done_callback(self._collect)
        self._pending.append(future)

    def _collect(self, future: Future[Path]) -> None:
        error = future.exception()
        if error is not None:
            self._errors.append(str(error))

    def take_errors(self) -> list[str]:
        """Messages of the writes that failed since the last call."""
        errors, self._errors = self._errors, []
        return errors

    def flush(self) -> None:
        """Wait for every submitted write."""
        for future in self._pending:
            future.exception()
        self._pending = []

    def save(self, image_id: str, result: InferenceResult) -> Path:
        """Store the newest result of an image (replacing its older one), then keep within `max_bytes`."""
        meta = {"id": image_id, "roi": list(result.roi.as_tuple()), "image_size": list(result.image_size),
                "timings": result.timings, "backend": result.backend, "threshold": result.threshold,
                "roi_note": result.roi_note}
        buffer = io.BytesIO()
        np.savez_compressed(buffer, probabilities=result.probabilities, argmax=result.argmax,
                            meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
        path = atomic_write_bytes(self.folder / _file_name(image_id), buffer.getvalue(), overwrite=True)
        self._trim(keep=path)
        return path

    def _trim(self, keep: Path) -> None:
        files = sorted(self.folder.glob("*.npz"), key=lambda p: p.lstat().st_mtime_ns, reverse=True)
        total = 0
        for path in files:
            total += path.lstat().st_size
            if total > self.max_bytes and path != keep:
                path.unlink(missing_ok=True)

    def load(self) -> tuple[list[StoredResult], list[str]]:
        """Stored results, oldest first, and one line per entry that could not be read (it is skipped: a
        stored result is only a cache of a run, so nothing in this folder may stop a dataset from opening).
        Temporary files of writes a killed session left are removed."""
        try:
            entries = [(p, p.lstat().st_mtime_ns) for p in self.folder.iterdir() if p.name.endswith(".npz")]
            leftovers = [p for p in self.folder.iterdir() if TEMP_NAME.match(p.name) and p.is_file()]
        except OSError:
            return [], []  # no store (or not a folder): nothing to restore
        for path in leftovers:
            path.unlink(missing_ok=True)
        stored, problems = [], []
        for path, _ in sorted(entries, key=lambda entry: entry[1]):
            try:
                stored.append(read_stored(path))
            except Exception as exc:  # noqa: BLE001 - any damage to a cache entry only skips it
                detail = exc.problem if isinstance(exc, InputError) else exc if isinstance(exc, SegScopeError) \
                    else f"{type(exc).__name__}: {exc}"
                problems.append(one_line(f"{path}: stored result not restored ({detail}); it is ignored"))
        return stored, problems


def _array(archive: zipfile.ZipFile, name: str, dtype: type, ndim: int) -> np.ndarray:
    """One member of a stored result, its header checked before its data is inflated."""
    with archive.open(f"{name}.npy") as member:
        version = np.lib.format.read_magic(member)
        header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, found = header(member)
    if found != np.dtype(dtype) or len(shape) != ndim or fortran or 0 in shape:
        raise SegScopeError(f"{name} is {found} {shape}, not a {ndim}-D {np.dtype(dtype)} array")
    with archive.open(f"{name}.npy") as member:
        return np.ascontiguousarray(np.lib.format.read_array(member, allow_pickle=False))


def read_stored(path: Path) -> StoredResult:
    """One stored result, read as untrusted: a regular file (no symlink) of at most `MAX_INFLATED`, a zip of the
    three expected arrays inflating to at most `MAX_INFLATED`, each array's type and shape checked before
    it is inflated, the metadata bounded JSON with every field checked."""
    data = read_bytes(path, "stored result", MAX_INFLATED, follow_symlinks=False)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = {info.filename: info.file_size for info in archive.infolist()}
        if set(members) != set(_MEMBERS):
            raise SegScopeError(f"holds {sorted(members)}, not {list(_MEMBERS)}")
        if sum(members.values()) > MAX_INFLATED:
            raise SegScopeError(f"inflates to {sum(members.values()):,} bytes, over the limit of {MAX_INFLATED:,}")
        probabilities = _array(archive, "probabilities", np.float32, 3)
        argmax = _array(archive, "argmax", np.uint8, 2)
        meta = parse_json(bytes(_array(archive, "meta", np.uint8, 1)).decode("utf-8"), path)
    if probabilities.shape[:2] != argmax.shape:
        raise SegScopeError(f"probabilities {probabilities.shape} and argmax {argmax.shape} differ in size")
    if not (probabilities.min() >= 0.0 and probabilities.max() <= 1.0) or argmax.max() >= probabilities.shape[2]:
        raise SegScopeError("its probabilities are not in [0, 1] (or NaN), or its argmax names a class it lacks")
    if not isinstance(meta, dict):
        raise SegScopeError("its metadata is not a JSON object")
    box, size, timings = Roi(*_field(meta, "roi", 4)), _field(meta, "image_size", 2), meta.get("timings")
    if box.width <= 0 or box.height <= 0 or not box.fits(*size):
        raise SegScopeError(f"its ROI {box} does not lie in its {size[0]}x{size[1]} image")
    if not (isinstance(timings, dict) and all(type(v) in (int, float) for v in timings.values())
            and isinstance(meta.get("id"), str) and isinstance(meta.get("backend", ""), str)):
        raise SegScopeError("its metadata (id, timings, backend) is malformed")
    threshold, roi_note = meta.get("threshold"), meta.get("roi_note", "")
    if not ((threshold is None or type(threshold) in (int, float)) and isinstance(roi_note, str)):
        raise SegScopeError("its metadata (threshold, roi_note) is malformed")
    result = InferenceResult(probabilities, argmax, box, (size[0], size[1]),
                             {str(k): float(v) for k, v in timings.items()}, meta.get("backend", ""),
                             None if threshold is None else float(threshold), roi_note)
    return StoredResult(meta["id"], result)


def _field(meta: dict[str, object], key: str, count: int) -> list[int]:
    """`count` non-negative integers from the metadata."""
    value = meta.get(key)
    if not (isinstance(value, list) and len(value) == count and all(type(v) is int and v >= 0 for v in value)):
        raise SegScopeError(f"its metadata field {key} is not {count} non-negative integers")
    return value
