"""Numerics: metrics, the token rule, gates and overflow of the low-precision profiles; CPU kernel sets."""
