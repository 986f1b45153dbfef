"""kvplan's prediction for each published Ascend serving row: command, predicted, published, error.

    PYTHONPATH=. python lab/published/predict.py [--profile-dir DIR] [--out predictions.csv]

For each row of ascend-serving.csv this builds the serving bench row kvplan reads (planner/importers/
benchpoints.py) and predicts its output tok/s with the same code as `kvplan validate` and `kvplan serve`
(planner/fit/serving_rows.py: dp replicas x one replica's closed-loop estimate, "waves" arrivals, the
running batch capped by max_num_seqs and by memory). Rows kvplan cannot predict are kept with the reason
(engine or dtype it does not model, model without a card, ...). Prefill/decode disaggregated rows are
predicted by the `kvplan simulate --pd` command their config file describes (pd_command, the deployments
read in pd_deployments.py), run through the CLI in-process, and never fitted; the summary lists them apart
(kind "... (P:D)").

Printed: a per-(card, engine) summary (rows, median |error|, median signed error) and the path of the CSV.
error = predicted / published - 1. CI baselines are floors (a run passes at >= 0.97 x baseline), so a
positive error against a ci-baseline-floor row overstates how optimistic kvplan is by up to the margin the
CI run had above its floor, which is not published.

--profile-dir: predict with the card profiles in DIR (<card>.yaml) instead of hwprofiles/.
--fitted: predict with the profile a user gets for that card and engine (hwprofiles/fitted/ when shipped).
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import re
import shlex
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    from lab.published import assumed_settings, open_loop_runs, sglang_rows
except ImportError:  # run as a script from this directory (fit_profiles.py imports `predict`)
    import assumed_settings  # type: ignore[no-redef]
    import open_loop_runs  # type: ignore[no-redef]
    import sglang_rows  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "ascend-serving.csv"
# Corpus engine -> kvplan engine. cloudmatrix-infer (the paper's own stack) has no kernel structure in kvplan:
# predicted as vLLM's decode instance (CLOUDMATRIX_ENGINE below). SGLang rows run with the launch settings
# their source gives (sglang_rows.py, sglang-launch.csv). Seed 002's server.py (torch-npu-custom) runs the
# Hugging Face modules eagerly on torch_npu with their KV cache, one request at a time in the rows predicted:
# kvplan's transformers engine (eager, unfused kernels, no serving scheduler of its own). It differs in what
# kvplan does not see: a hand-patched Gated DeltaNet cache, fused RoPE / RMSNorm ops, an HTTP front end, and
# its own batched scheduler (15 ms window, left-padded prefill), which the rows at concurrency > 1 ran.
ENGINES = {"vllm-ascend": "vllm", "mindie": "mindie", "sglang": "sglang", "torch-npu-custom": "transformers"}
SEED_002_ENGINE = "torch-npu-custom"
# CloudMatrix-Infer (the CloudMatrix384 paper's own stack, arXiv 2506.12708; lines 111-112) has no kernel
# structure in kvplan. Its two figures are one PD-disaggregated decode instance's output tok/s per NPU (per
# 910C package) at a stated batch and KV length, with no prefill in them. Since 2026-12-06 (issue 23) they are
# predicted by kvplan's decode-speed command (`kvplan -m ... --batch B --ctx C`, "Speed at batch B, ctx C":
# the decode ledger of that batch), with the closest modelled engine, vLLM (DeepSeek's MLA with DP attention
# and wide EP on the 910C, as the vllm-ascend DeepSeek-R1 rows run), and never fitted. `kvplan serve` would
# add the 4k prompts' prefill, which the paper's prefill pool does: two thirds of a colocated instance's time.
CLOUDMATRIX_ENGINE = "cloudmatrix-infer"
CLOUDMATRIX_AS = "vllm"
CLOUDMATRIX_DECODE = (
    "a PD decode instance's tok/s per NPU: predicted by kvplan's decode speed at its batch, not fitted"
)
DIES_PER_PACKAGE = 2  # the paper's NPU is one 910C package: two ascend-910c dies
# The paper's EP320 puts one expert on each die: 32 shared-expert replicas, 256 routed and 32 redundant
# routed experts. kvplan puts routed experts and their redundant copies on the EP ranks and runs the shared
# expert on every rank, so the 320 ranks hold 256 routed + 64 copies (the 32 shared-expert dies as 32 more
# copies): one expert per die either way.  [assumed]
CLOUDMATRIX_REDUNDANT_EXPERTS = 64
# A CloudMatrix384's 384 packages (768 dies) share one non-blocking UB plane (the paper's abstract); the 910C
# profile's node is an Atlas 800I A3's 16 dies with RoCE between nodes, over which the EP320 dispatch alone
# takes 100 ms of a 197 ms step at line 111's batch.
CLOUDMATRIX_UB_DIES = 768
CLOUDMATRIX_NOTE = (
    "CloudMatrix-Infer predicted as --engine vllm (its fused MLA / MoE operators, AIV-direct dispatch and "
    "microbatch pipelining are not modelled); the decode instance alone, at the prompt as KV length (--ctx); "
    "the 32 shared-expert dies counted as redundant routed copies (--redundant-experts 64); the UB supernode "
    "as one node (--devices-per-node 768); per NPU = kvplan's instance tok/s x 2 / its dies"
)


def cloudmatrix_note(row: dict[str, str]) -> str:
    """CLOUDMATRIX_NOTE for a cloudmatrix-infer row (what its prediction assumes), "" otherwise."""
    return CLOUDMATRIX_NOTE if row["engine"] == CLOUDMATRIX_ENGINE else ""


SEED_002_AFTER_FIT = (
    "seed 002's torch_npu eager server, predicted as --engine transformers since 2026-12-06 (issue 23), "
    "after the shipped fits: not fitted"
)
# Seed 002 without a KV cache re-runs the whole prefix for every new token: not a deployment kvplan plans.
NO_KV_CACHE = (
    "no KV cache (a full forward of the whole prefix per generated token): not a deployment kvplan plans"
)
# Seed 002's MTP comparison (section 6: 862-token prompt, TPOT and tok/s at one stream) states no output
# length. Its other benchmarks generate 64 new tokens, and with 64 the rows' own tok/s and TPOT imply a TTFT
# of 0.27 s (base: 64 / 24.14 - 63 x 37.8 ms) and 0.25 s (MTP), next to the 0.234 s the same stack took for
# a 29-token prompt (a 0.8B prefill is launch-bound); 128 would imply 0.50 s. At one stream the prediction
# is about 1 / TPOT whatever the length (64 -> 75.7 tok/s, 1024 -> 76.6).  [assumed: from the seed's numbers]
SEED_002_OUTPUT_TOKENS = "64"
SEED_002_MTP_PROMPT = "862"  # input tokens of the MTP comparison (its base and --mtp rows)
# Seed 002's fp32 rows (lines 127-128, 136-137: '历史 fp32') are predicted with --dtype fp32 since
# 2026-12-06 (issue 23): 4-byte weights, activations and KV, matmuls at the card's fp32 peak
# (hwprofiles/ascend-910b3.yaml peak_tflop_per_s.fp32, D). Not fitted (SEED_002_AFTER_FIT).
# Seed 002's section 4 table (bf16 vs '历史 fp32', lines 134-137) says only '短 prompt' (short prompt). The
# article's HTTP runs otherwise use a 30-token prompt and 64 new tokens (section 3's table), and it quotes
# this table's c1 figures as HTTP single-stream speeds in the text around them (section 1: 'HTTP 单流约16.2
# tok/s', the fp32 c1; section 3: 'HTTP 约 22.4 tok/s' with cache, the bf16 c1): predicted at 30 in / 64 out.
# At 1 and 8 streams of a 0.8B model decode sets the speed, so the prompt length moves these rows little.
# [assumed: the article states no lengths for this table]
SEED_002_SHORT_PROMPT = ("short prompt (lengths not stated)", "30", "64")
# Seed 002's section 3 batch table (lines 129-133, 30 in / 64 out, c1-c32) states no dtype. Predicted as
# fp32: the article stacks its steps in order (KV cache, batching, then step 3, bf16 serving: "6.3x -> 12x
# -> 5% -> 1.42x"), the bf16 step compares against '历史 fp32' (the historical default), and the table's c8
# (150.2 tok/s) sits 4 % under that fp32 c8 (156.3) and 10 % under the bf16 one (166.2). The row keeps its
# blank dtype column in the corpus; the output's dtype column and not_modelled say what was assumed. At 1-32
# streams of a 0.8B model the choice moves kvplan's prediction by under 10 % (c1: fp32 69.9, bf16 76.6 tok/s).
# [assumed: the article states no dtype for this table]
SEED_002_BATCH_TABLE = ("dtype of this table not stated", "fp32")


def dtype_of(row: dict[str, str]) -> str:
    """The row's weight dtype as the corpus states it, or SEED_002_BATCH_TABLE's for that table."""
    marker, assumed = SEED_002_BATCH_TABLE
    unstated = not row["dtype"] and row["engine"] == SEED_002_ENGINE and marker in row["notes"]
    return assumed if unstated else row["dtype"]


def assumed_dtype_note(row: dict[str, str]) -> str:
    """'an unstated dtype (predicted as fp32: ...)' where dtype_of assumed one, "" otherwise."""
    if row["dtype"] or not dtype_of(row):
        return ""
    return f"an unstated dtype (predicted as {dtype_of(row)}: predict.SEED_002_BATCH_TABLE says why)"


# Line 170 (Qwen3.8-27B W8A8 on one 950PR, vllm-ascend 0.23.0, MTP 3: 'Measured single-stream decode: 64 tok/s
# (2048-token completion, one request, MTP on)') states neither its prompt length nor its MTP acceptance. One
# stream generating 2048 tokens is decode: a prompt of 64 to 4096 tokens moves kvplan's prediction by 3.5 %
# (52.9 -> 51.0 tok/s with the 4-row fit of 2026-12-06, this row in it), so it is predicted at kvplan's
# default prompt (planner.kinds.DEFAULT_INPUT_TOKENS: what a user who knows only this types) and with the
# draft acceptance vLLM measured for the same checkpoint, engine version and MTP depth (line 171: 64.2 %, PR
# #847's table).
# [assumed: the prompt length; a 64K-prompt run's acceptance for a long-form answer]
SINGLE_STREAM_MARKER = "the prompt length of the single-stream run is stated nowhere"
SINGLE_STREAM_ACCEPTANCE_LINE = 171


def is_unstated_single_stream(row: dict[str, str]) -> bool:
    """True for the single stream whose prompt length and acceptance are assumed (SINGLE_STREAM_MARKER)."""
    return SINGLE_STREAM_MARKER in row["notes"] and row["concurrency"] == "1"


def input_tokens(row: dict[str, str]) -> str:
    """The row's input tokens, SEED_002_SHORT_PROMPT's for seed 002's short-prompt table, kvplan's default
    prompt for the unstated single stream (is_unstated_single_stream), "" otherwise."""
    from planner.kinds import DEFAULT_INPUT_TOKENS

    marker, prompt, _output = SEED_002_SHORT_PROMPT
    short = row["engine"] == SEED_002_ENGINE and marker in row["notes"]
    assumed = str(DEFAULT_INPUT_TOKENS) if is_unstated_single_stream(row) else ""
    return row["input_tokens"] or (prompt if short else assumed)


def output_tokens(row: dict[str, str]) -> str:
    """The row's output tokens, or SEED_002_OUTPUT_TOKENS for seed 002's MTP comparison and
    SEED_002_SHORT_PROMPT's for its short-prompt table ("" otherwise)."""
    assumed = row["engine"] == SEED_002_ENGINE and row["input_tokens"] == SEED_002_MTP_PROMPT
    marker, _prompt, output = SEED_002_SHORT_PROMPT
    short = row["engine"] == SEED_002_ENGINE and marker in row["notes"]
    return row["output_tokens"] or (SEED_002_OUTPUT_TOKENS if assumed else output if short else "")


