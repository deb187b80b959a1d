"""Chapter 12's claims on 5 seeds (the notebook asserts the same on seed 0, sections 3.4, 4 and 7).

* ``test_recipe_claims``: the main run of the recipe (400 steps; its copy after 250 steps is the recipe
  arm) and the arms without warm-up and without label smoothing (250 steps each), as the notebook runs
  them. ``ablation_claims`` holds the chapter's statements: after 250 steps the recipe has learned much of
  the task (exact match >= 0.5, token accuracy >= 0.9) and after 400 most of it (>= 0.8, >= 0.95);
  without warm-up exact match is lower; without label smoothing the confidence is higher (by > 0.03),
  the held-out NLL lower and the calibration error lower, while with it the model is under-confident.
* ``test_language_model_claims``: section 7's language model ends its 150 steps 2 nats or more below a
  uniform guess, and its greedy text repeats far more than sampled text.
* ``test_dropout_and_tying_claims``: the arms without dropout and with untied embeddings (250 steps), which
  the notebook does not run. They would take the suite past its time budget, so they run only when
  ``CLAIMS_12_ALL_ARMS=1`` is set; the chapter quotes them as measured that way, not as checked by CI.
"""

from __future__ import annotations

import os

import pytest
import torch

from utils.generation import WordVocab, course_text, language_model_claims, repetition_measure, train_gpt
from utils.transformer import ablation_claims, recipe_ablation

pytestmark = [pytest.mark.claims, pytest.mark.usefixtures("one_thread")]

MAIN_STEPS, ABLATION_STEPS, GPT_STEPS = 400, 250, 150  # the notebook's values (FULL_RUN = False)


def _check(seed: int, results: dict[str, dict[str, float]]) -> None:
    claims = ablation_claims(results)
    failed = [claim for claim, holds in claims.items() if not holds]
    summary = {arm: {k: round(v, 3) for k, v in r.items()} for arm, r in results.items()}
    print(f"seed {seed}: {summary}")  # shown with pytest -s: the figures the chapter quotes
    assert not failed, f"seed {seed}: {failed} do not hold; {summary}"


@pytest.mark.parametrize("seed", range(5))
def test_recipe_claims(seed):
    results = recipe_ablation(seed, arms=("recipe", "no label smoothing", "no warm-up"), steps=ABLATION_STEPS,
                              main_steps=MAIN_STEPS, test_size=500)
    assert set(results) == {"main", "recipe", "no label smoothing", "no warm-up"}
    _check(seed, results)


@pytest.mark.parametrize("seed", range(5))
def test_language_model_claims(seed):
    text = course_text()
    vocab = WordVocab(text)
    gpt, losses = train_gpt(torch.tensor(vocab.encode(text)), len(vocab), seed=seed, steps=GPT_STEPS)
    repetition = repetition_measure(gpt, torch.tensor([vocab.encode("the attention")]), new_tokens=100)
    claims = language_model_claims(losses, len(vocab), repetition)
    print(f"seed {seed}: final loss {sum(losses[-20:]) / 20:.2f}, distinct bigrams {repetition}")
    failed = [claim for claim, holds in claims.items() if not holds]
    assert not failed, f"seed {seed}: {failed} do not hold; final loss {sum(losses[-20:]) / 20:.2f}, {repetition}"


@pytest.mark.skipif(os.environ.get("CLAIMS_12_ALL_ARMS") != "1",
                    reason="the dropout and untied arms run only with CLAIMS_12_ALL_ARMS=1 (about a minute more)")
@pytest.mark.parametrize("seed", range(5))
def test_dropout_and_tying_claims(seed):
    results = recipe_ablation(seed, arms=("recipe", "no dropout", "untied embeddings"), steps=ABLATION_STEPS,
                              test_size=500)
    _check(seed, results)
