"""Forward-proxy mode (``firsttoken proxy --forward``): record LLM API hosts, tunnel every other host untouched.

The table of LLM hosts also names each host's ``gen_ai.provider.name`` for the metrics.
How the mode works and what a client must trust: docs/clients.md ("Forward-proxy mode").
"""

from __future__ import annotations

import ipaddress
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firsttoken.addon.routing import RouteError


@dataclass(frozen=True)
class LLMHost:
    pattern: str  # "api.openai.com", or "*.openai.azure.com" (any sub-domain, not the bare domain)
    provider: str  # gen_ai.provider.name (well-known value where the semconv has one)


#: Intercepted and recorded by default in forward mode. Local model servers (Ollama on
#: 11434, LM Studio on 1234, vLLM, llama.cpp…) are not in the list: clients reach them
#: directly (NO_PROXY covers localhost), and their ports (8000, 8080) are too generic; add
#: them with ``--host-match 'localhost:11434'`` — or better, use reverse mode for them.
DEFAULT_HOSTS: tuple[LLMHost, ...] = (
    LLMHost("api.openai.com", "openai"),
    LLMHost("api.anthropic.com", "anthropic"),
    LLMHost("openrouter.ai", "openrouter"),
    LLMHost("api.deepseek.com", "deepseek"),
    LLMHost("generativelanguage.googleapis.com", "gcp.gemini"),
    LLMHost("aiplatform.googleapis.com", "gcp.vertex_ai"),
    LLMHost("*.aiplatform.googleapis.com", "gcp.vertex_ai"),
    LLMHost("api.mistral.ai", "mistral_ai"),
    LLMHost("api.groq.com", "groq"),
    LLMHost("api.together.xyz", "together_ai"),
    LLMHost("api.x.ai", "x_ai"),
    LLMHost("dashscope.aliyuncs.com", "dashscope"),
    LLMHost("dashscope-intl.aliyuncs.com", "dashscope"),
    LLMHost("open.bigmodel.cn", "zhipu_ai"),
    LLMHost("api.moonshot.cn", "moonshot_ai"),
    LLMHost("api.moonshot.ai", "moonshot_ai"),
    LLMHost("api.perplexity.ai", "perplexity"),
    LLMHost("*.openai.azure.com", "azure.ai.openai"),
    LLMHost("bedrock-runtime.*.amazonaws.com", "aws.bedrock"),  # (and -fips); not the control plane "bedrock."
)

#: Vertex AI's regional hosts are "us-east5-aiplatform.googleapis.com", not a sub-domain.
_EXTRA_REGEX = {"*.aiplatform.googleapis.com": r"[a-z0-9-]+-aiplatform\.googleapis\.com"}
#: patterns that are regexes of their own: Bedrock's runtime in every region ("bedrock-runtime.us-east-1.amazonaws.com")
_OWN_REGEX = {"bedrock-runtime.*.amazonaws.com": r"bedrock-runtime(?:-fips)?\.[a-z0-9-]+\.amazonaws\.com"}


def _host_regex(pattern: str) -> str:
    """The host part of a pattern as a regex (no anchors, no port)."""
    if pattern in _OWN_REGEX:
        return _OWN_REGEX[pattern]
    if pattern in _EXTRA_REGEX:
        return rf"(?:[A-Za-z0-9-]+\.)+{re.escape(pattern[2:])}|{_EXTRA_REGEX[pattern]}"
    if pattern.startswith("*."):
        return rf"(?:[A-Za-z0-9-]+\.)+{re.escape(pattern[2:])}"
    return re.escape(pattern)


def _default_regex(h: LLMHost) -> str:
    return rf"^(?:{_host_regex(h.pattern)}):\d+$"


class HostMatchError(RouteError):
    """A bad --host-match (a RouteError, so the CLI reports it like a bad --upstream)."""


def user_regex(spec: str) -> str:
    """A ``--host-match`` value as a regex over ``host:port``.

    A plain host name (``llm.example.com``), a wildcard (``*.example.com``) or
    ``host:port`` (``localhost:11434``) is matched exactly; anything else is taken as a
    regular expression searched in ``host:port`` (mitmproxy's ``allow_hosts`` semantics)."""
    s = spec.strip()
    if not s:
        raise HostMatchError("empty --host-match")
    m = re.fullmatch(r"(\*\.)?([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)(?::(\d+))?", s)
    if m:
        host = (m.group(1) or "") + m.group(2)
        port = m.group(3) or r"\d+"
        return rf"^(?:{_host_regex(host)}):{port}$"
    try:
        re.compile(s)
    except re.error as e:
        raise HostMatchError(f"--host-match {spec!r} is not a host name or a valid regex: {e}") from None
    return s


class HostFilter:
    """Which hosts forward mode intercepts and records."""

    def __init__(self, host_match: Iterable[str] = (), *, defaults: bool = True) -> None:
        self.extra = [user_regex(s) for s in host_match if s and s.strip()]
        self.patterns = ([_default_regex(h) for h in DEFAULT_HOSTS] if defaults else []) + self.extra
        self._compiled = [re.compile(p, re.IGNORECASE) for p in self.patterns]

    def allowed(self, host: str | None, port: int | None = None) -> bool:
        """Whether a request to ``host`` (``port`` defaults to 443) is an LLM call to record."""
        if not host:
            return False
        h = host.strip().rstrip(".").lower()
        if h.startswith("[") and h.endswith("]"):
            h = h[1:-1]
        target = f"{h}:{port or 443}"
        return any(rx.search(target) for rx in self._compiled)

    def mitmproxy_allow_hosts(self) -> list[str]:
        """For mitmproxy's ``allow_hosts``: everything else is tunnelled, TLS untouched."""
        return list(self.patterns)


