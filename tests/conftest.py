from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from planner.hardware.catalog import bundled
from planner.workload.presets import presets
from planner.workload.spec import parse_workloads

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def catalog():
    return bundled()


@pytest.fixture(scope="session")
def arch():
    return presets()


@pytest.fixture(scope="session")
def moto_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("moto_server did not start")
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def aws_env(moto_server, monkeypatch, tmp_path):
    urllib.request.urlopen(urllib.request.Request(f"{moto_server}/moto-api/reset", method="POST"))
    for key, value in {"AWS_ENDPOINT_URL": moto_server, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_CONFIG_FILE": str(tmp_path / "none"),
                       "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return moto_server


def workload(**fields):
    """One validated Workload from keyword fields (YAML-shaped dicts)."""
    return parse_workloads({"workloads": [{"name": "w", **fields}]}, "test.yaml").workloads[0]


def write_yaml(path: Path, data) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