# The SGLang engine (planner/engines/sglang/) is modelled since 2026-12-06 (issue 23), after the shipped fits:
# its rows are predicted with each card's vllm-ascend fit (registry.fitted_profile_engine), never fitted.
SGLANG_AFTER_FIT = (
    "SGLang engine modelled on 2026-12-06 (issue 23), after the shipped fits: predicted with the card's "
    "vllm-ascend fit, not fitted"
)
ARRIVAL_MARGIN = 2.0  # paced rows whose arrival rate x output tokens is within 2x the throughput
DEFAULT_MAX_PREFILL_TOKENS = 8192  # planner.deployment.DEFAULT_MAX_PREFILL_TOKENS
FIT_MEMORY_FRACTION = 0.8  # planner.deployment.DEFAULT_MEMORY_FRACTION: what the fit's deployments use
# A row whose weights do not fit at FIT_MEMORY_FRACTION still ran, so its deployment gave the engine more of
# the card (MindIE: NPU_MEMORY_FRACTION up to 1.0 or an explicit npuMemSize; vLLM: --gpu-memory-utilization):
# such a row is predicted at this share (column memory_fraction), and its command says so.  [assumed]
RAISED_MEMORY_FRACTION = 0.95
SEED_950PR_MEMORY_GIB = "64"  # seed 000: a 64 GB 950PR (lab/published/README.md)
# DeepSeek sparse attention (the lightning indexer and top-2048 attention, planner/perf/sparse.py) is modelled
# since 2026-12-05, after the shipped fits: DeepSeek-V3.2's rows are predicted, never fitted, until a refit
# decides on them (not_fitted), so `fit_profiles.py --write` still reproduces the shipped profiles. The CI
# reuses one floor for different set-ups (1254 tok/s at 1 client with a 64k prompt and at 512 clients), so
# some of these rows' errors say more about the floor than about the model.
SPARSE_ATTENTION_MODEL = "deepseek-ai/DeepSeek-V3.2"
SPARSE_ATTENTION_AFTER_FIT = (
    "DeepSeek-V3.2 sparse attention (DSA) modelled on 2026-12-05, after the shipped fits: predicted, "
    "not fitted"
)
# GLM-5.1 / 5.2 (GlmMoeDsaForCausalLM: DeepSeek-V3.2's sparse attention; cards glm-5.1, glm-5.2) are carded
# since 2026-12-06 (issue 23), after the shipped fits: their rows are predicted, never fitted (not_fitted).
GLM5_MODEL = "zai-org/GLM-5"
GLM5_AFTER_FIT = (
    "GLM-5.x carded on 2026-12-06 (issue 23: cards glm-5.1 / glm-5.2, DeepSeek-V3.2's sparse attention), "
    "after the shipped fits: predicted, not fitted"
)
# What a row ran that kvplan does not model, stated in its notes as "not modelled by kvplan: ..." (e.g. the
# cross-layer top-k reuse of GLM-5.x's IndexCache / IndexShare): copied to the not_modelled column.
NOT_MODELLED = re.compile(r"not modelled by kvplan: ([^;]*)")


def not_modelled(row: dict[str, str]) -> str:
    """The row's "not modelled by kvplan: ..." clauses (NOT_MODELLED), joined by "; ", or ""."""
    return "; ".join(NOT_MODELLED.findall(row["notes"]))


