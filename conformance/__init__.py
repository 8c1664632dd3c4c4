"""The conformance suite: Hypothesis strategies for random typed graphs and the properties
that tie `runtime` to `spec`."""

__all__: list[str] = []
