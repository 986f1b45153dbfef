"""Hostile input against the calibration and import flows: `calibrate --from-log`, `calibrate --from-bench`,
`validate`, `models import` and `bench import`, and their round trips into a plan. One regression test per
root cause (helper h73's attack, /work/scratch/h73_report.md); each failed on main at 117fc50.

In-process (typer's CliRunner), ~0.1-0.5 s a case.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import yaml

from planner import units
from planner.engines.vllm import log as vllm_log
from tests.helpers import fails_with, stdout_of
from tests.test_vllm_startup import LOG_3800, LOG_10122, LOG_10517

WEIGHTS_LINE = "INFO [model_runner.py:1] Model loading took 15.3 GiB memory\n"
QWEN3_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "torch_dtype": "bfloat16",
    "_name_or_path": "Qwen/Qwen3-8B",
}
SERVING_HEADER = (
    "model,card,dtype,kv_dtype,tp,engine,concurrency,input_tokens,output_tokens,output_tokens_per_s"
)
SERVING_ROW = "qwen3-8b,ascend-950pr,bf16,,1,vllm,8,1024,256,900"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- calibrate --from-log on the catalogued Ascend cards (variants with a runtime-visible total) ----------


def test_from_log_on_a_card_with_variants_writes_the_logged_total(tmp_path: Path) -> None:
    """Was: exit 2 with a pydantic dump ('memory_capacity_gib / visible_memory_bytes must equal variant
    atlas-300i-duo-48g's') for the 310P log on its own card, and on every Ascend profile; where it passed,
    the card's visible_memory_bytes still overrode the logged total in the plan."""
    out = tmp_path / "duo.yaml"
    log = write(tmp_path / "startup.log", LOG_10122)
    text = stdout_of(["calibrate", "--from-log", log, "--card", "atlas-300i-duo", "--out", out])
    assert "variant atlas-300i-duo-48g dropped" in text
    logged = vllm_log.parse_vllm_log(LOG_10122).device_total_bytes
    profile = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert profile["visible_memory_bytes"] == logged and profile["variant"] is None
    assert profile["memory_capacity_gib"] == 48  # the nominal stays: it is larger than the logged total
    plan = json.loads(stdout_of(["-m", "qwen3-8b", "--dtype", "fp16", "--card", out, "--json"]))
    assert plan["memory"]["device_capacity_bytes"] == logged


def test_from_log_on_a_64g_card_plans_with_the_logged_total(tmp_path: Path) -> None:
    """The vllm-ascend v0.11 'Available memory: N, total memory: T' log on ascend-910b3 (was: exit 2)."""
    out = tmp_path / "b3.yaml"
    log = write(tmp_path / "startup.log", LOG_3800 + WEIGHTS_LINE)
    args = ["calibrate", "--from-log", log, "--card", "ascend-910b3", "--out", out]
    stdout_of([*args, "--gpu-memory-utilization", "0.9"])
    plan = json.loads(stdout_of(["-m", "qwen3-8b", "--card", out, "--json"]))
    assert plan["memory"]["device_capacity_bytes"] == 65452113920


def test_from_log_keeps_line_endings_and_refuses_a_flow_style_card(tmp_path: Path) -> None:
    """Was: a CRLF card gave a file of mixed line endings; a card written as one flow mapping `{...}` gave
    a yaml.parser.ParserError traceback (also with --from-bench)."""
    source = Path(__file__).resolve().parents[1] / "hwprofiles" / "nvidia-l40s.yaml"
    crlf = tmp_path / "crlf.yaml"
    crlf.write_bytes(source.read_bytes().replace(b"\n", b"\r\n"))
    log = write(tmp_path / "startup.log", LOG_10517)
    out = tmp_path / "out.yaml"
    stdout_of(["calibrate", "--from-log", log, "--card", crlf, "--out", out])
    assert b"\r" not in out.read_bytes()
    flow = write(tmp_path / "flow.yaml", json.dumps(yaml.safe_load(source.read_text(encoding="utf-8"))))
    args = ["calibrate", "--from-log", log, "--card", flow, "--out", tmp_path / "flow-out.yaml"]
    fails_with(args, f"--card {flow}: cannot take the log's figures", "not a flow mapping")
    assert not (tmp_path / "flow-out.yaml").exists()


