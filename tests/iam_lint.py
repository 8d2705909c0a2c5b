"""parliament (duo-labs' IAM policy linter) over a policy document: unknown actions, conditions that do
not apply to an action, resources an action cannot take, `*` where resource-level permissions exist.

parliament 1.6 imports `pkg_resources` for two data-file paths; setuptools 81 removed that module, so
where it is absent a stand-in with the one function parliament calls resolves them through importlib."""

from __future__ import annotations

import importlib.resources
import json
import sys
import types


def _parliament():
    try:
        import pkg_resources  # noqa: F401
    except ModuleNotFoundError:
        shim = types.ModuleType("pkg_resources")
        shim.resource_filename = lambda package, name: str(importlib.resources.files(package).joinpath(name))
        sys.modules["pkg_resources"] = shim
    import parliament

    return parliament


def lint_policy(document: dict) -> list[str]:
    """Every finding parliament reports for an identity policy, as `ISSUE: detail` lines."""
    policy = _parliament().analyze_policy_string(json.dumps(document))
    return [f"{finding.issue}: {finding.detail}" for finding in policy.findings]
