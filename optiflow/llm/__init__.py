"""The litellm seam. Importing this package does not import litellm; the first model call does."""
