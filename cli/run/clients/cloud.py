"""Claude Code on Amazon Bedrock and on Vertex AI: where it sends its requests, read the way the
installed version reads it (CLAUDE_CODE_USE_BEDROCK / _VERTEX, the base URL, region and project
variables), and whether a redirect keeps its credentials valid (SigV4 binds the host). docs/run.md."""

from __future__ import annotations

from collections.abc import Mapping

from firsttoken.cli.run.clients.base import Plan, Upstream

#: the route name -> the variable Claude Code reads its base URL from
BASE_VARS = {"bedrock": "ANTHROPIC_BEDROCK_BASE_URL", "vertex": "ANTHROPIC_VERTEX_BASE_URL"}
#: the family of a base URL the client appends its whole path to (``/model/…``, ``/projects/…``)
FAMILY = "cloud"
DEFAULT_VERTEX_REGION = "us-east5"
DEFAULT_AWS_REGION = "us-east-1"


def truthy(v: str | None) -> bool:
    """Claude Code's own test of a flag variable: 1, true, yes or on, any case."""
    return (v or "").strip().lower() in ("1", "true", "yes", "on")


def bedrock_url(env: Mapping[str, str]) -> tuple[str, str]:
    """(Bedrock's base URL, where it came from) as Claude Code builds it."""
    v = (env.get("ANTHROPIC_BEDROCK_BASE_URL") or "").strip()
    if v:
        return v, "$ANTHROPIC_BEDROCK_BASE_URL"
    region = (env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or "").strip() or DEFAULT_AWS_REGION
    return f"https://bedrock-runtime.{region}.amazonaws.com", f"default for AWS_REGION={region}"


def vertex_url(env: Mapping[str, str], region: str | None = None) -> tuple[str, str]:
    """(Vertex AI's base URL, where it came from) as Claude Code's Vertex client builds it."""
    v = (env.get("ANTHROPIC_VERTEX_BASE_URL") or "").strip()
    if v:
        return v, "$ANTHROPIC_VERTEX_BASE_URL"
    r = region or (env.get("CLOUD_ML_REGION") or "").strip() or DEFAULT_VERTEX_REGION
    host = {"global": "aiplatform.googleapis.com", "us": "aiplatform.us.rep.googleapis.com",
            "eu": "aiplatform.eu.rep.googleapis.com"}.get(r, f"{r}-aiplatform.googleapis.com")
    return f"https://{host}/v1", f"default for CLOUD_ML_REGION={r}"


def kind(env: Mapping[str, str]) -> str | None:
    """"bedrock", "vertex" (the one Claude Code uses: Bedrock first, as it checks), or None."""
    if truthy(env.get("CLAUDE_CODE_USE_BEDROCK")):
        return "bedrock"
    if truthy(env.get("CLAUDE_CODE_USE_VERTEX")):
        return "vertex"
    return None


def signs(env: Mapping[str, str]) -> bool:
    """Whether Claude Code signs its Bedrock requests with SigV4 (no Bedrock API key, auth not skipped)."""
    return not truthy(env.get("CLAUDE_CODE_SKIP_BEDROCK_AUTH")) and not (env.get("AWS_BEARER_TOKEN_BEDROCK") or "").strip()


def find(plan: Plan, env: Mapping[str, str]) -> bool:
    """Fill ``plan`` for Claude Code on Bedrock or Vertex AI; False when it uses neither."""
    which = kind(env)
    if which == "bedrock":
        url, source = bedrock_url(env)
        plan.upstreams["bedrock"] = Upstream(FAMILY, url, source)
        bearer = bool((env.get("AWS_BEARER_TOKEN_BEDROCK") or "").strip())
        plan.key_source = ("AWS_BEARER_TOKEN_BEDROCK (a Bedrock API key)" if bearer else
                           "the AWS credential chain (AWS_PROFILE, AWS_ACCESS_KEY_ID…, ~/.aws), signed with SigV4")
        if signs(env):
            plan.forward_reason = ("Claude Code signs its Bedrock requests with SigV4, which binds the host it "
                                   "signs for: it keeps its own endpoint and runs through HTTPS_PROXY instead")
        elif (env.get("ANTHROPIC_SMALL_FAST_MODEL_AWS_REGION") or "").strip() and not env.get("ANTHROPIC_BEDROCK_BASE_URL"):
            plan.forward_reason = ("ANTHROPIC_SMALL_FAST_MODEL_AWS_REGION sends the small model to another region's "
                                   "host: Claude Code runs through HTTPS_PROXY instead")
        return True
    if which == "vertex":
        url, source = vertex_url(env)
        plan.upstreams["vertex"] = Upstream(FAMILY, url, source)
        plan.key_source = ("Google's application default credentials (gcloud auth application-default login, "
                           "GOOGLE_APPLICATION_CREDENTIALS), sent as an OAuth bearer token")
        per_model = sorted(k for k, v in env.items() if k.startswith("VERTEX_REGION_CLAUDE") and (v or "").strip())
        if per_model and not (env.get("ANTHROPIC_VERTEX_BASE_URL") or "").strip():
            plan.forward_reason = (f"{per_model[0]} sends a model to another region's host: Claude Code runs "
                                   "through HTTPS_PROXY instead")
        if not (env.get("ANTHROPIC_VERTEX_PROJECT_ID") or "").strip():
            plan.notes.append("CLAUDE_CODE_USE_VERTEX is set but ANTHROPIC_VERTEX_PROJECT_ID is not: Claude Code "
                              "needs it to build its Vertex AI URLs")
        return True
    return False
