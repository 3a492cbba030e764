"""Joint English+German subword tokenizer (Hugging Face `tokenizers` BPE).

Words start with the marker "▁" (U+2581, as in SentencePiece), so tokens on heatmap axes show
where words begin: "▁Die", "▁Katze", "▁schläft", "." Punctuation is split off as its own token.
Decoding is exact up to the normalisation (NFKC, whitespace collapsed).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Iterator
from pathlib import Path

from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as HFTokenizer

WORD_START = "\u2581"
PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK]  # ids 0..3, matching ModelConfig's defaults


class TokenizationError(ValueError):
    """Text that cannot be tokenized for the model; the message says what was wrong."""


class EmptyTextError(TokenizationError):
    """Empty or whitespace-only text."""


class TextTooLongError(TokenizationError):
    """Text longer than the configured token limit."""


class InvalidTextError(TokenizationError):
    """A string that is not valid Unicode text (a lone surrogate, e.g. from undecodable bytes)."""


class UnknownCharactersError(TokenizationError):
    """Text containing characters the vocabulary has never seen (they would all become <unk>)."""

    def __init__(self, chars: list[str]) -> None:
        self.chars = chars
        shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in chars[:10])
        super().__init__(f"text contains characters the model's vocabulary does not know: {shown}")


def _build_empty() -> HFTokenizer:
    tok = HFTokenizer(models.BPE(unk_token=UNK))
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFKC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
    )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement=WORD_START, prepend_scheme="always"),
            pre_tokenizers.Punctuation(behavior="isolated"),
        ]
    )
    tok.decoder = decoders.Metaspace(replacement=WORD_START, prepend_scheme="always")
    return tok


def normalize(text: str) -> str:
    """The normalisation that decoding inverts up to: NFKC and collapsed whitespace."""
    return " ".join(unicodedata.normalize("NFKC", text).split())


class Tokenizer:
    """Thin wrapper that fixes the special-token ids and reports bad input clearly."""

    def __init__(self, hf: HFTokenizer) -> None:
        self.hf = hf
        for i, t in enumerate(SPECIAL_TOKENS):
            if hf.token_to_id(t) != i:
                raise TokenizationError(
                    f"tokenizer must map {t} to id {i}, got {hf.token_to_id(t)}"
                )
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = range(4)

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int = 8000,
        min_frequency: int = 2,
        limit_alphabet: int = 300,
    ) -> Tokenizer:
        """Learn a joint BPE vocabulary from an iterator of sentences (both languages)."""
        tok = _build_empty()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=SPECIAL_TOKENS,
            limit_alphabet=limit_alphabet,  # rare characters become <unk>, not vocabulary slots
            show_progress=False,
        )
        tok.train_from_iterator(_batches(texts), trainer=trainer)
        return cls(tok)

    @classmethod
    def from_file(cls, path: str | Path) -> Tokenizer:
        return cls(HFTokenizer.from_file(str(path)))

    @classmethod
    def from_str(cls, text: str) -> Tokenizer:
        return cls(HFTokenizer.from_str(text))

    def save(self, path: str | Path) -> None:
        self.hf.save(str(path))

    def to_str(self) -> str:
        return self.hf.to_str()

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size()

    # -- use ----------------------------------------------------------------------------------
    def encode(
        self,
        text: str,
        max_tokens: int | None = None,
        add_eos: bool = True,
        allow_unknown: bool = False,
    ) -> list[int]:
        """Text -> ids (with </s> appended when add_eos). Raises a TokenizationError subclass."""
        if not text or not text.strip():
            raise EmptyTextError("text is empty or only whitespace")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise InvalidTextError(
                f"text is not valid Unicode: lone surrogate U+{ord(text[e.start]):04X} at "
                f"position {e.start}"
            ) from None
        enc = self.hf.encode(text)
        if not allow_unknown and self.unk_id in enc.ids:
            raise UnknownCharactersError(self.unknown_characters(text) or ["?"])
        ids = list(enc.ids) + ([self.eos_id] if add_eos else [])
        if max_tokens is not None and len(ids) > max_tokens:
            raise TextTooLongError(
                f"text has {len(ids)} tokens, more than the limit of {max_tokens}; shorten it"
            )
        return ids

    def unknown_characters(self, text: str) -> list[str]:
        """The characters of `text`, as the model normalises it (NFKC: "I" + U+0301 becomes
        "Í"), that are not in the vocabulary's alphabet and so would become <unk>."""
        vocab = self.hf.get_vocab()
        chars: list[str] = []
        for ch in normalize(text):
            if ch.isspace() or ch in chars or ch in vocab or WORD_START + ch in vocab:
                continue
            chars.append(ch)
        return chars

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text; special tokens are dropped."""
        return self.hf.decode([i for i in ids if i >= len(SPECIAL_TOKENS)])

    def tokens(self, ids: Iterable[int]) -> list[str]:
        """Ids -> display strings for axis labels (special tokens kept, e.g. "</s>")."""
        return [self.hf.id_to_token(i) or UNK for i in ids]


def _batches(texts: Iterable[str], size: int = 1000) -> Iterator[list[str]]:
    batch: list[str] = []
    for t in texts:
        batch.append(t)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
