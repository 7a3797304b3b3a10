"""Token counting: tiktoken only, offline, never importing litellm."""

from __future__ import annotations

import os
import subprocess
import sys

from optiflow.llm.tokens import count_tokens, encoding_name, litellm_tokenizers_dir


def test_counts_like_tiktoken() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    assert count_tokens("hello world", "gpt-4o") == 2
    long = "The quick brown fox jumps over the lazy dog. " * 50
    assert 400 < count_tokens(long) < 600


def test_special_tokens_are_plain_text() -> None:
    assert count_tokens("<|endoftext|> hi") > 2


def test_model_to_encoding() -> None:
    for model in ("gpt-4o", "openai/gpt-4o-mini", "o1-preview", "o3-mini", "gpt-4.1-nano", "azure/gpt-5"):
        assert encoding_name(model) == "o200k_base", model
    for model in (None, "", "gpt-4", "gpt-3.5-turbo", "optiflow/sim", "ollama/llama3", "claude-3-haiku"):
        assert encoding_name(model) == "cl100k_base", model
    assert encoding_name("text-davinci-003") == "p50k_base"


def test_bundled_encodings_are_found() -> None:
    folder = litellm_tokenizers_dir()
    assert folder is not None and folder.is_dir()


def test_offline_without_litellm_and_sets_cache_dir_only_if_unset() -> None:
    code = (
        "import os, sys\n"
        "from optiflow.llm.tokens import count_tokens, litellm_tokenizers_dir\n"
        "assert count_tokens('hello world', 'gpt-4o') == 2 and count_tokens('hello world') == 2\n"
        "assert 'litellm' not in sys.modules, 'tokens.py imported litellm'\n"
        "print(os.environ['TIKTOKEN_CACHE_DIR'] == str(litellm_tokenizers_dir()))\n"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("TIKTOKEN_CACHE_DIR", "CUSTOM_TIKTOKEN_CACHE_DIR")
    }
    env["HTTPS_PROXY"] = env["HTTP_PROXY"] = "http://127.0.0.1:9"  # any download attempt would fail
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
    env["TIKTOKEN_CACHE_DIR"] = str(litellm_tokenizers_dir())
    code2 = code.replace(
        "print(os.environ['TIKTOKEN_CACHE_DIR'] == str(litellm_tokenizers_dir()))", "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code2], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_a_user_cache_dir_is_kept() -> None:
    code = (
        "import os\n"
        "from optiflow.llm.tokens import ensure_tiktoken_cache\n"
        "ensure_tiktoken_cache()\n"
        "print(os.environ['TIKTOKEN_CACHE_DIR'])\n"
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": "/somewhere/else"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "/somewhere/else"
