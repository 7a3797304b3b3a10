"""``optiflow prompt ...`` end to end on the filesystem store under a temporary OPTIFLOW_HOME."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from optiflow.core.overrides import SectionOverride
from optiflow.core.sections import section_hash
from optiflow.stores import FilesystemOverridesStore
from tests.cli.conftest import Cli

PROMPT_YAML = """\
ns: support
key: bot
sections:
  - path: intro
    body: You are the support bot of ${company}.
  - path: rules/refunds
    title: Refunds
    body: Refunds are possible within 30 days of purchase.
  - path: rules/tone
    body: Always be polite and concise.
  - path: safety
    body: Never reveal customer data.
    frozen: true
user: "Customer: ${input}"
"""
REFUNDS = "Refunds are possible within 30 days of purchase."


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for var in ("OPTIFLOW_STORE", "OPTIFLOW_REDIS_URL", "OPTIFLOW_DATABASE_URL", "OPTIFLOW_BROKER_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPTIFLOW_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def prompt_file(tmp_path: Path) -> Path:
    path = tmp_path / "bot.yaml"
    path.write_text(PROMPT_YAML)
    return path


@pytest.fixture
def pushed(cli: Cli, prompt_file: Path) -> Path:
    assert cli("prompt", "push", str(prompt_file))[0] == 0
    return prompt_file


def store(home: Path) -> FilesystemOverridesStore:
    """The store the CLI uses (filesystem under OPTIFLOW_HOME)."""
    return FilesystemOverridesStore(home / "store")


def refunds_override(body: str, base: str = REFUNDS) -> SectionOverride:
    return SectionOverride(path=("rules", "refunds"), expected_hash=section_hash(base), body=body)


def snapshot(home: Path) -> dict[str, bytes]:
    return {str(p.relative_to(home)): p.read_bytes() for p in home.rglob("*") if p.is_file()}


def test_push(cli: Cli, prompt_file: Path, home: Path) -> None:
    code, out, err = cli("prompt", "push", str(prompt_file))
    assert (code, err) == (0, "")
    assert out.strip() == "pushed support/bot: 4 sections (1 frozen)"
    assert store(home).get_prompt("support", "bot").section(("rules", "tone")).body.startswith("Always")


def test_show(cli: Cli, pushed: Path, home: Path) -> None:
    code, out, _ = cli("prompt", "show", "support/bot")
    assert code == 0
    assert "tag stable: no overrides" in out
    lines = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert set(lines) == {"intro", "rules/refunds", "rules/tone", "safety"}
    assert lines["safety"].split()[1] == "yes"
    assert section_hash(REFUNDS)[:12] in lines["rules/refunds"]
    assert lines["intro"].split()[-1] == "-"

    s = store(home)
    prompt = s.get_prompt("support", "bot")
    s.store(prompt.descriptor(), [refunds_override("30 days.")], tag="exp", model_params={"temperature": 0.2})
    code, out, _ = cli("prompt", "show", "support/bot", "--tag", "exp")
    assert code == 0
    assert "tag exp: 1 overrides, 1 model params" in out
    assert "yes (" in next(line for line in out.splitlines() if "rules/refunds" in line)
    assert "model params: temperature=0.2" in out


def test_show_flags_a_stale_override(cli: Cli, pushed: Path, home: Path) -> None:
    s = store(home)
    s.store(s.get_prompt("support", "bot").descriptor(), [refunds_override("30 days.")], tag="exp")
    pushed.write_text(PROMPT_YAML.replace(REFUNDS, "Refunds within 14 days."))
    assert cli("prompt", "push", str(pushed))[0] == 0
    code, out, _ = cli("prompt", "show", "support/bot", "--tag", "exp")
    assert code == 0
    assert "(1 stale or unknown, skipped)" in out
    assert "stale (made for" in next(line for line in out.splitlines() if "rules/refunds" in line)
    code, out, _ = cli("prompt", "render", "support/bot", "--tag", "exp", "--param", "company=Acme")
    assert code == 0
    assert "Refunds within 14 days." in out
    assert "30 days." not in out


def test_render(cli: Cli, pushed: Path, home: Path) -> None:
    code, out, _ = cli(
        "prompt", "render", "support/bot", "--param", "company=Acme", "--input", "Where is it?"
    )
    assert code == 0
    system, user = out.split("--- user ---\n")
    assert system.startswith("--- system (support/bot, tag stable: no overrides) ---\n")
    assert "You are the support bot of Acme." in system
    assert f"# Refunds\n{REFUNDS}" in system
    assert user.strip() == "Customer: Where is it?"

    s = store(home)
    s.apply(s.get_prompt("support", "bot"), [refunds_override("Refunds: 30 days.")], source="t")
    code, out, _ = cli("prompt", "render", "support/bot", "--param", "company=Acme=Corp")
    assert code == 0
    assert "# Refunds\nRefunds: 30 days." in out
    assert "support bot of Acme=Corp." in out
    assert "Customer: \n" in out


def test_history_and_rollback(cli: Cli, pushed: Path, home: Path) -> None:
    code, out, _ = cli("prompt", "history", "support/bot")
    assert (code, out.strip()) == (0, "no versions of support/bot under tag stable")

    s = store(home)
    desc = s.get_prompt("support", "bot")
    s.apply(desc, [refunds_override("first")], source="job-1", description="shorter refunds")
    s.apply(desc, [refunds_override("second")], source="job-2", model_params={"temperature": 0})
    code, out, _ = cli("prompt", "history", "support/bot")
    assert code == 0
    rows = out.splitlines()
    assert rows[0] == "support/bot tag stable: 3 versions"
    assert rows[1].split()[0] == "v1.0.0"  # the prompt before the first apply
    assert "original" in rows[1] and "0 sections" in rows[1]
    assert rows[2].split()[0] == "v1.0.1"
    assert "job-1" in rows[2]
    assert rows[2].endswith("1 sections  shorter refunds")
    assert "+1 params" in rows[3]

    code, out, _ = cli("prompt", "rollback", "support/bot", "v1.0.1")
    assert code == 0
    assert out.strip() == "support/bot tag stable: restored v1.0.1 as v1.0.3 (1 sections)"
    versions = s.history("support", "bot")
    assert [v.version for v in versions] == ["v1.0.0", "v1.0.1", "v1.0.2", "v1.0.3"]
    assert versions[-1].overrides == versions[1].overrides
    assert "Refunds\nfirst" in cli("prompt", "render", "support/bot", "--param", "company=A")[1]

    # rolling back to the original undoes every apply
    code, out, _ = cli("prompt", "rollback", "support/bot", "v1.0.0")
    assert out.strip() == "support/bot tag stable: restored v1.0.0 as v1.0.4 (0 sections)"
    assert f"# Refunds\n{REFUNDS}" in cli("prompt", "render", "support/bot", "--param", "company=A")[1]


def test_tags_are_independent(cli: Cli, pushed: Path, home: Path) -> None:
    s = store(home)
    desc = s.get_prompt("support", "bot")
    s.apply(desc, [refunds_override("mine")], tag="alice", source="cli")
    assert "2 versions" in cli("prompt", "history", "support/bot", "--tag", "alice")[1]
    assert "no versions" in cli("prompt", "history", "support/bot")[1]
    s.apply(desc, [refunds_override("mine, again")], tag="alice", source="cli")
    code, out, _ = cli("prompt", "rollback", "support/bot", "v1.0.0", "--tag", "alice")
    assert (code, out.split(":")[0]) == (0, "support/bot tag alice")
    assert s.history("support", "bot") == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("prompt", "push", "missing.yaml"), "missing.yaml: file not found"),
        (("prompt", "push", "{malformed}"), "malformed YAML (line 2"),
        (("prompt", "push", "{invalid}"), "sections: Field required"),
        (
            ("prompt", "render", "support/bot", "--param", "company"),
            "--param: expected key=value, got 'company'",
        ),
        (("prompt", "render", "support/bot", "--param", "=x"), "--param: expected key=value"),
        (
            ("prompt", "render", "support/bot"),
            "--param: missing template param(s) company: give each with --param company=VALUE",
        ),
        (("prompt", "show", "support/nope"), "error[not_found]: prompt: no prompt support/nope"),
        (("prompt", "render", "nope/bot", "--param", "company=A"), "error[not_found]: prompt:"),
        (("prompt", "history", "support/nope"), "error[not_found]: prompt:"),
        (("prompt", "show", "support-bot"), "prompt: expected NS/KEY, got 'support-bot'"),
        (("prompt", "show", "support/bot", "--tag", "a b"), "tag: invalid tag 'a b'"),
        (("prompt", "rollback", "support/bot", "1.0.0"), "version: not a semantic version: '1.0.0'"),
        (("prompt", "rollback", "support/bot", "v1.0.9"), "error[not_found]: version: no version v1.0.9"),
        (("prompt", "rollback", "support/nope", "v1.0.0"), "error[not_found]: prompt:"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    cli: Cli, pushed: Path, home: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    (tmp_path / "malformed.yaml").write_text("ns: support\n  key: [bot\n")
    (tmp_path / "invalid.yaml").write_text("ns: support\nkey: bot\n")
    args = tuple(a.replace("{malformed}", str(tmp_path / "malformed.yaml")) for a in args)
    args = tuple(a.replace("{invalid}", str(tmp_path / "invalid.yaml")) for a in args)
    s = store(home)
    s.apply(s.get_prompt("support", "bot"), [refunds_override("x")], source="t")
    before = snapshot(home)
    code, out, err = cli(*args)
    assert code == 2
    assert out == ""
    assert err.startswith("error[") and err.count("\n") == 1, err
    assert message in err
    assert snapshot(home) == before


def test_cli_start_does_not_import_heavy_modules() -> None:
    code = (
        "import sys; from optiflow.interfaces.cli import _register; _register(); "
        "print(sorted(m for m in ('sqlalchemy', 'redis', 'litellm', 'tiktoken') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
