"""Which URLs and addresses the egress policy refuses: the deny table, every spelling of an IPv4
address, IPv4 carried inside IPv6, cloud metadata addresses, URL confusion, schemes, and the
operator's allowed ranges. Nothing here dials: URLs go through ``check_url`` and names through
``addresses()`` with a ``StaticLookup``."""

from __future__ import annotations

import ipaddress
import urllib.parse
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from expediter.core.netguard import (
    DENY_TABLE,
    EgressBlocked,
    EgressPolicy,
    Resolver,
    address_problem,
    address_text,
    embedded_ipv4,
    literal_address,
    parse_networks,
)
from expediter.testing.network import StaticLookup

pytestmark = pytest.mark.usefixtures("loopback_only")

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"


def teredo(server: str, client: str, flags: int = 0x8000, port: int = 4000) -> str:
    """A Teredo address (2001::/32): server in clear, client port and address obfuscated."""
    value = (
        (0x2001 << 112)
        | (int(ipaddress.IPv4Address(server)) << 64)
        | (flags << 48)
        | ((~port & 0xFFFF) << 32)
        | (~int(ipaddress.IPv4Address(client)) & 0xFFFFFFFF)
    )
    return str(ipaddress.IPv6Address(value))


def nat64_48(address: str, suffix: int = 0) -> str:
    """``address`` in the local-use NAT64 prefix 64:ff9b:1::/48 laid out as RFC 6052 says for
    a /48 prefix (two octets, the reserved u octet, two octets, then the suffix)."""
    a, b, c, d = ipaddress.IPv4Address(address).packed
    raw = bytes.fromhex("0064ff9b0001") + bytes([a, b, 0, c, d]) + suffix.to_bytes(5, "big")
    return str(ipaddress.IPv6Address(raw))


def blocked_reason(url: str, policy: EgressPolicy | None = None) -> str:
    with pytest.raises(EgressBlocked) as caught:
        (policy or EgressPolicy()).check_url(url)
    return caught.value.reason


# --- URL table ------------------------------------------------------------------------------

