"""`firsttoken doctor`, the proxy and the upstreams: is firsttoken listening where the clients
point, does forward mode have its CA, and can each upstream be reached (DNS, TCP, TLS)?
No request is sent: a TCP connect to the proxy, a TLS handshake with the upstreams.
"""

from __future__ import annotations

import ssl
import threading
import time
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from firsttoken.addon import routing
from firsttoken.addon.egress import PROXY_VARS
from firsttoken.addon.forward import is_loopback
from firsttoken.addon.routing import Route
from firsttoken.cli.doctor.core import BASE_URL_VARS, FAIL, PASS, WARN, Check, Context, same_endpoint
from firsttoken.cli.doctor.files import codex_config_path
from firsttoken.cli.doctor.net import Net, describe_oserror


def check_forward_ca(ctx: Context) -> Check:
    from firsttoken.addon.forward import ca_cert_path

    ca = ca_cert_path(ctx.confdir)
    if ca.is_file():
        return Check("proxy.forward_ca", "proxy", PASS, "forward mode: mitmproxy's CA exists", str(ca))
    return Check("proxy.forward_ca", "proxy", FAIL, f"forward mode: {ca} is missing",
                 "clients cannot trust the intercepted LLM hosts without it",
                 "start `firsttoken proxy --forward` once (it creates the CA), then `firsttoken env CLIENT --forward`")


