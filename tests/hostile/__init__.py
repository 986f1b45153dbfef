"""Hostile-input corpus (issue 14) and the promise every CLI run must keep; see README.md here."""
