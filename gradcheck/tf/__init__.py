"""The only package that touches TensorFlow: runtime, the bound program, instrumentation."""
