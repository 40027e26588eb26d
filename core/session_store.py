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
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import SegScopeError
from .fileio import atomic_write_bytes
from .result import InferenceResult
from .roi import Roi

STORE_DIR_NAME = ".segscope-session"
#: About 70 results of a 960x960x2 model (npz-compressed they are usually much smaller).
DEFAULT_MAX_BYTES = 512 << 20


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
        files = sorted(self.folder.glob("*.npz"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        total = 0
        for path in files:
            total += path.stat().st_size
            if total > self.max_bytes and path != keep:
                path.unlink(missing_ok=True)

    def load(self) -> tuple[list[StoredResult], list[str]]:
        """Stored results, oldest first, and one line per file that could not be read (it is skipped)."""
        if not self.folder.is_dir():
            return [], []
        stored, problems = [], []
        for path in sorted(self.folder.glob("*.npz"), key=lambda p: p.stat().st_mtime_ns):
            try:
                stored.append(self._read(path))
            except (OSError, ValueError, KeyError, SegScopeError) as exc:
                problems.append(f"{path}: stored result unreadable ({exc}); it is ignored")
        return stored, problems

    @staticmethod
    def _read(path: Path) -> StoredResult:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(bytes(data["meta"]).decode())
            roi = Roi(*(int(v) for v in meta["roi"]))
            width, height = (int(v) for v in meta["image_size"])
            timings = {str(k): float(v) for k, v in meta["timings"].items()}
            threshold = meta.get("threshold")
            result = InferenceResult(np.ascontiguousarray(data["probabilities"]), np.ascontiguousarray(data["argmax"]),
                                     roi, (width, height), timings, str(meta.get("backend", "")),
                                     None if threshold is None else float(threshold), str(meta.get("roi_note", "")))
        return StoredResult(str(meta["id"]), result)
