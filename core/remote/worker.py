"""SegScope's worker, the script the client uploads to the Ascend host and starts over SSH.

It lies in a versioned cache folder beside `segscope-core.zip` (SegScope's headless core, imported from
the zip) and needs only python3, NumPy, OpenCV and the MindX SDK or ONNX Runtime. It keeps to Python 3.6's
syntax (no annotations) so an older interpreter gets a clear message rather than a SyntaxError.

    python3 worker.py [--timeout S] [--set-env SCRIPT] --pipeline PATH [--backend KIND] [--max-pixels N] ...
    python3 worker.py --stop TOKEN

The process the client starts supervises the session and owns the SSH channel: it sources `--set-env` in a
child, starts the serving process (`core.remote.server`, run as `worker.py --serve ...`) in the environment
the script left, relays the frames between the two, and adds a HEARTBEAT every few seconds whatever the
serving process is doing (a model load that holds Python's GIL for minutes included). It ends the session
(the serving process, the script and everything they started, daemons that left the process group with
`setsid` included) when the client's input ends, when the client says nothing for `--timeout` seconds,
when its own parent (the SSH session) dies, or once the serving process has ended; a script still running
after `--timeout` seconds is stopped and named. Every process of a session carries the client's token in
its environment (`SESSION_VARIABLE`), so `--stop TOKEN` (the client's last resort, over a second channel)
finds them all, even where the supervisor is gone or hung.
"""

import os
import platform
import select
import signal
import subprocess
import sys
import time

MIN_PYTHON = (3, 9)
BUNDLE = "segscope-core.zip"
#: The environment variable naming the session (the client's random token) in each of its processes.
SESSION_VARIABLE = "SEGSCOPE_SESSION"
#: Seconds the serving process gets to end once its input has closed before the session is stopped.
EXIT_GRACE = 3.0
#: Bytes held for either side before the supervisor stops reading from the other.
BUFFER = 1 << 20
#: Prints the environment as JSON: what the serving process starts with once the script is sourced.
_DUMP_ENVIRONMENT = "import json, os, sys; sys.stdout.write(json.dumps(dict(os.environ)))"


def become_subreaper():
    """On Linux, what this process's children leave behind (a script's double-forked or `setsid` daemons)
    is re-parented here rather than to init, so `stop_session` still finds it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _proc_ids():
    """Ids of the live processes, from /proc (none where there is no /proc)."""
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def _children():
    """{parent id: [child ids]} of the live processes."""
    children = {}  # type: dict[int, list[int]]
    for pid in _proc_ids():
        try:
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(pid)
    return children


def _marked(token):
    """Ids of the processes whose environment names the session `token`."""
    needle = (SESSION_VARIABLE + "=" + token).encode()
    found = []
    for pid in _proc_ids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(pid)
        except OSError:  # gone, or another user's
            continue
    return found


def session_processes(root, token):
    """`root`, the processes carrying `token` (None: no token) and everything descending from them."""
    children = _children()
    found = {root}
    found.update(_marked(token) if token else ())
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal(pid, number):
    try:
        os.kill(pid, number)
    except OSError:
        pass


def stop_others(token=None):
    """Stop every other process of this session: this process's descendants and, with a `token`, every
    process whose environment carries it and theirs. They are frozen first (a frozen process cannot fork,
    so nothing escapes between the scan and the kill), then killed; an id reused meanwhile by a process
    that is not the session's is thawed, not killed."""
    me = os.getpid()
    frozen = set()  # type: set[int]
    for _ in range(100):
        found = session_processes(me, token) - frozen - {me}
        if not found:
            break
        for pid in found:
            _signal(pid, signal.SIGSTOP)
        frozen |= found
    members = session_processes(me, token)
    for pid in frozen:
        _signal(pid, signal.SIGKILL if pid in members else signal.SIGCONT)


def stop_session(code=1):
    """End the session now: every other process of it (`stop_others`), then this one."""
    stop_others(os.environ.get(SESSION_VARIABLE))
    os._exit(code)


