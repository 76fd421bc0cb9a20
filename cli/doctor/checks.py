"""The checks of `firsttoken doctor`, re-exported from one module per subject and put in order by run_checks.

Each is a pure function of (env, home, cwd, a few options) returning :class:`Check` results; the
network goes through a :class:`Net` (short timeouts, never raises), so a test rebuilds every trap
with a fake home. No check sends a prompt or prints a key. What they check: docs/clients.md.
"""

from __future__ import annotations

from firsttoken.cli.doctor.core import (
    BASE_URL_VARS,
    DEFAULT_PROXY,
    FACT_TEXT,
    FAIL,
    KEY_VARS,
    PASS,
    WARN,
    Check,
    Context,
    fingerprint,
    key_facts,
    redact_url,
    same_endpoint,
)
from firsttoken.cli.doctor.engines import check_engines, local_engines, probe_engine
from firsttoken.cli.doctor.env import (
    HTTP_PROXY_VARS,
    PROXY_VARS,
    check_base_url,
    check_env_base_urls,
    check_key,
    check_keys,
    check_proxy_vars,
    no_proxy_covers,
)
from firsttoken.cli.doctor.files import (
    CLAUDE_SETTINGS,
    CODEX_BUILTIN_PROVIDERS,
    check_claude_code,
    check_codex,
    check_gemini_cli,
    codex_config_path,
    read_claude_settings,
)
from firsttoken.cli.doctor.install import (
    MIN_MITMPROXY,
    check_db,
    check_db_safety,
    check_mitmproxy,
    check_tokenizers,
    resolve_db_path,
)
from firsttoken.cli.doctor.net import Net, describe_oserror
from firsttoken.cli.doctor.upstreams import (
    check_forward_ca,
    check_proxy,
    check_upstreams,
    configured_upstreams,
    probe_upstream,
    urls_to_proxy,
)

__all__ = [
    "BASE_URL_VARS", "CLAUDE_SETTINGS", "CODEX_BUILTIN_PROVIDERS", "DEFAULT_PROXY", "FACT_TEXT", "FAIL",
    "HTTP_PROXY_VARS", "KEY_VARS", "MIN_MITMPROXY", "PASS", "PROXY_VARS", "SECTIONS", "WARN", "Check", "Context",
    "Net", "describe_oserror", "redact_url", "same_endpoint", "check_base_url", "check_claude_code", "check_codex",
    "check_db", "check_db_safety", "check_engines", "local_engines", "probe_engine", "check_gemini_cli", "check_env_base_urls", "check_forward_ca", "check_key", "check_keys", "check_mitmproxy",
    "check_proxy", "check_proxy_vars", "check_tokenizers", "check_upstreams", "codex_config_path", "fingerprint",
    "key_facts", "no_proxy_covers", "probe_upstream", "read_claude_settings", "resolve_db_path", "run_checks",
    "summary", "configured_upstreams", "urls_to_proxy",
]


# -- all of it --------------------------------------------------------------------------------

SECTIONS = {"proxy": "Proxy variables and the proxy", "keys": "Keys (fingerprints only)", "base_urls": "Base URLs",
            "claude_code": "Claude Code settings", "codex": "Codex config", "gemini_cli": "Gemini CLI settings", "upstreams": "Upstreams (DNS / TCP / TLS)",
            "engines": "Model servers of your own (read-only GETs)", "install": "Installation"}


def run_checks(ctx: Context) -> list[Check]:
    checks: list[Check] = []
    checks += check_proxy_vars(ctx)
    claude_errors, blocks = read_claude_settings(ctx)
    checks += check_keys(ctx, blocks)
    base = check_env_base_urls(ctx) + check_claude_code(ctx, blocks)
    checks += base
    checks += claude_errors
    checks += check_codex(ctx)
    checks += check_gemini_cli(ctx)
    checks.append(check_proxy(ctx, blocks))
    if ctx.forward:
        checks.append(check_forward_ca(ctx))
    if ctx.network:
        checks += check_upstreams(ctx, blocks)
        checks += check_engines(ctx, checks)
    checks += check_tokenizers()
    checks.append(check_db(ctx))
    checks += check_db_safety(ctx)
    checks.append(check_mitmproxy())
    return checks


def summary(checks: list[Check]) -> dict[str, int]:
    return {s: sum(1 for c in checks if c.status == s) for s in (PASS, WARN, FAIL)}
