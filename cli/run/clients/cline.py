"""The Cline CLI: its providers.json (cli/run/cline.py reads it in Cline's precedence). Redirected by
``CLINE_PROVIDER_SETTINGS_PATH`` = a private copy whose provider's ``baseUrl`` is the proxy, and
``CLINE_SESSION_BACKEND_MODE=local`` so that a running Cline hub does not take the task.
What Cline reads: docs/run.md (Client by client: Cline CLI)."""

from __future__ import annotations

from firsttoken.addon import routing
from firsttoken.cli.run import cline
from firsttoken.cli.run.clients.base import ChildFile, Client, Context, Plan, PlanError, Redirect, Upstream, versioned_base


class Cline(Client):
    name = "cline"
    title = "Cline"
    programs = ("cline",)
    packages = ("cline",)

    def find(self, plan: Plan, ctx: Context) -> None:
        args = cline.parse_args(plan.argv[plan.args_at:])
        if args.command:
            plan.notes.append(f"`cline {args.command}` is not a task: firsttoken leaves Cline's settings as they are "
                              "(run a task, e.g. `firsttoken run -- cline --json \"…\"`, to record one)")
            plan.state["passive"] = True
            return
        if args.zen:
            raise PlanError("cline --zen hands the task to Cline's background hub, whose settings firsttoken cannot "
                            "reach, so nothing would be recorded: run it without --zen (e.g. "
                            "`firsttoken run -- cline --yolo \"…\"`)")
        try:
            cfg = cline.read_config(args, ctx.env, ctx.home, ctx.cwd)
        except cline.ClineConfigError as e:
            raise PlanError(str(e)) from None
        plan.key_source = f"{cfg.label} providers.{cfg.provider}.settings (set it with `cline auth`)"
        upstream = cfg.upstream()
        if upstream is not None and cfg.family is not None:
            plan.upstreams[cfg.family] = Upstream(cfg.family, upstream, cfg.source)
            if cfg.family == "anthropic" and not routing.ends_in_v1(cfg.base_url or "") and "://" in upstream:
                plan.notes.append(f"{cfg.source} = {cfg.base_url} has no API version: through firsttoken Cline "
                                  f"calls {upstream}/v1/messages (the base-URL rule adds /v1).")
        if cfg.sandbox:
            plan.forward_reason = (f"{cfg.sandbox} is a sandbox that reads {cfg.label}, which nothing relocates: "
                                   "Cline runs through HTTPS_PROXY instead (only known LLM API hosts are recorded)")
        elif upstream is None:
            plan.forward_reason = (f"Cline's provider {cfg.provider!r} has no base URL in {cfg.label} that "
                                   "firsttoken knows: Cline runs through HTTPS_PROXY instead (only known LLM API "
                                   "hosts are recorded)")
        else:
            plan.state["config"] = cfg

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        cfg = plan.state.get("config")
        if cfg is None or cfg.family not in routes:
            return Redirect(list(plan.argv), {}, "Cline's settings as they are")
        # Cline appends /chat/completions, /responses or /messages to its base URL, which therefore
        # holds the API version whatever the API: the OpenAI half of the one base-URL rule. Its Ollama
        # provider appends /api/chat to the server's root: the route's root.
        route = routes[cfg.family]
        base = (routing.client_base_url(proxy_url, route, "ollama") if cfg.family == "ollama"
                else versioned_base(proxy_url, route))
        files = [ChildFile("providers.json", cline.settings_copy(cfg, base), "CLINE_PROVIDER_SETTINGS_PATH")]
        if cfg.models_json is not None:
            files.append(ChildFile("models.json", cfg.models_json))  # Cline reads it beside providers.json
        how = (f"CLINE_PROVIDER_SETTINGS_PATH = a copy of {cfg.label}, providers.{cfg.provider}.settings.baseUrl "
               "→ the proxy (beats Cline's config dir); CLINE_SESSION_BACKEND_MODE=local (not its background hub)")
        return Redirect(list(plan.argv), {"CLINE_SESSION_BACKEND_MODE": "local"}, how, files)

    def by_hand(self, plan):
        return ["cline auth -p openai-compatible -b <the proxy's URL>/v1 …   (`firsttoken env cline`)"]
