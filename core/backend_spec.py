"""What backend to open, as one value (`BackendSpec`: a kind of `core.backends.registry`, where it runs and its
options), and `open_backend`, which composes it: one stream here, one per device (`--devices`), the stream on a
remote host over SSH (`core.remote`) or the images as tasks on a Dask cluster (`core.cluster`).

The CLI builds a spec from its options (`spec_from_args`), the viewer's Backend dialog from its profile; this
module sits above `core.backends`, `core.remote` and `core.cluster`, and none of them imports it. paramiko and
Dask are imported only when a remote host or a cluster is opened.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Union

from .backends.base import Backend, Capabilities
from .backends.pool import parse_devices
from .backends.registry import backend_kind, open_kind
from .cluster import check_address, parse_resources
from .errors import SegScopeError
from .files.fileio import DEFAULT_MAX_PIXELS
from .remote.protocol import DEFAULT_PROBABILITIES, DEFAULT_TIMEOUT
from .stream.source import chosen_source

if TYPE_CHECKING:  # paramiko: imported when a host is reached
    from .remote.connection import SshOptions


@dataclass(frozen=True)
class SshLogin:
    """How SegScope reaches an SSH host and runs Python there (`--remote`, and `--cluster ssh://`)."""

    #: Trust an unknown host key: True (`--accept-new-host-key`) or the "SHA256:..." fingerprint the user accepted.
    accept_new_host_key: bool | str = False
    python: str = "python3"  # the host's interpreter (`--remote-python`)
    set_env: str | None = None  # a script sourced on the host first (`--set-env`)
    key_filename: Path | None = None
    password: str | None = field(default=None, repr=False)  # memory only

    def ssh_options(self) -> SshOptions:
        from .remote.connection import SshOptions

        return SshOptions(key_filename=self.key_filename, password=self.password,
                          accept_new_host_key=self.accept_new_host_key)


@dataclass(frozen=True)
class Here:
    """One stream on this machine."""


@dataclass(frozen=True)
class Devices:
    """One stream per device of this host (`--devices 0,1`); the images go to the first free one."""

    ids: tuple[int, ...]


@dataclass(frozen=True)
class RemoteHost:
    """The stream on a host over SSH (`--remote [user@]host[:port]`); its worker opens the spec's kind there."""

    target: str
    login: SshLogin = SshLogin()
    cache_dir: str | None = None  # the host folder for the worker and model (None: core.remote.deploy's default)
    probabilities: str = DEFAULT_PROBABILITIES  # how they travel back: one of protocol.PROBABILITY_DTYPES
    timeout: float = DEFAULT_TIMEOUT  # seconds without a word from the host before it is given up (`--remote-timeout`)


@dataclass(frozen=True)
class Cluster:
    """Each image a task on a Dask cluster (`--cluster`): a scheduler's address, or ssh://HOST,... to start one
    with `login`; `ship_images` sends the bytes instead of the path, `task_resources` is what a task needs."""

    address: str
    login: SshLogin = SshLogin()
    ship_images: bool = False
    task_resources: dict[str, float] | None = field(default=None, hash=False)


#: Where the stream runs.
Where = Union[Here, Devices, RemoteHost, Cluster]  # noqa: UP007 - evaluated at run time (3.9)
HERE = Here()


@dataclass(frozen=True)
class BackendSpec:
    """A backend to open: its kind (checked against the registry), the pipeline or model card it runs, where,
    the largest image it accepts and the MindX SDK folder here (None: $MX_SDK_HOME)."""

    kind: str
    pipeline: Path
    where: Where = HERE
    max_pixels: int = DEFAULT_MAX_PIXELS
    sdk_home: Path | None = None

    def __post_init__(self) -> None:
        backend_kind(self.kind)

    def describe(self) -> str:
        """One line: the kind, what it runs and where."""
        where = self.where
        place = f", devices {','.join(map(str, where.ids))}" if isinstance(where, Devices) else \
            f" on {where.target}" if isinstance(where, RemoteHost) else \
            f" on the cluster {where.address}" if isinstance(where, Cluster) else ""
        return f"{self.kind} running {self.pipeline.name}{place}"


