"""Static checks of the deployment files: every command they run names an entrypoint that exists.

docker-compose.yml, deploy/Dockerfile, deploy/k8s/*.yaml, deploy/crontab.example and
deploy/optiflow.env.example are parsed (no Docker, no network) and each command is resolved
against the code: ``celery -A MODULE`` imports MODULE and finds the Celery app, ``-Q`` names real
queues, ``optiflow SUB ...`` parses with the real click command, env names are real settings.
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import os
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from optiflow.distributed.app import QUEUE_CONTROL, QUEUE_EVAL, QUEUES
from optiflow.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
ENV_EXAMPLE = ROOT / "deploy" / "optiflow.env.example"
CRONTAB = ROOT / "deploy" / "crontab.example"
K8S = ROOT / "deploy" / "k8s"

WORKER_POOLS = {"prefork", "threads", "solo"}
APP_SERVICES = ("control", "eval", "flower")  # long-running services built from deploy/Dockerfile


# -- resolving one command ------------------------------------------------------------------------
def argv_of(value: str | list[Any] | None) -> list[str]:
    if value is None:
        return []
    return shlex.split(value) if isinstance(value, str) else [str(v) for v in value]


def _option(args: list[str], i: int, where: str) -> tuple[str, str | None, int]:
    """``--name=value`` / ``-n value`` / ``--flag`` at args[i] -> (name, value, next index)."""
    arg = args[i]
    if "=" in arg:
        name, value = arg.split("=", 1)
        return name, value, i + 1
    takes_value = {"-A", "--app", "-Q", "--queues", "-P", "--pool", "-c", "--concurrency"}
    takes_value |= {"-n", "--hostname", "-l", "--loglevel"}
    if arg in takes_value:
        assert i + 1 < len(args), f"{where}: {arg} needs a value"
        return arg, args[i + 1], i + 2
    return arg, None, i + 1


def _celery_app(spec: str, where: str) -> Any:
    from celery import Celery

    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AssertionError(f"{where}: celery -A {spec}: cannot import {module_name!r}: {exc}") from exc
    app = getattr(module, attr or "app", None)
    assert isinstance(app, Celery), f"{where}: celery -A {spec}: no Celery app {attr or 'app'!r}"
    return app


def check_celery(args: list[str], where: str) -> dict[str, Any]:
    """``celery -A workers.app worker|flower ...`` -> {"sub", "queues", "pool"}; AssertionError if bad."""
    i, app_spec = 0, None
    while i < len(args) and args[i].startswith("-"):
        name, value, i = _option(args, i, where)
        assert name in ("-A", "--app"), f"{where}: unexpected celery option {name!r}"
        app_spec = value
    assert app_spec, f"{where}: celery without -A"
    assert i < len(args), f"{where}: celery without a subcommand"
    _celery_app(app_spec, where)
    sub, rest = args[i], args[i + 1 :]
    info: dict[str, Any] = {"sub": sub, "queues": set(), "pool": None}
    if sub == "flower":
        for arg in rest:
            assert arg.startswith("--"), f"{where}: flower takes --name=value options, got {arg!r}"
            if arg.startswith("--port="):
                assert arg.split("=", 1)[1].isdigit(), f"{where}: bad flower port {arg!r}"
        return info
    assert sub == "worker", f"{where}: unexpected celery subcommand {sub!r}"
    j = 0
    while j < len(rest):
        name, value, j = _option(rest, j, where)
        if name in ("-Q", "--queues"):
            assert value
            info["queues"] = set(value.split(","))
            unknown = info["queues"] - set(QUEUES)
            assert not unknown, f"{where}: unknown queues {sorted(unknown)} (known: {QUEUES})"
        elif name in ("-P", "--pool"):
            assert value in WORKER_POOLS, f"{where}: unknown pool {value!r}"
            info["pool"] = value
        elif name in ("-c", "--concurrency"):
            assert value and value.isdigit() and int(value) > 0, f"{where}: bad concurrency {value!r}"
        elif name in ("-n", "--hostname"):
            assert value and "@" in value, f"{where}: hostname {value!r} should be NAME@%h"
        elif name in ("-l", "--loglevel"):
            assert value and value.upper() in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
        else:
            raise AssertionError(f"{where}: unexpected celery worker option {name!r}")
    assert info["queues"], f"{where}: a worker must name its queues with -Q"
    return info


def check_optiflow(args: list[str], where: str) -> dict[str, Any]:
    """``optiflow SUB ...`` -> parsed by the registered click command; AssertionError if bad."""
    from optiflow.interfaces import cli

    cli._register()
    assert args, f"{where}: optiflow without a subcommand"
    name, rest = args[0], args[1:]
    if name.startswith("-"):  # a group option: --help, --version
        group_options = {opt for p in cli.main.get_params(click.Context(cli.main)) for opt in p.opts}
        assert name in group_options and not rest, f"{where}: optiflow {shlex.join(args)}"
        return {"sub": None, "params": {}, "queues": set(), "pool": None}
    command = cli.main.commands.get(name)
    assert command is not None, f"{where}: no 'optiflow {name}' (have: {sorted(cli.main.commands)})"
    try:
        ctx = command.make_context(name, list(rest))
    except click.ClickException as exc:
        raise AssertionError(f"{where}: optiflow {shlex.join(args)}: {exc.format_message()}") from exc
    info: dict[str, Any] = {"sub": name, "params": ctx.params, "queues": set(), "pool": None}
    if name == "worker":
        role = ctx.params["role"]
        info["queues"] = {"eval": {QUEUE_EVAL}, "control": {QUEUE_CONTROL}}.get(role, set(QUEUES))
        info["pool"] = "prefork" if role == "control" else "threads"
    return info


def check_command(argv: list[str], where: str) -> dict[str, Any]:
    assert argv, f"{where}: empty command"
    program, args = argv[0], argv[1:]
    if program == "celery":
        return check_celery(args, where)
    if program == "optiflow":
        return check_optiflow(args, where)
    raise AssertionError(f"{where}: unknown program {program!r} (expected celery or optiflow)")


def check_env_names(names: Iterator[str] | list[str], where: str) -> None:
    fields = set(Settings.model_fields)
    for name in names:
        if name.startswith("OPTIFLOW_"):
            field = name.removeprefix("OPTIFLOW_").lower()
            assert field in fields, f"{where}: {name} is not a setting (fields: {sorted(fields)})"


# -- the environment the commands run in ---------------------------------------------------------
_INTERPOLATION = re.compile(r"\$\{(\w+)(?::?([-?])([^}]*))?\}")


def interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}`` with nothing set: the default (``${VAR:?err}`` -> 'x')."""

    def one(m: re.Match[str]) -> str:
        return m.group(3) if m.group(2) == "-" else "x"

    return _INTERPOLATION.sub(one, value)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return doc


