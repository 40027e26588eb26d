"""What runs on a Dask worker: the backend, opened once per worker, and the one-image task."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from distributed import WorkerPlugin, get_worker

from ..backends.base import Backend, Capabilities, ImageSource
from ..backends.registry import open_kind
from ..result import InferenceResult
from ..roi import Roi


class _Opened:
    """A worker's backend and the lock that lets one image at a time through it (a MindX stream wants a
    single caller)."""

    def __init__(self) -> None:
        self.backend: Backend | None = None
        self.lock = threading.Lock()


#: (plugin name, worker address) -> that worker's backend. Keyed by the worker, not kept on the plugin:
#: workers in one process (a threads LocalCluster) must not share one.
_OPENED: dict[tuple[str, str], _Opened] = {}
_OPENED_LOCK = threading.Lock()


class BackendPlugin(WorkerPlugin):
    """Opens `kind` on `pipeline` at the worker's first task (an error then fails that task, so the client
    sees it as one line) and closes it when the plugin is removed or the worker stops."""

    def __init__(self, name: str, kind: str, pipeline: str, max_pixels: int):
        self.name, self.kind, self.pipeline, self.max_pixels = name, kind, pipeline, max_pixels

    def teardown(self, worker: Any) -> None:
        with _OPENED_LOCK:
            opened = _OPENED.pop((self.name, worker.address), None)
        if opened is not None:
            with opened.lock:
                if opened.backend is not None:
                    opened.backend.close()


def _run(name: str, use: Any) -> Any:
    """`use(backend)` with this worker's backend for plugin `name`, opened on first use."""
    worker = get_worker()
    plugin = worker.plugins[name]
    assert isinstance(plugin, BackendPlugin)
    with _OPENED_LOCK:
        opened = _OPENED.setdefault((name, worker.address), _Opened())
    with opened.lock:
        if opened.backend is None:
            opened.backend, _note = open_kind(plugin.kind, Path(plugin.pipeline), plugin.max_pixels)
        return use(opened.backend)


def capabilities_task(name: str) -> Capabilities:
    return _run(name, lambda backend: backend.capabilities)  # type: ignore[no-any-return]


def infer_task(name: str, image: ImageSource, roi: Roi | None) -> tuple[InferenceResult, str, float]:
    """One image through the worker's backend: the result, which worker ran it, and for how long."""
    def use(backend: Backend) -> tuple[InferenceResult, str, float]:
        start = time.perf_counter()
        result = backend.infer(image, roi)
        return result, str(get_worker().name), time.perf_counter() - start

    return _run(name, use)  # type: ignore[no-any-return]
