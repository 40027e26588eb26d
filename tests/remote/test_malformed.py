"""Malformed frames are rejected by both ends: the real worker (locally and over SSH) and the client."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from segscope.core.remote import protocol as p
from segscope.core.remote import worker
from segscope.core.remote.backend import RemoteBackend
from segscope.core.remote.client import Launch, WorkerLost, WorkerSession, launch
from segscope.core.remote.connection import SshConnection, SshOptions, parse_target

from .sshd import Sshd, processes_mentioning, unique, wait_until
from .test_crop_upload import textured_png

WORKER = Path(worker.__file__)
#: What a real worker's HELLO holds (pid and pgid are the fake worker's own).
VALID_HELLO = {"protocol": p.PROTOCOL_VERSION, "pid": 2, "pgid": 2, "backend": "fake", "device": "none",
               "input_size": [8, 8], "class_names": ["background", "defect"], "details": {}, "versions": {}}


class LocalWorker:
    """The real worker script as a local child process, spoken to through pipes."""

    def __init__(self, pipeline: Path, *options: str):
        self.process = subprocess.Popen([sys.executable, str(WORKER), "--pipeline", str(pipeline),
                                         "--backend", "embedded", *options],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def read(self) -> p.Message | None:
        return p.read_message(self.process.stdout.read, p.TO_CLIENT)

    def write(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def finish(self) -> int:
        self.process.stdin.close()
        code = self.process.wait(timeout=30)
        self.process.stdout.close()
        self.process.stderr.close()
        return code


def corrupt(frame: bytes, position: int = -1) -> bytes:
    data = bytearray(frame)
    data[position] ^= 0xFF
    return bytes(data)


def test_the_worker_says_hello_and_exits_when_stdin_closes(tiny_model_project) -> None:
    local = LocalWorker(tiny_model_project.pipeline)
    hello = local.read()
    assert hello.type == p.MsgType.HELLO and hello.meta["backend"] == "embedded"
    assert hello.meta["protocol"] == p.PROTOCOL_VERSION
    # the serving process, a child of the supervisor the client started
    assert Path(f"/proc/{hello.meta['pid']}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(local.process.pid)
    assert local.finish() == p.EXIT_OK


@pytest.mark.parametrize(("garbage", "reason"), [
    (lambda: corrupt(p.encode(p.Message(p.MsgType.INFER, {"id": 1}, (b"png",)))), "crc32"),
    (lambda: b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "bad frame magic"),
    (lambda: p.encode(p.Message(p.MsgType.HELLO, {})), "unexpected message type HELLO"),
])
def test_the_worker_rejects_a_malformed_frame(tiny_model_project, garbage, reason: str) -> None:
    local = LocalWorker(tiny_model_project.pipeline)
    assert local.read().type == p.MsgType.HELLO
    local.write(garbage())
    error = local.read()
    assert error.type == p.MsgType.ERROR and error.meta["kind"] == "protocol" and error.meta["id"] is None
    assert "the worker rejected a frame from the client" in error.meta["message"] and reason in error.meta["message"]
    assert local.finish() == p.EXIT_PROTOCOL


def test_the_worker_reports_a_malformed_request_and_keeps_serving(tiny_model_project) -> None:
    local = LocalWorker(tiny_model_project.pipeline)
    local.read()
    local.write(p.encode(p.Message(p.MsgType.INFER, {"id": 4, "roi": [1, 2, 3]}, (b"x",))))
    error = local.read()
    assert (error.type, error.meta["id"], error.meta["kind"]) == (p.MsgType.ERROR, 4, "error")
    assert "roi must be [x0, y0, x1, y1] integers" in error.meta["message"]
    local.write(p.encode(p.Message(p.MsgType.INFER, {"id": 5, "roi": None}, (b"not an image",))))
    assert "not a readable image" in local.read().meta["message"]
    assert local.finish() == p.EXIT_OK


def infer(request_id: int, blobs: tuple[bytes, ...] = (), **meta: object) -> bytes:
    return p.encode(p.Message(p.MsgType.INFER, {"id": request_id, "roi": None, "probabilities": "float32", **meta},
                              blobs))


def test_a_key_alone_is_asked_for_once_then_served_from_the_host_cache(tiny_model_project, tmp_path: Path) -> None:
    image = textured_png(80, 60, seed=2)
    local = LocalWorker(tiny_model_project.pipeline, "--input-cache", str(tmp_path / "inputs"))
    local.read()
    local.write(infer(1, key="1/abc"))
    need = local.read()
    assert (need.type, need.meta) == (p.MsgType.NEED, {"id": 1})
    local.write(p.encode(p.Message(p.MsgType.DATA, {"id": 1}, (image,))))
    first = local.read()
    local.write(infer(2, key="1/abc"))  # served from the cache: no NEED
    second = local.read()
    local.write(infer(3, key="1/abc", blobs=(image,)))  # its bytes along although held
    third = local.read()
    assert [m.type for m in (first, second, third)] == [p.MsgType.RESULT] * 3
    assert [m.meta["cache"] for m in (first, second, third)] == ["miss", "hit", "sent"]
    assert first.blobs == second.blobs == third.blobs
    assert local.finish() == p.EXIT_OK


def test_answers_leave_in_request_order(tiny_model_project, tmp_path: Path) -> None:
    """A result is encoded on its own thread while the next request runs: the next request's NEED (or ERROR)
    still comes after it, or the client, waiting for the first, would skip it."""
    local = LocalWorker(tiny_model_project.pipeline, "--input-cache", str(tmp_path / "inputs"))
    local.read()
    image = textured_png(640, 480, seed=3)
    local.write(infer(1, blobs=(image,)) + infer(2, key="1/unknown") + infer(3, roi=[1, 2, 3]))
    first, second = local.read(), local.read()
    assert (first.type, first.meta["id"], second.type, second.meta["id"]) == (p.MsgType.RESULT, 1, p.MsgType.NEED, 2)
    local.write(p.encode(p.Message(p.MsgType.DATA, {"id": 2}, (image,))))
    third, fourth = local.read(), local.read()
    assert (third.type, third.meta["id"], fourth.type, fourth.meta["id"]) == (p.MsgType.RESULT, 2, p.MsgType.ERROR, 3)
    np.testing.assert_array_equal(p.decode_arrays(first.meta, first.blobs)[0],
                                  p.decode_arrays(third.meta, third.blobs)[0])
    assert local.finish() == p.EXIT_OK


def test_requests_waiting_for_their_bytes_end_with_the_clients_input(tiny_model_project, tmp_path: Path) -> None:
    """The client goes while two requests sent by key alone wait for their bytes: both waits end and the worker
    exits cleanly (the end of input once ended only the first wait; the second hung until the supervisor)."""
    local = LocalWorker(tiny_model_project.pipeline, "--input-cache", str(tmp_path / "inputs"))
    local.read()
    local.write(infer(1, key="1/never-sent") + infer(2, key="1/never-sent-either"))
    assert local.read().type == p.MsgType.NEED
    assert local.finish() == p.EXIT_OK


def test_a_request_waiting_for_its_bytes_can_be_cancelled(tiny_model_project, tmp_path: Path) -> None:
    local = LocalWorker(tiny_model_project.pipeline, "--input-cache", str(tmp_path / "inputs"))
    local.read()
    local.write(infer(1, key="1/never-sent"))
    assert local.read().type == p.MsgType.NEED
    local.write(p.encode(p.Message(p.MsgType.CANCEL, {"id": 1})))
    cancelled = local.read()
    assert (cancelled.type, cancelled.meta["id"], cancelled.meta["kind"]) == (p.MsgType.ERROR, 1, "cancelled")
    local.write(infer(2, blobs=(textured_png(80, 60, seed=2),)))
    assert local.read().type == p.MsgType.RESULT  # it serves on
    assert local.finish() == p.EXIT_OK


@pytest.mark.parametrize(("meta", "reason"), [
    ({"key": 7}, "key must be printable ASCII"), ({"key": "k" * 257}, "key must be printable ASCII"),
    ({"key": "a\nb"}, "key must be printable ASCII"), ({"key": "é"}, "key must be printable ASCII"),
    ({"key": "1/a", "decoded": "yes", "blobs": (b"x",)}, "decoded must be true or false"),
    ({"key": "1/a", "blobs": (b"x", b"y")}, "expected one image blob, got 2"),
    ({"key": "1/a", "path": "/etc/passwd"}, "'path' must be a string and come without image bytes or key"),
])
def test_the_worker_refuses_a_malformed_key_and_keeps_serving(tiny_model_project, meta: dict, reason: str) -> None:
    local = LocalWorker(tiny_model_project.pipeline)
    local.read()
    local.write(infer(4, **meta))
    error = local.read()
    assert (error.type, error.meta["id"], error.meta["kind"]) == (p.MsgType.ERROR, 4, "error")
    assert reason in error.meta["message"]
    local.write(infer(5, blobs=(textured_png(80, 60, seed=2),)))
    assert local.read().type == p.MsgType.RESULT
    assert local.finish() == p.EXIT_OK


@pytest.mark.parametrize("data", [p.Message(p.MsgType.DATA, {"id": "1"}, (b"x",)),
                                  p.Message(p.MsgType.DATA, {"id": 1}, ())])
def test_the_worker_rejects_a_malformed_data_frame(tiny_model_project, data: p.Message) -> None:
    local = LocalWorker(tiny_model_project.pipeline)
    local.read()
    local.write(p.encode(data))
    error = local.read()
    assert error.meta["kind"] == "protocol"
    assert "DATA frame without an integer 'id' and one blob" in error.meta["message"]
    assert local.finish() == p.EXIT_PROTOCOL


def test_the_worker_names_a_missing_pipeline(tmp_path: Path) -> None:
    local = LocalWorker(tmp_path / "absent.pipeline")
    error = local.read()
    assert error.meta["kind"] == "startup" and "absent.pipeline: pipeline file not found" in error.meta["message"]
    assert local.finish() == p.EXIT_STARTUP


def test_the_worker_rejects_garbage_over_ssh(tiny_model_project, sshd: Sshd, ssh_options: SshOptions,
                                             worker_options: dict) -> None:
    with RemoteBackend(tiny_model_project.pipeline, sshd.target, ssh_options, **worker_options) as backend:
        session = backend.session
        session.channel.sendall(b"\x00" * 64)
        assert wait_until(session.channel.exit_status_ready, timeout=10)
        assert session.channel.recv_exit_status() == p.EXIT_PROTOCOL
        with pytest.raises(WorkerLost, match="rejected a (malformed )?frame"):
            session.request({"roi": None}, (b"png",), cancel=threading.Event())


def fake_worker(sshd: Sshd, ssh_options: SshOptions, script: str, marker: str = "") -> tuple[SshConnection, Launch]:
    """A connection and the launch of `script` (Python with segscope's protocol, `marker` on its command line)
    on the test host, stopped as a real worker's session is (by the session token in its environment)."""
    connection = SshConnection(parse_target(sshd.target), ssh_options)
    connection.connect()
    preamble = ("import os, sys; from segscope.core.remote import protocol as p; out = sys.stdout.buffer\n"
                f"HELLO = {VALID_HELLO!r}; HELLO.update(pid=os.getpid(), pgid=os.getpgid(0))\n"
                "hello = p.encode(p.Message(p.MsgType.HELLO, HELLO))\n")
    args = [sys.executable, "-c", preamble + script] + ([marker] if marker else [])
    return connection, launch(args, sys.executable, str(WORKER))


def test_the_client_rejects_a_corrupt_hello(sshd: Sshd, ssh_options: SshOptions) -> None:
    connection, command = fake_worker(sshd, ssh_options, "bad = bytearray(hello); bad[-1] ^= 1\n"
                                                         "out.write(bytes(bad)); out.flush(); sys.stdin.read()")
    with pytest.raises(p.ProtocolError, match="malformed frame from the worker: HELLO frame failed its crc32 check"):
        WorkerSession(connection, command, timeout=10)
    connection.close()


def test_the_client_names_a_chatty_login_shell(sshd: Sshd, ssh_options: SshOptions) -> None:
    script = "print('Welcome to the Ascend box!', flush=True); sys.stdin.read()"
    connection, command = fake_worker(sshd, ssh_options, script)
    with pytest.raises(p.ProtocolError, match="bad frame magic b'Welc'.*login shell prints anything"):
        WorkerSession(connection, command, timeout=10)
    connection.close()


def test_the_client_rejects_a_corrupt_result_and_stops_that_worker(sshd: Sshd, ssh_options: SshOptions) -> None:
    marker = unique("segscope-fake-worker")
    connection, command = fake_worker(sshd, ssh_options, marker=marker, script=f"""
import os, time
out.write(p.encode(p.Message(p.MsgType.HELLO, {{**HELLO, 'device': '{marker}'}})))
out.flush()
request = p.read_message(sys.stdin.buffer.read, p.TO_WORKER)
while request.type != p.MsgType.INFER:  # the client's heartbeats
    request = p.read_message(sys.stdin.buffer.read, p.TO_WORKER)
reply = bytearray(p.encode(p.Message(p.MsgType.RESULT, {{'id': request.meta['id']}}, (b'a' * 1000,))))
reply[600] ^= 1
out.write(bytes(reply)); out.flush()
time.sleep(60)  # hangs: the client must stop it
""")
    session = WorkerSession(connection, command, timeout=10)
    assert processes_mentioning(marker)
    with pytest.raises(p.ProtocolError, match="malformed frame from the worker: RESULT frame failed its crc32 check"):
        session.request({"roi": None}, (b"png",), cancel=threading.Event())
    assert session.dead
    assert wait_until(lambda: not processes_mentioning(marker), timeout=10)
    connection.close()


def _older_python() -> str | None:
    """An interpreter older than the worker's minimum, if this machine has one (pyenv machines carry 3.6-3.8)."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for minor in range(worker.MIN_PYTHON[1] - 1, 5, -1):
        candidates = [shutil.which(f"python3.{minor}"), *map(str, sorted(pyenv.glob(f"3.{minor}.*/bin/python3")))]
        for found in filter(None, candidates):
            if subprocess.run([found, "-c", ""], capture_output=True, check=False).returncode == 0:
                return found
    return None


@pytest.mark.skipif(_older_python() is None, reason="no Python older than the worker's minimum on PATH")
def test_an_old_host_python_gets_one_line_naming_it_and_the_fix(tmp_path: Path) -> None:
    old = str(_older_python())
    done = subprocess.run([old, str(WORKER), "--pipeline", str(tmp_path / "x.pipeline")], capture_output=True,
                          text=True, check=False, timeout=60)
    version = subprocess.run([old, "-c", "import platform; print(platform.python_version())"], capture_output=True,
                             text=True, check=True).stdout.strip()
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and version in done.stderr and ">= 3.9" in done.stderr
    assert "--remote-python" in done.stderr
