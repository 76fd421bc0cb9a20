"""Kilo Code's CLI ``kilo`` (npm ``@kilocode/cli``, an opencode fork). Its config is merged, later winning
(its packaged docs and config loader): ~/.config/kilo/ < ``$KILO_CONFIG`` < the project's kilo.json(c) then
opencode.json(c) < the .kilo/.kilocode directories < ``$KILO_CONFIG_CONTENT`` < the managed /etc/kilo/.
Redirected as opencode (cli/run/clients/opencode.py) is, by ``KILO_CONFIG_CONTENT``; a provider whose base
URL /etc/kilo sets (it beats the inline config) is left alone and said so (docs/run.md, the clients table)."""

from __future__ import annotations

from pathlib import Path

from firsttoken.cli.run.clients.base import Context
from firsttoken.cli.run.clients.files import git_root
from firsttoken.cli.run.clients.opencode import Opencode

#: the file names each config directory holds, in the order Kilo loads them (the last wins)
DIR_FILES = ("kilo.jsonc", "kilo.json", "opencode.jsonc", "opencode.json")
GLOBAL_FILES = ("config.json", "kilo.json", "kilo.jsonc", "opencode.json", "opencode.jsonc")
MANAGED = Path("/etc/kilo")


class Kilo(Opencode):
    name = "kilo"
    title = "Kilo CLI"
    programs = ("kilo", "kilocode")
    packages = ("@kilocode/cli",)
    content_var = "KILO_CONFIG_CONTENT"
    key_source = ("`kilo auth login` (~/.local/share/kilo/auth.json), the provider's options.apiKey in kilo.json, "
                  "or its variable (OPENAI_API_KEY, ANTHROPIC_API_KEY…)")

    def __init__(self, managed: Path = MANAGED) -> None:
        self.managed = managed

    def config_files(self, ctx: Context) -> list[Path]:
        files = [Path(ctx.var("XDG_CONFIG_HOME") or ctx.home / ".config") / "kilo" / n for n in GLOBAL_FILES]
        if ctx.var("KILO_CONFIG"):
            files.append(ctx.cwd / Path(ctx.var("KILO_CONFIG")).expanduser())
        project = ctx.var("KILO_DISABLE_PROJECT_CONFIG").lower() not in ("1", "true")
        top = git_root(ctx.cwd) or Path(ctx.cwd.anchor)  # outside git, Kilo looks up to the root
        ups = [d for d in (ctx.cwd, *ctx.cwd.parents) if d == top or top in d.parents]  # the nearest first
        dirs: dict[Path, None] = {}  # (in order, each once)
        if project:
            for stem in ("kilo", "opencode"):  # the nearest last: it wins; .jsonc beats .json beside it
                files += [f for d in reversed(ups) for f in (d / f"{stem}.json", d / f"{stem}.jsonc")]
            dirs.update({d / n: None for d in ups for n in (".kilocode", ".kilo")})
        for d in (ctx.home / ".kilocode", ctx.home / ".kilo"):
            dirs.setdefault(d, None)
        if ctx.var("KILO_CONFIG_DIR"):
            dirs.setdefault(ctx.cwd / Path(ctx.var("KILO_CONFIG_DIR")).expanduser(), None)
        return files + [d / n for d in dirs for n in DIR_FILES]

    def overriding_files(self, ctx: Context) -> list[Path]:
        return [self.managed / n for n in DIR_FILES]

    def by_hand(self, plan):
        return ["\"provider\": {\"ID\": {\"options\": {\"baseURL\": \"<the proxy's URL>/v1\"}}} in "
                "~/.config/kilo/kilo.json"]
