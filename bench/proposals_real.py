"""SmolLM2's proposals for every mutable section of ``examples/review-sentiment`` (issue 23), with the
``extractive`` and the ``llm`` strategy (faithfulness check on), through ``propose_edit`` as a worker
runs it; prints each proposal, its faithfulness or refusal. No gate decision.
``python -m bench.proposals_real``; needs ``make local-model``. Results: ``bench/real_proposals.md``."""

from __future__ import annotations

import time
from pathlib import Path

from bench.real import job_spec
from optiflow.core.compress.spec import CompressSpec
from optiflow.distributed.work import propose_edit
from optiflow.jobfile import load_job
from optiflow.llm.compress import ProposalRefused
from optiflow.llm.local_model import LocalModelServer, free_port

SECTIONS = ("background", "task", "output", "edge_cases", "examples", "tone")


def main() -> None:
    t0 = time.time()
    with LocalModelServer(port=free_port(), log=Path("/tmp/optiflow-proposals-llama.log")) as server:
        full = load_job("examples/review-sentiment/job.yaml")
        assert isinstance(full, CompressSpec)
        for kind in ("extractive", "llm"):
            spec = job_spec(server.model, server.api_base, full.dataset.split("train"), None, kind)
            for sec in SECTIONS:
                try:
                    e = propose_edit(spec, (sec,))
                    f = e.faithfulness.line() if e.faithfulness else "-"
                    print(
                        f"[{kind}] {sec}: {e.original_tokens}->{e.proposed_tokens} {f}\n    {e.proposed_body!r}"
                    )
                except ProposalRefused as exc:
                    print(
                        f"[{kind}] {sec}: REFUSED after {exc.attempts}: {exc.reason}\n    last: {exc.body!r}"
                    )
                print(f"    t={time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
