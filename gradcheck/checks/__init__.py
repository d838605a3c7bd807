"""The gradient checks, each a function of the bound program returning its results."""