#: (url, what the reason must mention)
BLOCKED_URLS = [
    # every range of the deny table
    ("http://0.0.0.0/", "0.0.0.0/8"),
    ("http://0.1.2.3/", "0.0.0.0/8"),
    ("http://10.0.0.1/", "10.0.0.0/8"),
    ("http://10.255.255.254:8080/", "10.0.0.0/8"),
    ("http://100.64.0.1/", "100.64.0.0/10"),
    ("http://100.127.255.254/", "100.64.0.0/10"),
    ("http://127.0.0.1/", "127.0.0.0/8"),
    ("http://127.255.255.254/", "127.0.0.0/8"),
    ("http://169.254.0.1/", "169.254.0.0/16"),
    ("http://172.16.0.1/", "172.16.0.0/12"),
    ("http://172.31.255.254/", "172.16.0.0/12"),
    ("http://192.0.0.1/", "192.0.0.0/24"),
    ("http://192.0.0.192/", "192.0.0.0/24"),
    ("http://192.0.2.1/", "192.0.2.0/24"),
    ("http://192.88.99.1/", "192.88.99.0/24"),
    ("http://192.168.0.1/", "192.168.0.0/16"),
    ("http://198.18.0.1/", "198.18.0.0/15"),
    ("http://198.19.255.254/", "198.18.0.0/15"),
    ("http://198.51.100.1/", "198.51.100.0/24"),
    ("http://203.0.113.1/", "203.0.113.0/24"),
    ("http://224.0.0.1/", "224.0.0.0/4"),
    ("http://239.255.255.250/", "224.0.0.0/4"),
    ("http://240.0.0.1/", "240.0.0.0/4"),
    ("http://255.255.255.254/", "240.0.0.0/4"),
    ("http://255.255.255.255/", "255.255.255.255 is in"),
    ("http://[::]/", "::/128"),
    ("http://[::1]/", "::1/128"),
    ("http://[::1]:8080/", "::1/128"),
    ("http://[::ffff:0:0]/", "::ffff:0:0/96"),
    ("http://[::ffff:808:808]/", "::ffff:0:0/96"),
    ("http://[100::1]/", "100::/64"),
    ("http://[2001::1]/", "2001::/23"),
    ("http://[2001:10::1]/", "2001::/23"),
    ("http://[2001:db8::1]/", "2001:db8::/32"),
    ("http://[3fff::1]/", "3fff::/20"),
    ("http://[::ffff:0:a9fe:a9fe]/", "::ffff:0:0:0/96"),
    ("http://[5f00::1]/", "5f00::/16"),
    ("http://[2002:808:808::]/", "2002::/16"),
    ("http://[64:ff9b:1::808:808]/", "64:ff9b:1::/48"),
    ("http://[fc00::1]/", "fc00::/7"),
    ("http://[fd12:3456:789a::1]/", "fc00::/7"),
    ("http://[fe80::1]/", "fe80::/10"),
    ("http://[fec0::1]/", "fec0::/10"),
    ("http://[ff02::1]/", "ff00::/8"),
    # IPv4 encodings the C library reads
    ("http://2130706433/", "127.0.0.0/8"),
    ("http://0x7f000001/", "127.0.0.0/8"),
    ("http://0x7f.0.0.1/", "127.0.0.0/8"),
    ("http://0x7F.1/", "127.0.0.0/8"),
    ("http://0177.0.0.1/", "127.0.0.0/8"),
    ("http://127.1/", "127.0.0.0/8"),
    ("http://10.1/", "10.0.0.0/8"),
    ("http://127.0.0.1./", "127.0.0.0/8"),
    ("http://127.000.000.001/", "127.0.0.0/8"),
    ("http://012.1.2.3/", "10.0.0.0/8"),
    ("http://0/", "0.0.0.0/8"),
    ("http://0x0/", "0.0.0.0/8"),
    # IPv6 forms and IPv4 inside IPv6
    ("http://[::ffff:127.0.0.1]/", "::ffff:7f00:1"),
    ("http://[::ffff:7f00:1]/", "::ffff:0:0/96"),
    ("http://[0:0:0:0:0:ffff:7f00:0001]/", "::ffff:0:0/96"),
    ("http://[::127.0.0.1]/", "embeds 127.0.0.1"),
    ("http://[::a00:1]/", "embeds 10.0.0.1"),
    ("http://[2002:7f00:1::]/", "embeds 127.0.0.1"),
    ("http://[2002:7f00:1:1234::5]/", "embeds 127.0.0.1"),
    ("http://[2002:a9fe:a9fe::]/", "embeds 169.254.169.254"),
    (f"http://[{teredo('65.54.227.120', '127.0.0.1')}]/", "2001::/23"),
    (f"http://[{teredo('65.54.227.120', '10.1.2.3')}]/", "2001::/23"),
    ("http://[64:ff9b::7f00:1]/", "embeds 127.0.0.1"),
    ("http://[64:ff9b::127.0.0.1]/", "embeds 127.0.0.1"),
    ("http://[64:ff9b::a9fe:a9fe]/", "embeds 169.254.169.254"),
    ("http://[64:ff9b:1::a9fe:a9fe]/", "169.254.169.254"),
    ("http://[64:ff9b:1:abcd::7f00:1]/", "127.0.0.1"),
    ("http://[fe80::1%25eth0]/", "fe80::/10"),
    ("http://[fe80::1%25eth0]:8080/", "fe80::/10"),
    ("http://[FE80::1]/", "fe80::/10"),
    # the cloud metadata address in every spelling
    ("http://169.254.169.254/latest/meta-data/", "169.254.0.0/16"),
    ("http://2852039166/", "169.254.0.0/16"),
    ("http://0xa9fea9fe/", "169.254.0.0/16"),
    ("http://0xa9.0xfe.0xa9.0xfe/", "169.254.0.0/16"),
    ("http://0251.0376.0251.0376/", "169.254.0.0/16"),
    ("http://169.254.43518/", "169.254.0.0/16"),
    ("http://[::ffff:169.254.169.254]/", "::ffff:a9fe:a9fe"),
    ("http://[::ffff:a9fe:a9fe]/", "::ffff:0:0/96"),
    ("http://[64:ff9b::169.254.169.254]/", "169.254.169.254"),
    ("http://[fd00:ec2::254]/", "fc00::/7"),
    ("http://100.100.100.200/", "100.64.0.0/10"),
    # userinfo, fragment and backslash confusion
    ("http://evil.test@127.0.0.1/", "user information"),
    ("http://evil.test:pw@93.184.216.34/", "user information"),
    ("http://127.0.0.1#@good.test/", "127.0.0.0/8"),
    ("http://127.0.0.1?@good.test/", "127.0.0.0/8"),
    ("http://good.test\\@127.0.0.1/", "backslash"),
    ("http://127.0.0.1\\@good.test/", "backslash"),
    ("http://127.0.0.1:80@good.test/", "user information"),
    # schemes
    ("file:///etc/passwd", "'file'"),
    ("file://127.0.0.1/etc/passwd", "'file'"),
    ("ftp://93.184.216.34/", "'ftp'"),
    ("gopher://127.0.0.1:70/_x", "'gopher'"),
    ("dict://127.0.0.1:11211/stat", "'dict'"),
    ("data:text/plain,hello", "'data'"),
    ("javascript:alert(1)", "'javascript'"),
    ("ws://93.184.216.34/", "'ws'"),
    ("93.184.216.34/path", "'(none)'"),
    ("//93.184.216.34/", "'(none)'"),
    # no host, no parse
    ("http:///path", "no host"),
    ("http://:80/", "no host"),
    ("http://@/", "user information"),
    ("https://", "no host"),
    ("http://[::1/", "cannot be parsed"),
    ("http://[127.0.0.1]/", "cannot be parsed"),
    ("http://93.184.216.34:99999/", "cannot be parsed"),
    ("http://93.184.216.34:80x/", "cannot be parsed"),
    # whitespace and control characters
    (" http://93.184.216.34/", "whitespace"),
    ("http://93.184.216.34 /", "whitespace"),
    ("http://127.0.0.1\t/", "whitespace"),
    ("http://93.184.216.34/\n", "whitespace"),
    ("http://exa\rmple.com/", "whitespace"),
    ("http://93.184.216.34/\x00", "whitespace"),
    ("http://93.184.216.34/\x1b[2J", "whitespace"),
]

