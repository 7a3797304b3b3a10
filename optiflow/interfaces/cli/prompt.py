"""``optiflow prompt``: push a prompt to the store, inspect it, render it, and manage versions.

Arguments are checked before the store is opened, so refused input writes nothing. Domain
modules are imported inside commands (pydantic models cost ~0.2 s): ``optiflow --help`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from optiflow.interfaces.cli._common import echo, opened_store, parse_params, split_ref

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from optiflow.core.overrides import PromptOverrides, SectionOverride
    from optiflow.core.prompt import Prompt, Section
    from optiflow.stores.base import OverridesStore

STABLE = "stable"  # optiflow.core.overrides.STABLE, without importing it
_TAG_HELP = "overrides tag"


@click.group()
def prompt() -> None:
    """Prompts in the overrides store: push, show, render, history, rollback."""


@prompt.command()
@click.argument("file")
def push(file: str) -> None:
    """Register (or replace) the prompt of a YAML FILE in the store.

    Overrides stay as they are: one made for a section body this push changes is stale from now
    on, kept and never rendered (the hash guard); the lines after ``pushed`` say which. A job made
    on the previous prompt can no longer be applied (``apply`` refuses it: rerun the job)."""
    from optiflow.errors import NotFoundError
    from optiflow.files import load_prompt

    p = load_prompt(file)
    with opened_store() as store:
        try:
            before: Prompt | None = store.get_prompt(p.ns, p.key)
        except NotFoundError:
            before = None
        store.put_prompt(p)
        notes = _newly_stale(store, before, p) if before is not None else []
    frozen = sum(s.frozen for s in p.sections)
    echo(f"pushed {p.id}: {len(p.sections)} sections ({frozen} frozen){_since(before, p)}")
    for note in notes:
        echo(note)


@prompt.command()
@click.argument("ref", metavar="NS/KEY")
@click.option("--tag", default=STABLE, show_default=True, help=_TAG_HELP)
def show(ref: str, tag: str) -> None:
    """Sections of a prompt and which of them the tag overrides."""
    from optiflow.core.overrides import check_tag
    from optiflow.core.sections import path_str
    from optiflow.llm.tokens import count_tokens

    ns, key = split_ref(ref)
    check_tag(tag)
    with opened_store() as store:
        p = store.get_prompt(ns, key)
        overrides = store.resolve(ns, key, tag)
    echo(f"{p.id}: {len(p.sections)} sections; tag {tag}: {_summary(p, overrides)}")
    width = max(len("PATH"), *(len(path_str(s.path)) for s in p.sections))
    echo(f"  {'PATH':<{width}}  {'FROZEN':<6}  {'HASH':<12}  {'TOKENS':>6}  OVERRIDE")
    for s in p.sections:
        ov = overrides.section(s.path) if overrides else None
        echo(
            f"  {path_str(s.path):<{width}}  {'yes' if s.frozen else '-':<6}  {s.hash[:12]}  "
            f"{count_tokens(s.body):>6}  {_override_state(s, ov, count_tokens)}"
        )
    known = {s.path for s in p.sections}
    for ov in overrides.sections if overrides else ():
        if ov.path not in known:
            echo(f"  override of unknown section {path_str(ov.path)!r} (ignored when rendering)")
    if overrides and overrides.model_params:
        echo("model params: " + ", ".join(f"{k}={v}" for k, v in overrides.model_params.items()))


def _check_params(p: Prompt, overrides: PromptOverrides | None, values: Mapping[str, object]) -> None:
    """Every ``${param}`` the rendered text uses is given (``${input}`` by ``--input``), or one
    error naming them all and the flag that gives them."""
    from optiflow.core.prompt import template_params
    from optiflow.errors import ValidationError

    used: set[str] = set(template_params(p.user))
    for body in p.effective_bodies(overrides).values():
        used |= template_params(body)
    missing = sorted(used - set(values) - {"input"})
    if missing:
        flags = " ".join(f"--param {name}=VALUE" for name in missing)
        raise ValidationError(
            f"missing template param(s) {', '.join(missing)}: give each with {flags}", field="--param"
        )


@prompt.command()
@click.argument("ref", metavar="NS/KEY")
@click.option("--tag", default=STABLE, show_default=True, help=_TAG_HELP)
@click.option("--param", "params", multiple=True, metavar="K=V", help="template param (repeatable)")
@click.option("--input", "input_text", default="", metavar="TEXT", help="the user input, ${input}")
def render(ref: str, tag: str, params: tuple[str, ...], input_text: str) -> None:
    """Print the system and user messages of a prompt under a tag's overrides."""
    from optiflow.core.overrides import check_tag

    ns, key = split_ref(ref)
    check_tag(tag)
    values = parse_params(params)
    with opened_store() as store:
        p = store.get_prompt(ns, key)
        overrides = store.resolve(ns, key, tag)
    _check_params(p, overrides, values)
    rendered = p.render(input_text, params=values, overrides=overrides)
    echo(f"--- system ({p.id}, tag {tag}: {_summary(p, overrides)}) ---")
    echo(rendered.system)
    echo("--- user ---")
    echo(rendered.user)
    if rendered.model_params:
        echo("--- model params ---")
        for name, value in rendered.model_params.items():
            echo(f"{name}: {value}")


