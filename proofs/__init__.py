"""proofs package (see README)."""

__all__: list[str] = []