# Corpus models without a card because kvplan does not model their attention (HF name prefix -> why).
UNMODELLED_ATTENTION: dict[str, str] = {}
# Speculative methods whose drafts come from a separate draft model: predicted with vLLM's own words,
# `--speculative-config '{"method": ..., "num_speculative_tokens": k}'` (planner/drafts.py sizes the draft,
# planner/perf/roofline.draft_passes times it). The corpus states no acceptance rate for them: the default
# per-draft acceptance applies (planner.deployment.DEFAULT_MTP_ACCEPTANCE_FRACTION, [assumed]), so their
# predictions depend on it. Added after the shipped fits (issue 23): predicted, not fitted (not_fitted).
DRAFT_MODEL_METHODS = ("eagle3", "dflash")
DRAFT_MODEL_NOT_FITTED = (
    "{method} draft model: timed since 2026-12-05 (issue 23), after the shipped fits; its acceptance is not "
    "published (the default applies), so the row is predicted, never fitted"
)
# Datasets whose name does not say it but whose prompts share a prefix (dataset -> shared fraction, source).
SHARED_PREFIX_DATASETS = {
    "vllm-ascend/GSM8K-in131072-bs100-qwen3": (
        90,
        "the weekly Qwen3.5-397B config runs it with --enable-prefix-caching under the comment "
        "'#131072 1024  0.9 80' (input, output, prefix ratio, prompts: the same file writes '0' for its "
        "prefix0 datasets and '0.9' for its prefix90 ones; tests/e2e/weekly/single_node/configs/"
        "Qwen3.5-397B-A17B-W8A8-mtp-A3_weekly.yaml @a8cfc191); whether a case cached it: PREFIX_CACHING_OFF",
    ),
    "vllm bench prefix_repetition 175104+19440": (
        90,
        "MiniMax-M2.5's A2 tutorial run (line 423): one 175104-token prefix shared by every prompt, 19440 "
        "tokens of its own (90.0 %), prefix caching on (vLLM's default); the run reports an 85 % hit rate",
    ),
}
# aisbench's shared-prefix datasets name their share: vllm-ascend/GSM8K_prefix90_in131072_... holds prompts
# whose first 90 % is one shared prefix. The rows that ran them had prefix caching on (--enable-prefix-caching
# in every such case of the weekly configs; vLLM caches prefixes by default), so that share of each prompt is
# found in the cache: predicted with --prefix-cached-fraction.  [source: the dataset names in the rows' notes]
# Newer datasets write the share between dashes (vllm-ascend/GSM8K-in131072-bs500-prefix90-glm51, GLM-5.x's
# configs, each with --enable-prefix-caching in its server_cmd).
PREFIX_DATASET = re.compile(r"[_-]prefix(\d+)[_-]")
# CI cases (the case name in the row's notes) that ran a shared-prefix dataset with prefix caching OFF: their
# prompts are prefilled in full, whatever the dataset shares (predicted at --prefix-cached-fraction 0).
PREFIX_CACHING_OFF = {
    "Qwen3-397B-A17B-w8a8-A3-Minimal-Delay-bs2": "--no-enable-prefix-caching in its server_cmd "
    "(tests/e2e/weekly/single_node/configs/Qwen3.5-397B-A17B-W8A8-mtp-A3_weekly.yaml:228 @a8cfc191)",
    "Qwen3.5-397B-A17B-w8a8-mtp": "the nightly config sets no prefix-caching flag, and vLLM before 0.28 "
    "leaves prefix caching off by default for hybrid (Gated DeltaNet) models (vLLM PR #23716, "
    "'Disable prefix "
    "caching by default for hybrid or mamba-based models'); these rows ran vLLM v0.20.1 .. v0.27.1 "
    "(vllm-ascend Dockerfile VLLM_TAG @01142a3c, @40992df6, @67b1ac5e)",
}
CASE_NAME = re.compile(r"case '([^']+)'")


def prefix_cached_fraction(row: dict[str, str]) -> float:
    """Share of each prompt of the row's dataset that is a shared, prefix-cached prefix (0: none, or prefix
    caching off: PREFIX_CACHING_OFF): the percentage in a `_prefixNN_` dataset name, or
    SHARED_PREFIX_DATASETS for datasets whose name omits it."""
    case = CASE_NAME.search(row["notes"])
    if case and case.group(1) in PREFIX_CACHING_OFF:
        return 0.0
    named = PREFIX_DATASET.search(row["notes"])
    if named:
        return int(named.group(1)) / 100
    for dataset, (percent, _source) in SHARED_PREFIX_DATASETS.items():
        if f"on {dataset}," in row["notes"]:
            return percent / 100
    return 0.0


# The fitted vllm-ascend profiles describe the engine of the CI floors they stand on (main, 2026-04 ..
# 2026-08, about v0.18 .. v0.25). Rows measured before v0.16.0rc1 (2026-03-10, the first release with the
# AscendC recurrent Gated DeltaNet op, #6725; v0.9 .. v0.15 also predate most of the graph-mode and fused-op
# work the floors ran with) are predicted and reported by fit_profiles.py, never fitted.
FIT_ERA_START = "2026-03-10"
# A vllm-ascend CI case passes at Output Token Throughput >= 0.97 x baseline (README.md, "Assertion"), so the
# run reached at least this share of a ci-baseline-floor row's figure.  [source: vllm-ascend CI assertion]
CI_PASS_FRACTION = 0.97
CI_FLOOR_KIND = "ci-baseline-floor"


# Open-loop rows (Alauda's guidellm constant-rate sweeps): the row's notes quote the table row, whose third
# column is the total request rate. A run whose output tok/s falls short of STEADY_SHARE x rate x output
# tokens did not keep up with its arrivals (the queue grew through the run): no steady state to predict.
OPEN_LOOP_ROW = re.compile(r"row '\| [\d.]+\*? \| \d+ \| ([\d.]+) \| [\d.]+ \|")
# Other open-loop rows (`vllm bench serve --request-rate R` without --max-concurrency, e.g. issue #1605)
# say so in their notes in these words.
OPEN_LOOP_STATED = re.compile(r"open loop at ([\d.]+) req/s")
STEADY_SHARE = 0.9  # [assumed: guidellm's ramp and tail cost a few % of a steady run's tokens]


def open_loop_rate(row: dict[str, str]) -> float | None:
    """Requests/s of an open-loop row (empty concurrency, a quoted rate table row), else None."""
    if row["concurrency"]:
        return None
    match = OPEN_LOOP_ROW.search(row["notes"]) or OPEN_LOOP_STATED.search(row["notes"])
    return float(match.group(1)) if match else None


# A stated vllm-ascend release or dev build below 0.16 is older whatever the source's date (PR #7265,
# published 2026-03-14, ran a 0.14.0rc2.dev build of 2026-02-13).
OLDER_RELEASE = re.compile(r"^v?0\.(\d+)\.")
FIT_ERA_MINOR = 16


def older_engine(row: dict[str, str]) -> str | None:
    """Why a vllm-ascend row predates the engine the fitted profiles describe (not fitted), or None."""
    if row["engine"] != "vllm-ascend":
        return None
    version = row["engine_version"] or "version not stated"
    release = OLDER_RELEASE.match(row["engine_version"])
    if row["source_date"] < FIT_ERA_START:
        return f"vllm-ascend {version}, measured {row['source_date']}: before v0.16.0rc1 ({FIT_ERA_START})"
    if release and int(release.group(1)) < FIT_ERA_MINOR:
        return f"vllm-ascend {version} (published {row['source_date']}): a build before v0.16.0rc1"
    return None


# Rows whose reading was corrected after the shipped fits were made (corpus line -> why): predicted, not
# fitted until the next refit decides on them, so `fit_profiles.py --write` still reproduces the shipped
# profiles.
CORRECTED_AFTER_FIT = {
    90: "Kimi-K2-Thinking is a native INT4 checkpoint, read as BF16 (which does not fit) until 2026-12-05; "
    "the only native-INT4 MoE row (w4a16-moe since 2026-12-07: INT4 experts, 16-bit attention)",
}


# Settings a row's notes give from its source only since issue 23's search (e.g. GPUStack's NPU count from
# its own MindIE placement rule), after the shipped fits: predicted, not fitted (as CORRECTED_AFTER_FIT).
STATED_AFTER_FIT = "found after the shipped fits (issue 23)"
# Where a row whose settings are still missing was searched: the notes' closing "searched (issue 23): ..."
# clause ("issue 27" for the fourth pass), quoted in its skip reason so the reason says where it was read.
SEARCHED = re.compile(r"searched \(issue 2[37]\): (.*)$")


def searched(row: dict[str, str]) -> str:
    """The notes' "searched (issue 23 / 27)" clause as "; <where the source was read>", or "" without one."""
    match = SEARCHED.search(row["notes"])
    return f"; {match.group(1)}" if match else ""


def shares_prefix(row: dict[str, str]) -> bool:
    """True when the row's dataset shares a prefix between prompts (whether or not the engine cached it)."""
    named = PREFIX_DATASET.search(row["notes"])
    listed = any(f"on {dataset}," in row["notes"] for dataset in SHARED_PREFIX_DATASETS)
    return bool(named and int(named.group(1)) > 0) or listed


# Rows of shared-prefix datasets became predictable with --prefix-cached-fraction (2026-12-05), after the
# shipped fits: predicted, not fitted until the next refit decides on them (same rule as CORRECTED_AFTER_FIT).
PREFIX_CACHED_AFTER_FIT = (
    "a shared-prefix dataset, predictable since 2026-12-05 (--prefix-cached-fraction), after the shipped fit"
)


