"""Build the parallel English-German training corpus.

Two openly licensed sources are read, cleaned, deduplicated and split deterministically:

* **Tatoeba** English-German sentence pairs (CC-BY 2.0 FR; attribution tatoeba.org and
  www.manythings.org/anki), one ``english<TAB>german`` pair per line.
* The **Ding** German-English dictionary (Debian package ``trans-de-en``, GPL-2+), one entry per
  line in the form ``german :: english``. Each side splits on ``" | "`` into aligned sub-entries;
  within a sub-entry ``;`` separates alternatives. Entries carry annotations such as ``{m}``,
  ``[Br.]``, ``/Abk./``, ``<Nebenform>`` and ``(sth.)`` that are cleaned off here.

Evaluation files (for example ``tatoeba_dev_en_de.tsv``) are never trained on: any pair with a side
that also occurs in an evaluation file, or in the valid/test splits built here, is removed from the
training files. Everything is stdlib-only so the data recipe runs without torch or the web stack.

Output files (``english<TAB>german``, no header) written by :func:`build_corpus`:
``test_ding.tsv``, ``test_tatoeba.tsv``, ``valid.tsv``, ``train_sentences.tsv``,
``train_phrases.tsv`` and ``counts.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from tqdm import tqdm

logger = logging.getLogger(__name__)

TATOEBA_HELP = (
    "download deu-eng.zip from https://www.manythings.org/anki/ (or build the pairs from "
    "https://tatoeba.org), unzip it and pass --tatoeba PATH/deu.txt"
)
DING_HELP = "install the Debian package with `apt-get install trans-de-en` (or pass --ding PATH)"

#: Split file names, in the order they are written and reported.
SPLIT_FILES: dict[str, str] = {
    "test_ding": "test_ding.tsv",
    "test_tatoeba": "test_tatoeba.tsv",
    "valid": "valid.tsv",
    "train_sentences": "train_sentences.tsv",
    "train_phrases": "train_phrases.tsv",
}
COUNTS_FILE = "counts.json"

#: Reasons a Ding pair can be dropped; every one always appears in ``counts["dropped"]``.
DROP_REASONS: tuple[str, ...] = (
    "malformed_line",
    "misaligned_subentries",
    "empty",
    "markup",
    "not_text",
    "fragment",
    "length_ratio",
)


class Pair(NamedTuple):
    """One English-German translation pair."""

    en: str
    de: str


@dataclass
class CorpusPaths:
    """Default locations of the corpus sources, relative to the repository root."""

    tatoeba: Path = Path("../shared/data/tatoeba_train_en_de.tsv")
    ding: Path = Path("/usr/share/trans/de-en")
    eval_files: list[Path] = field(
        default_factory=lambda: [Path("../shared/data/tatoeba_dev_en_de.tsv")]
    )


# --------------------------------------------------------------------------------------------
# Normalisation
# --------------------------------------------------------------------------------------------

_WHITESPACE = re.compile(r"\s+")


def normalize_text(text: str) -> str:
    """Return ``text`` in Unicode NFKC with whitespace runs collapsed to one space and stripped.

    NFKC folds compatibility characters (non-breaking spaces, full-width forms, the ``…``
    ellipsis) so the same sentence typed two ways dedupes to one.
    """
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip()


def _overlap_key(text: str) -> str:
    """Key used to detect evaluation/held-out overlap: normalised and casefolded.

    Trailing punctuation is kept on purpose: "Tom left." and "Tom left!" are different
    sentences in Tatoeba, and the contract is exact-match leakage, not near-duplicates.
    """
    return normalize_text(text).casefold()


# --------------------------------------------------------------------------------------------
# TSV input/output
# --------------------------------------------------------------------------------------------


def _iter_lines(path: Path, desc: str, progress: bool) -> Iterator[str]:
    """Yield the lines of a UTF-8 text file, optionally behind a tqdm progress bar."""
    with path.open(encoding="utf-8", errors="replace", newline="\n") as handle:
        yield from tqdm(handle, desc=desc, unit=" lines", disable=not progress, leave=False)


def _read_tatoeba(path: Path, stats: Counter[str], progress: bool = False) -> list[Pair]:
    """Read Tatoeba pairs, updating ``stats`` with raw and dropped line counts."""
    pairs: list[Pair] = []
    for line in _iter_lines(path, f"reading {path.name}", progress):
        stats["raw_lines"] += 1
        # The manythings.org export has a third attribution column: only the first two count.
        fields = line.rstrip("\r\n").split("\t")
        if len(fields) < 2:
            stats["dropped_malformed_line"] += 1
            continue
        stats["raw_pairs"] += 1
        en, de = normalize_text(fields[0]), normalize_text(fields[1])
        if not en or not de:
            stats["dropped_empty"] += 1
            continue
        pairs.append(Pair(en, de))
    return pairs


def read_tatoeba(path: Path, *, progress: bool = False) -> list[Pair]:
    """Read Tatoeba ``english<TAB>german`` lines (extra columns ignored) into normalised pairs.

    Lines without a tab or with an empty side are skipped.
    """
    return _read_tatoeba(Path(path), Counter(), progress=progress)


def read_tsv(path: Path) -> list[Pair]:
    """Read an ``english<TAB>german`` file (as written by :func:`write_tsv`) into pairs.

    Unlike :func:`read_tatoeba` the text is returned exactly as stored; malformed lines are skipped.
    """
    pairs: list[Pair] = []
    with Path(path).open(encoding="utf-8", newline="\n") as handle:
        for line in handle:
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) >= 2:
                pairs.append(Pair(fields[0], fields[1]))
    return pairs


def write_tsv(path: Path, pairs: Iterable[Pair]) -> None:
    """Write pairs as ``english<TAB>german`` lines (UTF-8, ``\\n`` line ends, no header).

    Tabs and newlines inside a side would corrupt the format, so they are turned into spaces.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        for en, de in pairs:
            en = _WHITESPACE.sub(" ", en)
            de = _WHITESPACE.sub(" ", de)
            handle.write(f"{en}\t{de}\n")


