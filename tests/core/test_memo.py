"""Memo caches keyed by digest and capped by bytes (issue 20, medium 2)."""

from __future__ import annotations

from optiflow.core.memo import DigestCache, approx_size, digest


def test_keys_are_digests_and_bytes_are_capped() -> None:
    cache: DigestCache[str] = DigestCache(max_bytes=10_000, max_entries=100)
    big = "x" * 4000
    for i in range(10):
        text = big + str(i)
        assert cache.get(digest(text), lambda text=text: text[:3000]) == "x" * 3000
    assert cache.size_bytes <= 10_000 and len(cache) <= 3
    assert all(isinstance(k, bytes) and len(k) == 16 for k in cache._data)
    assert cache.get(digest("huge"), lambda: "y" * 20_000) == "y" * 20_000  # not kept
    assert len(cache) <= 3


def test_digest_separates_parts_and_size_counts_strings() -> None:
    assert digest("ab", "c") != digest("a", "bc")
    assert approx_size(("a" * 1000, {"k": ["b" * 500]})) > 1500


def test_the_simulated_parsers_and_token_counts_keep_no_prompt() -> None:
    from optiflow.llm import simulated, tokens

    simulated.clear_caches()
    prompt = "When a customer asks about a refund, reply with code RFD-201. " + "filler " * 200_000
    assert simulated.parse_rules(prompt)[0].label == "RFD-201"
    simulated.parse_policy(prompt)
    tokens.count_tokens("hello " * 1000)
    for cache in (simulated._RULES, simulated._POLICIES, tokens._COUNTS):
        assert cache.size_bytes < 100_000
        assert all(isinstance(k, bytes) for k in cache._data)
