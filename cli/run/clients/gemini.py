"""Gemini CLI (``gemini``): its auth type (settings.json ``security.auth.selectedType``, else the environment)
picks the API; the Gemini API's base URL is ``GOOGLE_GEMINI_BASE_URL``, Vertex AI's ``GOOGLE_VERTEX_BASE_URL``
(environment, else its .env file). Redirected by that variable (forward mode when setting it would change
its auth type); Login with Google (Code Assist) is not recorded. What 0.61 reads, and why: docs/run.md
(Client by client: Gemini CLI)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from firsttoken.cli.run.clients.base import Client, Context, Plan, PlanError, Redirect, add_upstream
from firsttoken.cli.run.clients.files import ConfigError, read_dotenv, read_json

GEMINI_API = "https://generativelanguage.googleapis.com"
#: the auth types of Gemini CLI 0.61 (packages/core/src/core/contentGenerator.ts, AuthType)
API_KEY, GATEWAY, VERTEX = "gemini-api-key", "gateway", "vertex-ai"
GOOGLE_LOGIN = ("oauth-personal", "compute-default-credentials", "cloud-shell")
#: where it keeps its key, in words (auth.rejected's fix names it)
KEY_SOURCE = ("GEMINI_API_KEY (environment, or the first .env it finds: ./.gemini/.env, ./.env and up the "
              "directory tree, ~/.gemini/.env, ~/.env)")
VERTEX_KEY_SOURCE = ("Application Default Credentials (`gcloud auth application-default login`) with "
                     "GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION, or GOOGLE_API_KEY (Vertex AI express mode)")


@dataclass
class GeminiSetup:
    """What Gemini CLI would do here: its auth type and where it came from, its base URL's variable and value."""

    auth: str | None
    auth_source: str
    variable: str  # GOOGLE_GEMINI_BASE_URL or GOOGLE_VERTEX_BASE_URL
    url: str
    url_source: str
    env: dict[str, str] = field(default_factory=dict)  # the environment it would see (process over .env)
    settings: dict[str, tuple[Path, dict]] = field(default_factory=dict)  # scope -> (path, document)

    @property
    def auth_from_settings(self) -> bool:
        return self.auth_source.startswith("settings")


def _home(ctx: Context) -> Path:
    """Gemini CLI's home directory: GEMINI_CLI_HOME, else the user's."""
    h = ctx.var("GEMINI_CLI_HOME")
    return (ctx.cwd / Path(h).expanduser()) if h else ctx.home


def settings_paths(ctx: Context) -> dict[str, Path]:
    """Its settings files by scope, lowest precedence first (system defaults ‹ user ‹ workspace ‹ system)."""
    system = Path(ctx.var("GEMINI_CLI_SYSTEM_SETTINGS_PATH") or "/etc/gemini-cli/settings.json")
    defaults = Path(ctx.var("GEMINI_CLI_SYSTEM_DEFAULTS_PATH") or system.parent / "system-defaults.json")
    return {"defaults": defaults, "user": _home(ctx) / ".gemini" / "settings.json",
            "workspace": ctx.cwd / ".gemini" / "settings.json", "system": system}


def env_file(ctx: Context) -> Path | None:
    """The one .env file it loads (findEnvFile: .gemini/.env, then .env, from the working directory up;
    then ~/.gemini/.env, ~/.env); its variables never replace ones already in the environment."""
    d = ctx.cwd.resolve() if ctx.cwd.exists() else ctx.cwd
    for here in (d, *d.parents):
        for p in (here / ".gemini" / ".env", here / ".env"):
            if p.is_file():
                return p
    home = _home(ctx)
    return next((p for p in (home / ".gemini" / ".env", home / ".env") if p.is_file()), None)


def _get(doc: Any, *keys: str) -> Any:
    for k in keys:
        doc = doc.get(k) if isinstance(doc, dict) else None
    return doc


def read_setup(ctx: Context) -> GeminiSetup:
    """Gemini CLI's auth type and base URL as it would read them (``gemini -p``: validateNonInteractiveAuth,
    createContentGenerator). Raises PlanError for a settings file it could not read either."""
    docs: dict[str, tuple[Path, dict]] = {}
    for scope, path in settings_paths(ctx).items():
        try:
            doc = read_json(path, ctx.label(path), comments=True)
        except ConfigError as e:
            raise PlanError(f"{e}: Gemini CLI would not start with it either; fix it first") from None
        docs[scope] = (path, doc if isinstance(doc, dict) else {})
    dotenv = env_file(ctx)
    env = {**(read_dotenv(dotenv) if dotenv else {}), **ctx.env}  # the environment wins over the .env file

    def var(name: str) -> str:
        return (env.get(name) or "").strip()

    auth, source = None, ""
    for scope in ("system", "workspace", "user", "defaults"):  # highest first
        v = _get(docs[scope][1], "security", "auth", "selectedType")
        if isinstance(v, str) and v:
            auth, source = v, f"settings {ctx.label(docs[scope][0])} security.auth.selectedType"
            break
    if auth is None:  # getAuthTypeFromEnv
        if var("GOOGLE_GENAI_USE_GCA") == "true":
            auth, source = "oauth-personal", "GOOGLE_GENAI_USE_GCA=true"
        elif var("GOOGLE_GENAI_USE_VERTEXAI") == "true":
            auth, source = VERTEX, "GOOGLE_GENAI_USE_VERTEXAI=true"
        elif var("GOOGLE_GEMINI_BASE_URL"):
            auth, source = GATEWAY, "GOOGLE_GEMINI_BASE_URL is set"
        elif var("GEMINI_API_KEY"):
            auth, source = API_KEY, "GEMINI_API_KEY is set"
        elif var("CLOUD_SHELL") == "true" or var("GEMINI_CLI_USE_COMPUTE_ADC") == "true":
            auth, source = "compute-default-credentials", "CLOUD_SHELL / GEMINI_CLI_USE_COMPUTE_ADC"
    if auth == VERTEX:
        variable = "GOOGLE_VERTEX_BASE_URL"
        location = var("GOOGLE_CLOUD_LOCATION")
        if var(variable):
            url, url_source = var(variable), f"${variable}"
        elif location in ("us", "eu"):
            url, url_source = f"https://aiplatform.{location}.rep.googleapis.com", f"GOOGLE_CLOUD_LOCATION={location}"
        elif location and location != "global" and not var("GOOGLE_API_KEY"):
            url, url_source = f"https://{location}-aiplatform.googleapis.com", f"GOOGLE_CLOUD_LOCATION={location}"
        else:
            url, url_source = "https://aiplatform.googleapis.com", "the @google/genai SDK's Vertex AI default"
    else:
        variable = "GOOGLE_GEMINI_BASE_URL"
        if var(variable):
            url, url_source = var(variable), f"${variable}"
        else:
            url, url_source = GEMINI_API, "the @google/genai SDK's default"
    return GeminiSetup(auth, source, variable, url, url_source, env, docs)


