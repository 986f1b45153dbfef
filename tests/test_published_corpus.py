"""lab/published: the cards its rows need exist, imported from the transcribed configs beside it.

Issue 10: model cards for the corpus rows through the HF-config importer; rows name models by their
Hugging Face repo (`Qwen/Qwen3-32B`), which the catalogue resolves.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from planner import catalog
from planner.errors import DataFileError
from planner.importers import hfimport

pytestmark = pytest.mark.lab  # reads the lab's data or scripts (tests/conftest.py: lab implies slow)

PUBLISHED = Path(__file__).resolve().parents[1] / "lab" / "published"
CONFIGS = sorted((PUBLISHED / "hf_configs").glob("*.config.json"))
# Geometry that decides weights, KV and state bytes: imported and committed cards agree in all of these.
GEOMETRY = (
    "model_type", "attention", "hidden_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings", "full_attention_interval",
    "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
    "num_experts", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
    "shared_expert_intermediate_size", "n_shared_experts", "kv_lora_rank", "qk_rope_head_dim",
    "first_k_dense_replace", "mtp_num_hidden_layers", "index_n_heads", "index_head_dim", "index_topk",
)  # fmt: skip
# Corpus models kvplan has no card for (attention it does not model, or no config.json found): corpus README.
NOT_CARDED = {
    "Qwen/Qwen3-Coder-480B-A35B-Instruct", "deepseek-ai/DeepSeek-V4-Flash",
    "deepseek-ai/DeepSeek-V4-Pro", "MiniMaxAI/MiniMax-M3",
}  # fmt: skip


def _corpus_models() -> set[str]:
    with (PUBLISHED / "ascend-serving.csv").open(encoding="utf-8") as handle:
        return {row["model"] for row in csv.DictReader(handle)}


def test_transcribed_configs_exist() -> None:
    names = {p.name.removesuffix(".config.json") for p in CONFIGS}
    assert names >= {
        "qwen3.5-397b-a17b",
        "deepseek-v3.2",
        "minimax-m2.5",
        "kimi-k2.5",
        "qwen3.8-27b",
        "glm-5.1",
    }


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_committed_card_is_the_import_of_its_transcribed_config(path: Path) -> None:
    card_id = path.name.removesuffix(".config.json")
    imported = hfimport.card_from_config_dict(hfimport.read_config(path), card_id=card_id, origin=path.name)
    committed = catalog.load_model(card_id)
    for field in GEOMETRY:
        assert getattr(imported, field) == getattr(committed, field), field
    assert committed.source.hf_repo == hfimport.read_config(path)["_name_or_path"]


def test_every_carded_corpus_model_resolves_by_its_hf_name() -> None:
    models = _corpus_models()
    wanted = {m for m in models if m not in NOT_CARDED}
    assert len(wanted) >= 14
    for name in sorted(wanted):
        card, alias = catalog.resolve_model(name)
        assert alias == name
        assert card.source.hf_repo.split("/")[0].lower() == name.split("/")[0].lower()


@pytest.mark.parametrize(
    ("name", "card_id"),
    [
        ("Qwen/Qwen3-32B", "qwen3-32b"),
        ("qwen/qwen3.5-397b-a17b", "qwen3.5-397b-a17b"),
        ("deepseek-ai/DeepSeek-R1-0528", "deepseek-r1"),  # R1 has its own card (issue 28)
        ("deepseek-ai/DeepSeek-V3.2", "deepseek-v3.2"),
        ("Qwen/Qwen3-Next-80B-A3B-Instruct", "qwen3-next-80b-a3b"),
    ],
)
def test_hf_repo_names_resolve(name: str, card_id: str) -> None:
    assert catalog.resolve_model(name)[0].id == card_id


def test_unknown_hf_name_is_one_clear_error() -> None:
    message = r"no catalogued card mirrors that Hugging Face repo \(got 'Qwen/Nope-1B'\)"
    with pytest.raises(DataFileError, match=message):
        catalog.resolve_model("Qwen/Nope-1B")
    with pytest.raises(DataFileError, match=r"model card file not found \(got 'x/missing.yaml'\)"):
        catalog.resolve_model("x/missing.yaml")


def test_qwen3_8_27b_has_the_qwen3_5_27b_geometry() -> None:
    """Seed 000's "Qwen3-27B" was mapped to Qwen3.5-27B (corpus README); Qwen3.8-27B's config has that
    geometry, so the seed rows plan the same whichever of the two it was."""
    qwen38, qwen35 = catalog.load_model("qwen3.8-27b"), catalog.load_model("qwen3.5-27b")
    for field in (*GEOMETRY, "mamba_ssm_dtype", "attn_output_gate", "qk_norm"):
        assert getattr(qwen38, field) == getattr(qwen35, field), field
    assert qwen38.resolved_layer_types == qwen35.resolved_layer_types


def test_deepseek_v32_card_carries_the_sparse_attention_indexer() -> None:
    card = catalog.load_model("deepseek-v3.2")
    assert card.attention == "mla" and card.is_sparse_attention
    assert (card.index_n_heads, card.index_head_dim, card.index_topk) == (64, 128, 2048)


@pytest.mark.lab
def test_rows_of_older_vllm_ascend_releases_are_reported_not_fitted() -> None:
    from lab.published import predict  # a lab script, imported only under -m lab

    with predict.CORPUS.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    older = [r for r in rows if r["engine"] == "vllm-ascend" and r["source_date"] < predict.FIT_ERA_START]
    assert any(r["model"].startswith("Qwen/Qwen3-Next-") for r in older), "the Dec-2025 Qwen3-Next doc row"
    for row in older:
        reason = predict.older_engine(row)
        assert reason is not None and row["source_date"] in reason
    # A build below 0.16 published after the cut is older too (PR #7265, a 0.14.0rc2 dev build, rows 416-417).
    dev_builds = [r for r in rows if r["engine_version"].startswith("0.14.0rc2.dev")]
    assert len(dev_builds) == 2
    assert all("before v0.16.0rc1" in (predict.older_engine(r) or "") for r in dev_builds)
    newer = [
        r for r in rows
        if (r["source_date"] >= predict.FIT_ERA_START and r not in dev_builds) or r["engine"] != "vllm-ascend"
    ]  # fmt: skip
    assert newer and all(predict.older_engine(r) is None for r in newer)


KINDS = {"ci-baseline-floor", "measured", "paper", "seed"}
POSITIVE_NUMBERS = (
    "tp", "dp", "ep", "concurrency", "input_tokens", "output_tokens", "output_tokens_per_s",
    "ttft_s", "tpot_s",
)  # fmt: skip


def test_every_row_names_a_known_card_a_kind_and_where_it_came_from() -> None:
    """Each published number names a kvplan card, one of the corpus kinds, an engine, and a source a reviewer
    can open; a numeric cell is empty (not stated) or a positive number (seconds, tokens, tokens/s, ranks)."""
    with (PUBLISHED / "ascend-serving.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    cards = set(catalog.card_ids())
    for line, row in enumerate(rows, start=2):
        assert row["card"] in cards and row["kind"] in KINDS, line
        assert row["engine"] and row["notes"], line
        # A public row links its page; a seed row names its file under the steering repo's shared/seeds.
        linked = row["source_url"].startswith("https://")
        assert linked or row["source_path"].startswith("/work/shared/seeds/"), line
        assert float(row["output_tokens_per_s"]) > 0, line
        for column in POSITIVE_NUMBERS:
            assert row[column] == "" or float(row[column]) > 0, (line, column)
        # TPOT is one decode step per request: a published value in ms copied unconverted would exceed 10 s.
        assert row["tpot_s"] == "" or float(row["tpot_s"]) < 10, line


@pytest.mark.lab
def test_vllm_acceptance_rates_reach_the_fit_as_chained_acceptance() -> None:
    """A vllm-ascend row's acceptance is vLLM's accepted / drafted share: its bench row carries the chained
    acceptance that gives the row's 1 + k x share tokens per step (line 171: 2.93 with 3 drafts at 64.2 %)."""
    from lab.published import predict
    from planner.perf.mtp import speculative_tokens_per_step

    with predict.CORPUS.open(encoding="utf-8") as handle:
        rows = {line: row for line, row in enumerate(csv.DictReader(handle), start=2)}
    stated = [r for r in rows.values() if r["mtp_acceptance"] and r["engine"] == "vllm-ascend"]
    assert len(stated) >= 4
    for row in stated:
        drafts, share = int(row["mtp"]), float(row["mtp_acceptance"])
        chained = float(predict.bench_row(row)["mtp_acceptance"])
        tokens = speculative_tokens_per_step(drafts, acceptance_fraction=chained)
        assert tokens == pytest.approx(1 + drafts * share, abs=1e-5)
    assert "mean acceptance length 2.93" in rows[171]["notes"]


