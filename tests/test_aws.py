"""Catalog refresh and preflight against a real moto_server on 127.0.0.1 (EC2 over HTTP through
AWS_ENDPOINT_URL), with botocore's Stubber for the APIs moto lacks (Pricing; EC2 and SageMaker
Service Quotas) in their real response shapes, PriceList JSON strings and pagination included."""

from __future__ import annotations

import json

import boto3
import yaml
from botocore.awsrequest import AWSResponse
from botocore.stub import Stubber
from typer.testing import CliRunner

from gpuplan.cli import app
from gpuplan import aws
from planner import plan_file
from tests.conftest import write_yaml

runner = CliRunner()


def price_item(service: str, attributes: dict, usd: str | None) -> str:
    """One PriceList entry as the Price List API returns it: a JSON document in a string."""
    sku = "SKU" + str(abs(hash(json.dumps(attributes, sort_keys=True))))[:8]
    terms = {} if usd is None else {"OnDemand": {f"{sku}.JRTCKXETXF": {
        "offerTermCode": "JRTCKXETXF", "sku": sku, "effectiveDate": "2025-06-01T00:00:00Z", "termAttributes": {},
        "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
            "unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": [], "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7",
            "description": f"${usd} per On Demand Linux hour", "pricePerUnit": {"USD": usd}}}}}}
    family = "ML Instance" if service == "AmazonSageMaker" else "Compute Instance"
    return json.dumps({"product": {"productFamily": family, "attributes": attributes, "sku": sku},
                       "serviceCode": service, "terms": terms, "version": "20251130000000",
                       "publicationDate": "2025-11-30T00:00:00Z"})


def filters(values: dict) -> list[dict]:
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in values.items()]


def stubbed_pricing(prices: dict[str, tuple[str | None, str | None]], region: str = "us-east-1"):
    """Responses in call order: per type, EC2 (split over two pages) then SageMaker hosting."""
    pricing = boto3.client("pricing", region_name="us-east-1")
    stub = Stubber(pricing)
    for name, (ec2_usd, sm_usd) in prices.items():
        ec2_filters = filters({"regionCode": region, "instanceType": name, **aws.EC2_PRICE_FILTERS})
        reserved = price_item("AmazonEC2", {"instanceType": name, "regionCode": region, "tenancy": "Shared"}, None)
        stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [reserved], "NextToken": "page-2"},
                          {"ServiceCode": "AmazonEC2", "Filters": ec2_filters, "FormatVersion": "aws_v1"})
        stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [] if ec2_usd is None else [
            price_item("AmazonEC2", {"instanceType": name, "regionCode": region, "operatingSystem": "Linux"}, ec2_usd)]},
                          {"ServiceCode": "AmazonEC2", "Filters": ec2_filters, "FormatVersion": "aws_v1", "NextToken": "page-2"})
        sm_filters = filters({"regionCode": region, "instanceName": f"ml.{name}", "component": "Hosting"})
        stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [] if sm_usd is None else [
            price_item("AmazonSageMaker", {"instanceName": f"ml.{name}", "component": "Hosting", "regionCode": region}, sm_usd)]},
                          {"ServiceCode": "AmazonSageMaker", "Filters": sm_filters, "FormatVersion": "aws_v1"})
    stub.activate()
    return pricing, stub


def factory(monkeypatch, **stubbed):
    def make(service: str, region: str):
        return stubbed[service] if service in stubbed else boto3.session.Session().client(
            service, region_name=region, config=aws.RETRIES)
    monkeypatch.setattr(aws.calls, "client", make)


