"""Everything that knows Celery: app factory, thin tasks, the driver, eval cache and job signals (scratch)."""
