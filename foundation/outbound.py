"""Where voxlog may send a request a tenant named (a webhook's URL): public addresses only.

A URL a tenant gives is a request the service makes on its behalf from inside the network, so it must not
reach what only the service can reach (server-side request forgery): loopback, link-local (cloud metadata
services answer at 169.254.169.254 and fd00:ec2::254), private, shared (carrier-grade NAT), multicast,
reserved and unspecified addresses are refused, as is every IPv6 form of an IPv4 address (mapped, 6to4,
Teredo, NAT64) that hides one. An operator may allow networks by setting (``VOXLOG_WEBHOOK_ALLOWED_NETWORKS``:
a receiver inside the cluster, the tests' receiver on loopback). A host name is judged by every address it
resolves to, once when the URL is registered and again before each delivery, and the delivery connects to
an address that was judged (:func:`resolve_public`), so a name that resolves elsewhere later (DNS rebinding)
gains nothing.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from foundation.errors import FoundationError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_URL_CHARS: Final = 2000
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")


class UnsafeTarget(FoundationError):
    """A URL voxlog will not send a request to; the message says why, for the one who gave it."""


@dataclass(frozen=True)
class Target:
    """A checked URL: its scheme, host and port, and the addresses a request may connect to."""

    url: str
    scheme: str
    host: str
    port: int
    addresses: tuple[IPAddress, ...] = ()


def parse_networks(spec: str) -> tuple[Network, ...]:
    """``VOXLOG_WEBHOOK_ALLOWED_NETWORKS``: comma-separated addresses or CIDR networks (empty: none)."""
    return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in spec.split(",") if part.strip())


def checked_url(url: str, allowed: Sequence[Network] = ()) -> Target:
    """``url``'s form judged (https, or http to an allowed network; no credentials; a host), or
    :class:`UnsafeTarget`. A literal address is judged here; a name by :func:`resolve_public`."""
    if len(url) > MAX_URL_CHARS:
        raise UnsafeTarget(f"the URL has {len(url)} characters; at most {MAX_URL_CHARS}")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UnsafeTarget(f"the URL cannot be read: {exc}") from exc
    scheme, host = parts.scheme.lower(), (parts.hostname or "").rstrip(".").lower()
    if scheme not in ("https", "http"):
        raise UnsafeTarget(f"the URL's scheme is {parts.scheme or 'missing'}; use https")
    if parts.username is not None or parts.password is not None:
        raise UnsafeTarget("the URL holds credentials (user:password@); put a secret in its path or query instead")
    if not host:
        raise UnsafeTarget("the URL has no host")
    target = Target(url, scheme, host, port or (443 if scheme == "https" else 80))
    literal = _literal(host)
    if literal is not None:
        _judge(literal, host, allowed)
        target = Target(url, scheme, host, target.port, (literal,))
    if scheme == "http" and not (target.addresses and _allowed(target.addresses[0], allowed)):
        raise UnsafeTarget("the URL is http; use https (http only to a network the operator allows)")
    return target


async def resolve_public(target: Target, allowed: Sequence[Network] = ()) -> Target:
    """``target`` with the addresses its host resolves to, every one judged public (or allowed), else
    :class:`UnsafeTarget`; a literal address as it is."""
    if target.addresses:
        return target
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise UnsafeTarget(f"the host {target.host} does not resolve: {exc}") from exc
    addresses = tuple(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos))
    if not addresses:
        raise UnsafeTarget(f"the host {target.host} resolves to no address")
    for address in addresses:
        _judge(address, target.host, allowed)
    if target.scheme == "http" and not all(_allowed(a, allowed) for a in addresses):
        raise UnsafeTarget("the URL is http; use https (http only to a network the operator allows)")
    return Target(target.url, target.scheme, target.host, target.port, addresses)


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def _allowed(address: IPAddress, allowed: Sequence[Network]) -> bool:
    return any(address.version == net.version and address in net for net in allowed)


def _judge(address: IPAddress, host: str, allowed: Sequence[Network]) -> None:
    if _allowed(address, allowed):
        return
    named = address if str(address) == host else f"{host} ({address})"
    for hidden in _embedded(address):
        if not hidden.is_global or hidden.is_multicast:
            raise UnsafeTarget(f"{named} is not a public address (it holds {hidden}); use a public one")
    if not address.is_global or address.is_multicast:
        raise UnsafeTarget(
            f"{named} is not a public address (loopback, private, link-local and metadata addresses are refused)"
        )


def _embedded(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries (mapped, 6to4, Teredo's server and client, NAT64)."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    found = [a for a in (address.ipv4_mapped, address.sixtofour) if a is not None]
    if address.teredo is not None:
        found.extend(address.teredo)
    if address in _NAT64:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found
