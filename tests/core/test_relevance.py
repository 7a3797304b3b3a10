"""Which samples a set of edits is probed on first (``core.relevance``)."""

from __future__ import annotations

from optiflow.core.dataset import Sample
from optiflow.core.relevance import (
    Relevance,
    probe_size,
    removed_sentences,
    sample_text,
    sentences,
    words,
)

BEFORE = """Greet the customer warmly. When asked about a lost parcel, open a
carrier claim and give the tracking number. When asked about a refund, explain it takes five
days. Thank the customer."""

SAMPLES = (
    Sample(id="greet", input={"question": "Hello, thank you"}),
    Sample(id="parcel-1", input={"question": "My parcel is lost, where is the tracking?"}),
    Sample(id="refund-1", input={"question": "When do I get my refund?"}),
    Sample(id="parcel-2", input={"question": "The carrier lost my parcel"}),
    Sample(id="other", input={"question": "Do you sell gift cards?"}),
)


def test_words_are_content_words_without_plural_s() -> None:
    assert words("The parcels, a PARCEL and the class: 42 items!") == {"parcel", "class", "42", "item"}


def test_sentences_join_wrapped_lines_and_removed_ones_are_those_an_edit_drops() -> None:
    assert "When asked about a lost parcel, open a carrier claim and give the tracking number." in sentences(
        BEFORE
    )
    after = "Greet the customer warmly.\nWhen asked about a refund, explain it takes five days."
    assert removed_sentences([(BEFORE, after)]) == {
        "When asked about a lost parcel, open a carrier claim and give the tracking number.",
        "Thank the customer.",
    }


def test_sample_text_reads_every_string_of_an_input() -> None:
    assert (
        sample_text({"q": "lost parcel", "meta": {"tags": ["urgent", 3]}, "flag": True})
        == "lost parcel urgent 3"
    )
    assert sample_text("plain") == "plain" and sample_text(None) == ""


def test_the_probe_is_the_samples_the_removed_sentences_concern_most() -> None:
    rel = Relevance(SAMPLES)
    removed = removed_sentences(
        [(BEFORE, "Greet the customer warmly. When asked about a refund, explain it takes five days.")]
    )
    ids = [s.id for s in SAMPLES]
    probe = rel.probe(removed, ids, 3)
    assert probe[:2] == ("parcel-1", "parcel-2")  # lost + parcel + tracking, then lost + parcel + carrier
    assert "other" not in probe and "refund-1" not in rel.probe(removed, ids, 5)


def test_words_every_input_shares_weigh_nothing() -> None:
    samples = tuple(Sample(id=f"s{i}", input=f"order question {i}") for i in range(4))
    rel = Relevance(samples)
    assert rel.probe({"Answer every order question politely."}, [s.id for s in samples], 4) == ()


def test_no_removed_text_or_no_size_means_no_probe() -> None:
    rel = Relevance(SAMPLES)
    ids = [s.id for s in SAMPLES]
    assert rel.probe(set(), ids, 3) == ()
    assert rel.probe({"A lost parcel."}, ids, 0) == ()
    assert rel.probe({"A lost parcel."}, ["refund-1", "parcel-2"], 3) == ("parcel-2",)  # only those asked


def test_probe_size_grows_with_the_square_root_of_the_watched_samples() -> None:
    assert [probe_size(n) for n in (0, 1, 4, 39, 100, 10_000)] == [0, 1, 2, 7, 10, 100]
