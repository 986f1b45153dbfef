"""The SGLang launch settings behind the corpus's sglang rows, read from the launch commands the source gives.

    PYTHONPATH=. python lab/published/sglang_launch.py --doc DOC.md [--out lab/published/sglang-launch.csv]

DOC.md: `git show 386e541520b7fb0327218c1d420cee0e63e68d03:docs/platforms/ascend_npu_best_practice.md` on a
mirror of Ascend/sglang (the commit the corpus rows cite; the numbers left the doc on 2026-01-07). Each
"### <model> Atlas 800I <A2|A3>-<N>Card PD <Mixed|Separation> ..." section has its `sglang.launch_server`
commands (a mixed server, or a prefill and a decode server), the `sglang_router` command naming the
prefill and decode instances, and the `sglang.bench_serving` result; a section whose deployment says
"Please Turn to [Model Deployment](#anchor)" runs the deployment of the section under that anchor. A corpus
row is matched to its section by its output tok/s (the doc's "Output token throughput (tok/s)", or its
prompts x output length / duration, to 0.1 tok/s).

The corpus records none of these settings (lab/published/README.md: the rows were harvested for their
results), yet a user reproducing a row would type them: --max-running-requests, --mem-fraction-static,
--chunked-prefill-size / --max-prefill-tokens, the layout. predict.py reads the CSV this script writes
(committed, so predictions and tests need no mirror). Rows 372 and 373 (PR descriptions, not this doc) and
DeepSeek-V3.2's section (its --tp / --dp come from shell variables) are entered by hand (MANUAL), each with
what was read.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "ascend-serving.csv"
OUT = HERE / "sglang-launch.csv"
SIDE_FIELDS = (
    "tp_size", "dp_size", "dp_attention", "expert_parallel", "mem_fraction_static", "max_running_requests",
    "chunked_prefill_size", "max_prefill_tokens",
)  # fmt: skip
COLUMNS = (
    "row", "model", "output_tokens_per_s", "section", "doc_line", "mode", "prefill_instances",
    "decode_instances", *SIDE_FIELDS,
    "speculative", "spec_steps", "accept_length", *(f"p_{f}" for f in SIDE_FIELDS), "read",
)  # fmt: skip
DIES_PER_CARD = {"A3": 2, "A2": 1}  # an A3 card is one 910C package of two dies; an A2 card one 910B
SECTION = re.compile(r"^### (.+ Atlas 800I (A[23])-(\d+)Card PD (Mixed|Separation) .+)$")
REDIRECT = re.compile(r"Please [Tt]urn to \[Model Deployment\]\(#([^)]+)\)")
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')
THROUGHPUT = re.compile(r"Output token throughput \(tok/s\):\s+([\d.]+)")
ACCEPT = re.compile(r"Accept length:\s+([\d.]+)")
ANCHOR_IN_HEADER_LINES = 5
NUM_PROMPTS = re.compile(r"--num-prompts (\d+)")
OUTPUT_LEN = re.compile(r"--random-output-len (\d+)")
DURATION = re.compile(r"Benchmark duration \(s\):\s+([\d.]+)")
MATCH_TOKENS_PER_S = 0.1  # the printed rates round the totals differently (6390.52 vs 6390.44)
ROUTER_SIDE = re.compile(r"--(prefill|decode) http")
# Hand-read entries (corpus line -> CSV fields): their commands are not in a form the parser reads.
MANUAL: dict[int, dict[str, str]] = {
    149: {
        "mode": "pd", "prefill_instances": "1", "decode_instances": "1", "tp_size": "32", "dp_size": "8",
        "dp_attention": "1", "expert_parallel": "1", "mem_fraction_static": "0.79",
        "max_running_requests": "32", "chunked_prefill_size": "-1", "max_prefill_tokens": "68000",
        "speculative": "NEXTN", "spec_steps": "3", "accept_length": "3.18", "p_tp_size": "32",
        "p_dp_size": "1",
        "p_dp_attention": "0", "p_expert_parallel": "1", "p_mem_fraction_static": "0.73",
        "p_max_running_requests": "1", "p_chunked_prefill_size": "-1", "p_max_prefill_tokens": "68000",
        "read": "doc lines 1028-1244 (section 'Deepseek-V3.2 Atlas 800I A3-32Card PD Separation 64K-1K "
        "30ms'): "
        "IPs has 2 nodes per side, tp_size=16 x nnodes = 32; prefill --tp 32 --mem-fraction-static 0.73 "
        "--chunked-prefill-size -1 --max-prefill-tokens 68000 --max-running-requests 1 --moe-a2a-backend "
        "deepep --enable-nsa-prefill-context-parallel (context parallel: not modelled); decode --tp 32 "
        "--dp 8 "
        "--ep 32 --enable-dp-attention --mem-fraction-static 0.79 --max-running-requests 32 NEXTN 3; "
        "32 cards = 64 dies = one prefill and one decode instance of 32 (the router lists two prefill "
        "addresses of the one two-node prefill instance); accept length 3.18",
    },
    372: {
        "mode": "mixed", "tp_size": "4", "dp_size": "1", "dp_attention": "0", "expert_parallel": "1",
        "mem_fraction_static": "0.684", "max_running_requests": "52", "chunked_prefill_size": "",
        "max_prefill_tokens": "8192", "speculative": "", "spec_steps": "", "accept_length": "",
        "read": "the row's notes (PR #16164): --tp-size 4 --mem-fraction-static 0.684 --max-running-requests "
        "52 --max-prefill-tokens 8192, 'TP4EP4'; chunked_prefill_size not set (the card's default)",
    },
    373: {
        "mode": "mixed", "tp_size": "4", "dp_size": "2", "dp_attention": "1", "expert_parallel": "1",
        "mem_fraction_static": "", "max_running_requests": "300", "chunked_prefill_size": "",
        "max_prefill_tokens": "", "speculative": "NEXTN", "spec_steps": "3", "accept_length": "3.78",
        "read": "the row's notes (PR #27353): --tp-size 4 --dp-size 2 --enable-dp-attention "
        "--max-running-requests 300, NEXTN 3 steps, deepep auto (experts over the 4 ranks), accept length "
        "3.78; mem_fraction_static not in the excerpt read (SGLang's default)",
    },
}  # fmt: skip


def flag(command: str, name: str) -> str:
    """The value of --name in a launch command ("" when absent)."""
    match = re.search(rf"--{name}[ =](\S+)", command)
    return match.group(1) if match else ""


def side(command: str) -> dict[str, str]:
    """SIDE_FIELDS of one launch command."""
    return {
        "tp_size": flag(command, "tp-size") or flag(command, "tp"),
        "dp_size": flag(command, "dp-size") or flag(command, "dp") or "1",
        "dp_attention": "1" if "--enable-dp-attention" in command else "0",
        "expert_parallel": "1" if re.search(r"--moe-a2a-backend \S+|--ep(-size)? \S+", command) else "0",
        "mem_fraction_static": flag(command, "mem-fraction-static"),
        "max_running_requests": flag(command, "max-running-requests"),
        "chunked_prefill_size": flag(command, "chunked-prefill-size"),
        "max_prefill_tokens": flag(command, "max-prefill-tokens"),
    }


def launch_commands(text: str) -> list[str]:
    """Every `sglang.launch_server` command of a section, its continuation lines joined."""
    joined = re.sub(r"\\\s*\n", " ", text)
    return [line for line in joined.splitlines() if "sglang.launch_server" in line]


def sections(doc: str) -> tuple[list[tuple[int, str, str]], dict[str, str]]:
    """([(line, title, text)] of every configuration section, anchor -> title)."""
    lines = doc.splitlines()
    found: list[tuple[int, str, str]] = []
    anchors: dict[str, str] = {}
    pending: str | None = None
    for number, line in enumerate(lines, start=1):
        anchor = ANCHOR.search(line)
        if anchor and found and number - found[-1][0] <= ANCHOR_IN_HEADER_LINES:
            anchors[anchor.group(1)] = found[-1][1]  # an anchor just under a header names that section
        elif anchor:
            pending = anchor.group(1)
        if SECTION.match(line):
            found.append((number, line[4:], ""))
            if pending:
                anchors[pending] = line[4:]
                pending = None
        elif found:
            number0, title, text = found[-1]
            found[-1] = (number0, title, text + line + "\n")
    return found, anchors


def output_rates(text: str) -> list[float]:
    """A section's output tok/s as printed ("Output token throughput") and as its totals give it (prompts x
    output length / duration: two sections print the input rate under the output label, and the corpus was
    corrected to the totals' figure, ascend-serving.csv lines 162 and 164)."""
    rates = [float(m.group(1)) for m in THROUGHPUT.finditer(text)]
    prompts, length, duration = NUM_PROMPTS.search(text), OUTPUT_LEN.search(text), DURATION.search(text)
    if prompts and length and duration:
        rates.append(round(int(prompts.group(1)) * int(length.group(1)) / float(duration.group(1)), 2))
    return rates


