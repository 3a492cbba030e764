"""Tests for model/data.py: Ding cleaning, alignment, classification, splits and leakage.

Everything runs on small fixtures (tests/fixtures/ding_sample.txt and TSVs written to tmp_path),
so the tests need neither ../shared nor the installed trans-de-en package.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

import pytest

from model.data import (
    SPLIT_FILES,
    CorpusPaths,
    Pair,
    add_data_arguments,
    build_corpus,
    clean_ding_side,
    is_sentence,
    normalize_text,
    parse_ding_line,
    read_ding,
    read_tatoeba,
    read_tsv,
    run_data_command,
    sample_pairs,
    write_tsv,
)

FIXTURES = Path(__file__).parent / "fixtures"
DING_SAMPLE = FIXTURES / "ding_sample.txt"

# Small split sizes so the fixtures are enough to fill every split.
SMALL = {"n_valid_tatoeba": 3, "n_valid_ding": 1, "n_test": 2}

EVAL_PAIRS = [
    Pair("I like drinking tea.", "Ich trinke gern Tee."),  # also a Ding sentence: must not train
    Pair("Sentence number 5 is here.", "Ganz anderer Satz."),  # English side of a Tatoeba pair
    Pair("Totally unrelated.", "Satz Nummer 7 ist hier."),  # German side of a Tatoeba pair
]


def _tatoeba_pairs(n: int = 40) -> list[Pair]:
    return [Pair(f"Sentence number {i} is here.", f"Satz Nummer {i} ist hier.") for i in range(n)]


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, Path]:
    """A tiny Tatoeba file (with a duplicate and a malformed line) and an eval file."""
    tatoeba = tmp_path / "tatoeba.tsv"
    lines = [f"{p.en}\t{p.de}" for p in _tatoeba_pairs()]
    lines.append("Sentence number 1 is here.\tSatz Nummer 1 ist hier.")  # exact duplicate
    lines.append("no tab on this line")
    lines.append("Train   with\u00a0odd  spaces.\tZug  mit  Leerzeichen.")
    tatoeba.write_text("\n".join(lines) + "\n", encoding="utf-8")
    eval_file = tmp_path / "eval.tsv"
    write_tsv(eval_file, EVAL_PAIRS)
    return {"tatoeba": tatoeba, "ding": DING_SAMPLE, "eval": eval_file}


def _build(sources: dict[str, Path], out: Path, seed: int = 13) -> dict:
    return build_corpus(
        sources["tatoeba"], sources["ding"], [sources["eval"]], out, seed=seed, **SMALL
    )


# --- normalisation and cleaning ---------------------------------------------------------------


def test_normalize_text_nfkc_and_whitespace() -> None:
    assert normalize_text("  Hallo\u00a0 Welt\t!\n") == "Hallo Welt !"
    assert normalize_text("ﬁne …") == "fine ..."  # NFKC folds ligatures and the ellipsis


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("Aal {m} (auf der Speisekarte) [cook.]", "Aal"),
        ("Deckenlampe {f} [ugs.]", "Deckenlampe"),
        ("Aale {pl} (Anguilliformes) (zoologische Ordnung)", "Aale"),
        ("Aalmolche {pl} (Amphiuma) [zool.] <Aalmolch>", "Aalmolche"),
        ("particulate matter /PM/", "particulate matter"),
        ("Abkürzung /Abk./", "Abkürzung"),
        ("to ask sb. (about sth.)", "to ask sb."),
        ("jdn. (wegen etw.) fragen", "jdn. fragen"),
        ("nach etw. {+Gen.} fragen {vt}", "nach etw. fragen"),
        ("congo eels [coll.] (zoological genus)", "congo eels"),
        ("Schwebstoffe {pl} (in Flüssigkeiten (und Gasen)) [phys.]", "Schwebstoffe"),
        ("to have a passion for sth.", "to have a passion for sth."),  # unbracketed: kept
        ("Don’t be so fussy!", "Don't be so fussy!"),
        ("he/she exhausts", "he/she exhausts"),  # not a marker; the pair is dropped later
        (
            "Sie ist persönliche Assistentin, was nicht dasselbe ist wie eine Sekretärin.",
            "Sie ist persönliche Assistentin, was nicht dasselbe ist wie eine Sekretärin.",
        ),
    ],
)
def test_clean_ding_side(raw: str, clean: str) -> None:
    assert clean_ding_side(raw) == clean


# --- parsing a Ding line ------------------------------------------------------------------------


def test_subentries_are_aligned_by_bar() -> None:
    sentences, phrases = parse_ding_line(
        "Aalsuppe {f} [cook.] | Aalsuppen {pl} :: eel soup | eel soups"
    )
    assert sentences == []
    assert phrases == [Pair("eel soup", "Aalsuppe"), Pair("eel soups", "Aalsuppen")]


def test_mismatched_subentry_counts_skip_the_line() -> None:
    assert parse_ding_line(
        "ausblasen {vt} | ausblasend | ausgeblasen :: to exhaust | exhausting"
    ) == ([], [])


def test_comments_and_malformed_lines_give_nothing() -> None:
    assert parse_ding_line("# Version :: devel 2023-01-30") == ([], [])
    assert parse_ding_line("no separator here") == ([], [])
    assert parse_ding_line("") == ([], [])


def test_equal_alternatives_pair_index_wise() -> None:
    _, phrases = parse_ding_line("Aal blau; blauer Aal :: Eel au bleu; blue eel")
    assert phrases == [Pair("Eel au bleu", "Aal blau"), Pair("blue eel", "blauer Aal")]


def test_unequal_alternatives_take_the_first_of_each_side() -> None:
    _, phrases = parse_ding_line(
        "Deckenleuchte {f}; Deckenlampe {f} [ugs.]; Deckenlicht {n} :: "
        "ceiling light; overhead light"
    )
    assert phrases == [Pair("ceiling light", "Deckenleuchte")]


def test_semicolon_inside_brackets_is_not_an_alternative() -> None:
    _, phrases = parse_ding_line(
        "Schwebstoffe {pl} (in Flüssigkeiten; Gasen) [phys.] :: particulates; suspended matter"
    )
    # One German alternative against two English ones: only the first pair is used.
    assert phrases == [Pair("particulates", "Schwebstoffe")]


def test_sentence_alternatives_with_semicolons() -> None:
    sentences, phrases = parse_ding_line(
        "Da ist noch nicht alles verloren.; Da ist noch Abhilfe möglich. :: "
        "All is not lost yet.; There is still hope."
    )
    assert phrases == []
    assert sentences == [
        Pair("All is not lost yet.", "Da ist noch nicht alles verloren."),
        Pair("There is still hope.", "Da ist noch Abhilfe möglich."),
    ]


def test_full_sentence_with_comma_survives_intact() -> None:
    sentences, _ = parse_ding_line(
        "Sie ist persönliche Assistentin, was nicht dasselbe ist wie eine Sekretärin. :: "
        "She is a personal assistant, which is not the same as a secretary."
    )
    assert sentences == [
        Pair(
            "She is a personal assistant, which is not the same as a secretary.",
            "Sie ist persönliche Assistentin, was nicht dasselbe ist wie eine Sekretärin.",
        )
    ]


def test_mixed_line_gives_sentences_and_phrases() -> None:
    sentences, phrases = parse_ding_line(
        "Kaffee {m} [cook.] | Wie trinkst du deinen Kaffee? :: "
        "coffee | How do you take your coffee?"
    )
    assert sentences == [Pair("How do you take your coffee?", "Wie trinkst du deinen Kaffee?")]
    assert phrases == [Pair("coffee", "Kaffee")]


def test_bad_pairs_are_dropped() -> None:
    assert parse_ding_line("er/sie bläst aus :: he/she exhausts") == ([], [])  # leftover "/"
    assert parse_ding_line("Grundlagen {pl} :: 101") == ([], [])  # digits only
    assert parse_ding_line("Aal {m} :: (Anguilla anguilla)") == ([], [])  # empty after cleaning
    assert parse_ding_line("Zug {m} :: Поезд") == ([], [])  # not Latin script
    assert parse_ding_line("Schwimm... :: natatory") == ([], [])  # combining form, not a word
    unbalanced = "Person, die für den Parkservice eines großen Hotels zuständig ist"
    assert parse_ding_line(f"{unbalanced} :: valet service") == ([], [])


def test_missing_final_stop_on_one_side_is_repaired() -> None:
    sentences, _ = parse_ding_line(
        "Ihr Vater verstieß sie. :: Her father banished her from his home"
    )
    assert sentences == [Pair("Her father banished her from his home.", "Ihr Vater verstieß sie.")]


@pytest.mark.parametrize(
    ("pair", "expected"),
    [
        (Pair("I like drinking tea.", "Ich trinke gern Tee."), True),
        (Pair("That takes the cake!", "Das ist die Höhe!"), True),
        (Pair("„Who is there?“ she asked.", "„Wer ist da?“, fragte sie."), True),
        (Pair("Heads up!", "Achtung!"), False),  # fewer than three words
        (Pair("learning ability", "Lernfähigkeit"), False),
        (Pair("to have a passion for sth.", "eine Leidenschaft für etw. haben"), False),
        (Pair("He said sth.", "Er hat etw. gesagt."), False),  # placeholder: a template
        (Pair("The idea suggests itself that...", "Der Gedanke drängt sich auf, dass..."), False),
        (Pair("the cat sleeps here.", "Die Katze schläft hier."), False),  # lowercase start
    ],
)
def test_sentence_or_phrase(pair: Pair, expected: bool) -> None:
    assert is_sentence(pair) is expected


def test_read_ding_fixture() -> None:
    sentences, phrases = read_ding(DING_SAMPLE)
    assert Pair("That takes the cake!", "Das ist die Höhe!") in sentences
    assert Pair("eels", "Aale") in phrases
    assert all(is_sentence(p) for p in sentences)
    assert not any(is_sentence(p) for p in phrases)


# --- TSV input/output ---------------------------------------------------------------------------


def test_read_tatoeba_ignores_extra_columns_and_malformed_lines(tmp_path: Path) -> None:
    path = tmp_path / "deu.txt"
    path.write_text(
        "Hi.\tHallo!\tCC-BY 2.0 (France) Attribution: tatoeba.org\n"
        "broken line\n"
        "\tLeer\n"
        "Run!  \t Lauf! \n",
        encoding="utf-8",
    )
    assert read_tatoeba(path) == [Pair("Hi.", "Hallo!"), Pair("Run!", "Lauf!")]


def test_tsv_round_trip(tmp_path: Path) -> None:
    pairs = [Pair("One.", "Eins."), Pair("Two, three.", "Zwei, drei.")]
    write_tsv(tmp_path / "x.tsv", pairs)
    assert read_tsv(tmp_path / "x.tsv") == pairs
    written = (tmp_path / "x.tsv").read_text(encoding="utf-8")
    assert written == "One.\tEins.\nTwo, three.\tZwei, drei.\n"


# --- building the corpus -------------------------------------------------------------------------


def test_build_writes_splits_of_the_requested_sizes(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "corpus"
    counts = _build(sources, out)
    sizes = {name: len(read_tsv(out / filename)) for name, filename in SPLIT_FILES.items()}
    assert sizes == {name: counts["splits"][name] for name in SPLIT_FILES}
    assert sizes["test_ding"] == 2
    assert sizes["test_tatoeba"] == 2
    assert sizes["valid"] == 3 + 1
    assert sizes["train_phrases"] > 0
    assert counts["duplicates_removed"]["tatoeba"] == 1
    assert counts["duplicates_removed"]["ding_phrases"] == 1
    # Test Ding pairs are full sentences only.
    assert all(is_sentence(p) for p in read_tsv(out / "test_ding.tsv"))
    # Whitespace is normalised in the output.
    all_train = (
        read_tsv(out / "train_sentences.tsv")
        + read_tsv(out / "valid.tsv")
        + read_tsv(out / "test_tatoeba.tsv")
    )
    assert Pair("Train with odd spaces.", "Zug mit Leerzeichen.") in all_train


def test_split_is_deterministic_and_seeded(sources: dict[str, Path], tmp_path: Path) -> None:
    first, second, other = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    _build(sources, first, seed=13)
    _build(sources, second, seed=13)
    _build(sources, other, seed=14)
    names = [*SPLIT_FILES.values(), "counts.json"]
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert any(
        (first / name).read_bytes() != (other / name).read_bytes() for name in SPLIT_FILES.values()
    )


def test_no_eval_or_heldout_side_leaks_into_training(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "corpus"
    counts = _build(sources, out)
    heldout = EVAL_PAIRS + [
        pair
        for name in ("valid", "test_ding", "test_tatoeba")
        for pair in read_tsv(out / SPLIT_FILES[name])
    ]
    forbidden = {normalize_text(side).casefold() for pair in heldout for side in pair}
    for name in ("train_sentences", "train_phrases"):
        for pair in read_tsv(out / SPLIT_FILES[name]):
            assert normalize_text(pair.en).casefold() not in forbidden, pair
            assert normalize_text(pair.de).casefold() not in forbidden, pair
    # Two Tatoeba pairs (one per side) and one Ding sentence share a side with the eval file.
    assert counts["eval_overlap_removed"]["tatoeba"] == 2
    assert counts["eval_overlap_removed"]["ding_sentences"] == 1
    # Eval pairs never appear in valid/test either.
    eval_set = set(EVAL_PAIRS)
    for name in ("valid", "test_ding", "test_tatoeba"):
        assert not eval_set & set(read_tsv(out / SPLIT_FILES[name]))


def test_heldout_overlap_is_removed_from_training(tmp_path: Path) -> None:
    # The same English sentence with two German translations: once one is held out, the other
    # must leave training.
    tatoeba = tmp_path / "t.tsv"
    pairs = [Pair("Hello there.", f"Hallo Nummer {i}.") for i in range(10)]
    write_tsv(tatoeba, pairs)
    out = tmp_path / "out"
    counts = build_corpus(tatoeba, None, [], out, n_valid_tatoeba=1, n_valid_ding=0, n_test=1)
    assert read_tsv(out / "train_sentences.tsv") == []
    assert counts["heldout_overlap_removed"]["tatoeba"] == 8


def test_missing_sources_are_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING, logger="model.data"):
        counts = build_corpus(
            tmp_path / "nope.tsv", tmp_path / "no-ding", [tmp_path / "no-eval.tsv"], out
        )
    assert "manythings.org" in caplog.text
    assert "apt-get install trans-de-en" in caplog.text
    assert counts["sources"]["tatoeba"]["present"] is False
    assert counts["sources"]["ding"]["present"] is False
    for filename in SPLIT_FILES.values():
        assert (out / filename).read_text(encoding="utf-8") == ""
    assert all(size == 0 for size in counts["splits"].values())


def test_only_ding_present(sources: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    counts = build_corpus(None, sources["ding"], [], out, **SMALL)
    assert counts["splits"]["test_tatoeba"] == 0
    assert counts["splits"]["test_ding"] == 2
    assert counts["splits"]["valid"] == 1


def test_counts_json_has_documented_keys(sources: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    counts = _build(sources, out)
    on_disk = json.loads((out / "counts.json").read_text(encoding="utf-8"))
    assert on_disk == counts
    assert set(counts) >= {
        "seed",
        "sources",
        "eval",
        "dropped",
        "duplicates_removed",
        "eval_overlap_removed",
        "heldout_overlap_removed",
        "splits",
    }
    assert set(counts["sources"]["tatoeba"]) >= {"raw_lines", "raw_pairs", "cleaned", "present"}
    assert set(counts["sources"]["ding"]) >= {
        "raw_lines",
        "raw_pairs",
        "cleaned",
        "sentences",
        "phrases",
        "present",
    }
    assert set(counts["dropped"]) >= {
        "malformed_line",
        "misaligned_subentries",
        "empty",
        "markup",
        "not_text",
        "fragment",
        "length_ratio",
        "total",
    }
    assert set(counts["splits"]) >= set(SPLIT_FILES) | {"valid_tatoeba", "valid_ding"}
    assert counts["sources"]["ding"]["raw_lines"] == len(
        DING_SAMPLE.read_text(encoding="utf-8").splitlines()
    )
    assert counts["dropped"]["misaligned_subentries"] == 1
    assert counts["dropped"]["markup"] == 1


# --- sampling and the command line ---------------------------------------------------------------


def test_sample_pairs(sources: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    _build(sources, out)
    sample = sample_pairs(out, 5, seed=1)
    assert len(sample) == 5
    assert sample == sample_pairs(out, 5, seed=1)
    for filename, pair in sample:
        assert filename in SPLIT_FILES.values()
        assert pair in read_tsv(out / filename)
    assert len(sample_pairs(out, 10_000, seed=1)) < 10_000


def test_cli_arguments_and_run(
    sources: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    add_data_arguments(parser)
    defaults = parser.parse_args([])
    assert defaults.tatoeba == CorpusPaths().tatoeba
    assert defaults.ding == CorpusPaths().ding
    assert defaults.out == Path("data/corpus")
    assert defaults.seed == 13
    out = tmp_path / "cli"
    args = parser.parse_args(
        [
            "--tatoeba",
            str(sources["tatoeba"]),
            "--ding",
            str(sources["ding"]),
            "--eval",
            str(sources["eval"]),
            "--eval",
            str(tmp_path / "missing.tsv"),
            "--out",
            str(out),
            "--n-test",
            "2",
            "--n-valid-tatoeba",
            "3",
            "--n-valid-ding",
            "1",
            "--sample",
            "3",
        ]
    )
    assert run_data_command(args) == 0
    printed = capsys.readouterr().out
    assert "splits.train_sentences" in printed
    assert printed.count("[") >= 3  # three labelled sample lines
    counts = json.loads((out / "counts.json").read_text(encoding="utf-8"))
    assert len(counts["eval"]["files"]) == 2
