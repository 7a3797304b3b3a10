"""The deployment files against their published schemas, offline.

- deploy/k8s/*.yaml: the built-in kinds against the Kubernetes OpenAPI schemas that the
  ``kubernetes-validate`` package bundles, strict (an unknown field is an error, as with
  ``kubectl apply --validate=strict``), for the oldest and the newest Kubernetes it knows.
- deploy/k8s/keda.yaml: KEDA's ScaledObject is a custom resource, so against the schema of its CRD
  (vendored in tests/deploy/schemas, source named there), made strict the same way; its Redis
  trigger names only parameters KEDA's redis scaler reads.
- docker-compose.yml: against the Compose Specification's JSON schema that ``check-jsonschema``
  bundles (``--builtin-schema vendor.compose-spec``). ``docker compose config`` would need the
  compose plugin, which is not part of every Docker install; the schema needs nothing.

Each check is shown to fail on a broken copy, so none of them passes by default.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support.workers import ROOT

K8S = ROOT / "deploy" / "k8s"
COMPOSE = ROOT / "docker-compose.yml"
KEDA_SCHEMA = Path(__file__).parent / "schemas" / "keda-scaledobject-v1alpha1.json"
OLDEST_K8S = "1.30.0"  # the oldest Kubernetes release still maintained when this was written
CUSTOM = {"Kustomization", "ScaledObject"}  # not built-in kinds: checked below

# The trigger metadata KEDA's redis scaler reads (pkg/scalers/redis_scaler.go at v2.20.2: the
# `keda:"name=..."` tags of redisMetadata and redisConnectionInfo; `<name>FromEnv` reads a
# container's environment variable instead).
REDIS_SCALER_PARAMS = {
    "address",
    "addresses",
    "host",
    "hosts",
    "port",
    "ports",
    "username",
    "password",
    "sentinelUsername",
    "sentinelPassword",
    "sentinelMaster",
    "unsafeSsl",
    "listLength",
    "activationListLength",
    "listName",
    "databaseIndex",
    "enableTLS",
}


def manifests() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        docs += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


def builtin_manifests() -> list[tuple[str, dict[str, Any]]]:
    return [(name, doc) for name, doc in manifests() if doc["kind"] not in CUSTOM]


def k8s_versions() -> list[str]:
    return [OLDEST_K8S, kubernetes_validate.latest_version()]


@pytest.mark.parametrize("version", k8s_versions())
def test_builtin_kinds_validate_strictly(version: str) -> None:
    docs = builtin_manifests()
    assert {"ConfigMap", "Secret", "Deployment", "Service", "CronJob"} <= {d["kind"] for _, d in docs}
    for name, doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(
                f"deploy/k8s/{name} {doc['kind']} {doc['metadata']['name']} (Kubernetes {version}): {exc}"
            )


@pytest.mark.parametrize(
    ("kind", "breakage"),
    [
        ("Deployment", lambda d: d["spec"]["template"]["spec"]["containers"][0].update(comand=["x"])),
        ("CronJob", lambda d: d["spec"].update(concurrency="Forbid")),
        ("CronJob", lambda d: d["spec"]["jobTemplate"]["spec"].update(backoffLimit="0")),
        ("Service", lambda d: d["spec"]["ports"][0].update(port="http")),
    ],
)
def test_kubernetes_validation_can_fail(kind: str, breakage: Any) -> None:
    doc = copy.deepcopy(next(d for _, d in builtin_manifests() if d["kind"] == kind))
    breakage(doc)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, OLDEST_K8S, strict=True)


def strict(schema: Any) -> Any:
    """The CRD's structural schema with unknown fields refused: the API server prunes them, and
    ``kubectl apply --validate=strict`` (the default since Kubernetes 1.27) refuses them."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def scaled_objects() -> list[dict[str, Any]]:
    return [d for _, d in manifests() if d["kind"] == "ScaledObject"]


def keda_errors(doc: dict[str, Any]) -> list[str]:
    schema = strict(json.loads(KEDA_SCHEMA.read_text()))
    validator = jsonschema.Draft4Validator(schema)  # OpenAPI v3 schemas are JSON Schema draft 4 + extras
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]
    if doc.get("apiVersion") != "keda.sh/v1alpha1":
        errors.append(f"apiVersion {doc.get('apiVersion')!r}: the CRD serves keda.sh/v1alpha1")
    for i, trigger in enumerate(doc.get("spec", {}).get("triggers", [])):
        if trigger.get("type") == "redis":
            unknown = {k.removesuffix("FromEnv") for k in trigger.get("metadata", {})} - REDIS_SCALER_PARAMS
            errors += [
                f"spec/triggers/{i}/metadata: the redis scaler reads no {k!r}" for k in sorted(unknown)
            ]
    return errors


def test_scaled_object_validates_against_the_keda_crd() -> None:
    (doc,) = scaled_objects()
    assert keda_errors(doc) == []
    deployments = {d["metadata"]["name"] for _, d in manifests() if d["kind"] == "Deployment"}
    assert doc["spec"]["scaleTargetRef"]["name"] == "optiflow-eval" in deployments
    assert 1 <= doc["spec"]["minReplicaCount"] < doc["spec"]["maxReplicaCount"]
    # KEDA owns the replica count: no other HPA on the target, and no replicas in the Deployment
    assert not [d for _, d in manifests() if d["kind"] == "HorizontalPodAutoscaler"]
    (eval_deployment,) = [
        d for _, d in manifests() if d["kind"] == "Deployment" and d["metadata"]["name"] == "optiflow-eval"
    ]
    assert "replicas" not in eval_deployment["spec"]


@pytest.mark.parametrize(
    "breakage",
    [
        lambda d: d["spec"].update(minReplicas=1),  # the field is minReplicaCount
        lambda d: d["spec"]["triggers"][0]["metadata"].update(databaseIndex=0),  # metadata are strings
        lambda d: d["spec"]["triggers"][0]["metadata"].update(list_name="x"),  # not a redis parameter
        lambda d: d["spec"].pop("scaleTargetRef"),
        lambda d: d.update(apiVersion="keda.k8s.io/v1alpha1"),  # KEDA 1's group
    ],
)
def test_keda_validation_can_fail(breakage: Any) -> None:
    doc = copy.deepcopy(scaled_objects()[0])
    breakage(doc)
    assert keda_errors(doc)


def check_compose(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_compose_file_follows_the_compose_spec(tmp_path: Path) -> None:
    ok = check_compose(COMPOSE)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE.read_text().replace("    stop_grace_period: 2m", "    stop_grace_periods: 2m"))
    assert broken.read_text() != COMPOSE.read_text()
    bad = check_compose(broken)
    assert bad.returncode != 0
    assert "stop_grace_periods" in bad.stdout
