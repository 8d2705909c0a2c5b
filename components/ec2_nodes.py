"""What every gpuplan EC2 node group shares, training cluster and EC2 serving alike: the instance role's
trust, the AMI resolved once, IMDSv2 only, and the reservation a launch template targets."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

# IMDSv2 only; hop limit 1: containers on the node cannot reach the instance role's credentials.
IMDSV2_ONLY = {"http_tokens": "required", "http_endpoint": "enabled", "http_put_response_hop_limit": 1}
EC2_TRUST = {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


def node_role(name: str, tags: dict[str, str], opts: pulumi.ResourceOptions) -> aws.iam.Role:
    return aws.iam.Role(f"{name}-role", assume_role_policy=json.dumps(EC2_TRUST), tags=tags, opts=opts)


def node_ami(parent: pulumi.Resource, ami_id: str | None, ami_parameter: str) -> tuple[pulumi.Output, pulumi.ResourceOptions]:
    """The AMI and the launch template's options: a pinned `ami_id` as given; else the SSM parameter read
    once, the template ignoring later changes of it, so an SSM update never rolls the nodes until an
    amiId pins the new image."""
    if ami_id:
        return pulumi.Output.from_input(ami_id), pulumi.ResourceOptions(parent=parent)
    parameter = aws.ssm.get_parameter_output(name=ami_parameter, with_decryption=False,
                                             opts=pulumi.InvokeOutputOptions(parent=parent))
    return parameter.insecure_value, pulumi.ResourceOptions(parent=parent, ignore_changes=["imageId"])


def reservation_settings(capacity_block_id: str | None, capacity_reservation_id: str | None) -> dict:
    """The launch template's settings for an On-Demand Capacity Reservation or a Capacity Block for ML."""
    settings: dict = {}
    reservation = capacity_block_id or capacity_reservation_id
    if reservation:
        settings["capacity_reservation_specification"] = {
            "capacity_reservation_target": {"capacity_reservation_id": reservation}}
    if capacity_block_id:
        settings["instance_market_options"] = {"market_type": "capacity-block"}
    return settings
