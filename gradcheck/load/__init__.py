"""Loading targets, inputs and configuration; no TensorFlow."""
