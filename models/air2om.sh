#!/usr/bin/env bash
# Convert the MindSpore AIR export to an Ascend 310 offline model with the AIPP preprocessing baked in.
# Run on the Ascend host after sourcing the CANN toolkit:
#   source /usr/local/Ascend/ascend-toolkit/set_env.sh && bash models/air2om.sh
# Expect "ATC run success"; the output is models/unet_hw960_bs1.om, which the shipped pipeline names.
set -euo pipefail
cd "$(dirname "$0")"
atc --framework=1 \
    --model=unet_hw960_bs1.air \
    --output=unet_hw960_bs1 \
    --input_format=NCHW \
    --soc_version=Ascend310 \
    --log=error \
    --insert_op_conf=aipp_unet_simple_opencv.cfg
