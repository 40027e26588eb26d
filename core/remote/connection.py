"""SSH connections to the Ascend host (paramiko): targets, `~/.ssh/config`, ProxyJump and host keys.

Host keys are always verified against `known_hosts`. An unknown host raises `UnknownHostKey` carrying the
fingerprint, unless the caller accepts new keys (the CLI's `--accept-new-host-key`) or exactly that
fingerprint (what the GUI passes after its dialog); an accepted key is appended to `known_hosts`. A key
that differs from the recorded one raises `HostKeyChanged`, whatever the caller accepts.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from ..compat import TIMEOUTS, pairwise
from ..errors import BackendError, SegScopeError

# Connection failures are explained by SegScope in one line; paramiko's own tracebacks would only confuse.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

DEFAULT_SSH_CONFIG = Path("~/.ssh/config")
DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")
SYSTEM_KNOWN_HOSTS = Path("/etc/ssh/ssh_known_hosts")

_TARGET = re.compile(r"^(?:(?P<user>[^@\s]+)@)?(?:\[(?P<ipv6>[^\]\s]+)\]|(?P<host>[^:@\s\[\]]+))(?::(?P<port>\d+))?$")


@dataclass(frozen=True)
class SshTarget:
    """`[user@]host[:port]`; a missing user or port comes from `~/.ssh/config`, then the defaults."""

    host: str
    port: int | None = None
    user: str | None = None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.user + '@' if self.user else ''}{host}{f':{self.port}' if self.port else ''}"


def parse_target(text: str, field_name: str = "--remote") -> SshTarget:
    """Parse `user@host`, `host:2222`, `user@[::1]:2222` or a `~/.ssh/config` alias."""
    match = _TARGET.match(text.strip())
    port = int(match["port"]) if match and match["port"] else None
    if not match or (port is not None and not 0 < port < 65536):
        raise SegScopeError(f"{field_name}: expected [user@]host[:port] (e.g. root@192.168.0.10:22), got {text!r}")
    return SshTarget(match["ipv6"] or match["host"], port, match["user"])


def fingerprint(key: paramiko.PKey) -> str:
    """The OpenSSH-style fingerprint, e.g. `SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU`."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")


class UnknownHostKey(BackendError):
    """The host is not in known_hosts; accept `fingerprint` only after checking it with the host's admin."""

    def __init__(self, host: str, key_type: str, fingerprint: str, known_hosts: Path):
        self.host, self.key_type, self.fingerprint, self.known_hosts = host, key_type, fingerprint, known_hosts
        super().__init__(
            f"{host}: unknown host key {key_type} {fingerprint} (not in {known_hosts}); compare it with "
            "`ssh-keygen -lf` of the host's key, then accept it (CLI: --accept-new-host-key)"
        )


class HostKeyChanged(BackendError):
    """The host offers a different key than known_hosts records: refused, never accepted automatically."""

    def __init__(self, host: str, offered: str, recorded: str, known_hosts: Path):
        self.host, self.offered, self.recorded = host, offered, recorded
        super().__init__(
            f"{host}: HOST KEY CHANGED, refusing to connect: {known_hosts} records {recorded} but the host offers "
            f"{offered} (someone may be intercepting the connection); if the host was reinstalled, remove the "
            f"old key with: ssh-keygen -R '{host}' -f '{known_hosts}'"
        )


class _VerifyPolicy(paramiko.MissingHostKeyPolicy):
    """Called by paramiko for hosts absent from known_hosts."""

    def __init__(self, accept: bool | str, known_hosts: Path):
        self.accept = accept
        self.known_hosts = known_hosts

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        offered = fingerprint(key)
        if self.accept is not True and self.accept != offered:
            raise UnknownHostKey(hostname, key.get_name(), offered, self.known_hosts)
        line = paramiko.hostkeys.HostKeyEntry([hostname], key).to_line()
        self.known_hosts.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        previous = self.known_hosts.read_bytes() if self.known_hosts.exists() else b""
        with self.known_hosts.open("a", encoding="ascii") as f:
            f.write(("\n" if previous and not previous.endswith(b"\n") else "") + line)


@dataclass
class SshOptions:
    """How to authenticate and verify. The password stays in memory only (it is needed to reconnect)."""

    key_filename: Path | None = None
    password: str | None = field(default=None, repr=False)
    passphrase: str | None = field(default=None, repr=False)
    allow_agent: bool = True
    look_for_keys: bool = True
    ssh_config: Path | None = DEFAULT_SSH_CONFIG
    known_hosts: Path = DEFAULT_KNOWN_HOSTS
    #: True accepts (and records) any unknown host key; a "SHA256:..." string accepts only that key.
    accept_new_host_key: bool | str = False
    connect_timeout: float = 15.0


