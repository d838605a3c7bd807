"""The nondeterminism kind: f, or its gradient, changing between calls at the same point."""
