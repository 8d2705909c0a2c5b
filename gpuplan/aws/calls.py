"""How gpuplan calls AWS (boto3). The standard AWS environment applies: profile, region, AWS_ENDPOINT_URL. Every call has connect and
read timeouts and a small retry budget, so a dead endpoint fails in seconds, not minutes; each source
(a region's EC2, the Price List API, each preflight check) succeeds or reports "unknown: <reason>" on
its own, and a source that failed is not called again in the same run. Only what no source can work
without (credentials, a profile, a well-formed endpoint URL) stops the command (AwsError, exit 2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import boto3
from botocore.config import Config
from botocore.exceptions import (BotoCoreError, ClientError, ConnectionError, HTTPClientError, NoCredentialsError,
                                 NoRegionError, ProfileNotFound)
from botocore.parsers import ResponseParserError

# A healthy AWS API answers within a second or two; a read that waits 6 s for its first byte is a dead
# endpoint. Three attempts (botocore standard mode: exponential backoff with jitter, ≤ 2 s here) cap a
# dead endpoint at 3 × (3 + 6) s + backoff < 30 s, and it is then marked down for the rest of the run.
CONNECT_TIMEOUT_S, READ_TIMEOUT_S, MAX_ATTEMPTS = 3, 6, 3
RETRIES = Config(connect_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S,
                 retries={"mode": "standard", "total_max_attempts": MAX_ATTEMPTS})
ClientFactory = Callable[[str, str], object]


class AwsError(Exception):
    """What stops every call (credentials, profile, endpoint URL): one line at the CLI edge (exit 2)."""


class Unavailable(Exception):
    """One source could not answer; the caller reports "unknown: <reason>" and goes on."""


def client(service: str, region: str):
    """A boto3 client with timeouts and a retry budget; AWS_ENDPOINT_URL and the profile come from the
    environment."""
    try:
        return boto3.session.Session().client(service, region_name=region, config=RETRIES)
    except ProfileNotFound as exc:
        raise AwsError(f"AWS profile {exc.kwargs.get('profile')!r} not found (AWS_PROFILE; see ~/.aws/config)") from None
    except NoRegionError:
        raise AwsError("no AWS region (set AWS_REGION or pass --region)") from None
    except ValueError as exc:  # botocore: "Invalid endpoint: <url>"
        raise AwsError(f"{str(exc)[:200]} (check AWS_ENDPOINT_URL)") from None


def _throttled(code: str) -> bool:
    return "Throttl" in code or code in ("RequestLimitExceeded", "TooManyRequestsException")


def _reason(exc: Exception) -> str:
    """One short line for a failed call: never a raw body (botocore's parser errors quote it whole;
    its ClientError for an HTML error page already carries only the status line)."""
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code, message = str(error.get("Code") or status or "error"), str(error.get("Message") or "")
        if _throttled(code):
            return f"throttled by AWS ({code}) after {MAX_ATTEMPTS} attempts"
        text = f"{code}: {' '.join(message.split())}" if message else code
        return text if len(text) <= 200 else text[:197] + "..."
    if isinstance(exc, (ConnectionError, HTTPClientError)):
        return f"no answer ({exc.__class__.__name__}: {str(exc)[:160]})"
    if isinstance(exc, ResponseParserError):
        return "the answer was not in the API's format (a proxy or a wrong AWS_ENDPOINT_URL?)"
    return f"{exc.__class__.__name__}: {str(exc)[:160]}"


@dataclass
class Calls:
    """The clients of one run, and the sources that already failed in it (not called again)."""

    make_client: ClientFactory
    down: dict[str, str] = field(default_factory=dict)
    _clients: dict[tuple[str, str], object] = field(default_factory=dict)

    def client(self, service: str, region: str):
        if (service, region) not in self._clients:
            self._clients[(service, region)] = self.make_client(service, region)
        return self._clients[(service, region)]

    @staticmethod
    def _sources(c) -> tuple[str, str]:
        """(endpoint, endpoint + service): a host that does not answer is down for every service on
        it; a service that refuses (denied, throttled, 5xx) is down only itself."""
        meta = getattr(c, "meta", None)
        endpoint = getattr(meta, "endpoint_url", None) or repr(c)
        return endpoint, f"{endpoint} {getattr(getattr(meta, 'service_model', None), 'service_name', '')}"

    def call(self, c, what: str, fn: Callable):
        """fn() on client c; Unavailable(reason) when it fails, AwsError when nothing could succeed."""
        host, service = self._sources(c)
        for source in (host, service):
            if source in self.down:
                raise Unavailable(self.down[source])
        try:
            return fn()
        except NoCredentialsError:
            raise AwsError("no AWS credentials found (set AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
                           "AWS_SECRET_ACCESS_KEY)") from None
        except NoRegionError:
            raise AwsError("no AWS region (set AWS_REGION or pass --region)") from None
        except ProfileNotFound as exc:
            raise AwsError(f"AWS profile {exc.kwargs.get('profile')!r} not found (AWS_PROFILE)") from None
        except (ClientError, BotoCoreError, ResponseParserError) as exc:
            reason = f"{what}: {_reason(exc)}"
            if not isinstance(exc, ClientError):
                self.down[host] = reason
            elif _whole_source(exc):
                self.down[service] = reason
            raise Unavailable(reason) from None

    def pages(self, c, operation: str, key: str, **kwargs) -> list:
        def collect():
            items = []
            for page in c.get_paginator(operation).paginate(**kwargs):
                if key not in page:  # botocore reads an unparseable JSON body as {"message": body}
                    raise ResponseParserError(f"no {key} in the answer")
                items += page[key]
            return items
        return self.call(c, _title(operation), collect)


def _whole_source(exc: ClientError) -> bool:
    """Denied, throttled or broken: every later call to the same endpoint would fail the same way."""
    code = str(exc.response.get("Error", {}).get("Code", ""))
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
    return status >= 500 or status in (401, 403, 429) or _throttled(code) or "Denied" in code \
        or "Unauthorized" in code or code in ("InvalidClientTokenId", "AuthFailure")


def _title(operation: str) -> str:
    """describe_instance_types → DescribeInstanceTypes, as AWS names the API."""
    return "".join(part.capitalize() for part in operation.split("_")).replace("Aws", "AWS")
