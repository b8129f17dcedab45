"""The growing BM25 index (:mod:`projections.text_index`) ranks as the reference search over the
candidates alone (:func:`streams.experiences.search.search`), whatever order and batches the
documents came in, whichever documents a query may see."""

from __future__ import annotations

import random

import numpy as np
import pytest

from projections.text_index import TextIndex
from streams.experiences.search import SearchDoc, search

WORDS = ["deploy", "helm", "retry", "retries", "timeout", "kafka", "broker", "duckdb", "index", "build", "builds", "cache", "token",
         "error", "fails", "works", "the", "with", "how", "what", "ünïcode", "café", "東京", "x"]


def corpus(rng: random.Random, n: int) -> list[SearchDoc]:
    def text(k: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, k)))

    return [SearchDoc(f"e{i:04d}", text(8), text(4), text(12), rng.choice(["approved", "approved", "pending", "quarantined"]),
                      tuple(rng.sample(["a", "b", "c"], rng.randint(1, 2)))) for i in range(n)]


@pytest.mark.parametrize("seed", range(6))
def test_ranks_as_the_reference_search(seed: int) -> None:
    rng = random.Random(seed)
    docs = corpus(rng, rng.randint(1, 120))
    index = TextIndex()
    order = docs[:]
    rng.shuffle(order)
    cut = rng.randint(0, len(order))
    for part in (order[:cut], order[cut:]):  # two batches, in another order than the ids
        index.add([d.experience_id for d in part], [d.text() for d in part])
    by_number = [next(d for d in docs if d.experience_id == key) for key in index.keys]
    for _ in range(25):
        q = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        agent = rng.choice([None, "a", "b", "c"])
        quarantined = rng.random() < 0.3
        statuses = {"approved", "quarantined"} if quarantined else {"approved"}
        mask = np.array([d.status in statuses and (agent is None or agent in d.agent_ids) for d in by_number], dtype=bool)
        k = rng.randint(1, 8)
        want = search(docs, q, k=k, agent_id=agent, include_quarantined=quarantined)
        got = index.search(q, mask, k)
        assert [index.keys[n] for n, _s in got] == [h.doc.experience_id for h in want], q
        assert [s for _n, s in got] == pytest.approx([h.score for h in want], rel=1e-5)


def test_a_key_added_again_keeps_its_first_text_and_number() -> None:
    index = TextIndex()
    assert index.add(["a", "b"], ["helm deploy", "kafka broker"]) == [0, 1]
    assert index.add(["b", "c", "c"], ["helm helm", "duckdb", "other"]) == [1, 2, 2]
    assert len(index) == 3 and index.number("c") == 2 and index.number("z") is None
    assert [index.keys[n] for n, _ in index.search("helm", np.ones(3, dtype=bool), 5)] == ["a"]
    assert [index.keys[n] for n, _ in index.search("duckdb", np.ones(3, dtype=bool), 5)] == ["c"]


def test_bad_arguments_are_refused() -> None:
    index = TextIndex()
    index.add(["a"], ["helm"])
    with pytest.raises(ValueError):
        index.search("helm", np.ones(2, dtype=bool), 5)
    with pytest.raises(ValueError):
        index.search("helm", np.ones(1, dtype=bool), 0)
    assert index.search("the how", np.ones(1, dtype=bool), 5) == []  # stopwords only
    assert index.search("helm", np.zeros(1, dtype=bool), 5) == []
