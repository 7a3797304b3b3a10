"""Overrides stores. See :mod:`optiflow.stores.base` for the Protocol."""