# MiniMax-M3 (MiniMax sparse attention on a GQA card, modelcards/minimax-m3.yaml) is carded since 2026-12-06,
# after the shipped fits: its rows are predicted, never fitted (not_fitted).
MINIMAX_M3_MODEL = "MiniMaxAI/MiniMax-M3"
MINIMAX_M3_AFTER_FIT = (
    "MiniMax-M3 carded on 2026-12-06 (card minimax-m3, MiniMax sparse attention), after the shipped fits: "
    "predicted, not fitted"
)


# DeepSeek-V4 (compressed sparse attention, attention 'csa': modelcards/deepseek-v4-flash.yaml and
# deepseek-v4-pro.yaml, planner/csa.py) is carded since 2026-12-06, after the shipped fits: its rows are
# predicted, never fitted (not_fitted).
DEEPSEEK_V4_MODEL = "deepseek-ai/DeepSeek-V4"
DEEPSEEK_V4_AFTER_FIT = (
    "DeepSeek-V4 carded on 2026-12-06 (cards deepseek-v4-flash / deepseek-v4-pro, compressed sparse "
    "attention), after the shipped fits: predicted, not fitted"
)


# Rows added after the shipped fits as held-out checks (the sixth pass, 2026-12-07: lines 422-440) say so in
# their notes: predicted, never fitted, whatever their engine era.
HELD_OUT = "held out (sixth pass, 2026-12-07)"


def not_fitted(index: int, row: dict[str, str]) -> str | None:
    """Why corpus line `index` is predicted but never fitted (older_engine, CORRECTED_AFTER_FIT, a draft
    model's speculation: DRAFT_MODEL_NOT_FITTED, a shared-prefix dataset: PREFIX_CACHED_AFTER_FIT, DeepSeek
    sparse attention: SPARSE_ATTENTION_AFTER_FIT, GLM5_AFTER_FIT, MINIMAX_M3_AFTER_FIT or
    DEEPSEEK_V4_AFTER_FIT, settings found later: STATED_AFTER_FIT, settings assumed:
    assumed_settings.ASSUMED_NOT_FITTED, a held-out row: HELD_OUT), or None."""
    method = draft_method(row)
    drafted = DRAFT_MODEL_NOT_FITTED.format(method=method) if method else None
    prefix = PREFIX_CACHED_AFTER_FIT if shares_prefix(row) else None
    sparse = SPARSE_ATTENTION_AFTER_FIT if row["model"].startswith(SPARSE_ATTENTION_MODEL) else None
    sparse = GLM5_AFTER_FIT if row["model"].startswith(GLM5_MODEL) else sparse
    sparse = MINIMAX_M3_AFTER_FIT if row["model"].startswith(MINIMAX_M3_MODEL) else sparse
    sparse = DEEPSEEK_V4_AFTER_FIT if row["model"].startswith(DEEPSEEK_V4_MODEL) else sparse
    engine = {sglang_rows.ENGINE: SGLANG_AFTER_FIT, SEED_002_ENGINE: SEED_002_AFTER_FIT}.get(row["engine"])
    stated = STATED_AFTER_FIT if STATED_AFTER_FIT in row["notes"] else None
    held = HELD_OUT if HELD_OUT in row["notes"] else None
    assumed = assumed_settings.ASSUMED_NOT_FITTED if assumed_settings.assumption_of(row) else None
    return (
        held
        or assumed
        or older_engine(row)
        or CORRECTED_AFTER_FIT.get(index)
        or stated
        or engine
        or drafted
        or prefix
        or sparse
    )


def draft_method(row: dict[str, str]) -> str | None:
    """The row's speculative method when a separate draft model drafts (DRAFT_MODEL_METHODS), else None."""
    method = re.search(r"method=(\w+)", row["notes"])
    return method.group(1) if method and method.group(1) in DRAFT_MODEL_METHODS else None


# Seed 000's own client loop (max_tokens 128, no ignore_eos, each client sends its next request when its own
# ends): request ends drift apart and MindIE prefills waiting prompts between decode steps ("random").
SEED_000_ARRIVALS = "random"
# Seed 000's table 4.1 "batch16 total throughput" with continuous batching on (486 / 512 / 548 tok/s) cannot
# be output tokens: 548 / 16 = 34 tok/s per stream, twice the same stack's single stream (16.3) without
# speculative decoding, which the article has not done. It counts prompt + output tokens (256 + 128 = 3 x
# 128): x 128 / 384 is the output tok/s (162 / 171 / 183, between section 4.2's 90 at 8 and 220 at 32).
# The "FP8 basic" row (206) is the stack before continuous batching: not predicted (FP8_BASIC says why).
SEED_BATCH16 = "batch16 total throughput"
# What the seed says of 'FP8 basic' (read again 2026-12-07, issue 23): section 2.4 runs the FP8 weights
# 'without any tuning' at one stream (15.8 tok/s, the table's single-stream figure); section 3.1 makes
# continuous batching the next stage, 'dynamic batching' switched on in MindIE through max_batch_size,
# max_seq_len and the scheduling policy, and gives none of those values for either stage. MindIE's scheduler
# batches continuously by default, so what the basic stack did with 16 clients (its batch cap, or static
# batches) is the missing setting; its 206 tok/s (68.7 output tok/s as SEED_BATCH16 reads it) is 4.3 x its own
# single stream, neither one sequence at a time (at most 15.8) nor the continuous batch of the next row (162
# at 14.9 tok/s per stream). A cap fitted to make 68.7 come out would be circular: skipped.
FP8_BASIC = (
    "seed table 4.1 'FP8 basic': the stack before the article switched on MindIE's dynamic batching (section "
    "3.1: max_batch_size / max_seq_len / scheduling, values not given for either stage; section 2.4: FP8 "
    "weights 'without any tuning'); its batch cap at 16 clients is stated nowhere, and its 68.7 output tok/s "
    "(206 x 128 / 384) is 4.3 x its single stream: neither one sequence at a time nor a continuous batch "
    "of 16"
)
OUT_COLUMNS = (
    "row", "model", "card", "engine", "kind", "dtype", "tp", "dp", "concurrency", "input_tokens",
    "output_tokens", "mtp", "published_tokens_per_s", "predicted_tokens_per_s", "error", "status", "command",
    "source_url", "not_modelled",
)  # fmt: skip


def _setting_reason(row: dict[str, str]) -> str | None:
    """Why the row's engine, dtype or settings cannot be typed as a kvplan command, or None."""
    from planner.dtypes import WEIGHT_ALIASES, WEIGHT_SCHEMES

    if row["engine"] not in ENGINES:
        return f"engine {row['engine']} not modelled"
    if row["engine"] == SEED_002_ENGINE and "no KV cache" in row["notes"]:
        return NO_KV_CACHE
    dtype = WEIGHT_ALIASES.get(dtype_of(row).lower(), dtype_of(row).lower())
    if not dtype:
        return "dtype (not stated)" + searched(row)
    if dtype not in WEIGHT_SCHEMES:
        return f"dtype {row['dtype']} not modelled" + searched(row)
    if (
        not (row["tp"] or sglang_rows.launch_of(row))
        or not (row["concurrency"] or open_loop_rate(row))
        or not input_tokens(row)
        or not output_tokens(row)
    ):
        return "tp, concurrency or lengths not stated" + searched(row)
    return None


def _skip_reason(row: dict[str, str]) -> str | None:
    """Why a corpus row cannot be predicted as a steady closed loop, or None (_setting_reason first)."""
    from planner import catalog
    from planner.errors import KvplanError

    if row["engine"] == CLOUDMATRIX_ENGINE:
        return CLOUDMATRIX_DECODE
    setting = _setting_reason(row)
    if setting is not None:
        return setting
    open_rate = open_loop_rate(row)
    if open_rate is not None and float(row["output_tokens_per_s"]) < STEADY_SHARE * open_rate * float(
        row["output_tokens"]
    ):
        return past_capacity_reason(row, rate_per_s=open_rate)
    notes = row["notes"]
    if open_rate is not None and not (row["ttft_s"] and row["tpot_s"]) and NUM_PROMPTS.search(notes):
        return OPEN_LOOP_FINITE
    if SEED_BATCH16 in notes and "'FP8 basic'" in notes:
        return FP8_BASIC
    if not is_disaggregated(row) and paced_rate(row) is not None:  # a P:D row is simulated at its rate
        return ARRIVAL_BOUND
    try:
        catalog.resolve_model(row["model"])
    except KvplanError:
        return _uncarded(row["model"])
    return DISAGGREGATED if is_disaggregated(row) else None


