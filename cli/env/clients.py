"""What each client needs to go through the proxy: a :class:`Plan` (variables to export,
settings blocks to paste, notes and warnings) for every client the name rule knows
(cli/run/clients/registry.py), in reverse-proxy or forward (HTTPS_PROXY + CA) mode.

Keys are never put in a plan: the client keeps its own, the proxy forwards it unchanged.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from firsttoken.addon import forward as fwd
from firsttoken.addon import routing
from firsttoken.addon.routing import Route
from firsttoken.cli.env.target import EnvError, Target, pick_route
from firsttoken.cli.run.clients import cloud, copilot, registry

#: every client's one name (the registry's rule: `env claude` is `env claude-code`)
CLIENTS = registry.client_names()
#: the clients with a plan of their own here; the others get their own setting, from their `run` adapter
PLANNED = ("claude-code", "openai", "anthropic", "cline", "codex", "curl", "gemini-cli", "google-genai", "copilot",
           "ollama")


@dataclass
class Plan:
    client: str
    title: str
    exports: list[tuple[str, str]] = field(default_factory=list)  # set these
    placeholders: list[tuple[str, str]] = field(default_factory=list)  # shown commented: the user fills them
    blocks: list[tuple[str, str]] = field(default_factory=list)  # (where, text): settings.json, config.toml…
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _route_label(target: Target, route: Route | None) -> str:
    if route is None:
        return f"proxy {target.url} (upstream unknown)"
    return f"proxy {target.url}{route.mount or ''} → {route.url}  (route {route.name or 'default'!r})"


def claude_oauth_login(home: Path) -> bool:
    return (home / ".claude" / ".credentials.json").is_file()


def auth_conflict(env: Mapping[str, str], home: Path) -> str | None:
    """Claude Code's "auth conflict": a login (claude.ai OAuth or ANTHROPIC_AUTH_TOKEN) and an API key."""
    key = (env.get("ANTHROPIC_API_KEY") or "").strip()
    if not key:
        return None
    logins = []
    if claude_oauth_login(home):
        logins.append("a claude.ai login (~/.claude/.credentials.json)")
    if (env.get("ANTHROPIC_AUTH_TOKEN") or "").strip():
        logins.append("ANTHROPIC_AUTH_TOKEN")
    if not logins:
        return None
    return (f"auth conflict: ANTHROPIC_API_KEY is set and so is {' and '.join(logins)}. Claude Code warns "
            "about this and may bill the API key instead of your subscription (or send the wrong credential "
            "through the proxy). Keep one: `unset ANTHROPIC_API_KEY` (and remove it from settings.json), "
            "or run `claude /logout` to use only the key.")


