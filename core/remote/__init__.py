"""Remote inference over SSH: the client (paramiko) and the worker it runs on the Ascend host.

- `frames` + `protocol`: the framed binary protocol both ends speak (`frames`: standard library only, for
  the worker's supervisor; `protocol`: checked reading and the result arrays, NumPy only, so it runs on the host).
- `worker` + `server`: the worker uploaded to the host (no paramiko there): `worker.py` supervises the session
  (heartbeats, `--set-env`, stopping everything of it), `server` serves the requests.
- `host_cache`: the worker's input cache on the host (what was sent, by content key: a repeat sends keys alone).
- `connection`: SSH targets, `~/.ssh/config`, ProxyJump, host-key verification (`UnknownHostKey`,
  `HostKeyChanged`); `client`: one worker session; `deploy`: what gets uploaded.
- `backend`: the client's `RemoteBackend`, which `core.backend_spec.open_backend` opens for a `RemoteHost`.
"""