def _client_urls(ctx: Context, blocks: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The base URLs in the environment and in Claude Code's settings (any type: not checked yet)."""
    return [ctx.env.get(v) for v in BASE_URL_VARS] + [b.get("ANTHROPIC_BASE_URL") for _, b in blocks]


def _endpoints(urls: Iterable[Any]) -> Iterator[tuple[str, str, str, int]]:
    """(url, scheme, host, port) of each URL that parses, with the scheme's port by default."""
    for url in urls:
        if not isinstance(url, str) or "://" not in url:
            continue
        u = urlsplit(url.strip())
        try:
            port = u.port or (443 if u.scheme == "https" else 80)
        except ValueError:
            continue
        if u.hostname:
            yield url.strip(), u.scheme, u.hostname, port


def urls_to_proxy(ctx: Context, blocks: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Where a client is configured to reach firsttoken (env, Claude Code settings, Codex)."""
    urls = _client_urls(ctx, blocks)
    try:
        cfg = tomllib.loads(codex_config_path(ctx).read_text(encoding="utf-8"))
        urls += [p.get("base_url") for p in (cfg.get("model_providers") or {}).values() if isinstance(p, dict)]
    except (OSError, ValueError):
        pass
    return [url for url, _, host, port in _endpoints(urls) if same_endpoint(host, port, ctx)]


def check_proxy(ctx: Context, blocks: list[tuple[str, dict[str, Any]]]) -> Check:
    scheme, host, port = ctx.proxy
    if scheme == "https":
        return Check("proxy.listening", "proxy", FAIL, f"--proxy {ctx.proxy_url} uses https://",
                     "firsttoken listens on plain HTTP", f"use http://{host}:{port}")
    err = ctx.net.listening(host, port)
    if err is None:
        return Check("proxy.listening", "proxy", PASS, f"firsttoken's port {host}:{port} is listening",
                     "(a TCP connect only: no request was sent)")
    pointed = urls_to_proxy(ctx, blocks)
    return Check("proxy.listening", "proxy", FAIL if pointed else WARN, f"nothing listens on {host}:{port} ({err})",
                 (f"{', '.join(pointed)} point{'s' if len(pointed) == 1 else ''} there: every request fails until "
                  "the proxy runs") if pointed else "start the proxy before the client",
                 "firsttoken proxy --upstream https://api.openai.com   (or pass --proxy URL if it runs elsewhere)")


#: probed when no upstream is configured anywhere: a guess, so a failure there only warns
LIKELY_UPSTREAMS = (("https", "api.openai.com", 443), ("https", "api.anthropic.com", 443))


def configured_upstreams(ctx: Context, blocks: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str, int]]:
    """(scheme, host, port) of the upstreams named by --upstream, the routes and the clients' base URLs."""
    found: list[tuple[str, str, int]] = []
    routes: list[Route] = []
    try:
        routes = routing.parse_upstreams(list(ctx.upstreams))
    except routing.RouteError:
        pass
    routes += ctx.routes or []
    for r in routes:
        found.append((r.scheme, r.host, r.port))
    found += [(scheme, host, port) for _, scheme, host, port in _endpoints(_client_urls(ctx, blocks))
              if not same_endpoint(host, port, ctx) and not is_loopback(host)]  # (a loopback one: its base URL check)
    return list(dict.fromkeys(found))


def probe_upstream(net: Net, scheme: str, host: str, port: int, env: Mapping[str, str] | None = None,
                   severity: str = FAIL) -> Check:
    """The way firsttoken's proxy will go (addon/egress: through HTTPS_PROXY & co. where they apply);
    a direct way that fails is ``severity`` (WARN for a guessed upstream, FAIL for a configured one).
    A guessed upstream is one doctor chose, not the user: its failure is never put down to their typo."""
    from firsttoken.addon.egress import EgressError, decide

    cid, title = f"upstream.{host}:{port}", f"{scheme}://{host}:{port}"
    try:
        way = decide(scheme, host, port, env or {})
    except EgressError as e:
        return Check(cid, "upstreams", FAIL, f"{title}: firsttoken cannot use the proxy setting", str(e), None)
    if way.proxy is not None:
        return probe_via_proxy(net, scheme, host, port, way)
    title += " (direct)" if env and any((env.get(v) or "").strip() for v in PROXY_VARS) else ""
    t0 = time.perf_counter()
    try:
        addrs = net.resolve(host, port)
    except Exception as e:  # noqa: BLE001
        return Check(cid, "upstreams", severity, f"{title}: DNS lookup failed",
                     f"{describe_oserror(e)} (offline? a DNS or VPN problem?)",
                     ("check the network" if severity != FAIL else f"check the host name {host} for typos, and the network")
                     + ": firsttoken connects to the upstream directly (no proxy variable applies to it) and "
                     "would fail the same way; if this machine needs a proxy, export HTTPS_PROXY (firsttoken follows it)")
    t1 = time.perf_counter()
    try:
        sock = net.connect(addrs[0], port)
    except Exception as e:  # noqa: BLE001
        return Check(cid, "upstreams", severity, f"{title}: TCP connect to {addrs[0]} failed",
                     f"{describe_oserror(e)} after DNS {1000 * (t1 - t0):.0f} ms (offline? a firewall?)",
                     ("check the network or the firewall" if severity != FAIL
                      else f"check that {host}:{port} is the right address and that it runs")
                     + "; firsttoken connects to it directly and its requests would fail the same way "
                     "(if this machine needs a proxy, export HTTPS_PROXY)")
    t2 = time.perf_counter()
    timing = f"DNS {1000 * (t1 - t0):.0f} ms, TCP {1000 * (t2 - t1):.0f} ms"
    if scheme != "https":
        sock.close()
        return Check(cid, "upstreams", PASS, f"{title} is reachable", f"{timing} ({addrs[0]})")
    return tls_check(net, sock, host, cid, title, timing, t2, severity,
                     untrusted_why=f" ({timing}): a corporate TLS inspection proxy?",
                     untrusted_fix="trust its CA for firsttoken: firsttoken proxy --upstream-ca CA.pem (or SSL_CERT_FILE / "
                                   "REQUESTS_CA_BUNDLE), or --insecure-upstream to test",
                     reached=f", {addrs[0]}")


def tls_check(net: Net, sock: Any, host: str, cid: str, title: str, timing: str, t0: float, severity: str, *,
              untrusted_why: str, untrusted_fix: str, reached: str = "") -> Check:
    """The TLS handshake with the upstream on a connected socket (closed here), direct or through a
    proxy's CONNECT tunnel: a failure is `severity`; the callers say why a certificate may not be
    trusted and what to do (`untrusted_why` follows the verifier's message), and `reached` follows
    the TLS version on success."""
    try:
        version = net.tls(sock, host)
    except ssl.SSLCertVerificationError as e:
        return Check(cid, "upstreams", severity, f"{title}: TLS certificate not trusted",
                     f"{e.verify_message or e}{untrusted_why}", untrusted_fix)
    except Exception as e:  # noqa: BLE001
        return Check(cid, "upstreams", severity, f"{title}: TLS handshake failed", f"{describe_oserror(e)} ({timing})", None)
    finally:
        sock.close()
    return Check(cid, "upstreams", PASS, f"{title} is reachable",
                 f"{timing}, TLS {1000 * (time.perf_counter() - t0):.0f} ms ({version}{reached})")


def probe_via_proxy(net: Net, scheme: str, host: str, port: int, way: Any) -> Check:
    """Through the egress proxy as firsttoken's proxy goes: CONNECT (+ TLS) for https, absolute-form for http."""
    p = way.proxy
    cid, title = f"upstream.{host}:{port}", f"{scheme}://{host}:{port} via {p.url} ({way.reason})"
    fix_down = (f"start the proxy or fix {way.reason}; if {host} is reachable directly, add it to NO_PROXY "
                "(or run firsttoken with --no-upstream-proxy)")
    t0 = time.perf_counter()
    try:
        addrs = net.resolve(p.host, p.port)
        sock = net.connect(addrs[0], p.port)
    except Exception as e:  # noqa: BLE001
        return Check(cid, "upstreams", FAIL, f"{title}: the proxy cannot be reached",
                     f"{describe_oserror(e)}: firsttoken's requests to {host} would fail the same way", fix_down)
    t1 = time.perf_counter()
    auth = p.authorization()
    extra = f"Proxy-Authorization: {auth}\r\n" if auth else ""
    target = f"[{host}]" if ":" in host else host
    try:
        if p.scheme == "https":
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=p.host)
        if scheme == "https" or p.scheme == "https":
            head = f"CONNECT {target}:{port} HTTP/1.1\r\nHost: {target}:{port}\r\n{extra}\r\n"
        else:
            head = (f"HEAD http://{target}:{port}/ HTTP/1.1\r\nHost: {target}:{port}\r\n{extra}"
                    "Connection: close\r\n\r\n")
        status, reason = net.proxy_request(sock, head.encode("latin-1"))
    except Exception as e:  # noqa: BLE001
        sock.close()
        return Check(cid, "upstreams", FAIL, f"{title}: the proxy did not answer", describe_oserror(e), fix_down)
    t2 = time.perf_counter()
    timing = f"proxy connect {1000 * (t1 - t0):.0f} ms, its answer {1000 * (t2 - t1):.0f} ms"
    answer = f"{status} {reason}".strip()
    if status == 407:
        sock.close()
        return Check(cid, "upstreams", FAIL, f"{title}: the proxy wants credentials ({answer})",
                     "with credentials" if auth else "the proxy URL has none",
                     "put them in the URL: HTTPS_PROXY=http://USER:PASSWORD@host:port (or --upstream-proxy)"
                     if not auth else "the proxy rejected the user and password in the URL: check them")
    if status in (502, 503, 504) or (status >= 300 and (scheme == "https" or p.scheme == "https")):
        sock.close()
        return Check(cid, "upstreams", FAIL, f"{title}: the proxy could not reach {host}:{port} ({answer})", timing,
                     f"check the host name, and the proxy's rules or its own way out; clients using {p.url} fail too")
    if scheme != "https":
        sock.close()
        return Check(cid, "upstreams", PASS, f"{title} is reachable", f"{timing}; the upstream answered {answer}")
    return tls_check(net, sock, host, cid, title, timing, t2, FAIL,
                     untrusted_why=": a TLS-inspecting proxy signs it with its own CA?",
                     untrusted_fix="trust that CA for firsttoken: firsttoken proxy --upstream-ca CA.pem (or SSL_CERT_FILE / "
                                   "REQUESTS_CA_BUNDLE)")


def check_upstreams(ctx: Context, blocks: list[tuple[str, dict[str, Any]]]) -> list[Check]:
    from firsttoken.addon.egress import trust

    targets = configured_upstreams(ctx, blocks)
    severity = FAIL if targets else WARN  # a guessed upstream that fails does not fail doctor
    targets = targets or list(LIKELY_UPSTREAMS)
    results: list[Check | None] = [None] * len(targets)
    ctx.net.cafiles = [str(f) for what, f in trust.sources(ctx.env).files if what != "the system store"]

    def run(i: int, t: tuple[str, str, int]) -> None:
        results[i] = probe_upstream(ctx.net, *t, env=ctx.env, severity=severity)
        if severity == WARN and results[i].status != PASS:
            results[i].detail += " (no upstream is configured: this one was probed as a likely one)"

    threads = [threading.Thread(target=run, args=(i, t), daemon=True) for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 3 * ctx.net.timeout + 1
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return [r or Check(f"upstream.{h}:{p}", "upstreams", severity, f"{s}://{h}:{p}: no answer in time",
                       f"the probes took over {3 * ctx.net.timeout + 1:.0f} s", "check the network or the proxy on the way")
            for r, (s, h, p) in zip(results, targets)]