def plan_for(client: str, target: Target, *, route_name: str | None = None, model: str | None = None,
             env: Mapping[str, str] | None = None, home: Path | None = None) -> Plan:
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    name = registry.client_name(client)
    if name is None:
        raise EnvError(registry.unknown_client(client))
    client = name
    if target.forward:
        return _forward_plan(client, target, env)
    plan = Plan(client, "")
    if target.routes is None:
        plan.notes.append(
            f"no running proxy found ({target.source.split(':')[0]}): assuming `firsttoken proxy --port "
            f"{target.url.rsplit(':', 1)[1]}` with one upstream whose path has no /v1. Pass the same "
            "--upstream as the proxy (or start it first) to be exact.")
    if client in ("openai", "codex"):
        route = pick_route(target, "openai", route_name)
        base = routing.client_base_url(target.url, route, "openai")
        plan.title = f"{client}: {_route_label(target, route)}"
        _version_note(plan, route)
        if client == "openai":
            plan.exports.append(("OPENAI_BASE_URL", base))
            plan.notes += [
                "OpenAI SDKs read OPENAI_BASE_URL: Python `openai.OpenAI()` and Node `new OpenAI()` pick it up "
                f"(or pass base_url / baseURL = {base}).",
                "Code on openai<1.0 or LangChain's older classes read OPENAI_API_BASE instead: set it to the same value.",
                "Keep OPENAI_API_KEY as it is: the proxy forwards it unchanged.",
            ]
            if not (env.get("OPENAI_API_KEY") or "").strip():
                plan.warnings.append("OPENAI_API_KEY is not set in this shell: the SDK will refuse to start without it.")
        else:
            plan.exports.append(("OPENAI_BASE_URL", base))
            plan.blocks.append(("~/.codex/config.toml", _codex_toml(base, model)))
            plan.notes += [
                "Codex: the config.toml block is the durable way; `model_provider` must stay above every "
                f"[table] in the file. For one run, `codex -c openai_base_url=\"{base}\"` points its built-in "
                "openai provider here; OPENAI_BASE_URL does only before Codex 0.120 (later ones ignore it).",
                "wire_api = \"responses\": the upstream must serve the Responses API (/v1/responses); "
                "Codex no longer supports chat completions.",
                "env_key names the variable that holds the key; Codex sends it as Authorization: Bearer.",
                "Codex --oss (its ollama and lmstudio providers) reads neither: it takes CODEX_OSS_BASE_URL, a route "
                "to the model server's root plus /v1 (`firsttoken env ollama` prints it).",
            ]
        return plan
    if client == "claude-code" and cloud.kind(env) is not None:
        return _claude_cloud(plan, target, route_name, env)
    if client in ("claude-code", "anthropic"):
        route = pick_route(target, "anthropic", route_name)
        base = routing.client_base_url(target.url, route, "anthropic")
        plan.warnings += routing.base_url_warnings(route, "anthropic")
        plan.title = f"{client}: {_route_label(target, route)}"
        plan.exports.append(("ANTHROPIC_BASE_URL", base))
        third_party = route is not None and route.host != "unknown" and route.host != "api.anthropic.com" \
            and not fwd.is_loopback(route.host)
        if client == "anthropic":
            plan.notes += [
                "Anthropic SDKs read ANTHROPIC_BASE_URL (no /v1: the SDK adds /v1/messages); Python "
                f"`anthropic.Anthropic()` / Node `new Anthropic()` pick it up (or pass base_url / baseURL = {base}).",
                "Keep ANTHROPIC_API_KEY as it is: the proxy forwards it unchanged.",
            ]
        else:
            envblock: dict[str, str] = {"ANTHROPIC_BASE_URL": base}
            if third_party:
                envblock["ANTHROPIC_AUTH_TOKEN"] = f"<your {route.host} key>"
                plan.placeholders.append(("ANTHROPIC_AUTH_TOKEN", f"<your {route.host} key>"))
            if model:
                envblock["ANTHROPIC_MODEL"] = model
                plan.exports.append(("ANTHROPIC_MODEL", model))
            elif third_party:
                envblock["ANTHROPIC_MODEL"] = f"<a model {route.host} serves>"
                plan.placeholders.append(("ANTHROPIC_MODEL", f"<a model {route.host} serves>"))
            plan.blocks.append(("~/.claude/settings.json (or ./.claude/settings.json for one project)",
                                json.dumps({"env": envblock}, indent=2)))
            plan.notes += [
                "ANTHROPIC_BASE_URL has no /v1: Claude Code adds /v1/messages itself.",
                "Auth: a claude.ai login or ANTHROPIC_API_KEY goes through the proxy unchanged — nothing to add. "
                "ANTHROPIC_API_KEY is sent as x-api-key; ANTHROPIC_AUTH_TOKEN as Authorization: Bearer "
                "(what gateways and Anthropic-compatible providers expect). Set only one of them.",
                "ANTHROPIC_MODEL picks the model (needed when the upstream is not Anthropic).",
                "Restart Claude Code after editing settings.json; `claude /status` shows the base URL in use.",
            ]
            conflict = auth_conflict(env, home)
            if conflict:
                plan.warnings.append(conflict)
            if (env.get("ANTHROPIC_API_KEY") or "").strip() and (env.get("ANTHROPIC_AUTH_TOKEN") or "").strip():
                plan.warnings.append("both ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN are set: Claude Code sends "
                                     "both headers; unset the one your upstream does not expect.")
        return plan
    if client == "cline":
        return _cline_plan(plan, target, route_name, model)
    if client == "curl":
        return _curl_plan(plan, target, route_name, model)
    if client in ("gemini-cli", "google-genai"):
        return _gemini_plan(plan, target, route_name, env)
    if client == "copilot":
        return _copilot_plan(plan, target, route_name, env, model)
    if client == "ollama":
        return _ollama_plan(plan, target, route_name)
    return _own_setting_plan(plan, target, route_name)


