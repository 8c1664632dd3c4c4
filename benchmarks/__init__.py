"""Benchmarks: `python -m benchmarks` measures the runtime against its peers and writes
docs/BENCHMARKS.md (see `benchmarks.cli`)."""
