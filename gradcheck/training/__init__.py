"""Training watched: gradcheck.Watch, the gate around a step's update, the snapshot it writes
and `gradcheck replay`'s diagnosis of it (TensorFlow only in gate, watched_fit, step_state and
keras_snapshot, imported lazily)."""
