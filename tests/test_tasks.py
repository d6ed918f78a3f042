from engine.tasks.arith import extract_answer, split_of
from engine.models.tokenizer import build_tokenizer


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


def test_uncertain_tasks_have_room_for_300_distinct_test_prompts():
    from engine.tasks import get_task
    for name in ("story", "picks"):
        task = get_task(name)
        probs = task.problems("test", 300, seed=0)
        assert len({p.prompt for p in probs}) == 300, name
        assert all(task.check(p.solution, p) for p in probs)


def test_stated_choices_are_checked():
    import random

    from engine.tasks import get_task
    story, picks = get_task("story"), get_task("picks")
    rng = random.Random(0)
    p = next(p for p in iter(lambda: story.sample(rng), None) if story.constrained(p))
    adj = dict(p.answer)["adj"]
    other = next(a for a in ("brave", "small", "clever", "shy", "old", "young") if a != adj)
    assert story.verdict(p.solution, p) == "valid"
    assert story.verdict(p.solution.replace(f"a {adj} ", f"a {other} ", 1), p) == "ignores prompt"
    q = next(q for q in iter(lambda: picks.sample(rng), None) if picks.constrained(q) and len(q.answer) == 1)
    cat, k, need = q.answer[0]
    assert f"with {need}" in q.prompt and need in q.solution
    from engine.tasks.picks import CATEGORIES
    without = sorted(x for x in CATEGORIES[cat] if x != need)[:k]
    assert picks.verdict(" , ".join(without) + " .", q) == "ignores prompt"


def test_training_can_draw_constrained_prompts():
    import random

    from engine.tasks import get_task
    from tools.training.train import draw
    mix, rng = get_task("mix"), random.Random(1)
    drawn = [draw(mix, rng, 1.0) for _ in range(50)]
    assert all(mix.constrained(p) for p in drawn) and {p.task for p in drawn} == {"story", "picks"}


def test_a_problem_is_typed_as_a_person_would_type_it():
    from engine.tasks import Problem
    p = Problem("Q : Ann has 3 pens , 2 red . How many pens ? A :", "5", 5)
    assert p.typed == "Ann has 3 pens, 2 red. How many pens?"
