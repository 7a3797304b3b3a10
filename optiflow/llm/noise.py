"""The simulated model's noise mode: a pass probability per sample, independent runs.

``sim_pass_dist`` names a distribution of per-sample pass probabilities: ``beta(a,b)``,
``fixed(p)``, or a mixture of them with weights, ``0.9*beta(3.3,3.3) + 0.1*fixed(1)``. Sample
``s`` gets ``p_s`` drawn from it once, seeded by ``(sim_seed, s)`` (:func:`pass_probability`). A
call whose needed instruction is present answers right with probability ``p_s``, decided by a
draw seeded by ``(sim_seed, the prompt's digest, s, run)`` (:func:`passes`): so two experiments
whose prompts differ (even by a word that changes nothing) draw independently, like a sampled
model, and the same prompt repeats its answer for the same run, like the eval cache. A removed
instruction fails its samples in every run, so an edit's true drop is exactly
``sum(p_s for the samples needing what it removed) / n``.

These pure functions are what the provider calls; a benchmark can call them directly to draw the
same outcomes without a model call.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from functools import lru_cache

SMOLLM2_LIKE = "beta(3.3,3.3)"
"""Resembles SmolLM2-135M at temperature 0.7 on the review set (bench/real_results.md): mean 0.5,
per-sample sd 0.18 (fitted to the 9-run pass counts, whose spread is 0.24 with the binomial noise);
in 9 runs about 2.6 of 48 samples are expected never to flip (measured: 2 of 48)."""

_COMPONENT = re.compile(
    r"^\s*(?:(?P<w>\d+(?:\.\d+)?)\s*\*\s*)?(?P<kind>beta|fixed)\s*\(\s*(?P<args>[^)]*)\)\s*$", re.I
)


def unit(*parts: object) -> float:
    """A deterministic number in [0, 1) from the parts."""
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(frozen=True, slots=True)
class Component:
    weight: float
    kind: str  # "beta" or "fixed"
    params: tuple[float, ...]


@lru_cache(maxsize=64)
def parse_pass_dist(text: str) -> tuple[Component, ...]:
    """The mixture ``text`` names; ValueError naming the part that is wrong."""
    parts = [p for p in text.split("+") if p.strip()]
    if not parts:
        raise ValueError("sim_pass_dist is empty")
    out = []
    for part in parts:
        m = _COMPONENT.match(part)
        if m is None:
            raise ValueError(f"sim_pass_dist: {part.strip()!r} is not beta(a,b), fixed(p) or w*one of them")
        kind = m.group("kind").lower()
        try:
            params = tuple(float(x) for x in m.group("args").split(","))
        except ValueError:
            raise ValueError(
                f"sim_pass_dist: {part.strip()!r} has a parameter that is not a number"
            ) from None
        if kind == "beta" and (len(params) != 2 or min(params) <= 0):
            raise ValueError(f"sim_pass_dist: {part.strip()!r} needs two positive shapes")
        if kind == "fixed" and (len(params) != 1 or not 0 <= params[0] <= 1):
            raise ValueError(f"sim_pass_dist: {part.strip()!r} needs one probability in [0, 1]")
        out.append(Component(float(m.group("w") or 1.0), kind, params))
    total = sum(c.weight for c in out)
    if total <= 0:
        raise ValueError("sim_pass_dist: the weights sum to 0")
    return tuple(Component(c.weight / total, c.kind, c.params) for c in out)


def pass_probability(dist: str, seed: object, sample_id: object) -> float:
    """Sample ``sample_id``'s pass probability under ``dist`` (seeded, stable)."""
    rng = random.Random(hashlib.sha256(f"{seed}\x1fpass-prob\x1f{sample_id}".encode()).digest())
    pick, acc = rng.random(), 0.0
    components = parse_pass_dist(dist)
    chosen = components[-1]
    for c in components:
        acc += c.weight
        if pick < acc:
            chosen = c
            break
    if chosen.kind == "fixed":
        return chosen.params[0]
    return rng.betavariate(chosen.params[0], chosen.params[1])


def prompt_digest(*texts: str) -> str:
    """What identifies an experiment's prompt for :func:`passes`."""
    return hashlib.blake2b("\x1e".join(texts).encode(), digest_size=8).hexdigest()


def passes(probability: float, seed: object, prompt: str, sample_id: object, run: object) -> bool:
    """Whether this run of this sample under this prompt answers right (needed instruction present)."""
    return unit(seed, "pass", prompt, sample_id, run) < probability


__all__ = [
    "SMOLLM2_LIKE",
    "Component",
    "parse_pass_dist",
    "pass_probability",
    "passes",
    "prompt_digest",
    "unit",
]
