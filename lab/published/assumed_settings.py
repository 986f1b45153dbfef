"""Settings a published row's source leaves unstated, assumed for its prediction (issue 23), with the other
reading a reviewer could defend.

The corpus (ascend-serving.csv) keeps only what a source states: these rows keep their blank columns there,
so `predict._skip_reason` of the corpus row still names what is missing and every fit (fit_profiles.py,
which fits only rows whose _skip_reason is None) leaves them out. predict.py predicts them with the
assumed settings (`settled`), marks them not fitted (predict.not_fitted: ASSUMED_NOT_FITTED), writes the
assumption in the output's not_modelled column and predicts them again under the alternative reading
(the sensitivity, in the same column).

Each entry: a marker found in the row's notes -> Assumed(settings, alternative, why), where settings and
alternative are corpus columns (tp, dp, ep, input_tokens) and their values.
"""

from __future__ import annotations

from dataclasses import dataclass

ASSUMED_NOT_FITTED = (
    "a setting its source leaves unstated, assumed (assumed_settings.py): predicted, not fitted"
)


@dataclass(frozen=True)
class Assumed:
    """An assumed setting of one row: the columns predicted with, the other reading's, and why."""

    settings: dict[str, str]
    alternative: dict[str, str]
    why: str


# Lines 61 and 67 (DeepSeek-V4-Pro PD CI cases) name their datasets 'GSM8K-in1M-bs4-prefix99-ds' and
# 'GSM8K-in128k-bs512-prefix90-ds'; no stored file counts their prompts. The same CI writes k = 1024
# throughout: its 128k cases run 'in131072' datasets (Minimax_m2.7_in128k_1k_prefix90_tpot50.yaml, the GLM-5.x
# 128k-1k configs), its case 'Qwen3.5-122B-A10B-w4a8-984k-1k-0-PD' runs GSM8K-in1007616 (984 x 1024), weekly
# Minimax_m2.7_in198_prefix99.yaml runs GSM8K_prefix99_in203738 at --max-model-len 204800 with max_out_len
# 1024 (prompt + output 38 tokens short of the context: a context-filling dataset). Line 61's case sets
# --max-model-len 1048576 with max_out_len 1024, so a binary 1M (1,048,576) prompt could not run: its prompts
# are at most 1,048,576 - 1,024 = 1,047,552 tokens, the reading taken (the MiniMax dataset's way of sizing);
# 1,000,000 (a decimal 1M) is the alternative. Line 67's 128k is 131,072 (the CI's k), 128,000 the
# alternative. [assumed: vllm-ascend @1f95052c, @721fd31d, @2fd622e5, .github/workflows/misc/
# model_dataset_list.json and the configs named]
CI_BINARY_K = (
    "prompt length from the dataset name, k = 1024 as the same CI's other datasets ('in128k' cases run "
    "in131072 datasets; 'in984k' runs in1007616)"
)
# Line 175 (recipes PR #884, DeepSeek-V4-Flash on 950PR, 'single tps upto :60', 64k/3k x 10) states no
# parallelism. PR #948 by the same author (2026-09-10) puts DeepSeek-V4-Flash-Vision on the same 950PR at
# 'DP4+EP, TP=1 on 4 of 8 NPUs', 'same as the Flash recipe', because '950's FP8 DSA operator only accepts a
# local num_heads_q of 64 or 128' with 64 heads (V4-Flash has 64 too: modelcards/deepseek-v4-flash.yaml);
# PR #882 (950DT, 2026-08-29) serves V4-Flash with 'single_node_dep (DP4 + expert parallelism)'. So tp 1,
# dp 4, ep 4; the alternative is the PR title's 8 cards, dp 8 ep 8 (tp 1 either way). [assumed]
V4_FLASH_950 = (
    "parallelism from recipes PR #948 (same author, 950PR: 'DP4+EP, TP=1 on 4 of 8 NPUs', 'same as the "
    "Flash recipe'; 950's FP8 DSA operator takes 64 or 128 local heads, V4-Flash has 64) and PR #882 "
    "(V4-Flash on 950DT: DP4 + expert parallelism)"
)
# Line 421 (issue #1605, Qwen3-32B at 1 req/s on the issue's 'atlas A2 64G * 4' host): the comment gives
# no server command. The issue's description ('Take qps1 as an example to test the performance of dense
# model and moe model') serves its MoE model on the same host with -tp 4; BF16 Qwen3-32B (about 61 GiB of
# weights) needs at least 2 of the 64 GB cards. tp 4 (the host's cards, as the description's run); tp 2
# the alternative. [assumed]
ISSUE_1605_TP = (
    "tp of the issue's own server command on the same 4-card host ('vllm serve Qwen/Qwen3-30B-A3B ... -tp "
    "4', the description's moe half of its 'dense model and moe model' test)"
)
ASSUMED: dict[str, Assumed] = {
    "bench 'perf_1M_1k_prefix99'": Assumed(
        {"input_tokens": "1047552"},
        {"input_tokens": "1000000"},
        f"{CI_BINARY_K}; 1M = 1,048,576 less the 1,024-token output under --max-model-len 1048576",
    ),
    "bench 'perf_TPOT50_128k_1_prefix90'": Assumed(
        {"input_tokens": "131072"}, {"input_tokens": "128000"}, f"{CI_BINARY_K}: 128k = 131,072"
    ),
    "PR #884 ('deepseek-v4-flash": Assumed(
        {"tp": "1", "dp": "4", "ep": "4"}, {"tp": "1", "dp": "8", "ep": "8"}, V4_FLASH_950
    ),
    "'Qwen/Qwen3-32B sharegpt dataset test in different request rate'": Assumed(
        {"tp": "4"}, {"tp": "2"}, ISSUE_1605_TP
    ),
}


def assumption_of(row: dict[str, str]) -> Assumed | None:
    """The row's Assumed entry (its marker in the notes), or None."""
    found = [assumed for marker, assumed in ASSUMED.items() if marker in row["notes"]]
    return found[0] if found else None


def settled(row: dict[str, str], *, alternative: bool = False) -> dict[str, str]:
    """The row with its assumed settings (the alternative reading's with `alternative`), else unchanged."""
    assumed = assumption_of(row)
    if assumed is None:
        return row
    return row | (assumed.alternative if alternative else assumed.settings)


def describe(values: dict[str, str]) -> str:
    """'tp 1, dp 4, ep 4' for a settings dict (column names with '_tokens' as ' tokens')."""
    return ", ".join(f"{key.replace('_', ' ')} {value}" for key, value in values.items())


def note(assumed: Assumed, *, alternative: dict[str, str]) -> str:
    """The not_modelled text of an assumed row: what was assumed and why, and the alternative reading's
    prediction (alternative: the predicted_tokens_per_s / error / status of predict.predict_row under it)."""
    if alternative.get("status") == "predicted":
        other = f"{alternative['predicted_tokens_per_s']} tok/s ({alternative['error']})"
    else:
        other = alternative.get("status", "no prediction")
    return (
        f"assumed {describe(assumed.settings)}: {assumed.why}; sensitivity, at "
        f"{describe(assumed.alternative)}: {other}"
    )