def open_backend(spec: BackendSpec) -> Backend:
    """Open `spec`: close the backend when done (it is a context manager)."""
    where = spec.where
    if isinstance(where, Cluster):
        from .cluster.backend import ClusterBackend

        return ClusterBackend(where.address, spec.kind, spec.pipeline, max_pixels=spec.max_pixels,
                              ship=where.ship_images, resources=where.task_resources, ssh=where.login.ssh_options(),
                              python=where.login.python, set_env=where.login.set_env)
    if isinstance(where, Devices):
        return backend_kind(spec.kind).open_on_devices(spec.pipeline, where.ids, spec.max_pixels, spec.sdk_home)
    if isinstance(where, RemoteHost):
        from .remote.backend import RemoteBackend
        from .remote.connection import parse_target
        from .remote.deploy import DEFAULT_CACHE_DIR

        return RemoteBackend(spec.pipeline, parse_target(where.target), where.login.ssh_options(),
                             python=where.login.python, set_env=where.login.set_env,
                             cache_dir=where.cache_dir or DEFAULT_CACHE_DIR, worker_backend=spec.kind,
                             probabilities=where.probabilities, max_pixels=spec.max_pixels, timeout=where.timeout)
    backend, _note = open_kind(spec.kind, spec.pipeline, spec.max_pixels, spec.sdk_home)
    return backend


def opening_notes(capabilities: Capabilities) -> list[str]:
    """What an opened backend says about itself, as `eval` notes it: which stream of several it drives, how DVPP is
    approximated, what `--backend auto` chose."""
    details = capabilities.details
    return ([f"SegScope drives {details['stream']}"] if "stream" in details else []) + \
        ([details["note"]] if "note" in details else []) + \
        ([f"--backend auto {details['auto']}"] if "auto" in details else [])


def local_where(devices: str | None, cluster: str | None, login: SshLogin = SshLogin(),
                names: tuple[str, str] = ("--devices", "--cluster")) -> Where:
    """Where a kind of this machine runs, from the text of `--devices` and `--cluster` (None: not given;
    `names`: how the front end names the two, the Backend dialog its fields): one stream here, one per device,
    or the images as tasks on a cluster. Both given, or a value either refuses: a one-line error."""
    if devices is not None and cluster:
        raise SegScopeError(f"{names[1]} cannot be combined with {names[0]}: the cluster's workers run the stream")
    if cluster:
        return Cluster(check_address(cluster, names[1]), login)
    return Devices(parse_devices(devices, names[0])) if devices is not None else HERE


def spec_from_args(args: argparse.Namespace) -> BackendSpec:
    """The spec of a command's backend options (`--backend`, `--pipeline`/`--model`, `--remote` and its options,
    `--devices`, `--cluster` and its options, `--max-pixels`, `--sdk-home`); a one-line error for a combination
    that cannot run."""
    pipeline = chosen_source(args)
    resources = parse_resources(args.task_resources) if args.task_resources else None
    login = SshLogin(accept_new_host_key=bool(args.accept_new_host_key), python=args.remote_python or "python3",
                     set_env=args.set_env)
    if args.remote and args.cluster:
        raise SegScopeError("--cluster cannot be combined with --remote: the cluster's workers run the stream")
    if args.remote and args.devices is not None:
        raise SegScopeError("--devices with --remote: not built yet; run without --devices (one stream) "
                            "or run segscope on the host")
    where = RemoteHost(args.remote, login, args.remote_cache, args.probabilities or DEFAULT_PROBABILITIES,
                       args.remote_timeout or DEFAULT_TIMEOUT) if args.remote else \
        local_where(args.devices, args.cluster, login)
    if isinstance(where, Cluster):
        where = replace(where, ship_images=args.ship_images, task_resources=resources)
    return BackendSpec(args.backend, pipeline, where, args.max_pixels, args.sdk_home)
