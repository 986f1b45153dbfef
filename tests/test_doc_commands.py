"""The config commands the README and docs show (`kvplan mindie`, `kvplan vllm`) run as printed: a user's
first copy-paste must not end in a refusal. README's `kvplan vllm ... --dtype fp8 --tp 2` lacked the
--weights-path that kvplan asks for when it knows no fp8 checkpoint of the model (exit 2)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/mindie.md", "docs/layouts.md")
BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.S)
CONFIG_COMMANDS = ("kvplan mindie", "kvplan vllm")
runner = CliRunner()


def shown_commands(doc: str) -> list[str]:
    """Each `kvplan mindie` / `kvplan vllm` command of the doc's bash blocks, continuation lines joined."""
    found = []
    for block in BASH_BLOCK.findall((ROOT / doc).read_text(encoding="utf-8")):
        for line in block.replace("\\\n", " ").splitlines():
            if line.startswith(CONFIG_COMMANDS):
                found.append(line.split("  #")[0].strip())
    return found


COMMANDS = [(doc, command) for doc in DOCS for command in shown_commands(doc)]


def test_the_docs_show_config_commands() -> None:
    assert sum(doc == "README.md" for doc, _ in COMMANDS) >= 2
    assert len(COMMANDS) >= 5


@pytest.mark.parametrize(("doc", "command"), COMMANDS)
def test_shown_config_command_runs(
    doc: str, command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # -o config.json lands here
    result = runner.invoke(app, shlex.split(command)[1:])
    assert result.exit_code == 0, (doc, command, result.output[-400:])


def test_readme_serve_example_gives_the_users_it_claims() -> None:
    """README's `kvplan serve ... --tpot-ms 150 --ttft-ms 1000  # ... (N)` line: N is what the search answers
    (it said 25 after the per-request prior and the refit moved the answer to 22)."""
    blocks = BASH_BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    lines = [line for block in blocks for line in block.splitlines()]
    (line,) = [line for line in lines if line.startswith("kvplan serve") and "--tpot-ms" in line]
    command, comment = line.split("  #")
    claimed = re.search(r"\((\d+)\)", comment)
    result = runner.invoke(app, [*shlex.split(command)[1:], "--json"])
    assert result.exit_code == 0, result.output[-300:]
    assert claimed and json.loads(result.output)["slo"]["best"] == int(claimed.group(1))
