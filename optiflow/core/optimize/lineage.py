"""The optimization graph (seed 001 §6.8): candidates as nodes, ``parent -> child`` edges."""

from __future__ import annotations

from collections.abc import Iterable

from optiflow.core.base import Frozen
from optiflow.core.optimize.trial import TrialResult


class LineageNode(Frozen):
    candidate_id: str
    iteration: int
    status: str
    score: float | None
    accepted: bool
    config_hash: str
    rationale: str | None = None


class LineageEdge(Frozen):
    source: str
    target: str


class LineageGraph(Frozen):
    nodes: tuple[LineageNode, ...] = ()
    edges: tuple[LineageEdge, ...] = ()

    def parents(self, candidate_id: str) -> tuple[str, ...]:
        return tuple(e.source for e in self.edges if e.target == candidate_id)

    def children(self, candidate_id: str) -> tuple[str, ...]:
        return tuple(e.target for e in self.edges if e.source == candidate_id)

    def ancestry(self, candidate_id: str) -> tuple[str, ...]:
        """``candidate_id`` and its first-parent chain up to a root, root last."""
        chain = [candidate_id]
        seen = {candidate_id}
        while True:
            parents = self.parents(chain[-1])
            if not parents or parents[0] in seen:
                return tuple(chain)
            chain.append(parents[0])
            seen.add(parents[0])


def lineage(trials: Iterable[TrialResult]) -> LineageGraph:
    """The graph of every evaluated candidate; edges only to known candidates."""
    ts = list(trials)
    known = {t.candidate_id for t in ts}
    nodes = tuple(
        LineageNode(
            candidate_id=t.candidate_id,
            iteration=t.iteration,
            status=t.status,
            score=t.acceptance_score,
            accepted=t.accepted,
            config_hash=t.config_hash,
            rationale=t.rationale,
        )
        for t in ts
    )
    edges = tuple(
        LineageEdge(source=p, target=t.candidate_id) for t in ts for p in t.parent_candidate_ids if p in known
    )
    return LineageGraph(nodes=nodes, edges=edges)


__all__ = ["LineageEdge", "LineageGraph", "LineageNode", "lineage"]