# An open-loop run past the engine's capacity (output tok/s < STEADY_SHARE x rate x output tokens) has no
# steady state: it is predicted by `kvplan simulate` of its finite run (open_loop_runs.py, predict_finite_run)
# and never fitted, since fit_profiles.py fits only rows whose _skip_reason is None (2026-12-06, issue 23).
PAST_CAPACITY = "open loop past the engine's capacity: predicted by simulating its finite run, not fitted"
# An open-loop run that kept up with its arrivals but states no TTFT / TPOT (so Little's law cannot give its
# running batch) and a stated prompt count (num_prompts=N in its notes): predicted by `kvplan simulate --rate
# R --num-requests N` of that finite run (open_loop_finite_command), never fitted (2026-12-06, issue 23: row
# 176).
OPEN_LOOP_FINITE = "open loop without TTFT / TPOT: predicted by simulating its finite run, not fitted"
NUM_PROMPTS = re.compile(r"num_prompts=(\d+)")


# A closed-loop CI row whose client paces its requests (request_rate R with R x output tokens within
# ARRIVAL_MARGIN of its throughput: paced_rate) is set by its arrival rate, not by the engine's speed: it is
# predicted by `kvplan simulate --rate R --num-requests N` of the finite run its config states (N the CI
# case's num_prompts, arrival_bound_command), read as simulated output tokens / makespan, as the benchmark
# reports it, and never fitted (fit_profiles.py fits only rows whose _skip_reason is None; 2026-12-06,
# issue 23).
ARRIVAL_BOUND = "arrival-bound: predicted by simulating its finite paced run, not fitted"


# An open loop below STEADY_SHARE of its arrivals whose client sent a stated number of prompts (`vllm bench`'s
# --num-prompts N in its notes) and no run length: a short run is mostly ramp and drain (line 420: 200 Poisson
# arrivals at 4 req/s span about 50 s of its 72.55 s, TTFT flat at 116 ms), so it is predicted by `kvplan
# simulate --rate R --num-requests N` of that finite run (finite_prompts_command), never fitted (2026-12-06,
# issue 23).
FINITE_PROMPTS = "open loop of a stated prompt count: predicted by simulating its finite run, not fitted"
STATED_PROMPTS = re.compile(r"--num-prompts (\d+)")


def past_capacity_reason(row: dict[str, str], *, rate_per_s: float) -> str:
    """PAST_CAPACITY for a run whose length its notes state, the evidence when the engine failed the run
    (open_loop_runs.failure_evidence), FINITE_PROMPTS for a run of a stated prompt count, else why it is
    not predicted (no run length)."""
    failure = open_loop_runs.failure_evidence(row)
    if failure is not None:
        return failure
    if open_loop_runs.run_requests(row, rate_per_s=rate_per_s) is not None:
        return PAST_CAPACITY
    if STATED_PROMPTS.search(row["notes"]):
        return FINITE_PROMPTS
    return (
        f"open loop past the engine's capacity (output {row['output_tokens_per_s']} tok/s < "
        f"{STEADY_SHARE} x {rate_per_s:g} req/s x {row['output_tokens']} tokens) and no run length stated"
    )


def is_disaggregated(row: dict[str, str]) -> bool:
    """The row ran prefill and decode on separate instances (its notes say so; an SGLang row's launch
    settings, sglang_rows.is_disaggregated)."""
    if row["engine"] == sglang_rows.ENGINE:
        return sglang_rows.is_disaggregated(row)
    return "disaggregated" in row["notes"].lower()


def paced_rate(row: dict[str, str]) -> float | None:
    """A closed-loop row's client request rate (request_rate=R in its notes) when it
    bounds the run (R x output tokens < ARRIVAL_MARGIN x the published output tok/s), else None."""
    if open_loop_rate(row) is not None:
        return None
    rate = re.search(r"request_rate=([0-9.]+)", row["notes"])
    arrival_cap = float(rate.group(1)) * float(row["output_tokens"]) if rate else 0.0
    return (
        float(rate.group(1)) if 0 < arrival_cap < ARRIVAL_MARGIN * float(row["output_tokens_per_s"]) else None
    )


# A disaggregated row is not one replica's closed loop (serving_rows' model, the fit's rows): it is predicted
# by the `kvplan simulate --pd` command its config file describes (pd_command) and never fitted, since
# fit_profiles.py fits only rows whose _skip_reason is None.
DISAGGREGATED = "prefill/decode disaggregated: predicted by kvplan simulate --pd, not fitted"


def _uncarded(model: str) -> str:
    """Why a model has no card: an attention kvplan does not model (UNMODELLED_ATTENTION), else none found."""
    reasons = [why for prefix, why in UNMODELLED_ATTENTION.items() if model.startswith(prefix)]
    return reasons[0] if reasons else "no model card"


# A one-time burst of requests of varying lengths (GPUStack's ShareGPT runs: `vllm bench serve` with request
# rate inf and no --max-concurrency, every request sent at once) publishes means over requests that are not
# the steady state the serving model predicts: mean TTFT is how long the admission queue takes to drain, and
# mean TPOT averages (latency - TTFT) / (output - 1) per request, so short replies that waited behind a full
# batch dominate it (line 198: mean TPOT 788 ms, median 204 ms, mean ITL 156 ms). Such rows give the fit their
# output tok/s only.  [source: the rows' notes, quoting gpustack/gpustack
# docs/performance-lab/qwen3-8b/910b.md]
BURST_OF_VARIED_LENGTHS = ("sent at once", "lengths vary per request")


def transient_phase_means(row: dict[str, str]) -> bool:
    """True when the row's published TTFT / TPOT are means over a one-time burst of varied lengths
    (BURST_OF_VARIED_LENGTHS): not fitted, not compared."""
    return all(marker in row["notes"] for marker in BURST_OF_VARIED_LENGTHS)


def chained_acceptance(row: dict[str, str]) -> str:
    """The row's MTP acceptance as kvplan's per-draft (chained) acceptance ("" when not stated).

    The corpus's mtp_acceptance of a vllm-ascend row is vLLM's draft acceptance rate, accepted / drafted
    tokens (lines 171-174 quote it with its mean acceptance length 1 + k x rate: 64.2 % and 2.93 with 3
    drafts); planner.perf.mtp.chained_acceptance converts it. Other engines' rows state one draft (line 139),
    where both readings agree.
    """
    from planner.perf.mtp import chained_acceptance as chained

    stated = row["mtp_acceptance"] or (single_stream_acceptance() if is_unstated_single_stream(row) else "")
    if not stated or row["engine"] != "vllm-ascend":
        return stated
    drafts = int(row["mtp"] or 0)
    return f"{chained(drafts, accepted_share=float(stated)):.6f}"


@functools.cache
def single_stream_acceptance() -> str:
    """The draft acceptance the unstated single stream borrows: SINGLE_STREAM_ACCEPTANCE_LINE's."""
    with CORPUS.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return rows[SINGLE_STREAM_ACCEPTANCE_LINE - 2]["mtp_acceptance"]


