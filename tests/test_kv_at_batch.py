"""The plan's "KV at recommended batch" row and its 30-40 % note read what a sequence takes in the engine's
pool (registry.kv_bytes_at_batch): vLLM's pages with the state pages (the drafts' lookahead stops at
max_model_len), times the bytes one block id reserves; MindIE's blocks with its MTP lookahead, plus the
state."""

from __future__ import annotations

import json
import re

import pytest

from planner import capacity, inputs, units
from planner.deployment import Deployment
from planner.engines import registry
from planner.engines.mindie import pool as mindie_pool
from planner.engines.vllm import batch as vllm_batch
from planner.results import MemoryBreakdown, Recommendation
from tests.helpers import kvplan

ROW = re.compile(r"KV at recommended batch\s*│\s*([\d.]+) GiB\s*│\s*(\d+) x ([\d.]+ [KMG]iB) per sequence")
NOTE = re.compile(r"KV cache at the recommended batch takes ([\d.]+) %")


def planned(**request: object) -> tuple[Deployment, MemoryBreakdown, Recommendation]:
    """The CLI's deployment for the request (inputs.to_deployment) and its memory plan."""
    dep = inputs.to_deployment(inputs.PlanRequest(**request))  # type: ignore[arg-type]
    return (dep, *capacity.memory_plan(dep))


def vllm_pages(dep: Deployment, mem: MemoryBreakdown) -> tuple[int, int, int]:
    """(pages one ctx sequence takes, bytes per page i.e. block id, pages in the pool) from vLLM's pool."""
    built, view = vllm_batch.cut_pool(dep, mem, max_model_len=dep.ctx_tokens)
    return view.sequence_blocks(dep.ctx_tokens), built.block_bytes, built.num_blocks


def row_and_note(args: str) -> tuple[str, int, str, str]:
    """The row's size, batch and per-sequence text, and the note's percent, as `kvplan ARGS` prints them."""
    out = " ".join(kvplan(args).stdout.split())  # rich may wrap the note
    row, note = ROW.search(out), NOTE.search(out)
    assert row is not None and note is not None, out
    return row.group(1), int(row.group(2)), row.group(3), note.group(1)


HYBRID = {"model": "qwen3-27b", "dtype": "fp8", "engine": "vllm", "card": "ascend-950pr"}


@pytest.mark.parametrize(
    ("extra", "pages", "pool_pages"),
    [
        # 1 attention page (384 <= 1536 tokens) + 3 GDN groups x 1 state page; 791 pages in the pool
        ({"ctx": "384"}, 4, 791),
        # 1 attention page (1536 + 3 lookahead slots, capped at max_model_len 1536: vLLM's allocate_slots)
        # + 3 GDN groups x (1 + 3 speculative) state pages
        ({"ctx": "1536", "mtp": 3}, 13, 733),
    ],
)
def test_hybrid_vllm_row_is_pages_times_page_bytes_times_batch(
    extra: dict[str, object], pages: int, pool_pages: int
) -> None:
    dep, mem, rec = planned(**HYBRID, **extra)
    per_sequence, page_bytes, in_pool = vllm_pages(dep, mem)
    assert (per_sequence, in_pool) == (pages, pool_pages)
    want = pages * page_bytes * rec.max_batch_size
    assert registry.kv_bytes_at_batch(dep, mem, batch=rec.max_batch_size) == want
    args = f"-m qwen3-27b --dtype fp8 --engine vllm --ctx {extra['ctx']} --mtp {extra.get('mtp', 0)}"
    size, batch, each, percent = row_and_note(args)
    assert batch == rec.max_batch_size
    assert size == units.fmt_gib(want).split()[0]
    assert each == units.fmt_bytes(pages * page_bytes)
    assert percent == units.fmt_fraction(want / mem.device_capacity_bytes).split()[0]


def test_hybrid_vllm_at_short_ctx_fills_the_pool() -> None:
    """197 requests of 384 tokens take 788 of the 791 pages: the row is the pool, not 197 x 170.81 MiB."""
    dep, mem, rec = planned(**HYBRID, ctx="384")
    pages, page_bytes, in_pool = vllm_pages(dep, mem)
    assert rec.max_batch_size == in_pool // pages == 197
    held = registry.kv_bytes_at_batch(dep, mem, batch=rec.max_batch_size)
    assert in_pool * page_bytes - pages * page_bytes < held <= mem.kv_budget_bytes
    assert held > 2 * rec.max_batch_size * mem.kv_bytes_per_sequence  # the old figure, under half