ALLOWED_URLS = [
    (f"http://{PUBLIC_V4}/", ("http", PUBLIC_V4, 80)),
    (f"https://{PUBLIC_V4}/", ("https", PUBLIC_V4, 443)),
    (f"https://{PUBLIC_V4}:8443/x?y=1#z", ("https", PUBLIC_V4, 8443)),
    (f"HTTP://{PUBLIC_V4}/", ("http", PUBLIC_V4, 80)),
    (f"HtTpS://{PUBLIC_V4}/", ("https", PUBLIC_V4, 443)),
    (f"http://[{PUBLIC_V6}]/", ("http", PUBLIC_V6, 80)),
    (f"https://[{PUBLIC_V6}]:8443/", ("https", PUBLIC_V6, 8443)),
    ("http://1.1.1.1/", ("http", "1.1.1.1", 80)),
    ("http://8.8.8.8:53/", ("http", "8.8.8.8", 53)),
    ("http://[2606:4700:4700::1111]/", ("http", "2606:4700:4700::1111", 80)),
    # just outside denied ranges
    ("http://11.0.0.1/", ("http", "11.0.0.1", 80)),
    ("http://100.128.0.1/", ("http", "100.128.0.1", 80)),
    ("http://172.32.0.1/", ("http", "172.32.0.1", 80)),
    ("http://192.0.3.1/", ("http", "192.0.3.1", 80)),
    ("http://198.20.0.1/", ("http", "198.20.0.1", 80)),
    ("http://1.0.0.1./", ("http", "1.0.0.1.", 80)),
    # public IPv4 inside NAT64 and 6to4
    ("http://[64:ff9b::808:808]/", ("http", "64:ff9b::808:808", 80)),
    # names are resolved (and checked) when dialed, not here
    ("http://example.com/", ("http", "example.com", 80)),
    ("HTTPS://API.Example.COM/v1", ("https", "api.example.com", 443)),
    ("http://1e100.net/", ("http", "1e100.net", 80)),
    ("http://0x.test/", ("http", "0x.test", 80)),
    ("http://127.0.0.1.nip.io/", ("http", "127.0.0.1.nip.io", 80)),
]