def bench_row(
    row: dict[str, str], *, floors: bool = False, headroom: float | None = None, margin: float | None = None
) -> dict[str, str]:
    """The corpus row as a serving bench row (benchpoints.parse_serving_row's columns); with `floors`, a
    ci-baseline-floor row also says it is a floor (column floor_fraction = CI_PASS_FRACTION: the fit then
    treats its output tok/s one-sided, planner/fit/censored.py), with `headroom` that the run reached at
    most (1 + headroom) x its figure (column floor_headroom_fraction: the fit's band is then two-ended), and
    with `margin` how far above the threshold the run is taken to be (column floor_margin_fraction)."""
    out = {key: row[key] for key in ("model", "card", "kv_dtype", "tp", "concurrency")}
    out["dtype"] = dtype_of(row)
    out |= {key: row[key] for key in ("output_tokens_per_s", "mtp")}
    out["input_tokens"] = input_tokens(row)
    out["output_tokens"] = output_tokens(row)
    out |= {key: row[key] for key in ("dp", "ep", "max_num_seqs", "max_num_batched_tokens")}
    out["mtp_acceptance"] = chained_acceptance(row)
    cached = prefix_cached_fraction(row)
    out["prefix_cached_fraction"] = f"{cached:g}" if cached else ""
    method = draft_method(row)
    out |= {"speculative_method": method} if method else {}  # the column only where a draft model drafts
    # per-phase truth where published (mean TTFT, mean TPOT per output token: with MTP the fit divides its
    # step by the row's tokens per step); CI floors have none
    out |= {key: "" if transient_phase_means(row) else row[key] for key in ("ttft_s", "tpot_s")}
    out["engine"] = ENGINES[row["engine"]]
    rate = open_loop_rate(row)
    out["request_rate"] = "" if rate is None else f"{rate:g}"
    prompts = re.search(r"num_prompts=(\d+)", row["notes"])
    out["num_prompts"] = prompts.group(1) if prompts else ""
    # the engine's memory share where the notes give the config's (vLLM --gpu-memory-utilization); other rows
    # keep FIT_MEMORY_FRACTION (command())
    share = re.search(r"gpu_memory_utilization=(\d*\.?\d+)", row["notes"])
    out["memory_fraction"] = share.group(1) if share else ""
    seed = "000_" in row["source_path"]
    out["memory_gib"] = SEED_950PR_MEMORY_GIB if seed else ""
    out["arrivals"] = SEED_000_ARRIVALS if seed else ""
    if SEED_BATCH16 in row["notes"]:  # prompt + output tokens/s -> output tokens/s (see SEED_BATCH16)
        total = int(row["input_tokens"]) + int(row["output_tokens"])
        out["output_tokens_per_s"] = (
            f"{float(row['output_tokens_per_s']) * int(row['output_tokens']) / total:.4g}"
        )
    launch = sglang_rows.launch_of(row)
    if launch is not None:  # the launch settings the row's source gives, in kvplan's words
        out |= sglang_rows.bench_fields(row, launch)
    if floors:
        floor = row["kind"] == CI_FLOOR_KIND
        out["floor_fraction"] = f"{CI_PASS_FRACTION:g}" if floor else ""
        out["floor_headroom_fraction"] = f"{headroom:g}" if floor and headroom is not None else ""
        out["floor_margin_fraction"] = f"{margin:g}" if floor and margin is not None else ""
    return out


def command(bench: dict[str, str], *, card: str) -> str:
    """The command that predicts the row the way the fit does (planner/fit/serving_rows.py): closed-loop
    rows as `kvplan serve` with the whole deployment's concurrency, open-loop rows (a request rate) as
    `kvplan simulate --rate`; the row's --dp and --ep (one DP group's share, multiplied), and
    --memory-fraction 0.8, the fraction the fit assumes for a row whose notes do not give the config's
    gpu_memory_utilization (most do not; vLLM's own default is 0.92). tests/test_published_commands.py runs
    every recorded command through the CLI and requires exit 0."""
    rate = bench.get("request_rate", "")
    verb = "simulate" if rate else "serve"  # an open-loop row: Poisson arrivals at its rate
    args = ["kvplan", verb, "-m", bench["model"], "--card", card, "--dtype", bench["dtype"]]
    args += ["--kv-dtype", bench["kv_dtype"]] if bench["kv_dtype"] else []
    args += ["--tp", bench["tp"], "--engine", bench["engine"]]
    args += ["--input-tokens", bench["input_tokens"], "--output-tokens", bench["output_tokens"]]
    args += ["--rate", rate] if rate else ["--concurrency", bench["concurrency"]]
    layout = {"--dp": bench["dp"], "--ep": bench["ep"]}
    args += [
        part for flag, value in layout.items() if value and value not in ("0", "1") for part in (flag, value)
    ]
    optional = {"--mtp": bench["mtp"], "--mtp-acceptance": bench["mtp_acceptance"] if bench["mtp"] else ""}
    if bench.get("speculative_method"):  # a draft model: vLLM's own --speculative-config words
        spec = {"method": bench["speculative_method"], "num_speculative_tokens": int(bench["mtp"])}
        optional = {"--speculative-config": json.dumps(spec)}
    if bench.get("acceptance_rate"):  # the run's own acceptance (SGLang's accept length: sglang_rows.py)
        optional.pop("--mtp-acceptance", None)
        optional["--acceptance-rate"] = bench["acceptance_rate"]
    optional["--max-batch"] = bench["max_num_seqs"]
    optional["--memory-gib"] = bench["memory_gib"]
    optional["--memory-fraction"] = bench.get("memory_fraction") or f"{FIT_MEMORY_FRACTION:g}"
    optional["--arrivals"] = "" if rate else bench.get("arrivals", "")
    optional["--num-requests"] = bench["num_prompts"]
    optional["--prefix-cached-fraction"] = bench.get("prefix_cached_fraction", "")
    # The fit's deployment keeps Deployment's default prefill budget (8192, vLLM's max_num_batched_tokens
    # default) when the row does not state one; serve's own default is the plan's max(8192, ctx - ctx/4).
    optional["--max-prefill-tokens"] = bench["max_num_batched_tokens"] or str(DEFAULT_MAX_PREFILL_TOKENS)
    for flag, value in optional.items():
        args += [flag, value] if value and value != "0" else []
    return shlex.join(args)


def predict_row(
    index: int, row: dict[str, str], *, profile_dir: Path | None, fitted: bool = False
) -> dict[str, str]:
    """One output row: the prediction, or the reason there is none (settled_row). A row whose source leaves
    a setting unstated and that assumed_settings.py assumes is predicted with the assumed settings and again
    with the alternative reading; its not_modelled column says both (assumed_settings.note)."""
    assumed = assumed_settings.assumption_of(row)
    result = settled_row(index, assumed_settings.settled(row), profile_dir=profile_dir, fitted=fitted)
    if assumed is None:
        return result
    other_row = assumed_settings.settled(row, alternative=True)
    other = settled_row(index, other_row, profile_dir=profile_dir, fitted=fitted)
    text = assumed_settings.note(assumed, alternative=other)
    return result | {"not_modelled": "; ".join(part for part in (result["not_modelled"], text) if part)}


def settled_row(
    index: int, row: dict[str, str], *, profile_dir: Path | None, fitted: bool = False
) -> dict[str, str]:
    """One output row of a row whose settings are all given: the prediction, or the reason there is none."""
    from planner import catalog
    from planner.engines import registry
    from planner.errors import KvplanError
    from planner.fit import serving_rows
    from planner.importers.benchpoints import ServingPoint, parse_serving_row
    from planner.kinds import parse_engine

    result = {key: row.get(key, "") for key in OUT_COLUMNS} | {"row": str(index)}
    result |= {"published_tokens_per_s": row["output_tokens_per_s"], "source_url": row["source_url"]}
    result["input_tokens"], result["output_tokens"] = input_tokens(row), output_tokens(row)
    notes = (not_modelled(row), assumed_dtype_note(row), cloudmatrix_note(row))
    result["not_modelled"] = "; ".join(part for part in notes if part)
    result["dtype"] = dtype_of(row)
    reason = _skip_reason(row)
    card = str(profile_dir / f"{row['card']}.yaml") if profile_dir else row["card"]
    # the CLI resolves a card id to its fitted profile; without --fitted the datasheet profile's file
    cli_card = card if fitted or profile_dir else f"hwprofiles/{card}.yaml"
    if reason is not None:
        return result | simulated_prediction(row, reason=reason, card=cli_card)
    bench = bench_row(row)

    def error_of(bench: dict[str, str]) -> tuple[float, ServingPoint]:
        point = parse_serving_row(bench, where=f"{CORPUS.name}:{index}")
        engine = parse_engine(bench["engine"])
        hardware = catalog.resolve_card(
            card,
            engine=engine if fitted else None,
            profile_engine=registry.fitted_profile_engine(engine) if fitted else None,
        )
        return serving_rows.serving_errors([point], hardware=hardware)[0], point

    try:
        try:
            error, point = error_of(bench)
        except KvplanError as exc:
            if "does not fit" not in str(exc):
                raise
            bench = bench | {"memory_fraction": f"{RAISED_MEMORY_FRACTION:g}"}  # it ran: see RAISED_...
            error, point = error_of(bench)
    except KvplanError as exc:
        return result | {"status": f"skipped: {exc}", "command": command(bench, card=card)}
    predicted = (1.0 + error) * point.output_tokens_per_s
    return result | {
        "predicted_tokens_per_s": f"{predicted:.1f}",
        "error": f"{error:+.3f}",
        "status": "predicted",
        "command": command(bench, card=card),
    }


