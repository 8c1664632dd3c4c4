"""Hypothesis profiles, chosen by the TORCHLEAN_PROFILE environment variable.

- `ci` (default): derandomised and bounded, so CI runs are reproducible and fast.
- `dev`: random, moderate.
- `thorough`: long campaigns (opt-in).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["PROFILES", "load_profile"]

_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
PROFILES = {
    "ci": settings(max_examples=40, derandomize=True, print_blob=True, **_COMMON),
    "dev": settings(max_examples=150, print_blob=True, **_COMMON),
    "thorough": settings(max_examples=2000, print_blob=True, **_COMMON),
}
for _name, _s in PROFILES.items():
    settings.register_profile(_name, _s)


def load_profile(name: str | None = None) -> str:
    name = name or os.environ.get("TORCHLEAN_PROFILE", "ci")
    if name not in PROFILES:
        raise ValueError(f"unknown TORCHLEAN_PROFILE {name!r}; choose one of {sorted(PROFILES)}")
    settings.load_profile(name)
    return name
