"""Shared test builders."""

from __future__ import annotations

from pathlib import Path

from click.testing import Result
from typer.testing import CliRunner

from planner import catalog
from planner.cli import app
from planner.deployment import Deployment
from planner.dtypes import StorageDType
from planner.schema import HardwareProfile


def deployment(
    model_id: str, card: str | HardwareProfile = "nvidia-h200", *, scheme: str = "bf16", **kw: object
) -> Deployment:
    """`model_id` on `card` (catalog id or profile) at ctx 4096, tp 1, bf16 KV; `kw` overrides any field."""
    fields: dict[str, object] = {
        "weight_scheme_name": scheme,
        "kv_dtype": StorageDType.bf16,
        "tp": 1,
        "ctx_tokens": 4096,
    }
    fields.update(kw)
    hardware = catalog.load_card(card) if isinstance(card, str) else card
    return Deployment(model=catalog.load_model(model_id), hardware=hardware, **fields)


def deployment_950pr(model_id: str = "qwen3.5-27b", *, scheme: str = "fp8", **kw: object) -> Deployment:
    """An uncalibrated ascend-950pr deployment at ctx 4096, tp 1, bf16 KV; `kw` overrides any field."""
    return deployment(model_id, "ascend-950pr", scheme=scheme, **{"calibrated": False, **kw})


# The model-card fields that state a model's geometry: what an HF config.json sets, and the attention kind.
GEOMETRY_KEYS = (
    "model_type",
    "attention",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "vocab_size",
    "tie_word_embeddings",
    "max_position_embeddings",
    "attention_bias",
    "qk_norm",
    "attn_output_gate",
    "linear_conv_kernel_dim",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_num_key_heads",
    "linear_num_value_heads",
    "num_experts",
    "n_routed_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "n_shared_experts",
    "first_k_dense_replace",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "num_nextn_predict_layers",
)


# `kvplan mindie` for Qwen3-32B on four 910B3 at 8k (the documented tp=4 example); tests append their flags.
MINDIE_32B_TP4_ARGS = ("mindie", "--model", "qwen3-32b", "--card", "ascend-910b3", "--tp", "4", "--ctx", "8k")


def replacing(base: list[str], extra: list[str]) -> list[str]:
    """`base` then `extra`, without base's flags that `extra` gives again (each with the value after it):
    kvplan refuses one option given twice with different values (planner/cli/repeats.py)."""
    again = {word for word in extra if word.startswith("-")}
    kept: list[str] = []
    words = iter(base)
    for word in words:
        if word in again:
            next(words, None)  # its value
        else:
            kept.append(word)
    return [*kept, *extra]


def kvplan(words: str, *args: str | Path, code: int = 0) -> Result:
    """Run `kvplan <words> <args>` in-process (`words` split on white space, each of `args` passed whole,
    e.g. a path) and assert it exits with `code`, showing its output when it does not."""
    result = CliRunner().invoke(app, [*words.split(), *(str(a) for a in args)])
    assert result.exit_code == code, result.output
    return result


def fails_with(args: list[str | Path], *words: str, code: int = 2) -> str:
    """Run `kvplan ARGS` in-process; it exits `code` with exactly one `kvplan: error:` line holding every
    one of `words`, which is returned."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (args, result.output)
    line = result.stderr
    assert line.startswith("kvplan: error: ") and line.count("\n") == 1, line
    missing = [w for w in words if w not in line]
    assert not missing, (missing, line)
    return line


def stdout_of(args: list[str | Path]) -> str:
    """Run `kvplan ARGS` in-process; it exits 0, and its standard output is returned."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, (args, result.output)
    return result.stdout


H200_POINTS = Path(__file__).resolve().parents[1] / "lab/runs/h200-e2e-decode.csv"


def h200_points_of(model_id: str, directory: Path) -> Path:
    """`directory`/<model_id>.csv: the header and that model's rows of the committed H200 decode points."""
    header, *rows = H200_POINTS.read_text().splitlines()
    mine = (row for row in rows if row.startswith(f"{model_id},"))
    return write_csv(directory / f"{model_id}.csv", f"{header}\n", *mine)


def write_csv(path: Path, header: str, *rows: str) -> Path:
    """`path` holding `header` (its own newline included) then one line per row; returns the path."""
    path.write_text(header + "".join(f"{row}\n" for row in rows), encoding="utf-8")
    return path


def with_pass_overheads(dep: Deployment) -> Deployment:
    """`dep` on a card whose coefficients charge a prefill pass and each sequence (as fitted profiles do)."""
    coeff = dep.hardware.coefficients(calibrated=False)
    extra = coeff.model_copy(update={"prefill_pass_overhead_us": 900.0, "sequence_overhead_us": 40.0})
    hardware = dep.hardware.model_copy(update={"default_coefficients": extra})
    return dep.model_copy(update={"hardware": hardware})
