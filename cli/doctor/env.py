"""`firsttoken doctor`, the environment: proxy variables (and NO_PROXY), API keys (fingerprints
only) and base URLs, checked against the base-URL rule every command follows (addon/routing.py).

check_key and check_base_url also serve the settings files (doctor_files.py).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from firsttoken.addon import routing
from firsttoken.addon.forward import is_loopback
from firsttoken.cli.doctor.core import (
    BASE_URL_VARS,
    FACT_TEXT,
    FAIL,
    KEY_VARS,
    PASS,
    WARN,
    Check,
    Context,
    fingerprint,
    key_facts,
    redact_url,
    same_endpoint,
)
from firsttoken.cli.doctor.engines import engine_urls, ollama_default
from firsttoken.cli.env.clients import claude_oauth_login
from firsttoken.cli.run.clients import cloud, ollama

PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
#: the variables that apply to a plain-http URL such as firsttoken's
HTTP_PROXY_VARS = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


# -- 1. proxy variables ------------------------------------------------------------------------

def no_proxy_covers(no_proxy: str, host: str, port: int | None = None) -> bool:
    """Whether a NO_PROXY value exempts host (the one rule: addon/egress/rules.py)."""
    from firsttoken.addon.egress import no_proxy_match

    return no_proxy_match(host, port, no_proxy) is not None


def check_proxy_vars(ctx: Context) -> list[Check]:
    out: list[Check] = []
    env = ctx.env
    _, phost, pport = ctx.proxy
    for var in PROXY_VARS:
        if var not in env:
            continue
        value = env[var]
        cid = f"proxy_env.{var}"
        facts = [f for f in key_facts(value) if f in ("empty", "leading_whitespace", "trailing_whitespace",
                                                       "newline", "quoted", "inner_whitespace")]
        if facts:
            if facts == ["empty"]:
                out.append(Check(cid, "proxy", PASS, f"{var} is set but empty (no proxy)"))
                continue
            out.append(Check(cid, "proxy", FAIL, f"{var} {FACT_TEXT[facts[0]]}",
                             f"{var}={redact_url(value)!r}", f"set it again without the stray characters, or `unset {var}`"))
            continue
        text = value.strip()
        u = urlsplit(text if "://" in text else "http://" + text)
        try:
            host, port = u.hostname, u.port or (443 if u.scheme == "https" else 1080 if u.scheme.startswith("socks") else 80)
        except ValueError:
            host, port = None, None
        if not host:
            out.append(Check(cid, "proxy", FAIL, f"{var} is not a URL", f"{var}={redact_url(value)}",
                             f"write it as http://host:port, or `unset {var}`"))
            continue
        shown = f"{var}={redact_url(text)}"
        if same_endpoint(host, port, ctx):
            status = PASS if ctx.forward else WARN
            out.append(Check(cid, "proxy", status, f"{var} points at firsttoken itself", shown,
                             None if ctx.forward else "that is only right for `firsttoken proxy --forward`; for the "
                             "normal (reverse) proxy point the client's base URL at it instead and unset " + var))
            continue
        if is_loopback(host) or host in ("0.0.0.0", "::"):
            err = ctx.net.listening("127.0.0.1" if host in ("0.0.0.0", "localhost") else host, port)
            if err:
                out.append(Check(cid, "proxy", FAIL, f"local proxy failed: nothing listens on {host}:{port}",
                                 f"{shown} ({err}): every request a client sends through it fails",
                                 f"start that local proxy (Clash, V2Ray, Charles…?), or `unset {var}`"))
                continue
            out.append(Check(cid, "proxy", PASS, f"{var}: a local proxy is listening", shown))
        else:
            out.append(Check(cid, "proxy", PASS, f"{var} is set (a remote proxy, not probed)", shown))
    # would a proxy variable capture the traffic meant for firsttoken?
    via = [v for v in HTTP_PROXY_VARS if (env.get(v) or "").strip()]
    if via and not ctx.forward:
        no_proxy = ",".join(env.get(v, "") for v in ("NO_PROXY", "no_proxy"))
        hosts = {phost} | ({"127.0.0.1", "localhost"} if is_loopback(phost) else set())
        uncovered = sorted(h for h in hosts if not no_proxy_covers(no_proxy, h, pport))
        if uncovered:
            out.append(Check(
                "proxy_env.no_proxy", "proxy", WARN,
                f"{' and '.join(via)} would also carry the requests meant for firsttoken",
                f"NO_PROXY does not cover {', '.join(uncovered)}: Python (httpx, requests) and curl send "
                f"http://{phost}:{pport} through the other proxy instead of connecting directly",
                "export NO_PROXY=127.0.0.1,localhost (and no_proxy, for curl)"))
        else:
            out.append(Check("proxy_env.no_proxy", "proxy", PASS, "NO_PROXY exempts firsttoken's address",
                             f"NO_PROXY={no_proxy.strip(',')}"))
    return out


# -- 2. keys -----------------------------------------------------------------------------------

def check_key(var: str, value: str, source: str = "environment") -> Check:
    cid = f"key.{var}" if source == "environment" else f"key.{source}.{var}"
    where = var if source == "environment" else f"{var} in {source}"
    facts = key_facts(value)
    bad = [f for f in facts if f in FACT_TEXT]
    if bad:
        fp = fingerprint(value) if "empty" not in bad else "empty"
        return Check(cid, "keys", FAIL, f"{where} {FACT_TEXT[bad[0]]}",
                     f"{fp}; facts: {', '.join(bad)}",
                     f"set it again with only the key: export {var}='<key>' (no quotes inside, no newline)")
    s = value.strip()
    if var == "OPENAI_API_KEY" and s.startswith("sk-ant-"):
        return Check(cid, "keys", WARN, f"{where} holds an Anthropic key", fingerprint(value),
                     "put it in ANTHROPIC_API_KEY; OPENAI_API_KEY wants the OpenAI (or relay) key")
    if var == "ANTHROPIC_API_KEY" and (s.startswith("sk-proj-") or (s.startswith("sk-") and not s.startswith("sk-ant-"))):
        return Check(cid, "keys", WARN, f"{where} does not look like an Anthropic key (sk-ant-…)", fingerprint(value),
                     "fine for a relay that issues its own keys; api.anthropic.com will answer 401")
    if var == "ANTHROPIC_AUTH_TOKEN" and s.startswith("sk-ant-api"):
        return Check(cid, "keys", WARN, f"{where} holds an Anthropic API key", fingerprint(value),
                     "it is sent as Authorization: Bearer; api.anthropic.com expects API keys in x-api-key: "
                     "use ANTHROPIC_API_KEY instead")
    return Check(cid, "keys", PASS, f"{where} looks clean", fingerprint(value))


def check_keys(ctx: Context, settings_env: list[tuple[str, dict[str, Any]]] | None = None) -> list[Check]:
    out: list[Check] = []
    env = ctx.env
    names = list(KEY_VARS) + [k for k in ctx.env_keys if k not in KEY_VARS]
    for var in names:
        if var not in env:
            if var in ctx.env_keys:
                out.append(Check(f"key.{var}", "keys", WARN, f"{var} is not set", "",
                                 f"export {var}='<key>' in the shell that starts the client"))
            continue
        out.append(check_key(var, env[var]))
    for source, block in settings_env or []:
        for var in KEY_VARS:
            if isinstance(block.get(var), str):
                out.append(check_key(var, block[var], source))
    merged = dict(env)
    for _, block in settings_env or []:
        merged.update({k: v for k, v in block.items() if isinstance(v, str)})
    if (merged.get("ANTHROPIC_API_KEY") or "").strip() and (merged.get("ANTHROPIC_AUTH_TOKEN") or "").strip():
        out.append(Check("key.anthropic_both", "keys", WARN, "both ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN are set",
                         "Claude Code and the SDK send both (x-api-key and Authorization: Bearer); the upstream "
                         "may pick the one you did not mean",
                         "keep ANTHROPIC_API_KEY for api.anthropic.com, ANTHROPIC_AUTH_TOKEN for a gateway; unset the other"))
    if (merged.get("ANTHROPIC_API_KEY") or "").strip() and claude_oauth_login(ctx.home):
        out.append(Check("key.claude_auth_conflict", "keys", WARN,
                         "auth conflict: a claude.ai login and ANTHROPIC_API_KEY",
                         "~/.claude/.credentials.json exists and ANTHROPIC_API_KEY is set: Claude Code warns "
                         "'Auth conflict' and may bill the API key instead of the subscription",
                         "keep one: `unset ANTHROPIC_API_KEY` (and drop it from settings.json), or `claude /logout`"))
    if not any(c.section == "keys" for c in out):
        out.append(Check("key.none", "keys", PASS, "no API key variables set",
                         "fine with a claude.ai / ChatGPT login or keys kept in the client's own settings"))
    return out


# -- 3. base URLs (environment; doctor_files.py reuses check_base_url for the settings files) --

_ENDPOINT = re.compile(r"/(chat/completions|completions|responses|messages|embeddings)/?$", re.IGNORECASE)


def check_base_url(var: str, value: str, kind: str, ctx: Context, source: str = "environment") -> Check:
    """One base URL: ``kind`` "openai" (client appends /chat/completions), "anthropic" (/v1/messages) or
    "gemini" (/v1beta/models/…), "cloud" (Bedrock's /model/…, Vertex's /projects/…: the whole path)."""
    cid = f"base_url.{source}.{var}".replace(" ", "_")
    where = var if source == "environment" else f"{var} in {source}"
    facts = [f for f in key_facts(value) if f in ("empty", "leading_whitespace", "trailing_whitespace", "newline",
                                                  "quoted", "inner_whitespace", "non_ascii")]
    if facts:
        return Check(cid, "base_urls", FAIL, f"{where} {FACT_TEXT[facts[0]]}", repr(value),
                     "set it again with just the URL")
    text = value.strip()
    u = urlsplit(text)
    if u.scheme not in ("http", "https") or not u.hostname:
        return Check(cid, "base_urls", FAIL, f"{where} is not an http(s) URL", text,
                     "write it as http://127.0.0.1:8787/… (with the scheme)")
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        return Check(cid, "base_urls", FAIL, f"{where} has a bad port", text, None)
    path = u.path.rstrip("/")
    if re.search(r"/v1/v1(/|$)", path + "/"):
        return Check(cid, "base_urls", FAIL, f"{where} has /v1 twice", text, f"use {text.replace('/v1/v1', '/v1')}")
    m = _ENDPOINT.search(path)
    if m:
        cut = text.rstrip("/")[: -len(m.group(0).rstrip("/"))]
        if kind == "anthropic":
            cut = re.sub(r"/v1$", "", cut)
        return Check(cid, "base_urls", FAIL, f"{where} ends in /{m.group(1)}",
                     f"{text}: the client appends the endpoint itself, so requests go to …/{m.group(1)}/{m.group(1)}",
                     f"use {cut}")
    if kind == "anthropic" and routing.ends_in_v1(path):
        return Check(cid, "base_urls", FAIL, f"{where} ends in /v1",
                     f"{text}: Anthropic clients append /v1/messages, so requests go to …/v1/v1/messages",
                     f"use {text.rstrip('/')[:-3]}")
    if kind == "gemini" and (m := re.search(r"/(v1beta1|v1beta|v1alpha|v1)$", path)):
        return Check(cid, "base_urls", FAIL, f"{where} ends in /{m.group(1)}",
                     f"{text}: Gemini clients append /{m.group(1)}/models/… themselves, so requests go to "
                     f"…/{m.group(1)}/{m.group(1)}/models/…", f"use {text.rstrip('/')[: -len(m.group(0))]}")
    if kind == "ollama" and routing.ends_in_v1(path):
        return Check(cid, "base_urls", FAIL, f"{where} ends in /v1",
                     f"{text}: Ollama's native clients append /api/chat and /api/generate to the server's root, so "
                     "requests go to …/v1/api/chat (404)", f"use {text.rstrip('/')[:-3]}")
    to_proxy = same_endpoint(u.hostname, port, ctx)
    if to_proxy and u.scheme == "https":
        fixed = "http" + text[5:]
        return Check(cid, "base_urls", FAIL, f"{where} uses https:// to firsttoken's plain-http port",
                     f"{text}: firsttoken listens on plain HTTP; a TLS handshake there fails "
                     "('wrong version number' / 'packet length too long')", f"use {fixed}")
    if to_proxy and ctx.routes is not None:
        return _check_against_routes(cid, where, text, path, kind, ctx)
    if to_proxy:
        return Check(cid, "base_urls", PASS, f"{where} points at firsttoken", text)
    if is_loopback(u.hostname):
        err = ctx.net.listening(u.hostname, port)  # a TCP connect on this machine: nothing is sent
        if err is not None:
            return _nothing_listens(cid, where, text, u.hostname, port, err, ctx)
    return Check(cid, "base_urls", PASS, f"{where} goes straight to {u.hostname}",
                 f"{text} (not through firsttoken; `firsttoken env` prints the setting that is)")


def _nothing_listens(cid: str, where: str, text: str, host: str, port: int, err: str, ctx: Context) -> Check:
    """A base URL on this machine where nothing listens: every request of that client fails. The
    fix names the port a running firsttoken proxy is on (its state file), if one runs."""
    running = [u for u in dict.fromkeys(ctx.running) if "://" in u]
    detail = f"{text}: the client's requests fail ({err}) before reaching any model"
    if running:
        r = urlsplit(running[-1])
        u = urlsplit(text)
        fixed = u._replace(netloc=f"{u.hostname}:{r.port}" if r.port else u.netloc).geturl()
        others = f" (also running: {', '.join(running[:-1])})" if len(running) > 1 else ""
        return Check(cid, "base_urls", FAIL, f"{where}: nothing listens on {host}:{port}", detail,
                     f"firsttoken runs on port {r.port} ({running[-1]}){others}: use {fixed}")
    return Check(cid, "base_urls", FAIL, f"{where}: nothing listens on {host}:{port}", detail,
                 f"no firsttoken proxy runs now: start one (firsttoken proxy --port {port} --upstream URL), "
                 "or correct the port in the URL")


def _check_against_routes(cid: str, where: str, text: str, path: str, kind: str, ctx: Context) -> Check:
    routes = ctx.routes or []
    route, rest = routing.match(routes, path or "/")
    if route is None:
        mounts = ", ".join(r.mount or "/" for r in routes)
        return Check(cid, "base_urls", FAIL, f"{where} matches no route of the running proxy",
                     f"{text}; routes: {mounts}", "`firsttoken env …` prints the right URL")
    upstream_path = route.prefix + (rest if rest != "/" else "")
    n = routing.count_versions(upstream_path)
    u = urlsplit(text)
    right = routing.client_base_url(f"{u.scheme}://{u.netloc}", route, kind)  # the one rule's answer
    if kind == "openai" and n == 0:
        return Check(cid, "base_urls", FAIL, f"{where} lacks /v1",
                     f"{text} → {route.url}{rest if rest != '/' else ''}: the upstream gets /chat/completions without /v1",
                     f"use {right}")
    if kind == "ollama" and n >= 1:
        return Check(cid, "base_urls", FAIL, f"{where} reaches the upstream under {route.prefix + (rest if rest != '/' else '')}",
                     f"{text} → {route.url}{rest if rest != '/' else ''} + /api/chat: Ollama's native paths sit at the "
                     "server's root", f"give the proxy a route to the Ollama server's root (--upstream "
                     f"{(route.name + '=') if route.name else ''}{route.url[: len(route.url) - len(route.prefix)]}) and point "
                     f"{where} at it")
    if n > 1 or (kind in ("anthropic", "gemini") and n >= 1):
        warn = routing.base_url_warnings(route, kind)
        appended = {"anthropic": "/v1/messages", "gemini": "/v1beta/models/…"}.get(kind, "/chat/completions")
        return Check(cid, "base_urls", FAIL, f"{where} makes the upstream path carry the version twice",
                     f"{text} → {route.url}{rest if rest != '/' else ''} + {appended}",
                     warn[0] if warn else f"use {right}")
    return Check(cid, "base_urls", PASS, f"{where} points at firsttoken (route {route.name or 'default'!r})",
                 f"{text} → {route.url}")


def check_sigv4_through_proxy(ctx: Context) -> list[Check]:
    """Claude Code on Bedrock pointed at firsttoken while it signs with SigV4: every request fails
    upstream (the signature covers the proxy's host), whatever the key."""
    v = (ctx.env.get("ANTHROPIC_BEDROCK_BASE_URL") or "").strip()
    if cloud.kind(ctx.env) != "bedrock" or not v or not cloud.signs(ctx.env):
        return []
    u = urlsplit(v)
    try:
        port = u.port or (443 if u.scheme == "https" else 80)
    except ValueError:
        return []
    if not u.hostname or not same_endpoint(u.hostname, port, ctx):
        return []
    return [Check("base_url.bedrock_sigv4", "base_urls", FAIL,
                  "Claude Code on Bedrock signs its requests for firsttoken's address",
                  f"ANTHROPIC_BEDROCK_BASE_URL={v} with SigV4 (no CLAUDE_CODE_SKIP_BEDROCK_AUTH, no "
                  "AWS_BEARER_TOKEN_BEDROCK): forwarded to Bedrock, every signature fails (403 SignatureDoesNotMatch)",
                  "unset ANTHROPIC_BEDROCK_BASE_URL and use forward mode (`firsttoken run --forward -- claude`, or "
                  "HTTPS_PROXY=<the proxy> with firsttoken's CA), or put a gateway that signs behind the proxy and "
                  "set CLAUDE_CODE_SKIP_BEDROCK_AUTH=1")]


def check_env_base_urls(ctx: Context) -> list[Check]:
    out = []
    for var, kind in BASE_URL_VARS.items():
        if var in ctx.env and ctx.env[var] != "":
            out.append(check_base_url(var, ctx.env[var], kind, ctx))
    for var, url, kind in engine_urls(ctx.env):  # the local engines' clients (Ollama's, aider's, Codex --oss, Copilot)
        out.append(check_base_url(var, url, kind, ctx))
    if ollama_default(ctx):
        out.append(Check("base_url.environment.OLLAMA_HOST", "base_urls", PASS,
                         f"OLLAMA_HOST is not set: Ollama's clients go straight to {ollama.DEFAULT}",
                         "something listens there; not through firsttoken (`firsttoken run -- ollama …` or "
                         "`firsttoken env ollama` points them at the proxy)"))
    out += check_sigv4_through_proxy(ctx)
    a, b = (ctx.env.get("OPENAI_API_BASE") or "").strip(), (ctx.env.get("OPENAI_BASE_URL") or "").strip()
    if a and a.rstrip("/") != b.rstrip("/"):
        out.append(Check("base_url.openai_api_base", "base_urls", WARN,
                         "OPENAI_API_BASE is set" + (" and differs from OPENAI_BASE_URL" if b else " but OPENAI_BASE_URL is not"),
                         "openai>=1.0 (and the Node SDK, Codex) read only OPENAI_BASE_URL; OPENAI_API_BASE is for "
                         "openai<1.0 / older LangChain",
                         f"export OPENAI_BASE_URL={a}" if not b else "give both the same value, or unset OPENAI_API_BASE"))
    return out

