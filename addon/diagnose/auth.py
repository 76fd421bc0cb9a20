"""Authentication: what was wrong with the credential, judged from its fingerprint facts and the status.

Key-format findings are errors when the upstream answered 401/403 (the first one found is
the error, further ones are warnings) and warnings otherwise. ``auth.rejected`` is the
fallback for a 401/403 nothing else explains. Keys are never quoted, only fingerprints.
"""

from __future__ import annotations

from typing import Any

from firsttoken.addon.diagnose.context import AUTH_STATUSES, Ctx, has_any, server_text
from firsttoken.addon.secrets import SIGV4

#: what AWS says when a SigV4 signature does not check out (SignatureDoesNotMatch, InvalidSignatureException)
SIGNATURE_WORDS = ("signature", "signaturedoesnotmatch", "invalidsignatureexception")

WHITESPACE_FACTS = ("leading_whitespace", "trailing_whitespace", "newline", "escaped_newline", "inner_whitespace")

#: key-format defects in the order they are reported: (code, facts that trigger it)
FORMAT_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("auth.unexpanded", ("unexpanded_variable",)),
    ("auth.whitespace", WHITESPACE_FACTS),
    ("auth.quoted", ("quoted",)),
    ("auth.non_ascii", ("non_ascii",)),
    ("auth.bearer_in_api_key", ("bearer_in_api_key",)),
    ("auth.no_bearer", ("no_scheme",)),
)

#: Google's ``details[].reason`` for a key it does not accept: it answers 400 INVALID_ARGUMENT, not 401
GOOGLE_KEY_REASONS = ("API_KEY_INVALID", "API_KEY_EXPIRED")
#: ... and for a key it accepts but will not let do this (403)
GOOGLE_DENIED = ("PERMISSION_DENIED", "SERVICE_DISABLED", "API_KEY_SERVICE_BLOCKED", "API_KEY_HTTP_REFERRER_BLOCKED",
                 "API_KEY_IP_ADDRESS_BLOCKED", "API_KEY_ANDROID_APP_BLOCKED", "API_KEY_IOS_APP_BLOCKED",
                 "ACCESS_TOKEN_SCOPE_INSUFFICIENT", "IAM_PERMISSION_DENIED", "CONSUMER_INVALID")
#: the facts that can raise a finding on a request the upstream did not refuse
_FIRING = frozenset({f for _, triggers in FORMAT_RULES for f in triggers} | {"conflicting_keys"})


def _key_params(rec: Any, c: Ctx) -> dict[str, Any]:
    p = c.common()
    p.update(fingerprint=rec.key_fingerprint or "?", length=rec.key_length, header=rec.key_header or "?",
             scheme=rec.key_scheme, env=c.key_env())
    return p


def google_refused(rec: Any) -> str | None:
    """"key" / "denied" when Google's error body says it refused the credential, else None."""
    if rec.status is None or rec.status < 400:
        return None
    typ = rec.upstream_error_type
    if typ in GOOGLE_KEY_REASONS:
        return "key"
    if typ in GOOGLE_DENIED and rec.status == 403:
        return "denied"
    return None


