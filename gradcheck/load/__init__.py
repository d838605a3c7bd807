"""Loading inputs and configuration, and the paths and source locations they name; no
TensorFlow (the TARGET itself is loaded by gradcheck.targets)."""
