"""The client's side of one worker process: start it, exchange frames, cancel, shut it down.

Reads poll the channel in short slices so a cancel or a deadline is noticed while waiting. A cancel
only interrupts between frames (a half-read frame is read to its end, so the stream stays in step);
the worker's late answer to a cancelled request is recognised by its id and dropped.
"""

from __future__ import annotations

import shlex
import threading
import time

import paramiko

from ..compat import TIMEOUTS
from ..errors import BackendError, CancelledError
from . import protocol as p
from . import replies
from .connection import SshConnection

#: Seconds between checks for cancel and deadlines while waiting on the channel.
POLL = 0.05
#: Bytes handed to the channel per send call.
CHUNK = 256 * 1024
#: How much of the worker's stderr is kept to explain a failure.
STDERR_TAIL = 4096


class WorkerLost(BackendError):
    """The worker or the connection is gone; the next request starts a new one."""


class RequestTimeout(BackendError):
    """No answer in time; the worker was stopped and the next request starts a new one."""


def worker_command(python: str, worker_dir: str, pipeline: str, backend: str, max_pixels: int | None,
                   set_env: str | None, dataset: str | None = None) -> str:
    """The remote command line, quoted for a POSIX shell (and run through `sh -c` whatever the login shell).
    `dataset`: the host folder whose images requests may name by path."""
    args = [python, f"{worker_dir}/worker.py"]
    if set_env:  # sourced by the worker, which stops it (and all it started) if the client goes away
        args += ["--set-env", set_env]
    args += ["--pipeline", pipeline, "--backend", backend]
    if max_pixels:
        args += ["--max-pixels", str(int(max_pixels))]
    if dataset:
        args += ["--dataset", dataset]
    return "sh -c " + shlex.quote("exec " + shlex.join(args))


def _describe_exit(status: int | None) -> str:
    if status is None:
        return "still running"
    return p.EXIT_CODES.get(status, f"exit status {status}")


