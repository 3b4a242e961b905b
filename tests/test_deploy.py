"""The deployment files checked offline, since no test here can start Docker or a cluster.

* ``.dockerignore``: read as Docker reads it, it sends what ``deploy/Dockerfile`` copies and none of the
  local environments, caches and data (every path ``.gitignore`` ignores in this tree).
* ``deploy/k8s/``: every manifest validates against the Kubernetes JSON schemas of ``kubernetes-validate``
  (strict: an unknown or misspelt field fails), and what the manifests say agrees with the code — the
  command, the ports the server listens on and its probes ask, the health services, the environment
  variables the commands read, the image's user — and the Secret templates hold no secret.
* ``deploy/compose.yaml``: its health check runs ``uno-audit health`` against the port the image serves
  on, no secret has a default, and the service logs in as its restricted login.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate  # type: ignore[import-untyped]
import pathspec
import pytest
import yaml

from service.api.server import AUDIT_SERVICE_NAME, GRACE_SECONDS, PROJECTIONS_SERVICE, SERVICE_NAME
from service.checkpoints import KEY_ENV
from service.cli.main import build_parser
from service.cli.options import SERVICE_PASSWORD_ENV
from service.cli.serve import ADMIN_TOKEN_ENV, MIN_ADMIN_TOKEN
from service.store.migrate import SERVICE_LOGIN

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
DOCKERFILE = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
PLACEHOLDER = "REPLACE_ME"
#: The oldest Kubernetes whose gRPC probes are generally available, and the newest the schemas know.
KUBERNETES_VERSIONS = ["1.27", kubernetes_validate.latest_version()]
#: Read by libpq itself, not by uno-audit's code.
LIBPQ_VARIABLES = {"PGPASSWORD"}


# --- .dockerignore -----------------------------------------------------------------------------------


def _docker_patterns() -> list[tuple[bool, pathspec.PathSpec[pathspec.Pattern]]]:
    """``.dockerignore``'s patterns in order, each as (is an exception ``!``, its matcher). Docker anchors
    every pattern at the root of the context (``.venv`` is the root's only; ``**/`` reaches deeper),
    where git would match a bare name at any depth: each pattern is anchored with a leading ``/``."""
    patterns: list[tuple[bool, pathspec.PathSpec[pathspec.Pattern]]] = []
    for raw in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        pattern = "/" + line.removeprefix("!").lstrip("/")
        patterns.append((exception, pathspec.PathSpec.from_lines("gitignore", [pattern])))
    return patterns


DOCKER_PATTERNS = _docker_patterns()


def _sent(path: str) -> bool:
    """Whether ``docker build`` sends ``path`` (relative to the root): as Docker's pattern matcher does, a
    pattern applies when it matches the path or one of its parent folders, and the last one that applies
    decides (an exception sends, any other pattern keeps out)."""
    parts = PurePosixPath(path).parts
    prefixes = ["/".join(parts[: end + 1]) for end in range(len(parts))]
    sent = True
    for exception, spec in DOCKER_PATTERNS:
        if any(spec.match_file(prefix) for prefix in prefixes):
            sent = exception
    return sent


def _git_ignored() -> Iterator[str]:
    """Every path of this working tree that ``.gitignore`` ignores (a folder once, with a file name under
    it, not descended into), and ``.git`` itself: local environments, caches and data."""
    spec = pathspec.GitIgnoreSpec.from_lines((ROOT / ".gitignore").read_text(encoding="utf-8").splitlines())
    for folder, subfolders, files in os.walk(ROOT):
        relative = Path(folder).relative_to(ROOT).as_posix()
        prefix = "" if relative == "." else f"{relative}/"
        for name in list(subfolders):
            if name == ".git" or spec.match_file(f"{prefix}{name}/"):
                subfolders.remove(name)
                yield f"{prefix}{name}/any-file"
        yield from (f"{prefix}{name}" for name in files if spec.match_file(f"{prefix}{name}"))


def _copied() -> list[str]:
    """The sources of the Dockerfile's COPY lines (the last word of each is the destination)."""
    sources = []
    for line in DOCKERFILE.splitlines():
        words = line.split()
        if words and words[0] == "COPY":
            sources += [word for word in words[1:-1] if not word.startswith("--")]
    return sources


@pytest.mark.parametrize(
    "path",
    [
        ".git/HEAD",
        ".venv/bin/python",
        ".venv-ci/bin/python",
        "uno-audit-data/PG_VERSION",
        "records-out/classic-4p-seed0.jsonl",
        "service/__pycache__/cli.cpython-311.pyc",
        "projections/rebuild.pyc",
        "uno_audit.egg-info/PKG-INFO",
        "clients/python/src/uno_audit_client.egg-info/PKG-INFO",
        "clients/python/build/lib/uno_audit_client/client.py",
        "clients/python/src/uno_audit_client/__pycache__/client.cpython-311.pyc",
        ".mypy_cache/3.11/cache.db",
        ".pytest_cache/v/cache/lastfailed",
        ".hypothesis/examples/x",
        "tests/conftest.py",
        "deploy/k8s/secrets.example.yaml",
    ],
)
def test_the_build_context_leaves_out_environments_caches_data_and_what_the_image_does_not_copy(
    path: str,
) -> None:
    assert not _sent(path)


def test_the_build_context_leaves_out_everything_git_ignores_here() -> None:
    ignored = list(_git_ignored())
    assert ".git/any-file" in ignored
    assert [path for path in ignored if _sent(path)] == []


def test_the_build_context_holds_every_file_the_dockerfile_copies() -> None:
    sources = _copied()
    assert {"pyproject.toml", "README.md", "service", "projections", "clients/python"} <= set(sources)
    git = pathspec.GitIgnoreSpec.from_lines((ROOT / ".gitignore").read_text(encoding="utf-8").splitlines())
    for source in sources:
        found = [ROOT / source] if (ROOT / source).is_file() else (ROOT / source).rglob("*")
        files = [path.relative_to(ROOT).as_posix() for path in found if path.is_file()]
        assert files, source
        assert [path for path in files if not git.match_file(path) and not _sent(path)] == []


def test_the_image_copies_every_folder_the_install_takes_packages_from() -> None:
    """``pip install .`` in the image finds the packages pyproject names where pyproject looks for them:
    the client package (the generated gRPC code) under clients/python too, copied before the install."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        find = tomllib.load(file)["tool"]["setuptools"]["packages"]["find"]
    sources = _copied()
    install = DOCKERFILE.index("pip install")
    for where in find["where"]:
        if where != ".":
            assert where.removesuffix("/src") in sources or where in sources, where
            assert DOCKERFILE.index(f"COPY {where.removesuffix('/src')}") < install, where
    for top in ("service", "projections", "uno_audit_client"):
        assert any(include.startswith(top) for include in find["include"]), top
        assert any((ROOT / where / top / "__init__.py").is_file() for where in find["where"]), top


# --- Kubernetes manifests ------------------------------------------------------------------------------


def _documents(name: str) -> list[dict[str, Any]]:
    with (K8S / name).open(encoding="utf-8") as file:
        return [document for document in yaml.safe_load_all(file) if document is not None]


def _one(name: str, kind: str) -> dict[str, Any]:
    [found] = [document for document in _documents(name) if document["kind"] == kind]
    return found


MANIFESTS = sorted(path.name for path in K8S.glob("*.yaml") if path.name != "kustomization.yaml")
DEPLOYMENT = _one("deployment.yaml", "Deployment")
JOB = _one("migrate-job.yaml", "Job")
SERVICE = _one("service.yaml", "Service")
SECRETS = {secret["metadata"]["name"]: secret for secret in _documents("secrets.example.yaml")}
[SERVER] = DEPLOYMENT["spec"]["template"]["spec"]["containers"]
[MIGRATE] = JOB["spec"]["template"]["spec"]["containers"]


def _parse(args: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    """``args`` as ``uno-audit`` reads them in a container whose environment is ``env`` and nothing of
    this one's: options take their defaults from the environment (``migrate`` needs a database URL from
    one or the other), and a flag that does not exist is an error (exit 2)."""
    for name in list(os.environ):
        if name == "DATABASE_URL" or name.startswith("UNO_AUDIT_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return build_parser().parse_args(args)


def _template_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's environment with the Secret templates' values."""
    return {name: SECRETS[secret]["stringData"][key] for name, (secret, key) in _env(container).items()}