def rule_auth(rec: Any, c: Ctx) -> None:
    facts = list(rec.key_facts or [])
    google = google_refused(rec)
    refused = rec.status in AUTH_STATUSES or google is not None
    if "missing" in facts or "empty" in facts:
        if refused:
            p = _key_params(rec, c)
            family = c.family()
            p["expected"] = {"anthropic": "x-api-key", "gemini": "x-goog-api-key"}.get(family, "Authorization: Bearer")
            c.add("auth.missing", "warn" if c.errors() else "error", variant="missing" if "missing" in facts else "empty", **p)
        return
    if rec.key_scheme == SIGV4:  # a signature, not a key: its format rules do not apply
        _rule_sigv4(rec, c, facts, refused)
        return
    if not refused and not any(f in _FIRING for f in facts):
        return  # nothing below can fire (most requests): skip building the params
    p = _key_params(rec, c)
    erred = bool(c.errors())  # e.g. rate.quota already explains a 401/403

    def severity() -> str:
        nonlocal erred
        if refused and not erred:
            erred = True
            return "error"
        return "warn"

    for code, triggers in FORMAT_RULES:
        hit = [f for f in facts if f in triggers]
        if not hit:
            continue
        extra = {"facts": hit} if code == "auth.whitespace" else {}
        if code == "auth.no_bearer":
            extra["variant"] = "no_scheme"
        c.add(code, severity(), **p, **extra)
    if "bearer_case" in facts and refused:
        c.add("auth.no_bearer", severity(), variant="bearer_case", **p)
    if "conflicting_keys" in facts:
        c.add("auth.conflict", severity(), **p)
    if not refused or erred:
        return
    if rec.api.startswith("openai.") and rec.key_header == "x-api-key":
        c.add("auth.wrong_header", "error", variant="x_api_key", **p)
    elif rec.api == "anthropic.messages" and rec.key_header == "authorization":
        c.add("auth.wrong_header", "error", variant="bearer", **p)
    elif c.family() == "gemini" and rec.key_header == "authorization" and (rec.key_fingerprint or "").startswith("AIz"):
        c.add("auth.wrong_header", "error", variant="gemini_bearer", **p)  # an API key where an OAuth token goes
    elif google is not None or c.family() == "gemini":
        c.add("auth.rejected", "error", variant="google_key" if google == "key" or rec.status == 401 else "google_denied",
              server=server_text(rec), **p)
    else:
        c.add("auth.rejected", "error", variant="403" if rec.status == 403 else "401", server=server_text(rec), **p)


def _rule_sigv4(rec: Any, c: Ctx, facts: list[str], refused: bool) -> None:
    if not refused or c.errors():
        return
    p = _key_params(rec, c)
    rewritten = "sigv4_rewritten" in facts
    said = has_any((rec.upstream_error or "") + " " + (rec.upstream_error_type or ""), SIGNATURE_WORDS)
    if rewritten or said:
        c.add("auth.sigv4_host", "error", variant="rewritten" if rewritten else "signature", server=server_text(rec) or "-",
              proxy=c.proxy_url, **p)
    else:
        c.add("auth.rejected", "error", variant="403" if rec.status == 403 else "401", server=server_text(rec), **p)


RULES = (rule_auth,)


# ---- The ``auth`` family of the finding catalog, in English and Chinese.

_E, _W, _I = "error", "warn", "info"

