"""Pure domain logic: models, evaluation arithmetic and workflows.

Nothing in this package performs I/O or imports celery, redis, sqlalchemy or litellm; a test
enforces it. Only the standard library and pydantic are allowed.
"""