@pytest.fixture(scope="module")
def app_env(compose: dict[str, Any]) -> Iterator[dict[str, str]]:
    """The app services' environment in this process, so ``workers.app`` imports as in a container."""
    env = {k: interpolate(str(v)) for k, v in (compose["services"]["eval"].get("environment") or {}).items()}
    had_module = "workers.app" in sys.modules
    with pytest.MonkeyPatch.context() as mp:
        for name in [n for n in os.environ if n.startswith("OPTIFLOW_")]:
            mp.delenv(name)
        for name, value in env.items():
            mp.setenv(name, value)
        yield env
        if not had_module:  # later importers get workers.app configured by their own environment
            sys.modules.pop("workers.app", None)


# -- docker-compose.yml ---------------------------------------------------------------------------
def test_compose_services(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"redis", "postgres", *APP_SERVICES} <= set(services)
    redis = services["redis"]
    assert str(redis["image"]).startswith("redis:7")
    redis_argv = argv_of(redis["command"])
    assert redis_argv[redis_argv.index("--maxmemory-policy") + 1] == "noeviction"
    assert "healthcheck" in redis
    postgres = services["postgres"]
    assert str(postgres["image"]).startswith("postgres:16")
    assert "healthcheck" in postgres
    # workers refuse an unmigrated database: they start after the one-shot upgrade succeeded
    assert _service_argv(services["migrate"]) == ["optiflow", "db", "upgrade"]
    for worker in ("control", "eval"):
        assert services[worker]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def _service_argv(service: dict[str, Any]) -> list[str]:
    entrypoint, command = argv_of(service.get("entrypoint")), argv_of(service.get("command"))
    if not entrypoint and not command:
        return dockerfile_cmd()
    return entrypoint + command


