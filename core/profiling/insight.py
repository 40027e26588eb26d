""""Where to look": the few lines a profile's table hides — what to optimise first, and why."""

from __future__ import annotations

from .costs import CONV_TYPES as COSTED_CONV_TYPES
from .graph import FOLDED_INTO_CONV
from .machine import MachinePeak
from .model import OpStat, Profile
from .ort_profile import GRAPH_NODES
from .roofline import MEMORY, classify

#: Layout conversions: ONNX Transpose, ONNX Runtime's NCHWc reorders, Ascend's TransData / TransposeD.
LAYOUT_TYPES = frozenset({"Transpose", "ReorderInput", "ReorderOutput", "TransData", "TransposeD", "Permute"})
#: Convolutions: the ONNX / ONNX Runtime types, and Ascend's.
CONV_TYPES = COSTED_CONV_TYPES | {"Conv2D", "Conv2DV2", "Conv3D", "DepthwiseConv2D"}
#: What a Conv should have absorbed: what ONNX Runtime folds into it, and Ascend's BatchNorm / ReLU forms.
FUSIBLE_TYPES = FOLDED_INTO_CONV | {"BatchNorm", "BNInference", "BNInferenceD", "ReLU", "Relu6"}


def _ms(value: float) -> str:
    return f"{value:.3g} ms"


def unfused_chains(profile: Profile) -> list[list[str]]:
    """Conv followed directly (execution order of the first run) by BatchNorm/ReLU kernels of its own."""
    first = sorted((e for e in profile.timeline if e.lane == 0), key=lambda e: e.start_ms)
    chains: list[list[str]] = []
    current: list[str] = []
    for event in first:
        if event.type in FUSIBLE_TYPES and current:
            current.append(event.name)
            continue
        if len(current) > 1:
            chains.append(current)
        current = [event.name] if event.type in CONV_TYPES else []
    if len(current) > 1:
        chains.append(current)
    return chains


def _why_above(bounds: set[str]) -> str:
    """Why an operator can beat a roof measured here: the roofs are a DRAM stream and a BLAS product."""
    reasons = []
    if MEMORY in bounds:
        reasons.append("the memory roof is a copy through main memory (64 MiB, past the caches), and a memory-bound "
                       "operator whose tensors stay in the CPU's caches moves them faster than that")
    if bounds - {MEMORY}:
        reasons.append("the compute roof is NumPy's BLAS on this machine, which an ONNX Runtime kernel can beat, "
                       "and a machine busier while the peaks were measured lowers them: profile again on an idle "
                       "machine")
    return "; ".join(reasons) + " (a share above 100 % is not an error in the timing)"


def where_to_look(profile: Profile, peak: MachinePeak | None = None, top: int = 3) -> list[str]:
    """One line per finding, most useful first; every line names operators in full."""
    lines = []
    ranked = [o for o in profile.ops if o.mean_ms > 0][:top]
    if ranked:
        lines.append("most time: " + "; ".join(f"{o.name} ({o.type}, {_ms(o.mean_ms)}, {o.share:.0%})"
                                               for o in ranked))
    peak = peak or profile.peak
    if peak is not None:
        points = [(o, classify(o, peak)) for o in profile.ops]
        slack = sorted(((o.mean_ms * (1 - p.efficiency), o, p) for o, p in points if p and p.efficiency < 1),
                       key=lambda t: t[0], reverse=True)[:top]
        above = [(o.name, p) for o, p in points if p and p.efficiency > 1.05]
        if above:
            lines.append(f"{len(above)} operator(s) ran above the measured roof (" + "; ".join(
                f"{name}, {p.efficiency:.0%} of its {'memory' if p.bound == MEMORY else 'compute'} roof"
                for name, p in above[:top]) + "): " + _why_above({p.bound for _name, p in above}))
        if slack:
            lines.append("furthest from the roof (time the roof would save): " + "; ".join(
                f"{o.name} ({o.type}, {p.efficiency:.0%} of its roof, {p.bound}, up to {_ms(saved)})"
                for saved, o, p in slack))
    layout = [o for o in profile.ops if o.type in LAYOUT_TYPES]
    if layout:
        total = sum(o.mean_ms for o in layout)
        lines.append(f"layout conversions: {len(layout)} nodes, {_ms(total)} "
                     f"({sum(o.share for o in layout):.0%} of the model): "
                     + "; ".join(f"{o.name} ({o.type})" for o in layout))
    chains = unfused_chains(profile)
    if chains:
        lines.append(f"unfused Conv+BN/ReLU chains: {len(chains)} (fuse them in the export or let the converter "
                     "fuse them): " + "; ".join(" -> ".join(c) for c in chains[:top])
                     + (f"; ... {len(chains) - top} more" if len(chains) > top else ""))
    return lines


def _normalised(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _names(op: OpStat) -> list[str]:
    """An operator's name, then the graph nodes it stands for (a fused ONNX Runtime kernel's)."""
    return [op.name, *filter(None, op.details.get(GRAPH_NODES, "").split(";"))]


def matched_ops(here: Profile, there: Profile) -> list[tuple[str, OpStat, OpStat]]:
    """Operators present in both profiles by name (exactly, else ignoring case and punctuation), slowest first.

    A fused kernel matches by any graph node it replaced, so ONNX Runtime's Conv+Relu meets the .om's Conv.
    """
    exact = {name: o for o in there.ops for name in _names(o)}
    loose = {_normalised(name): o for o in there.ops for name in _names(o)}
    pairs = []
    for op in here.ops:
        for name in _names(op):
            other = exact.get(name) or loose.get(_normalised(name))
            if other is not None:
                pairs.append((name, op, other))
                break
    return sorted(pairs, key=lambda p: p[1].mean_ms, reverse=True)
