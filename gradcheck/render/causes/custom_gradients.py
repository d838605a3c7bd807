"""Kept for gradcheck.render.sentences.gradients until it is converted: a raised gradient's
clauses now live with the custom gradients' facts (gradcheck.evidence.causes)."""

from __future__ import annotations

from gradcheck.evidence.causes import raised_clause, raised_without_fix

__all__ = ["raised_clause", "raised_without_fix"]
