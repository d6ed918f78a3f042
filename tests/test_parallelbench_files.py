"""ParallelBench's own files and metrics (engine/tasks/parallelbench_files.py, parallelbench_metrics.py,
parallelbench_text.py): the shipped rows (tests/data/parallelbench: the first rows of its files, byte for byte) load
as its loader gives them, and a corpus of tricky outputs gets the verdicts its metrics.py gives, each derived by
hand from that code (furiosa-ai/ParallelBench 72de8f7, dataset/parallel_bench/metrics.py) and explained beside it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import ConfigError
from engine.tasks import get_task, load_task_file
from engine.tasks.parallelbench_metrics import binary_scores, parse_list

DATA = Path(__file__).resolve().parent / "data" / "parallelbench"


def official(name: str, **kw):
    return get_task(load_task_file(f"parallelbench:{name}", data=str(DATA), **kw))


COPY = '["Billy Ramos", "Alan Wells", "Grace Wright"]'          # copy.jsonl's first answer: a string
SHUF = {"input": ["Paul Payne", "Robert Riley", "Peter Stone"]}
INS = {"input": ["Johnny Sullivan", "Ryan Baker", "Juan Wilson"], "word": "Justin McDonald"}
REM = {"input": ["Karen Kim", "Jerry Hall", "Jose Marshall"]}
REP = {"input": ["David Owens", "Kelly Payne", "Aaron Freeman"], "word": "Juan Torres"}
LAT = {"symbols": ["H", "4", "C", "A"]}
SUD = "1342\n2431\n4123\n3214"

# (metric, label, output, score, score_strict, why)
CORPUS = [
    ("list_match_score", COPY, COPY, 1, 1, "the answer as shipped"),
    ("list_match_score", COPY, "[Billy Ramos, Alan Wells, Grace Wright]", 1, 0,
     "unquoted: the loose parse strips quotes it need not find; strict wants every item in double quotes"),
    ("list_match_score", COPY, '"Billy Ramos", "Alan Wells", "Grace Wright"', 1, 0,
     "bracket-less: loose reads the whole text; strict needs a [ and a ]"),
    ("list_match_score", COPY, 'Input: ["Billy Ramos", "Alan Wells"]\nOutput: ' + COPY, 1, 1,
     "an echo before the answer: both read after the LAST ["),
    ("list_match_score", COPY, COPY + '\nNote: I kept the ["order"].', 0, 0,
     "a list in the chatter after the answer is the one read (after the last [): ['order']"),
    ("list_match_score", COPY, "Here is the list: " + COPY + " Done!", 1, 1, "chatter outside the brackets"),
    ("list_match_score", COPY, '["Billy Ramos","Alan Wells","Grace Wright"]', 1, 0,
     "no space after the commas: strict splits at ', ' only, so one item with quotes inside"),
    ("list_match_score", COPY, '["Billy Ramos", "Alan Wells", "Grace Wright"', 1, 0,
     "no closing bracket: loose reads to the end; strict needs the ]"),
    ("list_match_score", COPY, "['Billy Ramos', 'Alan Wells', 'Grace Wright']", 0, 0,
     "single quotes are not stripped (only double quotes and spaces)"),
    ("list_match_score", COPY, '[\n"Billy Ramos",\n"Alan Wells",\n"Grace Wright"\n]', 0, 0,
     "one item a line: the newline is not stripped, so each item keeps '\\n\"'"),
    ("list_match_score", COPY, '["Billy Ramos", "Billy Ramos", "Grace Wright"]', 0, 0, "a duplicate"),
    ("list_match_score", COPY, "", 0, 0, "empty: loose reads [], strict None"),
    ("list_match_score", COPY, '[ "Billy Ramos", "Alan Wells", "Grace Wright" ]', 1, 0,
     "spaces inside the brackets: loose strips them; strict's first item starts with a space"),
    ("list_match_score", COPY, '["Billy Ramos", "Alan Wells", "Grace Wright",]', 1, 0,
     "a trailing comma: loose drops the empty piece; strict's last item ends with ','"),
    ("list_shuffle_score", SHUF, 'Original: ["Paul Payne", "Robert Riley", "Peter Stone"]\n'
     'Shuffled: ["Peter Stone", "Paul Payne", "Robert Riley"]', 1, 1, "the input echoed first: the last list counts"),
    ("list_shuffle_score", SHUF, "[Peter Stone, Paul Payne, Robert Riley]", 1, 0, "unquoted shuffle"),
    ("list_shuffle_score", SHUF, "Peter Stone, Paul Payne, Robert Riley", 1, 0, "bracket-less shuffle"),
    ("list_shuffle_score", SHUF, '["Paul Payne", "Robert Riley", "Peter Stone"]', 0, 0, "the input is no shuffle"),
    ("list_shuffle_score", SHUF, '["Peter Stone", "Peter Stone", "Robert Riley"]', 0, 0, "a repeated name"),
    ("list_shuffle_score", SHUF, '["Peter Stone", "Paul Payne"]', 0, 0, "a name missing"),
    ("list_shuffle_score", SHUF, '["Peter Stone", "Paul Payne", "Robert Riley"] (from ["Paul Payne", '
     '"Robert Riley", "Peter Stone"])', 0, 0, "the input echoed AFTER the answer is what is read"),
    ("list_random_insert_score", INS, '["Justin McDonald", "Johnny Sullivan", "Ryan Baker", "Juan Wilson"]', 1, 1,
     "new name first"),
    ("list_random_insert_score", INS, '["Johnny Sullivan", "Ryan Baker", "Juan Wilson", "Justin McDonald"]', 1, 1,
     "new name last"),
    ("list_random_insert_score", INS, '["Justin McDonald", "Johnny Sullivan", "Justin McDonald", "Ryan Baker", '
     '"Juan Wilson"]', 0, 0, "inserted twice: only the first is removed, the second remains"),
    ("list_random_insert_score", INS, '["Amy Ray", "Johnny Sullivan", "Ryan Baker", "Juan Wilson"]', 0, 0,
     "another name inserted"),
    ("list_random_insert_score", INS, '["Ryan Baker", "Justin McDonald", "Johnny Sullivan", "Juan Wilson"]', 0, 0,
     "the rest out of order"),
    ("list_random_remove_score", REM, '["Karen Kim", "Jose Marshall"]', 1, 1, "one removed, order kept"),
    ("list_random_remove_score", REM, '["Jose Marshall", "Karen Kim"]', 0, 0, "one removed, the rest reordered"),
    ("list_random_remove_score", REM, '["Karen Kim", "Karen Kim"]', 0, 0,
     "right length, but two names are gone by set difference"),
    ("list_random_remove_score", REM, '["Karen Kim", "Jerry Hall", "Jose Marshall"]', 0, 0, "nothing removed"),
    ("list_random_replace_score", REP, '["David Owens", "Juan Torres", "Aaron Freeman"]', 1, 1, "one replaced"),
    ("list_random_replace_score", REP, '["Juan Torres", "Juan Torres", "Aaron Freeman"]', 0, 0,
     "the new name's first place is slot 0, so slot 1 must still be Kelly Payne"),
    ("list_random_replace_score", REP, '["David Owens", "Kelly Payne", "Aaron Freeman"]', 0, 0, "nothing replaced"),
    ("list_random_replace_score", REP, '["Juan Torres", "Kelly Payne", "Bob Smith"]', 0, 0, "a second slot changed"),
    ("latin_square_score", LAT, "H,4,A,C\n4,C,H,A\nC,A,4,H\nA,H,C,4", 1, 1, "the shipped example"),
    ("latin_square_score", LAT, "H, 4, A, C\n4, C, H, A\nC, A, 4, H\nA, H, C, 4", 1, 1, "cells are stripped"),
    ("latin_square_score", LAT, "H,4,A,C,H\n4,C,H,A\nC,A,4,H\nA,H,C,4", 1, 1,
     "a 5-cell first row: its SET is the symbols, and columns zip to the shortest row"),
    ("latin_square_score", LAT, "Here is the square:\nH,4,A,C\n4,C,H,A\nC,A,4,H\nA,H,C,4\nDone.", 1, 1,
     "lines that are not a row of the symbols are dropped first"),
    ("latin_square_score", LAT, "H,4,A,C\nH,4,A,C\nC,A,4,H\nA,H,C,4", 0, 0, "a repeated row breaks the columns"),
    ("latin_square_score", LAT, "H,4,A,C\n4,C,H,H\nC,A,4,H\nA,H,C,4\n4,C,H,A", 1, 1,
     "a bad second line is dropped and the fifth line takes its place: the four kept rows are a Latin square"),
    ("latin_square_score", LAT, "H 4 A C\n4 C H A\nC A 4 H\nA H C 4", 0, 0, "not comma-separated: no line kept"),
    ("latin_square_score", LAT, "H,4,A,C\n4,C,H,A\nC,A,4,H", 0, 0, "three rows"),
    ("sudoku_score", SUD, SUD, 1, 1, "the solution"),
    ("sudoku_score", SUD, "1 3 4 2\n2 4 3 1\n4 1 2 3\n3 2 1 4", 1, 0,
     "spaced digits: loose drops spaces; strict wants 4 characters a line"),
    ("sudoku_score", SUD, "1,3,4,2\n2,4,3,1\n4,1,2,3\n3,2,1,4", 1, 0, "CSV rows"),
    ("sudoku_score", SUD, "Output:\n" + SUD, 1, 0, "a header line without digits is skipped loosely; strict: 5 lines"),
    ("sudoku_score", SUD, "2431\n1342\n3214\n4123", 0, 0, "another grid"),
    ("sudoku_score", SUD, "Solved in 1234 ms\n" + SUD, 0, 0,
     "chatter holding four digits becomes a fifth row: no grid"),
    ("sudoku_score", SUD, "1342243141233214", 0, 0, "one line of 16 digits is no row"),
    ("sudoku_score", SUD, "[1,3,4,2]\n[2,4,3,1]\n[4,1,2,3]\n[3,2,1,4]", 1, 0, "bracketed rows: digits read loosely"),
]


@pytest.mark.parametrize("metric,label,output,score,strict,why", CORPUS, ids=[c[-1][:40] for c in CORPUS])
def test_the_verdict_corpus_agrees_with_the_benchmarks_metrics(metric, label, output, score, strict, why):
    assert binary_scores(metric, output, label) == {"score": score, "score_strict": strict}, why


def test_the_list_parse_reads_after_the_last_bracket():
    assert parse_list('a ["x", "y"] b ["z"]') == ["z"] and parse_list("p, q") == ["p", "q"]
    assert parse_list("p, q", strict=True) is None and parse_list('["p", "q"]', strict=True) == ["p", "q"]


def test_the_shipped_rows_load_as_the_loader_gives_them_one_shot():
    task = official("waiting_line/copy")
    p = task.problems("test", 1)[0]
    ask = ("You are managing a waiting line at a customer service desk.\nYou need to record the following people "
           "in the order they arrived:\n{}\nPlease copy the list exactly and provide only the final list.\n")
    shot = '["Michelle Edwards", "Anna Diaz", "Sarah Griffin", "Kevin Porter", "Keith Wilson"]'
    assert p.messages == (("user", ask.format(shot)), ("assistant", shot), ("user", ask.format(COPY)))
    assert p.prompt == ask.format(COPY) and p.solution == COPY and p.answer["label"] == COPY   # a string answer
    assert task.verdict("[Billy Ramos, Alan Wells, Grace Wright]", p) == "valid"
    assert task.metrics("[Billy Ramos, Alan Wells, Grace Wright]", p) == {"score": 1.0, "score_strict": 0.0}
    zero = official("waiting_line/copy", zero_shot=True).problems("test", 1)[0]
    assert zero.messages == (("user", p.prompt),) and zero.prompt == p.prompt       # the question alone


@pytest.mark.parametrize("name,shots", [("waiting_line/shuffle", 1), ("waiting_line/insert_index", 1),
                                        ("waiting_line/insert_random", 1), ("waiting_line/remove_random", 1),
                                        ("waiting_line/replace_random", 1), ("puzzle/latin_square_n4", 1),
                                        ("puzzle/sudoku_n4_12", 1), ("words_to_sentence/easy", 0)])
def test_every_shipped_file_loads_and_its_reference_answer_scores(name, shots):
    task = official(name)
    probs = task.problems("test", 3)
    assert all(len(p.messages) == 2 * shots + 1 for p in probs)
    for p in probs[:1]:         # the first row of each carries a reference ("example") answer
        assert task.metrics(p.solution, p).get("score", 1.0) == 1.0 and task.verdict(p.solution, p) != "wrong"


def test_the_puzzles_chat_is_the_benchmarks():
    p = official("puzzle/sudoku_n4_12").problems("test", 1)[0]
    assert p.prompt.endswith("\n\nInput:\n0042\n2031\n4023\n3214\nOutput:\n")     # "\\n" in the YAML is a newline
    assert p.messages[1] == ("assistant", "1342\n4213\n2134\n3421") and p.answer["label"] == "1342\n2431\n4123\n3214"
    lat = official("puzzle/latin_square_n4").problems("test", 1)[0]
    assert lat.prompt == ("Generate a Latin square of size 4 with the symbols [H, 4, C, A]. Only output the final "
                          "result as CSV.")
    assert lat.messages[1] == ("assistant", "7,K,B,A\nB,A,K,7\nK,7,A,B\nA,B,7,K")


def test_text_writing_metrics_need_what_the_operator_names(monkeypatch):
    """ROUGE and inverse BLEU are computed; grammar and BERTScore are named as missing, and score with them."""
    monkeypatch.delenv("UNMASK_LANGUAGETOOL", raising=False)
    monkeypatch.delenv("UNMASK_BERTSCORE_MODEL", raising=False)
    summ = official("paraphrase_summarize/samsum")
    p = summ.problems("test", 1)[0]
    got = summ.metrics("Rob and Steve will talk", p)
    assert set(got) == {"rouge1_score", "rouge2_score", "rougeL_score"} and not summ.graded
    assert any("LanguageTool" in n for n in summ.notes())
    para = official("paraphrase_summarize/chatgpt-paraphrases")
    assert set(para.metrics("What sweater is this?", para.problems("test", 1)[0])) == {"inv_bleu_score"}
    assert len(para.notes()) == 2
    w2s = official("words_to_sentence/easy")
    q = w2s.problems("test", 1)[0]
    assert w2s.metrics("The dog ran.", q) == {"inclusion_score": 0.0}
    assert w2s.verdict("The dog ran.", q) == "missing words"


def test_rouge_and_bleu_by_hand():
    from engine.tasks.parallelbench_text import ParaphraseScore, SummaryScore, bleu
    # 1-4-gram precisions 5/6, 3/5, 2/4, 1/3, equal lengths: (1/12) ** (1/4)
    assert math.isclose(bleu("the cat sat on the mat", "the cat sat on a mat"), (1 / 12) ** 0.25)
    assert bleu("the cat", "the cat sat on a mat") == 0.0           # no 3-gram: geometric mean 0
    import sacrebleu
    ref = sacrebleu.BLEU(smooth_method="none").corpus_score(["the cat sat on the mat ."], [["the cat sat on a mat"]])
    assert math.isclose(bleu("the cat sat on the mat .", "the cat sat on a mat"), ref.score / 100)
    # LCS of "steve and rob will talk" and "rob and steve will talk" is 3 of 5; bigrams share only "will talk"
    got = SummaryScore()("Rob and Steve will talk", {"summary": "Steve and Rob will talk"})
    assert math.isclose(got["rougeL_score"], 0.6) and got["rouge1_score"] == 1.0
    assert math.isclose(got["rouge2_score"], 0.25)
    assert ParaphraseScore()("", {"text": "x"})["inv_bleu_score"] == 0.0      # an empty output scores 0
    # 13a deletes "<skipped>": no token, and nmt_bleu's brevity penalty is 0 when a length is 0 (not 1 / 0)
    assert bleu("<skipped>", "the cat") == bleu("the cat", "") == bleu("...", "<skipped>") == 0.0
    assert ParaphraseScore()("<skipped>", {"text": "x"})["inv_bleu_score"] == 1.0     # not empty after strip()


ODD_OUTPUTS = ["<skipped>", "", "   \n\t ", "\u00e9\u4e2d\U0001F600\u200b", "\ud800", "<skipped> <skipped>",
               "word " * 3000, "[" * 500, "&amp;&lt;", "-\n"]
SHIPPED = sorted(f"{d.name}/{f.stem}" for d in DATA.iterdir() if d.is_dir() for f in d.glob("*.jsonl"))


def scored_everywhere(tasks, text: str) -> None:
    """What a bench row computes from one output (its verdict, its metrics' sums) is total and in [0, 1]."""
    from engine.harness.bench import metric_sums
    for task in tasks:
        p = task.problems("test", 1)[0]
        assert isinstance(task.verdict(text, p), str)
        sums = metric_sums(task, text, p)
        assert all(math.isfinite(v) and 0.0 <= v <= 1.0 for k, v in sums.items() if k.startswith("metric:"))


@pytest.fixture(scope="module")
def shipped_tasks():
    return [official(name, zero_shot=True) for name in SHIPPED]


def test_a_bench_row_survives_any_single_output(shipped_tasks, monkeypatch):
    """One unscorable output (nothing to tokenize, blank, unicode only, very long) never ends a bench run."""
    monkeypatch.delenv("UNMASK_LANGUAGETOOL", raising=False)
    assert len(shipped_tasks) == 11
    for text in ODD_OUTPUTS:
        scored_everywhere(shipped_tasks, text)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.one_of(st.text(max_size=40), st.text(alphabet=" \n\t<>&;[]\"',.-", max_size=40),
                      st.sampled_from(ODD_OUTPUTS)))
