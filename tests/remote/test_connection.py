"""SSH connections: targets, host keys, authentication, ~/.ssh/config aliases and ProxyJump, against a real sshd."""

from __future__ import annotations

from pathlib import Path

import pytest

from segscope.core.errors import BackendError, SegScopeError
from segscope.core.remote.connection import (
    HostKeyChanged,
    SshConnection,
    SshOptions,
    SshTarget,
    UnknownHostKey,
    parse_target,
)

from .sshd import Sshd, keygen, ssh_fingerprint


@pytest.mark.parametrize(("text", "expected"), [
    ("root@10.0.0.5:2222", SshTarget("10.0.0.5", 2222, "root")),
    ("ascend-box", SshTarget("ascend-box", None, None)),
    ("user.name@host.example.com", SshTarget("host.example.com", None, "user.name")),
    ("me@[::1]:22", SshTarget("::1", 22, "me")),
    ("[fe80::1]", SshTarget("fe80::1", None, None)),
])
def test_targets_parse(text: str, expected: SshTarget) -> None:
    assert parse_target(text) == expected
    assert parse_target(str(expected)) == expected


@pytest.mark.parametrize("text", ["", "user@", "host:port", "host:0", "host:70000", "a b", "::1:22", "u@h@x"])
def test_bad_targets_name_the_option(text: str) -> None:
    with pytest.raises(SegScopeError, match=r"--remote: expected \[user@\]host\[:port\]"):
        parse_target(text)


def connect(sshd: Sshd, options: SshOptions, target: str | None = None) -> SshConnection:
    connection = SshConnection(parse_target(target or sshd.target), options)
    connection.connect()
    return connection


def check_runs(connection: SshConnection) -> None:
    status, output, _ = connection.run("echo connected", timeout=10)
    assert (status, output.strip()) == (0, "connected")
    connection.close()
    assert not connection.alive


def test_a_known_host_with_the_right_key_connects(sshd: Sshd, ssh_options: SshOptions) -> None:
    check_runs(connect(sshd, ssh_options))


def test_an_unknown_host_is_refused_with_its_fingerprint(sshd: Sshd, ssh_options: SshOptions, tmp_path: Path) -> None:
    ssh_options.known_hosts = tmp_path / "fresh" / "known_hosts"  # does not exist yet
    with pytest.raises(UnknownHostKey) as refused:
        connect(sshd, ssh_options)
    fingerprint = ssh_fingerprint(sshd.host_key.with_suffix(".pub"))
    assert refused.value.fingerprint == fingerprint
    assert refused.value.host == f"[127.0.0.1]:{sshd.port}" and refused.value.key_type == "ssh-ed25519"
    assert fingerprint in str(refused.value) and "--accept-new-host-key" in str(refused.value)
    assert not ssh_options.known_hosts.exists()


def test_accepting_a_wrong_fingerprint_is_still_a_refusal(sshd: Sshd, ssh_options: SshOptions, tmp_path: Path) -> None:
    ssh_options.known_hosts = tmp_path / "empty_known_hosts"
    ssh_options.accept_new_host_key = ssh_fingerprint(sshd.other_key.with_suffix(".pub"))
    with pytest.raises(UnknownHostKey):
        connect(sshd, ssh_options)


@pytest.mark.parametrize("accept", ["flag", "fingerprint"])
def test_an_accepted_key_is_recorded_and_trusted_next_time(sshd: Sshd, ssh_options: SshOptions, tmp_path: Path,
                                                           accept: str) -> None:
    known = tmp_path / "my_known_hosts"
    other_host = "other.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIIZ1b3o1a2V5aG9zdGtleWZvcnRlc3Rz"
    known.write_text(f"# my hosts\n{other_host}")
    ssh_options.known_hosts = known
    ssh_options.accept_new_host_key = True if accept == "flag" else ssh_fingerprint(sshd.host_key.with_suffix(".pub"))
    check_runs(connect(sshd, ssh_options))
    lines = known.read_text().splitlines()
    assert lines[:2] == ["# my hosts", other_host]
    assert lines[2] == sshd.known_hosts_line().strip()
    ssh_options.accept_new_host_key = False
    check_runs(connect(sshd, ssh_options))
    assert len(known.read_text().splitlines()) == 3


@pytest.mark.parametrize("accept", [False, True])
def test_a_changed_host_key_is_always_refused(sshd: Sshd, ssh_options: SshOptions, tmp_path: Path,
                                              accept: bool) -> None:
    impostor = keygen(tmp_path / "impostor")
    ssh_options.known_hosts.write_text(sshd.known_hosts_line(impostor.with_suffix(".pub")))
    ssh_options.accept_new_host_key = accept
    with pytest.raises(HostKeyChanged) as refused:
        connect(sshd, ssh_options)
    message = str(refused.value)
    assert "HOST KEY CHANGED" in message
    assert ssh_fingerprint(impostor.with_suffix(".pub")) in message
    assert ssh_fingerprint(sshd.host_key.with_suffix(".pub")) in message
    assert f"ssh-keygen -R '[127.0.0.1]:{sshd.port}'" in message
    assert ssh_options.known_hosts.read_text() == sshd.known_hosts_line(impostor.with_suffix(".pub"))


def test_a_wrong_key_is_refused(sshd: Sshd, ssh_options: SshOptions) -> None:
    ssh_options.key_filename = sshd.other_key
    with pytest.raises(BackendError, match=rf"root@\[127.0.0.1\]:{sshd.port}: authentication failed "
                                           rf"\(tried key file {sshd.other_key}\)"):
        connect(sshd, ssh_options)


def test_a_closed_port_is_named(ssh_options: SshOptions) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens once closed
    with pytest.raises(BackendError, match=rf"connection refused; is sshd running and listening on port {port}"):
        connect(None, ssh_options, f"root@127.0.0.1:{port}")  # type: ignore[arg-type]


def test_an_ssh_config_alias_with_proxyjump(sshd: Sshd, ssh_options: SshOptions, tmp_path: Path) -> None:
    """`ascend` -> 127.0.0.1 through the jump host `bastion` (the same sshd, forwarding to itself)."""
    config = tmp_path / "ssh_config"
    config.write_text(f"""\
Host bastion
    HostName 127.0.0.1
    Port {sshd.port}
    User {sshd.user}
    IdentityFile {sshd.user_key}

Host ascend
    HostName 127.0.0.1
    Port {sshd.port}
    User {sshd.user}
    IdentityFile {sshd.user_key}
    ProxyJump bastion
""")
    ssh_options.ssh_config = config
    ssh_options.key_filename = None
    connection = connect(sshd, ssh_options, "ascend")
    assert len(connection._jumps) == 1  # really through the jump host
    status, output, _ = connection.run("echo $SSH_CONNECTION", timeout=10)
    assert status == 0 and output.split()[0] == "127.0.0.1"
    check_runs(connection)


def test_a_jump_host_is_verified_too(sshd: Sshd, ssh_options: SshOptions, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(f"Host ascend\n    HostName localhost\n    Port {sshd.port}\n    User {sshd.user}\n"
                      f"    ProxyJump {sshd.user}@localhost:{sshd.port}\n")
    ssh_options.ssh_config = config  # known_hosts trusts 127.0.0.1, not "localhost"
    with pytest.raises(UnknownHostKey, match=rf"\[localhost\]:{sshd.port}"):
        connect(sshd, ssh_options, "ascend")