@pytest.mark.lab
def test_a_burst_of_varied_lengths_gives_the_fit_its_throughput_only() -> None:
    """GPUStack's ShareGPT runs send every request at once: their mean TTFT / TPOT are not the steady state
    the serving model predicts (line 198: mean TPOT 788 ms, median 204), so their bench rows carry neither."""
    from lab.published import predict

    with predict.CORPUS.open(encoding="utf-8") as handle:
        rows = {line: row for line, row in enumerate(csv.DictReader(handle), start=2)}
    burst = [line for line, row in rows.items() if predict.transient_phase_means(row)]
    assert 198 in burst and 199 in burst and 201 in burst
    for line in burst:
        bench = predict.bench_row(rows[line])
        assert bench["ttft_s"] == "" and bench["tpot_s"] == "" and float(bench["output_tokens_per_s"]) > 0
        assert rows[line]["ttft_s"] and rows[line]["tpot_s"]  # published, kept in the corpus
    steady = predict.bench_row(rows[241])  # Alauda's open loop keeps its per-phase truth
    assert steady["ttft_s"] == rows[241]["ttft_s"] and steady["tpot_s"] == rows[241]["tpot_s"]


@pytest.mark.lab
def test_rows_that_ran_are_predicted_not_refused_for_memory() -> None:
    """A row whose weights do not fit at the fit's 0.8 memory share still ran: it is predicted at the raised
    share (its command says --memory-fraction 0.95); a row corrected after the shipped fits (Kimi-K2-Thinking,
    a native INT4 checkpoint) is predicted but kept out of the fits until a refit decides on it."""
    from lab.published import predict  # a lab script, imported only under -m lab

    with predict.CORPUS.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    seed_fp16 = 113  # seed 000 table 4.1 "FP16 原生" single stream on the 64 GB 950PR
    result = predict.predict_row(seed_fp16, rows[seed_fp16 - 2], profile_dir=None, fitted=True)
    assert result["status"] == "predicted"
    assert f"--memory-fraction {predict.RAISED_MEMORY_FRACTION:g}" in result["command"]
    kimi = 90
    assert rows[kimi - 2]["model"] == "moonshotai/Kimi-K2-Thinking" and rows[kimi - 2]["dtype"] == "w4a16-moe"
    assert predict.predict_row(kimi, rows[kimi - 2], profile_dir=None, fitted=True)["status"] == "predicted"
    assert predict.not_fitted(kimi, rows[kimi - 2]) == predict.CORRECTED_AFTER_FIT[kimi]
    fitted_rows = [i for i, row in enumerate(rows, start=2) if predict.not_fitted(i, row) is None]
    assert kimi not in fitted_rows
    assert not any(
        "does not fit" in predict.predict_row(i, r, profile_dir=None)["status"]
        for i, r in enumerate(rows, start=2)
        if predict._skip_reason(r) is None
    )


