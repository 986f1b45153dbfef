"""How the draft-model rows' predictions move with the acceptance rate they do not publish (issue 23).

    PYTHONPATH=. python lab/published/draft_sensitivity.py [--rates 0.3 0.5 0.7]

The corpus's eagle3 / dflash rows (predict.draft_method) state no acceptance, so predict.py gives them the
default per-draft acceptance. This predicts each of them again, with the shipped fitted profiles and the
same code path as predict.py (planner/fit/serving_rows.py), at vLLM acceptance rates R (accepted / drafted:
tokens per step 1 + k x R) and with the drafts ignored (plain decode), and prints the median error and
each row's error (predicted / published - 1).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys

from lab.published import predict
from planner import catalog
from planner.errors import KvplanError
from planner.fit import serving_rows
from planner.importers.benchpoints import parse_serving_row
from planner.perf.mtp import chained_acceptance


def row_error(index: int, row: dict[str, str], *, rate: float | None) -> float:
    """predicted / published - 1 at acceptance rate `rate` (None: no speculation), as predict.predict_row."""
    bench = predict.bench_row(row)
    drafts = int(bench["mtp"])
    if rate is None:
        bench |= {"mtp": "0", "speculative_method": ""}
    else:
        bench |= {"mtp_acceptance": f"{chained_acceptance(drafts, accepted_share=rate):.6f}"}
    hardware = catalog.resolve_card(row["card"], engine=bench["engine"])
    try:
        point = parse_serving_row(bench, where=f"{predict.CORPUS.name}:{index}")
        return serving_rows.serving_errors([point], hardware=hardware)[0]
    except KvplanError as exc:  # as predict.predict_row: a row that ran gets the raised memory share
        if "does not fit" not in str(exc):
            raise
        bench |= {"memory_fraction": f"{predict.RAISED_MEMORY_FRACTION:g}"}
        point = parse_serving_row(bench, where=f"{predict.CORPUS.name}:{index}")
        return serving_rows.serving_errors([point], hardware=hardware)[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    args = parser.parse_args(argv)
    with predict.CORPUS.open(encoding="utf-8") as handle:
        corpus = list(csv.DictReader(handle))
    rows = [
        (i, row)
        for i, row in enumerate(corpus, start=2)
        if predict.draft_method(row) and predict._skip_reason(row) is None
    ]
    print(f"{len(rows)} draft-model rows: lines {', '.join(str(i) for i, _ in rows)}")
    for rate in [None, *args.rates]:
        errors = [row_error(i, row, rate=rate) for i, row in rows]
        label = "no speculation" if rate is None else f"acceptance rate {rate:g}"
        per_row = " ".join(f"{i}:{e:+.2f}" for (i, _), e in zip(rows, errors, strict=True))
        print(f"{label}: median {statistics.median(errors):+.1%}  rows {per_row}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