def test_every_metric_is_total_on_fuzzed_outputs(shipped_tasks, text):
    scored_everywhere(shipped_tasks, text)


def test_a_bench_on_the_shipped_files_reports_both_scores(capsys):
    """End to end through the command line: 1-shot needs a chat template (one line, exit 2); 0-shot runs and
    every row carries score and score_strict with their intervals and counts."""
    from engine.__main__ import main
    args = ["bench", "--task", "parallelbench:waiting_line/copy", "--data", str(DATA), "--n", "2",
            "--model", "unmask-parallel-small", "--decoder", "ar", "--json"]
    assert main(args) == 2 and "no chat template" in capsys.readouterr().err
    assert main(args + ["--zero-shot"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert set(row["metrics"]) == {"score", "score_strict"} and row["metrics"]["score"]["n"] == 2
    assert row["accuracy"] == row["metrics"]["score"]["mean"]


def test_a_chat_with_worked_examples_goes_through_the_chat_template():
    from engine.models.model import ModelAdapter
    from engine.models.tokenizer import build_tokenizer
    tok = build_tokenizer(["user", "assistant", "a", "b", ":"])
    tok.chat_template = "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}assistant :"
    ids = ModelAdapter.encode_chat(SimpleNamespace(tokenizer=tok, prompt_template=None, name="t"),
                                   [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                                    {"role": "user", "content": "a"}])
    assert tok.decode(ids).split() == "user : a assistant : b user : a assistant :".split()


def test_a_chat_is_tokenized_from_its_rendered_text_as_parallelbench_does():
    """Its models render the template to text and tokenize that (``self.tokenizer(prompt)``): with a tokenizer
    that adds a BOS and a template that writes one, the ids start with two, where tokenizing inside
    ``apply_chat_template`` gives one. A lone question to a model without a template takes its own format."""
    from tokenizers import processors
    from engine.models.model import ModelAdapter
    from engine.models.tokenizer import build_tokenizer
    tok = build_tokenizer(["user", "assistant", "a", "b", ":"])
    tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
        single="[BOS] $A", special_tokens=[("[BOS]", tok.bos_token_id)])
    tok.chat_template = "[BOS]{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}assistant :"
    chat = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "a"}]
    adapter = SimpleNamespace(tokenizer=tok, prompt_template=None, name="t")
    ids = ModelAdapter.encode_chat(adapter, chat)
    rendered = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    assert ids == tok(rendered).input_ids and ids[:3] == [tok.bos_token_id] * 2 + [tok.convert_tokens_to_ids("user")]
    inside = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
    assert list(inside["input_ids"] if hasattr(inside, "keys") else inside) == ids[1:]
    plain = SimpleNamespace(tokenizer=tok, prompt_template="Q : {} A :", name="t")
    plain.encode_prompt = lambda text: ModelAdapter.encode_prompt(plain, text)
    assert ModelAdapter.encode_chat(plain, chat[:1]) == ModelAdapter.encode_prompt(plain, "a")


