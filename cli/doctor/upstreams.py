"""`firsttoken doctor`, the proxy and the upstreams: is firsttoken listening where the clients
point, does forward mode have its CA, and can each upstream be reached (DNS, TCP, TLS)?
No request is sent: a TCP connect to the proxy, a TLS handshake with the upstreams.
"""

from __future__ import annotations

import ssl
import threading
import time
import tomllib
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from firsttoken.addon import routing
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


def upstream_targets(ctx: Context, blocks: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str, int]]:
    """(scheme, host, port) of every upstream worth probing; the two big APIs when none is known."""
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
    if not found:
        found = [("https", "api.openai.com", 443), ("https", "api.anthropic.com", 443)]
    return list(dict.fromkeys(found))


def probe_upstream(net: Net, scheme: str, host: str, port: int) -> Check:
    cid, title = f"upstream.{host}:{port}", f"{scheme}://{host}:{port}"
    t0 = time.perf_counter()
    try:
        addrs = net.resolve(host, port)
    except Exception as e:  # noqa: BLE001
        return Check(cid, "upstreams", WARN, f"{title}: DNS lookup failed", f"{describe_oserror(e)} (offline? a DNS or VPN problem?)",
                     "check the network: firsttoken connects to the upstream directly and would fail the same way")
    t1 = time.perf_counter()
    try:
        sock = net.connect(addrs[0], port)
    except Exception as e:  # noqa: BLE001
        return Check(cid, "upstreams", WARN, f"{title}: TCP connect to {addrs[0]} failed",
                     f"{describe_oserror(e)} after DNS {1000 * (t1 - t0):.0f} ms (offline? a firewall?)", None)
    t2 = time.perf_counter()
    timing = f"DNS {1000 * (t1 - t0):.0f} ms, TCP {1000 * (t2 - t1):.0f} ms"
    if scheme != "https":
        sock.close()
        return Check(cid, "upstreams", PASS, f"{title} is reachable", f"{timing} ({addrs[0]})")
    try:
        version = net.tls(sock, host)
    except ssl.SSLCertVerificationError as e:
        return Check(cid, "upstreams", WARN, f"{title}: TLS certificate not trusted",
                     f"{e.verify_message or e} ({timing}): a corporate TLS inspection proxy?",
                     "trust its CA for firsttoken: --set ssl_verify_upstream_trusted_ca=CA.pem, "
                     "or --insecure-upstream to test")
    except Exception as e:  # noqa: BLE001
        return Check(cid, "upstreams", WARN, f"{title}: TLS handshake failed", f"{describe_oserror(e)} ({timing})", None)
    finally:
        sock.close()
    t3 = time.perf_counter()
    return Check(cid, "upstreams", PASS, f"{title} is reachable",
                 f"{timing}, TLS {1000 * (t3 - t2):.0f} ms ({version}, {addrs[0]})")


def check_upstreams(ctx: Context, blocks: list[tuple[str, dict[str, Any]]]) -> list[Check]:
    targets = upstream_targets(ctx, blocks)
    results: list[Check | None] = [None] * len(targets)

    def run(i: int, t: tuple[str, str, int]) -> None:
        results[i] = probe_upstream(ctx.net, *t)

    threads = [threading.Thread(target=run, args=(i, t), daemon=True) for i, t in enumerate(targets)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 3 * ctx.net.timeout + 1
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return [r or Check(f"upstream.{h}:{p}", "upstreams", WARN, f"{s}://{h}:{p}: no answer in time", "", None)
            for r, (s, h, p) in zip(results, targets)]
