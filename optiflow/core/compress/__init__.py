"""The compress job (seed 000): :mod:`.spec` (CompressSpec), :mod:`.report` (OptimizationReport,
Modification, RejectedModification), :mod:`.workflow` (CompressWorkflow, its state) and
:mod:`.rules` (the rule-based compressor)."""