# --------------------------------------------------------------------------------------------
# Ding dictionary cleaning
# --------------------------------------------------------------------------------------------

# Innermost bracketed annotations; applied repeatedly so nested ones like "(a (b))" go too.
_BRACES = re.compile(r"\{[^{}]*\}")
_SQUARE = re.compile(r"\[[^\[\]]*\]")
_ANGLE = re.compile(r"<[^<>]*>")
_PARENS = re.compile(r"\([^()]*\)")
# Abbreviation markers such as "/Abk./" or "/PM/": a slash-delimited token standing on its own
# (space or start before, space/end/punctuation after), so "er/sie" or "and/or" are not touched.
_SLASH_MARKER = re.compile(r"(?:(?<=\s)|^)/[^/\s](?:[^/]*[^/\s])?/(?=$|[\s,;.:!?])")
# Ding writes apostrophes as U+2019 ("don’t", "sb.’s"); Tatoeba and the evaluation set use "'".
_CURLY_APOSTROPHE = re.compile(r"(?<=[\w.])\u2019(?=\w)")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?…])")
_EDGE_JUNK = " ,;:-–"
_MARKUP_CHARS = re.compile(r"[{}\[\]<>/|]|::")
# Placeholders that make a "sentence" a template rather than a real sentence.
_PLACEHOLDER = re.compile(r"(?<!\w)(?:etw|jd[nmsr]?|sth|sb)\.|(?<!\w)(?:sb|sth)'s(?!\w)")
# A lone word piece such as "Schwimm..." or "...los": Ding's combining forms, not translations.
_WORD_FRAGMENT = re.compile(r"^(?:\S+\.\.\.|\.\.\.\S+)$")
_SENTENCE_START = re.compile(r"""^[0-9"'„“”‚‘’»«¿¡]|^[^\W\d_]""")
_SENTENCE_END = re.compile(r"""[.!?…]["'“”‘’»«)]*$""")


def _split_outside_brackets(text: str, sep: str) -> list[str]:
    """Split ``text`` on the one-character ``sep`` wherever it is not inside any bracket pair.

    Ding puts ``;`` inside annotations ("{prp; +Dat.}", "(in Flüssigkeiten; Gasen)") which must
    not be read as alternative separators.
    """
    pieces = text.split(sep)
    if len(pieces) == 1:
        return pieces
    # Glue pieces back together while a bracket opened in an earlier piece is still open;
    # str.count keeps this in C, which matters for ~800k sub-entries.
    parts: list[str] = []
    depth = 0
    for piece in pieces:
        if depth > 0:
            parts[-1] = f"{parts[-1]}{sep}{piece}"
        else:
            parts.append(piece)
        depth += sum(piece.count(o) for o in "([{<") - sum(piece.count(c) for c in ")]}>")
        depth = max(depth, 0)
    return parts