def test_bad_files_are_one_line(tmp_path):
    with pytest.raises(ConfigError, match="goes with --task parallelbench:GROUP/NAME"):
        load_task_file("arith", data=str(DATA))
    with pytest.raises(ConfigError, match="no task_config.yaml"):
        (tmp_path / "copy.jsonl").write_text((DATA / "waiting_line" / "copy.jsonl").read_text())
        load_task_file("parallelbench:waiting_line/copy", data=str(tmp_path / "copy.jsonl"))
    cfg = tmp_path / "task_config.yaml"
    cfg.write_text("waiting_line/copy:\n  metric: list_match_score\n  prompt: '{context.x}'\n")
    with pytest.raises(ConfigError, match="plain fields only"):
        load_task_file("parallelbench:waiting_line/copy", data=str(tmp_path / "copy.jsonl"))
    cfg.write_text("waiting_line/copy:\n  metric: math_op_score\n  prompt: '{context}'\n")
    with pytest.raises(ConfigError, match="not one Unmask implements"):
        load_task_file("parallelbench:waiting_line/copy", data=str(tmp_path / "copy.jsonl"))
    with pytest.raises(ConfigError, match="goes with --data"):
        load_task_file("copy", zero_shot=True)
    (tmp_path / "shuffle.jsonl").write_text(json.dumps({"input": {"context": "x"}, "answer": '["a"]'}) + "\n")
    cfg.write_text("waiting_line/shuffle:\n  metric: list_shuffle_score\n  prompt: '{context}'\n")
    with pytest.raises(ConfigError, match="line 1: list_shuffle_score needs the answer.input as list"):
        load_task_file("parallelbench:waiting_line/shuffle", data=str(tmp_path / "shuffle.jsonl"))


