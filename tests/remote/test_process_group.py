"""Nothing the client started stays on the host: a hanging `--set-env` goes with its whole process group
when the client times out, is interrupted or is killed."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from segscope.core.errors import BackendError
from segscope.core.remote.backend import RemoteBackend

from .sshd import Sshd, processes_mentioning, stop_client_and_check, wait_until

SLEEPER = f"{sys.executable} -c 'import time; time.sleep(600)'"


def sleepers(marker: str) -> int:
    return sum("time.sleep(600)" in cmd for _pid, cmd in processes_mentioning(marker))


def hanging_set_env(folder: Path, marker: str) -> Path:
    """A set_env.sh that starts children and never returns (an NFS mount that hangs, say): one in the background,
    one that leaves the process group (`setsid`, as a daemon would), then a sleeper in the foreground."""
    script = folder / f"set_env_{marker}.sh"
    script.write_text(f"echo sourcing >&2\n{SLEEPER} {marker} &\nsetsid {SLEEPER} {marker} &\n{SLEEPER} {marker}\n")
    return script


def test_a_set_env_still_running_after_the_timeout_is_stopped_and_named(tiny_model_project, sshd: Sshd, ssh_options,
                                                                         worker_options, tmp_path: Path) -> None:
    marker = "segscope-hang-timeout"
    script = hanging_set_env(tmp_path, marker)
    options = {**worker_options, "timeout": 3.0, "set_env": str(script)}
    with pytest.raises(BackendError, match=f"could not source --set-env.*--set-env {script}: still running after 3 s"):
        RemoteBackend(tiny_model_project.pipeline, sshd.target, ssh_options, **options)
    assert wait_until(lambda: not processes_mentioning(marker), timeout=15), processes_mentioning(marker)


CLIENT = """
import sys
from pathlib import Path
from segscope.core.remote.backend import RemoteBackend
from segscope.core.remote.connection import SshOptions
target, key, known, pipeline, cache, set_env = sys.argv[1:]
ssh = SshOptions(key_filename=Path(key), allow_agent=False, look_for_keys=False, ssh_config=None,
                 known_hosts=Path(known), connect_timeout=10.0)
try:
    RemoteBackend(Path(pipeline), target, ssh, python=sys.executable, cache_dir=cache, set_env=set_env,
                  worker_backend="embedded", timeout=600)
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["interrupted", "killed"])
def test_a_client_gone_during_set_env_takes_its_processes(tiny_model_project, sshd: Sshd, known_hosts: Path,
                                                          tmp_path: Path, how) -> None:
    marker = f"segscope-hang-{how.name}"
    client = subprocess.Popen([sys.executable, "-c", CLIENT, sshd.target, str(sshd.user_key), str(known_hosts),
                               str(tiny_model_project.pipeline), str(sshd.cache_dir),
                               str(hanging_set_env(tmp_path, marker))])
    # the script's three sleepers run (the client's own command line also names the marker)
    assert wait_until(lambda: sleepers(marker) >= 3, timeout=60)
    stop_client_and_check(client, how, marker)


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["interrupted", "killed"])
def test_the_command_line_gone_during_set_env_takes_its_processes(tiny_model_project, small_dataset, sshd: Sshd,
                                                                  ssh_home: Path, tmp_path: Path, how) -> None:
    """`segscope eval --remote HOST --set-env SCRIPT` as a user runs it, stopped with Ctrl+C or kill -9."""
    marker = f"segscope-cli-hang-{how.name}"
    client = subprocess.Popen([sys.executable, "-m", "segscope.core.cli", "eval", "--dataset", str(small_dataset),
                               "--pipeline", str(tiny_model_project.pipeline), "--remote", "ascend",
                               "--remote-python", sys.executable, "--remote-cache", str(sshd.cache_dir),
                               "--accept-new-host-key", "--set-env", str(hanging_set_env(tmp_path, marker))],
                              stderr=subprocess.PIPE, text=True)
    assert wait_until(lambda: sleepers(marker) >= 3, timeout=60)
    err = stop_client_and_check(client, how, marker)
    assert err.strip() == ("segscope: interrupted" if how == signal.SIGINT else "")
