"""A first hour with --dtype w4a16-moe and the seconds rule: what the plan says of an experts-only scheme on a
dense model, the hints that name a smaller dtype, a compressed-tensors config in text_config, and times of
10 s or more printed in seconds wherever a range or a line of tails holds them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from planner import advice, catalog, units
from planner.cli import app
from planner.cli.serve_view import tail_lines
from planner.errors import SloNotMetError
from planner.importers import quantization
from planner.sim.metrics import Percentiles
from planner.sim.search import SearchResult, slo_text
from tests.helpers import deployment, fails_with, stdout_of

ROOT = Path(__file__).resolve().parents[1]

_MS_VALUE = re.compile(r"([0-9][0-9,]*(?:\.[0-9]+)?) ms")


def huge_ms(text: str) -> list[str]:
    """Every 'N ms' of `text` with N of 10 000 or more: what the seconds rule leaves none of."""
    return [m.group(0) for m in _MS_VALUE.finditer(text) if float(m.group(1).replace(",", "")) >= 10_000]


def plan_json(*flags: str) -> dict[str, object]:
    return dict(json.loads(stdout_of([*flags, "--json"])))


@pytest.mark.parametrize(
    ("scheme", "stored"), [("w4a16-moe", "bf16"), ("w4a16-experts", "bf16"), ("w4a8", "int8")]
)
def test_an_experts_only_dtype_on_a_dense_model_says_what_it_stores(scheme: str, stored: str) -> None:
    """A dense model has no routed experts: the plan is the other-linears dtype's, and a note says so."""
    flags = ["-m", "qwen3-8b", "--card", "ascend-910b3"]
    planned, plain = plan_json(*flags, "--dtype", scheme), plan_json(*flags, "--dtype", stored)
    assert planned["memory"] == plain["memory"]
    said = [w for w in planned["warnings"] if "routed experts only" in w]  # type: ignore[attr-defined]
    assert len(said) == 1 and f"stored as {stored}" in said[0] and "w4a16" in said[0]


def test_the_dense_note_names_fp16_on_a_card_without_bf16_and_stays_off_moe_models() -> None:
    duo = plan_json("-m", "qwen3-8b", "--card", "atlas-300i-duo", "--dtype", "w4a16-moe")
    assert any("stored as fp16" in w for w in duo["warnings"])  # type: ignore[attr-defined]
    moe = plan_json("-m", "qwen3-30b-a3b", "--card", "ascend-910b3", "--dtype", "w4a16-moe")
    assert not any("routed experts only" in w for w in moe["warnings"])  # type: ignore[attr-defined]


def test_smaller_dtypes_are_smaller_in_bytes_for_this_model() -> None:
    """w4a16-moe keeps a dense model 16-bit: it is no smaller than bf16 there, and is offered for MoE only."""
    dense, moe = deployment("qwen3-32b", "ascend-910b3"), deployment("qwen3-30b-a3b", "ascend-910b3")
    assert "w4a16-moe" not in advice.runnable_smaller_dtypes(dense)
    assert "w4a16-moe" in advice.runnable_smaller_dtypes(moe)
    for dep in (dense, moe):
        own = advice.model_weight_bytes(dep, "bf16")
        assert all(advice.model_weight_bytes(dep, d) < own for d in advice.runnable_smaller_dtypes(dep))


@pytest.mark.parametrize(("model", "memory_gib"), [("qwen3-32b", "2"), ("deepseek-v3", "14")])
def test_a_combined_hint_names_the_fewest_bytes_and_its_command_fits(model: str, memory_gib: str) -> None:
    """Neither a larger --tp nor a smaller --dtype alone fits: the hint pairs the dtype storing the model in
    the fewest bytes with a tp, and that plan runs (it named w4a16-moe, the last scheme listed, which keeps
    a dense model 16-bit: 'no larger --tp or smaller --dtype fits' where one did)."""
    flags = ["-m", model, "--card", "ascend-910b3", "--memory-gib", memory_gib, "--ctx", "1k"]
    line = fails_with([*flags, "--tp", "1"], "try --tp", code=3)
    tp, dtype = re.search(r"try --tp (\d+) --dtype (\S+)$", line.strip()).groups()  # type: ignore[union-attr]
    dep = deployment(model, "ascend-910b3")
    sizes = {d: advice.model_weight_bytes(dep, d) for d in advice.runnable_smaller_dtypes(dep)}
    assert sizes[dtype] == min(sizes.values())
    assert plan_json(*flags, "--tp", tp, "--dtype", dtype)["recommendation"]