def simulated_prediction(row: dict[str, str], *, reason: str, card: str) -> dict[str, str]:
    """A row _skip_reason keeps out of the fit: predicted through `kvplan simulate` where its reason names a
    simulated path (P:D fleet, finite run past capacity, arrival-bound CI floor, finite open loop, or the
    verdict on a run the engine failed), through kvplan's decode speed for a CloudMatrix-Infer decode figure
    (CLOUDMATRIX_DECODE), else skipped with the reason."""
    if reason == DISAGGREGATED:
        return predict_pd_row(row, card=card)
    if reason == CLOUDMATRIX_DECODE:
        return predict_decode_instance(row, card=card)
    if reason == PAST_CAPACITY:
        return predict_finite_run(row, card=card)
    if reason == ARRIVAL_BOUND:
        return simulated_row(row, arrival_bound_command(row, card=card))
    if reason == OPEN_LOOP_FINITE:
        return simulated_row(row, open_loop_finite_command(row, card=card))
    if reason == FINITE_PROMPTS:
        return simulated_row(row, finite_prompts_command(row, card=card))
    if reason.startswith(open_loop_runs.ENGINE_FAILURE):
        return failure_verdict(row, card=card, evidence=reason)
    return {"status": f"skipped: {reason}"}


def decode_speed_command(row: dict[str, str], *, card: str) -> str:
    """kvplan's decode-speed command of a CloudMatrix-Infer row (CLOUDMATRIX_DECODE): the paper's decode
    instance (tp, dp, ep; --batch the sequences running on it, the row's concurrency) with vLLM's kernels, the
    prompt as its KV length, the paper's MTP, and CLOUDMATRIX_REDUNDANT_EXPERTS / CLOUDMATRIX_UB_DIES."""
    args = ["kvplan", "-m", row["model"], "--card", card, "--dtype", row["dtype"], "--engine", CLOUDMATRIX_AS]
    args += ["--tp", row["tp"], "--dp", row["dp"], "--ep", row["ep"]]
    args += ["--redundant-experts", str(CLOUDMATRIX_REDUNDANT_EXPERTS)]
    args += ["--devices-per-node", str(CLOUDMATRIX_UB_DIES), "--batch", row["concurrency"]]
    args += ["--ctx", row["input_tokens"], "--input-tokens", row["input_tokens"]]
    args += ["--mtp", row["mtp"], "--mtp-acceptance", chained_acceptance(row)]
    return shlex.join(args)


def per_package(answer: dict[str, Any]) -> float:
    """Output tok/s per 910C package (the paper's NPU) of a decode-speed answer (`kvplan -m ... --json`): the
    instance's decode tok/s x DIES_PER_PACKAGE / its dies."""
    dies = answer["layout"]["world_size"]
    return float(answer["performance"]["tokens_per_s"]) * DIES_PER_PACKAGE / dies


def predict_decode_instance(row: dict[str, str], *, card: str) -> dict[str, str]:
    """A CloudMatrix-Infer decode figure's prediction: its decode_speed_command run through the CLI
    in-process, exactly as typed (simulate_json); predicted = per_package of its answer."""
    return answered_row(row, decode_speed_command(row, card=card), predicted_of=per_package)


def pd_command(row: dict[str, str], *, card: str) -> str | None:
    """The `kvplan simulate --pd` command of a disaggregated row, read from its config file
    (pd_deployments.py: each side's instances, tp, dp, ep = tp x dp, the decode batch cap, the prefill token
    budget, the decode memory fraction; the KV over the inter-node link): closed loop at the row's
    concurrency, or Poisson at its client rate when that rate bounds the run (paced_rate); --requests the
    row's prompts (CI num_prompts, the tutorial's --num-prompts), as the benchmark ran them. None: the
    row's file was not read."""
    try:
        from lab.published import pd_deployments
    except ImportError:  # run as a script from this directory (fit_profiles.py imports `predict`)
        import pd_deployments  # type: ignore[no-redef]

    if row["engine"] == sglang_rows.ENGINE:
        return sglang_rows.pd_command(row, card=card)
    dep = pd_deployments.deployment_of(row)
    if dep is None:
        return None
    (p, p_tp, p_dp), (d, d_tp, d_dp) = dep.prefill, dep.decode
    args = ["kvplan", "simulate", "-m", row["model"], "--card", card, "--dtype", row["dtype"]]
    args += ["--kv-dtype", row["kv_dtype"]] if row["kv_dtype"] else []
    args += [
        "--engine",
        ENGINES[row["engine"]],
        "--tp",
        str(d_tp),
        "--dp",
        str(d_dp),
        "--ep",
        str(d_tp * d_dp),
    ]
    args += ["--pd", f"{p}:{d}", "--prefill-tp", str(p_tp), "--prefill-dp", str(p_dp)]
    args += [
        "--prefill-ep",
        str(p_tp * p_dp),
        "--kv-link-gbps",
        f"{pd_deployments.INTER_NODE_LINK_GB_PER_S:g}",
    ]
    args += ["--input-tokens", row["input_tokens"], "--output-tokens", row["output_tokens"]]
    rate = paced_rate(row)
    args += ["--rate", f"{rate:g}"] if rate is not None else ["--concurrency", row["concurrency"]]
    prompts = re.search(r"num[_-]prompts[= ](\d+)", row["notes"])
    args += ["--requests", prompts.group(1)] if prompts else []
    method = draft_method(row)
    if method:  # a separate draft model, in vLLM's own words
        spec = {"method": method, "num_speculative_tokens": int(row["mtp"])}
        args += ["--speculative-config", json.dumps(spec)]
    elif row["mtp"] and row["mtp"] != "0":
        args += ["--mtp", row["mtp"]] + (
            ["--mtp-acceptance", chained_acceptance(row)] if row["mtp_acceptance"] else []
        )
    cached = prefix_cached_fraction(row)
    args += ["--prefix-cached-fraction", f"{cached:g}"] if cached else []
    args += ["--max-batch", str(dep.decode_max_seqs), "--max-batched-tokens", str(dep.prefill_batched)]
    args += ["--memory-fraction", f"{dep.memory_fraction:g}"]
    return shlex.join(args)


def predict_pd_row(row: dict[str, str], *, card: str) -> dict[str, str]:
    """A disaggregated row's prediction: its pd_command run through the CLI in-process, exactly as typed
    (simulated_row); predicted = the simulated output tok/s of the whole fleet (what the row publishes)."""
    text = pd_command(row, card=card)
    if text is None:
        return {
            "status": "skipped: prefill/decode disaggregated, its config file not read (pd_deployments.py)"
        }
    return simulated_row(row, text)


def finite_run_command(row: dict[str, str], *, card: str) -> str:
    """The `kvplan simulate` command of an open-loop run past capacity (PAST_CAPACITY): the row's set-up
    (bench_row, command) at its rate, --num-requests the run's own count (open_loop_runs.run_requests),
    MindIE's prompt budget raised to a longer prompt (mindie_prompt_budget)."""
    rate = open_loop_rate(row) or 0.0
    bench = mindie_prompt_budget(row, bench_row(row))
    bench["num_prompts"] = str(open_loop_runs.run_requests(row, rate_per_s=rate))
    return command(bench, card=card)


def open_loop_finite_command(row: dict[str, str], *, card: str) -> str:
    """The `kvplan simulate` command of an OPEN_LOOP_FINITE row: the row's set-up (bench_row, command) at its
    open-loop rate, --num-requests its num_prompts (bench_row reads it from the notes)."""
    return command(bench_row(row) | {"request_rate": f"{open_loop_rate(row) or 0.0:g}"}, card=card)


def finite_prompts_command(row: dict[str, str], *, card: str) -> str:
    """The `kvplan simulate` command of a FINITE_PROMPTS row: the row's set-up (bench_row, command) at its
    open-loop rate, --num-requests the client's --num-prompts (STATED_PROMPTS)."""
    prompts = STATED_PROMPTS.search(row["notes"])
    bench = bench_row(row) | {"request_rate": f"{open_loop_rate(row) or 0.0:g}"}
    return command(bench | {"num_prompts": prompts.group(1) if prompts else ""}, card=card)


