"""Inference backends behind one interface (`base.Backend`), and the one registry of them.

`BACKENDS` names every way to run the stream, with what the CLI, the remote worker and the viewer's Backend
dialog need: a label, whether it can run here (and why not), and how to open it. Backends are imported on
demand: the MindX SDK exists only on Ascend hosts, paramiko only matters remotely.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SegScopeError
from ..fileio import DEFAULT_MAX_PIXELS
from ..remote.protocol import PROBABILITY_DTYPES
from .base import Backend

#: How remote probabilities travel back, smallest to exact; the default (CLI and viewer alike) is exact.
PROBABILITY_ENCODINGS = PROBABILITY_DTYPES
DEFAULT_PROBABILITIES = "float32"


def _open_embedded(pipeline: Path, max_pixels: int, sdk_home: Path | None) -> tuple[Backend, str]:
    from .embedded import EmbeddedBackend

    return EmbeddedBackend(pipeline, max_pixels=max_pixels), "embedded backend requested"


def _open_mindx(pipeline: Path, max_pixels: int, sdk_home: Path | None) -> tuple[Backend, str]:
    from .mindx import MindXBackend

    return MindXBackend(pipeline, sdk_home, max_pixels=max_pixels), ""


def _open_auto(pipeline: Path, max_pixels: int, sdk_home: Path | None) -> tuple[Backend, str]:
    """MindX when its SDK imports here, else embedded; the note says why."""
    from .mindx_env import import_sdk

    try:
        import_sdk(sdk_home)
    except SegScopeError as exc:
        backend, _ = _open_embedded(pipeline, max_pixels, sdk_home)
        return backend, f"MindX SDK not usable here: {exc}"
    return _open_mindx(pipeline, max_pixels, sdk_home)


def _mindx_problem(sdk_home: Path | None) -> str:
    from .mindx_env import sdk_problem

    return sdk_problem(sdk_home)


@dataclass(frozen=True)
class BackendKind:
    """One way to run the stream on the machine SegScope (or its remote worker) runs on."""

    name: str
    label: str  # for choosers: what runs where
    opener: Callable[[Path, int, Path | None], tuple[Backend, str]]
    problem: Callable[[Path | None], str] = lambda _sdk_home: ""

    def available(self, sdk_home: Path | None = None) -> tuple[bool, str]:
        """(whether it can run here, why not)."""
        why = self.problem(sdk_home)
        return not why, why

    def open(self, pipeline: Path, max_pixels: int = DEFAULT_MAX_PIXELS,
             sdk_home: Path | None = None) -> tuple[Backend, str]:
        """The opened backend and a note (why "auto" fell back, say)."""
        return self.opener(pipeline, max_pixels, sdk_home)


#: Every backend by name. "auto" (the default) is embedded locally (`open_backend`), and on a remote host
#: MindX when its SDK imports, else embedded (the worker opens it through `BackendKind.open`).
BACKENDS: dict[str, BackendKind] = {kind.name: kind for kind in (
    BackendKind("auto", "MindX SDK when it imports, else embedded", _open_auto),
    BackendKind("embedded", "Embedded: ONNX Runtime + OpenCV on this machine", _open_embedded),
    BackendKind("mindx", "MindX SDK on this Ascend host", _open_mindx, _mindx_problem),
)}
BACKEND_KINDS = tuple(BACKENDS)


def backend_kind(name: str, what: str = "--backend") -> BackendKind:
    kind = BACKENDS.get(name)
    if kind is None:
        raise SegScopeError(f"{what}: unknown backend {name!r}; choose from {', '.join(BACKEND_KINDS)}")
    return kind


def open_backend(kind: str, pipeline: Path, *, max_pixels: int = DEFAULT_MAX_PIXELS, sdk_home: Path | None = None,
                 remote: str | None = None, accept_new_host_key: bool | str = False,
                 set_env: str | None = None, probabilities: str = DEFAULT_PROBABILITIES,
                 python: str = "python3", remote_cache: str | None = None, devices: Sequence[int] | None = None,
                 cluster: str | None = None, ship_images: bool = False,
                 task_resources: dict[str, float] | None = None, **remote_options: Any) -> Backend:
    """Open a backend on `pipeline`; with `remote` ("[user@]host[:port]") the stream runs on that host over SSH
    (the worker opens `kind` there), sourcing `set_env` there first when given and running the worker with the
    host's `python`; `probabilities` sets how they travel back (`PROBABILITY_ENCODINGS`) and `remote_cache`
    the host folder for the uploaded worker and model (default ~/.cache/segscope). `devices` opens one stream
    per device here (`pool.DevicePool`); `cluster` (a Dask scheduler address, or ssh://HOST,... to start one
    there with `python`, `accept_new_host_key` as for `remote`) runs each image as a task there, `ship_images`
    sending the image bytes instead of letting the workers read the path, `task_resources` what each task
    needs of a worker (`core.cluster`)."""
    chosen = backend_kind(kind)
    if cluster:
        if remote or devices is not None:
            raise SegScopeError(f"--cluster cannot be combined with --{'remote' if remote else 'devices'}: "
                                "the cluster's workers run the stream")
        from ..cluster.backend import ClusterBackend
        from ..remote.connection import SshOptions

        return ClusterBackend(cluster, chosen.name, pipeline, max_pixels=max_pixels, ship=ship_images,
                              resources=task_resources, ssh=SshOptions(accept_new_host_key=accept_new_host_key),
                              python=python, set_env=set_env)
    if devices is not None:
        if remote:
            raise SegScopeError("--devices with --remote: not built yet; run without --devices (one stream) "
                                "or run segscope on the host")
        from .pool import open_pool

        return open_pool(chosen.name, pipeline, devices, max_pixels, sdk_home)
    if remote:
        from ..remote.deploy import DEFAULT_CACHE_DIR
        from .remote import open_remote_backend

        return open_remote_backend(remote, pipeline, accept_new_host_key=accept_new_host_key, worker_backend=kind,
                                   max_pixels=max_pixels, set_env=set_env, probabilities=probabilities, python=python,
                                   cache_dir=remote_cache or DEFAULT_CACHE_DIR, **remote_options)
    if chosen.name == "auto":
        chosen = BACKENDS["embedded"]  # locally "auto" has always meant embedded (CLI documentation)
    backend, _note = chosen.open(pipeline, max_pixels, sdk_home)
    return backend
