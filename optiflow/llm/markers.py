"""The first line of each request optiflow itself sends to a model (a leaf module).

The simulated model recognizes optiflow's own requests by these markers, and the modules that
build the requests (compress, judge, rewrite) start their system prompts with them; both import
them from here, so neither imports the other.
"""

from __future__ import annotations

COMPRESS_MARKER = "[optiflow:compress-section]"
"""First line of the compression system prompt."""

EXTRACT_MARKER = "[optiflow:extract-section]"
"""First line of the extractive compression system prompt."""

JUDGE_MARKER = "[optiflow:judge]"
"""First line of the judge system prompt."""

SAME_MARKER = "[optiflow:same-instructions]"
"""First line of the faithfulness judge's system prompt (do two texts impose the same instructions?)."""

REWRITE_MARKER = "[optiflow:rewrite-section]"
"""First line of the rewrite system prompt."""

__all__ = ["COMPRESS_MARKER", "EXTRACT_MARKER", "JUDGE_MARKER", "REWRITE_MARKER", "SAME_MARKER"]