def test_refresh_builds_a_catalog_from_moto_and_the_price_list(aws_env, monkeypatch, tmp_path):
    pricing, stub = stubbed_pricing({"p5.48xlarge": ("50.0000000000", None), "g5.xlarge": ("1.0060000000", "1.4084000000")})
    factory(monkeypatch, pricing=pricing)
    out = tmp_path / "fresh.yaml"
    result = runner.invoke(app, ["catalog", "refresh", "--region", "us-east-1", "--type", "p5.48xlarge",
                                 "--type", "g5.xlarge", "--out", str(out), "--accept-changes"])
    assert result.exit_code == 0, result.output
    stub.assert_no_pending_responses()
    assert "p5.48xlarge: us-east-1 EC2 on-demand $55.04 → $50/h (-9.2%)" in result.output
    # moto's spot history answers $0.00001/h: accepted only because the test says so
    assert "accepted: g5.xlarge us-east-1 ec2 spot: $1e-05/h is $1e-05 per device-hour, below the $0.05 floor" \
        in result.output
    data = yaml.safe_load(out.read_text())
    moto_types = {t["InstanceType"]: t for t in boto3.client("ec2", region_name="us-east-1").describe_instance_types(
        InstanceTypes=["p5.48xlarge", "g5.xlarge"])["InstanceTypes"]}
    types = {t["name"]: t for t in data["instance_types"]}
    for name in ("p5.48xlarge", "g5.xlarge"):
        gpus = moto_types[name]["GpuInfo"]["Gpus"][0]
        assert types[name]["accelerators_per_node"] == gpus["Count"]
        accel = next(a for a in data["accelerators"] if a["name"] == types[name]["accelerator"])
        assert accel["memory_mib"] == gpus["MemoryInfo"]["SizeInMiB"]
        assert types[name]["vcpus"] == moto_types[name]["VCpuInfo"]["DefaultVCpus"]
        assert types[name]["efa"] == moto_types[name]["NetworkInfo"]["EfaSupported"]
        assert types[name]["offered_regions"] == ["us-east-1"]
        assert data["sources"][types[name]["source"]].startswith("EC2 DescribeInstanceTypes")
    p5 = types["p5.48xlarge"]["prices"]["us-east-1"]["ec2"]
    assert p5["on_demand"] == 50.0 and p5["date"] and "Price List" in data["sources"][p5["source"]]
    assert types["g5.xlarge"]["prices"]["us-east-1"]["sagemaker"]["on_demand"] == 1.4084
    assert types["p5.48xlarge"]["network_cards"] == moto_types["p5.48xlarge"]["NetworkInfo"]["MaximumNetworkCards"]
    # what the Price List refresh does not fetch stays, still naming its own source and date
    assert (p5["reserved_3y"], p5["savings_plan_3y"], p5["capacity_block"], p5["spot_interruption"]) == \
        (23.77728, 23.77728, 39.33, "5-10%")
    assert p5["provenance"]["capacity_block"]["date"] == "2024-12-31"
    assert "Spot Instance Advisor" in data["sources"][p5["provenance"]["reserved_3y"]["source"]]
    # the planner reads the refreshed catalog
    spec = write_yaml(tmp_path / "w.yaml", {"workloads": [{"name": "t", "kind": "inference", "model": {"preset": "llama-3-70b"},
                                                            "constraints": {"instance_types": ["p5.48xlarge"], "deploy_target": "ec2"}}]})
    plan = json.loads(runner.invoke(app, ["plan", str(spec), "--catalog", str(out), "--format", "json"]).output)
    assert plan["plans"][0]["cost"]["instances_usd_per_hour"] == 50.0 * plan["plans"][0]["choice"]["nodes"]


def test_a_denied_source_keeps_its_figures_and_the_others_refresh(aws_env, monkeypatch, tmp_path):
    """No Pricing is no prices, not no catalog: EC2's answers still land (issue 11)."""
    pricing = boto3.client("pricing", region_name="us-east-1")
    stub = Stubber(pricing)
    stub.add_client_error("get_products", "AccessDeniedException", "User is not authorized to perform: pricing:GetProducts",
                          http_status_code=400)
    stub.activate()
    factory(monkeypatch, pricing=pricing)
    out = tmp_path / "x.yaml"
    result = runner.invoke(app, ["catalog", "refresh", "--region", "us-east-1", "--type", "g5.xlarge", "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert ("warning: Price List API: unknown: GetProducts: AccessDeniedException: User is not authorized to perform: "
            "pricing:GetProducts; prices kept from the base catalog") in result.output
    assert "error: 1 source(s) did not answer; their figures are the base catalog's" in result.output
    g5 = next(t for t in yaml.safe_load(out.read_text())["instance_types"] if t["name"] == "g5.xlarge")
    assert g5["source"].startswith("src-ec2-us-east-1-")  # specs refreshed from EC2
    assert g5["prices"]["us-east-1"]["ec2"]["on_demand"] == 1.006  # the bundled price, kept
    assert "Traceback" not in result.output


def test_missing_credentials_is_one_message(monkeypatch, tmp_path):
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    result = runner.invoke(app, ["catalog", "refresh", "--region", "us-east-1", "--type", "g5.xlarge",
                                 "--out", str(tmp_path / "x.yaml")])
    assert result.exit_code == 2
    assert "no AWS credentials found" in result.output and "Traceback" not in result.output


def quotas_stub(ec2_vcpus: float | None, sagemaker: dict[str, float] | None = None):
    quotas = boto3.client("service-quotas", region_name="us-east-1")
    stub = Stubber(quotas)
    if sagemaker is not None:
        items = [{"ServiceCode": "sagemaker", "ServiceName": "Amazon SageMaker", "QuotaArn": f"arn:aws:servicequotas:us-east-1:123456789012:sagemaker/L-{i:08d}",
                  "QuotaCode": f"L-{i:08d}", "QuotaName": name, "Value": value, "Unit": "None", "Adjustable": True,
                  "GlobalQuota": False} for i, (name, value) in enumerate(sagemaker.items())]
        stub.add_response("list_service_quotas", {"Quotas": items[:1], "NextToken": "next"}, {"ServiceCode": "sagemaker"})
        stub.add_response("list_service_quotas", {"Quotas": items[1:]}, {"ServiceCode": "sagemaker", "NextToken": "next"})
    if ec2_vcpus is not None:
        stub.add_response("get_service_quota", {"Quota": {
            "ServiceCode": "ec2", "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)", "QuotaCode": "L-417A185B",
            "QuotaArn": "arn:aws:servicequotas:us-east-1:123456789012:ec2/L-417A185B",
            "QuotaName": "Running On-Demand P instances", "Value": ec2_vcpus, "Unit": "None", "Adjustable": True,
            "GlobalQuota": False}}, {"ServiceCode": "ec2", "QuotaCode": "L-417A185B"})
    stub.activate()
    return quotas


def ec2_with_reservations(available: int):
    """A moto-backed EC2 client; DescribeCapacityReservations, which moto lacks, answers in its real shape."""
    ec2 = boto3.session.Session().client("ec2", region_name="us-east-1", config=aws.RETRIES)
    body = {"CapacityReservations": [{"CapacityReservationId": "cr-0123456789abcdef0", "InstanceType": "p4d.24xlarge",
                                      "AvailabilityZone": "us-east-1a", "TotalInstanceCount": available,
                                      "AvailableInstanceCount": available, "State": "active"}]}
    ec2.meta.events.register("before-call.ec2.DescribeCapacityReservations",
                             lambda **_: (AWSResponse(None, 200, {}, None), body))
    return ec2


def training_stack(tmp_path, subnet: str, nodes: int):
    return write_yaml(tmp_path / "Pulumi.dev.yaml", {"config": {
        "aws:region": "us-east-1", "gpuplan:subnetIds": [subnet],
        "gpuplan:workloads": [{"name": "train", "kind": "training", "model": {"preset": "llama-3-8b"},
                               "training": {"tokens": 1e9, "sequence_length": 2048},
                               "constraints": {"instance_types": ["p4d.24xlarge"]}, "layout": {"nodes": nodes}}]}})


def subnet_in(zone: str) -> str:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    return ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone=zone)["Subnet"]["SubnetId"]


