"""`segscope eval --remote` against the real test sshd: same per-image lines as a local run, and the
host-key dialogue a user goes through on the command line (fingerprint printed, then accepted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .sshd import Sshd, ssh_fingerprint
from helpers import run_cli


def test_remote_eval_prints_the_local_lines_after_accepting_the_host_key(
        sshd: Sshd, ssh_home: Path, tiny_model_project, small_dataset: Path, capsys: pytest.CaptureFixture) -> None:
    common = ["eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline]
    remote = [*common, "--remote", "ascend", "--remote-python", sys.executable, "--remote-cache", sshd.cache_dir]

    code, out = run_cli(*remote)
    error = capsys.readouterr().err
    assert code == 2 and out == ""
    assert "unknown host key" in error and ssh_fingerprint(sshd.host_key.with_suffix(".pub")) in error
    assert "--accept-new-host-key" in error and error.count("\n") == 1

    local_code, local_out = run_cli(*common)
    code, remote_out = run_cli(*remote, "--accept-new-host-key")
    assert (local_code, code) == (0, 0)
    assert remote_out == local_out  # every per-image line and both Cross Valid means, digit for digit
    assert remote_out.count("image: ") == 4 and "========== Cross Valid dice coeff is:" in remote_out
    assert (ssh_home / ".ssh" / "known_hosts").read_text().count("\n") == 1  # the key is now trusted

    code, again = run_cli(*remote)  # no flag needed any more
    assert code == 0 and again == local_out


#: A bare host interpreter for the test below: a Python >= 3.9 holding only numpy, OpenCV and ONNX Runtime (no
#: SegScope, no paramiko, no Qt), as on a stock Ascend host. `.ci/run` makes one from Python 3.9 with old releases.
BARE_HOST_PYTHON = os.environ.get("SEGSCOPE_TEST_HOST_PYTHON")


@pytest.mark.skipif(not BARE_HOST_PYTHON, reason="SEGSCOPE_TEST_HOST_PYTHON names no bare host interpreter "
                                                   "(.ci/run sets one up from Python 3.9)")
def test_a_bare_host_python_prints_the_local_lines(
        sshd: Sshd, ssh_home: Path, tiny_model_project, small_dataset: Path) -> None:
    bare = str(BARE_HOST_PYTHON)
    probe = subprocess.run([bare, "-c", "import segscope"], capture_output=True, check=False)
    assert probe.returncode != 0, f"{bare} is not bare: it imports segscope"
    common = ["eval", "--dataset", small_dataset, "--pipeline", tiny_model_project.pipeline]
    local_code, local_out = run_cli(*common)
    code, remote_out = run_cli(*common, "--remote", "ascend", "--remote-python", bare, "--remote-cache",
                               sshd.cache_dir, "--accept-new-host-key")
    assert (local_code, code) == (0, 0)
    assert remote_out == local_out and remote_out.count("image: ") == 4