def test_a_summary_bench_has_no_accuracy_and_names_what_it_cannot_compute(capsys, monkeypatch):
    monkeypatch.delenv("UNMASK_LANGUAGETOOL", raising=False)
    from engine.__main__ import main
    assert main(["bench", "--task", "parallelbench:paraphrase_summarize/samsum", "--data", str(DATA), "--n", "1",
                 "--model", "unmask-parallel-small", "--decoder", "ar", "--json"]) == 0
    out = capsys.readouterr()
    row = json.loads(out.out)[0]
    assert row["accuracy"] is None and set(row["metrics"]) == {"rouge1_score", "rouge2_score", "rougeL_score"}
    assert "note: grammar: needs a LanguageTool server" in out.err


def test_metric_means_wilson_for_0_1_and_a_normal_interval_otherwise():
    from collections import Counter
    from engine.harness import stats
    from engine.harness.bench import metric_means
    a = Counter()
    for v in (1.0, 0.0, 1.0, 1.0):
        a.update({"metric:s": v, "metric2:s": v * v, "metric_n:s": 1})
    for v in (0.2, 0.4, 0.6):           # mean 0.4, sample sd 0.2: half-width 1.96 * 0.2 / sqrt(3)
        a.update({"metric:r": v, "metric2:r": v * v, "metric_n:r": 1})
    got = metric_means(a)
    assert got["s"] == dict(mean=0.75, ci95=list(stats.wilson(3, 4)), n=4)
    half = stats.Z95 * 0.2 / math.sqrt(3)
    assert got["r"]["n"] == 3 and all(math.isclose(x, y) for x, y in zip(got["r"]["ci95"], [0.4 - half, 0.4 + half]))


