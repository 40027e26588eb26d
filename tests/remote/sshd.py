"""A throwaway OpenSSH sshd on 127.0.0.1 for the remote tests and `bench/bench_remote.py`.

`start_sshd(folder)` runs `/usr/sbin/sshd -D -e` with its own config, a generated ed25519 host key and a
generated user key in `folder`, listening on a free loopback port, as the current user (no PAM,
StrictModes off, AuthorizedKeysFile in `folder`).
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SSHD = Path("/usr/sbin/sshd")


class SshdUnavailable(RuntimeError):
    """sshd is not installed or did not start; the message says why."""


def keygen(path: Path) -> Path:
    """A fresh passphrase-less ed25519 key pair at `path` / `path.pub`."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "segscope-test", "-f", str(path)],
                   check=True, capture_output=True)
    return path


def ssh_fingerprint(public_key: Path) -> str:
    """OpenSSH's own fingerprint of a public key (`ssh-keygen -lf`), e.g. 'SHA256:...'."""
    out = subprocess.run(["ssh-keygen", "-lf", str(public_key)], check=True, capture_output=True, text=True)
    return out.stdout.split()[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Sshd:
    port: int
    folder: Path
    host_key: Path
    user_key: Path
    other_key: Path  # not in authorized_keys
    user: str
    process: subprocess.Popen
    cache_dir: Path  # the workers' cache on the "host", unique to this test session

    @property
    def target(self) -> str:
        return f"{self.user}@127.0.0.1:{self.port}"

    def known_hosts_line(self, host_key_pub: Path | None = None) -> str:
        key_type, blob = (host_key_pub or self.host_key.with_suffix(".pub")).read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {key_type} {blob}\n"

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)

    def session_pids(self) -> list[int]:
        """The per-connection sshd processes (children of the listener): killing them drops connections."""
        return [pid for pid in _pids() if _ppid(pid) == self.process.pid]


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Live processes (not zombies) whose command line contains `text`."""
    found = []
    for pid in _pids():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z" and pid != os.getpid():
            found.append((pid, cmdline))
    return found


def unique(prefix: str) -> str:
    """A marker no other run (another test, another user's tests on this machine) puts on a command line."""
    return f"{prefix}-{uuid.uuid4().hex}"


def processes_marked(text: str) -> list[tuple[int, str]]:
    """Live processes (not zombies, not this one) whose command line or environment contains `text`: a test's
    marker exported by its `--set-env` script reaches every process of the worker's session."""
    found = []
    for pid in _pids():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if (text in cmdline or text in environ) and state != "Z" and pid != os.getpid():
            found.append((pid, cmdline))
    return found


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def stop_client_and_check(client: subprocess.Popen, how: signal.Signals, marker: str, timeout: float = 20.0) -> str:
    """Stop `client` with `how` (Ctrl+C or kill -9) and check that no process naming `marker` outlives it (on
    the host: here the same machine); the client's stderr, if it was piped. The client is always reaped."""
    try:
        client.send_signal(how)
        _, err = client.communicate(timeout=60)
        assert wait_until(lambda: not processes_mentioning(marker), timeout=timeout), processes_mentioning(marker)
        return err or ""
    finally:
        client.kill()
        client.wait()


def start_sshd(folder: Path) -> Sshd:
    """Start sshd with everything it needs inside `folder`; `stop()` it when done."""
    if not SSHD.is_file() or shutil.which("ssh-keygen") is None:
        raise SshdUnavailable(f"OpenSSH server not installed ({SSHD} or ssh-keygen missing): "
                              "apt-get install openssh-server")
    if os.geteuid() == 0 and not Path("/run/sshd").is_dir():
        Path("/run/sshd").mkdir(mode=0o755)  # sshd's privilege-separation folder, made by its init script
    host_key, user_key, other_key = keygen(folder / "host_ed25519"), keygen(folder / "user"), keygen(folder / "other")
    shutil.copyfile(user_key.with_suffix(".pub"), folder / "authorized_keys")
    port = _free_port()
    config = folder / "sshd_config"
    config.write_text(f"""\
Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile none
AuthorizedKeysFile {folder / 'authorized_keys'}
UsePAM no
StrictModes no
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowTcpForwarding yes
Subsystem sftp internal-sftp
LogLevel ERROR
""")
    with (folder / "sshd.log").open("wb") as log:
        process = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT)

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    if not wait_until(lambda: process.poll() is not None or listening(), timeout=10):
        process.kill()
    if process.poll() is not None:
        raise SshdUnavailable(f"sshd did not start: {(folder / 'sshd.log').read_text(errors='replace').strip()[-300:]}")
    return Sshd(port, folder, host_key, user_key, other_key, getpass.getuser(), process, folder / "host-cache")