def test_a_16_bit_dtype_the_card_lacks_suggests_the_16_bit_one_it_has() -> None:
    line = fails_with(["-m", "qwen3-8b", "--card", "atlas-300i-duo", "--dtype", "bf16"], "needs native bf16")
    first = re.search(r"try --dtype (\w+)", line).group(1)  # type: ignore[union-attr]
    assert first in catalog.load_card("atlas-300i-duo").native_dtypes and first != "int8"
    assert plan_json("-m", "qwen3-8b", "--card", "atlas-300i-duo", "--dtype", first)["dtype"] == first


# Kimi-K2.5's quantization_config (modelcards/kimi-k2.5.yaml sources: the report, code-search id 62530201892)
KIMI_NATIVE_INT4 = {
    "quant_method": "compressed-tensors",
    "format": "pack-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "input_activations": None,
            "weights": {
                "num_bits": 4,
                "type": "int",
                "strategy": "group",
                "group_size": 32,
                "symmetric": True,
            },
        }
    },
    "ignore": [
        "lm_head",
        "re:.*self_attn.*",
        "re:.*shared_experts.*",
        "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
    ],
}


def test_a_quantization_config_in_text_config_alone_is_read(tmp_path: Path) -> None:
    """A kimi_k25-style wrapper stating its quantization in text_config (as Kimi-K3's raw config.json does)
    imports as the top-level form does."""
    top = quantization.checkpoint_quantization({"quantization_config": KIMI_NATIVE_INT4}, directory=tmp_path)
    nested = {"text_config": {"quantization_config": KIMI_NATIVE_INT4}}
    inner = quantization.checkpoint_quantization(nested, directory=tmp_path)
    assert top is not None and inner is not None and inner.dtype == top.dtype == "w4a16-moe"
    assert quantization.checkpoint_quantization({"text_config": {}}, directory=tmp_path) is None


def test_duration_units_follow_the_line_and_the_range() -> None:
    assert units.fmt_duration(7.5579, unit_of=13.4) == "7.6 s"
    assert units.fmt_duration(0.0481, unit_of=0.0596) == "48.1 ms"
    low, high, point = 2.4876, 31.095, 2.4876
    span = units.fmt_duration_span(low, high, point_s=point)
    assert span.endswith(" s") and not huge_ms(span)
    a, b = (float(x) for x in span.removesuffix(" s").split("-"))
    assert a <= low and b >= high  # rounded outward, in seconds
    ms_span = units.fmt_duration_span(0.0588, 0.736, point_s=0.0588)
    assert ms_span.startswith(units.fmt_duration(0.0588).removesuffix(" ms") + "-")  # holds the point printed


def test_a_line_of_tails_reads_in_one_unit() -> None:
    """TTFT mean 7.6 s and P99 13.4 s: one line, one unit (it printed '7557.9 ms ... 13.4 s')."""

    sim = SimpleNamespace(
        ttft_s=Percentiles(mean=7.5579, p50=7.5579, p90=13.4, p95=13.4, p99=13.4),
        tpot_s=Percentiles(mean=0.0481, p50=0.0481, p90=0.0596, p95=0.0596, p99=0.0596),
        e2e_s=Percentiles(mean=32.1, p50=32.1, p90=32.1, p95=32.1, p99=32.1),
        tpot_requests=8,
    )
    for line in tail_lines(sim):  # type: ignore[arg-type]
        assert len(set(re.findall(r"\d (ms|s)\b", line))) == 1, line


def test_the_plan_prints_a_long_prompts_ttft_range_in_seconds() -> None:
    flags = [
        "-m",
        "qwen3-32b",
        "--card",
        "ascend-910b3",
        "--tp",
        "2",
        "--ctx",
        "64k",
        "--input-tokens",
        "60k",
    ]
    out = stdout_of(flags)
    speed = " ".join(out[out.index("Speed at") :].split("\n")[:3])
    assert "TTFT" in speed and not huge_ms(speed), speed


