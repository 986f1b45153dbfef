"""The corpus's SGLang rows as the kvplan commands a user would type: the launch settings each row ran with
(sglang-launch.csv, written by sglang_launch.py from the source's own launch commands) in kvplan's words.

SGLang flag                                  kvplan flag
--tp-size T --dp-size D --enable-dp-attention  --tp T/D --dp D (attention DP inside one TP group of T ranks)
--tp-size T (no DP attention), --dp-size D      --tp T --dp D (D replicas)
--moe-a2a-backend / --ep-size (MoE)            --ep T (experts over all T ranks); MoE without it: --ep 1
--max-running-requests R                       --max-batch R/D (SGLang gives each attention-DP rank R // D)
--mem-fraction-static f                        --memory-fraction f (SGLang's own formula when not given)
--chunked-prefill-size C, --max-prefill-tokens M   --max-prefill-tokens min(C, M) (C = -1: M alone), the
                                               tokens of one prefill pass (PrefillAdder's two budgets)
--speculative-algorithm NEXTN, steps k         --mtp k
--speculative-algorithm EAGLE3, steps k        --speculative-config '{"method": "eagle3", ...}'
bench_serving "Accept length: L"               --acceptance-rate (L - 1) / k (tokens per step = 1 + k x rate)
prefill / decode servers + router              `kvplan simulate --pd P:D` with each side's layout
"""

from __future__ import annotations

import csv
import json
import re
import shlex
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAUNCH = HERE / "sglang-launch.csv"
ENGINE = "sglang"
# The SGLang bench_serving rows state --request-rate and --num-prompts in these words.
REQUEST_RATE = re.compile(r"request-rate ([0-9.]+)")
NUM_PROMPTS = re.compile(r"num-prompts (\d+)")
ARRIVAL_MARGIN = 2.0  # predict.ARRIVAL_MARGIN: a rate whose output is within 2x the throughput bounds it
INTER_NODE_LINK_GB_PER_S = 25  # pd_deployments.INTER_NODE_LINK_GB_PER_S (RoCE per device, 910C profile)


@cache
def launches() -> dict[tuple[str, str], dict[str, str]]:
    """(model, output tok/s as the corpus writes it) -> the row's launch settings."""
    with LAUNCH.open(encoding="utf-8") as handle:
        return {(r["model"], r["output_tokens_per_s"]): r for r in csv.DictReader(handle)}


def launch_of(row: dict[str, str]) -> dict[str, str] | None:
    """The launch settings of an SGLang corpus row (None for another engine's row or one not read)."""
    if row["engine"] != ENGINE:
        return None
    return launches().get((row["model"], row["output_tokens_per_s"]))


def is_disaggregated(row: dict[str, str]) -> bool:
    """The row ran separate prefill and decode servers (its launch settings say so)."""
    launch = launch_of(row)
    return launch is not None and launch["mode"] == "pd"


def layout(launch: dict[str, str], *, prefix: str = "", moe: bool) -> tuple[int, int, int]:
    """kvplan's (tp, dp, ep) of one side's SGLang layout (the module docstring's table)."""
    tp_size, dp_size = int(launch[f"{prefix}tp_size"]), int(launch[f"{prefix}dp_size"] or 1)
    attention_dp = launch[f"{prefix}dp_attention"] == "1"
    tp = tp_size // dp_size if attention_dp else tp_size
    experts = moe and (launch[f"{prefix}expert_parallel"] == "1" or attention_dp)
    return tp, dp_size, (tp * dp_size if experts else 1)


