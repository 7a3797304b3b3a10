"""The ablation (issue 23) on ``examples/review-sentiment``, driven in-process on the local SmolLM2
server: the compress workflow's baseline and ablation steps only (proposals are the offline rule
compressor's, so no proposal call is paid), evaluated one request at a time; prints each step and
the ablation's line. ``python -m bench.ablation_real [example dir]``; needs ``make local-model``.
Measured 2026-11-26 on a shared 2-core machine: see ``examples/review-sentiment/README.md``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from bench.real import job_spec
from optiflow.core.actions import Fail
from optiflow.core.compress.ablation import summary
from optiflow.core.compress.rules import compress_text
from optiflow.core.compress.spec import CompressSpec
from optiflow.core.compress.workflow import CompressWorkflow
from optiflow.core.step import SectionEdit, Step, StepResults
from optiflow.jobfile import load_job
from optiflow.llm.local_model import LocalModelServer, free_port
from optiflow.llm.tokens import count_tokens
from tests.support.inline import evaluate_step


def main() -> None:
    example = Path(sys.argv[1] if len(sys.argv) > 1 else "examples/review-sentiment")
    t0 = time.time()
    with LocalModelServer(port=free_port(), log=Path("/tmp/optiflow-ablation-llama.log")) as server:
        full = load_job(example / "job.yaml")
        assert isinstance(full, CompressSpec)
        spec = job_spec(server.model, server.api_base, full.dataset.split("train"), None)
        wf = CompressWorkflow(spec, "ablation-real")

        def count(text: str) -> int:
            return count_tokens(text, spec.model.model)

        tr = wf.start(count)
        state, action = tr.state, tr.action
        while isinstance(action, Step) and not action.name.startswith("candidates"):
            evals = evaluate_step(spec, action)
            edits = tuple(
                SectionEdit(
                    path=p,
                    original_hash=spec.prompt.section(p).hash,
                    proposed_body=compress_text(spec.effective_body(p)),
                    original_tokens=count(spec.effective_body(p)),
                    proposed_tokens=count(compress_text(spec.effective_body(p))),
                )
                for p in action.propose
            )
            print(f"step {action.name}: {len(evals)} evaluations, {time.time() - t0:.0f}s", flush=True)
            tr = wf.advance(state, StepResults(step=action, evals=evals, edits=edits))
            state, action = tr.state, tr.action
        print(f"baseline pass rate {state.baseline_pass_rate:.1%}")
        if isinstance(action, Fail):
            print("FAIL:", action.error)
        if state.ablation is not None:
            print(summary(state.ablation), "--", state.ablation.reason)
        print(f"{time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
