"""Running a dataset on many machines with Dask distributed (the `cluster` extra): `eval --cluster ADDRESS`,
a running scheduler's address or `ssh://HOST1,HOST2` to start one for the run (`ssh.start_ssh_cluster`).

Each worker opens the backend once (`worker.BackendPlugin`); every image is one task whose result (the
`InferenceResult`) comes back to the client, which scores, prints and exports exactly as a local run does.
Dask needs the same Python and package versions (segscope included) on the client, scheduler and workers.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from ..errors import SegScopeError

if TYPE_CHECKING:
    from ..remote.connection import SshTarget

INSTALL_HINT = 'pip install "segscope[cluster]"'
#: `--cluster ssh://HOST,...`: start a cluster over SSH for the run (core.cluster.ssh).
SSH_SCHEME = "ssh://"


def import_distributed() -> ModuleType:
    """The `distributed` module, or a one-line error saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise SegScopeError(f"--cluster needs Dask distributed, which is not installed: {INSTALL_HINT}") from None
    return distributed


def ssh_hosts(address: str) -> list[SshTarget]:
    """The hosts of `ssh://HOST[,HOST...]` (each [user@]host[:port] or a ~/.ssh/config alias)."""
    from ..remote.connection import parse_target  # paramiko: only for ssh://

    names = [name.strip() for name in address[len(SSH_SCHEME):].split(",")]
    if not all(names):
        raise SegScopeError(f"--cluster: expected ssh://HOST[,HOST...] (each [user@]host[:port] or an alias of "
                            f"~/.ssh/config), got {address!r}")
    return [parse_target(name, "--cluster") for name in names]


def check_address(address: str, what: str = "--cluster") -> str:
    """A cluster SegScope can use: a scheduler at tcp://HOST:PORT or tls://HOST:PORT, or hosts to start one on
    over SSH, ssh://HOST[,HOST...] (`what`: how the refusal names the option)."""
    if address.startswith(SSH_SCHEME):
        ssh_hosts(address)
        return address
    scheme, _, rest = address.partition("://")
    host, _, port = rest.rpartition(":")
    if scheme not in ("tcp", "tls") or not host or not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise SegScopeError(f"{what}: expected a scheduler address such as tcp://host:8786 (a port in 1..65535; "
                            f"or ssh://host1,host2 to start one over SSH), got {address!r}")
    return address


def parse_resources(text: str) -> dict[str, float]:
    """'NPU=1,MEM=2' -> {"NPU": 1.0, "MEM": 2.0}: what each task needs of a worker (`dask worker --resources`)."""
    resources: dict[str, float] = {}
    for part in text.split(","):
        name, _, amount = part.strip().partition("=")
        try:
            value = float(amount)
        except ValueError:
            value = -1.0
        if not name.strip() or value <= 0 or name.strip() in resources:
            raise SegScopeError(f"--task-resources: expected NAME=AMOUNT[,NAME=AMOUNT], each name once and "
                                f"amounts > 0 (e.g. NPU=1), got {text!r}")
        resources[name.strip()] = value
    return resources
