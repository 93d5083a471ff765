"""Where a webhook may be sent (foundation.outbound): public addresses only, judged by form at registration
and by every address a name resolves to, unless an operator allows a network."""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import pytest

from foundation.outbound import Target, UnsafeTarget, checked_url, parse_networks, resolve_public

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://127.0.0.1/hook", "not a public address"),
        ("https://[::1]/hook", "not a public address"),
        ("https://169.254.169.254/latest/meta-data/", "not a public address"),  # cloud metadata
        ("https://[fd00:ec2::254]/", "not a public address"),  # AWS metadata over IPv6
        ("https://10.1.2.3/", "not a public address"),
        ("https://172.16.0.9/", "not a public address"),
        ("https://192.168.1.1/", "not a public address"),
        ("https://100.64.0.1/", "not a public address"),  # carrier-grade NAT
        ("https://0.0.0.0/", "not a public address"),
        ("https://224.0.0.1/", "not a public address"),
        ("https://[::ffff:127.0.0.1]/", "it holds 127.0.0.1"),  # IPv4-mapped
        ("https://[2002:a00:1::]/", "it holds 10.0.0.1"),  # 6to4 of a private address
        ("https://[64:ff9b::a9fe:a9fe]/", "it holds 169.254.169.254"),  # NAT64 of the metadata address
        ("http://8.8.8.8/hook", "use https"),
        ("ftp://example.com/", "scheme is ftp"),
        ("https://user:pw@example.com/", "holds credentials"),
        ("https:///nohost", "no host"),
        ("https://example.com:99999/", "cannot be read"),
        ("https://example.com/" + "x" * 2000, "at most 2000"),
    ],
)
def test_regression_ssrf_targets_are_refused_at_registration_saying_why(url, says):
    with pytest.raises(UnsafeTarget, match=says):
        checked_url(url)


def test_a_public_url_passes_and_an_allowed_network_lets_an_operators_receiver_in():
    assert checked_url("https://93.184.215.14:8443/hook").addresses == (ipaddress.ip_address("93.184.215.14"),)
    named = checked_url("https://hooks.example.com/x?y=1")
    assert (named.host, named.port, named.addresses) == ("hooks.example.com", 443, ())
    loopback = parse_networks("127.0.0.0/8, ::1")
    assert checked_url("http://127.0.0.1:9000/hook", loopback).port == 9000, "http to an allowed network"
    with pytest.raises(UnsafeTarget):
        checked_url("http://10.0.0.1/hook", loopback)


def resolving_to(monkeypatch, *addresses: str) -> None:
    async def getaddrinfo(host, port, **kwargs):
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in addresses]  # fmt: skip

    loop = asyncio.get_running_loop()
    monkeypatch.setattr(loop, "getaddrinfo", getaddrinfo)


async def test_regression_a_name_that_resolves_to_a_private_address_is_refused(monkeypatch):
    resolving_to(monkeypatch, "93.184.215.14", "10.0.0.7")  # one good address does not excuse a bad one
    with pytest.raises(UnsafeTarget, match=r"hooks.example.com \(10.0.0.7\) is not a public address"):
        await resolve_public(checked_url("https://hooks.example.com/"))


async def test_a_name_that_resolves_to_public_addresses_is_pinned_to_them(monkeypatch):
    resolving_to(monkeypatch, "93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c")
    target = await resolve_public(checked_url("https://hooks.example.com/"))
    assert [str(a) for a in target.addresses] == ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]
    literal = Target("https://93.184.215.14/", "https", "93.184.215.14", 443, (ipaddress.ip_address("93.184.215.14"),))
    assert await resolve_public(literal) is literal


async def test_a_name_that_does_not_resolve_is_refused(monkeypatch):
    async def fails(host, port, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", fails)
    with pytest.raises(UnsafeTarget, match="does not resolve"):
        await resolve_public(checked_url("https://nowhere.invalid/"))
