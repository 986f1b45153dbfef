"""The H200 profile's small-kernel cost from run 6's decode-layer kernel mix (CPU, no torch).

    python3 -m lab.derive.kernel_table_from_run6            # print what would change
    python3 -m lab.derive.kernel_table_from_run6 --write    # rewrite hwprofiles/nvidia-h200.yaml

Input: lab/runs/h200-run6/microbench-3.json, the raw rows of `kvplan calibrate` (python -m
calibration.calibrate nvidia-h200 cuda:0 ...) on one H200, 2026-12-01, third device call of run 6 (the first
two timed the mix with the profiler's CUPTI attached; kept as evidence, not used). kernel_overhead_us and
kernel_overhead_table are derived by the calibration code path itself (calibrate.kernel_overhead_s and
calibrate.kernel_overhead_table: the `layer_mix` rows of calibration/small_kernels.py, graph replays, kernels
counted by torch.profiler). Every other coefficient of the shipped measured block is left as it is (run 4's
GEMV/attention/MoE/all-reduce fits, run 5's tables): run 6's full calibration is kept beside the raw rows
(calibrated.yaml) as a repeatability check, not shipped.
"""

from __future__ import annotations

import json
from pathlib import Path

from calibration import calibrate
from calibration.microbench import Measurements
from calibration.profile_writer import profile_with_coefficients, write_if_asked
from planner import catalog, units
from planner.schema import HardwareProfile

ROOT = Path(__file__).resolve().parents[2]
RUN6 = ROOT / "lab" / "runs" / "h200-run6"
# Calls 1 and 2 (microbench.json, -2.json) timed the mix after torch.profiler had counted its kernels in the
# same process (CUPTI attached: +0.2-0.5 us per kernel, and +0.3-0.5 us on every later GEMV); call 3 counts
# after every timing (npu_post.finish_npu -> small_kernels.recount). Only call 3 is clean.
RAWS = (RUN6 / "microbench-3.json",)  # several files: samples pooled per batch
PROFILE = ROOT / "hwprofiles" / "nvidia-h200.yaml"
NOTE = (
    "kernel_overhead_us and kernel_overhead_table from lab/runs/h200-run6/microbench-3.json "
    "(decode-layer small-kernel mix, calibration/small_kernels.py) by lab.derive.kernel_table_from_run6"
)


def updated_profile() -> tuple[str, HardwareProfile]:
    """(YAML text, validated profile) of the shipped H200 profile with run 6's small-kernel cost."""
    payloads = [json.loads(raw.read_text(encoding="utf-8")) for raw in RAWS]
    kernels = [row for p in payloads for row in p["rows"]["kernels"]]
    meas = Measurements(device=payloads[0]["device"], rows={"kernels": kernels})
    table = calibrate.kernel_overhead_table(meas)
    overhead_s = calibrate.kernel_overhead_s(meas)
    assert table and overhead_s > 0, f"{RUN6}: no small-kernel rows"
    hw = catalog.load_item(PROFILE, HardwareProfile, check_stem=False)
    assert hw.measured is not None, f"{PROFILE}: no measured block"
    updates = {"kernel_overhead_us": overhead_s / units.US_S, "kernel_overhead_table": table}
    return profile_with_coefficients(PROFILE, hw.measured, updates, notes=(NOTE,))


def main() -> None:
    """Print the new small-kernel cost; with --write, rewrite the shipped profile."""
    text, profile = updated_profile()
    assert profile.measured is not None
    coeff = profile.measured.coefficients
    table = [(p.tokens, round(p.kernel_us, 3)) for p in coeff.kernel_overhead_table or []]
    print(f"kernel_overhead_us {coeff.kernel_overhead_us:.4f}; kernel_overhead_table {table}")
    write_if_asked(PROFILE, text)


if __name__ == "__main__":
    main()
