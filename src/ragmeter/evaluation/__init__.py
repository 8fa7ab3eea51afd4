"""Evaluation drivers: the only place per-item scores are averaged into reports."""