def _ollama_plan(plan: Plan, target: Target, route_name: str | None) -> Plan:
    """Ollama's clients: OLLAMA_HOST (the ollama CLI, the Python library), the server's root with no /v1 (they add
    /api/chat, /api/generate); the other clients of an Ollama take the same root under their own names."""
    route = pick_route(target, "ollama", route_name)
    base = routing.client_base_url(target.url, route, "ollama")
    plan.title = f"ollama: {_route_label(target, route)}"
    plan.exports.append(("OLLAMA_HOST", base))
    plan.notes += [
        "OLLAMA_HOST has no /v1: the ollama CLI and Python `ollama.Client()` add /api/chat, /api/generate themselves. "
        f"Ollama's JS library reads no variable: pass `new Ollama({{ host: process.env.OLLAMA_HOST }})` (or host: {base}).",
        f"aider's Ollama models (litellm) read OLLAMA_API_BASE: set it to {base}. Codex --oss: "
        f"CODEX_OSS_BASE_URL={base}/v1. Ollama's OpenAI-compatible API: `firsttoken env openai` (OPENAI_BASE_URL ends in /v1).",
        "`firsttoken run -- ollama …` or `firsttoken run -- python app.py` sets OLLAMA_HOST for one run. "
        "An Ollama on this machine is never reached through forward mode (NO_PROXY keeps loopback direct).",
    ]
    return plan


def _own_setting_plan(plan: Plan, target: Target, route_name: str | None) -> Plan:
    """A client that reads no base-URL variable (opencode, Qwen Code, aider, ...): its own setting,
    as its `run` adapter words it, with the proxy's address filled in."""
    adapter = registry.by_name(plan.client)
    try:
        route = pick_route(target, "openai", route_name)
    except EnvError as e:  # several routes and no --route: the setting with the proxy's root, and why
        route = None
        plan.warnings.append(str(e))
    proxy = target.url + ((route.mount or "") if route is not None else "")
    plan.title = f"{plan.client}: proxy {proxy}"
    from firsttoken.cli.run.clients.base import Plan as RunPlan

    lines = adapter.by_hand(RunPlan(argv=[adapter.programs[0]], client=plan.client, upstreams={}))
    plan.blocks.append((f"{adapter.title}'s own setting", "\n".join(ln.replace("<the proxy's URL>", proxy) for ln in lines)))
    plan.notes.append(f"`firsttoken run -- {adapter.programs[0]} …` points one run at a proxy of its own without "
                      "changing your settings (`firsttoken docs run` names each client's setting).")
    return plan