@dataclass(frozen=True)
class Hop:
    """A target after `~/.ssh/config`: what to dial and how to log in."""

    label: str
    hostname: str
    port: int
    user: str | None
    identity_files: tuple[str, ...]
    proxy_jump: str | None
    known_hosts: Path


def resolve(target: SshTarget, options: SshOptions) -> Hop:
    """`target` after `~/.ssh/config` (the `options.ssh_config` file)."""
    config = paramiko.SSHConfig()
    path = options.ssh_config.expanduser() if options.ssh_config else None
    if path and path.is_file():
        try:
            config = paramiko.SSHConfig.from_path(str(path))
        except (OSError, ValueError, paramiko.ConfigParseError) as exc:  # ValueError: not UTF-8
            raise SegScopeError(f"{path}: cannot read the SSH config ({exc})") from None
    entry = config.lookup(target.host)
    try:
        port = target.port or int(entry.get("port", 22))
    except ValueError:
        raise SegScopeError(f"{path}: Host {target.host}: Port {entry.get('port')!r} is not a number") from None
    jump = entry.get("proxyjump")
    user_known = entry.get("userknownhostsfile", "").split()
    known_hosts = Path(user_known[0]) if user_known else options.known_hosts
    return Hop(
        label=str(target),
        hostname=entry.get("hostname", target.host),
        port=port,
        user=target.user or entry.get("user"),
        identity_files=tuple(entry.get("identityfile", [])),
        proxy_jump=None if not jump or jump.lower() == "none" else jump,
        known_hosts=known_hosts.expanduser(),
    )