class WorkerSession:
    """A worker running on the host, spoken to over one SSH channel."""

    def __init__(self, connection: SshConnection, command: str, startup_timeout: float):
        self.connection = connection
        self.label = connection.label
        self.dead = False
        self.stderr = bytearray()
        self.hello: dict = {}
        self._partial = 0  # bytes of the frame being read
        self._next_id = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.channel = connection.exec(command)
        self.channel.settimeout(POLL)
        try:
            msg = self._receive(time.monotonic() + startup_timeout, None)
        except replies.InvalidReply:
            self.close()
            raise
        except p.ProtocolError as exc:
            noise = self.stderr_tail()
            self.close()
            raise p.ProtocolError(f"{exc}; if the host's login shell prints anything, make it print nothing on "
                                  f"stdout for non-interactive sessions{noise}") from None
        except RequestTimeout:
            raise BackendError(f"{self.label}: the worker did not start within {startup_timeout:g} s"
                               f"{self.stderr_tail()}; raise the startup timeout if the host is slow") from None
        except BaseException:
            self.close()
            raise
        if msg.type != p.MsgType.HELLO:
            self.close()
            raise p.ProtocolError(f"{self.label}: the worker answered {msg.type.name} instead of HELLO")
        self.hello = msg.meta

    # --- low level -------------------------------------------------------------------------------------

    def stderr_tail(self) -> str:
        lines = bytes(self.stderr).decode("utf-8", "replace").strip().splitlines()
        return f"; its stderr ends: {' | '.join(lines[-3:])}" if lines else ""

    def _drain_stderr(self) -> None:
        while self.channel.recv_stderr_ready():
            self.stderr += self.channel.recv_stderr(65536)
            del self.stderr[:-STDERR_TAIL]

    def _lost(self) -> WorkerLost:
        self.dead = True
        if not self.connection.alive:
            return WorkerLost(f"{self.label}: the SSH connection dropped; the next request reconnects")
        deadline = time.monotonic() + 1.0
        while not self.channel.exit_status_ready() and time.monotonic() < deadline:
            time.sleep(POLL)
        self._drain_stderr()
        status = self.channel.recv_exit_status() if self.channel.exit_status_ready() else None
        return WorkerLost(f"{self.label}: the worker stopped ({_describe_exit(status)}){self.stderr_tail()}; "
                          "the next request starts a new one")

    def _read_exact(self, n: int, deadline: float, cancel: threading.Event | None) -> bytes:
        chunks: list[bytes] = []
        have = 0
        while have < n:
            self._drain_stderr()
            if self._partial == 0 and cancel is not None and cancel.is_set():
                raise CancelledError(f"{self.label}: request cancelled")
            if time.monotonic() > deadline:
                raise self._timeout()
            try:
                chunk = self.channel.recv(n - have)
            except TIMEOUTS:
                continue
            except (OSError, EOFError, paramiko.SSHException):
                raise self._lost() from None
            if not chunk:
                raise self._lost()
            chunks.append(chunk)
            have += len(chunk)
            self._partial += len(chunk)
            self.bytes_received += len(chunk)
        return b"".join(chunks)

    def _timeout(self) -> RequestTimeout:
        self.kill()
        return RequestTimeout(f"{self.label}: no answer from the worker in time; it was stopped and the next "
                              "request starts a new one (raise the request timeout for slow hosts)")

    def _receive(self, deadline: float, cancel: threading.Event | None) -> p.Message:
        self._partial = 0
        try:
            msg = p.read_message(lambda n: self._read_exact(n, deadline, cancel), p.TO_CLIENT)
        except p.ProtocolError as exc:
            self.kill()
            raise p.ProtocolError(f"{self.label}: malformed frame from the worker: {exc}") from None
        finally:
            self._partial = 0
        if msg is None:
            raise self._lost()
        try:
            replies.check(msg)
        except replies.InvalidReply as exc:
            if msg.type == p.MsgType.HELLO:  # stop what the bad HELLO runs as, where it says so usably
                self.hello = {k: msg.meta[k] for k in ("pid", "pgid") if type(msg.meta.get(k)) is int}
            self.kill()
            raise replies.InvalidReply(exc.field, self.label) from None
        if msg.type == p.MsgType.ERROR and msg.meta.get("id") is None:
            self.kill()
            kind = msg.meta.get("kind")
            what = "cannot open the pipeline" if kind == "startup" else "stopped"
            raise WorkerLost(f"{self.label}: the worker {what}: {msg.meta.get('message')}")
        return msg

    def _send(self, frame: bytes, deadline: float) -> None:
        """Write a whole frame (never half: the worker would lose step), within the deadline."""
        offset = 0
        while offset < len(frame):
            if time.monotonic() > deadline:
                raise self._timeout()
            try:
                sent = self.channel.send(frame[offset : offset + CHUNK])
            except TIMEOUTS:
                continue
            except (OSError, EOFError, paramiko.SSHException):
                raise self._lost() from None
            if not sent:  # paramiko's way of saying the channel is closed
                raise self._lost()
            offset += sent
            self.bytes_sent += sent

    # --- requests --------------------------------------------------------------------------------------

    def request(self, meta: dict, blobs: tuple[bytes, ...], timeout: float,
                cancel: threading.Event) -> tuple[p.Message, float]:
        """Send one INFER and wait for its RESULT: (message, upload seconds). Errors raise."""
        request_id, uploaded = self.send_request(meta, blobs, timeout)
        return self.receive_result(request_id, timeout, cancel), uploaded

    def send_request(self, meta: dict, blobs: tuple[bytes, ...], timeout: float) -> tuple[int, float]:
        """Send one INFER without waiting for its answer: (its id, upload seconds). The worker queues it
        behind those sent before, so the next upload can travel while the host works on the current one."""
        if self.dead:
            raise WorkerLost(f"{self.label}: the worker is gone")
        request_id = self._next_id
        self._next_id += 1
        started = time.perf_counter()
        self._send(p.encode(p.Message(p.MsgType.INFER, {"id": request_id, **meta}, blobs)),
                   time.monotonic() + timeout)
        return request_id, time.perf_counter() - started

    def cancel_request(self, request_id: int, timeout: float) -> None:
        """Ask the worker to drop `request_id` (its answer, an ERROR, is skipped by the next receive)."""
        if not self.dead:
            self._send(p.encode(p.Message(p.MsgType.CANCEL, {"id": request_id})), time.monotonic() + timeout)

    def receive_result(self, request_id: int, timeout: float, cancel: threading.Event) -> p.Message:
        """Wait up to `timeout` seconds for the RESULT of `request_id`, skipping the late answers of requests
        given up before it. Errors raise; a cancel tells the worker to drop the request."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = self._receive(deadline, cancel)
            except CancelledError:
                self.cancel_request(request_id, timeout)
                raise
            if msg.meta.get("id") != request_id:
                continue  # the late answer to a cancelled request
            if msg.type == p.MsgType.RESULT:
                return msg
            if msg.type == p.MsgType.ERROR:
                message = str(msg.meta.get("message"))
                if msg.meta.get("kind") == "cancelled":
                    raise CancelledError(f"{self.label}: request cancelled")
                raise BackendError(f"{self.label}: {message}")
            self.kill()
            raise p.ProtocolError(f"{self.label}: unexpected {msg.type.name} from the worker during a request")

    # --- shutdown --------------------------------------------------------------------------------------

    def kill(self) -> None:
        """Stop the worker's process group now (over a second channel) and close this one."""
        self.dead = True
        pid, pgid = self.hello.get("pid"), self.hello.get("pgid")
        if isinstance(pid, int) and pid > 1 and not self.channel.exit_status_ready() and self.connection.alive:
            targets = ([f"-{pgid}"] if isinstance(pgid, int) and pgid > 1 else []) + [str(pid)]
            try:
                self.connection.run(f"kill -KILL -- {' '.join(targets)} 2>/dev/null", timeout=10.0)
            except BackendError:
                pass
        self.channel.close()

    def close(self, grace: float = 3.0) -> None:
        """Close stdin (the worker exits at EOF), wait up to `grace` seconds, then kill what is left."""
        if self.channel.closed:
            return
        try:
            self.channel.shutdown_write()
            deadline = time.monotonic() + grace
            while not self.channel.exit_status_ready() and time.monotonic() < deadline:
                self._drain_stderr()
                try:  # drain a result still in flight so the worker is not blocked writing it
                    if not self.channel.recv(1 << 20):
                        time.sleep(POLL)
                except TIMEOUTS:
                    pass
        except (OSError, EOFError, paramiko.SSHException):
            pass
        self.kill()
