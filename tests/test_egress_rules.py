"""THE egress rule (addon/egress/rules.py): which proxy an upstream goes through, like curl, Python and Go."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from firsttoken.addon.egress import EgressError, check, decide, no_proxy_match, parse_proxy_url


def way(url: str, env: dict, **kw) -> str | None:
    u = urlsplit(url)
    d = decide(u.scheme, u.hostname, u.port or (443 if u.scheme == "https" else 80), env, **kw)
    return None if d.proxy is None else d.proxy.url


def test_scheme_variables_and_all_proxy_fallback():
    env = {"HTTPS_PROXY": "http://sec:3128", "HTTP_PROXY": "http://plain:3128", "ALL_PROXY": "http://all:1"}
    assert way("https://api.openai.com", env) == "http://sec:3128"
    assert way("http://llm.corp", env) == "http://plain:3128"
    assert way("https://api.openai.com", {"ALL_PROXY": "http://all:8080"}) == "http://all:8080"
    assert way("http://llm.corp", {"HTTPS_PROXY": "http://sec:3128"}) is None  # http:// never takes HTTPS_PROXY
    assert way("https://api.openai.com", {}) is None


def test_lower_case_wins_and_empty_counts_as_unset():
    assert way("https://a.example", {"https_proxy": "http://low:1", "HTTPS_PROXY": "http://up:2"}) == "http://low:1"
    assert way("https://a.example", {"https_proxy": "", "HTTPS_PROXY": "http://up:2"}) == "http://up:2"
    assert way("https://a.example", {"all_proxy": "http://low:1", "ALL_PROXY": "http://up:2"}) == "http://low:1"


@pytest.mark.parametrize("no_proxy,host,port,hit", [
    ("example.com", "example.com", 443, True),
    ("example.com", "api.example.com", 443, True),  # a name covers its sub-domains (curl, requests, Go)
    (".example.com", "api.example.com", 443, True),
    ("*.example.com", "api.example.com", 443, True),
    ("example.com", "badexample.com", 443, False),
    ("EXAMPLE.com.", "Api.Example.COM", 443, True),
    ("10.0.0.0/8", "10.2.3.4", 443, True),
    ("10.0.0.0/8", "11.0.0.1", 443, False),
    ("10.0.0.0/8", "ten.example", 443, False),  # CIDR: IP literals only, nothing is resolved
    ("192.168.1.5", "192.168.1.5", 80, True),
    ("192.168.1.5", "192.168.1.50", 80, False),
    ("::1", "[::1]", 80, True),
    ("[2001:db8::1]:8080", "2001:db8::1", 8080, True),
    ("[2001:db8::1]:8080", "2001:db8::1", 443, False),
    ("llm.corp:8443", "llm.corp", 8443, True),
    ("llm.corp:8443", "llm.corp", 443, False),
    ("*", "anything.example", 443, True),
    ("a.example, b.example c.example", "c.example", 443, True),
    ("", "a.example", 443, False),
])
def test_no_proxy(no_proxy, host, port, hit):
    assert (no_proxy_match(host, port, no_proxy) is not None) is hit


def test_no_proxy_variables_decide_and_say_why():
    env = {"HTTPS_PROXY": "http://p:3128", "no_proxy": "internal.corp", "NO_PROXY": "*"}
    d = decide("https", "llm.internal.corp", 443, env)
    assert d.proxy is None and "no_proxy" in d.reason and "internal.corp" in d.reason
    assert way("https://api.openai.com", env) == "http://p:3128"  # lower case no_proxy wins over NO_PROXY=*


def test_loopback_goes_direct_unless_the_proxy_is_explicit():
    env = {"HTTPS_PROXY": "http://p:3128", "HTTP_PROXY": "http://p:3128"}
    for url in ("http://127.0.0.1:11434", "http://localhost:8000", "https://[::1]:8443", "http://x.localhost"):
        assert way(url, env) is None
    assert way("http://127.0.0.1:11434", env, explicit="http://q:8080") == "http://q:8080"


def test_explicit_and_disabled_override_the_environment():
    env = {"HTTPS_PROXY": "http://p:3128", "NO_PROXY": "skip.example"}
    assert way("https://api.openai.com", env, explicit="q:8080") == "http://q:8080"
    assert way("https://skip.example", env, explicit="q:8080") is None  # NO_PROXY still applies
    assert way("https://api.openai.com", env, disabled=True) is None
    assert decide("https", "api.openai.com", 443, env, disabled=True).reason == "--no-upstream-proxy"


def test_proxy_url_forms_and_credentials_never_shown():
    p = parse_proxy_url("http://al%40ice:p%3Ass%2Fw0rd-LONGSECRET@Proxy.Corp:8080", "HTTPS_PROXY")
    assert (p.scheme, p.host, p.port, p.username, p.password) == ("http", "proxy.corp", 8080, "al@ice",
                                                                   "p:ss/w0rd-LONGSECRET")
    for text in (p.url, p.display, str(p), repr(p)):
        assert "LONGSECRET" not in text and "p:ss" not in text
    assert p.authorization() == "Basic YWxAaWNlOnA6c3MvdzByZC1MT05HU0VDUkVU"
    assert parse_proxy_url("127.0.0.1:7890", "x").url == "http://127.0.0.1:7890"
    assert parse_proxy_url("http://proxy", "x").port == 80 and parse_proxy_url("https://proxy", "x").port == 443
    assert parse_proxy_url("http://proxy:3128/", "x").authorization() is None


@pytest.mark.parametrize("value", ["socks5://127.0.0.1:7890", "socks5h://u:SECRETPW@127.0.0.1:1080", "socks4://127.0.0.1:1"])
def test_socks_is_refused_with_the_http_alternative(value):
    with pytest.raises(EgressError) as e:
        check({"ALL_PROXY": value})
    msg = str(e.value)
    assert "SOCKS" in msg and "http://127.0.0.1:" in msg and "--no-upstream-proxy" in msg and "SECRETPW" not in msg
    check({"ALL_PROXY": value}, disabled=True)  # --no-upstream-proxy: nothing to refuse
    with pytest.raises(EgressError):  # http:// upstreams would still take ALL_PROXY
        check({"HTTPS_PROXY": "http://127.0.0.1:7890", "ALL_PROXY": value})


def test_clash_export_with_a_socks_all_proxy_beside_http_ones_starts():
    """Clash's "copy terminal proxy command": http for both schemes, socks5 for ALL_PROXY, which never applies."""
    env = {"https_proxy": "http://127.0.0.1:7890", "http_proxy": "http://127.0.0.1:7890",
           "all_proxy": "socks5://127.0.0.1:7890"}
    check(env)
    for scheme in ("https", "http"):
        d = decide(scheme, "api.example.com", 443, env)
        assert d.proxy is not None and d.proxy.url == "http://127.0.0.1:7890"


@pytest.mark.parametrize("value", ["ftp://p:21", "http://", "http://p:3128/path", "http://p:notaport"])
def test_unusable_proxy_urls(value):
    with pytest.raises(EgressError):
        parse_proxy_url(value, "HTTPS_PROXY")