def _port(address: str) -> int:
    return int(address.rpartition(":")[2])


def _container_port(container: dict[str, Any], name: str) -> int:
    [port] = [port["containerPort"] for port in container["ports"] if port["name"] == name]
    return int(port)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("name", MANIFESTS)
def test_every_manifest_is_valid_for_kubernetes(name: str, version: str) -> None:
    documents = _documents(name)
    assert documents
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)
        assert "namespace" not in document["metadata"], "the manifests take the namespace they are applied to"


def test_the_schemas_refuse_a_misspelt_field() -> None:
    """The validation above can fail: a probe under a misspelt key is an unknown field."""
    broken = json.loads(json.dumps(DEPLOYMENT))
    container = broken["spec"]["template"]["spec"]["containers"][0]
    container["readinesProbe"] = container.pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(broken, KUBERNETES_VERSIONS[-1], strict=True)


def test_the_kustomization_applies_every_manifest_but_the_secret_templates() -> None:
    with (K8S / "kustomization.yaml").open(encoding="utf-8") as file:
        kustomization = yaml.safe_load(file)
    assert sorted(kustomization["resources"]) == [
        name for name in MANIFESTS if name != "secrets.example.yaml"
    ]
    assert [image["name"] for image in kustomization["images"]] == ["uno-audit"]


