"""The session's results kept on disk, so reopening a dataset (even after a restart) restores its runs.

The newest result of each image is stored as `<dataset>/.segscope-session/<id>.npz` (probabilities, argmax,
ROI, image size, timings, backend), its newest whole-slide run as `slides/<id>.npz` (the stitched
probabilities, argmax, coverage and seams with the region, scale and tiling), each written atomically; the
folder is kept under `max_bytes` by dropping the oldest files (a run larger than that on its own is kept
for the session only, and said so). Metrics are not stored: they are re-scored on load against the masks on
disk, so a mask saved or edited elsewhere meanwhile can never leave an old number behind. `submit` and
`submit_slide` write in a background thread (compressing a result takes tens of milliseconds, a whole slide
seconds); `flush` waits for the writes, `take_errors` collects what failed.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import SegScopeError
from .fileio import atomic_write_bytes
from .result import InferenceResult
from .roi import Roi
from .tiled_eval import TiledEvaluation, TilePlan
from .tiling import Stitched

STORE_DIR_NAME = ".segscope-session"
#: About 70 results of a 960x960x2 model (npz-compressed they are usually much smaller).
DEFAULT_MAX_BYTES = 512 << 20


SLIDES_DIR_NAME = "slides"


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
        self._pending: list[Future[Path | None]] = []
        self._errors: list[str] = []

    def submit(self, image_id: str, result: InferenceResult) -> None:
        """`save` in the store's thread (results are never changed after a run, so no copy is needed)."""
        self._submit(self.save, image_id, result)

    def submit_slide(self, evaluation: TiledEvaluation) -> None:
        """`save_slide` in the store's thread (a stitched run is never changed after it finished)."""
        self._submit(self.save_slide, evaluation)

    def _submit(self, save: Callable[..., Path | None], *args: Any) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="segscope-session-store")
        self._pending = [f for f in self._pending if not f.done()]
        future = self._executor.submit(save, *args)
        future.add_done_callback(self._collect)
        self._pending.append(future)

    def _collect(self, future: Future[Path | None]) -> None:
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

    def save_slide(self, evaluation: TiledEvaluation) -> Path | None:
        """Store an image's newest whole-slide run (replacing its older one), then keep within `max_bytes`.
        A run whose arrays alone exceed `max_bytes` is not stored (SegScopeError: kept for the session)."""
        stitched, image_id = evaluation.stitched, evaluation.item.id
        if stitched.nbytes > self.max_bytes:
            raise SegScopeError(f"{image_id}: its whole-slide run ({stitched.nbytes / 1e6:,.0f} MB) is larger than "
                                f"the session folder's bound ({self.max_bytes / 1e6:,.0f} MB)")
        meta = {"id": image_id, "region": list(stitched.region.as_tuple()), "scale": stitched.scale,
                "slide_size": list(stitched.slide_size), "tiles": evaluation.tiles, "seconds": evaluation.seconds,
                "plan": asdict(evaluation.plan) if evaluation.plan is not None else {}}
        arrays: dict[str, Any] = {"probabilities": stitched.probabilities, "argmax": stitched.argmax,
                  "covered": np.packbits(stitched.covered, axis=-1)}
        if stitched.seams is not None:
            arrays["seams"] = stitched.seams
        buffer = io.BytesIO()
        np.savez_compressed(buffer, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), **arrays)
        path = atomic_write_bytes(self.slides_folder / _file_name(image_id), buffer.getvalue(), overwrite=True)
        self._trim(keep=path)
        return path

    def load_slides(self) -> tuple[list[StoredSlide], list[str]]:
        """Stored whole-slide runs, oldest first, and one line per file that could not be read (skipped)."""
        if not self.slides_folder.is_dir():
            return [], []
        stored, problems = [], []
        for path in sorted(self.slides_folder.glob("*.npz"), key=lambda p: p.stat().st_mtime_ns):
            try:
                stored.append(self._read_slide(path))
            except (OSError, ValueError, KeyError, TypeError, SegScopeError) as exc:
                problems.append(f"{path}: stored whole-slide run unreadable ({exc}); it is ignored")
        return stored, problems

    @staticmethod
    def _read_slide(path: Path) -> StoredSlide:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(bytes(data["meta"]).decode())
            probabilities = np.ascontiguousarray(data["probabilities"])
            height, width = probabilities.shape[:2]
            covered = np.unpackbits(data["covered"], axis=-1, count=width).astype(bool)
            seams = np.ascontiguousarray(data["seams"]) if "seams" in data else None
            stitched = Stitched(Roi(*(int(v) for v in meta["region"])), float(meta["scale"]),
                                (int(meta["slide_size"][0]), int(meta["slide_size"][1])), probabilities,
                                np.ascontiguousarray(data["argmax"]), seams, covered)
        if stitched.argmax.shape != (height, width) or covered.shape != (height, width):
            raise SegScopeError("its arrays do not have one size")
        plan = dict(meta["plan"])
        return StoredSlide(str(meta["id"]), stitched, int(meta["tiles"]), float(meta["seconds"]),
                           TilePlan(**{**plan, "tile": tuple(plan["tile"])}) if plan else None)

    def _trim(self, keep: Path) -> None:
        files = sorted([*self.folder.glob("*.npz"), *self.slides_folder.glob("*.npz")],
                       key=lambda p: p.stat().st_mtime_ns, reverse=True)
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
