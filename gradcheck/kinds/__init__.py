"""One folder per check kind: its check, its TensorFlow part, its judging and its findings,
which say themselves in words (`words`). gradcheck.kinds.registry runs them, one line each.

Nothing is imported here: a report unpickled in the parent process imports a kind's evidence
module alone, never its TensorFlow part.
"""
