"""What every `firsttoken doctor` check shares: the :class:`Check` result, the :class:`Context`
it runs in (env, home, cwd, the proxy, a :class:`~firsttoken.cli.doctor_net.Net`), the
variable names it looks at, and how a key or URL is described without printing it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from firsttoken.addon.forward import is_loopback
from firsttoken.addon.routing import Route
from firsttoken.addon.secrets import KEY_FACT_TEXT, facts_for, key_fact_text, mask
from firsttoken.cli.doctor.net import Net
from firsttoken.cli.env.target import DEFAULT_PORT

PASS, WARN, FAIL = "pass", "warn", "fail"
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "GEMINI_API_KEY", "GOOGLE_API_KEY")
BASE_URL_VARS = {"OPENAI_BASE_URL": "openai", "OPENAI_API_BASE": "openai", "ANTHROPIC_BASE_URL": "anthropic",
                 "GOOGLE_GEMINI_BASE_URL": "gemini", "GOOGLE_VERTEX_BASE_URL": "gemini",
                 # Claude Code on Bedrock / Vertex AI: base URLs it appends the whole path to (cli/run/clients/cloud.py)
                 "ANTHROPIC_BEDROCK_BASE_URL": "cloud", "ANTHROPIC_VERTEX_BASE_URL": "cloud"}
DEFAULT_PROXY = f"http://127.0.0.1:{DEFAULT_PORT}"

#: the facts that break a key or URL, most telling first
#: a key fact -> its words (the one table, shared with the auth findings)
FACT_TEXT = {fact: key_fact_text(fact) for fact in KEY_FACT_TEXT}


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
    net: Net = field(default_factory=lambda: Net())
    network: bool = True
    running: tuple[str, ...] = ()  # the URLs of the firsttoken proxies running now (their state files)

    @property
    def proxy(self) -> tuple[str, str, int]:
        u = urlsplit(self.proxy_url if "://" in self.proxy_url else "http://" + self.proxy_url)
        return u.scheme, (u.hostname or "127.0.0.1"), (u.port or (443 if u.scheme == "https" else 80))


def same_endpoint(host: str, port: int | None, ctx: Context) -> bool:
    """Whether host:port is where firsttoken listens (any loopback name counts as one)."""
    _, phost, pport = ctx.proxy
    if port != pport:
        return False
    return host == phost or (is_loopback(host) and is_loopback(phost))


def redact_url(value: str) -> str:
    """A proxy URL without its password."""
    return re.sub(r"(://[^:/@\s]*):[^@/\s]*@", r"\1:***@", value)


def key_facts(value: str) -> list[str]:
    """secrets' facts about a value, the most telling first."""
    facts = facts_for(value)
    order = list(FACT_TEXT)
    return sorted(facts, key=lambda f: order.index(f) if f in order else len(order))


def fingerprint(value: str) -> str:
    return f"{mask(value)}, {len(value.strip())} chars"
