"""The VJP kind: f's gradients against the Jacobian the sweep judged, one input at a time."""