def _gemini_plan(plan: Plan, target: Target, route_name: str | None, env: Mapping[str, str]) -> Plan:
    """Gemini CLI (``gemini-cli``) and the google-genai SDKs (``google-genai``): GOOGLE_GEMINI_BASE_URL, no version
    (they add /v1beta/models/… themselves); Vertex AI mode reads GOOGLE_VERTEX_BASE_URL instead."""
    route = pick_route(target, "gemini", route_name)
    base = routing.client_base_url(target.url, route, "gemini")
    plan.title = f"{plan.client}: {_route_label(target, route)}"
    vertex = (env.get("GOOGLE_GENAI_USE_VERTEXAI") or "").strip().lower() == "true"
    var = "GOOGLE_VERTEX_BASE_URL" if vertex else "GOOGLE_GEMINI_BASE_URL"
    plan.exports.append((var, base))
    plan.notes.append(f"{var} has no /v1beta: the client adds /v1beta/models/MODEL:streamGenerateContent itself"
                      + (" (Vertex AI: /v1beta1/projects/…/publishers/google/models/…)." if vertex else "."))
    if plan.client == "gemini-cli":
        if not vertex:
            plan.blocks.append(("~/.gemini/settings.json", json.dumps(
                {"security": {"auth": {"selectedType": "gemini-api-key"}}}, indent=2)))
        plan.notes += [
            "Gemini CLI: keep GEMINI_API_KEY as it is (sent as x-goog-api-key; the proxy forwards it unchanged). "
            "With GOOGLE_GEMINI_BASE_URL set and no auth type in settings.json, 0.61 picks its \"gateway\" auth "
            "type, which `gemini -p` refuses: the settings.json block names gemini-api-key.",
            "Vertex AI mode (GOOGLE_GENAI_USE_VERTEXAI=true) reads GOOGLE_VERTEX_BASE_URL instead; Login with "
            "Google talks to Code Assist (cloudcode-pa.googleapis.com), which firsttoken does not record.",
            "`firsttoken run -- gemini …` does all of this for one run without touching your files.",
        ]
        if not vertex and not (env.get("GEMINI_API_KEY") or "").strip():
            plan.warnings.append("GEMINI_API_KEY is not set in this shell: Gemini CLI's gemini-api-key auth needs it "
                                 "(create one at https://aistudio.google.com/apikey).")
    else:
        plan.notes += [
            "google-genai (Python) and @google/genai (Node) read GOOGLE_GEMINI_BASE_URL (GOOGLE_VERTEX_BASE_URL with "
            f"vertexai=True), or pass http_options=HttpOptions(base_url=\"{base}\") / httpOptions: {{baseUrl}}.",
            "Keep GEMINI_API_KEY (or GOOGLE_API_KEY) as it is: the proxy forwards it unchanged.",
            "Gemini's OpenAI-compatible endpoint works too: `firsttoken env openai` with the route to "
            "https://generativelanguage.googleapis.com/v1beta/openai.",
        ]
    return plan


def _copilot_plan(plan: Plan, target: Target, route_name: str | None, env: Mapping[str, str],
                  model: str | None) -> Plan:
    """GitHub Copilot CLI's bring-your-own-key provider: COPILOT_PROVIDER_BASE_URL (it ignores OPENAI_BASE_URL),
    shaped by COPILOT_PROVIDER_TYPE as its `run` adapter reads it (cli/run/clients/copilot.py)."""
    kind: str | None = (env.get("COPILOT_PROVIDER_TYPE") or "").strip().lower()
    if kind not in copilot.FAMILIES:
        if kind:
            plan.warnings.append(f"COPILOT_PROVIDER_TYPE = {kind!r} is not one of openai, azure, anthropic: Copilot "
                                 "CLI would not start with it; the settings below are for the route's API.")
        kind = None
    route = pick_route(target, "anthropic" if kind == "anthropic" else "openai", route_name)
    if kind is None:  # unset (openai to Copilot): the route's API says which
        kind = "anthropic" if route is not None and routing.looks_like(route, "anthropic") else "openai"
    family = copilot.FAMILIES[kind]
    base = routing.client_base_url(target.url, route, family)
    plan.title = f"copilot: {_route_label(target, route)}"
    plan.warnings += routing.base_url_warnings(route, family)
    if family == "openai":
        _version_note(plan, route)
    plan.exports.append((copilot.VARIABLE, base))
    plan.exports.append(("COPILOT_PROVIDER_TYPE", kind))
    if model:
        plan.exports.append(("COPILOT_MODEL", model))
    elif not (env.get("COPILOT_MODEL") or "").strip():
        plan.placeholders.append(("COPILOT_MODEL", "<a model the upstream serves>"))
    path = {"openai": "/chat/completions (or /responses)", "anthropic": "/v1/messages",
            "azure": "/openai/v1/chat/completions"}[kind]
    plan.notes += [
        f"Copilot CLI reads {copilot.VARIABLE} (bring your own key), never OPENAI_BASE_URL; it appends {path} "
        "itself. Without it Copilot uses GitHub's own model service, which firsttoken does not record.",
        "Keep COPILOT_PROVIDER_API_KEY (or COPILOT_PROVIDER_BEARER_TOKEN) as it is: the proxy forwards it "
        "unchanged. BYOK needs a model: COPILOT_MODEL or --model.",
        "`firsttoken run -- copilot …` does this for one run, keeping COPILOT_PROVIDER_TYPE and the real upstream "
        f"from {copilot.VARIABLE}.",
    ]
    return plan


