"""A broken or hostile host: every field of every reply is checked, and the worker is bounded to its folders."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from segscope.core.errors import BackendError
from segscope.core.remote import protocol as p
from segscope.core.remote.backend import RemoteBackend
from segscope.core.remote.client import WorkerSession
from segscope.core.remote.replies import InvalidReply

from .sshd import Sshd, processes_mentioning, unique, wait_until
from .test_malformed import fake_worker

RESULT = {"roi": [0, 0, 4, 4], "image_size": [8, 8], "shape": [4, 4, 2], "probabilities": "uint8",
          "compression": "zlib", "chunks": [0, 0], "raw": [], "timings": {"infer": 0.1}, "worker_seconds": 0.2,
          "backend": "fake"}
DEEP = json.loads("[" * 50 + "]" * 50)

HELLO_CASES = [
    ("pid", "12"), ("pid", 1), ("pgid", True), ("protocol", 9),
    ("input_size", [960]), ("input_size", [10**12, 960]), ("class_names", "background,defect"),
    ("class_names", []), ("backend", ["embedded"]), ("details", {"model": {"nested": 1}}), ("versions", [1]),
    ("metadata nesting", DEEP),
]
RESULT_CASES = [
    ("shape", [4, 4]), ("shape", [10**9, 10**9, 2]), ("shape", [4, 4, 1000]),
    ("roi", [0, 0, 40, 4]), ("roi", [0, 0, True, 4]), ("id", "0"),
    ("probabilities", "int4"), ("compression", "lzma"), ("timings", {"infer": "fast"}), ("timings", [0.1]),
    ("worker_seconds", -1.0), ("backend", 7), ("metadata nesting", DEEP), ("cache", "maybe"), ("cache", 1),
    ("chunks", "all"), ("chunks", [1.5]), ("raw", [True]), ("raw", None),
]
#: Metadata that is not JSON as SegScope reads it (`core.files.untrusted_json`): refused before any field is read.
UNREADABLE_META = [
    ("shape", [float("inf"), 4, 2]), ("image_size", [8, float("nan")]), ("worker_seconds", float("inf")),
    ("timings", {"infer": 10**400}), ("extra", float("-inf")), ("extra", json.loads("[" * 100 + "]" * 100)),
]


def meta_with(template: dict, field: str, value: object) -> dict:
    return {**template, "deep": value} if field == "metadata nesting" else {**template, field: value}


def script_sending(hello: dict, result: dict | None, marker: str, hang: str = "time.sleep(60)") -> str:
    """A fake worker that says `hello` (over a valid one), answers one request with `result`, then `hang`s."""
    reply = "" if result is None else f"""
request = p.read_message(sys.stdin.buffer.read, p.TO_WORKER)
while request.type != p.MsgType.INFER:  # the client's heartbeats
    request = p.read_message(sys.stdin.buffer.read, p.TO_WORKER)
out.write(p.encode(p.Message(p.MsgType.RESULT, {{'id': request.meta['id'], **{result!r}}}, (b'', b''))))
out.flush()"""
    return f"""
