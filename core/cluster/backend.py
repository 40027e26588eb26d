"""The client side of `--cluster`: a `Backend` whose images run as tasks on a Dask cluster."""

from __future__ import annotations

import hashlib
import itertools
import threading
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..backends.base import Backend, ImageSource, InferenceRequest, InferenceResult, read_ahead
from ..backends.pool import UsageLog
from ..compat import TIMEOUTS
from ..errors import BackendError, CancelledError, SegScopeError
from ..files.fileio import DEFAULT_MAX_PIXELS, read_bytes
from ..remote.connection import SshOptions
from ..roi import Roi
from . import SSH_SCHEME, check_address, import_distributed
from .ssh import start_ssh_cluster

#: Images in flight per worker thread: enough to keep every worker busy while results come back in order.
IN_FLIGHT_PER_THREAD = 2


class ClusterBackend(Backend):
    """Images as tasks, each run by the worker's own backend (opened once there); results in request order.

    `ship` sends each image's bytes from here; otherwise the workers read the image path (shared storage).
    The pipeline and its model are read on the workers at the same path. A task lost with its worker is
    rerun by the scheduler elsewhere; each result is taken once, by its request's place in the order.
    `resources` (e.g. {"NPU": 1}) is what each task needs of a worker that declared it."""

    def __init__(self, address: str, kind: str, pipeline: Path, *, max_pixels: int = DEFAULT_MAX_PIXELS,
                 ship: bool = False, resources: dict[str, float] | None = None, client: Any = None,
                 ssh: SshOptions | None = None, python: str = "python3", set_env: str | None = None):
        distributed = import_distributed()
        from .worker import BackendPlugin, capabilities_task

        self.ship, self.resources = ship, resources
        self._cancelled = threading.Event()
        self._futures: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._sequence = itertools.count()
        self._owns_client = client is None
        self._cluster: Any = None  # started here (ssh://), closed with the backend
        if client is None:
            if check_address(address).startswith(SSH_SCHEME):
                self._cluster = start_ssh_cluster(address, ssh or SshOptions(), python, set_env)
            if address.startswith("tls://") and \
                    distributed.security.Security().get_connection_args("client")["ssl_context"] is None:
                raise SegScopeError(f"--cluster {address}: Dask's configuration names no TLS certificates for this "
                                    "client (distributed.comm.tls.ca-file, client.cert, client.key); set them, or "
                                    "use tcp://")
            try:
                client = distributed.Client(self._cluster or address, timeout=15)
            except (OSError, *TIMEOUTS) as exc:
                self.close()
                raise SegScopeError(f"--cluster {address}: cannot reach the scheduler ({exc}); is it running "
                                    "and is its port open from here?") from None
        self.client = client
        pipeline = pipeline.resolve()
        digest = hashlib.sha256(f"{kind}\0{pipeline}\0{max_pixels}".encode()).hexdigest()[:12]
        self.plugin = f"segscope-backend-{digest}"
        try:
            self.client.register_plugin(BackendPlugin(self.plugin, kind, str(pipeline), max_pixels), name=self.plugin)
            workers = self.client.scheduler_info()["workers"]
            if not workers:
                raise SegScopeError(f"--cluster {address}: the scheduler has no workers; start some with "
                                    f"dask-worker {address}")
            first = self.client.submit(capabilities_task, self.plugin, pure=False, resources=resources)
            capabilities = first.result()
        except BaseException:
            self.close()
            raise
        self.usage = UsageLog([f"worker {info.get('name', address)}" for address, info in workers.items()])
        self.threads = sum(w.get("nthreads", 1) for w in workers.values())
        self.capabilities = replace(capabilities, details={**capabilities.details, "cluster": address,
                                                           "workers": str(len(workers))})

    def infer(self, image: ImageSource, roi: Roi | None = None) -> InferenceResult:
        self._cancelled.clear()
        return self._result(self._submit(InferenceRequest(image, roi), uuid.uuid4().hex))

    def infer_many(self, requests: Iterable[InferenceRequest]) -> Iterator[InferenceResult]:
        """Results in request order, `IN_FLIGHT_PER_THREAD` tasks per worker thread in flight; closing the
        iterator early (cancel, an error) cancels the run's tasks still on the cluster."""
        self._cancelled.clear()
        run = uuid.uuid4().hex
        depth = max(1, self.threads * IN_FLIGHT_PER_THREAD)
        try:
            yield from read_ahead(requests, lambda r: self._submit(r, run), self._result, depth, "segscope-cluster")
        finally:
            self._cancel_futures(f"segscope-infer-{run}-")

    def _submit(self, request: InferenceRequest, run: str) -> Any:
        from .worker import infer_task

        if self._cancelled.is_set():
            raise CancelledError("the cluster run was cancelled")
        image = read_bytes(request.image) if self.ship and isinstance(request.image, Path) else request.image
        with self._lock:
            index = next(self._sequence)  # earlier images first, so results come back about in order
            key = f"segscope-infer-{run}-{index}"
            future = self.client.submit(infer_task, self.plugin, image, request.roi, key=key, pure=False,
                                        resources=self.resources, priority=-index)
            self._futures[key] = future
        return future

    def _result(self, future: Any) -> InferenceResult:
        try:
            result, worker, busy = future.result()
        except SegScopeError:
            raise
        except Exception as exc:  # a worker-side failure that is not SegScope's own one line
            if self._cancelled.is_set():
                raise CancelledError("the cluster run was cancelled") from None
            raise BackendError(f"a cluster task failed: {type(exc).__name__}: {exc}") from None
        finally:
            with self._lock:
                self._futures.pop(future.key, None)
        self.usage.record(f"worker {worker}", busy)
        return result

    def cancel(self) -> None:
        self._cancelled.set()
        self._cancel_futures("")

    def _cancel_futures(self, prefix: str) -> None:
        """Cancel (and forget) the tasks whose keys start with `prefix`."""
        with self._lock:
            keys = [key for key in self._futures if key.startswith(prefix)]
            futures = [self._futures.pop(key) for key in keys]
        if futures and self.client is not None:
            self.client.cancel(futures)

    def close(self) -> None:
        client, self.client = getattr(self, "client", None), None
        if client is None:
            self._close_cluster()
            return
        try:
            with self._lock:
                futures, self._futures = list(self._futures.values()), {}
            if futures:
                client.cancel(futures)
            client.unregister_worker_plugin(self.plugin)
        except Exception:  # the scheduler may be gone already; closing must still finish
            pass
        finally:
            if self._owns_client:
                client.close()
            self._close_cluster()

    def _close_cluster(self) -> None:
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.close()
