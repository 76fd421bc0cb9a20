"""The one interface every client adapter of `firsttoken run` implements (:class:`Client`), the plan it
fills in (:class:`Plan`: upstreams, key source, forward mode or why nothing can record it) and the
redirect it returns (:class:`Redirect`: a flag, variables, private files; the user's own files are
never written). How to write one, and the guarantee it keeps: docs/run.md (Adding a client; The guarantee)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firsttoken.addon import routing
from firsttoken.addon.routing import Route


class PlanError(ValueError):
    """The upstream the child would use cannot be proxied (a URL that does not parse, a broken config)."""


@dataclass(frozen=True)
class Upstream:
    family: str  # anthropic | openai | gemini | cloud (Bedrock, Vertex) | ollama: how a base URL maps to the upstream (routing.client_base_url)
    url: str
    source: str  # where it came from, in words
    #: a client's default `run` adds for a variable left unset (OLLAMA_HOST): a running proxy without a route
    #: for it is joined all the same, and the variable then stays unset
    implied: bool = False


@dataclass(frozen=True)
class ChildFile:
    """A file the child reads, written to a private directory for the run and removed after it."""

    name: str
    text: str = ""
    env: str | None = None  # the variable that gives the child its path
    link: str | None = None  # set: a symbolic link to this path instead of a file with ``text``


@dataclass
class Redirect:
    argv: list[str]
    env: dict[str, str]  # variables to set in the child's environment
    how: str  # which way was chosen, in words
    files: list[ChildFile] = field(default_factory=list)
    #: the private directory's path is put in the argv where this placeholder appears
    #: (e.g. ``--config {dir}/config.yaml``), and in env values the same way
    dir_placeholder: str = "{firsttoken-run-dir}"


@dataclass
class Context:
    env: Mapping[str, str]
    home: Path
    cwd: Path

    def var(self, name: str) -> str:
        return (self.env.get(name) or "").strip()

    def label(self, path: Path) -> str:
        """A path for messages: ~ for the home directory."""
        try:
            return "~/" + str(path.relative_to(self.home))
        except ValueError:
            return str(path)


@dataclass
class Plan:
    """What `run` does for one command: its client, upstreams and how it is redirected."""

    argv: list[str]
    client: str  # the adapter's name: claude-code | codex | cline | opencode | … | other
    #: route name → upstream: every upstream the client may use, each a route of the proxy
    upstreams: dict[str, Upstream]
    args_at: int = 1  # where the client's own arguments start in argv (after a launcher: npx claude …)
    forward_reason: str | None = None  # set: the child runs in forward mode (destination-preserving)
    cannot: str | None = None  # set: neither way records it; `run` says so before starting
    key_source: str | None = None  # where the client keeps its key, in words (for an auth.rejected fix)
    notes: list[str] = field(default_factory=list)  # about the redirect: said only when the child is redirected
    #: (what, the URL those requests go to): requests the redirect leaves unrecorded; whether forward mode is
    #: suggested for them is decided once, by the run's mode (cli/run/summary.py mode_notes)
    unrecorded: list[tuple[str, str]] = field(default_factory=list)
    #: (what, the URL): base-URL variables left unset, so requests that would read them go unrecorded; said
    #: before a run and after one that recorded nothing, never after one that recorded its calls (those used
    #: the variables that were set: an OpenAI-only script needs no word on ANTHROPIC_BASE_URL)
    unset: list[tuple[str, str]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)  # the adapter's own findings, for redirect()

    @property
    def cline(self) -> Any:
        """Cline running a task: its provider settings (cli/run/cline.py ClineConfig), else None."""
        return self.state.get("config") if self.client == "cline" else None

    @property
    def codex_provider(self) -> str | None:
        return self.state.get("provider") if self.client == "codex" else None

    @property
    def families(self) -> tuple[str, ...]:
        """The routes a running proxy must serve for the child to join it."""
        return tuple(self.upstreams)

    def route_specs(self) -> list[str]:
        return [f"{name}={u.url}" for name, u in self.upstreams.items()]

    def routes(self) -> dict[str, Route]:
        try:
            return {name: routing.parse_upstream(spec) for name, spec in zip(self.upstreams, self.route_specs())}
        except routing.RouteError as e:
            raise PlanError(str(e)) from None


class Client:
    """One client of `firsttoken run` (subclass it in cli/run/clients/<name>.py)."""

    name = "other"
    title = "the command"  # in messages
    programs: tuple[str, ...] = ()  # its program (bin) names
    packages: tuple[str, ...] = ()  # its npm / PyPI packages (for npx, bunx, pnpm dlx, uvx, pipx run)

    def find(self, plan: Plan, ctx: Context) -> None:
        """Fill ``plan.upstreams`` (and ``key_source``, ``forward_reason``, ``cannot``, ``notes``)."""
        raise NotImplementedError

    def redirect(self, plan: Plan, bases: dict[str, str], proxy_url: str, routes: dict[str, Route],
                 env: Mapping[str, str]) -> Redirect:
        """How the child reaches the proxy: ``bases`` holds the base URL to set for each route name."""
        raise NotImplementedError

    def by_hand(self, plan: Plan) -> list[str]:
        """What the user can do instead when `run` cannot record this client (its own setting)."""
        return []


def strip_v1(url: str) -> str:
    """An Anthropic base URL that holds the version (``…/v1``: Cline, opencode, Continue append
    ``/messages``) as the upstream firsttoken forwards to (the proxy's base-URL rule adds /v1)."""
    url = url.strip().rstrip("/")
    return url[: -len("/v1")] if routing.ends_in_v1(url) else url


def versioned_base(proxy_url: str, route: Route) -> str:
    """The proxy's base URL for a client whose base URL always holds the API version (it appends
    /chat/completions or /messages itself): the OpenAI half of the one base-URL rule."""
    return routing.client_base_url(proxy_url, route, "openai")


def option_value(args: list[str], names: tuple[str, ...]) -> tuple[int, str] | None:
    """The last ``--name VALUE`` / ``--name=VALUE`` among ``args`` (before ``--``): (index of the
    option, its value). The last one wins, as in argparse, yargs and commander."""
    found, i = None, 0
    while i < len(args):
        a = args[i]
        if a == "--":
            break
        for n in names:
            if a == n and i + 1 < len(args):
                found = (i, args[i + 1])
                i += 1
                break
            if a.startswith(n + "=") and n.startswith("--"):
                found = (i, a[len(n) + 1:])
                break
        i += 1
    return found


def add_upstream(plan: Plan, family: str, url: str, source: str, name: str | None = None) -> str:
    """Add an upstream to ``plan`` (one route per distinct URL); return its route name."""
    url = url.strip()
    for n, u in plan.upstreams.items():
        if u.family == family and u.url.rstrip("/") == url.rstrip("/"):
            return n
    name = name or family
    base, i = name, 2
    while name in plan.upstreams:
        name, i = f"{base}-{i}", i + 1
    plan.upstreams[name] = Upstream(family, url, source)
    return name