@pytest.mark.parametrize(("url", "mention"), BLOCKED_URLS)
def test_check_url_blocks(url: str, mention: str) -> None:
    reason = blocked_reason(url)
    assert mention in reason


@pytest.mark.parametrize(
    "url",
    [
        "http://93.184.216.34\x7f/",
        "http://93.184.216.34\x85/",
        "http://93.184.216.34\u00a0/",
        "http://93.184.216.34/\u2028",
        "http://93.184.216.34/\u3000",
    ],
)
def test_check_url_refuses_every_control_and_whitespace_character(url: str) -> None:
    assert "whitespace" in blocked_reason(url)


@pytest.mark.parametrize(("url", "origin"), ALLOWED_URLS)
def test_check_url_allows_public_targets(url: str, origin: tuple[str, str, int]) -> None:
    assert EgressPolicy().check_url(url).origin == origin


def test_the_table_is_big_enough() -> None:
    assert len(BLOCKED_URLS) + len(ALLOWED_URLS) >= 60


def test_every_deny_table_range_has_a_blocked_case() -> None:
    covered = set()
    for url, _ in BLOCKED_URLS:
        try:
            host = urllib.parse.urlsplit(url).hostname
        except ValueError:
            continue
        address = None if host is None or "\\" in url else literal_address(host)
        for network, _label in DENY_TABLE:
            if address is not None and address.version == network.version and address in network:
                covered.add(network)
    assert covered == {network for network, _ in DENY_TABLE}


def test_blocked_is_generic_text_with_a_detailed_reason() -> None:
    with pytest.raises(EgressBlocked) as caught:
        EgressPolicy().check_url("http://2852039166/latest/meta-data/")
    assert str(caught.value) == "blocked by egress policy"
    assert "169.254.169.254" in caught.value.reason
    assert "2852039166" in caught.value.reason
    assert "169.254.0.0/16" in caught.value.reason


def test_userinfo_allowed_still_checks_the_real_host() -> None:
    policy = EgressPolicy(allow_userinfo=True)
    assert "127.0.0.0/8" in blocked_reason("http://evil.test@127.0.0.1/", policy)
    # urllib reads the host as good.test (userinfo "127.0.0.1:80"): a name, checked when dialed.
    assert policy.check_url("http://127.0.0.1:80@good.test/").host == "good.test"


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://evil.test@127.0.0.1/", "127.0.0.1"),
        ("http://127.0.0.1#@good.test/", "127.0.0.1"),
        ("http://127.0.0.1?@good.test/", "127.0.0.1"),
        ("http://good.test\\@127.0.0.1/", "127.0.0.1"),
        ("http://127.0.0.1:80@good.test/", "good.test"),
        ("http://good.test;@127.0.0.1/", "127.0.0.1"),
    ],
)
def test_urllib_and_httpx_agree_on_the_host(url: str, host: str) -> None:
    """Both parsers read these the same way; where they differ from a browser (backslash) the
    policy refuses the URL outright, and the dialer checks whatever host the client picks."""
    httpx = pytest.importorskip("httpx")
    assert urllib.parse.urlsplit(url).hostname == host
    assert httpx.URL(url).host == host


