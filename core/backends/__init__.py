"""Inference backends behind one interface (`base.Backend`): embedded (ONNX Runtime + OpenCV), the MindX SDK's
stream (`mindx`, its SDK thread in `mindx_sdk`, its three transports in `mindx_transports`), its Model API
(`mindx_model`) and ais_bench (`aisbench`), several devices of one host (`pool`). `registry` names every kind;
`core.backend_spec` opens one where it runs: here, on devices, on a remote host (`core.remote`) or a Dask
cluster (`core.cluster`).
"""