@pytest.mark.lab
def test_seed_002_rows_with_a_kv_cache_run_as_transformers_and_are_not_fitted() -> None:
    """Seed 002's torch_npu eager server is predicted as `--engine transformers` where a row states its dtype
    (lines 138-139, output 64 assumed: predict.SEED_002_OUTPUT_TOKENS; the fp32 rows 127-128 and 136-137 with
    --dtype fp32 since 2026-12-06; the short-prompt table 134-137 at predict.SEED_002_SHORT_PROMPT's 30 in /
    64 out; the batch table 129-133, whose dtype is not stated, as fp32: predict.SEED_002_BATCH_TABLE), never
    fitted; the row without a KV cache stays skipped with its own reason."""
    from lab.published import predict  # a lab script, imported only under -m lab

    with predict.CORPUS.open(encoding="utf-8") as handle:
        rows = list(enumerate(csv.DictReader(handle), start=2))
    seed = {i: row for i, row in rows if row["engine"] == predict.SEED_002_ENGINE}
    assert len(seed) == 14 and all(
        predict.not_fitted(i, row) == predict.SEED_002_AFTER_FIT for i, row in seed.items()
    )
    lines = (127, 128, *range(129, 134), 134, 135, 136, 137, 138, 139)
    predicted = {i: predict.predict_row(i, seed[i], profile_dir=None) for i in lines}
    for result in predicted.values():
        assert result["status"] == "predicted"
        assert "--engine transformers" in result["command"] and "--output-tokens 64" in result["command"]
    assert "--mtp 1 --mtp-acceptance 0.896" in predicted[139]["command"]
    assert all("--dtype fp32" in predicted[i]["command"] for i in (127, 128, 136, 137))
    assert all("--input-tokens 30 " in predicted[i]["command"] for i in (134, 135, 136, 137))
    assert predict._skip_reason(seed[126]) == predict.NO_KV_CACHE
    for i in range(129, 134):  # the corpus leaves the dtype blank; the prediction says what it assumed
        assert seed[i]["dtype"] == "" and "--dtype fp32 " in predicted[i]["command"]
        assert predicted[i]["dtype"] == "fp32"
        assert "unstated dtype (predicted as fp32" in predicted[i]["not_modelled"]
    assert all(predicted[i]["not_modelled"] == "" for i in (127, 134, 138))


