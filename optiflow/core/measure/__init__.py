"""The measure job: :mod:`.spec` (MeasureSpec), :mod:`.report` (MeasureDocument, the Wilson
interval, percentiles, the ``fails_below`` cron rule) and :mod:`.workflow` (MeasureWorkflow). Its
per-sample outcomes are what the drift check (:mod:`optiflow.core.drift`) compares with the
reference when the job ends."""
