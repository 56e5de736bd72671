"""Where a Bedrock profile's requests go and which region signs them, from the profile and the
environment as the AWS SDKs read them. Pure: no file, no network (a region that only the
shared config file names is read later, off the event loop, with the credentials)."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.exceptions import ConfigError

#: The service's own endpoint variable first, then the one for every AWS service.
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "AWS_ENDPOINT_URL")
#: Region variables, in the order the AWS SDKs read them.
REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")

# bedrock-runtime.us-west-2.amazonaws.com, bedrock-runtime-fips.us-east-1.amazonaws.com,
# vpce-0a1b.bedrock-runtime.eu-central-1.vpce.amazonaws.com, ...amazonaws.com.cn
_REGION_IN_HOST = re.compile(r"(?:^|\.)bedrock-runtime(?:-fips)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.")
_REGION = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+$")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """The runtime endpoint's URL (None: the region's public one, once the region is known),
    the signing region (None: the shared config file's, read with the credentials) and the
    named profile of the shared files (None: ``AWS_PROFILE`` or the default)."""

    url: str | None
    region: str | None
    profile: str | None

    def with_region(self, region: str) -> Endpoint:
        return Endpoint(self.url, region, self.profile)

    @property
    def base(self) -> str:
        """The URL requests are made under (the region's public endpoint when none is set)."""
        if self.url is not None:
            return self.url
        if self.region is None:
            raise missing_region()
        suffix = "amazonaws.com.cn" if self.region.startswith("cn-") else "amazonaws.com"
        return f"https://bedrock-runtime.{self.region}.{suffix}"


def resolve_endpoint(settings: Any, environ: Mapping[str, str]) -> Endpoint:
    """The endpoint of a profile: ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` (or ``AWS_ENDPOINT_URL``)
    over ``base_url`` (upstream's scheme-less host is read as https); the region from
    ``aws_region``, else the one ``base_url``'s host names, else ``AWS_REGION`` /
    ``AWS_DEFAULT_REGION``; the profile from ``aws_profile``."""
    configured = _clean(getattr(settings, "base_url", None))
    url = _url(configured, "base_url") if configured else None
    ignore = environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").strip().lower() == "true"
    for name in () if ignore else ENDPOINT_VARIABLES:
        if value := _clean(environ.get(name)):
            url = _url(value, name)
            break
    region = checked_region(getattr(settings, "aws_region", None), "aws_region")
    for candidate in (configured, url):
        if region is None and candidate:
            region = region_of(candidate)
    for name in REGION_VARIABLES:
        if region is None:
            region = checked_region(environ.get(name), name)
    profile = _clean(getattr(settings, "aws_profile", None))
    return Endpoint(url, region, profile)


def checked_region(value: Any, source: str) -> str | None:
    """``value`` when it is a region's name, None when unset; anything else is refused (the
    region becomes part of the endpoint's host name)."""
    region = _clean(value)
    if region is not None and not _REGION.match(region):
        raise ConfigError(f"{source} {region!r} is not an AWS region name (like us-west-2)")
    return region


def region_of(url: str) -> str | None:
    """The region a Bedrock runtime host names (``bedrock-runtime.us-west-2.amazonaws.com``)."""
    host = urllib.parse.urlsplit(url if "://" in url else f"https://{url}").hostname or ""
    found = _REGION_IN_HOST.search(host.lower())
    return found.group(1) if found else None


def missing_region() -> ConfigError:
    return ConfigError(
        "No AWS region for Bedrock: set aws_region (or a base_url such as "
        '"bedrock-runtime.us-west-2.amazonaws.com") in the [llm] profile, or AWS_REGION / '
        "AWS_DEFAULT_REGION in the environment, or region in the AWS config file's profile"
    )


def _clean(value: Any) -> str | None:
    text = value.strip() if isinstance(value, str) else None
    return text or None


def _url(value: str, source: str) -> str:
    """``value`` as an endpoint URL: a bare host gets https://, no trailing slash."""
    url = value if "://" in value else f"https://{value}"
    split = urllib.parse.urlsplit(url)
    if split.scheme.lower() not in ("http", "https") or not split.hostname:
        raise ConfigError(
            f"{source} {value!r} is not a Bedrock endpoint: give a host such as "
            '"bedrock-runtime.us-west-2.amazonaws.com" or an http(s):// URL'
        )
    if split.query or split.fragment:
        raise ConfigError(f"{source} {value!r} must not have a query or fragment")
    return url.rstrip("/")
