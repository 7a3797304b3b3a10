"""Ways in: the Python client, the CLI, and console reporting."""