# --- names through the resolver -------------------------------------------------------------


def policy_with(answers: dict[str, list[str]], **options: object) -> EgressPolicy:
    return EgressPolicy(resolver=Resolver(lookup=StaticLookup(answers)), **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "answer",
    [
        [PUBLIC_V4],
        [PUBLIC_V6],
        [PUBLIC_V4, PUBLIC_V6],
        ["1.1.1.1", "8.8.8.8"],
        ["64:ff9b::808:808"],
    ],
)
def test_names_resolving_only_to_public_addresses_are_allowed(answer: list[str]) -> None:
    assert policy_with({"public.test": answer}).addresses("public.test", 443) == tuple(answer)


@pytest.mark.parametrize(
    ("answer", "mention"),
    [
        ([PUBLIC_V4, "10.0.0.1"], "10.0.0.1"),
        (["10.0.0.1", PUBLIC_V4], "10.0.0.1"),
        ([PUBLIC_V6, "::1"], "::1"),
        (["169.254.169.254"], "169.254.0.0/16"),
        (["::ffff:127.0.0.1"], "::ffff:0:0/96"),
        (["64:ff9b::a9fe:a9fe"], "169.254.169.254"),
        (["fd00:ec2::254"], "fc00::/7"),
        (["100.100.100.200"], "100.64.0.0/10"),
        (["fe80::1%eth0"], "fe80::/10"),
        (["not-an-address"], "not an address"),
        (["2130706433"], "not an address"),
        ([], "no address"),
    ],
)
def test_names_with_any_refused_address_are_blocked(answer: list[str], mention: str) -> None:
    policy = policy_with({"name.test": answer})
    with pytest.raises(EgressBlocked) as caught:
        policy.addresses("name.test", 80)
    assert mention in caught.value.reason
    assert "'name.test'" in caught.value.reason


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", None),
        ("2130706433", None),
        ("[::1]", None),
        ("::ffff:7f00:1", None),
        ("fe80::1%eth0", None),
        (PUBLIC_V4, (PUBLIC_V4,)),
        (f"[{PUBLIC_V6}]", (PUBLIC_V6,)),
        ("0x5db8d822", (PUBLIC_V4,)),
    ],
)
def test_addresses_of_a_literal_need_no_lookup(host: str, expected: tuple[str] | None) -> None:
    lookup = StaticLookup({})
    policy = EgressPolicy(resolver=Resolver(lookup=lookup))
    if expected is None:
        with pytest.raises(EgressBlocked):
            policy.addresses(host, 80)
    else:
        # the dialed text is the checked address, not the spelling
        assert policy.addresses(host, 80) == expected
    assert lookup.calls == {}


# --- operator-allowed ranges ----------------------------------------------------------------


def test_an_allowed_range_lets_exactly_that_range_through() -> None:
    policy = EgressPolicy(allow_networks=["10.0.0.0/8"])
    assert policy.check_url("http://10.1.2.3/").host == "10.1.2.3"
    assert policy.check_url("http://10.1/").host == "10.1"
    assert policy.check_url("http://11.0.0.1/").host == "11.0.0.1"
    for url in (
        "http://192.168.0.1/",
        "http://127.0.0.1/",
        "http://169.254.169.254/",
        "http://172.16.0.1/",
        "http://[::1]/",
        "http://[64:ff9b::a01:203]/",
    ):
        blocked_reason(url, policy)
    # the mapped form of an allowed IPv4 address is that address
    assert policy.check_url("http://[::ffff:10.1.2.3]/").host == "::ffff:10.1.2.3"


