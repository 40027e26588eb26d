"""`python -m segscope.core.cluster.tether COMMAND...`: a Dask scheduler or worker started over SSH, tied to
the SSH channel that started it.

`--cluster ssh://` hands Dask's SSHCluster this module as the interpreter it starts its processes with, so on
each host COMMAND runs as this process's child. When the channel's stdin ends (the client closed the cluster,
or was interrupted or killed: its connection is gone), everything of the SSH session goes, as a remote
worker's does (`core.remote.worker.stop_session`): COMMAND, the worker processes a Dask nanny forked, and
this process. When COMMAND ends first, its status is
this process's. It keeps to old Python syntax, as `core.remote.worker` does.
"""

import os
import select
import subprocess
import sys

from segscope.core.remote.worker import become_subreaper, stop_session


def main(argv):
    if not argv:
        sys.stderr.write("usage: python -m segscope.core.cluster.tether COMMAND [ARG...]\n")
        return 2
    become_subreaper()
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    while child.poll() is None:
        ready = select.select([0], [], [], 0.5)[0]
        if ready and not os.read(0, 1 << 12):  # the channel closed: nothing of this session may outlive it
            stop_session()
    return child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