@pytest.mark.lab
def test_rows_missing_a_setting_say_where_their_source_was_searched() -> None:
    """Issue 23: a row skipped for a setting its source does not state quotes, in its skip reason, where the
    source was read; the six GPUStack MindIE Qwen3-30B-A3B rows whose NPU count GPUStack's own placement gives
    (lines 208, 214-218: tp 2) are predicted but not fitted (predict.STATED_AFTER_FIT)."""
    from lab.published import predict

    with predict.CORPUS.open(encoding="utf-8") as handle:
        rows = {line: row for line, row in enumerate(csv.DictReader(handle), start=2)}
    unstated = {
        line: predict._skip_reason(row)
        for line, row in rows.items()
        if (predict._skip_reason(row) or "").startswith(("tp, concurrency or lengths", "dtype (not stated)"))
    }
    # 13 of issue 23's search, less seed 002's short-prompt bf16 rows (134-135, which took assumed lengths),
    # its batch table (129-133, an assumed dtype: test above) and line 170's single stream (an assumed prompt:
    # test below), plus line 421 (#1605's Qwen3-32B, no tp); four of the six (61, 67, 175, 421) are predicted
    # with an assumed setting (test below), the corpus still leaving it blank
    assert len(unstated) == 6
    assert all(predict.searched(rows[line]) and reason.endswith(predict.searched(rows[line])[2:])
               for line, reason in unstated.items())  # fmt: skip
    for line in (208, 214, 215, 216, 217, 218):
        assert rows[line]["tp"] == "2" and predict._skip_reason(rows[line]) is None
        assert predict.not_fitted(line, rows[line]) == predict.STATED_AFTER_FIT


