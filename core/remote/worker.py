"""SegScope's worker bootstrap, the script the client uploads to the Ascend host and starts over SSH.

It lies in a versioned cache folder beside `segscope-core.zip` (SegScope's headless core, imported from
the zip) and needs only python3, NumPy, OpenCV and the MindX SDK or ONNX Runtime. It keeps to old Python
syntax so an old interpreter gets a clear message rather than a SyntaxError.
Usage: python3 worker.py [--set-env SCRIPT] --pipeline PATH [--backend KIND] [--max-pixels N]
(KIND: one of `core.backends.registry.BACKENDS`, default auto)

`--set-env` is sourced here, not in the login shell: the script runs as the worker's child while the worker
watches its stdin, so a client that goes away (interrupted, killed, timed out) takes a hanging script and
everything it started with it (its process group, and on Linux also what left the group with `setsid`: the
worker is their subreaper); then the worker starts again in the environment it set.
"""

import json
import os
import platform
import select
import signal
import subprocess
import sys

MIN_PYTHON = (3, 9)
BUNDLE = "segscope-core.zip"
EXIT_ENVIRONMENT = 5
#: Prints the environment as JSON: what the worker starts again with once the script is sourced.
_DUMP_ENVIRONMENT = "import json, os, sys; sys.stdout.write(json.dumps(dict(os.environ)))"


def become_subreaper():
    """On Linux, what this process's children leave behind (a script's double-forked or `setsid` daemons)
    is re-parented here rather than to init, so `stop_session` still finds it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _descendants(pid):
    """Ids of the processes descending from `pid`, from /proc (none where there is no /proc)."""
    children = {}  # type: dict[int, list[int]]
    try:
        entries = [entry for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        entries = []
    for entry in entries:
        try:
            with open("/proc/" + entry + "/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop_session():
    """Kill everything this process started, then its process group (itself included): the client is gone.
    Descendants go first, one by one, so those that left the group (`setsid`) go too."""
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    os.killpg(os.getpgid(0), signal.SIGKILL)


def source_environment(script):
    """The environment after `. script` in sh; everything it started is killed if stdin closes first."""
    become_subreaper()
    child = subprocess.Popen(["sh", "-c", '. "$0" >&2 && exec "$1" -c "$2"', script, sys.executable,
                              _DUMP_ENVIRONMENT], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    output = []
    assert child.stdout is not None  # stdout=PIPE
    script_out = child.stdout.fileno()
    while True:
        ready = select.select([0, script_out], [], [])[0]
        if 0 in ready:  # the client sends nothing before HELLO: readable stdin means it has gone
            stop_session()
        chunk = os.read(script_out, 1 << 16)
        if not chunk:
            break
        output.append(chunk)
    status = child.wait()
    if status != 0:
        sys.stderr.write("segscope worker: --set-env {}: sourcing it failed (exit status {})\n".format(  # noqa: UP032
            script, status))
        return None
    return json.loads(b"".join(output).decode("utf-8"))


def main():
    if sys.version_info < MIN_PYTHON:
        sys.stderr.write("segscope worker: {} is Python {}; SegScope needs >= {}: pass --remote-python the "
                         "SDK's interpreter (e.g. /usr/local/python3.9.5/bin/python3)\n".format(
                             sys.executable, platform.python_version(), ".".join(map(str, MIN_PYTHON))))
        return 2
    argv = sys.argv[1:]
    if argv[:1] == ["--set-env"] and len(argv) > 1:
        environment = source_environment(argv[1])
        if environment is None:
            return EXIT_ENVIRONMENT
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + argv[2:], environment)
    bundle = os.path.join(os.path.dirname(os.path.abspath(__file__)), BUNDLE)
    if os.path.isfile(bundle):
        sys.path.insert(0, bundle)
    # Frames own the real stdout; anything else that prints (the SDK logs to stdout) goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    from segscope.core.remote.server import serve

    return serve(argv, sys.stdin.fileno(), out)


if __name__ == "__main__":
    sys.exit(main())
