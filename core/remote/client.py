"""The client's side of one worker session: start it, exchange frames, cancel, stop it and all it started.

A reader thread takes each frame off the channel as it comes and checks it (`core.remote.replies`); a
heartbeat thread tells the worker that the client is still there. No wait is unbounded: the start and every
request wait while the host says something at least every `timeout` seconds (the worker's supervisor sends
a HEARTBEAT every few whatever its backend does, a slow first model load included), a send waits while the
host takes bytes as often, and a cancel or Ctrl+C ends any wait at once. A worker that answers wrong, stops
answering or is closed has its input closed, gets a short grace to end by itself, and then everything of its
session on the host is stopped over a second channel (`Launch.stop`: every process carrying the session's
token, the daemons a `--set-env` script started included). The late answer to a cancelled request is
recognised by its id and dropped.
"""

from __future__ import annotations

import queue
import secrets
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import paramiko

from ..compat import TIMEOUTS
from ..errors import BackendError, CancelledError
from . import protocol as p
from . import replies
from .connection import SshConnection
from .worker import SESSION_VARIABLE

#: Seconds between checks for cancel and deadlines while waiting on the channel.
POLL = 0.05
#: Bytes handed to the channel per send call.
CHUNK = 256 * 1024
#: How much of the worker's stderr is kept to explain a failure.
STDERR_TAIL = 4096
#: Seconds a closed worker gets to end by itself before its session is stopped.
CLOSE_GRACE = 0.5
#: Seconds the stop command (and a cancel's frame) may take.
STOP_SECONDS = 5.0


class WorkerLost(BackendError):
    """The worker or the connection is gone; the next request starts a new one."""


class RequestTimeout(BackendError):
    """The host said nothing for the timeout; the worker was stopped and the next request starts a new one."""


class _Closed(Exception):
    """The session was closed here: the reader thread ends."""


@dataclass(frozen=True)
class Launch:
    """How a worker session starts on the host and how everything of it is stopped."""

    command: str  # shell command; its environment names the session (`worker.SESSION_VARIABLE`)
    stop: str  # shell command stopping every process that carries that name


def launch(args: list[str], python: str, worker_script: str) -> Launch:
    """`args` run on the host under a fresh session token (run through `sh -c` whatever the login shell),
    stopped with `python worker_script --stop TOKEN`."""
    token = secrets.token_hex(8)
    script = f"{SESSION_VARIABLE}={token}; export {SESSION_VARIABLE}; exec {shlex.join(args)}"
    return Launch("sh -c " + shlex.quote(script), shlex.join([python, worker_script, "--stop", token]))


def worker_command(python: str, worker_dir: str, pipeline: str, backend: str, max_pixels: int | None,
                   set_env: str | None, dataset: str | None, timeout: float,
                   input_cache: tuple[str, int] | None = None) -> Launch:
    """The worker's launch. `dataset`: the host folder whose images requests may name by path; `timeout`:
    seconds of silence from the client after which the worker ends (and a `--set-env` script is stopped);
    `input_cache`: the host folder and size cap of its input cache (None: off)."""
    script = f"{worker_dir}/worker.py"
    args = [python, script, "--timeout", f"{timeout:g}"]
    if set_env:  # sourced by the worker, which stops it (and all it started) if it hangs or the client goes
        args += ["--set-env", set_env]
    args += ["--pipeline", pipeline, "--backend", backend]
    if max_pixels:
        args += ["--max-pixels", str(int(max_pixels))]
    if dataset:
        args += ["--dataset", dataset]
    if input_cache is not None:
        args += ["--input-cache", input_cache[0], "--input-cache-bytes", str(int(input_cache[1]))]
    return launch(args, python, script)


def _describe_exit(status: int | None) -> str:
    if status is None:
        return "still running"
    return p.EXIT_CODES.get(status, f"exit status {status}")


