"""The one place litellm is imported, lazily and configured for offline, quiet use.

:func:`get_litellm` (thread-safe, once per process):

- sets ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (unless set) before the import, so importing
  litellm never tries the network for its price map;
- sets ``CUSTOM_TIKTOKEN_CACHE_DIR`` (unless set) to the tiktoken folder in use, so litellm's
  import does not redirect ``TIKTOKEN_CACHE_DIR`` elsewhere;
- sets ``litellm.disable_hf_tokenizer_download = True`` (llama-family names would otherwise
  stall ~23 s offline trying to fetch a Hugging Face tokenizer);
- quiets litellm's logging (unless ``LITELLM_LOG`` asks for it) and its debug banners;
- registers the simulated provider (``optiflow/sim``, see :mod:`optiflow.llm.simulated`) in
  ``litellm.custom_provider_map`` and its per-token price with ``litellm.register_model``;
- makes one simulated call, so the modules litellm imports lazily on its first completion
  (~0.5-1 s) are loaded here and not inside the first measured (and possibly concurrent) call.

litellm is returned as ``Any``: the rest of optiflow never imports it statically.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
from typing import Any

from optiflow.llm.tokens import ensure_tiktoken_cache, litellm_tokenizers_dir

SIM_PROVIDER = "optiflow"
SIM_MODEL = "optiflow/sim"

_lock = threading.Lock()
_litellm: Any = None


def prepare_environment() -> None:
    """Environment litellm reads at import time. Safe to call more than once."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    ensure_tiktoken_cache()
    if not os.environ.get("CUSTOM_TIKTOKEN_CACHE_DIR"):
        folder = os.environ.get("TIKTOKEN_CACHE_DIR") or str(litellm_tokenizers_dir() or "")
        if folder:
            os.environ["CUSTOM_TIKTOKEN_CACHE_DIR"] = folder


def get_litellm() -> Any:
    """The configured ``litellm`` module (imported on first use)."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with _lock:
        if _litellm is None:
            prepare_environment()
            module: Any = importlib.import_module("litellm")
            _configure(module)
            _litellm = module
    return _litellm


def preload(**_: Any) -> None:
    """Import and configure litellm now (seconds here) rather than in the first model call:
    a ``worker_init`` signal receiver and the embedded client's background thread."""
    get_litellm()


def _configure(litellm: Any) -> None:
    litellm.disable_hf_tokenizer_download = True
    litellm.suppress_debug_info = True
    litellm.set_verbose = False
    if not os.environ.get("LITELLM_LOG"):
        for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm"):
            logging.getLogger(name).setLevel(logging.ERROR)
    _register_simulated(litellm)
    _warm_up(litellm)


def _warm_up(litellm: Any) -> None:
    try:
        litellm.completion(
            model=SIM_MODEL, messages=[{"role": "user", "content": "warm-up"}], timeout=30, num_retries=0
        )
    except Exception:  # only an optimization
        logging.getLogger(__name__).debug("litellm warm-up call failed", exc_info=True)


def _register_simulated(litellm: Any) -> None:
    from optiflow.llm.simhandler import make_handler
    from optiflow.llm.simulated import PRICE_INPUT_PER_TOKEN, PRICE_OUTPUT_PER_TOKEN

    providers = list(litellm.custom_provider_map or [])
    if not any(p.get("provider") == SIM_PROVIDER for p in providers):
        providers.append({"provider": SIM_PROVIDER, "custom_handler": make_handler(litellm)})
        litellm.custom_provider_map = providers
    setup = getattr(getattr(litellm, "utils", None), "custom_llm_setup", None)
    if callable(setup):
        setup()
    try:
        litellm.register_model(
            {
                SIM_MODEL: {
                    "input_cost_per_token": PRICE_INPUT_PER_TOKEN,
                    "output_cost_per_token": PRICE_OUTPUT_PER_TOKEN,
                    "cache_creation_input_token_cost": 0.0,
                    "cache_read_input_token_cost": 0.0,
                    "litellm_provider": SIM_PROVIDER,
                    "mode": "chat",
                    "max_tokens": 8192,
                    "max_input_tokens": 128000,
                    "max_output_tokens": 8192,
                }
            }
        )
    except Exception:  # pricing is a nicety; the simulated model works without it
        logging.getLogger(__name__).debug("could not register the simulated model's price", exc_info=True)


__all__ = ["SIM_MODEL", "SIM_PROVIDER", "get_litellm", "prepare_environment"]
