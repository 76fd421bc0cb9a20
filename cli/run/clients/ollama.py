"""Ollama's clients: the ``ollama`` CLI and Python library read ``OLLAMA_HOST`` (``host``, ``host:port`` or a
URL with a path; unset: http://127.0.0.1:11434) and append the native paths (``/api/chat``, ``/api/generate``);
the JS library reads no variable (apps pass ``process.env.OLLAMA_HOST``). THE rule for reading it is
:func:`host_url`, for this adapter and any other command (cli/run/clients/sdk.py); redirected by ``OLLAMA_HOST`` =
the proxy's route (no /v1). The clients table: docs/run.md."""

from __future__ import annotations

from firsttoken.cli.run.clients.base import Client, Context, Plan, Redirect, Upstream

VARIABLE = "OLLAMA_HOST"
FAMILY = "ollama"
DEFAULT_PORT = 11434
DEFAULT = f"http://127.0.0.1:{DEFAULT_PORT}"


def host_url(value: str) -> str:
    """The URL an Ollama client goes to for an ``OLLAMA_HOST`` value, as the ollama CLI (envconfig.Host) and
    the Python library (``_parse_host``) read it: no scheme is http; no port is 11434 (80 or 443 when the
    scheme is given); no host is 127.0.0.1; a path is kept, less its trailing slash."""
    s = (value or "").strip()
    scheme, sep, rest = s.partition("://")
    port = str(DEFAULT_PORT)
    if not sep:
        scheme, rest = "http", s
    elif scheme.lower() in ("http", "https"):
        scheme = scheme.lower()
        port = "80" if scheme == "http" else "443"
    hostport, slash, path = rest.partition("/")
    host = hostport
    if hostport.startswith("["):  # [v6] or [v6]:port
        end = hostport.find("]")
        host, tail = hostport[:end + 1], hostport[end + 1:]
        port = tail[1:] if tail.startswith(":") and tail[1:] else port
    elif hostport.count(":") == 1:
        host, p = hostport.split(":")
        port = p or port
    host = host or "127.0.0.1"
    path = ("/" + path).rstrip("/") if slash else ""
    return f"{scheme}://{host}:{port}{path}"


def upstream(ctx: Context, implied: bool = False) -> Upstream:
    """Where an Ollama client of this environment goes: ``$OLLAMA_HOST``, else Ollama's default."""
    value = ctx.var(VARIABLE)
    if value:
        return Upstream(FAMILY, host_url(value), f"${VARIABLE}")
    return Upstream(FAMILY, DEFAULT, "Ollama's default: OLLAMA_HOST is unset", implied=implied)


class Ollama(Client):
    name = "ollama"
    title = "the ollama CLI"
    programs = ("ollama",)

    def find(self, plan: Plan, ctx: Context) -> None:
        words = [a for a in plan.argv[plan.args_at:] if not a.startswith("-")]
        if words[:1] == ["serve"]:  # the server reads OLLAMA_HOST as the address to listen on
            plan.cannot = ("`ollama serve` is Ollama's server, which reads OLLAMA_HOST as the address it listens "
                           "on: start it as usual, and run its clients under firsttoken run instead")
            return
        plan.upstreams[FAMILY] = upstream(ctx)
        plan.key_source = "OLLAMA_API_KEY (Ollama's cloud models; a local server takes none)"

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        return Redirect(list(plan.argv), {VARIABLE: bases[FAMILY]}, f"{VARIABLE}=… (the proxy's route to Ollama)")

    def by_hand(self, plan):
        return [f"export {VARIABLE}=<the proxy's URL> (the ollama CLI and Ollama's Python library read it)"]
