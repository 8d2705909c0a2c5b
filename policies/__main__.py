"""The gpuplan CrossGuard policy pack: `pulumi preview --policy-pack policies`."""

from pulumi_policy import PolicyPack

from policies.pack import build_policies

PolicyPack(name="gpuplan", policies=build_policies())