@pytest.mark.parametrize("engine", ["vllm", "mindie"])
def test_non_hybrid_row_is_unchanged(engine: str) -> None:
    """Qwen3-32B without drafts: the pool's pages are the plan's per-sequence bytes, so the row and the note
    keep batch x kv_bytes_per_sequence (what they printed before the engines' pools were read)."""
    dep, mem, rec = planned(model="qwen3-32b", card="ascend-910b3", tp=4, ctx="8k", engine=engine)
    assert registry.kv_bytes_at_batch(dep, mem, batch=1) == mem.kv_bytes_per_sequence
    if engine == "vllm":
        pages, page_bytes, _ = vllm_pages(dep, mem)
        assert pages * page_bytes == mem.kv_bytes_per_sequence
    data = json.loads(
        kvplan(f"-m qwen3-32b --card ascend-910b3 --tp 4 --ctx 8k --engine {engine} --json").stdout
    )
    assert data["recommendation"]["max_batch_size"] == rec.max_batch_size
    share = rec.max_batch_size * mem.kv_bytes_per_sequence / mem.device_capacity_bytes
    note = f"KV cache at the recommended batch takes {units.fmt_fraction(share)} of device memory"
    assert any(note in line for line in data["warnings"]), data["warnings"]


def test_mindie_mtp_row_counts_the_lookahead_block() -> None:
    """MindIE's batch counts ceil((ctx + gamma) / block) blocks a sequence (batch_holds): so does the row."""
    dep, mem, _ = planned(model="deepseek-v3", card="ascend-910c", dtype="int8", tp=16, ctx="16k", mtp=1)
    blocks = mindie_pool.blocks_per_sequence(dep.ctx_tokens, block_tokens=dep.block_size_tokens, mtp_drafts=1)
    assert blocks == dep.ctx_tokens // dep.block_size_tokens + 1
    want = blocks * mindie_pool.block_bytes(dep, mem) + mem.state_bytes_per_sequence
    assert registry.kv_bytes_at_batch(dep, mem, batch=1) == want > mem.kv_bytes_per_sequence


@pytest.mark.parametrize(
    "request_fields",
    [
        {**HYBRID, "ctx": "1536", "mtp": 3},
        {"model": "deepseek-v3", "card": "ascend-910c", "dtype": "int8", "tp": 8, "dp": 2, "ep": 16,
         "ctx": "8k", "engine": "vllm", "mtp": 1},
        {"model": "deepseek-v3", "card": "ascend-910c", "dtype": "int8", "tp": 16, "ctx": "16k", "mtp": 1},
    ],
)  # fmt: skip
def test_drafting_batch_fits_its_budget_at_full_length(request_fields: dict[str, object]) -> None:
    """The planned batch (one DP group's) at full length, drafts' slots included, is within the KV budget:
    vLLM allocates no slot past max_model_len, MindIE counts its lookahead block in the batch. Before: the
    vLLM rows printed 12.73 GiB > 12.58 GiB (dp 2) 'over the budget at full length'."""
    dep, mem, rec = planned(**request_fields)
    group = -(-rec.max_batch_size // dep.dp)
    held = registry.kv_bytes_at_batch(dep, mem, batch=group)
    assert 0 < held <= mem.kv_budget_bytes
    assert (
        registry.kv_bytes_at_batch(dep, mem, batch=group + 1) > mem.kv_budget_bytes or dep.engine == "mindie"
    )


def test_plan_json_states_the_kv_row() -> None:
    """`kvplan --json` carries the row: pool_sequence_bytes (one sequence in the engine's pool) and
    kv_bytes_at_batch = batch x that, the figures the text table prints (before, a JSON reader multiplying
    memory.kv_bytes_per_sequence got 32.86 GiB where the table said 74.60 GiB)."""
    args = "--model qwen3-27b --dtype fp8 --engine vllm --card ascend-950pr --ctx 384"
    payload = json.loads(kvplan(f"{args} --json").stdout)
    dep, mem, _ = planned(**HYBRID, ctx="384")
    pages, page_bytes, _ = vllm_pages(dep, mem)
    batch = payload["recommendation"]["max_batch_size"]
    assert payload["pool_sequence_bytes"] == pages * page_bytes
    assert payload["kv_bytes_at_batch"] == batch * pages * page_bytes
    size, row_batch, per_sequence, _ = row_and_note(args)
    assert row_batch == batch
    assert size == units.fmt_gib(payload["kv_bytes_at_batch"]).split()[0]
    assert per_sequence == units.fmt_bytes(payload["pool_sequence_bytes"])
