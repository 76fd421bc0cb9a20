"""aider (aider-chat): it calls the OpenAI API through litellm, which reads ``OPENAI_BASE_URL`` before
``OPENAI_API_BASE``; aider sets them from the environment, .env files and ``--set-env``, then from
``--openai-api-base`` / .aider.conf.yml; its Ollama models read ``OLLAMA_API_BASE`` (default
http://localhost:11434). Redirected by one more ``--set-env OPENAI_BASE_URL=<proxy>`` (and ``OLLAMA_API_BASE``) at
the end of its options (the last one wins). Precedence in full: docs/run.md (Client by client: aider)."""

from __future__ import annotations

from firsttoken.cli.run.clients.base import Client, Context, Plan, PlanError, Redirect, Upstream, option_value
from firsttoken.cli.run.clients.files import ConfigError, git_root, read_dotenv, read_yaml

DEFAULT = "https://api.openai.com/v1"
#: litellm's Ollama provider (aider's ``ollama_chat/…`` and ``ollama/…`` models): its server's root, to which it
#: appends /api/chat, /api/generate, /api/show
OLLAMA_VAR, OLLAMA_DEFAULT = "OLLAMA_API_BASE", "http://localhost:11434"


class Aider(Client):
    name = "aider"
    title = "aider"
    programs = ("aider",)
    packages = ("aider-chat", "aider-install")

    def find(self, plan: Plan, ctx: Context) -> None:
        args = plan.argv[plan.args_at:]
        root = git_root(ctx.cwd)
        env: dict[str, tuple[str, str]] = {k: (v, f"${k}") for k, v in ctx.env.items()
                                           if k in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "AIDER_OPENAI_API_BASE",
                                                    OLLAMA_VAR)}
        env_file = option_value(args, ("--env-file",))
        dotenvs = [ctx.home / ".env"] + ([root / ".env"] if root else []) + [ctx.cwd / ".env"]
        dotenvs += [ctx.cwd / env_file[1]] if env_file else []
        for path in dict.fromkeys(p.resolve() for p in dotenvs):
            for k, v in read_dotenv(path).items():
                env[k] = (v, f"{ctx.label(path)} {k}")
        for i, a in enumerate(args):
            if a == "--":
                break
            value = args[i + 1] if a == "--set-env" and i + 1 < len(args) else a[10:] if a.startswith("--set-env=") else None
            if value and "=" in value:
                k, v = value.split("=", 1)
                env[k.strip()] = (v.strip(), f"aider --set-env {k.strip()}")
        api_base = option_value(args, ("--openai-api-base",))
        if api_base:
            env["OPENAI_API_BASE"] = (api_base[1], "aider --openai-api-base")
        elif env.get("AIDER_OPENAI_API_BASE", ("", ""))[0].strip():
            env["OPENAI_API_BASE"] = env["AIDER_OPENAI_API_BASE"]
        else:
            conf = option_value(args, ("-c", "--config"))
            files = [ctx.cwd / conf[1]] if conf else []
            files += [ctx.cwd / ".aider.conf.yml"] + ([root / ".aider.conf.yml"] if root else [])
            files += [ctx.home / ".aider.conf.yml"]
            for path in files:
                try:
                    doc = read_yaml(path, ctx.label(path))
                except ConfigError as e:
                    raise PlanError(f"{e}: aider would not start either; fix it first") from None
                v = doc.get("openai-api-base") if isinstance(doc, dict) else None
                if isinstance(v, str) and v.strip():
                    env["OPENAI_API_BASE"] = (v.strip(), f"{ctx.label(path)} openai-api-base")
                    break
        for var in ("OPENAI_BASE_URL", "OPENAI_API_BASE"):  # litellm's order
            v, source = env.get(var, ("", ""))
            if v.strip():
                plan.upstreams["openai"] = Upstream("openai", v.strip(), source)
                break
        else:
            plan.upstreams["openai"] = Upstream("openai", DEFAULT, "litellm's default")
        v, source = env.get(OLLAMA_VAR, ("", ""))  # its ollama/ and ollama_chat/ models (litellm's Ollama provider)
        plan.upstreams["ollama"] = (Upstream("ollama", v.strip().rstrip("/"), source) if v.strip()
                                    else Upstream("ollama", OLLAMA_DEFAULT, "litellm's default for Ollama", implied=True))
        plan.key_source = ("OPENAI_API_KEY (environment or a .env file), or aider's --openai-api-key / "
                           "openai-api-key in .aider.conf.yml")

    def redirect(self, plan, bases, proxy_url, routes, env) -> Redirect:
        argv = list(plan.argv)
        at = argv.index("--", plan.args_at) if "--" in argv[plan.args_at:] else len(argv)
        argv[at:at] = ["--set-env", f"OPENAI_BASE_URL={bases['openai']}"]
        if "ollama" in bases:
            argv[at + 2:at + 2] = ["--set-env", f"{OLLAMA_VAR}={bases['ollama']}"]
        return Redirect(argv, {}, "aider --set-env OPENAI_BASE_URL=… (the last --set-env wins; litellm reads "
                                  "OPENAI_BASE_URL before --openai-api-base)"
                        + (f" and --set-env {OLLAMA_VAR}=… (its Ollama models)" if "ollama" in bases else ""))

    def by_hand(self, plan):
        return ["aider --openai-api-base <the proxy's URL>/v1 …"]
