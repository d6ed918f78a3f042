from engine.tasks.arith import extract_answer, split_of
from engine.tokenizer import build_tokenizer


def test_problems_deterministic_and_in_range(arith):
    a = arith.problems("test", 50, seed=3)
    assert a == arith.problems("test", 50, seed=3)
    assert a != arith.problems("test", 50, seed=4)
    for p in a:
        nums = [int(t) for t in p.text.split() if t.isdigit()]
        assert all(0 <= n <= 99 for n in nums)
        assert extract_answer(p.solution) == p.answer
        assert 1 <= p.solution.count("=") <= 3


def test_splits_are_disjoint(arith):
    train = {p.prompt for p in arith.problems("train", 3000, seed=0)}
    test = {p.prompt for p in arith.problems("test", 300, seed=0)}
    assert not train & test
    assert all(split_of(p) == "test" for p in test)


def test_checker(arith):
    p = arith.problems("test", 1)[0]
    assert arith.check(p.solution, p)
    assert not arith.check(p.solution.replace(f"Answer : {p.answer}", f"Answer : {p.answer + 1}"), p)
    assert not arith.check("no answer here", p)


def test_tokenizer_plain_text(arith):
    tok = build_tokenizer(arith.vocabulary())
    pieces = tok.convert_ids_to_tokens(tok("Ann has 37 apples. She buys 5 more?").input_ids)
    assert pieces == ["Ann", "has", "3", "##7", "apples", ".", "She", "buys", "5", "more", "?"]
    assert tok.unk_token not in pieces
    p = arith.problems("train", 1)[0]
    assert tok.decode(tok(p.solution).input_ids).replace(" .", ".").split() == p.solution.replace(" .", ".").split()