import os, time
inf, nan = float('inf'), float('nan')
HELLO.update({hello!r}); HELLO['device'] = {marker!r}
out.write(p.encode(p.Message(p.MsgType.HELLO, HELLO))); out.flush(){reply}
{hang}
"""


def case_id(case: tuple[str, object]) -> str:
    return f"{case[0]}={case[1]!r}"[:40]


@pytest.mark.parametrize("case", HELLO_CASES, ids=case_id)
def test_a_bad_hello_field_is_named_and_the_worker_stopped(sshd: Sshd, ssh_options, case) -> None:
    field, value = case
    marker = unique("segscope-hostile-hello")
    hello = {"details": {"deep": value}} if field == "metadata nesting" else {field: value}
    script = script_sending(hello, None, marker)  # it hangs: the client stops it, whatever its HELLO says
    connection, command = fake_worker(sshd, ssh_options, script, marker)
    with pytest.raises(InvalidReply) as info:
        WorkerSession(connection, command, timeout=20)
    assert info.value.field.split(".")[0] in ((field,) if field != "metadata nesting" else ("metadata nesting",
                                                                                             "details"))
    assert "the worker was stopped" in str(info.value)
    assert wait_until(lambda: not processes_mentioning(marker), timeout=10), processes_mentioning(marker)
    connection.close()


@pytest.mark.parametrize("case", RESULT_CASES, ids=case_id)
def test_a_bad_result_field_is_named_and_the_worker_stopped(sshd: Sshd, ssh_options, case) -> None:
    field, value = case
    marker = unique("segscope-hostile-result")
    connection, command = fake_worker(sshd, ssh_options, script_sending({}, meta_with(RESULT, field, value), marker),
                                      marker)
    session = WorkerSession(connection, command, timeout=20)
    with pytest.raises(InvalidReply) as info:
        session.request({"roi": None}, (b"png",), cancel=threading.Event())
    assert info.value.field.split(".")[0] == field
    assert session.dead and wait_until(lambda: not processes_mentioning(marker), timeout=10)
    connection.close()


@pytest.mark.parametrize(("need", "problem"), [({"id": "0"}, "field id"), ({"id": -1}, "field id"),
                                               ({"id": 0}, "unexpected NEED")])
def test_a_bad_or_unasked_need_is_refused_and_the_worker_stopped(sshd: Sshd, ssh_options, need: dict,
                                                                  problem: str) -> None:
    """NEED must name a request by its integer id, and only one sent by key alone (this one carried its bytes)."""
    marker = unique("segscope-hostile-need")
    script = script_sending({}, None, marker, hang=f"""
request = p.read_message(sys.stdin.buffer.read, p.TO_WORKER)
while request.type != p.MsgType.INFER:
    request = p.read_message(sys.stdin.buffer.read, p.TO_WORKER)
out.write(p.encode(p.Message(p.MsgType.NEED, {need!r}))); out.flush()
time.sleep(60)""")
    connection, command = fake_worker(sshd, ssh_options, script, marker)
    session = WorkerSession(connection, command, timeout=20)
    with pytest.raises(p.ProtocolError, match=problem):
        session.request({"roi": None}, (b"png",), cancel=threading.Event())
    assert session.dead and wait_until(lambda: not processes_mentioning(marker), timeout=10)
    connection.close()


def test_a_second_need_for_the_same_request_is_refused_and_the_worker_stopped(sshd: Sshd, ssh_options) -> None:
    """A request sent by key alone has its bytes sent once; a host asking again is not answered again."""
    marker = unique("segscope-hostile-need-twice")
    script = script_sending({}, None, marker, hang="""
request = p.read_message(sys.stdin.buffer.read, p.TO_WORKER)
while request.type != p.MsgType.INFER:
    request = p.read_message(sys.stdin.buffer.read, p.TO_WORKER)
out.write(p.encode(p.Message(p.MsgType.NEED, {"id": request.meta["id"]}))); out.flush()
p.read_message(sys.stdin.buffer.read, p.TO_WORKER)
out.write(p.encode(p.Message(p.MsgType.NEED, {"id": request.meta["id"]}))); out.flush()
time.sleep(60)""")
    connection, command = fake_worker(sshd, ssh_options, script, marker)
    session = WorkerSession(connection, command, timeout=20)
    sent: list[bytes] = []
    request_id, _ = session.send_request({"roi": None, "key": "1/abc"}, ())
    with pytest.raises(p.ProtocolError, match="unexpected NEED"):
        session.receive_result(request_id, threading.Event(), lambda: sent.append(b"png") or b"png")
    assert sent == [b"png"]
    assert session.dead and wait_until(lambda: not processes_mentioning(marker), timeout=10)
    connection.close()


@pytest.mark.parametrize("case", UNREADABLE_META, ids=case_id)
def test_a_result_that_is_not_json_is_refused_and_the_worker_stopped(sshd: Sshd, ssh_options, case) -> None:
    """NaN, infinities, numbers out of range, deep nesting, in any field (named or not): one line, no hang."""
    field, value = case
    marker = unique("segscope-unreadable-result")
    connection, command = fake_worker(sshd, ssh_options, script_sending({}, {**RESULT, field: value}, marker), marker)
    session = WorkerSession(connection, command, timeout=20)
    with pytest.raises(p.ProtocolError, match="malformed frame from the worker: RESULT frame has a malformed "
                                              "payload \\(its metadata") as info:
        session.request({"roi": None}, (b"png",), cancel=threading.Event())
    assert "\n" not in str(info.value)
    assert session.dead and wait_until(lambda: not processes_mentioning(marker), timeout=10)
    connection.close()


def test_a_hello_that_is_not_json_is_refused_and_the_worker_ends(sshd: Sshd, ssh_options) -> None:
    marker = unique("segscope-unreadable-hello")
    script = script_sending({"input_size": [float("inf"), 960]}, None, marker)
    connection, command = fake_worker(sshd, ssh_options, script, marker)
    with pytest.raises(p.ProtocolError, match="HELLO frame has a malformed payload .*Infinity is not a JSON number"):
        WorkerSession(connection, command, timeout=20)
    assert wait_until(lambda: not processes_mentioning(marker), timeout=10), processes_mentioning(marker)
    connection.close()


def test_a_very_deep_reply_is_a_protocol_error_not_a_crash(sshd: Sshd, ssh_options) -> None:
    connection, command = fake_worker(sshd, ssh_options, """