def test_allowing_loopback_lets_the_mapped_form_through_but_not_6to4() -> None:
    policy = EgressPolicy(allow_networks=["127.0.0.0/8"])
    policy.check_url("http://127.0.0.1/")
    policy.check_url("http://[::ffff:127.0.0.1]/")
    assert "embeds 127.0.0.1" in blocked_reason("http://[2002:7f00:1::]/", policy)
    assert "embeds 127.0.0.1" in blocked_reason("http://[64:ff9b::7f00:1]/", policy)
    assert "::1/128" in blocked_reason("http://[::1]/", policy)


def test_allowed_ranges_apply_to_resolved_names_too() -> None:
    lookup = StaticLookup(
        {"internal.test": ["10.1.2.3"], "mixed.test": ["10.1.2.3", "192.168.0.1"]}
    )
    policy = EgressPolicy(allow_networks=["10.0.0.0/8"], resolver=Resolver(lookup=lookup))
    assert policy.addresses("internal.test", 80) == ("10.1.2.3",)
    with pytest.raises(EgressBlocked, match="policy"):
        policy.addresses("mixed.test", 80)


def test_with_networks_adds_ranges() -> None:
    base = EgressPolicy()
    assert base.with_networks([]) is base
    wider = base.with_networks(["192.168.0.0/16", ipaddress.ip_network("10.0.0.0/8")])
    wider.check_url("http://192.168.1.1/")
    wider.check_url("http://10.0.0.1/")
    blocked_reason("http://192.168.1.1/", base)


@pytest.mark.parametrize(
    "address", ["192.0.0.192", "192.88.99.1", "2002:7f00:1::", "64:ff9b::7f00:1"]
)
def test_blocked_whatever_ipaddress_says(address: str) -> None:
    """``ipaddress.is_global`` calls these global on Python 3.11; the table does not."""
    assert address_problem(ipaddress.ip_address(address)) is not None
    blocked_reason(f"http://[{address}]/" if ":" in address else f"http://{address}/")


#: Ranges Python versions disagree on: 3.11 and 3.12 call them global, 3.13 does not.
_DISPUTED = (ipaddress.ip_network("2002::/16"), ipaddress.ip_network("64:ff9b:1::/48"))


def verdict_if_python_said(address: str, is_global: bool) -> str | None:
    """``address_problem`` on a Python whose ``is_global`` says ``is_global`` for the
    disputed ranges (and what this one says elsewhere)."""
    real = ipaddress.IPv6Address.is_global

    def patched(self: ipaddress.IPv6Address) -> bool:
        if any(self in network for network in _DISPUTED):
            return is_global
        return bool(real.fget(self))  # type: ignore[attr-defined]

    with mock.patch.object(ipaddress.IPv6Address, "is_global", property(patched)):
        return address_problem(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    ["2002:808:808::", "2002:5db8:d822::1", "64:ff9b:1::808:808", "64:ff9b:1::5db8:d822"],
)
def test_the_verdict_does_not_depend_on_the_python_version(address: str) -> None:
    assert verdict_if_python_said(address, True) == verdict_if_python_said(address, False)


@pytest.mark.parametrize(
    "address",
    [
        nat64_48("169.254.169.254", suffix=0x0808080808),
        nat64_48("127.0.0.1", suffix=0x5DB8D822),
        "64:ff9b:1::808:808",
    ],
)
def test_local_use_nat64_prefix_is_blocked_in_every_layout(address: str) -> None:
    assert address_problem(ipaddress.ip_address(address)) is not None


# --- embedded IPv4 and literal addresses ----------------------------------------------------


