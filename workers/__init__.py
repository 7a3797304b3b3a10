"""Process entrypoints: ``celery -A workers.app worker|flower``."""
