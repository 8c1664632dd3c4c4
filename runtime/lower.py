# INTERIM SHIM (layout merge): delete after imports are rewritten
"""Interim: runtime.lower moved to runtime.engine.lower (`compile` is `compile_graph`)."""

from .engine.lower import Compiled, compile_graph, lower

compile = compile_graph

__all__ = ["Compiled", "compile", "compile_graph", "lower"]