@pytest.mark.parametrize(
    ("address", "inner"),
    [
        ("::ffff:127.0.0.1", ["127.0.0.1"]),
        ("::127.0.0.1", ["127.0.0.1"]),
        ("2002:a9fe:a9fe::1", ["169.254.169.254"]),
        ("64:ff9b::a9fe:a9fe", ["169.254.169.254"]),
        ("64:ff9b:1::7f00:1", ["127.0.0.1"]),
        (teredo("65.54.227.120", "10.1.2.3"), ["65.54.227.120", "10.1.2.3"]),
        ("::1", []),
        ("::", []),
        (PUBLIC_V6, []),
    ],
)
def test_embedded_ipv4(address: str, inner: list[str]) -> None:
    found = embedded_ipv4(ipaddress.IPv6Address(address))
    assert [str(item) for item in found] == inner


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("010.0.0.1", "8.0.0.1"),  # octal, as inet_aton reads it
        ("[::1]", "::1"),
        ("[fe80::1%eth0]", "fe80::1%eth0"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
        ("1e100.net", None),
        ("0x.test", None),
        ("0x7f.test", None),
        ("1.2.3.4.5", None),
        ("08.0.0.1", None),
        ("4294967296", None),
        ("127.0.0.1.nip.io", None),
        ("localhost", None),
        ("\uff11\uff12\uff17.0.0.1", None),
        ("", None),
        ("[]", None),
        ("[not:an:address:::]", None),
    ],
)
def test_literal_address(host: str, expected: str | None) -> None:
    found = literal_address(host)
    assert (None if found is None else address_text(found)) == expected


def test_parse_networks() -> None:
    assert parse_networks([" 10.1.2.3/8 ", "fd00::/8", "192.168.1.20"]) == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("fd00::/8"),
        ipaddress.ip_network("192.168.1.20/32"),
    )
    assert parse_networks([]) == ()


@pytest.mark.parametrize("bad", ["10.0.0.0/33", "not-a-network", "", "10.0.0.0/8/8", "::1/129"])
def test_parse_networks_names_what_is_not_a_range(bad: str) -> None:
    with pytest.raises(ValueError, match="is not an IP range") as caught:
        parse_networks(["10.0.0.0/8", bad])
    assert repr(bad.strip()) in str(caught.value)
    with pytest.raises(ValueError, match="is not an IP range"):
        EgressPolicy(allow_networks=[bad])


# --- properties -----------------------------------------------------------------------------

_DENIED_V4 = [network for network, _ in DENY_TABLE if network.version == 4]


@st.composite
def denied_ipv4(draw: st.DrawFn) -> ipaddress.IPv4Address:
    network = draw(st.sampled_from(_DENIED_V4))
    offset = draw(st.integers(0, network.num_addresses - 1))
    return ipaddress.IPv4Address(int(network.network_address) + offset)


@st.composite
def embedded(draw: st.DrawFn) -> tuple[ipaddress.IPv4Address, ipaddress.IPv6Address]:
    inner = draw(denied_ipv4())
    value = int(inner)
    form = draw(st.sampled_from(["mapped", "compatible", "6to4", "nat64", "nat64-local"]))
    if form == "mapped":
        outer = (0xFFFF << 32) | value
    elif form == "compatible":
        outer = value
    elif form == "6to4":
        outer = (0x2002 << 112) | (value << 80) | draw(st.integers(0, 2**80 - 1))
    elif form == "nat64":
        outer = (0x64FF9B << 96) | value
    else:
        middle = draw(st.integers(0, 2**48 - 1))
        outer = (0x0064FF9B0001 << 80) | (middle << 32) | value
    return inner, ipaddress.IPv6Address(outer)


@given(denied_ipv4())
def test_every_denied_ipv4_address_is_blocked(address: ipaddress.IPv4Address) -> None:
    assert address_problem(address) is not None
    with pytest.raises(EgressBlocked):
        EgressPolicy().check_url(f"http://{address}/")
    with pytest.raises(EgressBlocked):
        EgressPolicy().check_url(f"http://{int(address)}/")


