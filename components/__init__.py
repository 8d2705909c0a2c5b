"""Pulumi components that provision a gpuplan plan."""

from components.inference import InferenceEndpoint, InferenceEndpointArgs
from components.training import TrainingCluster, TrainingClusterArgs

__all__ = ["InferenceEndpoint", "InferenceEndpointArgs", "TrainingCluster", "TrainingClusterArgs"]