def _version_note(plan: Plan, route: Route | None) -> None:
    if route is not None and routing.has_version(route.prefix):
        plan.notes.append(f"The upstream path {route.prefix!r} already holds the API version, so the base URL has "
                          "no /v1 (the client appends /chat/completions or /responses to it).")


def _codex_toml(base: str, model: str | None) -> str:
    lines = ['model_provider = "firsttoken"']
    lines.append(f'model = "{model}"' if model else '# model = "gpt-5-codex"')
    lines += ["", "[model_providers.firsttoken]", 'name = "firsttoken"', f'base_url = "{base}"',
              'env_key = "OPENAI_API_KEY"', 'wire_api = "responses"']
    return "\n".join(lines)


def _families(target: Target, route_name: str | None) -> list[tuple[str, Route | None]]:
    """For clients that speak both APIs (cline, curl): which API each route serves."""
    if target.routes is None and not route_name:
        return [("openai", None), ("anthropic", None)]
    if route_name or len(target.routes or []) <= 1:
        r = pick_route(target, "openai", route_name)
        return [("anthropic" if r is not None and routing.looks_like(r, "anthropic") else "openai", r)]
    out = []
    for fam in ("openai", "anthropic"):
        try:
            out.append((fam, pick_route(target, fam, None)))
        except EnvError:
            pass
    if not out:
        raise EnvError(f"the proxy has {len(target.routes or [])} routes; pass --route NAME")
    return out


def _cline_plan(plan: Plan, target: Target, route_name: str | None, model: str | None) -> Plan:
    """The Cline CLI's `cline auth` command and the VS Code panel's values. The CLI appends
    /chat/completions, /responses or /messages to its base URL, which therefore holds the API
    version whatever the API (the OpenAI half of the base-URL rule); the VS Code panel's Anthropic
    provider uses the Anthropic SDK, which appends /v1/messages (the Anthropic half)."""
    plan.title = f"cline: proxy {target.url}"
    cli: list[str] = []
    panel: list[str] = []
    families = _families(target, route_name)
    for fam, route in families:
        model_arg = shlex.quote(model if model and (len(families) == 1 or fam == "openai") else "<model id>")
        cli_base = routing.client_base_url(target.url, route, "openai")
        if panel:
            cli.append("")
            panel.append("")
        if fam == "openai":
            _version_note(plan, route)
            cli += [f'cline auth -p openai-compatible -k "$OPENAI_API_KEY" -m {model_arg} -b {cli_base}']
            panel += ["API Provider: OpenAI Compatible",
                      f"  Base URL: {routing.client_base_url(target.url, route, 'openai')}",
                      "  API Key:  your upstream's key (forwarded unchanged)",
                      f"  Model ID: {model or '<the model name>'}"]
        else:
            base = routing.client_base_url(target.url, route, "anthropic")
            plan.warnings += routing.base_url_warnings(route, "anthropic")
            cli += [f'cline auth -p anthropic -k "$ANTHROPIC_API_KEY" -m {model_arg}',
                    "# `cline auth` takes no -b for Anthropic (OpenAI providers only): then, in "
                    "~/.cline/data/settings/providers.json,",
                    f'# providers.anthropic.settings:  "baseUrl": "{cli_base}"   (the CLI\'s ends in the version)']
            panel += ["API Provider: Anthropic",
                      "  tick 'Use custom base URL'",
                      f"  Base URL: {base}   (no /v1)",
                      "  API Key:  your Anthropic key (forwarded unchanged)"]
    plan.blocks.append(("Cline CLI (once: it saves this in ~/.cline/data/settings/providers.json)", "\n".join(cli)))
    plan.blocks.append(("Cline in VS Code (the gear icon in Cline's panel)", "\n".join(panel)))
    plan.notes += [
        "Cline reads no environment variable for its base URL: the CLI keeps it in its provider settings "
        "(`cline auth`), VS Code in its settings panel.",
        "The key stays Cline's: `cline auth -k` saves it in Cline's own settings, the proxy forwards it unchanged.",
        "`firsttoken run -- cline --json \"…\"` points one run at a proxy without changing your settings.",
    ]
    return plan


