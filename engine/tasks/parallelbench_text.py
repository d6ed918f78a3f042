"""ParallelBench's five text-writing tasks graded as its ``metrics.py`` grades them (``SummaryScore``,
``ParaphraseScore``, ``sentence_to_words_score``), with the packages it uses, imported only when a text task runs:

- summarize (samsum): ROUGE-1/2/L F-measure of the output against the reference summary, stemmed, as
  ``evaluate.load("rouge")`` computes it for one pair (``rouge-score``'s scorer; its bootstrap aggregate of one
  score is that score); ``score`` = ROUGE-L x grammar.
- paraphrase (chatgpt-paraphrases): ``inv_bleu`` = 1 - BLEU of the output against the SOURCE sentence (a paraphrase
  should not copy it), BLEU as ``evaluate.load("bleu")`` computes it: 13a tokens (``sacrebleu``'s tokenizer), up
  to 4-grams, no smoothing, brevity penalty (``bleu``); ``bertscore`` = BERTScore F1 (``bert-score``, roberta-large
  at its layer 17, as ``lang="en"`` picks); ``score`` = inv_bleu x bertscore x grammar.
- words to sentence (easy / medium / hard): every given word is a substring of the output, and grammar.

Grammar is LanguageTool's: no match on the text (an empty text fails). Two of these need what cannot be shipped:
a LanguageTool server (the benchmark starts one with Java) and the BERTScore model. Each is used only where the
operator names it: ``UNMASK_LANGUAGETOOL`` (the URL of a LanguageTool server, e.g. http://localhost:8081) and
``UNMASK_BERTSCORE_MODEL`` (a local roberta-large folder). Without one, the metrics that need it and ``score`` are
left out of every row and ``unavailable`` says why: no stand-in number is printed in their place.
"""

from __future__ import annotations

import json
import math
import os
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

from engine.errors import ConfigError

LANGUAGETOOL_ENV, BERTSCORE_ENV = "UNMASK_LANGUAGETOOL", "UNMASK_BERTSCORE_MODEL"
BERTSCORE_LAYER = 17      # bert-score's layer for roberta-large, the model its lang="en" picks


def ngrams(tokens: list[str], n: int) -> Counter:
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def bleu(prediction: str, reference: str, max_order: int = 4) -> float:
    """One pair's BLEU as evaluate's "bleu" gives it (13a tokens; clipped n-gram precisions, their geometric mean
    0 when any is 0; brevity penalty exp(1 - r / c) when the output is shorter). A side with no 13a token (an
    empty output, or the literal ``<skipped>``, which 13a deletes) scores 0: its ``nmt_bleu`` sets the penalty to 0
    when either length is 0."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a
    tok = Tokenizer13a()
    pred, ref = tok(prediction).split(), tok(reference).split()
    if not pred or not ref:
        return 0.0
    precisions = []
    for n in range(1, max_order + 1):
        possible = len(pred) - n + 1
        matched = sum((ngrams(pred, n) & ngrams(ref, n)).values())
        precisions.append(matched / possible if possible > 0 else 0.0)
    geo = math.exp(sum(math.log(p) for p in precisions) / max_order) if min(precisions) > 0 else 0.0
    ratio = len(pred) / len(ref)
    return geo * (1.0 if ratio > 1.0 else math.exp(1 - 1 / ratio))


class Grammar:
    """LanguageTool's check (en-US) through a server the operator runs; ``reason`` says why it cannot run."""

    def __init__(self):
        self.url = os.environ.get(LANGUAGETOOL_ENV, "").rstrip("/")
        ok = urllib.parse.urlparse(self.url).scheme in ("http", "https")
        self.reason = None if ok else (f"grammar: needs a LanguageTool server; set {LANGUAGETOOL_ENV} to its URL "
                                       "(e.g. http://localhost:8081)")
        self.seen: dict[str, bool] = {}      # a verdict and the metrics ask about the same text

    def __call__(self, text: str) -> bool:
        text = text.strip()
        if text not in self.seen:
            if len(self.seen) > 256:
                self.seen.clear()
            self.seen[text] = self.check(text)
        return self.seen[text]

    def check(self, text: str) -> bool:
        if not text:
            return False
        body = urllib.parse.urlencode({"language": "en-US", "text": text}).encode()
        try:
            with urllib.request.urlopen(f"{self.url}/v2/check", data=body, timeout=60) as r:
                return len(json.loads(r.read(1 << 22))["matches"]) == 0
        except (OSError, ValueError, KeyError) as e:
            raise ConfigError(f"{LANGUAGETOOL_ENV}: the LanguageTool server did not answer ({type(e).__name__})") \
                from None