@pytest.mark.lab
def test_rows_with_an_assumed_setting_are_predicted_with_a_sensitivity_and_not_fitted() -> None:
    """Issue 23: lines 61, 67 (prompt length from a dataset name), 175 (DeepSeek-V4-Flash's layout on 950PR)
    and 421 (#1605's Qwen3-32B tp) are predicted with the setting assumed_settings.py assumes, say so and give
    the other reading's prediction in not_modelled, and stay out of every fit (their corpus row keeps the
    setting blank: _skip_reason names it; not_fitted says ASSUMED_NOT_FITTED)."""
    from lab.published import assumed_settings, predict

    with predict.CORPUS.open(encoding="utf-8") as handle:
        rows = {line: row for line, row in enumerate(csv.DictReader(handle), start=2)}
    with (PUBLISHED / "predictions-after.csv").open(encoding="utf-8") as handle:
        after = {row["row"]: row for row in csv.DictReader(handle)}
    assumed = {line for line, row in rows.items() if assumed_settings.assumption_of(row)}
    assert assumed == {61, 67, 175, 421}
    flags = {61: "--input-tokens 1047552 ", 67: "--input-tokens 131072 ", 175: "--tp 1 ", 421: "--tp 4 "}
    for line, flag in flags.items():
        row = rows[line]
        assert (predict._skip_reason(row) or "").startswith("tp, concurrency or lengths not stated")
        assert predict.not_fitted(line, row) == assumed_settings.ASSUMED_NOT_FITTED
        result = after[str(line)]
        assert result["status"] == "predicted" and flag in result["command"], result["status"]
        assert "assumed " in result["not_modelled"] and "sensitivity, at " in result["not_modelled"]
        other = result["not_modelled"].split("sensitivity, at ")[1]
        assert " tok/s (" in other  # the other reading is predicted too
    assert " --pd 1:1 " in after["61"]["command"] and " --mtp 3 " in after["67"]["command"]
    assert "--dp 4 --ep 4 " in after["175"]["command"]


@pytest.mark.lab
def test_cloudmatrix_rows_are_a_vllm_decode_instance_per_package_not_fitted() -> None:
    """Issue 23: the CloudMatrix384 paper's two decode figures (lines 111-112, per 910C package, a PD decode
    instance of 160 packages at batch 96 / 8 per package) are predicted by kvplan's decode speed with vLLM's
    kernels (predict.CLOUDMATRIX_DECODE), never fitted; their not_modelled column says what was assumed."""
    from lab.published import predict

    with predict.CORPUS.open(encoding="utf-8") as handle:
        rows = {line: row for line, row in enumerate(csv.DictReader(handle), start=2)}
    with (PUBLISHED / "predictions-after.csv").open(encoding="utf-8") as handle:
        after = {row["row"]: row for row in csv.DictReader(handle)}
    for line, batch in ((111, "15360"), (112, "1280")):
        row = rows[line]
        assert row["engine"] == predict.CLOUDMATRIX_ENGINE and row["concurrency"] == batch
        assert predict._skip_reason(row) == predict.CLOUDMATRIX_DECODE  # out of every fit
        predicted = after[str(line)]
        assert predicted["status"] == "predicted", predicted["status"]
        assert predicted["command"] == predict.decode_speed_command(row, card=row["card"])
        assert "--engine vllm" in predicted["command"] and f"--batch {batch}" in predicted["command"]
        assert predict.CLOUDMATRIX_NOTE in predicted["not_modelled"]


