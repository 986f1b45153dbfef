"""Re-run the examples listed in issue 14 one by one and print a Markdown table of what kvplan does now.

    .venv/bin/python -m tests.hostile.issue_examples            # all examples, ~1 min (two hangs time out)

Each runs as a subprocess under the bounds of tests/hostile/promise.py (20 s, 3 GiB address space).
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from tests.hostile import corpus
from tests.hostile.promise import (
    BASE,
    FIRST_K_DENSE,
    HOSTILE_DIR,
    MINDIE,
    Run,
    broken_promises,
    exception_line,
    run_kvplan,
)

H = HOSTILE_DIR


def examples(large: dict[str, Path]) -> list[tuple[str, list[str]]]:
    """(root cause, argv) for every example the issue names."""
    cal = ["calibrate", "--card", "ascend-950pr", "--out", "fit.yaml", "--from-bench"]
    return [
        ("1", [*BASE, "--memory-gib", "inf"]),
        ("1", [*BASE, "--memory-gib", "1e309"]),
        ("1", [*BASE, "--memory-gib", "nan"]),
        ("1", [*BASE, "--memory-gib", "1e-320"]),
        ("1", [*BASE[:2], "--ctx", "9" * 400]),
        ("1", [*BASE, "--bandwidth-gbps", "1e-320", "--json"]),
        ("1", [*BASE, "--card", str(H / "profiles/peak-nan.yaml"), "--json"]),
        ("1", [*MINDIE, "--card", str(H / "profiles/peak-nan.yaml")]),
        ("2", [*BASE, "--prompt-tokens", "999999999999"]),
        ("2", ["sweep", "-m", "qwen3-8b", "--batch", "1-10000000"]),
        ("2", ["validate", str(large["bench-1e5-rows.csv"])]),
        ("3", [*MINDIE, "--base", "/dev/zero"]),
        ("3", ["validate", "/dev/zero"]),
        ("3", [*MINDIE, "--from-log", "/dev/zero"]),
        ("4", [*MINDIE, "--max-prefill-tokens", "0"]),
        ("4", ["vllm", "--model", "qwen3-8b", "--mtp", "-1"]),
        ("4", ["--model", str(H / "modelcards/non-utf8.yaml")]),
        ("4", [*BASE, "--card", str(H / "profiles/non-utf8.yaml")]),
        ("4", ["validate", str(H / "bench/non-utf8.csv")]),
        ("4", ["models", "import", str(large["hf-deep-1e5.json"])]),
        ("4", [*MINDIE, "--base", str(large["mindie-base-deep-1e5.json"])]),
        ("4", ["models", "import", str(H / "hfconfigs/heads-zero.json")]),
        ("4", ["models", "import", str(H / "hfconfigs/layers-1e9.json")]),
        ("4", [*MINDIE, "--base", str(H / "mindie-base/plugin-params-number.json")]),
        ("4", ["sweep", "-m", "qwen3-8b", "--batch", ""]),
        ("4", ["sweep", "-m", "qwen3-8b", "--ctx", ""]),
        ("4", ["--model", "x" * 300 + ".yaml"]),
        ("5", FIRST_K_DENSE),
        ("5", ["mindie", *FIRST_K_DENSE, "--weights-path", "/w", "--json"]),
        ("5", ["models", "import", str(H / "hfconfigs/deepseek-first-k-dense-1000.json")]),
        ("5", ["validate", str(H / "bench/nan-times.csv"), "--card", "ascend-950pr"]),
        ("5", [*cal, str(H / "bench/nan-times.csv")]),
        ("6", [*MINDIE, "--weights-path", "", "--json"]),
        ("6", [*BASE, "--prompt-tokens", ""]),
        ("6", ["serve", "-m", "qwen3-8b", "--concurrency", "100001"]),
        ("6", ["serve", "-m", "qwen3-8b", "--tpot-ms", "0"]),
        ("7", [*BASE, "--tp", "abc"]),
        ("7", [*BASE, "--batch", "1.5"]),
        ("7", ["validate", "no-such.csv"]),
        ("7", ["--model", "./no-such-card.yaml"]),
    ]


def outcome(run: Run) -> str:
    if run.returncode is None:
        return "killed at 20 s (hang)"
    problems = broken_promises(run)
    if "Traceback" in run.stderr:
        return f"exit {run.returncode}, traceback `{exception_line(run.stderr)[:90]}`"
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    first = (lines[0] if lines else "").replace("|", "/")[:110]
    text = f"exit {run.returncode}, {len(lines)} stderr line(s)" + (f": `{first}`" if first else "")
    if problems:
        text += " — BROKEN: " + "; ".join(problems)[:120]
    return text


def shorten(args: list[str]) -> str:
    text = " ".join(a if a and " " not in a else repr(a) for a in args)
    text = (
        text.replace(str(H) + "/", "hostile/").replace("9" * 400, "<400 digits>").replace("x" * 300, "x*300")
    )
    return re.sub(r"/tmp/tmp\w+/large/", "$TMP/", text)[:150]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        large = corpus.write_large(Path(tmp) / "large")
        print("| cause | command | current behaviour | s |\n|---|---|---|---|")
        for cause, args in examples(large):
            work = Path(tempfile.mkdtemp(dir=tmp))
            start = time.monotonic()
            run = run_kvplan(args, cwd=work)
            written = " (wrote fit.yaml)" if (work / "fit.yaml").exists() else ""
            print(
                f"| {cause} | `{shorten(args)}` | {outcome(run)}{written} | {time.monotonic() - start:.1f} |"
            )


if __name__ == "__main__":
    main()
