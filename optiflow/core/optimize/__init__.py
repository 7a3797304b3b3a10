"""The optimize job (seeds 001-004): optimizer framework, optimizers, scoring, termination, history.

Modules, one concept each: :mod:`.configuration` (treatment factor, canonical config hash),
:mod:`.protocol` (Optimizer, RunContext, OptimizerState, CandidateProposal, StopDecision),
:mod:`.trial` and :mod:`.history` (TrialResult, TrialHistory, iterations), :mod:`.validation`
(rejections with reason codes), :mod:`.lineage`, :mod:`.scoring`, :mod:`.termination`,
:mod:`.acceptance` (Mann-Whitney U), the optimizers (:mod:`.rewrite`, :mod:`.structured` with
:mod:`.params`, :mod:`.operators` and :mod:`.failures`, :mod:`.search`), :mod:`.spec`,
:mod:`.state`, :mod:`.workflow`, and the outputs (:mod:`.report`, :mod:`.output`,
:mod:`.document`, :mod:`.replay`).
"""
