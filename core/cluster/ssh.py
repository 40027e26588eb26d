"""`--cluster ssh://HOST1,HOST2,...`: a Dask cluster started over SSH for one run (`distributed.SSHCluster`).

The first host runs the scheduler and every host one worker (one thread: a worker's images go through its
one stream). Each host is first reached with SegScope's own SSH (`core.remote.connection`), so the rules and
messages are those of `--remote`: `~/.ssh/config` aliases, known_hosts checked (an unknown host refused
with its fingerprint unless `--accept-new-host-key`, a changed key always refused), and the host's
`--remote-python` must import distributed and segscope. Dask then connects with asyncssh, given what that
check resolved (address, port, user, key, the known_hosts file now holding the key).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from pathlib import Path
from typing import Any

from ..errors import SegScopeError
from ..remote.connection import SshConnection, SshOptions, SshTarget, resolve
from . import import_distributed, ssh_hosts, tether

#: Seconds a host may take to say whether its Python imports distributed and segscope.
IMPORT_CHECK_SECONDS = 60.0
#: Seconds the hosts may take to end a cluster's processes once told to.
STOP_SECONDS = 30.0


def _check_host(target: SshTarget, options: SshOptions, python: str) -> None:
    """Connect as `--remote` does (host key, login) and check that `python` there imports what a worker needs."""
    connection = SshConnection(target, options)
    connection.connect()
    try:
        status, output, errors = connection.run(f"{shlex.quote(python)} -c 'import distributed, segscope'",
                                                IMPORT_CHECK_SECONDS)
        output += errors
    finally:
        connection.close()
    if status != 0:
        last = output.strip().splitlines()[-1] if output.strip() else f"exit status {status}"
        raise SegScopeError(f"{target}: {python} cannot start a Dask worker there ({last}); install the same "
                            f"segscope[cluster] as here into that Python, or pass --remote-python")


def _connect_options(target: SshTarget, options: SshOptions) -> dict[str, Any]:
    """asyncssh's options for `target` as `core.remote.connection` resolved it."""
    hop = resolve(target, options)
    if hop.proxy_jump:
        raise SegScopeError(f"--cluster {target}: ProxyJump hosts cannot start a Dask cluster (its scheduler and "
                            "workers must reach each other directly); start one there and pass --cluster tcp://")
    keys = [str(options.key_filename.expanduser())] if options.key_filename else \
        [str(Path(f).expanduser()) for f in hop.identity_files if Path(f).expanduser().is_file()]
    connect: dict[str, Any] = {"host": hop.hostname, "port": hop.port, "known_hosts": str(hop.known_hosts),
                               "config": None, "connect_timeout": options.connect_timeout}
    if hop.user:
        connect["username"] = hop.user
    if keys:
        connect["client_keys"] = keys
    if options.password is not None:
        connect["password"] = options.password
    if not options.allow_agent:
        connect["agent_path"] = None
    return connect


def _tethered(process: type) -> type:
    """Dask's SSH scheduler or worker process, its close waiting until its processes on the host are gone:
    its channel's input ends, so its tether (`core.cluster.tether`) ends the host session's processes, and
    their exit is awaited before Dask closes the connection (Dask's own close does not wait)."""

    class Tethered(process):  # type: ignore[misc, valid-type]
        async def close(self) -> None:
            if self.proc is not None:
                with contextlib.suppress(Exception):  # a host already unreachable: Dask's close still runs
                    self.proc.stdin.write_eof()
                    await asyncio.wait_for(self.proc.wait(), STOP_SECONDS)
            await super().close()

    return Tethered


def start_ssh_cluster(address: str, options: SshOptions, python: str, set_env: str | None = None) -> Any:
    """A `distributed.SSHCluster` on the hosts of `address`, ready for a `Client`; close it after the run."""
    if set_env is not None:
        raise SegScopeError("--set-env: Dask's SSHCluster starts its scheduler and workers without sourcing a "
                            "script; with --cluster ssh:// give --remote-python an interpreter that runs as it is, "
                            "or start the cluster yourself and pass --cluster tcp://SCHEDULER:8786")
    distributed = import_distributed()
    from distributed.deploy import ssh

    try:
        import asyncssh  # noqa: F401 - Dask's SSH processes import it late; say what is missing up front
    except ImportError:
        raise SegScopeError('--cluster ssh://: Dask starts clusters over SSH with asyncssh, which is not '
                            'installed: pip install "segscope[cluster]"') from None
    targets = ssh_hosts(address)
    for target in dict.fromkeys(targets):  # each host once, in order: the first failure is the one reported
        _check_host(target, options, python)
    connects = [_connect_options(target, options) for target in targets]
    hosts = [connect.pop("host") for connect in connects]
    tethered = f"{shlex.quote(python)} -m {tether.__name__} {shlex.quote(python)}"
    scheduler = {"cls": _tethered(ssh.Scheduler), "options": {
        "address": hosts[0], "connect_options": connects[0], "remote_python": tethered,
        "kwargs": {"port": 0, "dashboard": False}}}
    workers = {i: {"cls": _tethered(ssh.Worker), "options": {  # the first host also runs a worker
        "address": host, "connect_options": connect, "remote_python": tethered, "kwargs": {"nthreads": 1},
        "worker_class": "distributed.Nanny"}} for i, (host, connect) in enumerate(zip(hosts, connects))}
    try:  # what distributed.SSHCluster builds, with processes that are waited for when closed
        return distributed.SpecCluster(workers, scheduler, name="SSHCluster")
    except Exception as exc:  # noqa: BLE001 - whatever Dask or asyncssh raise while starting, in one line
        raise SegScopeError(f"--cluster {address}: Dask could not start the cluster over SSH "
                            f"({type(exc).__name__}: {exc})") from None

