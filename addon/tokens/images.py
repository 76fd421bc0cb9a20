"""What an image in a prompt costs (approximate): its size read from the PNG / JPEG / GIF /
WebP header of a base64 data URL, then OpenAI's GPT-4o tile formula or Anthropic's w*h/750.
The formulas: docs/record.md ("How the prompt is counted").
"""

from __future__ import annotations

import base64
import math
import struct
from typing import Any

LOW_DETAIL_IMAGE, IMAGE_TILE = 85, 170
ANTHROPIC_IMAGE_MAX = 1600


def image_dims(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG / GIF / WebP / JPEG header."""
    try:
        if data[:8] == b"\x89PNG\r\n\x1a\n":
            return struct.unpack(">II", data[16:24])
        if data[:6] in (b"GIF87a", b"GIF89a"):
            return struct.unpack("<HH", data[6:10])
        if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            kind = data[12:16]
            if kind == b"VP8 ":
                w, h = struct.unpack("<HH", data[26:30])
                return w & 0x3FFF, h & 0x3FFF
            if kind == b"VP8L":
                b = data[21:25]
                w = 1 + (((b[1] & 0x3F) << 8) | b[0])
                return w, 1 + (((b[3] & 0xF) << 10) | (b[2] << 2) | ((b[1] & 0xC0) >> 6))
            if kind == b"VP8X":
                w = 1 + int.from_bytes(data[24:27], "little")
                return w, 1 + int.from_bytes(data[27:30], "little")
        if data[:2] == b"\xff\xd8":
            i, n = 2, len(data)
            while i + 9 < n:
                if data[i] != 0xFF:
                    return None
                marker = data[i + 1]
                if marker == 0xFF:
                    i += 1
                elif marker == 0x01 or 0xD0 <= marker <= 0xD9:
                    i += 2
                elif 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                    h, w = struct.unpack(">HH", data[i + 5:i + 9])
                    return w, h
                else:
                    i += 2 + struct.unpack(">H", data[i + 2:i + 4])[0]
    except (struct.error, IndexError):
        pass
    return None


def b64_image_dims(b64: Any) -> tuple[int, int] | None:
    if not isinstance(b64, str) or not b64:
        return None
    if b64.startswith("data:"):
        b64 = b64.partition(",")[2]
    head = b64[:65536]
    for chunk in (head, b64) if len(b64) > len(head) else (head,):
        try:
            dims = image_dims(base64.b64decode(chunk[: len(chunk) // 4 * 4]))
        except (ValueError, TypeError):
            return None
        if dims and dims[0] > 0 and dims[1] > 0:
            return dims
    return None


def openai_image_tokens(dims: tuple[int, int] | None, detail: Any = None) -> int:
    """GPT-4o vision cost: 85 for low detail, else 85 + 170 per 512px tile (see module doc)."""
    if detail == "low":
        return LOW_DETAIL_IMAGE
    w, h = dims or (1024, 1024)
    if max(w, h) > 2048:
        s = 2048 / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > 768:
        s = 768 / min(w, h)
        w, h = w * s, h * s
    return LOW_DETAIL_IMAGE + IMAGE_TILE * math.ceil(w / 512) * math.ceil(h / 512)


def anthropic_image_tokens(dims: tuple[int, int] | None) -> int:
    """Claude vision cost: w*h/750 after fitting the long edge to 1568, at most 1600."""
    if not dims:
        return ANTHROPIC_IMAGE_MAX
    w, h = dims
    if max(w, h) > 1568:
        s = 1568 / max(w, h)
        w, h = w * s, h * s
    return max(1, min(ANTHROPIC_IMAGE_MAX, math.ceil(w * h / 750)))
