"""Exception hierarchy.

Messages follow `<subject>: <what is wrong> (got <value>, expected <constraint>)[; hint]`.

The CLI maps `exit_code` to the process exit status; anything that is not a KvplanError is a bug.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class KvplanError(Exception):
    """Base of every expected error; `exit_code` is what the CLI exits with."""

    exit_code = 2


class PlanInputError(KvplanError):
    """Inputs that are malformed or inconsistent with each other (a bad flag, a dtype the card lacks)."""


class DataFileError(KvplanError):
    """A model card, hardware profile or other data file that fails validation; names file and field."""


class UnknownIdError(KvplanError):
    """An id that is not in the catalogue; the message suggests the closest ids."""

    def __init__(self, kind: str, wanted: str, known: Iterable[str], where: str) -> None:
        known_list = sorted(known)
        close = difflib.get_close_matches(wanted, known_list, n=3, cutoff=0.5)
        if not close and wanted.strip():  # an empty id is "in" every id: no suggestion for it
            close = [k for k in known_list if wanted.lower() in k or k in wanted.lower()][:3]
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        super().__init__(
            f"unknown {kind} '{wanted}'{hint} (ids are file names in {where}; "
            f"`kvplan {'models' if kind == 'model card' else 'cards'}` lists them)"
        )
        self.suggestions = close


class DoesNotFitError(KvplanError):
    """The model and context do not fit the device's memory: an expected result, not a bug."""

    exit_code = 3


class OutputExistsError(KvplanError):
    """kvplan refuses to overwrite a user's file without --force."""


class MissingDependencyError(KvplanError):
    """An optional dependency (torch, torch_npu) is needed for this command but absent."""


class SloNotMetError(DoesNotFitError):
    """No configuration (batch, users, rate, layout) meets the latency targets: exit 3, the same code as a
    model that does not fit, from every command that searches (plan, serve, simulate --search, layout)."""


class PoorFitError(KvplanError):
    """A --from-bench fit that misses its own rows by more than planner/perf/fitted.py's POOR_FIT_FRACTION:
    exit 4, nothing written (its profile would predict nothing right); --accept-poor-fit writes it anyway."""

    exit_code = 4