def test_the_deployment_runs_serve_and_probes_the_port_it_listens_on(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SERVER["command"] == ["uno-audit"]
    args = _parse(SERVER["args"], _template_env(SERVER), monkeypatch)
    assert args.command == "serve"
    grpc_port = _container_port(SERVER, "grpc")
    assert _port(args.listen) == grpc_port
    assert _port(args.metrics_listen) == _container_port(SERVER, "metrics")

    probes = {kind: SERVER[kind]["grpc"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert {probe["port"] for probe in probes.values()} == {grpc_port}
    assert probes["readinessProbe"]["service"] == SERVICE_NAME
    # Alive is the whole server answering; every name asked about is one the server reports on.
    assert probes["livenessProbe"]["service"] == ""
    served = {"", SERVICE_NAME, AUDIT_SERVICE_NAME, PROJECTIONS_SERVICE}
    assert {probe["service"] for probe in probes.values()} <= served

    targets = {port["name"]: port["targetPort"] for port in SERVICE["spec"]["ports"]}
    assert targets == {"grpc": "grpc", "metrics": "metrics"}
    template = DEPLOYMENT["spec"]["template"]
    assert SERVICE["spec"]["selector"] == DEPLOYMENT["spec"]["selector"]["matchLabels"]
    assert SERVICE["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert template["spec"]["terminationGracePeriodSeconds"] > GRACE_SECONDS


def test_the_migration_job_runs_migrate_with_the_services_image(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MIGRATE["command"] == ["uno-audit"]
    assert _parse(MIGRATE["args"], _template_env(MIGRATE), monkeypatch).command == "migrate"
    assert JOB["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert MIGRATE["image"] == SERVER["image"]


def test_the_image_is_this_version_of_the_dockerfiles_command() -> None:
    with (ROOT / "pyproject.toml").open("rb") as file:
        version = tomllib.load(file)["project"]["version"]
    assert SERVER["image"] == f"uno-audit:{version}"
    assert 'ENTRYPOINT ["uno-audit"]' in DOCKERFILE


@pytest.mark.parametrize("manifest", [DEPLOYMENT, JOB], ids=["deployment", "job"])
def test_the_pods_run_as_the_images_user_read_only_with_resources(manifest: dict[str, Any]) -> None:
    [uid] = re.findall(r"useradd .*--uid (\d+)", DOCKERFILE)
    pod = manifest["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(uid)
    assert pod["automountServiceAccountToken"] is False
    for container in pod["containers"]:
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        for bound in ("requests", "limits"):
            assert set(container["resources"][bound]) == {"cpu", "memory"}


def _env(container: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The container's variables, each as the (Secret, key) it comes from."""
    return {
        item["name"]: (item["valueFrom"]["secretKeyRef"]["name"], item["valueFrom"]["secretKeyRef"]["key"])
        for item in container["env"]
    }


def test_the_environment_names_are_the_ones_the_commands_read() -> None:
    server, migrate = _env(SERVER), _env(MIGRATE)
    assert {"DATABASE_URL", ADMIN_TOKEN_ENV, KEY_ENV} <= server.keys()
    assert {"DATABASE_URL", SERVICE_PASSWORD_ENV} <= migrate.keys()
    # The commands' own variables, and the signing key's, which serve reads through the checkpoints' keys.
    sources = [*(ROOT / "service" / "cli").glob("*.py"), ROOT / "service" / "checkpoints" / "keys.py"]
    cli = "".join(path.read_text(encoding="utf-8") for path in sources)
    read = set(re.findall(r'"([A-Z][A-Z0-9_]+)"', cli)) | LIBPQ_VARIABLES
    assert (server.keys() | migrate.keys()) - read == set()
    # The login is made with the password the service logs in with, and only the Job sees the owner's.
    assert migrate[SERVICE_PASSWORD_ENV] == server["PGPASSWORD"]
    assert {secret for secret, _ in server.values()} == {"uno-audit"}


def test_every_secret_named_is_in_the_templates_and_the_service_logs_in_as_its_own_login() -> None:
    for secret, key in [*_env(SERVER).values(), *_env(MIGRATE).values()]:
        assert key in SECRETS[secret]["stringData"], (secret, key)
    server_secret, _ = _env(SERVER)["DATABASE_URL"]
    owner_secret, _ = _env(MIGRATE)["DATABASE_URL"]
    assert urlsplit(SECRETS[server_secret]["stringData"]["database-url"]).username == SERVICE_LOGIN
    assert urlsplit(SECRETS[owner_secret]["stringData"]["database-url"]).username != SERVICE_LOGIN


def test_the_secret_templates_hold_no_secret() -> None:
    for secret in SECRETS.values():
        assert "data" not in secret, "base64 data would hide what it holds: stringData only"
        for key, value in secret["stringData"].items():
            if key != "database-url":
                assert value == PLACEHOLDER, (secret["metadata"]["name"], key)
            else:
                assert urlsplit(value).password is None


def test_the_deployment_left_with_the_placeholders_does_not_start() -> None:
    """The container's own command with the template's values: serve refuses the placeholder token
    before it connects anywhere."""
    assert len(PLACEHOLDER) < MIN_ADMIN_TOKEN
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and not k.startswith("UNO_AUDIT_")}
    env |= _template_env(SERVER)
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", *SERVER["args"]],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert f"admin token in ${ADMIN_TOKEN_ENV} is shorter than" in done.stderr


# --- compose -------------------------------------------------------------------------------------------

COMPOSE_TEXT = (DEPLOY / "compose.yaml").read_text(encoding="utf-8")
COMPOSE = yaml.safe_load(COMPOSE_TEXT)["services"]


def test_compose_checks_the_service_with_the_health_command_on_the_port_it_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = COMPOSE["uno-audit"]["environment"]
    test = COMPOSE["uno-audit"]["healthcheck"]["test"]
    assert test[:2] == ["CMD", "uno-audit"]
    args = _parse(test[2:], env, monkeypatch)
    assert args.command == "health"
    assert args.service == ""
    [command] = [line for line in DOCKERFILE.splitlines() if line.startswith("CMD ")]
    serve = _parse(json.loads(command.removeprefix("CMD ")), env, monkeypatch)
    assert serve.command == "serve"
    assert _port(args.server) == _port(serve.listen)


def _strings(node: Any) -> Iterator[str]:
    """Every key and value of a parsed YAML document that is text (compose interpolates each)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, str):
        yield node


def test_compose_gives_no_variable_a_default() -> None:
    """Every ``${...}`` must be set (``:?``): a default would give a password or the admin token a
    value everyone can read here."""
    texts = list(_strings(yaml.safe_load(COMPOSE_TEXT)))
    found = [match for text in texts for match in re.findall(r"\$\{([^}]*)\}", text)]
    assert found
    assert [text for text in found if not re.fullmatch(r"[A-Z_][A-Z0-9_]*:\?.+", text)] == []
    assert [text for text in texts if re.search(r"(?<!\$)\$(?![{$])", text)] == []
    for service in COMPOSE.values():
        for name, value in service.get("environment", {}).items():
            if re.search("PASSWORD|TOKEN", name):
                assert re.fullmatch(r"\$\{[A-Z_0-9]+:\?[^}]+\}", value), name


def test_compose_migrates_as_the_owner_and_serves_as_the_restricted_login(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    migrate, served = COMPOSE["migrate"], COMPOSE["uno-audit"]
    assert _parse(migrate["command"], migrate["environment"], monkeypatch).command == "migrate"
    owner = COMPOSE["postgres"]["environment"]["POSTGRES_USER"]
    assert urlsplit(migrate["environment"]["DATABASE_URL"]).username == owner
    assert urlsplit(served["environment"]["DATABASE_URL"]).username == SERVICE_LOGIN
    assert served["environment"]["PGPASSWORD"] == migrate["environment"][SERVICE_PASSWORD_ENV]
    assert migrate["environment"]["PGPASSWORD"] == COMPOSE["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert served["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
