"""The one place gpuplan talks to AWS (boto3); planning never imports it. `calls` holds the client
with its timeouts and retry budget and the per-source failure handling; `refresh` and `preflight`
are the two commands built on it."""

from gpuplan.aws.calls import (CONNECT_TIMEOUT_S, MAX_ATTEMPTS, READ_TIMEOUT_S, RETRIES, AwsError, Unavailable,
                               client)
from gpuplan.aws.preflight import EC2_QUOTAS, Check, preflight, quota_group
from gpuplan.aws.refresh import EC2_PRICE_FILTERS, PRICING_REGION, Change, Refresh, refresh_catalog

__all__ = ["CONNECT_TIMEOUT_S", "EC2_PRICE_FILTERS", "EC2_QUOTAS", "MAX_ATTEMPTS", "PRICING_REGION", "READ_TIMEOUT_S",
           "RETRIES", "AwsError", "Change", "Check", "Refresh", "Unavailable", "client", "preflight", "quota_group",
           "refresh_catalog"]
