"""BLEU/chrF evaluation (model/evaluate.py) and `attnscope evaluate` on the tiny bundle."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import sacrebleu

from app.cli import main
from model.checkpoint import Bundle
from model.evaluate import evaluate, read_tsv, score, translate_all
from model.translator import Translator

PAIRS = [
    ("The cat is sleeping on the sofa.", "Die Katze schläft auf dem Sofa."),
    ("I go home.", "Ich gehe nach Hause."),
    ("Where is the station?", "Wo ist der Bahnhof?"),
]


@pytest.fixture
def tsv(tmp_path: Path) -> Path:
    path = tmp_path / "dev.tsv"
    path.write_text("".join(f"{en}\t{de}\n" for en, de in PAIRS), encoding="utf-8")
    return path


def last_json_line(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def test_evaluate_command_prints_json_with_bleu_chrf_and_n_as_its_last_line(
    tiny_bundle_dir: Path, tsv: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["evaluate", "--tsv", str(tsv), "--model", str(tiny_bundle_dir), "--beam", "1"])
    assert code == 0
    result = last_json_line(capsys.readouterr().out)
    assert {"bleu", "chrf", "n"} <= set(result)
    assert result["n"] == 3
    assert result["beam"] == 1
    assert 0.0 <= result["bleu"] <= 100.0
    assert 0.0 <= result["chrf"] <= 100.0


def test_evaluate_command_scores_match_sacrebleu_on_the_written_translations(
    tiny_bundle_dir: Path, tsv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "hyps.txt"
    argv = ["evaluate", "--tsv", str(tsv), "--model", str(tiny_bundle_dir), "--beam", "2"]
    assert main([*argv, "--output", str(output), "--limit", "2"]) == 0
    result = last_json_line(capsys.readouterr().out)
    hyps = output.read_text(encoding="utf-8").splitlines()
    assert len(hyps) == result["n"] == 2
    refs = [de for _, de in PAIRS[:2]]
    assert result["bleu"] == round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
    assert result["chrf"] == round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2)


def test_evaluate_command_records_the_scores_in_the_bundle_metrics(
    tiny_bundle_dir: Path, tsv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = Path(shutil.copytree(tiny_bundle_dir, tmp_path / "bundle"))
    argv = ["evaluate", "--tsv", str(tsv), "--model", str(bundle), "--beam", "1"]
    assert main([*argv, "--record", "dev"]) == 0
    printed = last_json_line(capsys.readouterr().out)
    metrics = json.loads((bundle / "metrics.json").read_text())
    assert metrics["evaluation"]["dev"] == printed


def test_evaluate_command_with_a_missing_bundle_exits_2_with_a_clear_message(
    tsv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["evaluate", "--tsv", str(tsv), "--model", str(tmp_path / "absent")])
    assert code == 2
    err = capsys.readouterr().err
    assert "error:" in err
    assert "does not exist" in err


def test_perfect_translations_score_100() -> None:
    refs = [de for _, de in PAIRS]
    assert score(refs, refs) == {"bleu": 100.0, "chrf": 100.0}
    assert score(["x y z"] * 3, refs)["bleu"] < 5


def test_translate_all_keeps_input_order_and_equals_translating_one_by_one(
    tiny_bundle: Bundle,
) -> None:
    # Batched by length (different order, padding) and yet the same output per sentence.
    sources = [en for en, _ in PAIRS] + ["I go home.", "The weather is nice today!"]
    batched = translate_all(tiny_bundle, sources, beam_size=1, batch_size=4, progress=False)
    translator = Translator(tiny_bundle)
    single = [translator.translate(s, need_trace=False)[0].translation for s in sources]
    assert batched == single
    assert batched[1] == batched[3]


def test_evaluate_reports_scores_count_and_beam(tiny_bundle: Bundle) -> None:
    result = evaluate(tiny_bundle, PAIRS[:2], beam_size=1, progress=False)
    assert result["n"] == 2
    assert result["beam"] == 1
    assert {"bleu", "chrf", "seconds"} <= set(result)


def test_read_tsv_skips_blank_lines_honours_the_limit_and_names_a_malformed_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("a\tb\n\nc\td\te\nf\tg\n", encoding="utf-8")
    assert read_tsv(path) == [("a", "b"), ("c", "d"), ("f", "g")]
    assert read_tsv(path, limit=2) == [("a", "b"), ("c", "d")]
    path.write_text("a\tb\nno tab\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"pairs\.tsv:2: expected 'source<TAB>reference'"):
        read_tsv(path)
