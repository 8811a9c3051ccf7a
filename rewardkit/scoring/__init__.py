"""Offline scoring engine: many records through a reward source, in parallel, with timeouts and resume."""