def _remove_all(pattern: re.Pattern[str], text: str) -> str:
    """Delete every match of ``pattern``, repeating until nested occurrences are gone too."""
    count = 1
    while count:
        text, count = pattern.subn(" ", text)
    return text


def clean_ding_side(text: str) -> str:
    """Remove Ding annotations from one alternative and return the normalised text.

    Strips grammatical tags (``{m}``, ``{vt}``, ``{prp; +Dat.}``), labels (``[Br.]``, ``[ugs.]``),
    abbreviation markers (``/Abk./``), variant spellings (``<...>``) and parentheticals
    (``(sth.)``, ``(zoologische Ordnung)``), and writes Ding's curly apostrophes as ``'`` like
    Tatoeba does. In Ding, parentheses are always annotations or
    optional words, so dropping them keeps both sides consistent; words that merely are
    placeholders outside parentheses (``etw.``, ``sth.``) are part of the phrase and are kept.
    """
    # NFKC first so full-width or compatibility brackets are recognised by the patterns below.
    text = unicodedata.normalize("NFKC", text)
    for opener, pattern in (("{", _BRACES), ("[", _SQUARE), ("<", _ANGLE), ("(", _PARENS)):
        if opener in text:  # cheap test first: most entries carry only one or two kinds
            text = _remove_all(pattern, text)
    if "/" in text:
        text = _SLASH_MARKER.sub(" ", text)
    text = normalize_text(text)
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    if "\u2019" in text:
        text = _CURLY_APOSTROPHE.sub("'", text)
    # Removing "(sth.)" from "for (sth.), ..." can leave dangling separators at the edges.
    return text.strip(_EDGE_JUNK).strip()


def _is_text(text: str) -> bool:
    """True when ``text`` has letters and nearly all of them are Latin script."""
    if text.isascii():
        return any(c.isalpha() for c in text)
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return False
    latin = sum(1 for c in letters if c.isascii() or "LATIN" in unicodedata.name(c, ""))
    return latin >= 0.9 * len(letters)


def _drop_reason(pair: Pair) -> str | None:
    """Return why a cleaned Ding pair is unusable, or ``None`` when it is fine."""
    if not pair.en or not pair.de:
        return "empty"
    if _MARKUP_CHARS.search(pair.en) or _MARKUP_CHARS.search(pair.de):
        return "markup"
    if not _is_text(pair.en) or not _is_text(pair.de):
        return "not_text"
    if _WORD_FRAGMENT.match(pair.en) or _WORD_FRAGMENT.match(pair.de):
        return "fragment"
    short, long_ = sorted((len(pair.en), len(pair.de)))
    if short > 10 and long_ > 3 * short:
        return "length_ratio"
    # German compounds make one German word worth several English ones, so the word ratio
    # only rejects clearly broken alignments.
    words_short, words_long = sorted((len(pair.en.split()), len(pair.de.split())))
    if words_long >= 6 and words_long > 4 * words_short:
        return "length_ratio"
    return None


def _is_sentence_start(text: str) -> bool:
    """True when ``text`` starts like a sentence (capital, digit or quote) and has >= 3 words."""
    return (
        bool(_SENTENCE_START.match(text))
        and (not text[0].isalpha() or text[0].isupper())
        and len(text.split()) >= 3
    )


def _is_sentence_side(text: str) -> bool:
    """True when one side looks like a full sentence (capitalised, terminal punctuation, >=3 words).

    A trailing "..." marks an unfinished fragment ("The idea suggests itself that..."), not a
    full sentence.
    """
    return (
        _is_sentence_start(text)
        and bool(_SENTENCE_END.search(text))
        and not text.rstrip("\"'“”‘’»«)").endswith("..")
    )


