"""Train the demo U-Net on synthetic inspection slides and export it as ONNX with its model card.

Needs the optional `train` extra (`pip install -e .[train]`: torch, onnx); SegScope itself never imports
this file. `python models/train_demo.py --out models/unet_demo.onnx` reproduces the shipped model and
rewrites `models/unet_hw960_bs1.json` with the figures measured here (CPU, fixed seeds; bit-identical
with the same torch version on the same kind of CPU). See models/TRAINING.md.

The inputs are made exactly as the stream makes them: ROI crop and 960x960 Resizer_Stretch (core.stream.imaging),
then the AIPP math (core.stream.aipp: BGR->RGB, (x - 127.5) / 127.5). The net is fully convolutional, so it
trains on patches of those 960x960 inputs and is exported at the static 1x3x960x960 shape.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
import torch.nn.functional as F
from torch import nn

from segscope.core.backends.base import InferenceResult
from segscope.core.dataset.demo import DEFAULT_SIZE, generate_demo_dataset, has_defects, make_slide
from segscope.core.files.fileio import read_image, read_mask
from segscope.core.metrics.scores import argmax_at_roi, mask_to_labels, truth_at_roi
from segscope.core.roi import ORIGINAL_DEFAULT_ROI, Roi
from segscope.core.stream import imaging
from segscope.core.stream.aipp import AippConfig, apply_aipp, load_aipp

MODELS = Path(__file__).resolve().parent
INPUT = imaging.ResizeSpec(960, 960)  # mxpi_imageresize0 of pipelines/unet_simple_opencv.pipeline
DEFAULT_ROI = Roi(*ORIGINAL_DEFAULT_ROI)
TRAIN_SEED = 1000  # training slides use seeds 1000, 1001, ...; the demo dataset is seed 0, held out
CHANNELS = (16, 32, 64, 128)


# --- data ---------------------------------------------------------------------------------------------


def stream_input(slide: np.ndarray, mask: np.ndarray, roi: Roi) -> tuple[np.ndarray, np.ndarray]:
    """The resize plugin's output for `roi` (uint8 BGR) and the ground truth at that resolution (0/1),
    made as the original main.py made it: ROI crop resized linearly, then /255 > 0.5."""
    crop, box = imaging.crop(slide, roi)
    resized, _ = imaging.resize(crop, INPUT)
    target, _ = imaging.resize(mask[box.y0 : box.y1, box.x0 : box.x1], INPUT)
    return resized, (target > 127).astype(np.uint8)


def random_roi(rng: np.random.Generator, size: tuple[int, int]) -> Roi:
    """A box of varied size and aspect anywhere on the slide, as users pick them."""
    side = rng.uniform(1300, 2600)
    aspect = rng.uniform(0.75, 1.33)
    w, h = min(size[0], int(side * aspect)), min(size[1], int(side / aspect))
    x0, y0 = int(rng.integers(0, size[0] - w + 1)), int(rng.integers(0, size[1] - h + 1))
    return Roi(x0, y0, x0 + w, y0 + h)


def training_samples(index: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Stream inputs of training slide `index`: the default ROI and one random ROI."""
    rng = np.random.default_rng([TRAIN_SEED + index])
    slide, mask = make_slide(rng, DEFAULT_SIZE, has_defects(index))
    return [stream_input(slide, mask, roi) for roi in (DEFAULT_ROI, random_roi(rng, DEFAULT_SIZE))]


def build_pool(slides: int) -> tuple[np.ndarray, np.ndarray]:
    """All training inputs (N x 960 x 960 x 3 uint8 BGR) and targets (N x 960 x 960 uint8 0/1)."""
    with ThreadPoolExecutor(max_workers=2) as pool:  # each slide has its own generator: order-independent
        samples = [s for batch in pool.map(training_samples, range(slides)) for s in batch]
    return np.stack([s[0] for s in samples]), np.stack([s[1] for s in samples])


