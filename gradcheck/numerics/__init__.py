"""Finite differences, tolerances and comparisons: NumPy only."""
