"""Pure renderers: a Report in, text or a rich renderable out."""
