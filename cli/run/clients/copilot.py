"""GitHub Copilot CLI (``copilot``, npm ``@github/copilot``). Bring-your-own-key: ``COPILOT_PROVIDER_BASE_URL``
(the environment only) replaces GitHub's model routing; ``COPILOT_PROVIDER_TYPE`` (openai, the default; azure;
anthropic) says which path it appends (``/chat/completions``, ``/openai/v1/…``, ``/v1/messages``). It ignores
OPENAI_BASE_URL. Redirected by ``COPILOT_PROVIDER_BASE_URL`` = the proxy, the type kept; without it, Copilot's
own service: forward mode. What 1.0.102 reads: docs/run.md (GitHub Copilot CLI)."""

from __future__ import annotations

from firsttoken.cli.run.clients.base import Client, Context, Plan, PlanError, Redirect, add_upstream

VARIABLE = "COPILOT_PROVIDER_BASE_URL"
#: COPILOT_PROVIDER_TYPE → the family whose base-URL rule fits how Copilot builds its path
FAMILIES = {"openai": "openai", "anthropic": "anthropic", "azure": "cloud"}
KEY_SOURCE = ("COPILOT_PROVIDER_API_KEY, COPILOT_PROVIDER_BEARER_TOKEN or COPILOT_PROVIDER_API_KEY_COMMAND "
              "(BYOK); GitHub's login (`copilot login`, COPILOT_GITHUB_TOKEN) without one")


def provider_type(ctx: Context) -> str:
    """Copilot's BYOK provider type: COPILOT_PROVIDER_TYPE, openai when unset."""
    return ctx.var("COPILOT_PROVIDER_TYPE").lower() or "openai"


class CopilotCli(Client):
    name = "copilot"
    title = "GitHub Copilot CLI"
    programs = ("copilot",)
    packages = ("@github/copilot",)

    def find(self, plan: Plan, ctx: Context) -> None:
        plan.key_source = KEY_SOURCE
        url = ctx.var(VARIABLE)
        if not url:
            plan.forward_reason = (f"{VARIABLE} is not set, so Copilot CLI uses GitHub Copilot's own model service "
                                   "(it ignores OPENAI_BASE_URL), which is not among the LLM API hosts firsttoken "
                                   "records: it runs through HTTPS_PROXY, and only requests to known hosts are "
                                   f"recorded. To record a model of your own, set {VARIABLE} (and COPILOT_MODEL)")
            return
        kind = provider_type(ctx)
        if kind not in FAMILIES:
            raise PlanError(f"COPILOT_PROVIDER_TYPE = {ctx.var('COPILOT_PROVIDER_TYPE')!r} is not one of openai, "
                            "azure, anthropic: Copilot CLI would not use it either; fix it or unset it (openai)")
        plan.state["route"] = add_upstream(plan, FAMILIES[kind], url, f"${VARIABLE}")
        plan.state["type"] = kind

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        name = plan.state.get("route")
        if name not in bases:
            return Redirect(list(plan.argv), {}, "nothing to redirect")
        return Redirect(list(plan.argv), {VARIABLE: bases[name]},
                        f"{VARIABLE} → the proxy (COPILOT_PROVIDER_TYPE {plan.state['type']} kept)")

    def by_hand(self, plan):
        return [f"{VARIABLE}=<the proxy's URL>/v1 copilot … (COPILOT_PROVIDER_TYPE=anthropic or azure: "
                "<the proxy's URL>, no /v1)"]