def _curl_plan(plan: Plan, target: Target, route_name: str | None, model: str | None) -> Plan:
    plan.title = f"curl: proxy {target.url}"
    examples = []
    for fam, route in _families(target, route_name):
        if fam == "openai":
            _version_note(plan, route)
            plan.exports.append(("OPENAI_BASE_URL", routing.client_base_url(target.url, route, "openai")))
            body = json.dumps({"model": model or "gpt-4o-mini", "stream": True,
                               "stream_options": {"include_usage": True},
                               "messages": [{"role": "user", "content": "Say hi"}]})
            examples.append('curl -N "$OPENAI_BASE_URL/chat/completions" \\\n'
                            '  -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" \\\n'
                            f"  -d '{body}'")
        else:
            base = routing.client_base_url(target.url, route, "anthropic")
            plan.warnings += routing.base_url_warnings(route, "anthropic")
            plan.exports.append(("ANTHROPIC_BASE_URL", base))
            body = json.dumps({"model": model or "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
                               "messages": [{"role": "user", "content": "Say hi"}]})
            examples.append('curl -N "$ANTHROPIC_BASE_URL/v1/messages" \\\n'
                            '  -H "x-api-key: $ANTHROPIC_API_KEY" -H "anthropic-version: 2023-06-01" '
                            '-H "Content-Type: application/json" \\\n'
                            f"  -d '{body}'")
    plan.blocks.append(("curl (-N prints the stream as it arrives)", "\n\n".join(examples)))
    plan.notes.append("Then `firsttoken logs` lists the request and `firsttoken show <id>` draws its timeline.")
    return plan


def _claude_cloud(plan: Plan, target: Target, route_name: str | None, env: Mapping[str, str]) -> Plan:
    """Claude Code on Bedrock or Vertex AI (CLAUDE_CODE_USE_BEDROCK / _VERTEX in this shell): its own base URL
    variable; SigV4 (Bedrock's default auth) binds the host, so only a gateway that signs may stand behind."""
    kind = cloud.kind(env)
    route = pick_route(target, "anthropic", route_name)
    base = routing.client_base_url(target.url, route, cloud.FAMILY)
    var = cloud.BASE_VARS[kind]
    plan.title = f"claude-code on {'Bedrock' if kind == 'bedrock' else 'Vertex AI'}: {_route_label(target, route)}"
    plan.exports.append((var, base))
    plan.blocks.append(("~/.claude/settings.json (or ./.claude/settings.json for one project)",
                        json.dumps({"env": {var: base}}, indent=2)))
    if kind == "bedrock":
        plan.notes.append(f"Claude Code appends /model/ID/invoke-with-response-stream to {var}: the route's upstream "
                          "is Bedrock's runtime endpoint (https://bedrock-runtime.REGION.amazonaws.com) or a gateway's.")
        if cloud.signs(env):
            plan.warnings.append(
                "Claude Code signs its Bedrock requests with SigV4 for the host it is given, so a request signed for "
                "the proxy fails at Bedrock (403 SignatureDoesNotMatch). Use forward mode instead (`firsttoken env "
                "--forward claude-code`, or `firsttoken run --forward -- claude`: it keeps Bedrock's own host), or "
                "put a gateway that signs behind the proxy and set CLAUDE_CODE_SKIP_BEDROCK_AUTH=1.")
    else:
        plan.notes.append(f"Claude Code appends /projects/PROJECT/locations/REGION/publishers/anthropic/models/M:"
                          f"streamRawPredict to {var}: the route's upstream is https://REGION-aiplatform.googleapis.com/v1 "
                          "(with its /v1) or a gateway's. The OAuth token goes through unchanged.")
        if not (env.get("ANTHROPIC_VERTEX_PROJECT_ID") or "").strip():
            plan.warnings.append("ANTHROPIC_VERTEX_PROJECT_ID is not set in this shell: Claude Code needs it on Vertex AI.")
    return plan


