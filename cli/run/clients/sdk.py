"""Any other command (``python my_app.py``, ``node app.js``, a client firsttoken does not know): a base-URL
variable the user already set is pointed at the proxy, which forwards to that same value; an unset one
stays unset; none set: forward mode. Ollama's OLLAMA_HOST (cli/run/clients/ollama.py) is set whenever the
command is redirected: unset, it names Ollama's default, where its clients go anyway. Why: docs/run.md
(The guarantee)."""

from __future__ import annotations

from firsttoken.cli.run.clients import ollama
from firsttoken.cli.run.clients.base import Client, Context, Plan, Redirect, Upstream

#: the variables the official SDKs read, by family (first: the one the current SDKs read)
VARIABLES = {"anthropic": ("ANTHROPIC_BASE_URL",), "openai": ("OPENAI_BASE_URL", "OPENAI_API_BASE")}
#: the google-genai SDKs (Python and Node): the Gemini API's base URL, and Vertex AI's
VARIABLES["gemini"] = ("GOOGLE_GEMINI_BASE_URL", "GOOGLE_VERTEX_BASE_URL")
#: the families whose unset variable `run` mentions (every OpenAI or Anthropic SDK reads theirs)
MENTIONED = ("anthropic", "openai")
#: where the official SDKs go when the variable is unset
DEFAULTS = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1",
            "gemini": "https://generativelanguage.googleapis.com"}


class Sdk(Client):
    name = "other"
    title = "the command"

    def find(self, plan: Plan, ctx: Context) -> None:
        routes: dict[str, str] = {}  # variable → route name
        for fam, names in VARIABLES.items():
            for var in names:
                v = ctx.var(var)
                if not v:  # left unset: a client that falls back to its own config would go to the public API
                    continue
                same = next((n for n, u in plan.upstreams.items() if u.family == fam and u.url == v), None)
                name = same or (fam if fam not in plan.upstreams else var.lower().replace("_", "-"))
                plan.upstreams.setdefault(name, Upstream(fam, v, f"${var}"))
                routes[var] = name
        if ctx.var(ollama.VARIABLE) or routes:  # Ollama's clients: OLLAMA_HOST, or their default when redirected
            plan.upstreams.setdefault(ollama.FAMILY, ollama.upstream(ctx, implied=True))
            routes[ollama.VARIABLE] = ollama.FAMILY
        else:
            plan.unset.append((f"{ollama.VARIABLE} is not set, so an Ollama client goes straight to {ollama.DEFAULT}: "
                               f"set {ollama.VARIABLE}={ollama.DEFAULT.split('://')[1]} to record it", ollama.DEFAULT))
        plan.state["variables"] = routes
        plan.key_source = "its own configuration (OPENAI_API_KEY / ANTHROPIC_API_KEY for the official SDKs)"
        if not routes:
            plan.forward_reason = ("it sets no base-URL variable and is not a client firsttoken knows, so where it "
                                   "goes is its own business: it runs in forward mode (HTTPS_PROXY + mitmproxy's "
                                   "CA), which keeps every destination (only known LLM API hosts are recorded)")
        else:
            unset = [names[0] for fam, names in VARIABLES.items()
                     if fam in MENTIONED and not any(v in routes for v in names)]
            if unset:
                it = "it" if len(unset) == 1 else "them"
                defaults = [DEFAULTS[fam] for fam, names in VARIABLES.items() if names[0] in unset]
                plan.unset.append((f"{', '.join(unset)} {'is' if len(unset) == 1 else 'are'} not set, so "
                                        f"firsttoken leaves {it} unset (setting one could change where a client "
                                        f"goes): requests that would read {it} are not recorded", defaults[0]))

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        out = {var: bases[name] for var, name in plan.state.get("variables", {}).items() if name in bases}
        return Redirect(list(plan.argv), out, f"base URLs in the environment ({', '.join(out)})")

    def by_hand(self, plan):
        return ["point the command's base URL at the proxy (OPENAI_BASE_URL / ANTHROPIC_BASE_URL for the SDKs)"]
