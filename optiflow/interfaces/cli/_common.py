"""Helpers shared by CLI commands: settings, store, prompt references, key=value params."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click

from optiflow.errors import ValidationError

if TYPE_CHECKING:
    from optiflow.settings import Settings
    from optiflow.stores.base import OverridesStore


def settings() -> Settings:
    """The settings from ``OPTIFLOW_*``; a bad value is one ``error[config_error]`` line, exit 2."""
    from optiflow.settings import load_settings

    return load_settings()


def open_store(s: Settings | None = None) -> OverridesStore:
    from optiflow.stores import open_store as _open

    return _open(s or settings())


@contextmanager
def opened_store(s: Settings | None = None) -> Iterator[OverridesStore]:
    """The configured store, closed on exit."""
    store = open_store(s)
    try:
        yield store
    finally:
        store.close()


def split_ref(ref: str, field: str = "prompt") -> tuple[str, str]:
    """``"ns/key"`` -> ``("ns", "key")``."""
    ns, sep, key = ref.partition("/")
    if not sep or not ns or not key or "/" in key:
        raise ValidationError(f"expected NS/KEY, got {ref!r}", field=field)
    return ns, key


def parse_params(pairs: tuple[str, ...], field: str = "--param") -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ValidationError(f"expected key=value, got {pair!r}", field=field)
        out[name.strip()] = value
    return out


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``\x1b`` ...): what a job name or a sample id
    stored before admission refused them can hold must not set a window title or clear a screen."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def echo(text: str = "") -> None:
    click.echo(printable(text))