def _forward_plan(client: str, target: Target, env: Mapping[str, str]) -> Plan:
    ca = fwd.ca_cert_path(target.confdir)
    bundle = ca.parent / "firsttoken-ca-bundle.pem"
    plan = Plan(client, f"{client}: forward proxy {target.url} (HTTPS_PROXY; only LLM hosts are intercepted)")
    plan.exports.append(("HTTPS_PROXY", target.url))
    other = [v for v in ("HTTP_PROXY", "http_proxy") if (env.get(v) or "").strip() not in ("", target.url)]
    if other:  # an http:// base URL would go around firsttoken through that proxy: firsttoken chains to it instead
        plan.exports += [(v, target.url) for v in other]
        plan.notes.append(f"{' and '.join(other)} pointed at another proxy: set to firsttoken too (firsttoken's own "
                          "upstream leg still goes out through the proxy your environment names; see "
                          "`firsttoken docs clients`, Behind a proxy).")
    if client == "ollama":  # plain HTTP, and on this machine: NO_PROXY below keeps it direct
        plan.warnings.append("Ollama's clients speak plain HTTP, to this machine as a rule: forward mode does not carry "
                             "them. Run `firsttoken env ollama` without --forward (OLLAMA_HOST → a reverse proxy).")
    if not ca.exists():
        plan.warnings.append(f"{ca} does not exist yet: start `firsttoken proxy --forward` once, then run this again.")
    elif client in ("openai", "anthropic", "codex", "curl", "google-genai"):
        try:
            fwd.combined_ca_bundle(bundle, target.confdir)
        except OSError as e:
            plan.warnings.append(f"could not write {bundle}: {e}")
    if client in ("claude-code", "cline", "gemini-cli"):
        plan.exports.append(("NODE_EXTRA_CA_CERTS", str(ca)))
        plan.notes.append("Node adds NODE_EXTRA_CA_CERTS to its own CAs; it is read at start-up only.")
        if client == "claude-code":
            plan.blocks.append(("~/.claude/settings.json", json.dumps(
                {"env": {"HTTPS_PROXY": target.url, "NODE_EXTRA_CA_CERTS": str(ca)}}, indent=2)))
        elif client == "gemini-cli":
            plan.notes.append("Gemini CLI's requests to generativelanguage.googleapis.com and *aiplatform.googleapis.com "
                              "are recorded; Login with Google's (cloudcode-pa.googleapis.com) pass through unrecorded.")
        else:
            plan.notes.append("The Cline CLI: run it from a shell with these set. Cline in VS Code: start `code` from "
                              "such a shell, or set VS Code's http.proxy; the CA must be in NODE_EXTRA_CA_CERTS of "
                              "VS Code's process.")
    elif client in ("openai", "anthropic", "google-genai"):
        plan.exports += [("SSL_CERT_FILE", str(bundle)), ("REQUESTS_CA_BUNDLE", str(bundle))]
        plan.exports.append(("NODE_EXTRA_CA_CERTS", str(ca)))
        plan.notes.append(f"{bundle.name} = the public CAs (certifi) + mitmproxy's CA: SSL_CERT_FILE replaces a "
                          "Python client's trust store, so it needs both. Node SDKs use NODE_EXTRA_CA_CERTS.")
    elif client == "codex":
        plan.exports.append(("SSL_CERT_FILE", str(bundle)))
    elif client == "curl":
        plan.exports.append(("CURL_CA_BUNDLE", str(bundle)))
    no_proxy = env.get("NO_PROXY") or env.get("no_proxy") or ""
    if "127.0.0.1" not in no_proxy and "localhost" not in no_proxy:
        plan.exports.append(("NO_PROXY", ",".join(x for x in (no_proxy, "127.0.0.1,localhost") if x)))
    return plan