def test_slo_texts_print_no_exponent_and_seconds_from_10_s() -> None:
    """--ttft-ms 60000 read '6e+04 ms'; a 10.6 s TTFT '1.063e+04 ms'."""

    found = SearchResult(
        kind="max-concurrency", load="concurrency", quantile="p99", slo={"ttft_s": 60.0, "tpot_s": 1 / 30},
        best=None, points=[],
    )  # fmt: skip
    text = slo_text(found)
    assert "e+" not in text and "60000 ms" in text and "33.33 ms" in text
    flags = "serve -m qwen3-8b --card ascend-910b3 --ttft-ms 10 --input-tokens 60k --ctx 64k"
    result = CliRunner().invoke(app, flags.split())
    line = result.stderr
    assert result.exit_code == SloNotMetError.exit_code and line.startswith("kvplan: error: SLO"), line
    assert "e+" not in line and not huge_ms(line), line


def test_a_card_whose_checkpoint_is_quantized_names_that_dtype_when_the_default_does_not_fit(
    tmp_path: Path,
) -> None:
    """A card `kvplan models import` wrote from Kimi's native-INT4 checkpoint records checkpoint_dtype
    w4a16-moe; planned at the default bf16 it does not fit, and the refusal names the checkpoint's dtype
    first (the warning that says so is printed only with a plan)."""
    card = yaml.safe_load((ROOT / "modelcards" / "kimi-k2.5.yaml").read_text())
    card.update(id="kimi-imported", aliases=[], checkpoint_dtype="w4a16-moe")
    path = tmp_path / "kimi-imported.yaml"
    path.write_text(yaml.safe_dump(card))
    args = ["--model", str(path), "--card", "ascend-910c", "--tp", "16", "--ep", "16", "--ctx", "8k"]
    refused = CliRunner().invoke(app, [*args, "--engine", "vllm"])
    assert refused.exit_code == 3
    assert "try --dtype w4a16-moe (the checkpoint's)" in refused.output
    planned = CliRunner().invoke(app, [*args, "--engine", "vllm", "--dtype", "w4a16-moe"])
    assert planned.exit_code == 0, planned.output


def test_the_default_dtype_is_the_cards_own_16_bit_one() -> None:
    """`kvplan -m qwen3-8b --card atlas-300i-duo` was refused (the bf16 default on a card without bf16);
    --dtype now defaults to auto, the card's 16-bit dtype: fp16 there, bf16 on a card that has it. A typed
    bf16 is still refused on the 300I Duo, and sweep's dtype axis takes auto too."""
    duo = CliRunner().invoke(app, ["-m", "qwen3-8b", "--card", "atlas-300i-duo", "--json"])
    assert duo.exit_code == 0, duo.output
    assert json.loads(duo.stdout)["dtype"] == "fp16"
    a2 = CliRunner().invoke(app, ["-m", "qwen3-8b", "--card", "ascend-910b3", "--dtype", "AUTO", "--json"])
    assert json.loads(a2.stdout)["dtype"] == "bf16"
    typed = CliRunner().invoke(app, ["-m", "qwen3-8b", "--card", "atlas-300i-duo", "--dtype", "bf16"])
    assert typed.exit_code == 2 and "needs native bf16 units" in typed.output
    swept = CliRunner().invoke(
        app, ["sweep", "-m", "qwen3-8b", "--card", "atlas-300i-duo", "--dtype", "auto,int8,fp16", "--json"]
    )
    assert swept.exit_code == 0, swept.output
    assert json.loads(swept.stdout)["weight_dtypes"] == ["fp16", "int8"]  # auto is fp16 here: swept once


def test_a_tp_hint_grows_an_expert_parallelism_that_spans_the_group() -> None:
    """Kimi at --tp 8 --ep 8 on the A3 said 'try --tp 16', which vLLM refuses (ep must be 1 or tp x dp):
    the hint now carries --ep 16 along, and the command it names plans."""
    args = [
        "-m",
        "kimi-k2.5",
        "--card",
        "ascend-910c",
        "--dtype",
        "w4a16-moe",
        "--ctx",
        "8k",
        "--engine",
        "vllm",
    ]
    refused = CliRunner().invoke(app, [*args, "--tp", "8", "--ep", "8"])
    assert refused.exit_code == 3
    hint = re.search(r"try (--tp \d+ --ep \d+)", refused.output)
    assert hint is not None, refused.output
    planned = CliRunner().invoke(app, [*args, *hint.group(1).split()])
    assert planned.exit_code == 0, planned.output