meta = b'{"x":' + b'[' * 100000 + b']' * 100000 + b'}'
import struct, zlib
payload = struct.pack('>I', len(meta)) + meta + struct.pack('>H', 0)
head = p.HEADER.pack(p.MAGIC, p.PROTOCOL_VERSION, int(p.MsgType.HELLO), 0, len(payload), 0)[:12]
out.write(head + struct.pack('>I', zlib.crc32(payload, zlib.crc32(head))) + payload); out.flush()
sys.stdin.read()
""")
    with pytest.raises(p.ProtocolError, match="nested 100,001 levels deep"):
        WorkerSession(connection, command, timeout=20)
    connection.close()


def test_the_worker_reads_host_paths_only_in_the_named_dataset(tiny_model_project, small_dataset, sshd: Sshd,
                                                                ssh_options, worker_options, tmp_path: Path) -> None:
    outside = tmp_path / "private" / "slide.png"
    outside.parent.mkdir()
    outside.write_bytes((small_dataset / "1" / "image.png").read_bytes())
    (small_dataset / "link.png").symlink_to(outside)
    with RemoteBackend(tiny_model_project.pipeline, sshd.target, ssh_options, host_dataset=str(small_dataset),
                       **worker_options) as backend:
        assert backend.infer(small_dataset / "1" / "image.png").argmax.shape == (960, 960)
        for path in (outside, small_dataset / ".." / "private" / "slide.png", small_dataset / "link.png",
                     Path("/etc/hostname")):
            with pytest.raises(BackendError, match="outside the dataset and project folders the client named"):
                backend.infer(path)


@pytest.mark.parametrize("which", ["known_hosts", "ssh_config"])
def test_ssh_files_that_are_not_text_are_one_line_errors(sshd: Sshd, ssh_options, tmp_path: Path, which) -> None:
    from segscope.core.errors import SegScopeError
    from segscope.core.remote.connection import SshConnection, parse_target

    bad = tmp_path / which
    bad.write_bytes(b"Host \xff\xfe\n  Port 22\n" if which == "ssh_config" else b"\xff\xfe binary junk\n")
    setattr(ssh_options, which, bad)
    connection = SshConnection(parse_target(sshd.target), ssh_options)
    with pytest.raises(SegScopeError, match=f"{bad}: cannot read"):
        connection.connect()
    connection.close()


ERROR_CASES = [("message", ["not", "text"]), ("kind", None), ("id", -1), ("id", 1.5)]


@pytest.mark.parametrize("case", ERROR_CASES, ids=case_id)
def test_a_bad_error_field_is_named(sshd: Sshd, ssh_options, case) -> None:
    field, value = case
    error = {"id": None, "kind": "startup", "message": "boom", field: value}
    connection, command = fake_worker(sshd, ssh_options, f"""
out.write(p.encode(p.Message(p.MsgType.ERROR, {error!r}))); out.flush()
sys.stdin.read()
""")
    with pytest.raises(InvalidReply) as info:
        WorkerSession(connection, command, timeout=20)
    assert info.value.field == field
    connection.close()