def section_row(number: int, title: str, text: str, deploy: tuple[str, str]) -> dict[str, str]:
    """The CSV fields of one section (without its corpus row)."""
    deploy_title, deploy_text = deploy
    match = SECTION.match(f"### {deploy_title}")
    assert match is not None
    commands = launch_commands(deploy_text)
    mixed = match.group(4) == "Mixed"
    main = commands[0] if mixed else next(c for c in commands if "disaggregation-mode decode" in c)
    out = {"section": title, "doc_line": str(number), "mode": "mixed" if mixed else "pd", **side(main)}
    out |= {
        "speculative": flag(main, "speculative-algorithm"),
        "spec_steps": flag(main, "speculative-num-steps"),
    }
    accept = ACCEPT.search(text)
    out["accept_length"] = accept.group(1) if accept else ""
    if not mixed:
        prefill = next(c for c in commands if "disaggregation-mode prefill" in c)
        out |= {f"p_{key}": value for key, value in side(prefill).items()}
        counts = [m.group(1) for m in ROUTER_SIDE.finditer(deploy_text)]
        out |= {
            "prefill_instances": str(counts.count("prefill")),
            "decode_instances": str(counts.count("decode")),
        }
    out["read"] = f"doc line {number}; deployment of '{deploy_title}'" if deploy_title != title else ""
    return out


