"""planner/perf/kernels.py and planner/kinds.py: the engine kernel tables, the measured transformers
counts, and --engine validation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from planner import kinds as engines
from planner.deployment import Deployment
from planner.errors import DataFileError, PlanInputError
from planner.importers.benchpoints import read_bench_points
from planner.inputs import PlanRequest, to_deployment
from planner.perf import opcost, roofline
from tests.helpers import deployment

COUNTS = Path(__file__).resolve().parents[1] / "lab" / "runs" / "h200-kernel-counts.json"


def _deployment(model: str, *, engine: str) -> Deployment:
    return deployment(model, ctx_tokens=2048, engine=engine)


def _launches(dep: Deployment, *, batch: int, ctx: int) -> int:
    step = roofline.decode_step(dep, batch=np.asarray(float(batch)), ctx_tokens=np.asarray(float(ctx)))
    return sum(t.kernels for t in opcost.step_terms(roofline.geometry(dep), step))


# Device kernels the model does not count as launches: cuBLAS split-K reduce kernels and memsets run
# inside one matmul call (its measured latency includes them), and FlashAttention's split-KV combine
# kernel runs inside the attention call (the attention table times the call).
INSIDE_A_CALL = ("splitKreduce", "Memset", "combine_kernel")


def test_transformers_table_reproduces_every_profiled_step() -> None:
    data = json.loads(COUNTS.read_text(encoding="utf-8"))
    checked = 0
    for model in data["models"]:
        for point in model["points"]:
            device = {k: v for k, v in point["device_names"].items() if not k.startswith("kv::")}
            helpers = sum(v for k, v in device.items() if any(h in k for h in INSIDE_A_CALL))
            dep = _deployment(point["model"], engine="transformers")
            assert sum(device.values()) - helpers == _launches(dep, batch=point["batch"], ctx=point["ctx"])
            checked += 1
    assert checked == 10  # 5 models x 2 points


def test_qwen3_8b_launches_per_step() -> None:
    # transformers, per layer: qkv 3 + q/k norms 16 + rope/cache 15 + attention 1 + o 1 + gate_up 2+2 + down 1
    # + norms 18 = 59; 36 layers = 2124, + embedding 1 + lm_head step 20 = 2145
    assert _launches(_deployment("qwen3-8b", engine="transformers"), batch=8, ctx=512) == 2145
    # fused (MindIE): qkv 1 + core 2 + attention 1 + o 1 + gate_up 2 + down 1 + norms 2 = 10; 36 * 10 + 1 + 2
    assert _launches(_deployment("qwen3-8b", engine="mindie"), batch=8, ctx=512) == 363
    assert _launches(_deployment("qwen3-8b", engine="vllm"), batch=8, ctx=512) == 363


def test_unknown_engine_is_a_plan_input_error() -> None:
    with pytest.raises(
        PlanInputError,
        match=r"^--engine: unknown engine \(got 'x', expected one of mindie, vllm, transformers, sglang\)$",
    ):
        to_deployment(PlanRequest(model="qwen3-8b", engine="x"))
    assert to_deployment(PlanRequest(model="qwen3-8b", engine="Transformers")).engine == "transformers"
    assert to_deployment(PlanRequest(model="qwen3-8b")).engine == engines.DEFAULT_ENGINE == "mindie"


def test_bench_csv_engine_column(tmp_path: Path) -> None:
    header = "model,card,dtype,kv_dtype,tp,batch,ctx,decode_step_s,engine\n"
    path = tmp_path / "points.csv"
    path.write_text(
        header + "qwen3-8b,nvidia-h200,bf16,bf16,1,1,512,0.009,transformers\n"
        "qwen3-8b,nvidia-h200,bf16,bf16,1,1,512,0.009,\n",
        encoding="utf-8",
    )
    assert [p.engine for p in read_bench_points(path)] == ["transformers", "mindie"]
    path.write_text(header + "qwen3-8b,nvidia-h200,bf16,bf16,1,1,512,0.009,trt\n", encoding="utf-8")
    with pytest.raises(DataFileError, match=r"points\.csv:2: column engine: unknown engine \(got 'trt'"):
        read_bench_points(path)


def test_transformers_is_slower_than_a_fused_engine() -> None:
    fused = roofline.decode_step_s(_deployment("qwen3-8b", engine="mindie"), batch=8, ctx_tokens=2048)
    eager = roofline.decode_step_s(_deployment("qwen3-8b", engine="transformers"), batch=8, ctx_tokens=2048)
    assert eager > fused
