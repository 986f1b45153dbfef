"""`kvplan calibrate --device npu:0` end to end on the fake NPU (tests/fake_npu), one test per failure mode of
issue 16: each ends in a written profile from what ran, or in one clear line, never a traceback or a wait.

The fake runs torch_npu's calls on CPU with the documented keywords; none of this has run on an Ascend card.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from calibration import npu_env
from planner.schema import HardwareProfile
from tests.fake_npu.harness import cann_publishing, fake_npu_fixture  # noqa: F401  (registers the fixture)

if importlib.util.find_spec("torch") is None:  # not imported here: torch costs ~4 s of CPU at collection
    pytest.skip("torch is not installed", allow_module_level=True)
typer_testing = pytest.importorskip("typer.testing")


def _calibrate(tmp_path: Path, *extra: str, card: str = "ascend-910b4") -> tuple[Any, Path]:
    from planner.cli import app

    out = tmp_path / "calibrated.yaml"
    args = [
        "calibrate",
        "--card",
        card,
        "--device",
        "npu:0",
        "--out",
        str(out),
        "--raw",
        str(tmp_path / "raw.json"),
    ]
    result = typer_testing.CliRunner().invoke(app, [*args, *extra])
    return result, out


def _profile(out: Path) -> HardwareProfile:
    return HardwareProfile.model_validate(yaml.safe_load(out.read_text(encoding="utf-8")))


def _raw(tmp_path: Path) -> dict[str, Any]:
    import json

    return json.loads((tmp_path / "raw.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_fake_910b4_calibrates_to_a_profile_with_npu_provenance(
    fake_npu: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_npu.setenv("TASK_QUEUE_ENABLE", "1")
    result, out = _calibrate(tmp_path)
    assert result.exit_code == 0, result.output
    measured = _profile(out).measured
    assert measured is not None and measured.backend == "npu" and measured.device_name == "Ascend910B4"
    versions = measured.versions
    assert versions["soc_name"] == "Ascend910B4"
    assert versions["cann"] == os.environ["FAKE_NPU_CANN"]  # torch_npu's own query
    assert versions["env.TASK_QUEUE_ENABLE"] == "1" and versions["graph_mode"] == "graph"
    rows = _raw(tmp_path)["rows"]
    expected = {"kernels", "step", "stream", "gemv", "attention", "gemm", "prefill_gemm", "grouped_gemm"}
    assert expected <= set(rows)
    assert {r["layout"] for r in rows["gemv"] if r["dtype"] == "w8a16"} == {"ND", "NZ"}  # engine layouts
    assert {r["dtype"] for r in rows["gemm"]} == {"bf16", "fp16", "int8"}  # no fp8 on a 910B
    assert all(r["timing"] == "graph" for r in rows["attention"])
    assert "kernels per pass:" in measured.notes  # counted through torch_npu.profiler's kernel_details.csv
    # npu_grouped_matmul rows reach the fit; on a loaded CPU their times can fail to grow with bytes, and then
    # the profile must say so rather than keep a silent default
    fitted = measured.coefficients.grouped_matmul_latency_us is not None
    assert fitted or "grouped_matmul_*: not fitted" in measured.notes
    mix = [r for r in rows["kernels"] if r["mode"] == "layer_mix"]  # the same code path as cuda
    assert mix and all(r["kernels_counted"] and r["timing"] == "graph" for r in mix)
    table = measured.coefficients.kernel_overhead_table or []
    assert [k.kernel_us * 1e-6 for k in table] == pytest.approx([r["median_s"] for r in mix], rel=1e-3)


def test_fake_ops_bind_arguments_as_documented(fake_npu: pytest.MonkeyPatch) -> None:
    """The fake takes torch_npu's documented arguments, those it does not compute with included (by keyword,
    and by position where the binding allows it); a misspelt keyword, an argument given twice or one
    positional too many raises TypeError, as the binding does."""
    import torch
    import torch_npu

    x, scale = torch.randn(2, 8), torch.rand(4)
    w = torch.randint(-8, 8, (8, 4), dtype=torch.int8)
    expected = x @ (w.float() * scale)
    matmul = torch_npu.npu_weight_quant_batchmatmul
    assert torch.equal(matmul(x, w, scale, None, None, None, None, 0, 0), expected)  # all nine by position
    assert torch.equal(matmul(x, w, scale, bias=None, antiquant_group_size=0), expected)
    for bad in ({"antiquant_ofset": None}, {"antiquant_offset": None}):  # misspelt; given twice
        with pytest.raises(TypeError):
            matmul(x, w, scale, None, **bad)
    with pytest.raises(TypeError):
        matmul(x, w, scale, None, None, None, None, 0, 0, 0)
    q, kv = torch.randn(1, 1, 16), torch.randn(1, 4, 16)  # BSH, 2 heads of 8
    out, _ = torch_npu.npu_fused_infer_attention_score(q, kv, kv, num_heads=2, atten_mask=None, sparse_mode=0)
    assert out.shape == q.shape
    with pytest.raises(TypeError, match="num_head"):
        torch_npu.npu_fused_infer_attention_score(q, kv, kv, num_head=2)
    with pytest.raises(TypeError):
        torch_npu.npu_fused_infer_attention_score(q, kv, kv, None)  # keyword-only after value


def test_no_grouped_matmul_kernel_fails_alone(fake_npu: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_npu.setenv("FAKE_NPU_FAIL", "no_grouped_matmul")
    result, out = _calibrate(tmp_path)
    assert result.exit_code == 0, result.output
    notes = _profile(out).measured.notes  # type: ignore[union-attr]
    assert (
        "grouped expert GEMM: failed (RuntimeError: torch_npu" in notes and "no npu_grouped_matmul" in notes
    )
    rows = _raw(tmp_path)["rows"]
    assert "grouped_gemm" not in rows and {"attention", "gemm"} <= set(rows)  # the others still ran


@pytest.mark.parametrize(
    ("setting", "reason"),
    [
        ({"TASK_QUEUE_ENABLE": "2"}, "set TASK_QUEUE_ENABLE=1 to time graphs"),
        ({"FAKE_NPU_FAIL": "no_npugraph"}, "no graph class in this npu build"),
    ],
    ids=["task-queue-2-refuses-capture", "cann-8.0.0-build-without-npugraph"],
)
def test_without_graph_capture_timings_are_labelled_eager(
    fake_npu: pytest.MonkeyPatch, tmp_path: Path, setting: dict[str, str], reason: str
) -> None:
    for key, value in setting.items():
        fake_npu.setenv(key, value)
    result, out = _calibrate(tmp_path)
    assert result.exit_code == 0, result.output
    measured = _profile(out).measured
    assert measured is not None and measured.versions["graph_mode"].startswith("eager (")
    assert reason in measured.notes
    rows = _raw(tmp_path)["rows"]
    assert not [r for r in rows["kernels"] if r["mode"] == "graph"]  # never an eager timing labelled graph
    assert {r["timing"] for rs in rows.values() for r in rs} == {"eager"}


def test_out_of_memory_keeps_smaller_points_and_later_benchmarks(
    fake_npu: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # TINY attention: KV = 2 * batch * kv_heads * ctx * head_dim * 2 B from 256 B to 64 KiB; fail above 16 KiB
    fake_npu.setenv("FAKE_NPU_OOM_BYTES", str(16 * 1024))
    result, out = _calibrate(tmp_path)
    assert result.exit_code == 0, result.output
    notes = _profile(out).measured.notes  # type: ignore[union-attr]
    assert "decode attention: out of memory (RuntimeError: NPU out of memory" in notes
    rows = _raw(tmp_path)["rows"]
    assert rows["attention"] and all(r["bytes"] <= 16 * 1024 for r in rows["attention"])
    assert "gemm" in rows and "grouped_gemm" in rows  # benchmarks after the failing one ran


@pytest.mark.parametrize("mode", ["import_runtime", "import_exception"])
def test_torch_npu_import_failure_is_one_line(
    fake_npu: pytest.MonkeyPatch, tmp_path: Path, mode: str
) -> None:
    fake_npu.setenv("FAKE_NPU_FAIL", mode)
    result, out = _calibrate(tmp_path)
    assert result.exit_code == 2
    line = result.output.strip()  # CliRunner mixes stderr with the (transient) progress bar's newline
    assert line.startswith("kvplan: error: --device npu: torch_npu is not importable (")
    assert "\n" not in line and "Traceback" not in line
    assert not out.exists()


def test_torch_npu_built_for_another_torch_is_one_line(fake_npu: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_npu.setenv("FAKE_NPU_VERSION", "2.5.1")  # the installed torch is the CPU test build, not 2.5.1
    result, _ = _calibrate(tmp_path)
    assert result.exit_code == 2 and "\n" not in result.output.strip()
    assert (
        "does not match torch_npu 2.5.1 (built for torch 2.5.1); pip install 'torch==2.5.1'" in result.output
    )


def test_310p_runs_fp16_and_says_so(fake_npu: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_npu.setenv("FAKE_NPU_SOC", "Ascend310P3")  # the fake 310P rejects every bf16 torch call
    result, out = _calibrate(tmp_path, card="atlas-300i-duo")
    assert result.exit_code == 0, result.output
    notes = _profile(out).measured.notes  # type: ignore[union-attr]
    assert "no bf16; the bf16 benchmarks ran in fp16" in notes and "failed" not in notes
    rows = _raw(tmp_path)["rows"]
    assert {r["dtype"] for r in rows["gemv"]} == {"fp16", "w8a16"} and "bf16" not in {
        r["dtype"] for r in rows["gemm"]
    }


def test_950_measures_fp8_and_needs_cann_9(fake_npu: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake_npu.setenv("FAKE_NPU_SOC", "Ascend950PR")
    fake_npu.setenv("FAKE_NPU_CANN", "8.5.0")
    blocked, _ = _calibrate(tmp_path, card="ascend-950pr")
    assert blocked.exit_code == 2 and "Ascend950PR needs CANN >= 9.0.0" in blocked.output
    # a CANN >= 9.0.0 that publishes the fake's torch_npu (the installed torch's version)
    cann = cann_publishing(os.environ["FAKE_NPU_VERSION"])
    if (npu_env.cann_line(cann) or (0, 0)) < npu_env.CANN_FOR_950:
        pytest.skip(f"torch {os.environ['FAKE_NPU_VERSION']} predates every torch_npu for the 950")
    fake_npu.setenv("FAKE_NPU_CANN", cann)
    result, _ = _calibrate(tmp_path, "--force", card="ascend-950pr")
    assert result.exit_code == 0, result.output
    assert "fp8" in {r["dtype"] for r in _raw(tmp_path)["rows"]["gemm"]}


def test_nothing_measured_is_one_line_and_no_profile(fake_npu: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import calibration.microbench as mb

    fake_npu.setattr(mb.Suite, "time_left", lambda self: False)  # every benchmark skipped
    result, out = _calibrate(tmp_path)
    assert result.exit_code == 2 and "no benchmark produced a result, no profile written" in result.output
    assert not out.exists()


def test_fake_310p_rejects_bf16_in_plain_torch_ops_too(fake_npu: pytest.MonkeyPatch) -> None:
    """Not only inside torch_npu's ops: a plain bf16 tensor op fails on the fake 310P as on the device, so a
    benchmark that forgot the 310P's fp16 cannot pass here; other SoCs take bf16."""
    import torch

    from calibration import device as devmod

    fake_npu.setenv("FAKE_NPU_SOC", "Ascend310P3")
    devmod.open_backend("npu:0")
    with pytest.raises(RuntimeError, match="Ascend310P3 does not support bfloat16"):
        torch.ones(4, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="does not support bfloat16"):
        torch.ones(4).to(torch.bfloat16).sum()
    assert torch.ones(4, dtype=torch.float16).sum().item() == 4
    fake_npu.setenv("FAKE_NPU_SOC", "Ascend910B4")
    assert torch.ones(4, dtype=torch.bfloat16).sum().item() == 4