def per_rank_batch(launch: dict[str, str], *, prefix: str = "") -> str:
    """--max-batch: --max-running-requests per attention-DP rank ("" when not given)."""
    running = launch[f"{prefix}max_running_requests"]
    if not running:
        return ""
    dp = int(launch[f"{prefix}dp_size"] or 1) if launch[f"{prefix}dp_attention"] == "1" else 1
    return str(max(int(running) // dp, 1))


def pass_tokens(launch: dict[str, str], *, prefix: str = "") -> str:
    """--max-prefill-tokens: min of --chunked-prefill-size (when > 0) and --max-prefill-tokens ("" when
    neither is given: the card's default chunk)."""
    budgets = [
        int(v) for v in (launch[f"{prefix}chunked_prefill_size"], launch[f"{prefix}max_prefill_tokens"]) if v
    ]
    positive = [b for b in budgets if b > 0]
    return str(min(positive)) if positive else ""


def acceptance_rate(launch: dict[str, str]) -> str:
    """--acceptance-rate from the run's accept length L and k steps: (L - 1) / k ("" when not published)."""
    if not launch["accept_length"] or not launch["spec_steps"]:
        return ""
    steps = int(launch["spec_steps"])
    return f"{min(max((float(launch['accept_length']) - 1) / steps, 0.0), 1.0):.6g}"


def speculation_words(launch: dict[str, str]) -> list[str]:
    """The speculative flags: NEXTN as --mtp k, EAGLE3 as --speculative-config, and --acceptance-rate."""
    steps = launch["spec_steps"]
    if not launch["speculative"] or not steps:
        return []
    if launch["speculative"] == "EAGLE3":
        words = [
            "--speculative-config",
            json.dumps({"method": "eagle3", "num_speculative_tokens": int(steps)}),
        ]
    else:
        words = ["--mtp", steps]
    rate = acceptance_rate(launch)
    return words + (["--acceptance-rate", rate] if rate else [])


def chained_acceptance(launch: dict[str, str]) -> str:
    """The per-draft acceptance the bench row carries (planner.speculation.chained_acceptance of
    acceptance_rate, exactly what `--acceptance-rate` gives the CLI); "" when not published."""
    from planner.speculation import chained_acceptance as chained

    rate = acceptance_rate(launch)
    if not rate:
        return ""
    return repr(chained(int(launch["spec_steps"]), accepted_share=float(rate)))


def default_memory_fraction(row: dict[str, str], launch: dict[str, str], *, moe: bool) -> str:
    """--mem-fraction-static as launched, else SGLang's own default for the row's card and layout
    (planner/engines/sglang/defaults.py through the registry)."""
    if launch["mem_fraction_static"]:
        return launch["mem_fraction_static"]
    from planner import catalog
    from planner.engines import registry

    tp, dp, _ = layout(launch, moe=moe)
    hardware = catalog.resolve_card(row["card"])
    fraction = registry.deployment_memory_fraction(
        ENGINE, hardware, ranks=(tp, 1, dp), prefill_tokens=None, drafting=bool(launch["speculative"])
    )
    return f"{fraction:g}"


def is_moe(model: str) -> bool:
    """Whether the row's model card is a mixture of experts."""
    from planner import catalog

    return catalog.resolve_model(model)[0].is_moe


def bench_fields(row: dict[str, str], launch: dict[str, str]) -> dict[str, str]:
    """What an SGLang row's launch settings change in its serving bench row (predict.bench_row)."""
    moe = is_moe(row["model"])
    tp, dp, ep = layout(launch, moe=moe)
    fields = {"tp": str(tp), "dp": str(dp), "ep": str(ep), "max_num_seqs": per_rank_batch(launch)}
    fields |= {"max_num_batched_tokens": pass_tokens(launch)}
    fields["memory_fraction"] = default_memory_fraction(row, launch, moe=moe)
    steps = launch["spec_steps"] if launch["speculative"] else ""
    fields |= {"mtp": steps, "mtp_acceptance": chained_acceptance(launch) if steps else ""}
    fields["acceptance_rate"] = acceptance_rate(launch) if steps else ""
    fields["speculative_method"] = "eagle3" if launch["speculative"] == "EAGLE3" else ""
    prompts = NUM_PROMPTS.search(row["notes"])
    fields["num_prompts"] = prompts.group(1) if prompts else ""
    return fields


def paced_rate(row: dict[str, str]) -> float | None:
    """The bench client's --request-rate when it bounds the run (rate x output tokens < ARRIVAL_MARGIN x
    the published output tok/s), else None (request-rate inf, or a rate the run outpaced)."""
    rate = REQUEST_RATE.search(row["notes"])
    if rate is None:
        return None
    cap = float(rate.group(1)) * float(row["output_tokens"])
    return float(rate.group(1)) if 0 < cap < ARRIVAL_MARGIN * float(row["output_tokens_per_s"]) else None


def pd_command(row: dict[str, str], *, card: str) -> str | None:
    """The `kvplan simulate --pd` command of a disaggregated SGLang row (None: no launch settings read):
    prefill and decode instances from the router, each side's layout, the decode side's batch cap and
    memory fraction, the prefill pass budget; closed loop at the row's concurrency or at its client rate
    when that rate bounds the run; the benchmark's prompt count."""
    launch = launch_of(row)
    if launch is None:
        return None
    moe = is_moe(row["model"])
    d_tp, d_dp, d_ep = layout(launch, moe=moe)
    p_tp, p_dp, p_ep = layout(launch, prefix="p_", moe=moe)
    args = ["kvplan", "simulate", "-m", row["model"], "--card", card, "--dtype", row["dtype"]]
    args += ["--kv-dtype", row["kv_dtype"]] if row["kv_dtype"] else []
    args += ["--engine", ENGINE, "--tp", str(d_tp), "--dp", str(d_dp), "--ep", str(d_ep)]
    args += ["--pd", f"{launch['prefill_instances']}:{launch['decode_instances']}"]
    args += ["--prefill-tp", str(p_tp), "--prefill-dp", str(p_dp), "--prefill-ep", str(p_ep)]
    args += ["--kv-link-gbps", f"{INTER_NODE_LINK_GB_PER_S:g}"]
    args += ["--input-tokens", row["input_tokens"], "--output-tokens", row["output_tokens"]]
    rate = paced_rate(row)
    args += ["--rate", f"{rate:g}"] if rate is not None else ["--concurrency", row["concurrency"]]
    prompts = NUM_PROMPTS.search(row["notes"])
    args += ["--requests", prompts.group(1)] if prompts else []
    args += speculation_words(launch)
    batch, tokens = per_rank_batch(launch), pass_tokens(launch, prefix="p_")
    args += ["--max-batch", batch] if batch else []
    args += ["--max-batched-tokens", tokens] if tokens else []
    args += ["--memory-fraction", default_memory_fraction(row, launch, moe=moe)]
    return shlex.join(args)
