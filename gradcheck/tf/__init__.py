"""The engine's TensorFlow (with training's gate, watched_fit, step_state and keras_snapshot,
the only modules that import it): runtime, the bound program, instrumentation."""
