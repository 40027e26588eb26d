"""Nothing of a session stays on the host: `segscope eval --remote HOST --set-env SCRIPT`, as a user runs it,
stopped with Ctrl+C, `kill -9` or a dropped connection while its script hangs (three ways), while a daemon the
script started runs and the model loads, or at its normal end, leaves no process of the session behind.

Every process of the session carries the test's marker: the script exports it (so the serving process, the
script's children and its daemons have it in their environment) and names it on the sleepers' command lines;
the supervisor names the script's path, which holds it too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from segscope.core.errors import BackendError
from segscope.core.remote.backend import RemoteBackend

from .sshd import Sshd, processes_marked, unique, wait_until

SLEEPER = f'{sys.executable} -c "import time; time.sleep(600)"'

#: What the `--set-env` scripts do besides exporting the marker: three that never return, one that starts a
#: daemon (double fork, new session) and returns, after which the model "loads" for ten minutes.
SCRIPTS = {
    "hangs": "{sleeper} &\nsetsid {sleeper} &\n{sleeper}\n",  # a child, one that left the group, a foreground one
    "execs": "exec {sleeper}\n",  # the script's shell becomes the sleeper: its output closes, it never exits
    "loops": "while :; do sleep 0.2; done\n",  # forks all the time
    "daemon": "( setsid sh -c '{sleeper} &' & )\nexport PYTHONPATH={site} SEGSCOPE_TEST_LOAD_SECONDS=600\n",
}
#: A model load that holds Python's GIL (as an SDK's may) for SEGSCOPE_TEST_LOAD_SECONDS, in the serving process.
SITECUSTOMIZE = """import ctypes, os
if b"--serve" in open("/proc/self/cmdline", "rb").read().split(b"\\0"):
    ctypes.PyDLL(None).sleep(int(os.environ["SEGSCOPE_TEST_LOAD_SECONDS"]))
"""


def set_env_script(folder: Path, kind: str) -> tuple[Path, str]:
    """(the script, its marker) for one of `SCRIPTS`; the marker is unique to this run of the test."""
    marker = unique("segscope-test")
    site = folder / f"site-{marker}"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    script = folder / f"set_env_{marker}.sh"
    body = SCRIPTS[kind].format(sleeper=f"{SLEEPER} {marker}", site=site)
    script.write_text(f"export SEGSCOPE_TEST_MARKER={marker}\necho sourcing >&2\n{body}")
    return script, marker


def sleepers(marker: str) -> int:
    return sum("time.sleep(600)" in cmd for _pid, cmd in processes_marked(marker))


def serving(marker: str) -> bool:
    return any(" --serve " in cmd for _pid, cmd in processes_marked(marker))


#: When each script's session is in full swing.
RUNNING = {"hangs": lambda m: sleepers(m) >= 3, "execs": lambda m: sleepers(m) >= 1,
           "loops": lambda m: any("sleep 0.2" in cmd for _pid, cmd in processes_marked(m)),
           "daemon": lambda m: sleepers(m) >= 1 and serving(m)}


def eval_command(small_dataset: Path, pipeline: Path, sshd: Sshd, script: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "segscope.core.cli", "eval", "--dataset", str(small_dataset), "--pipeline",
            str(pipeline), "--remote", "ascend", "--remote-python", sys.executable, "--remote-cache",
            str(sshd.cache_dir), "--accept-new-host-key", "--set-env", str(script), *extra]


@pytest.mark.parametrize("how", ["interrupted", "killed", "dropped"])
@pytest.mark.parametrize("kind", ["hangs", "execs", "loops", "daemon"])
def test_a_client_gone_leaves_nothing_on_the_host(tiny_model_project, small_dataset: Path, sshd: Sshd,
                                                  ssh_home: Path, tmp_path: Path, kind: str, how: str) -> None:
    script, marker = set_env_script(tmp_path, kind)
    client = subprocess.Popen(eval_command(small_dataset, tiny_model_project.pipeline, sshd, script),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: RUNNING[kind](marker), timeout=90), processes_marked(marker)
        stopped = time.monotonic()
        if how == "dropped":  # the network goes: sshd's per-connection processes die with the connection
            for pid in sshd.session_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        else:
            client.send_signal(signal.SIGINT if how == "interrupted" else signal.SIGKILL)
        _, err = client.communicate(timeout=60)
        took = time.monotonic() - stopped
    finally:
        client.kill()
        client.wait()
    assert wait_until(lambda: not processes_marked(marker), timeout=20), processes_marked(marker)
    if how == "interrupted":
        assert (client.returncode, err) == (130, "segscope: interrupted\n") and took < 10
    elif how == "killed":
        assert client.returncode == -signal.SIGKILL
    else:
        assert client.returncode == 2 and err.count("\n") == 1, err
        assert err.startswith("segscope: error: ascend: the SSH connection dropped") and took < 20, err


def test_a_daemon_the_script_started_ends_with_the_run(tiny_model_project, small_dataset: Path, sshd: Sshd,
                                                       ssh_home: Path, tmp_path: Path) -> None:
    script, marker = set_env_script(tmp_path, "daemon")
    script.write_text(script.read_text().replace("SEGSCOPE_TEST_LOAD_SECONDS=600", "SEGSCOPE_TEST_LOAD_SECONDS=0"))
    done = subprocess.run(eval_command(small_dataset, tiny_model_project.pipeline, sshd, script),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and done.stdout.count("image: ") == 4, done.stderr
    assert wait_until(lambda: not processes_marked(marker), timeout=20), processes_marked(marker)


def test_a_slow_model_load_holding_the_gil_is_not_cut_by_the_timeout(tiny_model_project, small_dataset: Path,
                                                                     sshd: Sshd, ssh_home: Path,
                                                                     tmp_path: Path) -> None:
    """The serving process holds Python's GIL for 4 s while it "loads" (the heartbeats come from its
    supervisor), with --remote-timeout 1.5: the run ends as a local one does."""
    script, marker = set_env_script(tmp_path, "daemon")
    script.write_text(script.read_text().replace("SEGSCOPE_TEST_LOAD_SECONDS=600", "SEGSCOPE_TEST_LOAD_SECONDS=4"))
    local = subprocess.run([sys.executable, "-m", "segscope.core.cli", "eval", "--dataset", str(small_dataset),
                            "--pipeline", str(tiny_model_project.pipeline)], capture_output=True, text=True,
                           timeout=300, check=False)
    started = time.monotonic()
    done = subprocess.run(eval_command(small_dataset, tiny_model_project.pipeline, sshd, script, "--remote-timeout",
                                       "1.5"), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started > 4  # the load did take longer than the timeout
    assert done.stdout == local.stdout and local.stdout.count("image: ") == 4
    assert wait_until(lambda: not processes_marked(marker), timeout=20), processes_marked(marker)


def test_a_set_env_still_running_after_the_timeout_is_stopped_and_named(tiny_model_project, sshd: Sshd, ssh_options,
                                                                         worker_options, tmp_path: Path) -> None:
    script, marker = set_env_script(tmp_path, "hangs")
    options = {**worker_options, "timeout": 3.0, "set_env": str(script)}
    started = time.monotonic()
    with pytest.raises(BackendError, match=f"could not source --set-env.*--set-env {script}: still running after "
                                           "3 s") as info:
        RemoteBackend(tiny_model_project.pipeline, sshd.target, ssh_options, **options)
    assert "\n" not in str(info.value) and time.monotonic() - started < 30
    assert wait_until(lambda: not processes_marked(marker), timeout=20), processes_marked(marker)