class SshConnection:
    """An authenticated SSH connection (through ProxyJump hops if configured); `connect()` again after a drop."""

    def __init__(self, target: SshTarget, options: SshOptions):
        self.target = target
        self.options = options
        self.client: paramiko.SSHClient | None = None
        self._jumps: list[paramiko.SSHClient] = []

    @property
    def label(self) -> str:
        return str(self.target)

    @property
    def alive(self) -> bool:
        transport = self.client.get_transport() if self.client else None
        return bool(transport and transport.is_active())

    def connect(self) -> None:
        """(Re)connect: verify host keys and authenticate every hop, then the target."""
        self.close()
        target = resolve(self.target, self.options)
        jumps = target.proxy_jump.split(",") if target.proxy_jump else []
        hops = [resolve(parse_target(j, f"ProxyJump of {target.label}"), self.options) for j in jumps] + [target]
        sock = None
        try:
            for hop, next_hop in pairwise(hops):
                client = self._open(hop, sock, use_password=False)
                self._jumps.append(client)
                sock = self._tunnel(client, hop, next_hop)
            self.client = self._open(target, sock, use_password=True)
        except BaseException:
            self.close()
            raise

    def _tunnel(self, client: paramiko.SSHClient, via: Hop, target: Hop) -> paramiko.Channel:
        transport = client.get_transport()
        assert transport is not None
        try:
            return transport.open_channel("direct-tcpip", (target.hostname, target.port), ("127.0.0.1", 0),
                                          timeout=self.options.connect_timeout)
        except (paramiko.SSHException, OSError) as exc:
            raise BackendError(f"{via.label}: ProxyJump cannot reach {target.hostname}:{target.port} ({exc})") from None

    def _open(self, hop: Hop, sock: paramiko.Channel | None, use_password: bool) -> paramiko.SSHClient:
        options = self.options
        client = paramiko.SSHClient()
        try:
            if SYSTEM_KNOWN_HOSTS.is_file():
                client.load_system_host_keys(str(SYSTEM_KNOWN_HOSTS))
            if hop.known_hosts.is_file():
                client.load_host_keys(str(hop.known_hosts))
        except (OSError, ValueError, paramiko.SSHException) as exc:  # ValueError: not UTF-8
            raise SegScopeError(f"{hop.known_hosts}: cannot read known hosts ({exc})") from None
        client.set_missing_host_key_policy(_VerifyPolicy(options.accept_new_host_key, hop.known_hosts))
        key_files = [str(options.key_filename.expanduser())] if options.key_filename else \
            [str(Path(f).expanduser()) for f in hop.identity_files if Path(f).expanduser().is_file()]
        name = f"[{hop.hostname}]:{hop.port}" if hop.port != 22 else hop.hostname
        timeout = options.connect_timeout
        started = time.monotonic()
        try:
            client.connect(
                hop.hostname, hop.port, username=hop.user, password=options.password if use_password else None,
                key_filename=key_files or None, passphrase=options.passphrase, allow_agent=options.allow_agent,
                look_for_keys=options.look_for_keys, sock=sock, timeout=timeout, banner_timeout=timeout,
                auth_timeout=timeout, channel_timeout=timeout,
            )
            return client
        except BaseException as exc:  # noqa: BLE001 - close, then explain (or re-raise) every failure
            client.close()
            timed_out = time.monotonic() - started >= timeout
            raise self._explain(exc, hop, name, key_files, timed_out) from None

    def _explain(self, exc: BaseException, hop: Hop, name: str, key_files: list[str],
                 timed_out: bool) -> BaseException:
        """One actionable line for each way connecting fails."""
        who = f"{hop.user + '@' if hop.user else ''}{name}"
        if isinstance(exc, paramiko.BadHostKeyException):
            return HostKeyChanged(name, fingerprint(exc.key), fingerprint(exc.expected_key), hop.known_hosts)
        if isinstance(exc, paramiko.PasswordRequiredException):
            key_file = key_files[0] if key_files else ""
            return BackendError(f"{who}: key file {key_file} is encrypted: give its passphrase")
        if isinstance(exc, paramiko.AuthenticationException):
            tried = [f"key file {f}" for f in key_files]
            tried += ["ssh-agent"] if self.options.allow_agent else []
            tried += ["~/.ssh/id_*"] if self.options.look_for_keys else []
            tried += ["password"] if self.options.password else []
            return BackendError(f"{who}: authentication failed (tried {', '.join(tried) or 'nothing'}); check the "
                                "user name and that the key's .pub is in the host's authorized_keys")
        if isinstance(exc, socket.gaierror):
            return BackendError(f"{hop.hostname}: unknown host name (not in DNS, /etc/hosts or ~/.ssh/config)")
        if isinstance(exc, TIMEOUTS) or (timed_out and isinstance(exc, (paramiko.SSHException, EOFError))):
            return BackendError(f"{who}: no SSH answer within {self.options.connect_timeout:g} s; check host and "
                                "port, or raise the connect timeout on slow links")
        if isinstance(exc, (paramiko.ssh_exception.NoValidConnectionsError, ConnectionError)):
            return BackendError(f"{who}: connection refused; is sshd running and listening on port {hop.port}?")
        if isinstance(exc, (paramiko.SSHException, OSError, EOFError)):
            return BackendError(f"{who}: SSH connection failed ({exc or type(exc).__name__})")
        return exc

    def exec(self, command: str, timeout: float | None = None) -> paramiko.Channel:
        """Start `command` (already shell-quoted) on the host; its stdin/stdout are the channel. `timeout`:
        the longest the host may take to open it (default: the connect timeout)."""
        transport = self.client.get_transport() if self.client else None
        if transport is None or not transport.is_active():
            raise BackendError(f"{self.label}: not connected")
        try:
            channel = transport.open_session(timeout=timeout or self.options.connect_timeout)
            channel.exec_command(command)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise BackendError(f"{self.label}: cannot start a remote command ({exc})") from None
        return channel

    def run(self, command: str, timeout: float) -> tuple[int, str, str]:
        """Run a short command to completion: (exit status, stdout, stderr), apart so what a login shell says
        on stderr never mixes with the command's output."""
        channel = self.exec(command, timeout)
        channel.settimeout(timeout)
        try:
            output = channel.makefile("rb").read().decode("utf-8", "replace")
            errors = channel.makefile_stderr("rb").read().decode("utf-8", "replace")
            if not channel.status_event.wait(timeout):  # output ended, but no exit status comes
                raise TimeoutError
            return channel.recv_exit_status(), output, errors
        except TIMEOUTS:
            raise BackendError(f"{self.label}: `{command}` did not finish within {timeout:g} s") from None
        finally:
            channel.close()

    def sftp(self, timeout: float) -> paramiko.SFTPClient:
        """An SFTP session whose every answer the host must give within `timeout` seconds."""
        transport = self.client.get_transport() if self.client else None
        if transport is None or not transport.is_active():
            raise BackendError(f"{self.label}: not connected")
        try:
            channel = transport.open_session(timeout=timeout)
            channel.settimeout(timeout)
            channel.invoke_subsystem("sftp")
            return paramiko.SFTPClient(channel)
        except TIMEOUTS:
            raise BackendError(f"{self.label}: the host's SFTP server did not answer within {timeout:g} s") from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise BackendError(f"{self.label}: the host refuses SFTP ({exc}); enable the sftp subsystem in "
                               "sshd_config") from None

    def close(self) -> None:
        for client in [self.client, *reversed(self._jumps)]:
            if client is not None:
                client.close()
        self.client = None
        self._jumps = []
