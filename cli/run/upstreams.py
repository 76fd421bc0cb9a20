"""`firsttoken run`: where the child would have sent its requests, and how to send them through
the proxy instead.

The client is known by its program, also through a launcher (``npx claude``, ``node
…/cli.js``: :func:`client_of`). The upstreams come from what the command would have used:
``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL`` / ``OPENAI_API_BASE``, the providers' public URLs when
unset — and the client's own configuration where it wins over the environment: Claude Code's
settings.json ``env`` blocks, Codex's config.toml model provider, Cline's providers.json
(cli/run/cline.py). The child is then pointed at the proxy with the one base-URL rule
(:func:`firsttoken.addon.routing.client_base_url`) through the channel that wins for that client:

* every child: ``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL`` and ``OPENAI_API_BASE`` in its environment;
* Claude Code: also ``--settings '{"env": {"ANTHROPIC_BASE_URL": …}}'`` (command-line settings
  beat the user's and project's settings.json, which beat the environment);
* Codex: also ``-c openai_base_url=…`` (built-in provider) or ``-c model_providers.ID.base_url=…``;
* Cline (it has no base-URL flag or variable): ``CLINE_PROVIDER_SETTINGS_PATH`` = a private copy
  of its providers.json whose provider's ``baseUrl`` is the proxy (a :class:`ChildFile`), and
  ``CLINE_SESSION_BACKEND_MODE=local`` so that a running Cline hub does not take the task.

When a client cannot be redirected by settings (a managed Claude Code policy sets the base URL,
a Codex provider firsttoken cannot override, a Cline sandbox or a provider of unknown base URL)
the child runs in forward mode instead: ``HTTPS_PROXY`` plus mitmproxy's CA (:func:`forward_env`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from firsttoken.addon import routing
from firsttoken.addon.routing import Route
from firsttoken.cli.doctor.core import Context
from firsttoken.cli.doctor.files import CODEX_BUILTIN_PROVIDERS, codex_config_path, read_claude_settings
from firsttoken.cli.run import cline

DEFAULT_UPSTREAMS = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}
FAMILY_ENV = {"anthropic": ("ANTHROPIC_BASE_URL",), "openai": ("OPENAI_BASE_URL", "OPENAI_API_BASE")}

#: Claude Code's managed (policy) settings: they beat even --settings
MANAGED_CLAUDE_SETTINGS = (Path("/etc/claude-code/managed-settings.json"),
                           Path("/Library/Application Support/ClaudeCode/managed-settings.json"))

_CODEX_ID = re.compile(r"^[A-Za-z0-9_-]+$")  # a provider id Codex's dotted -c path can name


class PlanError(ValueError):
    """The upstream the child would use cannot be proxied (a URL that does not parse)."""


@dataclass(frozen=True)
class Upstream:
    family: str  # anthropic | openai
    url: str
    source: str  # where it came from, in words


@dataclass
class Plan:
    """What `run` does for one command: its client, upstreams and how it is redirected."""

    argv: list[str]
    client: str  # claude-code | codex | cline | other
    upstreams: dict[str, Upstream]
    args_at: int = 1  # where the client's own arguments start in argv (after a launcher: npx claude …)
    forward_reason: str | None = None  # set: the child cannot be redirected by settings
    codex_provider: str | None = None  # codex: the provider whose base_url -c overrides ("openai": built in)
    cline: cline.ClineConfig | None = None  # cline running a task: its provider settings
    notes: list[str] = field(default_factory=list)

    @property
    def families(self) -> tuple[str, ...]:
        """The APIs the client speaks: the upstreams a running proxy must serve for the child to join it."""
        if self.client == "claude-code":
            return ("anthropic",)
        if self.client == "codex":
            return ("openai",)
        if self.client == "cline" and self.cline is not None and self.cline.family:
            return (self.cline.family,)
        return ("anthropic", "openai")

    def route_specs(self) -> list[str]:
        return [f"{fam}={u.url}" for fam, u in self.upstreams.items()]

    def routes(self) -> dict[str, Route]:
        try:
            return {fam: routing.parse_upstream(spec) for fam, spec in zip(self.upstreams, self.route_specs())}
        except routing.RouteError as e:
            raise PlanError(str(e)) from None


#: a client by its program (or bin) name, and by its npm package
CLIENT_PROGRAMS = {"claude": "claude-code", "codex": "codex", "cline": "cline"}
CLIENT_PACKAGES = {"@anthropic-ai/claude-code": "claude-code", "@openai/codex": "codex", "cline": "cline"}
#: package runners: the program that runs a package's bin, with the words before the package
PACKAGE_RUNNERS = {("npx",), ("bunx",), ("pnpx",), ("pnpm", "dlx"), ("yarn", "dlx"), ("bun", "x")}
PACKAGE_RUNNER_VALUE_OPTIONS = ("-p", "--package", "--registry", "--cache", "--prefix", "--userconfig")
#: script runners: the program that runs a script file (node …/cli.js), and their options that take a value
SCRIPT_RUNNERS = ("node", "nodejs", "bun")
SCRIPT_RUNNER_VALUE_OPTIONS = ("-r", "--require", "--import", "--loader", "--experimental-loader", "-C",
                               "--conditions", "--env-file", "--title", "--stack-size", "--max-old-space-size")


def client_of(argv: list[str]) -> tuple[str, int]:
    """Which client a command runs (claude-code, codex, cline or other), and where the client's own
    arguments start in ``argv`` (the place to add a command-line setting).

    By the program's name (``claude``, ``…/codex``, ``cline.exe``), also through a launcher: a package
    runner (``npx claude``, ``npx -y @anthropic-ai/claude-code@2 …``, ``bunx``, ``pnpm dlx``, ``yarn dlx``,
    ``npx -p @openai/codex codex``) or a script runner with the client's script (``node
    …/@anthropic-ai/claude-code/cli.js``, ``bun …/cline``). A command the launcher runs from a string
    (``npx -c '…'``, ``node -e``) is other.
    """
    def program(word: str) -> str:
        return re.sub(r"\.(exe|cmd|js|mjs|cjs)$", "", Path(word).name.lower())

    def package(word: str) -> str:  # @scope/name@1.2 -> @scope/name, name@latest -> name
        at = word.find("@", 1)
        return (word[:at] if at > 0 else word).lower()

    name = program(argv[0]) if argv else ""
    if name in CLIENT_PROGRAMS:
        return CLIENT_PROGRAMS[name], 1
    runner = next((r for r in PACKAGE_RUNNERS if [program(argv[0]), *argv[1:len(r)]] == list(r)), None) if argv else None
    if runner is not None:
        i, pkgs = len(runner), []
        while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
            if argv[i] in ("-c", "--call"):
                return "other", 1
            if argv[i] in PACKAGE_RUNNER_VALUE_OPTIONS:
                pkgs += [argv[i + 1]] if argv[i] in ("-p", "--package") and i + 1 < len(argv) else []
                i += 1
            elif argv[i].startswith("--package="):
                pkgs.append(argv[i].split("=", 1)[1])
            i += 1
        i += 1 if i < len(argv) and argv[i] == "--" else 0
        if i >= len(argv):
            return "other", 1
        for word in [argv[i], *pkgs]:
            client = CLIENT_PACKAGES.get(package(word)) or CLIENT_PROGRAMS.get(program(package(word)))
            if client:
                return client, i + 1
        return "other", 1
    if name in SCRIPT_RUNNERS:
        i = 1
        while i < len(argv) and argv[i].startswith("-"):
            if argv[i] in ("-e", "--eval", "-p", "--print", "-"):
                return "other", 1
            i += 2 if argv[i] in SCRIPT_RUNNER_VALUE_OPTIONS else 1
        if i < len(argv) and name == "bun" and argv[i] == "run":
            i += 1
        if i >= len(argv):
            return "other", 1
        script = argv[i].replace("\\", "/").lower()
        for pkg, client in CLIENT_PACKAGES.items():
            if f"node_modules/{pkg}/" in script:
                return client, i + 1
        return CLIENT_PROGRAMS.get(program(script), "other"), (i + 1 if program(script) in CLIENT_PROGRAMS else 1)
    return "other", 1


def make_plan(argv: list[str], env: Mapping[str, str], home: Path, cwd: Path,
              managed: tuple[Path, ...] = MANAGED_CLAUDE_SETTINGS) -> Plan:
    client, args_at = client_of(argv)
    plan = Plan(list(argv), client, {}, args_at)
    for fam, names in FAMILY_ENV.items():
        var = next((n for n in names if (env.get(n) or "").strip()), None)
        plan.upstreams[fam] = (Upstream(fam, env[var].strip(), f"${var}") if var
                               else Upstream(fam, DEFAULT_UPSTREAMS[fam], "default"))
    if plan.client == "claude-code":
        _claude(plan, Context(env=env, home=home, cwd=cwd), managed)
    elif plan.client == "codex":
        _codex(plan, Context(env=env, home=home, cwd=cwd))
    elif plan.client == "cline":
        _cline(plan, env, home, cwd)
    for fam, up in plan.upstreams.items():
        route = routing.parse_upstream(f"{fam}={up.url}") if "://" in up.url else None
        if route is None:
            raise PlanError(f"{up.source} = {up.url!r} is not an http(s) URL: fix it (e.g. "
                            f"{DEFAULT_UPSTREAMS[fam]}) or unset it")
        plan.notes += routing.base_url_warnings(route, fam)
        if fam == "openai" and not routing.has_version(route.prefix):
            plan.notes.append(f"{up.source} = {up.url} has no API version: through firsttoken the client calls "
                              f"{up.url}/v1/… (the base-URL rule adds /v1).")
    plan.routes()  # a URL that does not parse is a PlanError now, not a crash later
    return plan


def _claude(plan: Plan, ctx: Context, managed: tuple[Path, ...]) -> None:
    _, blocks = read_claude_settings(ctx)
    for label, block in blocks:  # user, then project, then local: the last one wins
        v = block.get("ANTHROPIC_BASE_URL")
        if isinstance(v, str) and v.strip():
            plan.upstreams["anthropic"] = Upstream("anthropic", v.strip(), f"{label} env.ANTHROPIC_BASE_URL")
    for path in managed:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        v = (doc.get("env") or {}).get("ANTHROPIC_BASE_URL") if isinstance(doc, dict) else None
        if isinstance(v, str) and v.strip():
            plan.upstreams["anthropic"] = Upstream("anthropic", v.strip(), f"{path} env.ANTHROPIC_BASE_URL")
            plan.forward_reason = (f"{path} (a managed policy) sets ANTHROPIC_BASE_URL, which nothing overrides: "
                                   "Claude Code runs through HTTPS_PROXY instead")


def _codex(plan: Plan, ctx: Context) -> None:
    path = codex_config_path(ctx)
    try:
        cfg = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise PlanError(f"{path} is not valid TOML ({e}): Codex would not start either; fix it first") from None
    profile = (cfg.get("profiles") or {}).get(cfg.get("profile")) if isinstance(cfg.get("profiles"), dict) else None
    chosen = (profile or {}).get("model_provider") if isinstance(profile, dict) else None
    chosen = chosen or cfg.get("model_provider") or "openai"
    providers = cfg.get("model_providers") if isinstance(cfg.get("model_providers"), dict) else {}
    p = providers.get(chosen)
    if isinstance(p, dict) and isinstance(p.get("base_url"), str) and p["base_url"].strip():
        plan.upstreams["openai"] = Upstream("openai", p["base_url"].strip(), f"{path} [model_providers.{chosen}]")
        if _CODEX_ID.match(chosen):
            plan.codex_provider = chosen
        else:
            plan.forward_reason = (f"Codex provider id {chosen!r} cannot be named in a `-c` override: "
                                   "Codex runs through HTTPS_PROXY instead")
    elif chosen == "openai":
        v = cfg.get("openai_base_url")
        if isinstance(v, str) and v.strip():
            plan.upstreams["openai"] = Upstream("openai", v.strip(), f"{path} openai_base_url")
        plan.codex_provider = "openai"
    elif chosen in CODEX_BUILTIN_PROVIDERS:
        plan.forward_reason = (f"Codex's built-in provider {chosen!r} has no base URL firsttoken can override: "
                               "Codex runs through HTTPS_PROXY instead (only known LLM API hosts are recorded)")
    else:
        raise PlanError(f"{path}: model_provider = {chosen!r} is not defined, so Codex would not start: "
                        f"add [model_providers.{chosen}] (`firsttoken env codex` prints one)")


def _cline(plan: Plan, env: Mapping[str, str], home: Path, cwd: Path) -> None:
    args = cline.parse_args(plan.argv[plan.args_at:])
    if args.command:
        plan.notes.append(f"`cline {args.command}` is not a task: firsttoken leaves Cline's settings as they are "
                          "(run a task, e.g. `firsttoken run -- cline --json \"…\"`, to record one)")
        return
    if args.zen:
        raise PlanError("cline --zen hands the task to Cline's background hub, whose settings firsttoken cannot "
                        "reach, so nothing would be recorded: run it without --zen (e.g. "
                        "`firsttoken run -- cline --yolo \"…\"`)")
    try:
        cfg = cline.read_config(args, env, home, cwd)
    except cline.ClineConfigError as e:
        raise PlanError(str(e)) from None
    upstream = cfg.upstream()
    if upstream is not None and cfg.family is not None:
        plan.upstreams[cfg.family] = Upstream(cfg.family, upstream, cfg.source)
        if cfg.family == "anthropic" and not routing.ends_in_v1(cfg.base_url or "") and "://" in upstream:
            plan.notes.append(f"{cfg.source} = {cfg.base_url} has no API version: through firsttoken Cline calls "
                              f"{upstream}/v1/messages (the base-URL rule adds /v1).")
    if cfg.sandbox:
        plan.forward_reason = (f"{cfg.sandbox} is a sandbox that reads {cfg.label}, which nothing relocates: "
                               "Cline runs through HTTPS_PROXY instead (only known LLM API hosts are recorded)")
    elif upstream is None:
        plan.forward_reason = (f"Cline's provider {cfg.provider!r} has no base URL in {cfg.label} that firsttoken "
                               "knows: Cline runs through HTTPS_PROXY instead (only known LLM API hosts are recorded)")
    else:
        plan.cline = cfg


# -- pointing the child at the proxy -------------------------------------------------------------

@dataclass(frozen=True)
class ChildFile:
    """A file the child reads, written to a private directory for the run and removed after it."""

    name: str
    text: str
    env: str | None = None  # the variable that gives the child its path


@dataclass
class Redirect:
    argv: list[str]
    env: dict[str, str]  # variables to set in the child's environment
    how: str  # which way was chosen, in words
    files: list[ChildFile] = field(default_factory=list)


def redirect(plan: Plan, proxy_url: str, routes: dict[str, Route], env: Mapping[str, str]) -> Redirect:
    """Reverse mode: the child's base URLs point at the proxy (``proxy_url`` may carry a run mark)."""
    bases = {fam: routing.client_base_url(proxy_url, routes[fam], fam) for fam in plan.upstreams if fam in routes}
    out = {var: bases[fam] for fam, names in FAMILY_ENV.items() if fam in bases for var in names}
    out.update(_no_proxy(env))
    argv, how = list(plan.argv), f"base URLs in the environment ({', '.join(k for k in out if 'PROXY' not in k.upper())})"
    at, files = plan.args_at, []
    if plan.client == "claude-code" and "anthropic" in bases:
        argv[at:at] = ["--settings", json.dumps({"env": {"ANTHROPIC_BASE_URL": bases["anthropic"]}})]
        how = "claude --settings '{\"env\": {\"ANTHROPIC_BASE_URL\": …}}' (beats settings.json and the environment)"
    elif plan.client == "codex" and plan.codex_provider and "openai" in bases:
        key = "openai_base_url" if plan.codex_provider == "openai" else f"model_providers.{plan.codex_provider}.base_url"
        argv[at:at] = ["-c", f"{key}={json.dumps(bases['openai'])}"]
        how = f"codex -c {key}=… (beats config.toml)"
    elif plan.client == "cline" and plan.cline is not None and plan.cline.family in routes:
        cfg = plan.cline
        # Cline appends /chat/completions, /responses or /messages to its base URL, which therefore
        # holds the API version whatever the API: the OpenAI half of the one base-URL rule.
        base = routing.client_base_url(proxy_url, routes[cfg.family], "openai")
        files.append(ChildFile("providers.json", cline.settings_copy(cfg, base), "CLINE_PROVIDER_SETTINGS_PATH"))
        if cfg.models_json is not None:
            files.append(ChildFile("models.json", cfg.models_json))  # Cline reads it beside providers.json
        out["CLINE_SESSION_BACKEND_MODE"] = "local"
        how = (f"CLINE_PROVIDER_SETTINGS_PATH = a copy of {cfg.label}, providers.{cfg.provider}.settings.baseUrl "
               "→ the proxy (beats Cline's config dir); CLINE_SESSION_BACKEND_MODE=local (not its background hub)")
    return Redirect(argv, out, how, files)


