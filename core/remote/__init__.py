"""Remote inference over SSH: the client (paramiko) and the worker it runs on the Ascend host.

- `protocol`: the framed binary protocol both ends speak (NumPy only, so it runs on the host).
- `worker` + `server`: the worker uploaded to the host (no paramiko there).
- `connection`: SSH targets, `~/.ssh/config`, ProxyJump, host-key verification (`UnknownHostKey`,
  `HostKeyChanged`); `client`: one worker session; `deploy`: what gets uploaded.
- `backend`: the client's `RemoteBackend`, which `core.backend_spec.open_backend` opens for a `RemoteHost`.
"""