def rows(doc: str, corpus: list[dict[str, str]]) -> list[dict[str, str]]:
    """One CSV row per sglang corpus row matched to a section (MANUAL for the rest)."""
    found, anchors = sections(doc)
    by_title = {title: text for _, title, text in found}
    out: list[dict[str, str]] = []
    for index, row in enumerate(corpus, start=2):
        if row["engine"] != "sglang":
            continue
        key = {"row": str(index), "model": row["model"], "output_tokens_per_s": row["output_tokens_per_s"]}
        if index in MANUAL:
            out.append({**key, "section": "", "doc_line": "", **MANUAL[index]})
            continue
        published = float(row["output_tokens_per_s"])
        for number, title, text in found:
            if any(abs(figure - published) < MATCH_TOKENS_PER_S for figure in output_rates(text)):
                redirect = REDIRECT.search(text)
                target = anchors[redirect.group(1)] if redirect else title
                deploy = (target, by_title[target])
                out.append({**key, **section_row(number, title, text, deploy)})
                break
        else:
            raise SystemExit(f"corpus line {index}: no section of the doc has output tok/s {published}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doc", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    with CORPUS.open(encoding="utf-8") as handle:
        corpus = list(csv.DictReader(handle))
    table = rows(args.doc.read_text(encoding="utf-8"), corpus)
    with args.out.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(COLUMNS), lineterminator="\n", restval="")
        writer.writeheader()
        writer.writerows(table)
    print(f"{len(table)} rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