def p4d_zones() -> list[str]:
    offers = boto3.client("ec2", region_name="us-east-1").describe_instance_type_offerings(
        LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": ["p4d.24xlarge"]}])
    return sorted(o["Location"] for o in offers["InstanceTypeOfferings"])


def test_preflight_passes_with_quota_and_offering(aws_env, monkeypatch, tmp_path):
    zones = p4d_zones()
    assert zones  # moto carries AWS's real offerings
    factory(monkeypatch, **{"service-quotas": quotas_stub(ec2_vcpus=96.0), "ec2": ec2_with_reservations(1)})
    result = runner.invoke(app, ["preflight", str(training_stack(tmp_path, subnet_in(zones[0]), nodes=1))])
    assert result.exit_code == 0, result.output
    assert "Running On-Demand P instances" in result.output and "96 vCPUs" in result.output


def test_preflight_fails_on_quota_and_subnet_zone(aws_env, monkeypatch, tmp_path):
    zones = p4d_zones()
    all_zones = [z["ZoneName"] for z in boto3.client("ec2", region_name="us-east-1").describe_availability_zones()["AvailabilityZones"]]
    elsewhere = next(z for z in all_zones if z not in zones)
    factory(monkeypatch, **{"service-quotas": quotas_stub(ec2_vcpus=96.0), "ec2": ec2_with_reservations(0)})
    result = runner.invoke(app, ["preflight", str(training_stack(tmp_path, subnet_in(elsewhere), nodes=2))])
    assert result.exit_code == 1
    assert "request Running On-Demand P instances (L-417A185B) ≥ 192 vCPUs in Service Quotas (us-east-1)" in result.output
    assert f"use a subnet in {', '.join(zones)}" in result.output


def test_preflight_sagemaker_endpoint_quota_is_paged(aws_env, monkeypatch, tmp_path):
    spec = write_yaml(tmp_path / "w.yaml", {"workloads": [{"name": "chat", "kind": "inference", "model": {"preset": "llama-3-8b"},
                                                           "constraints": {"instance_types": ["g5.2xlarge"]}}]})
    nodes = plan_file(spec).plans[0].choice.nodes
    # the ml.g5.2xlarge quota sits on the second page: only complete paging finds it
    quotas = quotas_stub(None, {"ml.g5.xlarge for endpoint usage": 4.0, "ml.g5.2xlarge for endpoint usage": nodes - 1.0})
    factory(monkeypatch, **{"service-quotas": quotas, "ec2": ec2_with_reservations(0)})
    result = runner.invoke(app, ["preflight", str(spec)])
    assert result.exit_code == 1
    assert f"{nodes - 1:g} (L-00000001)" in result.output
    assert f"request ml.g5.2xlarge for endpoint usage ≥ {nodes} in Service Quotas (us-east-1, L-00000001)" in result.output