def _repair_final_punctuation(pair: Pair) -> Pair:
    """Copy a missing final ``.``/``!``/``?`` from one side of a sentence pair to the other.

    Ding sometimes drops the full stop on one side only ("Her father banished her from his
    home" :: "Ihr Vater verstieß sie."); such pairs are full sentences with a typo.
    """
    en_ok, de_ok = _is_sentence_side(pair.en), _is_sentence_side(pair.de)
    if en_ok and not de_ok and _is_sentence_start(pair.de) and pair.de[-1].isalnum():
        return Pair(pair.en, pair.de + pair.en[-1])
    if de_ok and not en_ok and _is_sentence_start(pair.en) and pair.en[-1].isalnum():
        return Pair(pair.en + pair.de[-1], pair.de)
    return pair


def is_sentence(pair: Pair) -> bool:
    """Classify a cleaned pair as a full SENTENCE (else it is a PHRASE).

    Both sides must look like sentences. Entries with placeholders (``etw.``, ``jdm.``, ``sth.``,
    ``sb.``) are templates such as "Er hat etw. gesagt.", not real sentences, so they count as
    phrases.
    """
    if not (_is_sentence_side(pair.en) and _is_sentence_side(pair.de)):
        return False
    return not (_PLACEHOLDER.search(pair.en) or _PLACEHOLDER.search(pair.de))


def _parse_ding_line(line: str, stats: Counter[str]) -> tuple[list[Pair], list[Pair]]:
    """Parse one Ding line into (sentences, phrases), counting drops in ``stats``."""
    line = line.strip()
    if not line or line.startswith("#"):
        return [], []
    sides = line.split(" :: ")
    if len(sides) != 2:
        stats["dropped_malformed_line"] += 1
        return [], []
    de_subs = sides[0].split(" | ")
    en_subs = sides[1].split(" | ")
    if len(de_subs) != len(en_subs):
        # Without equal counts the k-th German sub-entry no longer translates the k-th English one.
        stats["dropped_misaligned_subentries"] += 1
        return [], []
    sentences: list[Pair] = []
    phrases: list[Pair] = []
    for de_sub, en_sub in zip(de_subs, en_subs, strict=True):
        de_alts = [a for a in _split_outside_brackets(de_sub, ";") if a.strip()]
        en_alts = [a for a in _split_outside_brackets(en_sub, ";") if a.strip()]
        if not de_alts or not en_alts:
            stats["raw_pairs"] += 1
            stats["dropped_empty"] += 1
            continue
        if len(de_alts) == len(en_alts):
            candidates = list(zip(en_alts, de_alts, strict=True))
        else:
            # Alternatives are synonyms, not aligned lists; with different counts only the first
            # of each side is a safe pair (the first is Ding's main translation).
            candidates = [(en_alts[0], de_alts[0])]
        for en_raw, de_raw in candidates:
            stats["raw_pairs"] += 1
            pair = _repair_final_punctuation(Pair(clean_ding_side(en_raw), clean_ding_side(de_raw)))
            reason = _drop_reason(pair)
            if reason is not None:
                stats[f"dropped_{reason}"] += 1
                continue
            (sentences if is_sentence(pair) else phrases).append(pair)
    return sentences, phrases


def parse_ding_line(line: str) -> tuple[list[Pair], list[Pair]]:
    """Parse one ``german :: english`` Ding line into cleaned ``(sentences, phrases)``.

    Comment lines (``#``) and lines whose sides have different numbers of ``" | "`` sub-entries
    give nothing. Within aligned sub-entries, ``;`` alternatives are paired index-wise when both
    sides have the same number, otherwise only the first alternative of each side is used.
    """
    return _parse_ding_line(line, Counter())


def _read_ding(
    path: Path, stats: Counter[str], progress: bool = False
) -> tuple[list[Pair], list[Pair]]:
    """Read a Ding file into (sentences, phrases), updating ``stats``."""
    sentences: list[Pair] = []
    phrases: list[Pair] = []
    for line in _iter_lines(path, f"reading {path.name}", progress):
        stats["raw_lines"] += 1
        if line.startswith("#") or not line.strip():
            stats["comment_lines"] += 1
            continue
        sents, phrs = _parse_ding_line(line, stats)
        sentences.extend(sents)
        phrases.extend(phrs)
    return sentences, phrases


def read_ding(path: Path, *, progress: bool = False) -> tuple[list[Pair], list[Pair]]:
    """Read the Ding dictionary file into cleaned ``(sentences, phrases)`` (not deduplicated)."""
    return _read_ding(Path(path), Counter(), progress=progress)