def provider_for_host(host: str | None) -> str | None:
    """``gen_ai.provider.name`` of a known LLM API host, else None."""
    if not host:
        return None
    h = host.strip().rstrip(".").lower()
    for entry in DEFAULT_HOSTS:
        if re.fullmatch(_host_regex(entry.pattern), h, re.IGNORECASE):
            return entry.provider
    return None


def mitmproxy_options(host_match: Iterable[str] = ()) -> dict[str, Any]:
    """The mitmproxy (and firsttoken) options for forward mode, to merge into the proxy's options.

    ``firsttoken_forward`` / ``firsttoken_host_match`` are declared by :class:`Forward`."""
    hf = HostFilter(host_match)
    return {
        "mode": ["regular"],
        "allow_hosts": hf.mitmproxy_allow_hosts(),
        "connection_strategy": "lazy",
        "firsttoken_upstream": [],
        "firsttoken_forward": True,
        "firsttoken_host_match": list(host_match),
    }


# -- the addon ---------------------------------------------------------------------------

#: set on a flow's metadata when forward mode passes it on without recording it
SKIP = "firsttoken.skip"


class Forward:
    """Forward mode as its own mitmproxy addon: its options, the host filter and ``allow_hosts``.

    It runs before Capture (see :func:`firsttoken.addon.addons`) and marks the flows to other
    hosts with ``flow.metadata[SKIP]``; Capture records every flow not so marked."""

    def __init__(self) -> None:
        self.host_filter: HostFilter | None = None  # None outside forward mode
        self.auto_allow_hosts: list[str] | None = None  # what this addon set, to tell it from the user's

    def load(self, loader) -> None:
        from collections.abc import Sequence

        loader.add_option("firsttoken_forward", bool, False,
                          "Forward-proxy mode (mitmproxy regular mode): record only LLM API hosts; every "
                          "other host is tunnelled untouched (sets allow_hosts unless you set it).")
        loader.add_option("firsttoken_host_match", Sequence[str], [],
                          "Forward mode: more hosts to record, as host, *.domain, host:port, or a regex on host:port.")

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx, exceptions

        if not ({"firsttoken_forward", "firsttoken_host_match", "allow_hosts"} & set(updated)):
            return
        options = ctx.options
        if not options.firsttoken_forward:
            self.host_filter = None
            return
        try:
            hf = HostFilter(options.firsttoken_host_match)
        except HostMatchError as e:
            raise exceptions.OptionsError(str(e)) from None
        self.host_filter = hf
        wanted = hf.mitmproxy_allow_hosts()
        # set allow_hosts unless the user set their own (then theirs decides what is intercepted)
        if (not options.allow_hosts or list(options.allow_hosts) == self.auto_allow_hosts) \
                and list(options.allow_hosts) != wanted:
            self.auto_allow_hosts = wanted
            options.allow_hosts = wanted

    def requestheaders(self, flow) -> None:
        if self.host_filter is not None and not self.host_filter.allowed(flow.request.host, flow.request.port):
            flow.metadata[SKIP] = True


def ca_cert_path(confdir: str | os.PathLike | None = None) -> Path:
    """mitmproxy's CA certificate (PEM), created in its confdir the first time it runs."""
    return Path(confdir or "~/.mitmproxy").expanduser() / "mitmproxy-ca-cert.pem"


def combined_ca_bundle(dest: str | os.PathLike, confdir: str | os.PathLike | None = None) -> Path:
    """Write certifi's public CAs + mitmproxy's CA to ``dest``: a file for ``SSL_CERT_FILE`` /
    ``REQUESTS_CA_BUNDLE``, which *replace* a client's trust store (so the public CAs are
    needed too, for the hosts forward mode tunnels untouched)."""
    ca = ca_cert_path(confdir)
    if not ca.exists():
        raise FileNotFoundError(f"{ca} does not exist yet: run `firsttoken proxy --forward` once to create it")
    parts = []
    try:
        import certifi

        parts.append(Path(certifi.where()).read_text())
    except Exception:  # noqa: BLE001 - certifi is a dependency of httpx; degrade to the CA alone
        pass
    parts.append(ca.read_text())
    out = Path(dest).expanduser()
    # written whole, then renamed over: two runs sharing ~/.mitmproxy write it at once, and a client
    # of one must never read the file half-written by the other
    tmp = out.with_name(f".{out.name}.{os.getpid()}.{threading.get_ident()}")
    try:
        tmp.write_text("\n".join(p.rstrip("\n") for p in parts) + "\n")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def client_hints(proxy_url: str, confdir: str | os.PathLike | None = None) -> list[str]:
    """What to tell the user when forward mode starts (the banner)."""
    ca = ca_cert_path(confdir)
    return [
        f"Forward proxy: set HTTPS_PROXY={proxy_url} (and HTTP_PROXY) for the client; "
        "only LLM API hosts are intercepted and recorded, every other host is tunnelled untouched.",
        f"Trust mitmproxy's CA {ca}: Node clients (Claude Code, Cline) NODE_EXTRA_CA_CERTS={ca}; "
        "Python clients and Codex SSL_CERT_FILE = a bundle that includes it (see `firsttoken docs clients`).",
    ]


def is_loopback(host: str) -> bool:
    h = host.strip("[]").lower()
    if h in ("localhost", "localhost.") or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False
