"""Several devices of one host behind one backend: `--devices 0,1,...`.

`DevicePool` wraps one opened backend per device (`device_pool` opens them). `infer_many` deals each image to
the first free device (the shared `base.read_ahead` keeps one image in flight per device) and gives the results
in request order; it counts, per device, the images run and the time spent on them, for the throughput and
utilisation report. What each kind opens per device is its module's `open_on_devices` (`core.backends.registry`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from ..errors import SegScopeError
from ..roi import Roi
from .base import Backend, ImageSource, InferenceRequest, InferenceResult, read_ahead

#: The most devices one `--devices` list may name (an Ascend server holds at most a few dozen chips).
MAX_DEVICES = 64


def parse_devices(text: str, what: str = "--devices") -> tuple[int, ...]:
    """'0,1,3' -> (0, 1, 3): device ids, non-negative, no duplicates, at least one."""
    parts = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not (part.isascii() and part.isdigit()) for part in parts):
        raise SegScopeError(f"{what}: expected comma-separated device ids such as 0,1,2,3, got {text!r}")
    ids = tuple(int(part) for part in parts)
    seen: set[int] = set()
    for device in ids:
        if device in seen:
            raise SegScopeError(f"{what}: device {device} is listed twice in {text!r}; name each device once")
        seen.add(device)
    if len(ids) > MAX_DEVICES:
        raise SegScopeError(f"{what}: {len(ids)} devices given; at most {MAX_DEVICES}")
    return ids


@dataclass
class DeviceUsage:
    """What one device (or cluster worker) did during a run."""

    name: str
    images: int = 0
    busy_s: float = 0.0

    def line(self, wall_s: float) -> str:
        rate = self.images / wall_s if wall_s > 0 else 0.0
        busy = 100 * self.busy_s / wall_s if wall_s > 0 else 0.0
        return f"{self.name}: {self.images} images, {rate:.2f} images/s, {busy:.0f}% busy"

    def as_dict(self, wall_s: float) -> dict[str, object]:
        return {"name": self.name, "images": self.images, "busy_s": round(self.busy_s, 4),
                "images_per_s": round(self.images / wall_s, 4) if wall_s > 0 else 0.0,
                "utilisation": round(self.busy_s / wall_s, 4) if wall_s > 0 else 0.0}


class UsageLog:
    """Per-device counts and the wall time from the first image started to the last finished (thread-safe)."""

    def __init__(self, names: Sequence[str]):
        self.devices = {name: DeviceUsage(name) for name in names}
        self._lock = threading.Lock()
        self._first: float | None = None
        self._last = 0.0

    def started(self) -> float:
        now = time.perf_counter()
        with self._lock:
            self._first = now if self._first is None else self._first
        return now

    def finished(self, name: str, start: float) -> None:
        self.record(name, time.perf_counter() - start)

    def record(self, name: str, busy_s: float) -> None:
        """`name` finished one image that kept it busy `busy_s` (a worker not seen before is added)."""
        now = time.perf_counter()
        with self._lock:
            self._first = now - busy_s if self._first is None else self._first
            usage = self.devices.setdefault(name, DeviceUsage(name))
            usage.images += 1
            usage.busy_s += busy_s
            self._last = max(self._last, now)

    @property
    def wall_s(self) -> float:
        return self._last - self._first if self._first is not None else 0.0

    def lines(self) -> list[str]:
        return [usage.line(self.wall_s) for usage in self.devices.values()]

    def as_dicts(self) -> list[dict[str, object]]:
        return [usage.as_dict(self.wall_s) for usage in self.devices.values()]


class DevicePool(Backend):
    """One backend per device; the capabilities are the first one's, with every device named."""

    def __init__(self, backends: Sequence[Backend], names: Sequence[str]):
        if not backends or len(backends) != len(names):
            raise ValueError("DevicePool needs one name per backend, and at least one backend")
        self.backends = list(backends)
        self.usage = UsageLog(names)
        self._free: queue.Queue[tuple[Backend, str]] = queue.Queue()
        for backend, name in zip(backends, names):
            self._free.put((backend, name))
        first = backends[0].capabilities
        self.capabilities = replace(first, device=f"{len(backends)} devices ({', '.join(names)}): {first.device}",
                                    details={**first.details, "devices": ", ".join(names)})

    def infer(self, image: ImageSource, roi: Roi | None = None) -> InferenceResult:
        """Run on the first device that is free (waiting for one when all are busy)."""
        backend, name = self._free.get()
        try:
            start = self.usage.started()
            result = backend.infer(image, roi)
            self.usage.finished(name, start)
            return result
        finally:
            self._free.put((backend, name))

    def infer_many(self, requests: Iterable[InferenceRequest]) -> Iterator[InferenceResult]:
        """Results in request order, one image in flight per device."""
        return read_ahead(requests, lambda r: self.infer(r.image, r.roi), lambda result: result,
                          len(self.backends), "segscope-device")

    def cancel(self) -> None:
        for backend in self.backends:
            backend.cancel()

    def close(self) -> None:
        errors = []
        for backend in self.backends:
            try:
                backend.close()
            except Exception as exc:  # close every device even when one fails; the first error is raised
                errors.append(exc)
        if errors:
            raise errors[0]


def device_pool(open_one: Callable[[int], Backend], devices: Sequence[int], label: str) -> DevicePool:
    """`open_one(device)` for each device behind one `DevicePool` ("<label> <id>" each); the ones opened are
    closed again when one fails."""
    backends: list[Backend] = []
    try:
        for device in devices:
            backends.append(open_one(device))
    except BaseException:
        for backend in backends:
            backend.close()
        raise
    return DevicePool(backends, [f"{label} {device}" for device in devices])