@given(embedded())
def test_denied_ipv4_inside_ipv6_is_blocked(
    pair: tuple[ipaddress.IPv4Address, ipaddress.IPv6Address],
) -> None:
    _inner, outer = pair
    assert address_problem(outer) is not None
    with pytest.raises(EgressBlocked):
        EgressPolicy().check_url(f"http://[{outer}]/")


Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@st.composite
def address_in_network(draw: st.DrawFn) -> tuple[Network, Address]:
    kind: type[Network] = draw(st.sampled_from([ipaddress.IPv4Network, ipaddress.IPv6Network]))
    bits = 32 if kind is ipaddress.IPv4Network else 128
    network = kind((draw(st.integers(0, 2**bits - 1)), draw(st.integers(0, bits))), strict=False)
    offset = draw(st.integers(0, network.num_addresses - 1))
    return network, network.network_address + offset


@given(address_in_network())
def test_any_address_in_an_allowed_range_is_allowed(pair: tuple[Network, Address]) -> None:
    network, address = pair
    assert address_problem(address, (network,)) is None
    if address.version == 4:
        mapped = ipaddress.IPv6Address((0xFFFF << 32) | int(address))
        assert address_problem(mapped, (network,)) is None


@given(st.integers(0, 2**32 - 1))
def test_global_ipv4_outside_the_table_is_allowed(value: int) -> None:
    address = ipaddress.IPv4Address(value)
    listed = any(address in network for network in _DENIED_V4)
    assert (address_problem(address) is None) == (address.is_global and not listed)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (ipaddress.IPv6Address("::ffff:127.0.0.1"), "::ffff:7f00:1"),
        (ipaddress.IPv6Address("::ffff:7f00:1%eth0"), "::ffff:7f00:1%eth0"),
        (ipaddress.IPv6Address("::ffff:0.0.0.0"), "::ffff:0:0"),
        (ipaddress.IPv6Address("::"), "::"),
        (ipaddress.IPv6Address("::1"), "::1"),
        (ipaddress.IPv6Address("1::"), "1::"),
        (ipaddress.IPv6Address("1:0:0:2:0:0:0:3"), "1:0:0:2::3"),
        (ipaddress.IPv6Address("1:0:0:2:0:0:3:4"), "1::2:0:0:3:4"),
        (ipaddress.IPv6Address("1:0:2:3:4:5:6:7"), "1:0:2:3:4:5:6:7"),
        (ipaddress.IPv6Address("FE80::1%eth0"), "fe80::1%eth0"),
        (ipaddress.ip_network("::ffff:0:0/96"), "::ffff:0:0/96"),
        (ipaddress.ip_network("::ffff:0:0:0/96"), "::ffff:0:0:0/96"),
        (ipaddress.ip_network("10.0.0.0/8"), "10.0.0.0/8"),
        (ipaddress.IPv4Address("127.0.0.1"), "127.0.0.1"),
    ],
)
def test_address_text_is_the_same_on_every_python(value: object, text: str) -> None:
    assert address_text(value) == text  # type: ignore[arg-type]


@given(st.integers(min_value=0, max_value=2**128 - 1))
def test_address_text_is_rfc_5952_hexadecimal(value: int) -> None:
    address = ipaddress.IPv6Address(value)
    text = address_text(address)
    assert ipaddress.IPv6Address(text) == address
    assert "." not in text
    if address.ipv4_mapped is None:
        # Outside ::ffff:0:0/96 every supported Python's str() already writes this form.
        assert text == str(address)


@pytest.mark.parametrize("url", ["http://[::ffff:127.0.0.1]/", "http://[::ffff:7f00:1]/"])
def test_a_mapped_address_reason_reads_the_same_on_every_python(url: str) -> None:
    with pytest.raises(EgressBlocked) as caught:
        EgressPolicy().check_url(url)
    assert "::ffff:7f00:1 is in ::ffff:0:0/96 (IPv4-mapped)" in caught.value.reason
    assert "embeds 127.0.0.1: 127.0.0.1 is in 127.0.0.0/8" in caught.value.reason
    assert "127.0.0.1 is in ::ffff" not in caught.value.reason