class BertScore:
    """BERTScore F1 from ``bert-score`` with the model folder the operator names."""

    def __init__(self):
        self.path, self.scorer = os.environ.get(BERTSCORE_ENV, ""), None
        try:
            import bert_score  # noqa: F401
        except ImportError:
            self.reason = "bertscore: needs the bert-score package (pip install bert-score)"
            return
        self.reason = None if self.path and Path(self.path).is_dir() else (
            f"bertscore: needs the roberta-large model; set {BERTSCORE_ENV} to a local folder of it")

    def __call__(self, prediction: str, reference: str) -> float:
        if self.scorer is None:          # the model loads once, at the first output scored
            import bert_score
            self.scorer = bert_score.BERTScorer(model_type=self.path, num_layers=BERTSCORE_LAYER)
        _, _, f1 = self.scorer.score([prediction], [reference])
        return float(f1[0])


class TextMetric:
    graded = False       # a mean of continuous scores, not a share of right answers

    def __init__(self):
        self.grammar = Grammar()

    def unavailable(self) -> list[str]:
        """Why a metric cannot be computed here, one line each (the metric and ``score`` are then left out)."""
        return [p.reason for p in self.parts() if p.reason]

    def parts(self) -> list:
        return [self.grammar]

    def verdict(self, text: str, label: dict) -> str:
        return "scored"


class SummaryScore(TextMetric):
    def __call__(self, prediction: str, label: dict) -> dict[str, float]:
        from rouge_score.rouge_scorer import RougeScorer
        prediction = prediction.strip()
        got = RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True).score(label["summary"].strip(), prediction)
        out = {f"{k}_score": v.fmeasure for k, v in got.items()}
        if not self.grammar.reason:
            out["grammar_score"] = float(self.grammar(prediction)) if prediction else 0.0
            out["score"] = out["rougeL_score"] * out["grammar_score"]
        return out


class ParaphraseScore(TextMetric):
    def __init__(self):
        super().__init__()
        self.bertscore = BertScore()

    def parts(self) -> list:
        return [self.bertscore, self.grammar]

    def __call__(self, prediction: str, label: dict) -> dict[str, float]:
        prediction, text = prediction.strip(), label["text"]
        empty = prediction == ""
        out = {"inv_bleu_score": 0.0 if empty else 1 - bleu(prediction, text)}
        if not self.bertscore.reason:
            out["bertscore_score"] = 0.0 if empty else self.bertscore(prediction, text)
        if not self.grammar.reason:
            out["grammar_score"] = 0.0 if empty else float(self.grammar(prediction))
        if len(out) == 3:
            out["score"] = out["inv_bleu_score"] * out["bertscore_score"] * out["grammar_score"]
        return out


class WordsToSentenceScore(TextMetric):
    @property
    def graded(self) -> bool:        # right or wrong once grammar can be checked
        return not self.grammar.reason

    def __call__(self, prediction: str, label: dict) -> dict[str, float]:
        out = {"inclusion_score": float(all(w in prediction for w in label["words"]))}
        if not self.grammar.reason:
            out["grammar_score"] = float(self.grammar(prediction))
            out["score"] = out["inclusion_score"] * out["grammar_score"]
        return out

    def verdict(self, text: str, label: dict) -> str:
        m = self(text, label)
        if not m["inclusion_score"]:
            return "missing words"
        if "grammar_score" not in m:
            return "words included (grammar not checked)"
        return "valid" if m["grammar_score"] else "ungrammatical"


TEXT_METRICS = {"summary_score": SummaryScore, "paraphrase_score": ParaphraseScore,
                "sentence_to_words_score": WordsToSentenceScore}
