"""The MindX SDK's one caller thread and its once-per-process streams, for `mindx.MindXBackend` (see its
docstring and docs/mindx-sdk-contract.md): every SDK call runs on one daemon thread, in submission order, and
the caller waits with a timeout, so a stuck call (`GetProtobuf` has none) hangs neither the app nor its exit;
`InitManager` and `CreateMultipleStreams` run once per process and `DestroyAllStreams` once (on close, when
opening fails, after a fatal stream error and at exit). Return codes become one-line `BackendError`s.
"""

from __future__ import annotations

import atexit
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from ..compat import TIMEOUTS
from ..errors import BackendError, CancelledError, SegScopeError
from .mindx_env import MindXSdk

#: Return codes (MxBase ErrorCodes.h) and what they mean.
ERROR_MEANINGS = {
    -1: "not initialised, or the send failed",
    1001: "general failure", 1002: "internal error (GetResult timed out)",
    1004: "invalid parameter (also a failed opencv decode)", 1011: "timeout",
    1013: "initialisation failed (e.g. a bad plugin property)", 1016: "not found",
    2001: "crop failed: no valid ROI box", 2006: "JPEG decode failed",
    6001: "stream already exists", 6002: "stream does not exist", 6003: "stream state change failed",
    6004: "stream creation failed", 6005: "invalid stream config", 6006: "invalid link or plugin id",
    6008: "transmission mode mismatch (plain vs unique-id sends)", 6010: "stream timeout",
    6014: "unknown plugin factory", 6015: "invalid plugin properties",
    7011: "metadata key missing", 7013: "metadata is null",
}
LOG_HINT = "details are in the MindX log (~/log/mindxsdk/logs or $MX_SDK_HOME/logs)"
RESTART_HINT = ("the MindX streams are destroyed; restart segscope to run again "
            "(the SDK creates streams once per process)")


def error_meaning(code: int) -> str:
    if code in ERROR_MEANINGS:
        return ERROR_MEANINGS[code]
    if 3001 <= code <= 3010:
        return "model inference failed"
    if 5001 <= code <= 5003:
        return "queue error"
    return "ACL/CANN error" if code >= 100000 else "unknown code"


def check_code(call: str, code: int, message: bytes = b"", hint: str = "") -> None:
    """A non-zero return code as a one-line BackendError with the SDK's own message(s)."""
    if code != 0:
        lines = message.decode("utf-8", "replace").splitlines()
        text = " | ".join(line.strip() for line in lines if line.strip())
        raise BackendError(f"MindX {call} failed with code {code} ({error_meaning(code)}): "
                           f"{text or LOG_HINT}{hint}")


class _SdkThread:
    """One daemon thread that makes every SDK call, in submission order."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = \
            queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="mindx-sdk", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn, args = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                    future.set_exception(exc)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._jobs.put((future, fn, args))
        return future

    def stop(self) -> None:
        self._jobs.put(None)


@dataclass
class _ProcessState:
    """What the SDK allows once per process."""

    session: SdkSession | None = None
    streams_used: bool = False
    atexit_registered: bool = False


_PROCESS = _ProcessState()


def _destroy_at_exit() -> None:
    if _PROCESS.session is not None:
        try:
            _PROCESS.session.destroy()
        except SegScopeError:
            pass  # nothing left to tell at exit


class SdkSession:
    """The process's StreamManagerApi: initialised once, streams created once and destroyed once."""

    def __init__(self, sdk: MindXSdk) -> None:
        self.sdk = sdk
        self.thread = _SdkThread()
        self.stuck = False  # a call never returned: the thread is blocked for good
        self.destroyed = False
        self.api = self.call(sdk.api.StreamManagerApi)

    @classmethod
    def open(cls, sdk: MindXSdk, config: bytes) -> SdkSession:
        if _PROCESS.session is not None:
            raise BackendError("a MindX backend is already open in this process (the SDK runs one set of "
                               "streams per process): close it before opening another")
        if _PROCESS.streams_used:
            raise BackendError("MindX streams were already created and destroyed in this process and the SDK "
                               "cannot create them again: restart segscope to open a pipeline")
        session = cls(sdk)
        _PROCESS.session, _PROCESS.streams_used = session, True
        if not _PROCESS.atexit_registered:
            atexit.register(_destroy_at_exit)
            _PROCESS.atexit_registered = True
        try:
            check_code("InitManager", session.call(session.api.InitManager))
            check_code("CreateMultipleStreams", session.call(session.api.CreateMultipleStreams, config))
        except BaseException:
            session.destroy(quiet=True)
            raise
        return session

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None,
             cancel: threading.Event | None = None) -> Any:
        """Run `fn(*args)` on the SDK thread; TimeoutError after `timeout` s (the call goes on there)."""
        if self.stuck:
            raise BackendError(f"the MindX SDK thread is blocked in an earlier call; {RESTART_HINT}")
        future = self.thread.submit(fn, *args)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                return future.result(timeout=0.05)
            except TIMEOUTS:
                if cancel is not None and cancel.is_set():
                    raise CancelledError("MindX request cancelled") from None
                if deadline is not None and time.monotonic() > deadline:
                    self.stuck = True
                    raise

    def destroy(self, quiet: bool = False) -> None:
        """DestroyAllStreams once: on the SDK thread, or from here when a call blocks that thread
        (a GetProtobuf waiting for a result that will not come); destroying the streams releases it."""
        if self.destroyed:
            return
        self.destroyed = True
        try:
            future = None if self.stuck else self.thread.submit(self.api.DestroyAllStreams)
            try:
                code = self.api.DestroyAllStreams() if future is None else future.result(timeout=5)
            except TIMEOUTS:
                assert future is not None  # only the future's result times out
                code = self.api.DestroyAllStreams() if future.cancel() else future.result(timeout=60)
            if not quiet:
                check_code("DestroyAllStreams", code)
        except TIMEOUTS:
            if not quiet:
                raise BackendError("MindX DestroyAllStreams did not return within 60 s") from None
        finally:
            self.thread.stop()
            _PROCESS.session = None
