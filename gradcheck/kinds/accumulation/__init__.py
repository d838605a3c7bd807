"""The accumulation kind: f's gradient accumulated over K micro-batches of its batch against the
whole batch's (--accumulate K)."""
