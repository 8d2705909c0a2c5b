"""Pulumi components that provision a gpuplan plan. The components load Pulumi on first use, so the
pure modules here (config, settings) serve the CLI without it."""

from __future__ import annotations

from importlib import import_module

__all__ = ["Ec2InferenceArgs", "Ec2InferenceServer", "InferenceEndpoint", "InferenceEndpointArgs", "TrainingCluster", "TrainingClusterArgs"]
_HOMES = {"Ec2InferenceServer": "components.ec2_inference", "Ec2InferenceArgs": "components.ec2_inference",
          "InferenceEndpoint": "components.inference", "InferenceEndpointArgs": "components.inference",
          "TrainingCluster": "components.training", "TrainingClusterArgs": "components.training"}


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'components' has no attribute {name!r}")
