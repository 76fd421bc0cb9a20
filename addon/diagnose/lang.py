"""Which language findings are written in: en or zh.

Order: an explicit setting (``--lang`` / ``firsttoken_lang``), else ``$FIRSTTOKEN_LANG``,
else the locale (``LC_ALL``, ``LC_MESSAGES``, ``LANG``, ``LANGUAGE``: ``zh*`` -> zh), else en.
"""

from __future__ import annotations

import locale
import os

LANGS = ("en", "zh")
DEFAULT_LANG = "en"
_LOCALE_VARS = ("LC_ALL", "LC_MESSAGES", "LANG", "LANGUAGE")


def normalize(value: object) -> str | None:
    """'zh_CN.UTF-8', 'zh-Hans', 'ZH' -> 'zh'; 'en_US' -> 'en'; anything else -> None."""
    if not isinstance(value, str):
        return None
    v = value.strip().lower().replace("-", "_")
    if not v or v in ("c", "posix"):
        return None
    for lang in LANGS:
        if v == lang or v.startswith(lang + "_") or v.startswith(lang + "."):
            return lang
    return None


def from_locale(environ: dict[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    for var in _LOCALE_VARS:
        value = env.get(var)
        if value:
            # LANGUAGE may be a list ("zh_CN:en"); the first entry wins.
            return normalize(value.split(":", 1)[0]) or (DEFAULT_LANG if var != "LANGUAGE" else None)
    if environ is None:
        try:
            return normalize(locale.getlocale()[0])
        except (ValueError, TypeError):  # pragma: no cover - odd platforms
            return None
    return None


def resolve(setting: object = None, environ: dict[str, str] | None = None) -> str:
    """The language to use: the setting, else $FIRSTTOKEN_LANG, else the locale, else en."""
    env = os.environ if environ is None else environ
    return normalize(setting) or normalize(env.get("FIRSTTOKEN_LANG")) or from_locale(environ) or DEFAULT_LANG
