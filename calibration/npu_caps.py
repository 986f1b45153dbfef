"""What `kvplan calibrate` measures on each Ascend SoC, and why it skips the rest.

The SoC is recognised from torch.npu.get_device_name() ("Ascend910B4", "Ascend910_9392", "Ascend950PR",
"Ascend310P3"). Each benchmark of calibration/microbench.py (by its progress label) is one of
    measure   documented for this SoC in the torch_npu 7.x operator docs
    attempt   not documented for this SoC (the docs list 910B/910C); run anyway, isolated, and labelled
    skip      the SoC lacks it; the profile's notes carry the reason
Dtypes: the 310P has no bf16 (every bf16 benchmark runs in fp16 there and its rows say so); fp8 exists only
on the 950 (the A2/A3 op docs list int8/fp16/bf16). NOT RUN ON ANY ASCEND DEVICE: this is our reading of
the docs (sources in docs/ and /work/shared/reference), to be corrected on first contact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BENCHMARKS = (
    "kernel overhead",
    "step overhead",
    "stream bandwidth",
    "decode GEMV",
    "decode attention",
    "GEMM peak",
    "prefill GEMM",
    "quantized GEMV",
    "grouped expert GEMM",
    "all-reduce",
)
UNDOCUMENTED_950 = "the torch_npu 7.x docs list Atlas A2/A3 only; attempted, isolated"


@dataclass(frozen=True)
class SocCaps:
    """One SoC family's benchmark plan: dtypes, and per benchmark label a skip or attempt reason."""

    family: str  # 910b | 910c | 950 | 310p | unknown
    soc: str
    compute_dtype: str  # the dtype of every "bf16" benchmark: bf16, or fp16 where bf16 is absent
    gemm_dtypes: tuple[str, ...]
    skip: dict[str, str] = field(default_factory=dict)
    attempt: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def decision(self, label: str) -> tuple[str, str]:
        """("measure" | "attempt" | "skip", reason) for one benchmark label."""
        if label in self.skip:
            return "skip", self.skip[label]
        if label in self.attempt:
            return "attempt", self.attempt[label]
        return "measure", ""


def soc_family(name: str) -> str:
    """910b, 910c, 950, 310p or unknown, from the device name torch_npu reports."""
    text = name.replace(" ", "").lower()
    if text.startswith("ascend910_93") or text.startswith("ascend910c"):
        return "910c"
    if text.startswith("ascend910b"):
        return "910b"
    if text.startswith("ascend950"):
        return "950"
    if text.startswith("ascend310p"):
        return "310p"
    return "unknown"


def caps_for(name: str) -> SocCaps:
    """The benchmark plan for a device name (see the module docstring for the sources)."""
    family = soc_family(name)
    a2a3 = ("bf16", "fp16", "int8")
    if family in ("910b", "910c"):
        return SocCaps(family, name, "bf16", a2a3, notes=("fp8: not on Atlas A2/A3, not measured",))
    if family == "950":
        return SocCaps(
            family,
            name,
            "bf16",
            (*a2a3, "fp8"),
            attempt={
                "decode attention": UNDOCUMENTED_950,
                "quantized GEMV": UNDOCUMENTED_950,
                "grouped expert GEMM": UNDOCUMENTED_950,
            },
        )
    if family == "310p":
        return SocCaps(
            family,
            name,
            "fp16",
            ("fp16", "int8"),
            attempt={
                "decode attention": "fp16 only on 310P; engines keep its KV cache in FRACTAL_NZ, timed here "
                "in ND",
            },
            notes=("bf16: absent on 310P, every bf16 benchmark runs in fp16", "fp8: absent on 310P"),
        )
    unknown = f"unknown SoC {name!r}: not in kvplan's table; attempted, isolated"
    return SocCaps(family, name, "bf16", a2a3, attempt={label: unknown for label in BENCHMARKS[3:]})


def plan_lines(caps: SocCaps, *, devices: int) -> list[str]:
    """One line per benchmark: what happens on this SoC (for `kvplan calibrate --check` and the notes)."""
    lines = []
    for label in BENCHMARKS:
        verdict, reason = caps.decision(label)
        if label == "all-reduce" and devices < 2 and verdict != "skip":
            verdict, reason = "skip", f"{devices} device visible; needs 2 or more"
        lines.append(f"{label:22s} {verdict}{': ' + reason if reason else ''}")
    lines.append(f"{'GEMM dtypes':22s} {', '.join(caps.gemm_dtypes)}; benchmarks run in {caps.compute_dtype}")
    lines.extend(f"{'note':22s} {n}" for n in caps.notes)
    return lines
