"""`segscope eval --cluster ssh://...`: a Dask cluster started over the real loopback sshd (two "hosts", both
127.0.0.1 through a ~/.ssh/config alias) gives exactly the local run's lines; its hosts are checked as
`--remote` checks one."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .sshd import Sshd, processes_mentioning, ssh_fingerprint, stop_client_and_check
from helpers import run_cli

pytest.importorskip("distributed")
pytest.importorskip("asyncssh")
pytestmark = pytest.mark.ssh




def test_a_cluster_started_over_ssh_prints_the_local_lines(sshd: Sshd, ssh_home: Path, tiny_model_project,
                                                           small_dataset: Path, capsys) -> None:
    common = ["eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline]
    cluster = [*common, "--cluster", "ssh://ascend,ascend", "--remote-python", sys.executable]

    code, out = run_cli(*cluster)  # the host's key is not trusted yet: refused as --remote refuses it
    error = capsys.readouterr().err
    assert code == 2 and out == "" and error.count("\n") == 1
    assert "unknown host key" in error and ssh_fingerprint(sshd.host_key.with_suffix(".pub")) in error
    assert "--accept-new-host-key" in error

    local_code, local_out = run_cli(*common)
    code, cluster_out = run_cli(*cluster, "--accept-new-host-key")
    error = capsys.readouterr().err
    assert (local_code, code) == (0, 0), error
    assert cluster_out == local_out  # every per-image line and both means, digit for digit
    assert cluster_out.count("image: ") == 4
    assert error.count("segscope: worker ") == 2  # the per-worker usage: a worker on each "host"
    # the cluster was closed with the run: no scheduler or worker of it (started with this Python) is left
    assert not processes_mentioning(f"{sys.executable} -m distributed.cli.dask_spec")  # gone when the run returns


def test_the_hosts_python_and_set_env_are_checked_in_one_line(sshd: Sshd, ssh_home: Path, tiny_model_project,
                                                               small_dataset: Path, capsys) -> None:
    common = ["eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline,
              "--cluster", "ssh://ascend", "--accept-new-host-key"]
    code, _ = run_cli(*common, "--remote-python", "/nonexistent/python3")
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1
    assert "ascend: /nonexistent/python3 cannot start a Dask worker there" in error and "--remote-python" in error

    code, _ = run_cli(*common, "--remote-python", sys.executable, "--set-env", "/opt/set_env.sh")
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and error.startswith("segscope: error: --set-env:")
    assert "--cluster tcp://" in error


def test_a_host_that_refuses_the_connection_is_one_line(ssh_home: Path, tiny_model_project, small_dataset: Path,
                                                        capsys) -> None:
    code, _ = run_cli("eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline,
                      "--cluster", "ssh://127.0.0.1:1", "--remote-python", sys.executable)
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and "127.0.0.1" in error and "Traceback" not in error


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["interrupted", "killed"])
def test_a_client_gone_mid_run_takes_the_clusters_processes(sshd: Sshd, ssh_home: Path, slow_project: Path,
                                                            small_dataset: Path, how) -> None:
    """The hosts' scheduler, workers and the nanny's worker processes are tied to the client's SSH channels."""
    for copy in range(8):  # slow enough to be caught mid-run
        shutil.copytree(small_dataset / "1", small_dataset / f"copy{copy}")
    marker = f"{sys.executable} -m distributed.cli.dask_spec"
    client = subprocess.Popen([sys.executable, "-m", "segscope.core.cli", "eval", "--dataset", str(small_dataset),
                               "--pipeline", str(slow_project), "--cluster", "ssh://ascend,ascend",
                               "--remote-python", sys.executable, "--accept-new-host-key"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = client.stdout is not None and client.stdout.readline().startswith("image: ")
    running = len(processes_mentioning(marker))  # a scheduler and two workers, mid-run
    stop_client_and_check(client, how, marker)
    assert started and running >= 3, running
