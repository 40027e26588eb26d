"""Fixtures for the remote backend: a real OpenSSH sshd on 127.0.0.1 and helpers around it.

`sshd` starts `/usr/sbin/sshd -D -e` once per session with its own config, a generated ed25519 host key
and a generated user key in a temporary folder, listening on a free loopback port. It runs as the
current user (no PAM, StrictModes off, AuthorizedKeysFile in the temp folder). Tests that need it are
skipped with the reason when sshd is not installed (`.ci/run` installs Debian's openssh-server).
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from segscope.core.remote.connection import SshOptions

SSHD = Path("/usr/sbin/sshd")
SHIPPED_PIPELINE = Path(__file__).resolve().parents[2] / "pipelines" / "unet_simple_opencv.pipeline"
SHIPPED_AIPP = Path(__file__).resolve().parents[2] / "models" / "aipp_unet_simple_opencv.cfg"


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


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    if not SSHD.is_file() or shutil.which("ssh-keygen") is None:
        pytest.skip(f"OpenSSH server not installed ({SSHD} or ssh-keygen missing): apt-get install openssh-server")
    if os.geteuid() == 0 and not Path("/run/sshd").is_dir():
        Path("/run/sshd").mkdir(mode=0o755)  # sshd's privilege-separation folder, made by its init script
    folder = tmp_path_factory.mktemp("sshd")
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
    log = (folder / "sshd.log").open("wb")
    process = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT)

    def listening() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    if not wait_until(lambda: process.poll() is not None or listening(), timeout=10):
        process.kill()
    if process.poll() is not None:
        pytest.skip(f"sshd did not start: {(folder / 'sshd.log').read_text(errors='replace').strip()[-300:]}")
    cache = folder / "host-cache"
    yield Sshd(port, folder, host_key, user_key, other_key, getpass.getuser(), process, cache)
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=10)
    log.close()


@pytest.fixture
def known_hosts(sshd: Sshd, tmp_path: Path) -> Path:
    """A known_hosts file that already trusts the test sshd."""
    path = tmp_path / "known_hosts"
    path.write_text(sshd.known_hosts_line())
    return path


@pytest.fixture
def ssh_options(sshd: Sshd, known_hosts: Path) -> SshOptions:
    """Log in with the generated user key only (no agent, no ~/.ssh keys, no ~/.ssh/config)."""
    return SshOptions(key_filename=sshd.user_key, allow_agent=False, look_for_keys=False, ssh_config=None,
                      known_hosts=known_hosts, connect_timeout=10.0)


@pytest.fixture
def worker_options(sshd: Sshd) -> dict:
    """RemoteBackend options for the test host: this interpreter, and a cache folder in the temp folder."""
    return {"python": sys.executable, "cache_dir": str(sshd.cache_dir), "worker_backend": "embedded",
            "request_timeout": 60.0, "startup_timeout": 60.0}


def make_slow_onnx(path: Path, size: int = 960, width: int = 16, layers: int = 2) -> None:
    """A 960x960 model that takes about a second on two cores: 3x3 convolutions before a 2-class softmax.

    Tests use it to catch the worker mid-request (kill, cancel, close while busy).
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, prev, channels = [], [], "input", 3
    for i in range(layers + 1):
        w = (rng.standard_normal((width, channels, 3, 3)) * 0.1).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"W{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"W{i}"], [f"c{i}"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        prev, channels = f"r{i}", width
    inits.append(numpy_helper.from_array((rng.standard_normal((2, width, 1, 1)) * 0.1).astype(np.float32), "Wout"))
    nodes += [
        helper.make_node("Conv", [prev, "Wout"], ["logits_nchw"], kernel_shape=[1, 1]),
        helper.make_node("Transpose", ["logits_nchw"], ["logits"], perm=[0, 2, 3, 1]),
        helper.make_node("Softmax", ["logits"], ["softmax"], axis=-1),
        helper.make_node("ArgMax", ["softmax"], ["argmax64"], axis=-1, keepdims=0),
        helper.make_node("Cast", ["argmax64"], ["argmax"], to=TensorProto.INT32),
    ]
    graph = helper.make_graph(
        nodes, "slow_stand_in", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("softmax", TensorProto.FLOAT, [1, size, size, 2]),
         helper.make_tensor_value_info("argmax", TensorProto.INT32, [1, size, size])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))


@pytest.fixture(scope="session")
def slow_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project (pipelines/ + models/) running the slow model; returns its pipeline path."""
    root = tmp_path_factory.mktemp("slow") / "project"
    (root / "pipelines").mkdir(parents=True)
    (root / "models").mkdir()
    pipeline = root / "pipelines" / SHIPPED_PIPELINE.name
    shutil.copyfile(SHIPPED_PIPELINE, pipeline)
    shutil.copyfile(SHIPPED_AIPP, root / "models" / SHIPPED_AIPP.name)
    make_slow_onnx(root / "models" / "slow.onnx")
    card = {"name": "slow test model", "onnx": "slow.onnx", "aipp": SHIPPED_AIPP.name,
            "input": {"name": "input", "layout": "NCHW", "width": 960, "height": 960},
            "outputs": [{"name": "softmax", "kind": "softmax", "layout": "NHWC"}, {"name": "argmax", "kind": "argmax"}],
            "classes": ["background", "defect"]}
    (root / "models" / "unet_hw960_bs1.json").write_text(json.dumps(card))
    return pipeline
