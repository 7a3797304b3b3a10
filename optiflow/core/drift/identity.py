"""What makes two measures comparable: the same prompt as rendered, model, dataset and check.

A nightly measure is compared only with a reference of the same (ns, key, tag) whose four digests
all match; one that differs starts a new reference and says which part changed, instead of
comparing unlike things. ``config`` (model, dataset, check) chooses the reference; ``prompt`` tells
whether the accepted prompt is still the one measured.

- prompt: the sections as the tag renders them (the snapshotted overrides applied), their titles
  and frozen marks, and the user template;
- model: the model name, endpoint and params once the tag's stored params are layered on, without
  credentials, and without the simulated provider's own ``sim_*`` knobs: those stand for what a
  provider does behind a model name, so changing them is a drift to find, not a new model;
- dataset: the measured samples (id, input, expected), in order;
- check: the check's spec.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from optiflow.core.base import Frozen
from optiflow.core.measure.spec import MeasureSpec

_SECRET = frozenset({"api_key", "api_secret", "token"})


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Identity(Frozen):
    prompt: str
    model: str
    dataset: str
    check: str

    @property
    def config(self) -> str:
        """The digest that chooses a reference: model, dataset and check."""
        return _digest([self.model, self.dataset, self.check])

    def differences(self, other: Identity) -> list[str]:
        """The parts that differ, named for a sentence ("the prompt", "the model", ...)."""
        names = ("prompt", "model", "dataset", "check")
        return [f"the {n}" for n in names if getattr(self, n) != getattr(other, n)]


def identity(spec: MeasureSpec) -> Identity:
    bodies = {o.path: o.body for o in spec.baseline_overrides}
    prompt = spec.prompt.with_bodies(bodies) if bodies else spec.prompt
    rendered = prompt.model_dump(mode="json", exclude={"description"})
    model = spec.model.with_params(spec.baseline_model_params)
    params = {k: v for k, v in model.params.items() if not k.startswith("sim_") and k not in _SECRET}
    wanted = set(spec.sample_ids())
    samples = [{"id": s.id, "input": s.input, "expected": s.expected} for s in spec.dataset if s.id in wanted]
    return Identity(
        prompt=_digest(rendered),
        model=_digest({"model": model.model, "api_base": model.api_base, "params": params}),
        dataset=_digest(samples),
        check=_digest(spec.check.model_dump(mode="json")),
    )


__all__ = ["Identity", "identity"]