# --- calibrate --from-log: figures that contradict each other ------------------------------------------


@pytest.mark.parametrize(
    ("log", "words"),
    [
        (
            "Available memory: 0, total memory: 0\n" + WEIGHTS_LINE,
            ["got a total of 0 B", "at least 1.00 MiB"],
        ),
        ("Available memory: 100, total memory: 0\n" + WEIGHTS_LINE, ["cannot hold its own KV cache"]),
        (
            "Available memory: 1000, total memory: 48318382080\nModel loading took 100 GiB\n",
            ["weights 100.00 GiB", "45.00 GiB x 0.9 = 40.50 GiB", "check --gpu-memory-utilization"],
        ),
    ],
    ids=["total-zero", "kv-over-total", "weights-over-budget"],
)
def test_from_log_refuses_contradicting_figures(tmp_path: Path, log: str, words: list[str]) -> None:
    """Was: a traceback (usable_memory_gib >= 0.0009765625) for a zero total; a profile with runtime 0 for
    weights beyond the budget (the deficit clamped to 0)."""
    path = write(tmp_path / "x.log", log)
    out = tmp_path / "x.yaml"
    args = ["calibrate", "--from-log", path, "--card", "nvidia-l40s", "--out", out]
    fails_with([*args, "--gpu-memory-utilization", "0.9"], f"--from-log {path}: ", *words)
    assert not out.exists()


def test_from_log_names_the_file_and_refuses_a_utilization_the_log_contradicts(tmp_path: Path) -> None:
    """Was: 'log figure out of range' naming neither flag nor file (and 20 of 44 digits as the value); a
    --gpu-memory-utilization other than the log's silently ignored."""
    big = write(tmp_path / "big.log", "Available memory: " + "9" * 44 + ", total memory: 48318382080\n")
    args = ["calibrate", "--card", "nvidia-l40s", "--out", tmp_path / "o.yaml"]
    fails_with([*args, "--from-log", big], f"--from-log {big}: log figure out of range", "(44 characters)")
    log = write(tmp_path / "v0.log", LOG_10517)
    fails_with(
        [*args, "--from-log", log, "--gpu-memory-utilization", "0.5"],
        "--gpu-memory-utilization: the log states the engine's own 0.9 (got 0.5",
    )


@pytest.mark.parametrize(
    "text",
    ["total_gpu_memory=1GiB peak_torch_memory=1GiB " * 20_000, " " * 1_000_000],
    ids=["v0-keys-repeated", "blanks"],
)
def test_log_patterns_stay_linear(text: str) -> None:
    """Was: > 30 s for 900 KB of repeated V0 keys (cubic backtracking of `.*?`) and 41 s for 100 KB of
    blanks (BLOCKS_RE's leading `\\s*`): within the 16 MiB read cap a log could hold kvplan for hours."""
    start = time.process_time()
    vllm_log.parse_vllm_log(text)
    assert time.process_time() - start < 5.0


# --- outputs: never over an input, never a folder's name, one reader at a time -------------------------


def test_outputs_never_replace_the_files_the_run_reads(tmp_path: Path) -> None:
    """Was: --force wrote the profile over the --from-log / --from-bench file, the card YAML over the
    config.json it was imported from, and the rows over the result file (each with a .bak kept)."""
    log = write(tmp_path / "startup.log", LOG_10517)
    bench = write(tmp_path / "b.csv", f"{SERVING_HEADER}\n{SERVING_ROW}\n")
    config = write(tmp_path / "config.json", json.dumps(QWEN3_CONFIG))
    result = tmp_path / "r.json"
    result.write_bytes(
        (Path(__file__).parent / "fixtures" / "bench_results" / "vllm_bench_serve.json").read_bytes()
    )
    cases = [
        (["calibrate", "--from-log", log, "--card", "nvidia-l40s", "--out", log], log,
         "same file as --from-log"),
        (["calibrate", "--from-bench", bench, "--out", bench], bench, "same file as --from-bench"),
        (["models", "import", tmp_path, "--out", config], config, "same file as the source config"),
        (["bench", "import", result, "--card", "ascend-910b3", "-m", "qwen3-8b", "--out", result], result,
         f"same file as result file {result}"),
    ]  # fmt: skip
    for args, read, words in cases:
        before = read.read_bytes()
        fails_with([*args, "--force"], "--out: ", words)
        assert read.read_bytes() == before and not Path(f"{read}.bak").exists()


