"""The health kind: each trainable weight's gradient over the last steps of a training run
(recorded by gradcheck.Watch with health=True), vanishing, exploding or dead."""