def arrival_bound_command(row: dict[str, str], *, card: str) -> str:
    """The `kvplan simulate` command of an arrival-bound CI row (ARRIVAL_BOUND): the row's set-up (bench_row,
    command) at its client's rate (paced_rate), --num-requests the case's num_prompts (bench_row reads it from
    the notes), and --max-batch the client's in-flight cap (the row's concurrency: vllm bench
    --max-concurrency, aisbench batch_size) where it is below the engine's own cap: requests beyond it wait
    at the client, which for throughput is the same as waiting in the engine's queue.  [assumed]"""
    bench = bench_row(row) | {"request_rate": f"{paced_rate(row):g}"}
    engine_cap = int(bench["max_num_seqs"] or 0)
    if not engine_cap or int(row["concurrency"]) < engine_cap:
        bench["max_num_seqs"] = row["concurrency"]
    return command(bench, card=card)


def mindie_prompt_budget(row: dict[str, str], bench: dict[str, str]) -> dict[str, str]:
    """The bench row with MindIE's maxPrefillTokens raised to a prompt longer than its 8192 default: MindIE
    refuses such a prompt, and these runs completed requests, so the deployment raised it.  [assumed]"""
    if row["engine"] == "mindie" and int(row["input_tokens"]) > DEFAULT_MAX_PREFILL_TOKENS:
        return bench | {"max_num_batched_tokens": row["input_tokens"]}
    return bench


def predict_finite_run(row: dict[str, str], *, card: str) -> dict[str, str]:
    """An open-loop run past capacity: its finite_run_command run through the CLI (simulated_row)."""
    return simulated_row(row, finite_run_command(row, card=card))


class RefusedError(Exception):
    """kvplan refused a command line (its one-line error is the message)."""


def simulate_json(text: str) -> dict[str, Any]:
    """A `kvplan ...` command line run in-process, exactly as typed, with --json: its parsed JSON answer
    (RefusedError with the CLI's one-line error when it exits non-zero)."""
    from typer.testing import CliRunner

    from planner.cli import app

    result = CliRunner().invoke(app, [*shlex.split(text)[1:], "--json"])
    if result.exit_code != 0:
        raise RefusedError(result.output.strip().splitlines()[-1])
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


# A run the engine failed (open_loop_runs.failure_evidence: nearly every request errored) published no
# serving result, but a user planning that load still gets kvplan's answer to it: `kvplan simulate` of the
# same finite run (finite_run_command) and its overload verdict (the JSON's `overloaded`, sim/metrics.py
# overload). That verdict is the row's prediction; the few completed requests' tok/s is no target, so the
# row has no error and is never fitted (2026-12-06, issue 23).
VERDICT = "verdict"


def failure_verdict(row: dict[str, str], *, card: str, evidence: str) -> dict[str, str]:
    """The prediction of a run the engine failed: "verdict: overloaded" when kvplan's simulation of the same
    finite run says the load overloads the engine (as the engine's failure shows), else "verdict: keeps up"
    (kvplan disagrees with the engine); the evidence of the failure follows. predicted = the simulated
    output tok/s; error stays empty."""
    text = finite_run_command(row, card=card)
    try:
        answer = simulate_json(text)
    except RefusedError as refusal:
        return {"status": f"skipped: {refusal}", "command": text}
    verdict = "overloaded" if answer["overloaded"] else "keeps up"
    return {
        "predicted_tokens_per_s": f"{answer['throughput']['output_tokens_per_s']:.1f}",
        "status": f"{VERDICT}: {verdict}; the engine failed this run ({evidence})",
        "command": text,
    }


def simulated_row(row: dict[str, str], text: str) -> dict[str, str]:
    """The prediction of a `kvplan simulate` command line run in-process, exactly as typed, with --json
    (simulate_json): predicted = its simulated output tok/s (output tokens / makespan, the whole fleet's
    with --pd)."""
    return answered_row(row, text, predicted_of=lambda answer: answer["throughput"]["output_tokens_per_s"])


def answered_row(
    row: dict[str, str], text: str, *, predicted_of: Callable[[dict[str, Any]], float]
) -> dict[str, str]:
    """The row of a kvplan command line run in-process with --json (simulate_json): predicted_of(its
    answer) against the published output tok/s, or skipped with the CLI's refusal."""
    try:
        answer = simulate_json(text)
    except RefusedError as refusal:
        return {"status": f"skipped: {refusal}", "command": text}
    predicted = float(predicted_of(answer))
    error = predicted / float(row["output_tokens_per_s"]) - 1.0
    return {
        "predicted_tokens_per_s": f"{predicted:.1f}",
        "error": f"{error:+.3f}",
        "status": "predicted",
        "command": text,
    }


def kind_suffix(text: str, *, kind: str = "", kept_up: bool = False) -> str:
    """The summary's kind suffix: ' (P:D)' for a pd_command; for an open-loop simulate that names its request
    count, ' (arrival-bound)' on a CI floor (arrival_bound_command), ' (finite run)' for a run that kept up
    with its arrivals (open_loop_finite_command) and ' (past capacity)' otherwise (finite_run_command,
    finite_prompts_command); ' (decode instance)' for kvplan's decode speed (decode_speed_command); else
    ''."""
    if " --pd " in text:
        return " (P:D)"
    if text.startswith("kvplan -m "):
        return " (decode instance)"
    finite = text.startswith("kvplan simulate ") and " --rate " in text and " --num-requests " in text
    if not finite:
        return ""
    if kind == CI_FLOOR_KIND:
        return " (arrival-bound)"
    return " (finite run)" if kept_up else " (past capacity)"


def kept_up(row: dict[str, str]) -> bool:
    """True when an output row's open loop (its command's --rate) delivered at least STEADY_SHARE of what its
    arrivals asked for (rate x output tokens), as _skip_reason reads it; False without a rate."""
    rate = re.search(r" --rate ([\d.]+)", row["command"])
    if rate is None or not row["output_tokens"]:
        return False
    asked = float(rate.group(1)) * float(row["output_tokens"])
    return float(row["published_tokens_per_s"]) >= STEADY_SHARE * asked


def summary(rows: list[dict[str, str]]) -> list[str]:
    """Markdown table lines: per (card, engine, kind), predicted rows, median |error|, median error."""
    groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for row in rows:
        if row["status"] == "predicted":
            suffix = kind_suffix(row["command"], kind=row["kind"], kept_up=kept_up(row))
            kind = row["kind"] + suffix  # simulated rows apart
            groups[(row["card"], row["engine"], kind)].append(float(row["error"]))
    lines = ["| card | engine | kind | rows | median abs error | median error |", "|---|---|---|---|---|---|"]
    for (card, engine, kind), errors in sorted(groups.items()):
        abs_median, median = statistics.median(abs(e) for e in errors), statistics.median(errors)
        lines.append(f"| {card} | {engine} | {kind} | {len(errors)} | {abs_median:.1%} | {median:+.1%} |")
    verdicts = [row["status"] for row in rows if row["status"].startswith(VERDICT)]
    overloaded = sum(status.startswith(f"{VERDICT}: overloaded") for status in verdicts)
    skipped = sum(1 for row in rows if row["status"].startswith("skipped"))
    lines.append(
        f"\n{len(rows) - skipped - len(verdicts)} rows predicted, {len(verdicts)} runs the engine failed "
        f"answered with a verdict ({overloaded} overloaded), {skipped} skipped (reasons in the CSV's status)."
    )
    caveats = [row for row in rows if row["status"] == "predicted" and row.get("not_modelled")]
    unmodelled = "ran what kvplan does not model: "
    lines += [
        f"row {row['row']} ({row['model']}) "
        + ("predicted at " if row["not_modelled"].startswith("assumed ") else unmodelled)
        + row["not_modelled"]
        for row in caveats
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=HERE / "predictions-before.csv")
    parser.add_argument(
        "--fitted", action="store_true", help="use the shipped fitted profile of each card and engine"
    )
    args = parser.parse_args(argv)
    with CORPUS.open(encoding="utf-8") as handle:
        corpus = list(csv.DictReader(handle))
    rows = [
        predict_row(i, row, profile_dir=args.profile_dir, fitted=args.fitted)
        for i, row in enumerate(corpus, start=2)
    ]
    with args.out.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(OUT_COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print("\n".join(summary(rows)))
    print(f"per-row table: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
