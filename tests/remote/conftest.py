"""Fixtures for the remote backend: a real OpenSSH sshd on 127.0.0.1 (see `sshd.py`) and projects to run.

`sshd` is started once per session; tests that need it are skipped with the reason when sshd is not
installed (`.ci/run` installs Debian's openssh-server).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from segscope.core.remote.connection import SshOptions

from .sshd import Sshd, SshdUnavailable, start_sshd

SHIPPED_PIPELINE = Path(__file__).resolve().parents[2] / "pipelines" / "unet_simple_opencv.pipeline"
SHIPPED_AIPP = Path(__file__).resolve().parents[2] / "models" / "aipp_unet_simple_opencv.cfg"


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    try:
        server = start_sshd(tmp_path_factory.mktemp("sshd"))
    except SshdUnavailable as exc:
        pytest.skip(str(exc))
    yield server
    server.stop()


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
            "timeout": 60.0}


@pytest.fixture
def ssh_home(sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user home whose ~/.ssh/config names the test host `ascend` (as users set theirs up), no agent."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host ascend\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n  IdentityFile {sshd.user_key}\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    return home