def test_compose_commands_exist(compose: dict[str, Any], app_env: dict[str, str]) -> None:
    consumed: set[str] = set()
    built = {name: s for name, s in compose["services"].items() if "build" in s}
    assert set(APP_SERVICES) <= set(built), "control, eval and flower must build from deploy/Dockerfile"
    for name, service in built.items():
        where = f"docker-compose.yml services.{name}"
        build = service["build"]
        assert (ROOT / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE, where
        env = service.get("environment") or {}
        assert isinstance(env, dict), f"{where}: environment as a mapping, please"
        check_env_names(list(env), where)
        assert str(env.get("OPTIFLOW_REDIS_URL", "")).startswith("redis://redis:"), where
        assert str(env.get("OPTIFLOW_DATABASE_URL", "")).startswith("postgresql+psycopg://"), where
        assert "@postgres:5432/" in str(env["OPTIFLOW_DATABASE_URL"]), where
        for dep in ("redis", "postgres"):
            assert service["depends_on"][dep]["condition"] == "service_healthy", f"{where}: {dep}"
        info = check_command(_service_argv(service), where)
        consumed |= info["queues"]
    assert consumed == set(QUEUES), f"no compose worker consumes {sorted(set(QUEUES) - consumed)}"
    settings = Settings()  # the compose environment is valid settings, distributed
    assert settings.distributed
    assert settings.effective_store == "redis"


def test_compose_eval_scales_and_flower_is_protected(compose: dict[str, Any], app_env: None) -> None:
    eval_service = compose["services"]["eval"]
    assert "container_name" not in eval_service, "container_name breaks `--scale eval=N`"
    assert "ports" not in eval_service, "fixed host ports break `--scale eval=N`"
    info = check_command(_service_argv(eval_service), "services.eval")
    assert info["queues"] == {QUEUE_EVAL}
    assert info["pool"] == "threads"
    flower = compose["services"]["flower"]
    assert any(str(p).endswith(":5555") for p in flower["ports"])
    flower_argv = _service_argv(flower)
    assert "FLOWER_BASIC_AUTH" in flower["environment"] or any(
        a.startswith("--basic-auth") for a in flower_argv
    ), "Flower's API answers 401 without auth; set FLOWER_BASIC_AUTH"


# -- deploy/Dockerfile ----------------------------------------------------------------------------
def dockerfile_instructions() -> list[tuple[str, str]]:
    lines, current = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        current += line[:-1] + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            lines.append(current)
            current = ""
    out = []
    for line in lines:
        keyword, _, rest = line.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def dockerfile_cmd() -> list[str]:
    cmds = [rest for keyword, rest in dockerfile_instructions() if keyword == "CMD"]
    assert cmds, "deploy/Dockerfile has no CMD"
    argv: list[str] = json.loads(cmds[-1])  # exec form: no shell between docker and the program
    return argv


def test_dockerfile(app_env: None) -> None:
    instructions = dockerfile_instructions()
    assert instructions[0] == ("FROM", "python:3.11-slim")
    ignored = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copied: list[str] = []
    for keyword, rest in instructions:
        if keyword in ("COPY", "ADD"):
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            assert "--from" not in rest
            for source in parts[:-1]:
                assert list(ROOT.glob(source)), f"deploy/Dockerfile: COPY {source}: no such file"
                hit = [p for p in ignored if fnmatch.fnmatch(source.rstrip("/"), p)]
                assert not hit, f"deploy/Dockerfile: COPY {source} is excluded by .dockerignore {hit}"
                copied.append(source.rstrip("/"))
    env = " ".join(rest for keyword, rest in instructions if keyword == "ENV")
    assert "LITELLM_LOCAL_MODEL_COST_MAP=True" in env
    runs = " ".join(rest for keyword, rest in instructions if keyword == "RUN")
    assert re.search(r"pip install .*\[postgres\]", runs), "install the project with the postgres extra"
    users = [rest for keyword, rest in instructions if keyword == "USER"]
    assert users, "deploy/Dockerfile runs as root"
    assert users[-1].split(":")[0] not in ("root", "0")
    # `optiflow demo` in the image finds its example job (working directory or the checkout).
    from optiflow.interfaces.cli.jobs import EXAMPLE

    example = EXAMPLE.as_posix()
    assert any(example == c or example.startswith(c + "/") for c in copied), f"{example} not copied"
    assert {"pyproject.toml", "optiflow", "workers"} <= set(copied)
    check_command(dockerfile_cmd(), "deploy/Dockerfile CMD")


# -- deploy/optiflow.env.example ------------------------------------------------------------------
def test_env_example_names_every_setting() -> None:
    assignments = dict(
        m.groups()
        for m in re.finditer(r"^#?\s*(OPTIFLOW_\w+)=(.*)$", ENV_EXAMPLE.read_text(), flags=re.MULTILINE)
    )
    check_env_names(list(assignments), "deploy/optiflow.env.example")
    expected = {f"OPTIFLOW_{name.upper()}" for name in Settings.model_fields}
    missing = expected - set(assignments)
    assert not missing, f"deploy/optiflow.env.example does not describe {sorted(missing)}"
    with pytest.MonkeyPatch.context() as mp:  # every example value (commented or not) is valid
        for name, value in assignments.items():
            mp.setenv(name, value)
        Settings()


# -- deploy/crontab.example -----------------------------------------------------------------------
def test_crontab(app_env: None) -> None:
    """Each job line runs the virtualenv's optiflow by absolute path (cron's PATH has no venv):
    ``"$VENV/bin/optiflow" cron JOB ...`` with the crontab's own variables, parsed by the real
    command. tests/deploy/test_cron.py runs the lines."""
    assigned: dict[str, str] = {}
    jobs = []
    for line in CRONTAB.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if m := re.match(r"^(\w+)=(.*)$", line):
            assigned[m[1]] = m[2]
        else:
            jobs.append(line)
    assert jobs, "deploy/crontab.example has no job line"
    check_env_names(list(assigned), "deploy/crontab.example")
    for line in jobs:
        fields = line.split(None, 5)
        assert len(fields) == 6, f"crontab: expected 5 time fields and a command: {line!r}"
        # the shell expands the crontab's variables (cron puts them in the command's environment)
        expand = re.compile(r"\$(\w+)|\$\{(\w+)\}")
        argv = [expand.sub(lambda m: assigned[m[1] or m[2]], t) for t in shlex.split(fields[5])]
        program = Path(argv[0])
        assert program.is_absolute() and program.name == "optiflow", f"not an absolute optiflow: {argv[0]}"
        info = check_command(["optiflow", *argv[1:]], "deploy/crontab.example")
        assert info["sub"] == "cron", "the crontab runs `optiflow cron` (env file, lock, log, exit codes)"
        assert info["params"]["env_file"] is not None


# -- deploy/k8s -----------------------------------------------------------------------------------
def k8s_docs() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


def test_k8s_manifests(compose: dict[str, Any], app_env: None) -> None:
    docs = k8s_docs()
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    for _, doc in docs:
        by_kind.setdefault(doc["kind"], {})[doc["metadata"]["name"] if "metadata" in doc else ""] = doc
    for config in [*by_kind.get("ConfigMap", {}).values(), *by_kind.get("Secret", {}).values()]:
        check_env_names(list(config.get("data") or {}) + list(config.get("stringData") or {}), "k8s")
    deployments = by_kind.get("Deployment", {})
    consumed: set[str] = set()
    for service in APP_SERVICES:
        name = f"optiflow-{service}"
        assert name in deployments, f"deploy/k8s: no Deployment {name}"
        spec = deployments[name]["spec"]
        labels = spec["template"]["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items(), f"{name}: selector"
        (container,) = spec["template"]["spec"]["containers"]
        argv = argv_of(container.get("command")) + argv_of(container.get("args"))
        info = check_command(argv, f"deploy/k8s {name}")
        consumed |= info["queues"]
        assert argv == _service_argv(compose["services"][service]), (
            f"deploy/k8s {name} runs another command than docker-compose.yml services.{service}"
        )
        for source in container.get("envFrom", []):
            ref = source.get("configMapRef") or source.get("secretRef")
            kind = "ConfigMap" if "configMapRef" in source else "Secret"
            assert ref["name"] in by_kind.get(kind, {}), f"{name}: no {kind} {ref['name']}"
    assert consumed == set(QUEUES)
    for hpa in [
        *by_kind.get("HorizontalPodAutoscaler", {}).values(),
        *by_kind.get("ScaledObject", {}).values(),
    ]:
        assert hpa["spec"]["scaleTargetRef"]["name"] in deployments
    cronjobs = by_kind.get("CronJob", {})
    assert cronjobs, "deploy/k8s: no CronJob (the crontab's jobs, in a cluster)"
    runs = set()
    for name, cronjob in cronjobs.items():
        assert cronjob["spec"]["concurrencyPolicy"] == "Forbid", f"{name}: runs must not overlap"
        pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        (container,) = pod["containers"]
        argv = argv_of(container.get("command")) + argv_of(container.get("args"))
        info = check_command(argv, f"deploy/k8s {name}")
        assert info["sub"] == "cron", f"{name}: runs `optiflow cron` (exit codes, lock, log)"
        assert str(info["params"]["log_file"]) == "-", f"{name}: log to stdout (kubectl logs)"
        job_file = Path(argv[2])  # the image's WORKDIR /app holds the checkout's examples/
        assert job_file.parts[:2] == ("/", "app") and (ROOT / job_file.relative_to("/app")).exists(), job_file
        runs.add("--fail-below" if info["params"]["fail_below"] is not None else "")
        runs.add("--apply" if info["params"]["apply_"] else "")
        for source in container.get("envFrom", []):
            ref = source.get("configMapRef") or source.get("secretRef")
            kind = "ConfigMap" if "configMapRef" in source else "Secret"
            assert ref["name"] in by_kind.get(kind, {}), f"{name}: no {kind} {ref['name']}"
    assert {"--fail-below", "--apply"} <= runs, "a nightly measure with a floor and a compress with --apply"
    # Flower's API answers 401 without auth: basic auth from the Secret, as FLOWER_BASIC_AUTH
    (flower_container,) = deployments["optiflow-flower"]["spec"]["template"]["spec"]["containers"]
    secrets = [
        by_kind["Secret"][src["secretRef"]["name"]]
        for src in flower_container["envFrom"]
        if "secretRef" in src
    ]
    assert any("FLOWER_BASIC_AUTH" in secret.get("stringData", {}) for secret in secrets)
    flower_labels = deployments["optiflow-flower"]["spec"]["template"]["metadata"]["labels"]
    (flower_service,) = by_kind["Service"].values()
    assert flower_service["spec"]["selector"].items() <= flower_labels.items()
    (kustomization,) = by_kind.get("Kustomization", {"": {"resources": None}}).values()
    if kustomization["resources"] is not None:
        listed = set(kustomization["resources"])
        files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
        assert listed == files, f"deploy/k8s/kustomization.yaml lists {sorted(listed)}, files {files}"


# -- the checker can fail -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        "celery -A workers.ap worker -Q optiflow.eval",  # module typo
        "celery -A optiflow.settings worker -Q optiflow.eval",  # module without a Celery app
        "celery -A workers.app worker -Q optiflow.evals",  # queue typo
        "celery -A workers.app worker -Q optiflow.eval -P thread",  # pool typo
        "celery -A workers.app worker -Q optiflow.eval --concurency 4",  # option typo
        "celery -A workers.app worker",  # consumes the default queue only
        "celery -A workers.app flowr",
        "optiflow wroker --role eval",  # subcommand typo
        "optiflow worker --role evaluate",  # bad choice
        "optiflow submit --wait",  # missing JOB_FILE
        "python -m optiflow demo",
    ],
)
def test_checker_rejects_broken_commands(argv: str, app_env: None) -> None:
    with pytest.raises(AssertionError):
        check_command(shlex.split(argv), "negative case")


def test_checker_rejects_unknown_setting() -> None:
    with pytest.raises(AssertionError):
        check_env_names(["OPTIFLOW_REDIS_URI"], "negative case")
