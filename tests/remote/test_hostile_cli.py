"""`segscope eval --remote` against a host whose worker answers wrong and then keeps silent with its input open,
or stops answering, as a user meets it: one line, exit 2, within seconds of the fault, and nothing of the
session left on the host (the hostile worker started a daemon too).

The host's "python" (`--remote-python`) is a wrapper that runs the real interpreter, except for the worker,
where it runs `HOSTILE` instead; the worker's session is still stopped the way a real one's is.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from .sshd import processes_marked, wait_until

pytestmark = pytest.mark.ssh

#: A worker that misbehaves as `sys.argv[1]` says, after starting a daemon; it writes the time of its fault to
#: `sys.argv[2]` and never reads its input nor exits.
HOSTILE = """
import os, struct, subprocess, sys, time, zlib
from segscope.core.remote import protocol as p
mode, stamp, marker = sys.argv[1:4]
subprocess.Popen(["setsid", sys.executable, "-c", "import time; time.sleep(600)", marker])
out = sys.stdout.buffer

def send(kind, meta):
    payload = struct.pack(">I", len(meta)) + meta + struct.pack(">H", 0)
    head = p.HEADER.pack(p.MAGIC, p.PROTOCOL_VERSION, int(kind), 0, len(payload), 0)[:12]
    out.write(head + struct.pack(">I", zlib.crc32(payload, zlib.crc32(head))) + payload)
    out.flush()

def fault():
    with open(stamp, "w") as f:
        f.write(repr(time.monotonic()))
    time.sleep(600)

if mode == "mute":
    fault()
hello = {"protocol": p.PROTOCOL_VERSION, "pid": os.getpid(), "pgid": os.getpgid(0), "backend": "fake",
         "device": "none", "input_size": [960, 960], "class_names": ["background", "defect"], "details": {},
         "versions": {}}
out.write(p.encode(p.Message(p.MsgType.HELLO, hello)))
out.flush()
if mode == "silent":
    fault()
request = p.read_message(sys.stdin.buffer.read, p.TO_WORKER)
while request.type != p.MsgType.INFER:  # the client's heartbeats
    request = p.read_message(sys.stdin.buffer.read, p.TO_WORKER)
if mode == "infinity":
    send(p.MsgType.RESULT, b'{"id":%d,"roi":[0,0,4,4],"worker_seconds":Infinity}' % request.meta["id"])
else:
    send(p.MsgType.RESULT, b'{"x":' + b"[" * 100000 + b"]" * 100000 + b"}")
fault()
"""


CASES = {
    "infinity": "ascend: malformed frame from the worker: RESULT frame has a malformed payload (its metadata: "
                "invalid JSON: Infinity is not a JSON number",
    "deep": "ascend: malformed frame from the worker: RESULT frame has a malformed payload (its metadata: ",
    "silent": "ascend: the host stopped answering: nothing from its worker for 3 s; the worker was stopped",
    "mute": "ascend: no word from the worker for 3 s while it started",
}


@pytest.mark.parametrize("mode", list(CASES))
def test_a_hostile_or_silent_host_ends_the_run_in_one_line(tiny_model_project, small_dataset: Path, sshd,
                                                           ssh_home: Path, tmp_path: Path, mode: str) -> None:
    hostile = tmp_path / "hostile_worker.py"
    hostile.write_text(HOSTILE)
    stamp = tmp_path / "fault"
    marker = str(tmp_path)  # on the hostile worker's command line and its daemon's
    python = tmp_path / "python"
    python.write_text(f"""#!/bin/sh
case "$1" in */worker.py) case "$2" in --stop) ;; *) exec {sys.executable} {hostile} {mode} {stamp} {marker} ;;
esac ;; esac
exec {sys.executable} "$@"
""")
    python.chmod(0o755)
    client = subprocess.run([sys.executable, "-m", "segscope.core.cli", "eval", "--dataset", str(small_dataset),
                             "--pipeline", str(tiny_model_project.pipeline), "--remote", "ascend", "--remote-python",
                             str(python), "--remote-cache", str(sshd.cache_dir), "--accept-new-host-key",
                             "--remote-timeout", "3"], capture_output=True, text=True, timeout=300, check=False)
    ended = time.monotonic()
    assert client.returncode == 2 and client.stderr.count("\n") == 1, client.stderr
    assert client.stderr.startswith(f"segscope: error: {CASES[mode]}"), client.stderr
    if mode == "deep":
        assert "nested 100,001 levels deep" in client.stderr
    assert ended - float(stamp.read_text()) < 20  # from the fault to the end of the run
    assert wait_until(lambda: not processes_marked(marker), timeout=20), processes_marked(marker)