class WorkerSession:
    """A worker running on the host, spoken to over one SSH channel; `timeout`: the longest silence taken."""

    def __init__(self, connection: SshConnection, launch: Launch, timeout: float):
        self.connection = connection
        self.label = connection.label
        self.launch = launch
        self.timeout = timeout
        self.dead = False
        self.stderr = bytearray()
        self.hello: dict = {}
        self.bytes_sent = 0
        self.bytes_received = 0
        self._next_id = 0
        self._heard = time.monotonic()  # when the host last sent a byte
        self._inbox: queue.Queue[p.Message | None] = queue.Queue()  # None: wake up, a failure is recorded
        self._failure: BackendError | None = None
        self._send_lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._closing = False
        self._closed = threading.Event()
        self.channel = connection.exec(launch.command)
        self.channel.settimeout(POLL)
        threading.Thread(target=self._read_frames, name="segscope-remote-frames", daemon=True).start()
        threading.Thread(target=self._beat, name="segscope-remote-heartbeat", daemon=True).start()
        try:
            msg = self._next(None)
        except RequestTimeout:
            raise RequestTimeout(f"{self.label}: no word from the worker for {timeout:g} s while it started"
                                 f"{self.stderr_tail()}; it was stopped (raise --remote-timeout if the host is "
                                 "that slow)") from None
        except replies.InvalidReply:
            raise
        except p.ProtocolError as exc:
            raise p.ProtocolError(f"{exc}; if the host's login shell prints anything, make it print nothing on "
                                  f"stdout for non-interactive sessions{self.stderr_tail()}") from None
        except BaseException as exc:
            self.close_after(exc)
            raise
        if msg.type != p.MsgType.HELLO:
            self._give_up(p.ProtocolError(f"{self.label}: the worker answered {msg.type.name} instead of HELLO"))
        self.hello = msg.meta

    # --- reading (the reader thread) -------------------------------------------------------------------

    def stderr_tail(self) -> str:
        lines = bytes(self.stderr).decode("utf-8", "replace").strip().splitlines()
        return f"; its stderr ends: {' | '.join(lines[-3:])}" if lines else ""

    def _drain_stderr(self) -> None:
        while self.channel.recv_stderr_ready():
            self.stderr += self.channel.recv_stderr(65536)
            del self.stderr[:-STDERR_TAIL]
            self._heard = time.monotonic()

    def _lost(self) -> WorkerLost:
        if not self.connection.alive:
            return WorkerLost(f"{self.label}: the SSH connection dropped; the next request reconnects")
        deadline = time.monotonic() + 1.0
        while not self.channel.exit_status_ready() and time.monotonic() < deadline:
            time.sleep(POLL)
        self._drain_stderr()
        status = self.channel.recv_exit_status() if self.channel.exit_status_ready() else None
        return WorkerLost(f"{self.label}: the worker stopped ({_describe_exit(status)}){self.stderr_tail()}; "
                          "the next request starts a new one")

    def _read_exact(self, n: int) -> bytes:
        chunks: list[bytes] = []
        have = 0
        while have < n:
            if self._closed.is_set():
                raise _Closed
            self._drain_stderr()
            try:
                chunk = self.channel.recv(n - have)
            except TIMEOUTS:
                continue
            except (OSError, EOFError, paramiko.SSHException):
                chunk = b""
            if not chunk:
                if self._closing:
                    raise _Closed
                raise self._lost()
            self._heard = time.monotonic()
            chunks.append(chunk)
            have += len(chunk)
            self.bytes_received += len(chunk)
        return b"".join(chunks)

    def _read_frames(self) -> None:
        """The reader thread: checked frames into the inbox (heartbeats only refresh `_heard`) until the
        session closes; the first failure is recorded for the waiting thread."""
        try:
            while True:
                try:
                    msg = p.read_message(self._read_exact, p.TO_CLIENT)
                except p.ProtocolError as exc:
                    raise p.ProtocolError(f"{self.label}: malformed frame from the worker: {exc}; the worker was "
                                          "stopped") from None
                if msg is None:
                    raise self._lost()
                self._check(msg)
                if msg.type != p.MsgType.HEARTBEAT:
                    self._inbox.put(msg)
        except _Closed:
            return
        except BackendError as exc:
            self._fail(exc)
        except Exception as exc:  # noqa: BLE001 - a bug here must still end the wait, in one line
            self._fail(BackendError(f"{self.label}: reading the worker's frames failed ({type(exc).__name__}: "
                                    f"{exc})"))

    def _check(self, msg: p.Message) -> None:
        try:
            replies.check(msg)
        except replies.InvalidReply as exc:
            raise replies.InvalidReply(exc.field, self.label) from None
        if msg.type == p.MsgType.ERROR and msg.meta.get("id") is None:
            what = "cannot open the pipeline" if msg.meta.get("kind") == "startup" else "stopped"
            raise WorkerLost(f"{self.label}: the worker {what}: {msg.meta.get('message')}")

    # --- failing ---------------------------------------------------------------------------------------

    def _fail(self, exc: BackendError) -> None:
        """Record the session's first failure (any thread) and wake whoever waits for a frame."""
        if self._failure is None:
            self._failure = exc
        self.dead = True
        self._inbox.put(None)

    def _give_up(self, exc: BackendError | None = None) -> None:
        """Raise the session's failure (`exc` unless one came first) once the worker and all it started on
        the host are stopped."""
        if exc is not None:
            self._fail(exc)
        self.close(stop=True)
        assert self._failure is not None
        raise self._failure

    # --- writing ---------------------------------------------------------------------------------------

    def _send(self, frame: bytes, patience: float | None = None, wait: bool = True) -> None:
        """Write a whole frame (never half: the worker would lose step) while the host takes bytes at least
        every `patience` seconds, or by default says something at least every timeout (then it is busy, not
        gone). Without `wait`, nothing is sent while another frame is on its way. A failure recorded meanwhile
        (the host answered wrong) ends the send."""
        busy_counts = patience is None
        patience = self.timeout if patience is None else patience
        if not self._send_lock.acquire(blocking=wait):
            return
        try:
            if self._failure is None and self.dead:
                raise WorkerLost(f"{self.label}: the worker is gone")
            offset = 0
            moved = time.monotonic()
            while offset < len(frame) and self._failure is None:
                if time.monotonic() - (max(moved, self._heard) if busy_counts else moved) > patience:
                    self._fail(RequestTimeout(
                        f"{self.label}: the host stopped answering: its worker took no input and said nothing for "
                        f"{patience:g} s; the worker was stopped and the next request starts a new one (raise "
                        "--remote-timeout on a slow link)"))
                    break
                try:
                    sent = self.channel.send(frame[offset : offset + CHUNK])
                except TIMEOUTS:
                    continue
                except (OSError, EOFError, paramiko.SSHException):
                    sent = 0
                if not sent:  # paramiko's way of saying the channel is closed
                    self._fail(self._lost())
                    break
                offset += sent
                moved = time.monotonic()
                self.bytes_sent += sent
            if offset < len(frame):
                self.dead = True
        finally:
            self._send_lock.release()
        if self._failure is not None:
            self._give_up()

    def _beat(self) -> None:
        """The heartbeat thread: a HEARTBEAT every interval, so the worker knows the client is still there."""
        frame = p.encode(p.Message(p.MsgType.HEARTBEAT))
        while not self._closed.wait(p.heartbeat_interval(self.timeout)):
            if self.dead or self._closing:
                return
            try:
                self._send(frame, wait=False)
            except (BackendError, _Closed):
                return

    # --- waiting ---------------------------------------------------------------------------------------

    def _next(self, cancel: threading.Event | None) -> p.Message:
        """The next frame (not a heartbeat) from the worker; raises once the host is silent for the timeout,
        the session failed (after stopping it) or `cancel` is set (even with an answer already in: a request
        cancelled, e.g. by a `close` from another thread, never returns as if it had not been)."""
        while True:
            if cancel is not None and cancel.is_set():
                raise CancelledError(f"{self.label}: request cancelled")
            try:
                msg = self._inbox.get(timeout=POLL)
            except queue.Empty:
                msg = None
            if msg is not None:
                return msg
            if self._failure is not None:
                self._give_up()
            if time.monotonic() - self._heard > self.timeout:
                self._give_up(RequestTimeout(
                    f"{self.label}: the host stopped answering: nothing from its worker for {self.timeout:g} s; "
                    "the worker was stopped and the next request starts a new one (raise --remote-timeout on a "
                    "slow link)"))

    # --- requests --------------------------------------------------------------------------------------

    def request(self, meta: dict, blobs: tuple[bytes, ...], cancel: threading.Event) -> tuple[p.Message, float]:
        """Send one INFER (with its image: the host never asks for it) and wait for its RESULT: (message, upload
        seconds). Errors raise."""
        request_id, uploaded = self.send_request(meta, blobs)
        return self.receive_result(request_id, cancel), uploaded

    def send_request(self, meta: dict, blobs: tuple[bytes, ...]) -> tuple[int, float]:
        """Send one INFER without waiting for its answer: (its id, upload seconds). The worker queues it
        behind those sent before, so the next upload can travel while the host works on the current one."""
        request_id = self._next_id
        self._next_id += 1
        started = time.perf_counter()
        self._send(p.encode(p.Message(p.MsgType.INFER, {"id": request_id, **meta}, blobs)))
        return request_id, time.perf_counter() - started

    def cancel_request(self, request_id: int) -> None:
        """Ask the worker to drop `request_id` (its answer, an ERROR, is skipped by the next receive)."""
        if not self.dead:
            self._send(p.encode(p.Message(p.MsgType.CANCEL, {"id": request_id})), patience=STOP_SECONDS)

    def _drop_quietly(self, request_id: int) -> None:
        try:
            self.cancel_request(request_id)
        except BackendError:
            pass  # the worker takes nothing more: it was stopped

    def receive_result(self, request_id: int, cancel: threading.Event,
                       data: Callable[[], bytes] | None = None) -> p.Message:
        """Wait for the RESULT of `request_id`, skipping the late answers of requests given up before it; where
        the host asks for its bytes (NEED: it was sent as a content key the host does not hold), send `data()`.
        Errors raise; a cancel, or `data` failing, tells the worker to drop the request."""
        while True:
            try:
                msg = self._next(cancel)
            except CancelledError:
                self._drop_quietly(request_id)
                raise
            if msg.meta.get("id") != request_id:
                continue  # the late answer to a cancelled request
            if msg.type == p.MsgType.RESULT:
                return msg
            if msg.type == p.MsgType.NEED and data is not None:
                try:
                    blob = data()
                except BaseException:
                    self._drop_quietly(request_id)
                    raise
                self._send(p.encode(p.Message(p.MsgType.DATA, {"id": request_id}, (blob,))))
                data = None  # asked once: a second NEED is the host's protocol error
                continue
            if msg.type == p.MsgType.ERROR:
                if msg.meta.get("kind") == "cancelled":
                    raise CancelledError(f"{self.label}: request cancelled")
                raise BackendError(f"{self.label}: {msg.meta.get('message')}")
            self._give_up(p.ProtocolError(f"{self.label}: unexpected {msg.type.name} from the worker during a "
                                          "request"))

    # --- shutdown --------------------------------------------------------------------------------------

    def close(self, grace: float = CLOSE_GRACE, stop: bool = False, stop_seconds: float = STOP_SECONDS) -> None:
        """Close the worker's input (it ends, and so does all it started), wait up to `grace` seconds for it to
        exit, then, if it has not (or with `stop`), stop everything of its session on the host."""
        with self._close_lock:  # a second caller returns once the first has finished
            if self._closing:
                return
            self._closing = True
            self.dead = True
            try:
                self.channel.shutdown_write()
            except (OSError, EOFError, paramiko.SSHException):
                pass
            deadline = time.monotonic() + grace
            while not self.channel.exit_status_ready() and time.monotonic() < deadline and self.connection.alive:
                time.sleep(POLL)  # the reader thread still takes what the worker sends meanwhile
            if (stop or not self.channel.exit_status_ready()) and self.connection.alive:
                try:
                    self.connection.run(self.launch.stop, timeout=stop_seconds)
                except BackendError:
                    pass  # unreachable now: the host side ends the session by itself when the connection goes
            self._closed.set()
            self.channel.close()

    def close_after(self, exc: BaseException | None) -> None:
        """`close`, in a second or two where `exc` is the user's Ctrl+C (the host side ends the session by
        itself once its input closes or its connection goes)."""
        if isinstance(exc, KeyboardInterrupt):
            self.close(grace=0.5, stop_seconds=1.0)
        else:
            self.close()