@pytest.mark.lab
def test_glm5_rows_are_predicted_not_fitted_and_name_the_index_reuse_kvplan_does_not_model() -> None:
    """GLM-5.1 / 5.2 (cards glm-5.1, glm-5.2, since 2026-12-06) are predicted, never fitted
    (predict.GLM5_AFTER_FIT or an earlier not-fitted reason); the rows whose runs reused the indexer's top-k
    across layers (IndexCache via --hf-overrides on lines 71-74, GLM-5.2's IndexShare on line 81) carry it in
    the not_modelled column."""
    from lab.published import predict  # a lab script, imported only under -m lab

    with predict.CORPUS.open(encoding="utf-8") as handle:
        rows = list(enumerate(csv.DictReader(handle), start=2))
    glm = {i: row for i, row in rows if row["model"].startswith(predict.GLM5_MODEL)}
    held_out = list(range(432, 441))  # PR #12920's one-node A2 runs (sixth pass): IndexShare and DSA CP
    assert sorted(glm) == [71, 72, 73, 74, 79, 80, 81, 89, *held_out]
    assert all(predict.not_fitted(i, row) for i, row in glm.items())
    assert all(predict._skip_reason(row) in (None, predict.DISAGGREGATED) for row in glm.values())
    caveats = {i: predict.not_modelled(row) for i, row in glm.items() if predict.not_modelled(row)}
    assert set(caveats) == {71, 72, 73, 74, 81, *held_out}
    assert all("IndexShare" in caveats[i] and "enable_dsa_cp" in caveats[i] for i in held_out)
    assert all("IndexCache" in caveats[i] for i in (71, 72, 73, 74)) and "IndexShare" in caveats[81]
    # the dash-named shared-prefix dataset (GSM8K-in131072-bs500-prefix90-glm51) is read as 90 % cached
    assert predict.prefix_cached_fraction(glm[71]) == 0.9


@pytest.mark.lab
def test_held_out_rows_are_predicted_and_never_fitted() -> None:
    """The sixth pass (lines 422-440, predict.HELD_OUT in their notes) tests the shipped fits: every row is
    predicted (a closed loop, or the finite open-loop run of its stated prompts) and not_fitted names the
    hold-out first, whatever the row's engine era or other reasons."""
    from lab.published import predict

    with predict.CORPUS.open(encoding="utf-8") as handle:
        rows = dict(enumerate(csv.DictReader(handle), start=2))
    held = {i: row for i, row in rows.items() if predict.HELD_OUT in row["notes"]}
    assert sorted(held) == list(range(422, 441))
    assert all(predict.not_fitted(i, row) == predict.HELD_OUT for i, row in held.items())
    assert all(predict._skip_reason(row) in (None, predict.FINITE_PROMPTS) for row in held.values())
    assert all(predict.older_engine(row) is None for row in held.values())  # only the flag keeps them out


def test_before_and_after_predictions_use_their_own_profiles() -> None:
    """predictions-before.csv (datasheet profiles) and predictions-after.csv (--fitted) are two different
    runs: on the rows of a card and engine with a shipped fit (hwprofiles/fitted/<card>.<engine>.yaml) the two
    predictions differ, and where no fit ships (the 910B3 under MindIE) they agree. A merge once committed the
    fitted run under both names."""

    def predictions(name: str) -> dict[str, dict[str, str]]:
        with (PUBLISHED / name).open(encoding="utf-8") as handle:
            return {row["row"]: row for row in csv.DictReader(handle) if row["status"] == "predicted"}

    before, after = predictions("predictions-before.csv"), predictions("predictions-after.csv")
    assert before.keys() == after.keys()

    def rows_of(card: str, engine: str) -> list[str]:
        return [k for k, row in after.items() if (row["card"], row["engine"]) == (card, engine)]

    fitted = rows_of("ascend-910c", "vllm-ascend")
    differ = [k for k in fitted if before[k]["predicted_tokens_per_s"] != after[k]["predicted_tokens_per_s"]]
    assert len(differ) > len(fitted) // 2, f"{len(differ)} of {len(fitted)} 910C vllm-ascend rows differ"
    unfitted = rows_of("ascend-910b3", "mindie")
    assert unfitted
    assert all(before[k]["predicted_tokens_per_s"] == after[k]["predicted_tokens_per_s"] for k in unfitted)


