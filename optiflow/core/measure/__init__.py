"""The measure job: :mod:`.spec` (MeasureSpec), :mod:`.report` (MeasureDocument, the Wilson
interval, percentiles, the ``fails_below`` cron rule) and :mod:`.workflow` (MeasureWorkflow)."""
