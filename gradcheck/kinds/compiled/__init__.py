"""The compiled kind: the VJP eagerly, under tf.function and under XLA (jit_compile=True)
must agree."""
