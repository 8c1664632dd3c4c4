"""Benchmarks: `python -m benchmarks` measures the runtime and reports ratios (see README)."""