@prompt.command()
@click.argument("ref", metavar="NS/KEY")
@click.option("--tag", default=STABLE, show_default=True, help=_TAG_HELP)
def history(ref: str, tag: str) -> None:
    """Versions of a tag, oldest first."""
    from optiflow.core.overrides import check_tag

    ns, key = split_ref(ref)
    check_tag(tag)
    with opened_store() as store:
        store.get_prompt(ns, key)
        versions = store.history(ns, key, tag)
    if not versions:
        echo(f"no versions of {ns}/{key} under tag {tag}")
        return
    echo(f"{ns}/{key} tag {tag}: {len(versions)} versions")
    for v in versions:
        when = v.created_at.strftime("%Y-%m-%d %H:%M:%SZ")
        n = len(v.overrides.sections)
        params = f" +{len(v.overrides.model_params)} params" if v.overrides.model_params else ""
        echo(f"  {v.version:<8}  {when}  {v.source:<16}  {n} sections{params}  {v.description}".rstrip())


@prompt.command()
@click.argument("ref", metavar="NS/KEY")
@click.argument("version")
@click.option("--tag", default=STABLE, show_default=True, help=_TAG_HELP)
def rollback(ref: str, version: str, tag: str) -> None:
    """Restore the overrides of VERSION (like v1.0.2) as the tag's next version."""
    from optiflow.core.overrides import check_user_tag, check_version

    ns, key = split_ref(ref)
    check_user_tag(tag)
    check_version(version)
    with opened_store() as store:
        p = store.get_prompt(ns, key)
        v = store.rollback(p.descriptor(), version, tag=tag)
    echo(f"{p.id} tag {tag}: restored {version} as {v.version} ({len(v.overrides.sections)} sections)")


def _since(before: Prompt | None, p: Prompt) -> str:
    """``; since the stored version: added warranty``: what the push changed (empty: nothing)."""
    from optiflow.core.sections import prompt_diff

    if before is None:
        return ""
    diff = prompt_diff(before.descriptor(), p.descriptor())
    return "" if diff.empty else f"; since the stored version: {diff.summary()}"


def _newly_stale(store: OverridesStore, before: Prompt, p: Prompt) -> list[str]:
    """One line per long-lived tag with overrides that were fresh on ``before`` and are stale (or
    of a removed section) on ``p``."""
    from optiflow.core.experiment import TEMP_TAG_PREFIX
    from optiflow.core.sections import path_str

    old = {s.path: s.hash for s in before.sections}
    new = {s.path: s.hash for s in p.sections}
    lines = []
    for tag in store.list_tags(p.ns, p.key):
        overrides = None if tag.startswith(TEMP_TAG_PREFIX) else store.resolve(p.ns, p.key, tag)
        lost = [
            path_str(ov.path)
            for ov in (overrides.sections if overrides else ())
            if old.get(ov.path) == ov.expected_hash != new.get(ov.path)
        ]
        if lost:
            lines.append(
                f"  tag {tag}: override(s) of {', '.join(lost)} made for the replaced bodies are stale "
                "now: kept, skipped when rendering (run the job again on this prompt)"
            )
    return lines


def _summary(p: Prompt, overrides: PromptOverrides | None) -> str:
    if overrides is None or not (overrides.sections or overrides.model_params):
        return "no overrides"
    hashes = {s.path: s.hash for s in p.sections}
    stale = sum(hashes.get(ov.path) != ov.expected_hash for ov in overrides.sections)
    text = f"{len(overrides.sections)} overrides"
    if stale:
        text += f" ({stale} stale or unknown, skipped)"
    if overrides.model_params:
        text += f", {len(overrides.model_params)} model params"
    return text


def _override_state(s: Section, ov: SectionOverride | None, count: Callable[[str], int]) -> str:
    if ov is None:
        return "-"
    if ov.expected_hash != s.hash:
        return f"stale (made for {ov.expected_hash[:12]}, skipped)"
    return f"yes ({count(ov.body)} tokens)"
