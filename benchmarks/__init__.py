"""Benchmarks: `python -m benchmarks` measures the runtime against its peers and writes
docs/BENCHMARKS.md (see `benchmarks.cli`).

Layout (`cli` imports the others, only `__main__` imports `cli`, no import cycles):
- `cli`: the flags, the run (figures in a fixed order) and where the results go;
- `figures` (figures 1-5) and `model_ops` (figure 6): the measurements, as plain dicts;
- `targets`: the documented targets judged on a run's measurements;
- `report` (Markdown, summary) and `plot` (PNG): the outputs, functions of the record alone;
- `workloads` (ours and each peer), `memory` (tape bytes), `harness` (timing, threads,
  environment, table formatting): the shared parts;
- `gpu`: `python -m benchmarks.gpu`, the CUDA backend against PyTorch CUDA.
"""
