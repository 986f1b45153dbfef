"""`kvplan models import` and a quantized checkpoint: config.json's quantization_config (fp8, awq, gptq,
compressed-tensors) or msModelSlim's quant_model_description.json names the --dtype the checkpoint needs. A
defect report (h53) found FP8 and AWQ configs imported to cards identical to the bf16 one, and a plan on them
sizing bf16 weights without a word; each test failed before the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from planner import inputs
from planner.importers import quantization
from planner.plan import compose
from planner.schema import ModelCard
from tests.helpers import kvplan
from tests.test_hfimport import QWEN3_0_6B

HF = Path(__file__).resolve().parent / "fixtures" / "hf_import"


def imported(source: Path, tmp_path: Path) -> tuple[ModelCard, str]:
    """(the card `models import` writes, its report on stderr)."""
    out = tmp_path / f"{source.name}.yaml"
    result = kvplan("models import", source, "--out", out)
    return ModelCard.model_validate(yaml.safe_load(out.read_text())), result.output


@pytest.mark.parametrize(
    ("name", "dtype", "stated"),
    [("fp8quant", "fp8", "fp8 (e4m3, weight blocks 128x128)"), ("awq", "w4a16", "awq (4-bit)")],
)
def test_quantized_configs_record_the_dtype_and_say_which_to_plan(
    name: str, dtype: str, stated: str, tmp_path: Path
) -> None:
    card, report = imported(HF / name, tmp_path)
    assert card.checkpoint_dtype == dtype
    assert f"config.json: quantization {stated}: plan this checkpoint with --dtype {dtype} " in report
    # the plan on the imported card says so when --dtype (default bf16) differs, and not when it matches
    plan = kvplan("-m", tmp_path / f"{name}.yaml").output
    assert (
        f"checkpoint is quantized to {dtype} (the card's checkpoint_dtype), but this plan sizes bf16" in plan
    )
    vllm = kvplan("vllm -m", tmp_path / f"{name}.yaml", "--weights-path", "/w").output
    assert f"pass --dtype {dtype} to plan that checkpoint" in vllm
    assert "checkpoint_dtype" not in kvplan("-m", tmp_path / f"{name}.yaml", "--dtype", dtype).output
    served = kvplan("serve -m", tmp_path / f"{name}.yaml", "--concurrency", "2", "--num-requests", "8")
    assert f"pass --dtype {dtype} to plan that checkpoint" in served.output  # serve says it too


def config_with(tmp_path: Path, quant: object, description: dict[str, Any] | None = None) -> Path:
    root = tmp_path / "ckpt"
    root.mkdir()
    config = {**QWEN3_0_6B, **({"quantization_config": quant} if quant is not None else {})}
    (root / "config.json").write_text(json.dumps(config))
    if description is not None:
        (root / quantization.MODELSLIM_FILE).write_text(json.dumps(description))
    return root


CT_GROUP = {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}
KIMI_INT4 = {  # Kimi-K2.5's quantization_config group (modelcards/kimi-k2.5.yaml)
    "targets": ["Linear"],
    "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True},
}


@pytest.mark.parametrize(
    ("quant", "description", "dtype", "kv_dtype"),
    [
        ({"quant_method": "gptq", "bits": 4, "group_size": 128}, None, "w4a16", None),
        ({"quant_method": "gptq", "bits": 8, "group_size": 128}, None, "w8a16", None),
        ({"quant_method": "fbgemm_fp8"}, None, "fp8", None),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "group_0": {**CT_GROUP, "input_activations": {"num_bits": 8, "type": "float"}}
                },
                "kv_cache_scheme": {"num_bits": 8, "type": "float"},
            },
            None,
            "fp8",
            "fp8",
        ),
        (
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {"weights": {"num_bits": 4, "type": "int"}, "input_activations": None}
                },
            },
            None,
            "w4a16",
            None,
        ),
        (  # Kimi-K2's native INT4: int4 group 32 symmetric, attention and shared experts ignored
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {**KIMI_INT4, "input_activations": None}},
                "ignore": [
                    "lm_head",
                    "re:.*self_attn.*",
                    "re:.*shared_experts.*",
                    "re:.*mlp\\.(gate|up)_proj.*",
                ],
            },
            None,
            "w4a16-moe",
            None,
        ),
        (  # the same weights with nothing ignored: every matmul int4, w4a16
            {
                "quant_method": "compressed-tensors",
                "config_groups": {"group_0": {**KIMI_INT4, "input_activations": None}},
                "ignore": ["lm_head"],
            },
            None,
            "w4a16",
            None,
        ),
        (  # int8 KV scales in compressed-tensors: no engine kvplan models reads them (named, not mapped)
            {
                "quant_method": "compressed-tensors",
                "config_groups": {
                    "g": {
                        "weights": {"num_bits": 8, "type": "int"},
                        "input_activations": {"num_bits": 8, "type": "int"},
                    }
                },
                "kv_cache_scheme": {"num_bits": 8, "type": "int"},
            },
            None,
            "int8",
            None,
        ),
        (
            None,
            {"model_quant_type": "W8A8", "kv_cache_type": "C8", "model.layers.0.k_proj.kv_cache_scale": "C8"},
            "int8",
            "int8",
        ),
        (
            {"quant_method": "ascend"},
            {"version": "1.0.0", "model.layers.0.mlp.down_proj.weight": "W4A8_DYNAMIC"},
            "w4a8",
            None,
        ),
    ],
)
def test_each_format_maps_to_a_kvplan_dtype(
    quant: dict[str, Any] | None,
    description: dict[str, Any] | None,
    dtype: str,
    kv_dtype: str | None,
    tmp_path: Path,
) -> None:
    root = config_with(tmp_path, quant, description)
    config = json.loads((root / "config.json").read_text())
    found = quantization.checkpoint_quantization(config, directory=root)
    assert found is not None and (found.dtype, found.kv_dtype) == (dtype, kv_dtype)
    card, report = imported(root, tmp_path)
    assert card.checkpoint_dtype == dtype
    assert f"--dtype {dtype}" + (f" --kv-dtype {kv_dtype}" if kv_dtype else "") + " (recorded" in report


@pytest.mark.parametrize(
    "quant",
    [
        {"quant_method": "bitsandbytes", "load_in_4bit": True},
        {"quant_method": "awq", "bits": 3},
        {"quant_method": "mxfp4"},
    ],
)
def test_an_unknown_format_is_a_note_naming_the_method_never_a_failure(
    quant: dict[str, Any], tmp_path: Path
) -> None:
    card, report = imported(config_with(tmp_path, quant), tmp_path)
    assert card.checkpoint_dtype is None
    assert f"note: {tmp_path / 'ckpt' / 'config.json'}: quantization {quant['quant_method']}" in report
    assert "is not a format kvplan maps to a --dtype" in report


def test_unquantized_checkpoints_say_nothing_of_quantization(tmp_path: Path) -> None:
    card, report = imported(config_with(tmp_path, None, {"model_quant_type": "FLOAT"}), tmp_path)
    assert card.checkpoint_dtype is None and "quantization" not in report
    dep = inputs.to_deployment(inputs.PlanRequest(model="qwen3-8b"))
    assert compose.checkpoint_dtype_warnings(dep) == []


def test_a_card_with_an_unknown_checkpoint_dtype_is_refused() -> None:
    with pytest.raises(ValueError, match=r"checkpoint_dtype\n.*unknown weight dtype \(got 'int3'"):
        ModelCard.model_validate(
            {
                **yaml.safe_load((HF.parents[2] / "modelcards" / "qwen3-8b.yaml").read_text()),
                "checkpoint_dtype": "int3",
            }
        )


def test_import_messages_name_the_default_id_the_note_and_the_missing_shard(tmp_path: Path) -> None:
    """--id's help said "default: the --out stem" (without --out it is the source directory's name); the
    "no *.safetensors" line had no `note:`; an index naming absent shards was reported as no safetensors."""
    help_text = " ".join(kvplan("models import --help").output.replace("│", " ").split())
    assert "else the source directory's name" in help_text and "default: the --out stem)" not in help_text
    _, report = imported(HF / "fp8quant", tmp_path)
    assert "note: no *.safetensors beside config.json: card not checked against weights" in report
    _, report = imported(HF / "st_index", tmp_path)
    assert (
        "warning: model.safetensors.index.json names 1 shard(s) not beside config.json: "
        "missing-00001.safetensors; card not checked against weights"
    ) in report
    assert "no *.safetensors" not in report


def test_a_quantization_config_naming_no_method_is_a_note(tmp_path: Path) -> None:
    card, report = imported(config_with(tmp_path, "fp8"), tmp_path)
    assert card.checkpoint_dtype is None
    assert "quantization unnamed (quantization_config 'fp8' names no quant_method) is not a format" in report


def test_json_import_carries_the_quantization_note_and_the_recorded_dtype(tmp_path: Path) -> None:
    """`models import --json`: the card's checkpoint_dtype and the report's quantization note (no prefix)."""
    data = json.loads(kvplan("models import --json", HF / "fp8quant").stdout)
    assert data["card"]["checkpoint_dtype"] == "fp8" and data["written"] is None
    assert any("plan this checkpoint with --dtype fp8" in note for note in data["notes"])
    assert not any(note.startswith("note:") for note in data["notes"])
    missing = json.loads(kvplan("models import --json", HF / "st_index").stdout)["listed_missing_shards"]
    assert missing and all(name.endswith(".safetensors") for name in missing)
