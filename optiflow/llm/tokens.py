"""Token counting with tiktoken, offline.

litellm ships the cl100k_base, o200k_base and p50k_base encodings in
``litellm/litellm_core_utils/tokenizers``. This module points ``TIKTOKEN_CACHE_DIR`` there (only
when it is unset) without importing litellm: the folder is found with
``importlib.util.find_spec``. Model names map to encodings (``gpt-4o``, ``o1``, ``o3``, ``o4``,
``gpt-4.1``, ``gpt-5`` -> o200k_base; everything else, including ``optiflow/sim`` and
llama-family names, -> cl100k_base). Encoders and recent counts are cached.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from optiflow.core.memo import DigestCache, digest

if TYPE_CHECKING:
    import tiktoken

log = logging.getLogger(__name__)

DEFAULT_ENCODING = "cl100k_base"
_O200K_PREFIXES = ("gpt-4o", "chatgpt-4o", "o1", "o3", "o4", "gpt-4.1", "gpt-5")
_P50K_PREFIXES = ("text-davinci-002", "text-davinci-003", "code-davinci")
_lock = threading.Lock()


def litellm_tokenizers_dir() -> Path | None:
    """litellm's bundled tiktoken folder, located without importing litellm."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "litellm_core_utils" / "tokenizers"
        if folder.is_dir():
            return folder
    return None


def ensure_tiktoken_cache() -> None:
    """Point ``TIKTOKEN_CACHE_DIR`` at litellm's bundled encodings unless it is already set."""
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return
    folder = litellm_tokenizers_dir()
    if folder is not None:
        os.environ["TIKTOKEN_CACHE_DIR"] = str(folder)


def encoding_name(model: str | None) -> str:
    """The tiktoken encoding for a model name (provider prefix ignored)."""
    if not model:
        return DEFAULT_ENCODING
    name = model.rsplit("/", 1)[-1].lower()
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if name.startswith(_P50K_PREFIXES):
        return "p50k_base"
    return DEFAULT_ENCODING


@lru_cache(maxsize=8)
def _encoder(name: str) -> tiktoken.Encoding | None:
    import tiktoken

    ensure_tiktoken_cache()
    with _lock:
        try:
            return tiktoken.get_encoding(name)
        except Exception as exc:  # offline and not bundled, or a corrupt cache
            bundled = litellm_tokenizers_dir()
            if bundled is not None and os.environ.get("TIKTOKEN_CACHE_DIR") != str(bundled):
                previous = os.environ.get("TIKTOKEN_CACHE_DIR")
                os.environ["TIKTOKEN_CACHE_DIR"] = str(bundled)
                try:
                    return tiktoken.get_encoding(name)
                except Exception:
                    pass
                finally:
                    if previous is not None:
                        os.environ["TIKTOKEN_CACHE_DIR"] = previous
            log.warning("tiktoken encoding %s unavailable (%s); estimating 4 characters per token", name, exc)
            return None


def _count(text: str, name: str) -> int:
    enc = _encoder(name)
    if enc is None:
        return (len(text) + 3) // 4
    return len(enc.encode(text, disallowed_special=()))


_COUNTS: DigestCache[int] = DigestCache(max_bytes=4096 * 128, max_entries=4096)
"""Counts by a digest of (encoding, text): the texts themselves are not kept (issue 20)."""


def count_tokens(text: str, model: str | None = None) -> int:
    """Number of tokens of ``text`` for ``model`` (default encoding cl100k_base)."""
    if not text:
        return 0
    name = encoding_name(model)
    return _COUNTS.get(digest(name, text), lambda: _count(text, name), size=lambda _: 128)


__all__ = [
    "DEFAULT_ENCODING",
    "count_tokens",
    "encoding_name",
    "ensure_tiktoken_cache",
    "litellm_tokenizers_dir",
]
