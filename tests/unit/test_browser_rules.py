"""The pure rules that keep hostile pages out (:mod:`elicitation_gateway.server.origins` and
:mod:`elicitation_gateway.server.security`): which hosts the gateway serves, which origin is its own,
which bodies are JSON. Which routes take JSON, and
whose origin is checked, is the route table's (tests/unit/test_route_table.py)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from elicitation_gateway.server.origins import (
    HOSTS_REMEMBERED,
    AllowedHosts,
    OriginPolicy,
    host_name,
    is_ip_literal,
    origin_key,
    same_origin,
)
from elicitation_gateway.server.security import is_json
from elicitation_gateway.settings import Settings


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost", "localhost"),
        ("localhost:4096", "localhost"),
        ("LocalHost:4096", "localhost"),
        ("localhost.", "localhost"),
        ("localhost.:80", "localhost"),
        ("app.localhost:5173", "app.localhost"),
        ("127.0.0.1", "127.0.0.1"),
        ("127.0.0.1:4096", "127.0.0.1"),
        ("[::1]", "[::1]"),
        ("[::1]:4096", "[::1]"),
        ("[FE80::1]:80", "[fe80::1]"),
        ("gateway.example.com:443", "gateway.example.com"),
        ("localhost:", "localhost"),
        ("under_score.example", "under_score.example"),
    ],
)
def test_the_name_of_a_host_header(header, name):
    assert host_name(header) == name


@pytest.mark.parametrize(
    "header",
    [
        "",
        "::1",
        "[::1",
        "::1]:80",
        "a b",
        "evil.example/path",
        "user@localhost",
        "localhost:80:80",
        "[]",
        "é.example",
    ],
)
def test_what_is_no_host_name_at_all(header):
    assert host_name(header) is None


@pytest.mark.parametrize(
    ("name", "literal"),
    [
        ("127.0.0.1", True),
        ("10.1.2.3", True),
        ("0.0.0.0", True),
        ("[::1]", True),
        ("[2001:db8::5]", True),
        ("::1", False),  # a Host header brackets IPv6
        ("[127.0.0.1]", False),
        ("2130706433", False),  # browsers send 127.0.0.1 for it; only a crafted request sends this
        ("127.1", False),
        ("0127.0.0.1", False),
        ("1.2.3.4.evil.example", False),
        ("localhost", False),
    ],
)
def test_ip_literals(name, literal):
    assert is_ip_literal(name) is literal


NO_SETTING = AllowedHosts([])


@pytest.mark.parametrize(
    "name", ["localhost", "app.localhost", "a.b.localhost", "127.0.0.1", "127.0.0.2", "192.168.1.20", "[::1]"]
)
def test_loopback_names_and_ip_addresses_are_always_served(name):
    assert name in NO_SETTING


@pytest.mark.parametrize(
    "name",
    [
        "evil.example",
        "localhost.evil.example",  # a rebinding page's name may start with anything
        "127.0.0.1.evil.example",
        "localhostevil",
        "xlocalhost",
        "gateway",  # a bare name (a container's, a Service's) needs the setting too
        "",
    ],
)
def test_every_other_name_needs_the_setting(name):
    assert name not in NO_SETTING


def test_the_setting_names_hosts_exactly_or_by_their_parent():
    allowed = AllowedHosts(["gateway.example.com", "*.corp.example"])
    assert "gateway.example.com" in allowed
    assert "www.gateway.example.com" not in allowed
    assert "gateway.example.com.evil.example" not in allowed
    assert "a.corp.example" in allowed
    assert "a.b.corp.example" in allowed
    assert "corp.example" not in allowed  # *.x is its subdomains only
    assert "evilcorp.example" not in allowed
    assert "localhost" in allowed
    star = AllowedHosts(["*"])
    assert "anything.example" in star
    assert "" not in star


def test_the_setting_is_read_from_the_environment_form(monkeypatch):
    monkeypatch.setenv("GATEWAY_ALLOWED_HOSTS", " Gateway.Example.com:443 , *.corp.example,, gw.example. ")
    assert Settings().allowed_hosts == ["gateway.example.com", "*.corp.example", "gw.example"]


@pytest.mark.parametrize(
    "entry", ["https://gateway.example.com", "gateway.example.com/", "a b", "*.*.example", "ex*.com"]
)
def test_the_setting_refuses_what_is_not_a_host_name(entry):
    with pytest.raises(ValidationError, match="is not a host name"):
        Settings(allowed_hosts=entry)


@pytest.mark.parametrize(
    ("origin", "host", "same"),
    [
        ("http://127.0.0.1:4096", "127.0.0.1:4096", True),
        ("http://localhost:4096", "LOCALHOST:4096", True),
        ("https://gateway.example.com", "gateway.example.com", True),
        ("https://gateway.example.com", "gateway.example.com:443", True),
        ("http://gateway.example.com", "gateway.example.com:80", True),
        ("http://[::1]:4096", "[::1]:4096", True),
        ("http://127.0.0.1:4097", "127.0.0.1:4096", False),
        ("https://gateway.example.com:8443", "gateway.example.com", False),
        ("https://gateway.example.com", "gateway.example.com:80", False),
        ("http://evil.example", "127.0.0.1:4096", False),
        ("null", "127.0.0.1:4096", False),
        ("http://127.0.0.1:4096/", "127.0.0.1:4096", False),  # an Origin has no path
        ("http://user@127.0.0.1:4096", "127.0.0.1:4096", False),
        ("file://", "", False),
        ("", "", False),
    ],
)
def test_same_origin_is_the_same_name_and_port(origin, host, same):
    assert same_origin(origin, host) is same


@pytest.mark.parametrize(
    ("content_type", "json"),
    [
        ("application/json", True),
        ("application/json; charset=utf-8", True),
        ("Application/JSON;charset=UTF-8", True),
        (" application/json ", True),
        ("application/vnd.api+json", True),
        ("application/merge-patch+json; charset=utf-8", True),
        ("", False),
        ("text/plain", False),
        ("text/plain; charset=application/json", False),
        ("application/x-www-form-urlencoded", False),
        ("multipart/form-data; boundary=x", False),
        ("text/json", False),
        ("application/jsonx", False),
        ("application/json+xml", False),
        ("application/+json", False),
        ("application/a/b+json", False),
    ],
)
def test_json_media_types(content_type, json):
    assert is_json(content_type) is json


@given(st.text())
def test_no_host_header_breaks_the_rules(header):
    name = host_name(header)
    if name is not None:
        assert (name in AllowedHosts(["x.example", "*.y.example"])) in (True, False)


@given(st.text(), st.text())
def test_no_origin_or_content_type_breaks_the_rules(origin, host):
    assert same_origin(origin, host) in (True, False)
    assert is_json(origin) in (True, False)


def test_hosts_are_remembered_within_a_bound():
    """The verdict per Host value is kept, but a stream of made-up hosts cannot grow it past its bound."""
    policy = OriginPolicy(Settings(allowed_hosts=["gw.example"]))
    for index in range(3 * HOSTS_REMEMBERED):
        assert not policy.serves(f"rebound-{index}.example")
        assert len(policy._served) <= HOSTS_REMEMBERED
    assert policy.serves("gw.example:443")
    assert policy.serves("127.0.0.1:4096")
    assert not policy.serves("rebound-0.example")


@pytest.mark.parametrize(
    ("origin", "key"),
    [
        ("https://Gateway.Example.com", "https://gateway.example.com"),
        ("https://gateway.example.com:443", "https://gateway.example.com"),
        ("http://gateway.example.com:80", "http://gateway.example.com"),
        ("https://gateway.example.com:8443", "https://gateway.example.com:8443"),
        ("http://[::1]:4096", "http://[::1]:4096"),
        ("null", None),
        ("https://gateway.example.com/", None),
    ],
)
def test_origins_compare_without_case_or_default_ports(origin, key):
    assert origin_key(origin) == key