# (code, family, usual severity, other possible severities, {lang: (title, when, message, hint)})
ENTRIES: list[tuple[str, str, str, tuple[str, ...], dict[str, tuple[Any, Any, Any, Any]]]] = [
    ("auth.missing", "auth", _E, (), {
        "en": ("No API key sent",
               "401/403 and the request carried no credential header, or an empty one.",
               {"missing": "{host} answered {status} and the request carried no API key (no Authorization or x-api-key header).",
                "empty": "{host} answered {status} and the {header} header was empty."},
               "Set {env} for the client (sent as `{expected}`), or pass the key explicitly (api_key=...)."),
        "zh": ("未发送 API 密钥",
               "401/403，且请求没有携带凭据头或凭据为空。",
               {"missing": "{host} 返回 {status}，请求中没有 API 密钥（没有 Authorization 或 x-api-key 头）。",
                "empty": "{host} 返回 {status}，{header} 头的值为空。"},
               "为客户端设置 {env}（以 `{expected}` 发送），或在代码中显式传入密钥（api_key=...）。"),
    }),
    ("auth.whitespace", "auth", _E, (_W,), {
        "en": ("Whitespace or line break in the key",
               "The key contains whitespace, a line break or a literal \\n (error on 401/403, else warning).",
               "The API key ({fingerprint}, {length} chars, in {header}) {facts}; {host} answered {status}.",
               "Re-set {env} without spaces, line breaks or a literal \\n: in a .env file write {env}=sk-... with nothing after it; "
               "in a shell: export {env}=\"$(printf %s \"${env}\" | tr -d '[:space:]')\"."),
        "zh": ("密钥中有空白或换行",
               "密钥含空白、换行或字面 \\n（401/403 时为错误，否则为警告）。",
               "API 密钥（{fingerprint}，{length} 个字符，位于 {header}）{facts}；{host} 返回 {status}。",
               "重新设置 {env}，去掉空格、换行和字面的 \\n：.env 文件中写成 {env}=sk-...，后面不要有任何字符；"
               "在 shell 中：export {env}=\"$(printf %s \"${env}\" | tr -d '[:space:]')\"。"),
    }),
    ("auth.quoted", "auth", _E, (_W,), {
        "en": ("Quotes around the key",
               "The key value starts and ends with a quote character (error on 401/403, else warning).",
               "The API key ({fingerprint}, {length} chars, in {header}) is wrapped in quote characters that were sent as part of it; {host} answered {status}.",
               "Remove the quotes from the value of {env}: docker --env-file, systemd EnvironmentFile and some .env loaders keep them literally; write {env}=sk-... without quotes."),
        "zh": ("密钥被引号包住",
               "密钥以引号开头并以引号结尾（401/403 时为错误，否则为警告）。",
               "API 密钥（{fingerprint}，{length} 个字符，位于 {header}）被引号包住，引号也作为密钥的一部分发送了；{host} 返回 {status}。",
               "去掉 {env} 值两边的引号：docker --env-file、systemd EnvironmentFile 以及部分 .env 加载器会原样保留引号；写成 {env}=sk-...，不加引号。"),
    }),
    ("auth.unexpanded", "auth", _E, (_W,), {
        "en": ("Unexpanded variable instead of a key",
               "The key is literally a variable name such as $OPENAI_API_KEY (error on 401/403, else warning).",
               "The API key sent is the literal text {fingerprint}: a variable that was never expanded; {host} answered {status}.",
               "Export the variable before starting the client (export {env}=sk-...) and use double quotes, not single quotes, where it is referenced; in JSON/YAML configs put the key itself or use that tool's own interpolation syntax."),
        "zh": ("变量未展开",
               "发送的密钥是字面的变量名，例如 $OPENAI_API_KEY（401/403 时为错误，否则为警告）。",
               "发送的 API 密钥是字面文本 {fingerprint}：一个没有被展开的变量；{host} 返回 {status}。",
               "启动客户端前先 export {env}=sk-...，引用处用双引号而不是单引号；在 JSON/YAML 配置里直接写密钥，或使用该工具自己的变量插值语法。"),
    }),
    ("auth.non_ascii", "auth", _E, (_W,), {
        "en": ("Non-ASCII characters in the key",
               "The key contains characters outside ASCII, e.g. smart quotes or a zero-width space (error on 401/403, else warning).",
               "The API key ({fingerprint}, {length} chars, in {header}) contains non-ASCII characters (a smart quote, a zero-width or full-width character from copy-paste); {host} answered {status}.",
               "Copy the key again as plain text and re-set {env}; find the culprit with: printf %s \"${env}\" | LC_ALL=C grep -n '[^ -~]'."),
        "zh": ("密钥含非 ASCII 字符",
               "密钥中有 ASCII 以外的字符，如中文引号、零宽空格（401/403 时为错误，否则为警告）。",
               "API 密钥（{fingerprint}，{length} 个字符，位于 {header}）含有非 ASCII 字符（复制粘贴带入的中文引号、零宽或全角字符）；{host} 返回 {status}。",
               "以纯文本重新复制密钥并重新设置 {env}；用以下命令找出问题字符：printf %s \"${env}\" | LC_ALL=C grep -n '[^ -~]'。"),
    }),
    ("auth.no_bearer", "auth", _E, (_W,), {
        "en": ("Authorization without \"Bearer\"",
               "The Authorization header has no `Bearer ` scheme, or a lower-case one the server refused (error on 401/403, else warning).",
               {"no_scheme": "The Authorization header carries the key ({fingerprint}) without the `Bearer ` scheme; {host} answered {status}.",
                "bearer_case": "The Authorization scheme is written `{scheme}` instead of `Bearer`; {host} answered {status}."},
               {"no_scheme": "Send `Authorization: Bearer <key>`: with curl -H \"Authorization: Bearer ${env}\"; the SDKs add it themselves when you set {env}.",
                "bearer_case": "Write the scheme as `Bearer` with a capital B: `Authorization: Bearer <key>`."}),
        "zh": ("Authorization 缺少 \"Bearer\"",
               "Authorization 头没有 `Bearer ` 前缀，或是服务器不接受的小写形式（401/403 时为错误，否则为警告）。",
               {"no_scheme": "Authorization 头直接携带了密钥（{fingerprint}），没有 `Bearer ` 前缀；{host} 返回 {status}。",
                "bearer_case": "Authorization 的方案写成了 `{scheme}` 而不是 `Bearer`；{host} 返回 {status}。"},
               {"no_scheme": "发送 `Authorization: Bearer <密钥>`：curl 用 -H \"Authorization: Bearer ${env}\"；设置 {env} 后 SDK 会自动加上。",
                "bearer_case": "把方案写成首字母大写的 `Bearer`：`Authorization: Bearer <密钥>`。"}),
    }),
    ("auth.bearer_in_api_key", "auth", _E, (_W,), {
        "en": ("\"Bearer\" inside x-api-key",
               "An x-api-key / api-key header whose value starts with `Bearer ` (error on 401/403, else warning).",
               "The {header} header contains `Bearer <key>` ({fingerprint}); that header takes the bare key. {host} answered {status}.",
               "Send `x-api-key: <key>` without `Bearer `, or send the key as `Authorization: Bearer <key>` instead. Claude Code sends ANTHROPIC_API_KEY as x-api-key and ANTHROPIC_AUTH_TOKEN as Authorization: Bearer."),
        "zh": ("x-api-key 中带了 \"Bearer\"",
               "x-api-key / api-key 头的值以 `Bearer ` 开头（401/403 时为错误，否则为警告）。",
               "{header} 头的值是 `Bearer <密钥>`（{fingerprint}），而该头只接受裸密钥。{host} 返回 {status}。",
               "发送 `x-api-key: <密钥>`，不要带 `Bearer `；或改用 `Authorization: Bearer <密钥>`。Claude Code 会把 ANTHROPIC_API_KEY 作为 x-api-key 发送，把 ANTHROPIC_AUTH_TOKEN 作为 Authorization: Bearer 发送。"),
    }),
    ("auth.wrong_header", "auth", _E, (), {
        "en": ("Key in the wrong header",
               "x-api-key sent to an OpenAI-style path that answered 401/403, only Authorization: Bearer sent to an Anthropic path that answered 401/403, or a Gemini API key sent as Bearer to Google's own API.",
               {"x_api_key": "The key ({fingerprint}) was sent as `x-api-key`, but {path} is an OpenAI-style endpoint that reads `Authorization: Bearer`; {host} answered {status}.",
                "bearer": "Only `Authorization: Bearer` ({fingerprint}) was sent to the Anthropic endpoint {path}; Anthropic API keys go in `x-api-key` (Bearer is for OAuth tokens). {host} answered {status}.",
                "gemini_bearer": "A Gemini API key ({fingerprint}) was sent as `Authorization: Bearer` to {path}; Google reads an API key from `x-goog-api-key` (Bearer is for OAuth access tokens). {host} answered {status}."},
               {"x_api_key": "Send `Authorization: Bearer <key>`: use the openai SDK with OPENAI_API_KEY, or curl -H \"Authorization: Bearer $OPENAI_API_KEY\"; x-api-key is Anthropic's header.",
                "bearer": "Set ANTHROPIC_API_KEY (sent as x-api-key) instead of ANTHROPIC_AUTH_TOKEN (sent as Authorization: Bearer); with curl: -H \"x-api-key: $ANTHROPIC_API_KEY\" -H \"anthropic-version: 2023-06-01\".",
                "gemini_bearer": "Send the key as `x-goog-api-key: <key>` (curl -H \"x-goog-api-key: $GEMINI_API_KEY\"); the google-genai SDKs and Gemini CLI do with GEMINI_API_KEY. Only Gemini's OpenAI-compatible endpoint (/v1beta/openai/) takes the key as Bearer."}),
        "zh": ("密钥放错了请求头",
               "向 OpenAI 风格路径发送了 x-api-key 且返回 401/403；或向 Anthropic 路径只发送了 Authorization: Bearer 且返回 401/403；或把 Gemini API 密钥以 Bearer 发给了 Google 自己的 API。",
               {"x_api_key": "密钥（{fingerprint}）以 `x-api-key` 发送，但 {path} 是读取 `Authorization: Bearer` 的 OpenAI 风格接口；{host} 返回 {status}。",
                "bearer": "向 Anthropic 接口 {path} 只发送了 `Authorization: Bearer`（{fingerprint}）；Anthropic 的 API 密钥应放在 `x-api-key`（Bearer 用于 OAuth 令牌）。{host} 返回 {status}。",
                "gemini_bearer": "Gemini API 密钥（{fingerprint}）以 `Authorization: Bearer` 发送到了 {path}；Google 从 `x-goog-api-key` 读取 API 密钥（Bearer 用于 OAuth 访问令牌）。{host} 返回 {status}。"},
               {"x_api_key": "发送 `Authorization: Bearer <密钥>`：使用 openai SDK 并设置 OPENAI_API_KEY，或 curl -H \"Authorization: Bearer $OPENAI_API_KEY\"；x-api-key 是 Anthropic 的请求头。",
                "bearer": "设置 ANTHROPIC_API_KEY（以 x-api-key 发送），而不是 ANTHROPIC_AUTH_TOKEN（以 Authorization: Bearer 发送）；curl 写法：-H \"x-api-key: $ANTHROPIC_API_KEY\" -H \"anthropic-version: 2023-06-01\"。",
                "gemini_bearer": "以 `x-goog-api-key: <密钥>` 发送（curl -H \"x-goog-api-key: $GEMINI_API_KEY\"）；设置 GEMINI_API_KEY 后 google-genai SDK 和 Gemini CLI 会这样发送。只有 Gemini 的 OpenAI 兼容接口（/v1beta/openai/）接受以 Bearer 传递的密钥。"}),
    }),
    ("auth.conflict", "auth", _E, (_W,), {
        "en": ("Two different credentials",
               "Both an Authorization Bearer token and a different API key were sent, as Claude Code does when a login and ANTHROPIC_API_KEY coexist (error on 401/403, else warning).",
               "Two different credentials were sent ({header}: {fingerprint} and another key); the upstream may pick either one. {host} answered {status}.",
               "Keep one: for Claude Code either run `claude /logout` (use the API key) or `unset ANTHROPIC_API_KEY` (use the login); don't set ANTHROPIC_AUTH_TOKEN and ANTHROPIC_API_KEY together."),
        "zh": ("同时发送了两个不同的凭据",
               "同时发送了 Authorization Bearer 令牌和另一个 API 密钥，Claude Code 在已登录又设置了 ANTHROPIC_API_KEY 时就会这样（401/403 时为错误，否则为警告）。",
               "请求发送了两个不同的凭据（{header}：{fingerprint} 和另一个密钥），上游可能任选其一。{host} 返回 {status}。",
               "只保留一个：Claude Code 可以运行 `claude /logout`（改用 API 密钥），或 `unset ANTHROPIC_API_KEY`（改用登录）；不要同时设置 ANTHROPIC_AUTH_TOKEN 和 ANTHROPIC_API_KEY。"),
    }),
    ("auth.sigv4_host", "auth", _E, (), {
        "en": ("SigV4 signature refused",
               "A request signed with AWS Signature Version 4 (Bedrock) answered 401/403; the signature covers the Host and path, so a request signed for the proxy's address fails at the real host.",
               {"rewritten": "{host} refused the SigV4 signature of access key {fingerprint} with {status}: the client signed the request for the address it was given (firsttoken, {proxy}), and firsttoken forwarded it to {host}, a Host and path the signature does not cover. \u201c{server}\u201d",
                "signature": "{host} refused the SigV4 signature of access key {fingerprint} with {status}: \u201c{server}\u201d"},
               {"rewritten": "Let the client sign for Bedrock's own host: forward mode, `firsttoken run --forward -- CLIENT` or HTTPS_PROXY=<the proxy> with the client's usual endpoint (it must trust firsttoken's CA). Or put a gateway that signs its own requests behind firsttoken and have Claude Code skip signing with CLAUDE_CODE_SKIP_BEDROCK_AUTH=1.",
                "signature": "The signature was made for this host and still failed: check the AWS secret access key that goes with {fingerprint}, the machine's clock (SigV4 allows 5 minutes of skew), and the region the client signs for (AWS_REGION)."}),
        "zh": ("SigV4 签名被拒绝",
               "以 AWS Signature Version 4 签名的请求（Bedrock）收到 401/403；签名覆盖 Host 和路径，为代理地址签名的请求到了真实主机必然失败。",
               {"rewritten": "{host} 以 {status} 拒绝了访问密钥 {fingerprint} 的 SigV4 签名：客户端按它被告知的地址（firsttoken，{proxy}）签名，而 firsttoken 把请求转发到了 {host}，签名并不覆盖这个 Host 和路径。\u201c{server}\u201d",
                "signature": "{host} 以 {status} 拒绝了访问密钥 {fingerprint} 的 SigV4 签名：\u201c{server}\u201d"},
               {"rewritten": "让客户端为 Bedrock 自己的主机签名：使用转发模式，`firsttoken run --forward -- 客户端`，或设置 HTTPS_PROXY=<代理地址> 并保留客户端原来的端点（客户端须信任 firsttoken 的 CA）。或者在 firsttoken 后面放一个自行签名的网关，并用 CLAUDE_CODE_SKIP_BEDROCK_AUTH=1 让 Claude Code 跳过签名。",
                "signature": "签名就是为这个主机做的，仍然失败：检查与 {fingerprint} 配套的 AWS 秘密访问密钥、本机时钟（SigV4 允许 5 分钟偏差）以及客户端签名所用的区域（AWS_REGION）。"}),
    }),
    ("auth.rejected", "auth", _E, (), {
        "en": ("Key refused by the upstream",
               "A well-formed key answered with 401/403 (no other key problem explains it), or Google's API_KEY_INVALID (a 400) / PERMISSION_DENIED.",
               "{host} refused the key {fingerprint} ({length} chars, in {header}) with {status}: \u201c{server}\u201d",
               {"401": "The key is well-formed but not valid here: check that it belongs to this provider ({host}) and project, and is not revoked or expired; create a new key and re-set {env}.",
                "403": "The key was accepted but is not allowed to do this: check the project/organisation permissions, model access, IP allow-lists and region restrictions for {fingerprint}.",
                "google_key": "Google does not know this key (it answers 400, not 401): create a Gemini API key in Google AI Studio (https://aistudio.google.com/apikey) and set {env} to it (Gemini CLI and the google-genai SDK read it and send it as x-goog-api-key; GOOGLE_API_KEY wins when both are set). A Vertex AI project needs `gcloud auth application-default login` instead.",
                "google_denied": "The key is valid but not allowed to do this: enable the Generative Language API (Vertex AI: the Vertex AI API) in the key's Google Cloud project, lift API restrictions on the key that leave it out, and check the project's region is served; on Vertex AI the account needs the Vertex AI User role (roles/aiplatform.user)."}),
        "zh": ("上游拒绝了密钥",
               "格式正常的密钥收到 401/403（且没有其他密钥问题可以解释），或 Google 的 API_KEY_INVALID（400）/ PERMISSION_DENIED。",
               "{host} 以 {status} 拒绝了密钥 {fingerprint}（{length} 个字符，位于 {header}）：\u201c{server}\u201d",
               {"401": "密钥格式正确，但在这里无效：确认它属于该服务商（{host}）和该项目、没有被吊销或过期；必要时新建密钥并重新设置 {env}。",
                "403": "密钥有效但无权执行此操作：检查 {fingerprint} 所在项目/组织的权限、模型访问权限、IP 白名单和地区限制。",
                "google_key": "Google 不认识这个密钥（它返回 400 而不是 401）：在 Google AI Studio（https://aistudio.google.com/apikey）创建 Gemini API 密钥并设置为 {env}（Gemini CLI 和 google-genai SDK 读取它，以 x-goog-api-key 发送；同时设置时 GOOGLE_API_KEY 优先）。Vertex AI 项目则需要运行 `gcloud auth application-default login`。",
                "google_denied": "密钥有效但无权执行此操作：在密钥所属的 Google Cloud 项目中启用 Generative Language API（Vertex AI 则启用 Vertex AI API），解除把它排除在外的密钥 API 限制，并确认项目所在地区受支持；在 Vertex AI 上账号需要 Vertex AI User 角色（roles/aiplatform.user）。"}),
    }),
]
