"""lab/published/phase_table.py and fit_profiles.py --only: one group refitted, the others' lines kept."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

pytestmark = pytest.mark.lab  # reads the lab's scripts (tests/conftest.py: lab implies slow)

HEADER = [
    "| card | engine | rows | fit | TTFT median abs error (obs.) | TPOT | output tok/s |",
    "|---|---|---|---|---|---|---|",
]


def test_only_one_group_replaces_its_lines_and_keeps_the_others(tmp_path: Path, monkeypatch) -> None:
    from lab.published import phase_table

    old = tmp_path / "phase-table.md"
    old.write_text(
        "# title\n\n" + "\n".join([
            *HEADER,
            "| a-card | mindie | 3 | in sample | 1% (1) | 2% (1) | 3% (1) |", "| | | | LOMO | 9% | 9% | 9% |",
            "| b-card | vllm | 2 | in sample | 4% (1) | 5% (1) | 6% (1) |", "| | | | LOMO | - | - | - |",
        ]) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    monkeypatch.setattr(phase_table, "OUT_TABLE", old)
    new = [*HEADER, "| a-card | mindie | 3 | in sample | 7% (1) | 8% (1) | 9% (1) |",
           "| | | | LOMO | 1% | 1% | 1% |"]  # fmt: skip
    merged = phase_table.merged_table(new, replaced={("a-card", "mindie")})
    assert merged == [*HEADER, *new[2:], "| b-card | vllm | 2 | in sample | 4% (1) | 5% (1) | 6% (1) |",
                      "| | | | LOMO | - | - | - |"]  # fmt: skip


def test_residuals_of_other_groups_survive_a_one_group_write(tmp_path: Path) -> None:
    from lab.published import fit_profiles

    path = tmp_path / "r.csv"
    path.write_text("corpus_row,card,engine,error\n1,a,x,+0.1\n2,b,y,+0.2\n", encoding="utf-8")
    fit_profiles.write_residuals(path, [{"corpus_row": "3", "card": "a", "engine": "x", "error": "-0.3"}],
                                 replaced={("a", "x")})  # fmt: skip
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert [(r["corpus_row"], r["error"]) for r in rows] == [("3", "-0.3"), ("2", "+0.2")]


def test_an_unknown_group_exits_with_one_line_naming_the_groups() -> None:
    from lab.published import fit_profiles

    with pytest.raises(SystemExit) as exc:
        fit_profiles.selected({("ascend-910b3", "vllm"): []}, "ascend-910x.vllm")
    assert "no such group" in str(exc.value) and "ascend-910b3.vllm" in str(exc.value)
    one = {("ascend-910b3", "vllm"): []}
    assert fit_profiles.selected(one, "ascend-910b3.vllm") == one


def test_phase_priors_patches_the_fit_and_puts_it_back() -> None:
    """phase_priors.configure: a variant's prior replaces the term's centre and width; "+grouped" adds the
    grouped-GEMM fraction to the fitted terms; the shipped variant restores every patched name."""
    import math

    from lab.published import phase_priors
    from planner.fit import solver
    from planner.perf import fitted as perf_fitted
    from planner.perf import fitted_params as fp

    base_hold = solver.registry.device_launched_collectives
    try:
        phase_priors.configure("+grouped, collectives free")
        assert fp.PARAM_NAMES[-1] == "grouped_weight_read_bandwidth_fraction"
        assert perf_fitted.FIT_PARAMS is fp.FIT_PARAMS and len(fp.LOWER) == len(fp.FIT_PARAMS)
        assert solver.registry.device_launched_collectives(["mindie"]) is False
        phase_priors.configure("step 20 ms x/2")
        from planner import catalog

        centre, sigma = solver.fitted_params.prior(catalog.load_card("ascend-910b3").default_coefficients,
                                                   measured=False)  # fmt: skip
        index = fp.PARAM_NAMES.index("step_overhead_us")
        # the variant's centre and one-sigma factor: log(20 000 us) and log(2)
        assert centre[index] == pytest.approx(math.log(20_000.0))
        assert sigma[index] == pytest.approx(math.log(2))
    finally:
        phase_priors.configure("shipped priors")
    assert fp.prior is phase_priors.BASE_PRIOR
    assert fp.FIT_PARAMS is phase_priors.BASE_PARAMS and perf_fitted.FIT_PARAMS is phase_priors.BASE_PARAMS
    assert solver.registry.device_launched_collectives is base_hold
    assert tuple(p.name for p in phase_priors.BASE_PARAMS) == fp.PARAM_NAMES