def _say(text):
    try:
        os.write(2, ("segscope worker: " + text + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _read(fd):
    """What `fd` has (b"" at its end), or None when nothing is ready after all."""
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return None
    except OSError:
        return b""


class Supervisor:
    """The session's end of the SSH channel: fd 0 (the client's frames), fd 1 (frames to the client)."""

    def __init__(self, frames, timeout):
        self.frames = frames
        self.timeout = timeout  # None: no heartbeats, no silence bound (a local pipe)
        self.parent = os.getppid()
        self.heard = time.monotonic()  # when the client last sent a byte
        self.to_client = bytearray()
        self.to_serving = bytearray()
        self.input_open = True
        self.frame_left = 0  # bytes of the serving process's current frame not yet in `to_client`
        self.head = bytearray()  # the start of its next frame's header
        self.exited = {}  # type: dict[int, int]  # child id -> exit code, reaped here (a subreaper reaps all)
        self.heartbeat = frames.encode(frames.Message(frames.MsgType.HEARTBEAT)) if timeout else b""
        self.interval = frames.heartbeat_interval(timeout) if timeout else None
        self.next_beat = time.monotonic()
        self.tick = min(0.25, self.interval or 0.25)
        os.set_blocking(0, False)
        os.set_blocking(1, False)

    def wait(self, readers, serving_in):
        """One round: relay what is ready within a tick (`readers`: fd -> handler of the bytes read, b"" at
        its end), reap children, add a heartbeat when one is due, end the session if the client is gone."""
        listening = self.input_open and len(self.to_serving) < BUFFER
        if not listening:  # the serving process has not taken what came: the client is not the silent one
            self.heard = time.monotonic()
        reads = list(readers) + ([0] if listening else [])
        writes = ([1] if self.to_client else []) + ([serving_in] if serving_in is not None and self.to_serving
                                                   else [])
        ready_read, ready_write = select.select(reads, writes, [], self.tick)[:2]
        for fd in ready_read:
            data = _read(fd)
            if data is None:
                continue
            if fd in readers:
                readers[fd](data)
            elif data:
                self.heard = time.monotonic()
                self.to_serving += data
            else:
                self.input_open = False
        for fd in ready_write:
            buffer = self.to_client if fd == 1 else self.to_serving
            try:
                del buffer[:os.write(fd, bytes(buffer[:1 << 16]))]
            except BlockingIOError:
                pass
            except OSError:  # fd 1: the channel is gone; the serving process's input: it has ended
                if fd == 1:
                    stop_session()
                del buffer[:]
        self.reap()
        self.check()

    def reap(self):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.exited[pid] = os.waitstatus_to_exitcode(status)

    def check(self):
        now = time.monotonic()
        if os.getppid() != self.parent:  # the SSH session that started us is gone
            stop_session()
        if self.timeout and now - self.heard > self.timeout:  # the client's heartbeats stopped
            _say(f"no word from the client for {self.timeout:g} s: stopping")
            stop_session()
        if self.interval and now >= self.next_beat and self.frame_left == 0 and not self.head \
                and len(self.to_client) < BUFFER:
            self.to_client += self.heartbeat
            self.next_beat = now + self.interval

    def from_serving(self, data):
        """Pass on the serving process's output, following its frames so a heartbeat goes only between two."""
        self.to_client += data
        position = 0
        while position < len(data):
            if self.frame_left:
                step = min(self.frame_left, len(data) - position)
                self.frame_left -= step
                position += step
                continue
            piece = data[position:position + self.frames.HEADER.size - len(self.head)]
            self.head += piece
            position += len(piece)
            if len(self.head) == self.frames.HEADER.size:
                self.frame_left = self.frames.frame_length(bytes(self.head)) - len(self.head)
                self.head = bytearray()

    def rounds(self, child, out, handle):
        """Yield, once a round, the readers of `child`'s output `out` (each chunk to `handle`, b"" at its end)
        until that output has ended and the child has exited; the caller waits (`wait`) each round."""
        readers = {}  # type: dict[int, object]

        def read(data):
            handle(data)
            if not data:
                del readers[out]

        readers[out] = read
        while readers or child.pid not in self.exited:
            yield readers

    def source(self, script):
        """The environment after `. script` in sh, or None (said on stderr) when it fails or is still running
        after the timeout (then it is stopped, with all it started)."""
        child = subprocess.Popen(["sh", "-c", '. "$0" >&2 && exec "$1" -c "$2"', script, sys.executable,
                                  _DUMP_ENVIRONMENT], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        assert child.stdout is not None  # stdout=PIPE
        output = []  # type: list[bytes]
        started = time.monotonic()
        for readers in self.rounds(child, child.stdout.fileno(), output.append):
            if not self.input_open:  # the client has gone: so does everything of this session
                stop_session()
            if self.timeout and time.monotonic() - started > self.timeout:
                _say(f"--set-env {script}: still running after {self.timeout:g} s (does it wait for input, a "
                     "mount or a license server?); stopped it and what it started")
                stop_others(os.environ.get(SESSION_VARIABLE))
                return None
            self.wait(readers, None)
        status = self.exited[child.pid]
        if status != 0:
            _say(f"--set-env {script}: sourcing it failed (exit status {status})")
            return None
        import json

        return json.loads(b"".join(output).decode("utf-8"))

    def serve(self, argv, environment):
        """Run the serving process until it ends, relaying its frames; its exit code."""
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve"] + argv,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment)
        assert child.stdin is not None and child.stdout is not None  # both PIPE
        stdin = child.stdin
        os.set_blocking(stdin.fileno(), False)
        serving_in = stdin.fileno()  # type: int | None
        closed_at = None
        for readers in self.rounds(child, child.stdout.fileno(), self.from_serving):
            if serving_in is not None and not self.input_open and not self.to_serving:
                stdin.close()  # the client has closed its side: so does the serving process's input
                serving_in, closed_at = None, time.monotonic()
            if closed_at is not None and time.monotonic() - closed_at > EXIT_GRACE:
                _say(f"the serving process did not end within {EXIT_GRACE:g} s of its input closing: stopping")
                stop_session(self.frames.EXIT_CRASHED)
            self.wait({fd: h for fd, h in readers.items() if len(self.to_client) < BUFFER}, serving_in)
        deadline = time.monotonic() + EXIT_GRACE
        while self.to_client and time.monotonic() < deadline:  # its last frames
            self.wait({}, None)
        status = self.exited[child.pid]
        if status < 0:
            _say(f"the serving process was killed by signal {-status}")
            return self.frames.EXIT_CRASHED
        return status


def _take(argv, option):
    """(the value of `option`, `argv` without it) when `option` comes first in `argv`, else (None, argv)."""
    if argv[:1] == [option] and len(argv) > 1:
        return argv[1], argv[2:]
    return None, argv


def _serve(argv):
    """The serving process: frames own the real stdout; anything else that prints (the SDK logs to stdout)
    goes to stderr."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    from segscope.core.remote.server import serve

    return serve(argv, sys.stdin.fileno(), out)


def main():
    argv = sys.argv[1:]
    token, rest = _take(argv, "--stop")
    if token is not None and not rest:
        stop_others(token)
        return 0
    if sys.version_info < MIN_PYTHON:  # exit code 2: frames.EXIT_STARTUP, which an old Python cannot import
        sys.stderr.write("segscope worker: {} is Python {}; SegScope needs >= {}: pass --remote-python the "
                         "SDK's interpreter (e.g. /usr/local/python3.9.5/bin/python3)\n".format(
                             sys.executable, platform.python_version(), ".".join(map(str, MIN_PYTHON))))
        return 2
    bundle = os.path.join(os.path.dirname(os.path.abspath(__file__)), BUNDLE)
    if os.path.isfile(bundle):
        sys.path.insert(0, bundle)
    if argv[:1] == ["--serve"]:
        return _serve(argv[1:])
    from segscope.core.remote import frames

    timeout, argv = _take(argv, "--timeout")
    set_env, argv = _take(argv, "--set-env")
    become_subreaper()
    supervisor = Supervisor(frames, float(timeout) if timeout else None)
    environment = dict(os.environ)
    if set_env is not None:
        environment = supervisor.source(set_env)
        if environment is None:
            return frames.EXIT_ENVIRONMENT
    code = supervisor.serve(argv, environment)
    stop_others(os.environ.get(SESSION_VARIABLE))  # what the script left running (a daemon it started)
    return code


if __name__ == "__main__":
    sys.exit(main())
