"""Runnable examples (`python -m runtime.examples.mlp`); data files ship with the package."""