def test_grammar_goes_to_the_languagetool_server_the_operator_names(monkeypatch):
    """A LanguageTool-shaped server on loopback (its /v2/check answers matches): with it named, words to sentence
    is graded and its score given; an empty text fails without a request, as the benchmark's check does."""
    import threading
    import urllib.parse
    from http.server import BaseHTTPRequestHandler, HTTPServer
    asked = []

    class Check(BaseHTTPRequestHandler):
        def do_POST(self):
            form = urllib.parse.parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            asked.append((self.path, form["language"][0], form["text"][0]))
            body = json.dumps({"matches": [] if form["text"][0].endswith(".") else [{"message": "x"}]}).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass
    server = HTTPServer(("127.0.0.1", 0), Check)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("UNMASK_LANGUAGETOOL", f"http://127.0.0.1:{server.server_port}")
        w2s = official("words_to_sentence/easy")
        q = w2s.problems("test", 1)[0]
        good = "I throw the ball for my dog at the park."
        assert w2s.graded and w2s.notes() == []
        assert w2s.metrics(good, q) == {"inclusion_score": 1.0, "grammar_score": 1.0, "score": 1.0}
        assert asked == [("/v2/check", "en-US", good)]
        assert w2s.verdict(good[:-1], q) == "ungrammatical" and w2s.verdict("A yard.", q) == "missing words"
        summ = official("paraphrase_summarize/samsum")
        got = summ.metrics("  ", summ.problems("test", 1)[0])
        assert got["grammar_score"] == 0.0 and got["score"] == 0.0 and len(asked) == 3     # none for ""
    finally:
        server.shutdown()