def sample_batch(
    rng: np.random.Generator, images: np.ndarray, targets: np.ndarray, aipp: AippConfig, batch: int, patch: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random patches, two in three centred near a defect pixel, randomly flipped and rotated."""
    xs, ys = [], []
    size = images.shape[1]
    for _ in range(batch):
        i = int(rng.integers(len(images)))
        fg = np.flatnonzero(targets[i]) if rng.random() < 2 / 3 else np.empty(0, np.int64)
        if fg.size:
            cy, cx = divmod(int(fg[rng.integers(fg.size)]), size)
            cy, cx = cy + int(rng.integers(-patch // 3, patch // 3)), cx + int(rng.integers(-patch // 3, patch // 3))
            y0, x0 = (int(np.clip(c - patch // 2, 0, size - patch)) for c in (cy, cx))
        else:
            y0, x0 = (int(v) for v in rng.integers(0, size - patch + 1, 2))
        image = images[i, y0 : y0 + patch, x0 : x0 + patch]
        target = targets[i, y0 : y0 + patch, x0 : x0 + patch]
        k, flip = int(rng.integers(4)), bool(rng.integers(2))
        image, target = np.rot90(image, k), np.rot90(target, k)
        if flip:
            image, target = image[:, ::-1], target[:, ::-1]
        # Exposure and white-balance jitter: defects are local contrast, not a brightness or a colour.
        gain = rng.uniform(0.8, 1.2) * (1 + rng.uniform(-0.08, 0.08, 3))
        image = np.clip(image * gain.astype(np.float32) + np.float32(rng.uniform(-25, 25)), 0, 255).astype(np.uint8)
        xs.append(apply_aipp(image, aipp))
        ys.append(target.astype(np.int64))
    return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.stack(ys))


# --- model --------------------------------------------------------------------------------------------


def conv(cin: int, cout: int, stride: int = 1, dilation: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, dilation, dilation, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)
    )


class UNet(nn.Module):
    """A small U-Net: a stride-2 stem (no convolution at full resolution), three stride-2 encoder stages
    (the last with dilated convolutions, so large spots are seen whole), a decoder with skip connections
    back to 1/2 resolution, class logits upsampled to the input."""

    def __init__(self, channels: tuple[int, int, int, int] = CHANNELS, classes: int = 2):
        super().__init__()
        c0, c1, c2, c3 = channels
        self.encoders = nn.ModuleList(
            [nn.Sequential(conv(cin, cout, 2), conv(cout, cout)) for cin, cout in ((3, c0), (c0, c1), (c1, c2))]
        )
        self.encoders.append(nn.Sequential(conv(c2, c3, 2), conv(c3, c3, dilation=2), conv(c3, c3, dilation=4)))
        self.decoders = nn.ModuleList([conv(c3 + c2, c2), conv(c2 + c1, c1), conv(c1 + c0, c0)])
        self.head = nn.Conv2d(c0, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        y = x
        for encoder in self.encoders:
            y = encoder(y)
            skips.append(y)
        for decoder, skip in zip(self.decoders, reversed(skips[:-1])):
            y = F.interpolate(y, size=skip.shape[-2:], mode="bilinear", align_corners=False)
            y = decoder(torch.cat([y, skip], 1))
        return F.interpolate(self.head(y), size=x.shape[-2:], mode="bilinear", align_corners=False)


class MindSporeStyleOutputs(nn.Module):
    """The outputs of the MindSpore U-Net export: softmax NHWC first, then the argmax (int32)."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.net(x).permute(0, 2, 3, 1)
        return torch.softmax(logits, dim=-1), torch.argmax(logits, dim=-1).to(torch.int32)


def loss_fn(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy plus soft Dice of the defect class over the batch."""
    p = torch.softmax(logits, 1)[:, 1]
    t = target.float()
    dice = (2 * (p * t).sum() + 1) / (p.sum() + t.sum() + 1)
    return F.cross_entropy(logits, target) + (1 - dice)


def train(args: argparse.Namespace) -> nn.Module:
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    aipp = load_aipp(MODELS / "aipp_unet_simple_opencv.cfg")
    start = time.perf_counter()
    images, targets = build_pool(args.slides)
    print(
        f"data: {len(images)} inputs from {args.slides} slides in {time.perf_counter() - start:.0f} s, "
        f"{targets.mean():.4f} defect pixels",
        flush=True,
    )
    model = UNet().to(memory_format=torch.channels_last)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr, total_steps=args.steps, pct_start=0.05)
    model.train()
    running = 0.0
    for step in range(1, args.steps + 1):
        x, y = sample_batch(rng, images, targets, aipp, args.batch, args.patch)
        # bfloat16 autocast + channels-last run on the CPU's AMX/AVX-512 units: about twice as fast.
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x.contiguous(memory_format=torch.channels_last))
        loss = loss_fn(logits.float(), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        running += loss.item()
        if step % 50 == 0:
            print(f"step {step}/{args.steps} loss {running / 50:.4f} {time.perf_counter() - start:.0f} s", flush=True)
            running = 0.0
    return model.to(memory_format=torch.contiguous_format).eval()


def export(model: nn.Module, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(
            MindSporeStyleOutputs(model),
            torch.zeros(1, 3, INPUT.height, INPUT.width),
            str(path),
            input_names=["input"],
            output_names=["softmax", "argmax"],
            opset_version=17,
            dynamo=False,
        )


# --- evaluation ---------------------------------------------------------------------------------------


def session(path: Path, threads: int = 2) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def evaluate(model_path: Path, seed: int, count: int) -> dict[str, float]:
    """Foreground Dice of the argmax at ROI resolution on `generate_demo_dataset(seed)` slides, default ROI:
    pooled over slides (2·ΣTP / (2·ΣTP + ΣFP + ΣFN)) and the mean over slides with defects."""
    run = session(model_path)
    aipp = load_aipp(MODELS / "aipp_unet_simple_opencv.cfg")
    tp = fp = fn = 0
    per_slide = []
    with tempfile.TemporaryDirectory() as tmp:
        for folder in generate_demo_dataset(Path(tmp), count=count, seed=seed):
            slide, mask = read_image(folder / "image.png"), read_mask(folder / "mask.png")
            crop, box = imaging.crop(slide, DEFAULT_ROI)
            resized, _ = imaging.resize(crop, INPUT)
            softmax, argmax = run.run(None, {"input": apply_aipp(resized, aipp)})
            result = InferenceResult(softmax[0], argmax[0].astype(np.uint8), box, (slide.shape[1], slide.shape[0]))
            predicted = argmax_at_roi(result) == 1
            truth = mask_to_labels(truth_at_roi(result, mask), 2) == 1
            t, p, n = int((predicted & truth).sum()), int((predicted & ~truth).sum()), int((~predicted & truth).sum())
            tp, fp, fn = tp + t, fp + p, fn + n
            if truth.any():
                per_slide.append(2 * t / (2 * t + p + n))
            print(
                f"  {folder.name}: defect px {int(truth.sum())}, predicted {int(predicted.sum())}, "
                f"dice {2 * t / max(1, 2 * t + p + n):.4f}",
                flush=True,
            )
    return {"pooled": 2 * tp / max(1, 2 * tp + fp + fn), "mean": float(np.mean(per_slide))}


def inference_ms(model_path: Path, threads: int = 2, runs: int = 7) -> float:
    """Median wall time of one 960x960 inference with ONNX Runtime on `threads` threads."""
    run = session(model_path, threads)
    x = np.zeros((1, 3, INPUT.height, INPUT.width), np.float32)
    run.run(None, {"input": x})
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run.run(None, {"input": x})
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times))


def write_card(path: Path, model_path: Path, args: argparse.Namespace, figures: dict[str, float]) -> None:
    card = {
        "name": "SegScope demo U-Net (industrial surface defects)",
        "onnx": model_path.name,
        "om": "unet_hw960_bs1.om",
        "aipp": "aipp_unet_simple_opencv.cfg",
        "input": {
            "name": "input",
            "layout": "NCHW",
            "width": INPUT.width,
            "height": INPUT.height,
            "channels": 3,
            "color": "RGB",
        },
        "outputs": [{"name": "softmax", "kind": "softmax", "layout": "NHWC"}, {"name": "argmax", "kind": "argmax"}],
        "classes": ["background", "defect"],
        "training": {
            "script": "models/train_demo.py",
            "command": f"python models/train_demo.py --out models/{model_path.name}",
            "data": f"{args.slides} synthetic slides (segscope.core.dataset.demo.make_slide, 4000x3000, seeds "
            f"{TRAIN_SEED}-{TRAIN_SEED + args.slides - 1}), default ROI {DEFAULT_ROI} plus one random ROI "
            f"each, resized to 960x960 as the stream does; {args.steps} steps of {args.batch} random "
            f"{args.patch}x{args.patch} patches; cross-entropy + soft Dice",
            "heldout": f"the demo dataset (segscope demo: seed 0, {args.eval_count} slides, never trained on), "
            f"default ROI; argmax Dice of the defect class at ROI resolution, pooled over slides",
            "heldout_foreground_dice": round(figures["pooled"], 4),
            "heldout_mean_dice_slides_with_defects": round(figures["mean"], 4),
            "extra_heldout": f"seed {args.extra_seed}, {args.extra_count} slides",
            "extra_heldout_foreground_dice": round(figures["extra_pooled"], 4),
            "inference_ms_2_threads": round(figures["ms"]),
        },
    }
    path.write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=MODELS / "unet_demo.onnx", help="ONNX file to write")
    parser.add_argument("--card", type=Path, help="model card to write (default: unet_hw960_bs1.json beside --out)")
    parser.add_argument("--slides", type=int, default=160, help="training slides (2 inputs each)")
    parser.add_argument("--steps", type=int, default=12000, help="optimizer steps")
    parser.add_argument("--batch", type=int, default=8, help="patches per step")
    parser.add_argument("--patch", type=int, default=320, help="patch side in pixels")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (one-cycle)")
    parser.add_argument("--seed", type=int, default=0, help="seed of weights init and patch sampling")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--eval-count", type=int, default=8, help="demo slides (seed 0) to evaluate on")
    parser.add_argument("--extra-seed", type=int, default=1, help="seed of a second held-out set")
    parser.add_argument("--extra-count", type=int, default=24, help="slides in the second held-out set")
    parser.add_argument("--evaluate-only", action="store_true", help="skip training; evaluate --out as it is")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if not args.evaluate_only:
        export(train(args), args.out)
        print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB)", flush=True)
    print("held-out demo slides (seed 0):", flush=True)
    figures = evaluate(args.out, 0, args.eval_count)
    print(f"extra held-out slides (seed {args.extra_seed}):", flush=True)
    figures["extra_pooled"] = evaluate(args.out, args.extra_seed, args.extra_count)["pooled"]
    figures["ms"] = inference_ms(args.out)
    print(json.dumps(figures), flush=True)
    card = args.card or args.out.with_name("unet_hw960_bs1.json")
    write_card(card, args.out, args, figures)
    print(f"wrote {card}", flush=True)


if __name__ == "__main__":
    main()
