"""One home per engine and one "does batch b fit": engine names are compared only in
planner/engines/registry.py, and the plan, `kvplan sweep`, the dashboard heatmap and the config commands
(`kvplan mindie`, `kvplan vllm`) give the same max batch for any deployment, engine, pp and dp."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dashboard import view
from planner import capacity, inputs
from planner.cli import app
from planner.errors import KvplanError
from planner.kinds import ENGINES
from planner.serving import sweep

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "planner" / "engines" / "registry.py"


def _mentions_engine(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Name) and "engine" in n.id)
        or (isinstance(n, ast.Attribute) and "engine" in n.attr)
        for n in ast.walk(node)
    )


def _engine_literals(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and n.value in ENGINES for n in ast.walk(node))


def engine_comparisons(path: Path) -> list[str]:
    """`engine == "mindie"`-like comparisons (==, !=, in, not in with an engine-name literal on one side and
    something named *engine* on the other) and dicts keyed by engine names, as file:line."""
    found = []
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_engine_literals(s) for s in sides) and any(_mentions_engine(s) for s in sides):
                found.append(f"{name}:{node.lineno}")
        elif (
            isinstance(node, ast.Dict)
            and node.keys
            and all(isinstance(k, ast.Constant) and k.value in ENGINES for k in node.keys)
        ):
            found.append(f"{name}:{node.lineno}")
    return found


def test_engine_names_are_compared_only_in_the_registry() -> None:
    files = [*sorted((ROOT / "planner").rglob("*.py")), *sorted((ROOT / "dashboard").rglob("*.py"))]
    offenders = [hit for path in files if path != REGISTRY for hit in engine_comparisons(path)]
    assert offenders == []


def test_the_grep_finds_a_comparison(tmp_path: Path) -> None:
    """The check above is not vacuous: it flags the shapes the old code had."""
    probe = tmp_path / "probe.py"
    probe.write_text('def f(dep):\n    return dep.engine == "mindie" or {"vllm": 1, "mindie": 2}\n')
    assert engine_comparisons(probe) == ["probe.py:2", "probe.py:2"]


MODELS = ("qwen3-8b", "qwen3-32b", "qwen3.5-27b", "llama-3.1-70b", "qwen3-30b-a3b")
runner = CliRunner()


def boundary(fits: np.ndarray) -> int:
    """Largest batch (axis 1..n) that fits, checking the fitting batches are exactly 1..boundary."""
    count = int(fits.sum())
    assert fits[:count].all() and not fits[count:].any(), "fit must be monotone in the batch"
    return count


def config_max_batch(engine: str, flags: list[str]) -> int | None:
    """What `kvplan mindie` / `kvplan vllm` write as the batch cap (maxBatchSize, --max-num-seqs)."""
    if engine == "vllm":
        result = runner.invoke(app, ["vllm", *flags, "--weights-path", "/data/m", "--json"])
        assert result.exit_code == 0, result.output
        return int(json.loads(result.stdout)["vllm"]["max_num_seqs"])
    if engine == "mindie":
        result = runner.invoke(app, ["mindie", *flags, "--weights-path", "/data/m", "--json"])
        assert result.exit_code == 0, result.output
        schedule = json.loads(result.stdout)["mindie"]["config"]["BackendConfig"]["ScheduleConfig"]
        return int(schedule["maxBatchSize"])
    return None


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much],
    phases=(Phase.explicit, Phase.reuse, Phase.generate),  # shrinking re-plans for minutes
)
@given(
    model=st.sampled_from(MODELS),
    engine=st.sampled_from(ENGINES),
    tp=st.sampled_from((1, 2, 4)),
    pp=st.sampled_from((1, 2)),
    dp=st.sampled_from((1, 2)),
    ctx=st.sampled_from(("4k", "8k", "32k")),
    dtype=st.sampled_from(("bf16", "int8")),
)
def test_plan_sweep_heatmap_and_configs_give_one_max_batch(
    model: str, engine: str, tp: int, pp: int, dp: int, ctx: str, dtype: str
) -> None:
    request = inputs.PlanRequest(model=model, engine=engine, tp=tp, pp=pp, dp=dp, ctx=ctx, dtype=dtype)
    try:
        dep = inputs.to_deployment(request)
        _, rec = capacity.memory_plan(dep)
    except KvplanError:
        assume(False)
        return
    per_rank = rec.max_batch_size // dep.dp
    assert per_rank * dep.dp == rec.max_batch_size
    rank = capacity.per_dp_rank(dep)
    batches = np.arange(1, per_rank + 3, dtype=np.int64)
    swept = sweep.sweep(rank, batch=batches.tolist(), ctx_tokens=[dep.ctx_tokens])
    assert boundary(swept.fits_memory[0, :, 0]) == per_rank
    heat = view.feasibility_grid(rank, batch=batches, ctx_tokens=np.array([dep.ctx_tokens]))
    assert boundary(np.asarray(heat.fits)[:, 0]) == per_rank
    flags = [
        "--model",
        model,
        "--tp",
        str(tp),
        "--pp",
        str(pp),
        "--dp",
        str(dp),
        "--ctx",
        ctx,
        "--dtype",
        dtype,
    ]
    written = config_max_batch(engine, flags)
    if written is not None:
        assert written == per_rank


def test_a_batch_at_the_engine_cap_is_not_called_memory_bound() -> None:
    """qwen3-8b at ctx 256 on the 950PR: vLLM's batch stops at --max-num-batched-tokens 2048 (vLLM refuses
    --max-num-seqs above it) and MindIE's at maxBatchSize's 5000 with --memory-gib 1e6, while memory would
    hold more; the plan said "bound by memory". It now says the engine's limit binds; below the cap,
    memory still binds."""
    small = ["--model", "qwen3-8b", "--ctx", "256", "--dtype", "fp8"]
    cases = [
        ([*small, "--engine", "vllm"], 2048, "engine limit"),
        ([*small, "--memory-gib", "1000000"], 5000, "engine limit"),
        (small, 2193, "memory"),
    ]
    for flags, batch, binding in cases:
        rec = json.loads(runner.invoke(app, [*flags, "--json"]).output)["recommendation"]
        assert (rec["max_batch_size"], rec["binding_constraint"]) == (batch, binding), flags
    text = runner.invoke(app, [*small, "--engine", "vllm"]).output
    assert "(bound by engine limit;" in text


def test_each_engine_words_what_it_does_beyond_its_pool() -> None:
    """`kvplan serve`'s note on more users than the pool holds comes from the engine's room (MindIE queues
    past maxBatchSize, vLLM and transformers' simulated vLLM scheduler admit up to max_num_seqs and
    preempt); the CLI names no engine."""
    from planner.engines import registry

    mindie = registry.beyond_pool_words("mindie", max_batch=26, clients=400)
    # how many run or queue is the admission's, printed beside it (h67: "(100 here)" beside "157 queued")
    assert mindie == "MindIE runs at most maxBatchSize 26 and queues the rest"
    for engine in ("vllm", "transformers"):
        words = registry.beyond_pool_words(engine, max_batch=256, clients=40)
        assert words.startswith("vLLM admits up to max_num_seqs 256, allocates")
    serve_view = (ROOT / "planner" / "cli" / "serve_view.py").read_text()
    assert "MindIE" not in serve_view and "vLLM" not in serve_view


def test_serve_runs_the_engine_cap_at_ctx_and_the_pool_at_the_request_length() -> None:
    """With --ctx 32k, MindIE's running cap is the plan's batch at 32768 tokens (the maxBatchSize `kvplan
    mindie` writes for that maxSeqLen) while its pool, filled as requests grow, holds far more of the
    workload's 384-token requests: serve runs the cap and its headline equals its simulation. Past the pool
    (no --ctx, 200 users), the note names the length its count is for: the request's input + output."""
    serve = ["serve", "-m", "qwen3-27b", "--dtype", "fp8", "--card", "ascend-950pr-64g"]
    long_ctx = runner.invoke(app, [*serve, "--ctx", "32k", "--concurrency", "32", "--json"])
    assert long_ctx.exit_code == 0, long_ctx.output
    plan = json.loads(runner.invoke(app, [*serve[1:], "--ctx", "32k", "--json"]).output)
    held = plan["recommendation"]["max_batch_size"]
    answer = json.loads(long_ctx.output)
    assert answer["estimate"]["running_batch"] == held
    assert (
        answer["admission"]["full_length_tokens"] == 384 and answer["admission"]["full_length_batch"] > held
    )
    short = runner.invoke(app, [*serve, "--concurrency", "200"])
    assert "at full length (384 tokens)" in " ".join(short.output.split())
