"""Checks: each parity check once, its tolerances, report rows and mask diagrams."""
