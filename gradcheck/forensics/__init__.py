"""Where and why: cut gradient paths, culprit ops, the origin of a non-finite value, TensorFlow's
own faulty gradients and XLA's divergences, each at a line of the user's code. Imports nothing
here."""