# --------------------------------------------------------------------------------------------
# Corpus building
# --------------------------------------------------------------------------------------------


# All pairs inside build_corpus are already normalised by the readers, so their overlap key is
# just the casefolded text; calling _overlap_key again would redo NFKC on ~1M strings.


def _pair_keys(pairs: Iterable[Pair]) -> set[str]:
    """Overlap keys of both sides of every (already normalised) pair."""
    keys: set[str] = set()
    for en, de in pairs:
        keys.add(en.casefold())
        keys.add(de.casefold())
    return keys


def _overlaps(pair: Pair, keys: set[str]) -> bool:
    """True when either side of the (already normalised) ``pair`` is in ``keys``."""
    return pair.en.casefold() in keys or pair.de.casefold() in keys


def _take(pool: list[Pair], n: int, what: str) -> list[Pair]:
    """Pop up to ``n`` pairs from the front of ``pool``, warning when there are fewer."""
    if n > len(pool):
        logger.warning("only %d pairs available for %s (wanted %d)", len(pool), what, n)
    taken = pool[:n]
    del pool[:n]
    return taken


def build_corpus(
    tatoeba: Path | None,
    ding: Path | None,
    eval_files: Sequence[Path],
    out_dir: Path,
    seed: int = 13,
    n_valid_tatoeba: int = 700,
    n_valid_ding: int = 300,
    n_test: int = 1000,
    *,
    progress: bool = False,
) -> dict[str, Any]:
    """Build the corpus splits from the sources and write them with ``counts.json`` to ``out_dir``.

    Steps: read and clean each source (a missing source is skipped with a warning), drop pairs
    with a side in an evaluation file, deduplicate on the normalised (en, de) pair (Tatoeba
    first), shuffle each pool with ``random.Random(seed)``, carve out ``n_test`` Ding sentences,
    ``n_test`` Tatoeba pairs, and a valid split of ``n_valid_tatoeba`` + ``n_valid_ding`` pairs,
    and finally remove from training every pair with a side that occurs in a valid/test split.

    The same inputs and seed always give byte-identical files. Returns the counts dict that is
    also written to ``counts.json``.
    """
    out_dir = Path(out_dir)
    rng = random.Random(seed)
    counts: dict[str, Any] = {"seed": seed}
    dropped: Counter[str] = Counter({reason: 0 for reason in DROP_REASONS})

    # --- read sources -----------------------------------------------------------------------
    tatoeba_pairs: list[Pair] = []
    tatoeba_stats: Counter[str] = Counter()
    tatoeba_present = tatoeba is not None and Path(tatoeba).is_file()
    if tatoeba_present:
        assert tatoeba is not None
        logger.info("reading Tatoeba pairs from %s", tatoeba)
        tatoeba_pairs = _read_tatoeba(Path(tatoeba), tatoeba_stats, progress=progress)
    else:
        logger.warning(
            "Tatoeba file %s not found; skipping it and its splits. To get it, %s",
            tatoeba,
            TATOEBA_HELP,
        )

    ding_sentences: list[Pair] = []
    ding_phrases: list[Pair] = []
    ding_stats: Counter[str] = Counter()
    ding_present = ding is not None and Path(ding).is_file()
    if ding_present:
        assert ding is not None
        logger.info("reading the Ding dictionary from %s", ding)
        ding_sentences, ding_phrases = _read_ding(Path(ding), ding_stats, progress=progress)
    else:
        logger.warning(
            "Ding dictionary %s not found; skipping it and its splits. To get it, %s",
            ding,
            DING_HELP,
        )

    for stats in (tatoeba_stats, ding_stats):
        for key, value in stats.items():
            if key.startswith("dropped_"):
                dropped[key.removeprefix("dropped_")] += value

    counts["sources"] = {
        "tatoeba": {
            "path": str(tatoeba) if tatoeba is not None else None,
            "present": tatoeba_present,
            "raw_lines": tatoeba_stats["raw_lines"],
            "raw_pairs": tatoeba_stats["raw_pairs"],
            "cleaned": len(tatoeba_pairs),
        },
        "ding": {
            "path": str(ding) if ding is not None else None,
            "present": ding_present,
            "raw_lines": ding_stats["raw_lines"],
            "comment_lines": ding_stats["comment_lines"],
            "raw_pairs": ding_stats["raw_pairs"],
            "cleaned": len(ding_sentences) + len(ding_phrases),
            "sentences": len(ding_sentences),
            "phrases": len(ding_phrases),
        },
    }

    # --- evaluation files -------------------------------------------------------------------
    eval_pairs: list[Pair] = []
    eval_info: list[dict[str, Any]] = []
    for eval_path in eval_files:
        eval_path = Path(eval_path)
        if eval_path.is_file():
            pairs = _read_tatoeba(eval_path, Counter())
            eval_pairs.extend(pairs)
            eval_info.append({"path": str(eval_path), "present": True, "pairs": len(pairs)})
        else:
            logger.warning("evaluation file %s not found; nothing excluded for it", eval_path)
            eval_info.append({"path": str(eval_path), "present": False, "pairs": 0})
    eval_keys = _pair_keys(eval_pairs)
    counts["eval"] = {"files": eval_info, "pairs": len(eval_pairs), "sides": len(eval_keys)}

    # --- evaluation overlap and duplicates ------------------------------------------------------
    seen: set[Pair] = set()
    eval_removed: Counter[str] = Counter()
    dup_removed: Counter[str] = Counter()

    def keep(pairs: list[Pair], name: str) -> list[Pair]:
        """Filter one pool in place order: drop eval overlaps, then earlier duplicates."""
        kept: list[Pair] = []
        for pair in pairs:
            if _overlaps(pair, eval_keys):
                eval_removed[name] += 1
            elif pair in seen:
                dup_removed[name] += 1
            else:
                seen.add(pair)
                kept.append(pair)
        return kept

    # Tatoeba goes first so that a pair found in both sources is kept as a Tatoeba pair.
    tatoeba_pairs = keep(tatoeba_pairs, "tatoeba")
    ding_sentences = keep(ding_sentences, "ding_sentences")
    ding_phrases = keep(ding_phrases, "ding_phrases")
    names = ("tatoeba", "ding_sentences", "ding_phrases")
    counts["duplicates_removed"] = {name: dup_removed[name] for name in names}
    counts["duplicates_removed"]["total"] = sum(dup_removed.values())
    counts["eval_overlap_removed"] = {name: eval_removed[name] for name in names}
    counts["eval_overlap_removed"]["total"] = sum(eval_removed.values())

    # --- deterministic splits -------------------------------------------------------------
    rng.shuffle(tatoeba_pairs)
    rng.shuffle(ding_sentences)
    test_tatoeba = _take(tatoeba_pairs, n_test if tatoeba_present else 0, "test_tatoeba")
    test_ding = _take(ding_sentences, n_test if ding_present else 0, "test_ding")
    valid_tatoeba = _take(tatoeba_pairs, n_valid_tatoeba if tatoeba_present else 0, "valid")
    valid_ding = _take(ding_sentences, n_valid_ding if ding_present else 0, "valid")
    valid = valid_tatoeba + valid_ding

    # A sentence in valid/test that also appears (other translation) in training would leak.
    heldout_keys = _pair_keys(test_tatoeba + test_ding + valid)
    heldout_removed: Counter[str] = Counter()

    def drop_heldout(pairs: list[Pair], name: str) -> list[Pair]:
        """Remove training pairs with a side in the held-out splits."""
        kept = [p for p in pairs if not _overlaps(p, heldout_keys)]
        heldout_removed[name] = len(pairs) - len(kept)
        return kept

    train_tatoeba = drop_heldout(tatoeba_pairs, "tatoeba")
    train_ding = drop_heldout(ding_sentences, "ding_sentences")
    train_phrases = drop_heldout(ding_phrases, "ding_phrases")
    train_sentences = train_tatoeba + train_ding
    counts["heldout_overlap_removed"] = {name: heldout_removed[name] for name in names}
    counts["heldout_overlap_removed"]["total"] = sum(heldout_removed.values())
    counts["dropped"] = dict(dropped)
    counts["dropped"]["total"] = sum(dropped.values())

    splits: dict[str, list[Pair]] = {
        "test_ding": test_ding,
        "test_tatoeba": test_tatoeba,
        "valid": valid,
        "train_sentences": train_sentences,
        "train_phrases": train_phrases,
    }
    counts["splits"] = {name: len(pairs) for name, pairs in splits.items()}
    counts["splits"].update(
        {
            "valid_tatoeba": len(valid_tatoeba),
            "valid_ding": len(valid_ding),
            "train_sentences_tatoeba": len(train_tatoeba),
            "train_sentences_ding": len(train_ding),
        }
    )

    # --- write ------------------------------------------------------------------------------
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, pairs in splits.items():
        # Empty splits are still written so a stale file from an earlier build cannot survive.
        write_tsv(out_dir / SPLIT_FILES[name], pairs)
    (out_dir / COUNTS_FILE).write_text(
        json.dumps(counts, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    logger.info("wrote %s", ", ".join(f"{n}={len(p)}" for n, p in splits.items()))
    return counts


def sample_pairs(out_dir: Path, n: int, seed: int) -> list[tuple[str, Pair]]:
    """Return ``n`` random pairs from the split files in ``out_dir``, labelled with their file.

    Sampling is uniform over all pairs of all (present) split files and deterministic in ``seed``.
    """
    labelled: list[tuple[str, Pair]] = []
    for filename in SPLIT_FILES.values():
        path = Path(out_dir) / filename
        if path.is_file():
            labelled.extend((filename, pair) for pair in read_tsv(path))
    rng = random.Random(seed)
    return rng.sample(labelled, min(n, len(labelled)))


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def format_counts(counts: dict[str, Any]) -> str:
    """Render a counts dict (as returned by :func:`build_corpus`) as a readable text table."""
    rows: list[tuple[str, str]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), sub)
        elif isinstance(value, list):
            for i, sub in enumerate(value):
                walk(f"{prefix}[{i}]", sub)
        else:
            rows.append(
                (
                    prefix,
                    f"{value:,}"
                    if isinstance(value, int) and not isinstance(value, bool)
                    else str(value),
                )
            )

    walk("", counts)
    width = max((len(key) for key, _ in rows), default=0)
    return "\n".join(f"{key:<{width}}  {value:>12}" for key, value in rows)


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``attnscope data`` to ``parser``."""
    defaults = CorpusPaths()
    parser.add_argument(
        "--tatoeba",
        type=Path,
        default=defaults.tatoeba,
        metavar="PATH",
        help=f"Tatoeba english<TAB>german file (default: {defaults.tatoeba})",
    )
    parser.add_argument(
        "--ding",
        type=Path,
        default=defaults.ding,
        metavar="PATH",
        help=f"Ding de-en dictionary file (default: {defaults.ding})",
    )
    parser.add_argument(
        "--eval",
        type=Path,
        action="append",
        default=None,
        metavar="PATH",
        dest="eval_files",
        help="evaluation TSV kept out of training; repeatable "
        f"(default: {', '.join(str(p) for p in defaults.eval_files)})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("data/corpus"),
        metavar="DIR",
        help="output directory (default: data/corpus)",
    )
    parser.add_argument("--seed", type=int, default=13, help="split seed (default: 13)")
    parser.add_argument("--n-test", type=int, default=1000, help="pairs per test split")
    parser.add_argument("--n-valid-tatoeba", type=int, default=700, help="Tatoeba pairs in valid")
    parser.add_argument("--n-valid-ding", type=int, default=300, help="Ding sentences in valid")
    parser.add_argument(
        "--sample",
        type=int,
        default=0,
        metavar="N",
        help="after building, print N random cleaned pairs with their split file",
    )


def run_data_command(args: argparse.Namespace) -> int:
    """Run ``attnscope data``: build the corpus, print the counts (and samples). Returns 0."""
    eval_files = args.eval_files if args.eval_files is not None else CorpusPaths().eval_files
    counts = build_corpus(
        tatoeba=args.tatoeba,
        ding=args.ding,
        eval_files=eval_files,
        out_dir=args.out,
        seed=args.seed,
        n_valid_tatoeba=getattr(args, "n_valid_tatoeba", 700),
        n_valid_ding=getattr(args, "n_valid_ding", 300),
        n_test=getattr(args, "n_test", 1000),
        progress=True,
    )
    # This is the CLI-facing function: the table and samples are its output, so stdout is right.
    print(f"corpus written to {args.out}")
    print(format_counts(counts))
    if args.sample:
        print(f"\n{args.sample} random cleaned pairs:")
        for filename, pair in sample_pairs(args.out, args.sample, args.seed):
            print(f"[{filename}] {pair.en}  |||  {pair.de}")
    return 0
