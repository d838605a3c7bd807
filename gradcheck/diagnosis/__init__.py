"""Where and why: per-custom_gradient verdicts, graph breaks, attribution."""
