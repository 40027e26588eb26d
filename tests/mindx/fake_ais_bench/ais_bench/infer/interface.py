"""Test double of `ais_bench.infer.interface` (msit benchmark's Python API), written from msit's
docs/benchmark/API_GUIDE.md and interface.py as docs/ais-bench-contract.md records them: `InferSession` over
`aclruntime` (here its double) with the same feed handling (NumPy arrays made contiguous, handed over as
`BaseTensor(address, nbytes)`), the modes SegScope uses ("static", and "dymbatch" taking the batch from the
first dynamic dimension; the double refuses "dymhw", "dymdims" and "dymshape" as the real one refuses an
unknown mode, with a RuntimeError) and outputs copied to the host as NumPy arrays. `summary()` returns
`aclruntime`'s `sumary` (`exec_time_list`, ms per inference).
"""

from __future__ import annotations

from typing import Any

import aclruntime
import numpy as np

CALLS: list[tuple[str, tuple[Any, ...]]] = []


class InferSession:
    def __init__(self, device_id: int, model_path: str, acl_json_path: str | None = None, debug: bool = False,
                 loop: int = 1) -> None:
        CALLS.append(("InferSession", (device_id, model_path)))
        self.device_id, self.model_path, self.loop = device_id, model_path, loop
        self.options = aclruntime.session_options()
        self.options.log_level = 1 if debug else 2
        self.options.loop = loop
        self.session = aclruntime.InferenceSession(self.model_path, self.device_id, self.options)
        self.outputs_names = [meta.name for meta in self.session.get_outputs()]
        self.infer_mode_switch = {"static": self._static_prepare, "dymbatch": self._dymbatch_prepare}

    def get_inputs(self) -> list[Any]:
        return self.session.get_inputs()

    def get_outputs(self) -> list[Any]:
        return self.session.get_outputs()

    def infer(self, feeds: list[Any], mode: str = "static", custom_sizes: int = 100000,
              out_array: bool = True) -> list[Any]:
        CALLS.append(("infer", (mode,)))
        inputs, shapes = [], []
        for feed in feeds:
            if type(feed) is not np.ndarray:
                raise RuntimeError(f"type:{type(feed)} invalid")
            infer_input = feed if feed.flags.c_contiguous else np.ascontiguousarray(feed)
            shapes.append(infer_input.shape)
            inputs.append(infer_input)
        if mode not in self.infer_mode_switch:
            raise RuntimeError(f'wrong infer_mode:{mode}, only support "static","dymbatch","dymhw", '
                               '"dymdims","dymshape"')
        self.infer_mode_switch[mode](shapes, custom_sizes)
        basetensors = [aclruntime.BaseTensor(array.__array_interface__["data"][0], array.nbytes) for array in inputs]
        outputs = self.session.run(self.outputs_names, basetensors)
        if not out_array:
            return outputs
        for tensor in outputs:
            tensor.to_host()
        return [np.array(tensor) for tensor in outputs]

    def summary(self) -> Any:
        return self.session.sumary()

    def reset_summaryinfo(self) -> None:
        self.session.reset_sumaryinfo()

    def free_resource(self) -> None:
        CALLS.append(("free_resource", ()))
        self.session.free_resource()

    @staticmethod
    def finalize() -> None:
        CALLS.append(("finalize", ()))

    def _static_prepare(self, shapes: list[Any], custom_sizes: Any) -> None:
        self.session.set_staticbatch()

    def _dymbatch_prepare(self, shapes: list[Any], custom_sizes: Any) -> None:
        indesc = self.get_inputs()
        if len(shapes) != len(indesc):
            raise RuntimeError("input datas and intensors nums not matched!")
        for i, shape in enumerate(shapes):
            for j, dim in enumerate(shape):
                if indesc[i].shape[j] < 0:
                    self.session.set_dynamic_batchsize(dim)
                    return
                if indesc[i].shape[j] != dim:
                    raise RuntimeError("input datas and intensors dim not matched!")
        raise RuntimeError("not a dymbatch model!")
