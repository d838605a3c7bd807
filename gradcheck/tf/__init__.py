"""The TensorFlow part of one check kind each (against, compiled, precision, strategy,
multiworker, accumulation), on the engine (gradcheck.engine); these, the engine, forensics,
targets' keras and saved_models and training's gate, watched_fit, step_state and
keras_snapshot are the only modules that import TensorFlow."""