@pytest.mark.lab
def test_the_single_stream_without_a_prompt_length_is_predicted_at_the_default_prompt() -> None:
    """Line 170 (Qwen3.8-27B W8A8 on one 950PR, 2048 tokens, MTP 3, 64 tok/s) states no prompt length and no
    acceptance: predicted, and fitted, at kvplan's default prompt with line 171's draft acceptance (same
    checkpoint, engine version and depth), converted to kvplan's chained acceptance as line 171's is. One
    stream of 2048 tokens is decode: the prompt moves the prediction under 5 % from 64 to 4096 tokens."""
    from lab.published import predict
    from planner.kinds import DEFAULT_INPUT_TOKENS

    with predict.CORPUS.open(encoding="utf-8") as handle:
        rows = {line: row for line, row in enumerate(csv.DictReader(handle), start=2)}
    single = rows[170]
    assert predict.is_unstated_single_stream(single) and not single["input_tokens"]
    assert not any(predict.is_unstated_single_stream(row) for line, row in rows.items() if line != 170)
    assert predict._skip_reason(single) is None and predict.not_fitted(170, single) is None
    bench = predict.bench_row(single)
    assert bench["input_tokens"] == str(DEFAULT_INPUT_TOKENS)
    assert bench["mtp_acceptance"] == predict.chained_acceptance(rows[171]) != ""
    speeds = []
    for prompt in ("64", "4096"):
        text = predict.command(bench | {"input_tokens": prompt}, card="ascend-950pr")
        speeds.append(predict.simulate_json(text)["instance_output_tokens_per_s"])
    assert abs(speeds[1] / speeds[0] - 1) < 0.05  # 3.5 % with the shipped 4-row fit


@pytest.mark.lab
def test_sglang_phases_cover_the_single_instance_rows_and_the_a3_case() -> None:
    """lab/published/sglang_phases.py: every single-instance SGLang row that publishes a TTFT or a TPOT is
    predicted by its recorded command; the A3 4k single prompt (line 157, issue 27: 318 ms) comes within the
    issue's 30 % once SGLang reads vllm-ascend's fit without vllm-ascend's software costs."""
    from lab.published import predict, sglang_phases

    errors = sglang_phases.phase_errors(predict.HERE / "predictions-after.csv")
    with predict.CORPUS.open(encoding="utf-8") as handle:
        corpus = dict(enumerate(csv.DictReader(handle), start=2))
    ttft_lines = {line for line, _ in errors["ttft"]}
    assert all(corpus[line]["engine"] == "sglang" and corpus[line]["ttft_s"] for line in ttft_lines)
    assert len(errors["ttft"]) == 20 and len(errors["tpot"]) == 19
    assert abs(dict(errors["ttft"])[157]) < 0.3


@pytest.mark.lab
def test_the_eager_ascend_band_holds_seed_002s_rows() -> None:
    """ranges.ASCEND_EAGER_FACTORS (the range an eager engine's datasheet speed prints on Ascend) holds every
    predicted seed 002 row's measured / predicted output tok/s, its low end the rows' lowest rounded down to
    0.01, and ASCEND_EAGER_ROWS counts them (lab/published/predictions-before.csv: the datasheet profile)."""
    import math

    from lab.published import predict
    from planner.perf import ranges

    table = predict.CORPUS.parent / "predictions-before.csv"
    with table.open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["engine"] == predict.SEED_002_ENGINE]
    ratios = [1.0 / (1.0 + float(r["error"])) for r in rows if r["status"] == "predicted"]
    low, high = ranges.ASCEND_EAGER_FACTORS
    assert len(ratios) == ranges.ASCEND_EAGER_ROWS
    assert low <= min(ratios) and max(ratios) <= high
    assert low == math.floor(min(ratios) * 100) / 100
