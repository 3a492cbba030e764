"""The joint BPE tokenizer: exact round trips, word-start markers, special ids, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from model.tokenizer import (
    SPECIAL_TOKENS,
    WORD_START,
    EmptyTextError,
    InvalidTextError,
    TextTooLongError,
    TokenizationError,
    Tokenizer,
    UnknownCharactersError,
    normalize,
)

CORPUS = [
    "The cat is sleeping on the sofa.",
    "Die Katze schläft auf dem Sofa.",
    "Hello, world! How are you today?",
    "Hallo, Welt! Wie geht es dir heute?",
    "Über Äpfel, Öl und Süßes: schön!",
    "It's 10 o'clock; we're late (again).",
    "Es ist 10 Uhr; wir sind spät dran (schon wieder).",
    'Mr. Smith said "no" - and left...',
    "Wo ist der Bahnhof? Where is the station?",
    "Größe, Maß und Fuß sind schwer zu übersetzen.",
    # Every character the test sentences use, so that only the emoji test hits <unk>.
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789 +-=:;.,!?()'\"",
]

SENTENCES = [
    "The cat is sleeping on the sofa.",
    "Die Katze schläft  auf dem   Sofa!",
    "Über Öl, Äpfel und Süßes?",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\nare spaces",
    'Hello , world ... (ok) "quoted" it\'s;fine:yes',
    "Maß Fuß Größe ÄÖÜ äöü ß",
    "12 + 30 = 42 - 0",
]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.train(CORPUS * 3, vocab_size=150, min_frequency=1)


@pytest.mark.parametrize("text", SENTENCES)
def test_decoding_the_encoding_gives_back_the_normalized_text(tok: Tokenizer, text: str) -> None:
    ids = tok.encode(text)
    assert ids[-1] == tok.eos_id
    assert tok.decode(ids) == normalize(text)


def test_normalization_collapses_whitespace_and_applies_nfkc() -> None:
    assert normalize("  a \t b\n\nc  ") == "a b c"
    assert normalize("ﬁne") == "fine"  # NFKC folds the ligature


@pytest.mark.parametrize("text", SENTENCES)
def test_word_initial_tokens_carry_the_word_start_marker(tok: Tokenizer, text: str) -> None:
    pieces = tok.tokens(tok.encode(text, add_eos=False))
    words = normalize(text).split(" ")
    # The pieces spell the text with each space (and the start) written as the marker...
    assert "".join(pieces) == WORD_START + normalize(text).replace(" ", WORD_START)
    # ...and exactly one piece per word starts with it; no marker inside a piece.
    assert sum(p.startswith(WORD_START) for p in pieces) == len(words)
    assert all(WORD_START not in p[1:] for p in pieces)


def test_punctuation_is_split_off_as_its_own_token(tok: Tokenizer) -> None:
    pieces = tok.tokens(tok.encode("Hallo, Welt!", add_eos=False))
    assert "," in pieces
    assert "!" in pieces


def test_special_tokens_have_ids_zero_to_three(tok: Tokenizer) -> None:
    assert SPECIAL_TOKENS == ["<pad>", "<s>", "</s>", "<unk>"]
    assert [tok.hf.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    assert tok.tokens([0, 1, 2, 3]) == SPECIAL_TOKENS


def test_decoding_drops_special_tokens(tok: Tokenizer) -> None:
    ids = tok.encode("Die Katze.")
    assert tok.decode([1, *ids, 0, 0]) == "Die Katze."


def test_encoding_without_eos_has_no_eos(tok: Tokenizer) -> None:
    ids = tok.encode("Die Katze.", add_eos=False)
    assert tok.eos_id not in ids
    assert [*ids, tok.eos_id] == tok.encode("Die Katze.")


@pytest.mark.parametrize("text", ["", "   \n", "\t \r\n "])
def test_empty_or_blank_text_is_an_empty_text_error(tok: Tokenizer, text: str) -> None:
    with pytest.raises(EmptyTextError, match="empty"):
        tok.encode(text)


def test_text_over_the_token_limit_is_a_text_too_long_error(tok: Tokenizer) -> None:
    text = "The cat is sleeping on the sofa."
    n = len(tok.encode(text))
    assert tok.encode(text, max_tokens=n)  # exactly at the limit is fine
    with pytest.raises(TextTooLongError, match=f"{n} tokens, more than the limit of {n - 1}"):
        tok.encode(text, max_tokens=n - 1)


def test_unknown_characters_are_listed_in_the_error(tok: Tokenizer) -> None:
    with pytest.raises(UnknownCharactersError) as info:
        tok.encode("The cat 😺 is on the sofa ☃.")
    assert info.value.chars == ["😺", "☃"]
    assert "U+1F63A" in str(info.value)
    assert "'😺'" in str(info.value)
    assert isinstance(info.value, TokenizationError)
    assert isinstance(info.value, ValueError)
    # Allowed on request: they become <unk>.
    ids = tok.encode("The cat 😺", allow_unknown=True)
    assert tok.unk_id in ids


def test_a_combining_mark_names_the_character_it_forms_not_its_base(tok: Tokenizer) -> None:
    # NFKC turns "I" + U+0301 into "Í", which the vocabulary lacks; "I" itself is known.
    with pytest.raises(UnknownCharactersError) as info:
        tok.encode("I\u0301 like the cat.")
    assert info.value.chars == ["Í"]


def test_a_lone_surrogate_is_an_invalid_text_error_not_a_crash(tok: Tokenizer) -> None:
    # Python decodes bytes that are not UTF-8 (e.g. in argv) to lone surrogates.
    with pytest.raises(InvalidTextError, match="U\\+DCE9 at position 3"):
        tok.encode("caf\udce9 au lait")
    assert issubclass(InvalidTextError, TokenizationError)


def test_saved_tokenizer_loads_back_identical(tok: Tokenizer, tmp_path: Path) -> None:
    tok.save(tmp_path / "tokenizer.json")
    again = Tokenizer.from_file(tmp_path / "tokenizer.json")
    assert again.to_str() == tok.to_str()
    assert Tokenizer.from_str(tok.to_str()).encode(SENTENCES[1]) == tok.encode(SENTENCES[1])


def test_a_tokenizer_with_misplaced_special_tokens_is_refused(tok: Tokenizer) -> None:
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import models

    hf = HFTokenizer(models.WordLevel({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}, "<unk>"))
    with pytest.raises(TokenizationError, match="<pad> to id 0"):
        Tokenizer(hf)


def test_vocabulary_size_is_at_most_the_requested_size(tok: Tokenizer) -> None:
    assert len(SPECIAL_TOKENS) < tok.vocab_size <= 150
