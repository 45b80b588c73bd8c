"""Pieces of ``scripts/bench.py``: shared helpers, and the scheduler and replay benchmarks."""