class GeminiCli(Client):
    name = "gemini-cli"
    title = "Gemini CLI"
    programs = ("gemini",)
    packages = ("@google/gemini-cli",)

    def find(self, plan: Plan, ctx: Context) -> None:
        setup = read_setup(ctx)
        plan.state["setup"] = setup
        if setup.auth in GOOGLE_LOGIN:
            plan.cannot = (f"its auth type is {setup.auth!r} ({setup.auth_source}): it signs in with Google and "
                           "talks to Google's Code Assist API (cloudcode-pa.googleapis.com), which firsttoken "
                           "does not record")
            return
        if setup.auth is None:
            plan.forward_reason = ("Gemini CLI has no auth type yet (no security.auth.selectedType in its "
                                   "settings.json, no GEMINI_API_KEY or GOOGLE_GENAI_USE_VERTEXAI): it runs "
                                   "through HTTPS_PROXY, which keeps every destination (only known LLM API hosts "
                                   "are recorded)")
            return
        if setup.auth not in (API_KEY, GATEWAY, VERTEX):
            plan.forward_reason = (f"its auth type {setup.auth!r} is not one firsttoken knows: it runs through "
                                   "HTTPS_PROXY instead (only known LLM API hosts are recorded)")
            return
        if setup.auth == GATEWAY and not setup.auth_from_settings:
            plan.notes.append("Gemini CLI picks its \"gateway\" auth type from GOOGLE_GEMINI_BASE_URL when no "
                              "settings.json names one, and 0.61 refuses it in `gemini -p` (\"Invalid auth method "
                              "selected\"): add \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}} "
                              "to ~/.gemini/settings.json")
        plan.key_source = VERTEX_KEY_SOURCE if setup.auth == VERTEX else KEY_SOURCE
        plan.state["route"] = add_upstream(plan, "gemini", setup.url, setup.url_source)
        if setup.auth == API_KEY and not setup.auth_from_settings:
            # GOOGLE_GEMINI_BASE_URL would make it pick "gateway" (refused by `gemini -p`); the auth type could
            # only be kept by a system settings file, which it reads only when root owns it and its directories
            plan.forward_reason = ("Gemini CLI took its auth type gemini-api-key from GEMINI_API_KEY alone, and "
                                   "with GOOGLE_GEMINI_BASE_URL set it would pick \"gateway\" instead (which "
                                   "`gemini -p` refuses): it runs through HTTPS_PROXY, which keeps every "
                                   "destination and records generativelanguage.googleapis.com. To redirect it "
                                   "instead, add \"security\": {\"auth\": {\"selectedType\": "
                                   "\"gemini-api-key\"}} to ~/.gemini/settings.json")
        if setup.auth == VERTEX and not (setup.env.get("GOOGLE_API_KEY") or "").strip():
            plan.notes.append("Vertex AI with Application Default Credentials: the OAuth token is fetched from "
                              "Google directly (not through firsttoken); the model requests are recorded")

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        setup: GeminiSetup = plan.state["setup"]
        route = plan.state.get("route")
        if route not in bases:
            return Redirect(list(plan.argv), {}, "Gemini CLI's settings as they are")
        return Redirect(list(plan.argv), {setup.variable: bases[route]},
                        f"{setup.variable} → the proxy (the environment beats its .env files)")

    def by_hand(self, plan):
        setup = plan.state.get("setup")
        if setup is not None and setup.auth in GOOGLE_LOGIN:
            return ["use a Gemini API key instead of Login with Google: export GEMINI_API_KEY=… and "
                    "GOOGLE_GEMINI_BASE_URL=<the proxy's URL>, with \"security\": {\"auth\": {\"selectedType\": "
                    "\"gemini-api-key\"}} in ~/.gemini/settings.json"]
        var = setup.variable if setup is not None else "GOOGLE_GEMINI_BASE_URL"
        return [f"export {var}=<the proxy's URL> before starting gemini (no /v1beta: it adds the version itself)"]