def forward_env(proxy_url: str, ca: Path, bundle: Path, env: Mapping[str, str]) -> dict[str, str]:
    """Forward mode for one child: HTTPS_PROXY and HTTP_PROXY (both cases: a plain-http:// base URL must not
    go around firsttoken through a company proxy left in HTTP_PROXY) and mitmproxy's CA for Node, Python,
    curl and OpenSSL. The user's own proxy is not lost: firsttoken's upstream leg goes on through it
    (addon/egress), read from the environment `run` itself was started with."""
    out = {"HTTPS_PROXY": proxy_url, "https_proxy": proxy_url, "HTTP_PROXY": proxy_url, "http_proxy": proxy_url,
           "NODE_EXTRA_CA_CERTS": str(ca),
           "SSL_CERT_FILE": str(bundle), "REQUESTS_CA_BUNDLE": str(bundle), "CURL_CA_BUNDLE": str(bundle)}
    out.update(_no_proxy({**env, "HTTPS_PROXY": proxy_url}))
    return out


def _no_proxy(env: Mapping[str, str]) -> dict[str, str]:
    """With a proxy configured, keep the child's requests to 127.0.0.1 (the firsttoken proxy) direct."""
    if not any((env.get(v) or "").strip() for v in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                                                      "ALL_PROXY", "all_proxy")):
        return {}
    current = env.get("NO_PROXY") or env.get("no_proxy") or ""
    if "127.0.0.1" in current and "localhost" in current:
        return {}
    value = ",".join(x for x in (current, "127.0.0.1,localhost") if x)
    return {"NO_PROXY": value, "no_proxy": value}


def export_lines(plan: Plan, r: Redirect, proxy_note: list[str]) -> list[str]:
    """`--print-env`: shell lines a user can paste (comments say where each value came from)."""
    lines = [f"# firsttoken run: {plan.client}; upstreams "
             + ", ".join(f"{fam}={u.url} ({u.source})" for fam, u in plan.upstreams.items())]
    lines += [f"# {n}" for n in proxy_note + plan.notes]
    if plan.forward_reason:
        lines.append(f"# {plan.forward_reason}")
    lines += [f"export {k}={shlex.quote(v)}" for k, v in r.env.items()]
    if r.argv != plan.argv:
        lines.append(f"# {plan.client}: its own configuration wins over the environment; run it as:")
        lines.append("#   " + shlex.join(r.argv))
    if r.files:  # their text may hold the user's keys: described, never printed
        lines.append(f"# {plan.client}: its own configuration wins over the environment; `firsttoken run` writes "
                     f"{' and '.join(f.name for f in r.files)} to a private directory for the run (removed after it) "
                     f"and sets {', '.join(f.env for f in r.files if f.env)}: {r.how}.")
        lines.append(f"# To set it once yourself: `firsttoken env {plan.client}` prints the command.")
    return lines


def home_dir(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))