@pytest.mark.parametrize("typed", ["new/", "new/.", "--out=new/"], ids=["slash", "slash-dot", "attached"])
def test_an_output_named_as_a_folder_is_refused(tmp_path: Path, typed: str) -> None:
    """Was: `--out new/` wrote a file named `new` (the path the command got had lost its slash)."""
    config = write(tmp_path / "config.json", json.dumps(QWEN3_CONFIG))
    out = ["--out", f"{tmp_path}/{typed}"] if not typed.startswith("--") else [f"--out={tmp_path}/new/"]
    fails_with(["models", "import", config, *out], "--out: a folder, not a file name", "/NAME")
    log = write(tmp_path / "startup.log", LOG_10517)
    fails_with(["calibrate", "--from-log", log, "--card", "nvidia-l40s", *out], "--out: a folder")
    assert not (tmp_path / "new").exists()


def test_calibrate_takes_one_file_to_learn_from(tmp_path: Path) -> None:
    """Was: --from-bench given with --from-log silently ignored (the log written into the CSV's card)."""
    log = write(tmp_path / "startup.log", LOG_10517)
    bench = write(tmp_path / "b.csv", f"{SERVING_HEADER}\n{SERVING_ROW}\n")
    args = ["calibrate", "--from-bench", bench, "--from-log", log, "--out", tmp_path / "o.yaml"]
    fails_with(args, "--from-log: one file to learn from", f"--from-bench {bench}")


# --- models import: the source and its fields -----------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_models_import_names_a_source_that_is_no_regular_file(tmp_path: Path) -> None:
    """Was: 'config file not found' for a FIFO, /dev/zero or a link to it (all exist)."""
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    link = tmp_path / "zero.json"
    link.symlink_to("/dev/zero")
    fails_with(["models", "import", fifo], f"{fifo}: not a regular file (got a FIFO")
    fails_with(["models", "import", link], f"{link}: not a regular file (got a device or socket")


@pytest.mark.parametrize("key", ["num_attention_heads", "vocab_size", "head_dim"])
def test_models_import_refuses_numbers_written_as_text(tmp_path: Path, key: str) -> None:
    """Was: "32" (a JSON string) read as 32 for every field but Llama's hidden_size / heads."""
    config = write(tmp_path / "config.json", json.dumps({**QWEN3_CONFIG, key: str(QWEN3_CONFIG[key])}))
    fails_with(["models", "import", config], f"{config}: {key}: a number written as text")


# --- bench CSV cells -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "cell"), [("concurrency", "1_6"), ("output_tokens_per_s", "\u0661\u0667\u0660")]
)
def test_bench_cells_are_ascii_numbers(tmp_path: Path, column: str, cell: str) -> None:
    """Was: '1_6' read as 16 and Arabic-Indic digits as 170 (Python's int / float take both); the token
    columns already refused them."""
    cells = dict(zip(SERVING_HEADER.split(","), SERVING_ROW.split(","), strict=True))
    cells[column] = cell
    bench = write(tmp_path / "b.csv", SERVING_HEADER + "\n" + ",".join(cells.values()) + "\n")
    fails_with(["validate", bench], f"{bench}:2: column {column}: must be a", repr(cell))


def test_log_figures_are_bytes_exact_in_the_profile(tmp_path: Path) -> None:
    """The written total is the logged byte count, and memory_capacity_gib (rounded up to 1e-6 GiB where the
    log's total exceeds the nominal) never falls below it."""
    total = 45 * units.GIB_BYTES + 12345  # above the L40S's 44.99 GiB, within its 5 % tolerance
    log = write(tmp_path / "x.log", f"Available memory: 1000, total memory: {total}\n" + WEIGHTS_LINE)
    out = tmp_path / "x.yaml"
    stdout_of(
        ["calibrate", "--from-log", log, "--card", "nvidia-l40s", "--out", out, "--memory-fraction", "0.9"]
    )
    profile = yaml.safe_load(out.read_text(encoding="utf-8"))
    assert profile["visible_memory_bytes"] == total
    assert units.gib_to_bytes(profile["memory_capacity_gib"]) >= total
