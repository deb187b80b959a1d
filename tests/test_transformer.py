"""utils.transformer (chapter 12): the date task, the assembled model, the recipe and decoding."""

from __future__ import annotations

import datetime
import math

import pytest
import torch
import torch.nn.functional as F

from utils.tolerances import assert_close
from utils.transformer import (
    ABLATIONS,
    BOS,
    DATE_FORMATS,
    EOS,
    PAD,
    SRC_LEN,
    TGT_LEN,
    TOKEN_ID,
    VOCAB,
    Transformer,
    ablation_claims,
    average_checkpoints,
    averaged_steps,
    beam_search,
    corpus_bleu,
    count_parameters,
    date_examples,
    date_source,
    date_target,
    detokenize,
    encode_pairs,
    held_out_set,
    is_held_out,
    noam_rate,
    number_words,
    ordinal_words,
    recipe_ablation,
    score_translator,
    sequence_log_prob,
    smoothing_optimum,
    split_dates,
    tokenize_source,
    train_translator,
    training_batches,
    year_words,
)
from utils.transformer_blocks import greedy_decode

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(**kw) -> Transformer:
    torch.manual_seed(0)
    return Transformer(len(VOCAB), **kw).eval()


# ------------------------------------------------------------------ the task
@pytest.mark.parametrize("year, words", [
    (1999, "nineteen ninety nine"), (1905, "nineteen oh five"), (1900, "nineteen hundred"),
    (2000, "two thousand"), (2004, "two thousand and four"), (2010, "twenty ten"), (2024, "twenty twenty four"),
    (2099, "twenty ninety nine"),
])
def test_year_words(year, words):
    assert " ".join(year_words(year)) == words


def test_number_and_ordinal_words():
    assert number_words(0) == ["zero"] and number_words(40) == ["forty"] and number_words(99) == ["ninety", "nine"]
    assert ordinal_words(1) == ["first"] and ordinal_words(20) == ["twentieth"]
    assert ordinal_words(22) == ["twenty", "second"] and ordinal_words(30) == ["thirtieth"]
    assert ordinal_words(31) == ["thirty", "first"]


@pytest.mark.parametrize("call, match", [
    (lambda: number_words(100), "n must be an int in 0..99"),
    (lambda: number_words(2.0), "n must be an int"),
    (lambda: ordinal_words(0), "day must be an int in 1..31"),
    (lambda: year_words(1899), "year must be an int in 1900..2099"),
    (lambda: year_words(True), "year must be an int"),
    (lambda: date_source(datetime.date(1850, 1, 1), 0), "date must be between"),
    (lambda: date_source(datetime.date(1950, 1, 1), 9), "fmt must be an int in 0..8"),
    (lambda: date_target(datetime.date(1950, 1, 1), -1), "fmt must be an int in 0..8"),
    (lambda: split_dates("valid"), "split must be 'train' or 'test'"),
    (lambda: date_examples(0, torch.Generator()), "n must be an int >= 1"),
    (lambda: date_examples(3, 0), "generator must be a torch.Generator"),
    (lambda: encode_pairs([]), "at least one"),
    (lambda: encode_pairs([(["march"] * 11, ["1"])]), "a source has 1..10 tokens"),
    (lambda: encode_pairs([(["march", "hello"], ["1"])]), "not in the vocabulary"),
    (lambda: tokenize_source("march 21, 1999 please"), "unknown word 'please'"),
    (lambda: tokenize_source(""), "a source has 1..10 tokens"),
    (lambda: tokenize_source(1999), "text must be a string"),
    (lambda: detokenize([3, 1000]), "ids must be ints in 0..93"),
])
def test_task_functions_reject_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_date_type_is_checked():
    with pytest.raises(TypeError, match="date must be a datetime.date"):
        date_source("1999-03-21", 0)


def test_every_format_fits_and_targets_are_iso():
    for ordinal in range(datetime.date(1900, 1, 1).toordinal(), datetime.date(2099, 12, 31).toordinal() + 1, 97):
        date = datetime.date.fromordinal(ordinal)
        for fmt, (_, keep) in enumerate(DATE_FORMATS):
            source, target = date_source(date, fmt), date_target(date, fmt)
            assert 1 <= len(source) <= SRC_LEN and len(target) + 1 <= TGT_LEN
            assert "".join(target) == date.isoformat()[: {"day": 10, "month": 7, "year": 4}[keep]]
            assert source != target  # no format is already the answer: copying fails
            assert all(t in TOKEN_ID for t in source + target)


def test_splits_are_disjoint_and_held_out_is_about_five_percent():
    train, test = set(split_dates("train")), set(split_dates("test"))
    assert not train & test and len(train) + len(test) == 73_049
    assert 0.04 < len(test) / 73_049 < 0.06
    assert all(is_held_out(datetime.date.fromordinal(o)) for o in list(test)[:100])


def test_examples_are_deterministic_and_well_formed():
    a = date_examples(16, torch.Generator().manual_seed(3))
    b = date_examples(16, torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    src, tgt_in, tgt_out = a
    assert src.shape == (16, SRC_LEN) and tgt_in.shape == tgt_out.shape == (16, TGT_LEN)
    assert (tgt_in[:, 0] == BOS).all() and ((tgt_out == EOS).sum(1) == 1).all()
    assert torch.equal(tgt_in[:, 1:][tgt_out[:, :-1] != EOS], tgt_out[:, :-1][tgt_out[:, :-1] != EOS])
    held = held_out_set(50)
    assert all(torch.equal(x, y) for x, y in zip(held, held_out_set(50)))


def test_tokenize_and_detokenize():
    assert tokenize_source("March 21, 1999") == ["march", "2", "1", ",", "1", "9", "9", "9"]
    assert tokenize_source("21.03.1999")[:3] == ["2", "1", "."]
    ids = [BOS] + [TOKEN_ID[c] for c in "1999-03-21"] + [EOS, PAD, TOKEN_ID["7"]]
    assert detokenize(ids) == "1999-03-21" and detokenize(torch.tensor(ids)) == "1999-03-21"


# ------------------------------------------------------------------ the model
def test_model_shapes_and_tied_parameters():
    model = _model()
    src, tgt_in, _ = date_examples(4, torch.Generator().manual_seed(0))
    logits = model(src, tgt_in)
    assert logits.shape == (4, TGT_LEN, len(VOCAB))
    assert model.src_embed.weight is model.tgt_embed.weight
    untied = _model(tied=False)
    assert count_parameters(untied) - count_parameters(model) == 2 * len(VOCAB) * 32
    memory, allowed = model.encode(src)
    logits2, weights = model.decode(tgt_in, memory, allowed, need_weights=True)
    assert_close(logits2, logits, what="need_weights path vs SDPA", kernel="fused")
    assert weights[0].shape == (4, TGT_LEN, SRC_LEN)
    assert torch.allclose(weights[0].sum(-1), torch.ones(4, TGT_LEN))  # each row a distribution
    assert (weights[0][~allowed[:, 0, 0, :].unsqueeze(1).expand_as(weights[0])] == 0).all()  # no weight on padding


def test_the_model_is_built_from_chapter_6s_blocks_with_residual_dropout_only():
    """One encoder layer and one decoder layer in the course (issue 26): chapter 12 defines no layer of its
    own but stacks chapter 6's blocks, Post-LN, dropping only each sub-layer's output (the paper's section
    5.4) and the embedding sums; the attention weights it returns in train mode are undropped distributions."""
    import ast
    from pathlib import Path

    from utils.transformer_blocks import DecoderBlock, EncoderBlock

    module = Path(__file__).resolve().parents[1] / "utils" / "transformer.py"
    classes = [n.name for n in ast.parse(module.read_text()).body if isinstance(n, ast.ClassDef)]
    assert classes == ["Transformer"], f"utils/transformer.py defines layers of its own: {classes}"
    model = Transformer(len(VOCAB), num_layers=2, dropout=0.2)
    assert [type(m) for m in model.encoder] == [EncoderBlock] * 2 and [type(m) for m in model.decoder] == [DecoderBlock] * 2
    for block in [*model.encoder, *model.decoder]:
        assert not block.norm_first
        residual = [getattr(block, f"dropout{i}").p for i in range(1, block.n_norms + 1)]
        assert residual == [0.2] * block.n_norms and block.ffn.dropout.p == 0.0
        assert all(m.dropout == 0.0 for m in block.modules() if hasattr(m, "num_heads")), "attention weights dropped"
    src, tgt_in, _ = date_examples(3, torch.Generator().manual_seed(2))
    memory, allowed = model.train().encode(src)
    _, weights = model.decode(tgt_in, memory, allowed, need_weights=True)
    assert torch.allclose(weights[1].sum(-1), torch.ones(3, TGT_LEN))


def test_decoder_is_causal_and_ignores_source_padding():
    model = _model()
    src, tgt_in, _ = date_examples(2, torch.Generator().manual_seed(1))
    base = model(src, tgt_in)
    changed = tgt_in.clone()
    changed[:, 5:] = TOKEN_ID["7"]
    assert torch.allclose(model(src, changed)[:, :5], base[:, :5], atol=1e-6)  # the future cannot leak
    wider = F.pad(src, (0, 3), value=PAD)  # more padding columns: nothing may change
    assert torch.allclose(model(wider, tgt_in), base, atol=1e-6)


@pytest.mark.parametrize("kwargs, match", [
    ({"d_model": 30, "num_heads": 4}, "divisible by num_heads"),
    ({"d_model": 0}, "d_model must be an int >= 1"),
    ({"dropout": 1.0}, r"dropout must be a probability in \[0, 1\)"),
    ({"dropout": "0.1"}, r"dropout must be a probability in \[0, 1\), got '0.1'"),
    ({"pad_id": -1}, r"pad_id must be a token id in 0\.\.93, got -1"),  # a review: accepted, nothing masked
    ({"pad_id": 500}, r"pad_id must be a token id in 0\.\.93, got 500"),
])
def test_model_rejects_bad_configuration(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Transformer(len(VOCAB), **kwargs)


def test_a_size_that_is_not_an_int_is_a_type_error_naming_it():
    """Chapter 12 checks its sizes with chapter 6's check (utils.validate.int_at_least): a float where a count
    belongs is a TypeError that names the argument and what it got, as in chapter 6's blocks."""
    with pytest.raises(TypeError, match="num_layers must be an int, got float 1.5"):
        Transformer(len(VOCAB), num_layers=1.5)
    with pytest.raises(TypeError, match="warmup must be an int, got float 2.5"):
        noam_rate(1, 32, 2.5)
    with pytest.raises(TypeError, match="n must be an int, got str '3'"):
        date_examples("3", torch.Generator())


def test_tied_must_be_a_bool_and_decode_names_its_own_arguments():
    """A review: tied="no" built a tied model (a truthy string), and decode's errors named the blocks' arguments
    (memory_allowed, y) instead of the caller's (src_allowed, tgt_in's batch)."""
    with pytest.raises(TypeError, match="tied must be True or False, got 'no'"):
        Transformer(len(VOCAB), tied="no")
    model = _model()
    src, tgt_in, _ = date_examples(2, torch.Generator().manual_seed(3))
    memory, allowed = model.encode(src)
    with pytest.raises(ValueError, match=r"src_allowed must be encode's boolean mask of shape \(B, 1, 1, T_src\)"):
        model.decode(tgt_in, memory, allowed.long())
    with pytest.raises(ValueError, match=r"src_allowed must be encode's boolean mask"):
        model.decode(tgt_in, memory, allowed[:, 0])
    with pytest.raises(ValueError, match=r"memory must be encode's \(B, T_src, d_model\) = \(2, T_src, 32\) for tgt_in's batch"):
        model.decode(tgt_in, memory[:1], allowed[:1])


def test_model_rejects_bad_tokens():
    model = _model()
    with pytest.raises(ValueError, match="2-D int64"):
        model.encode(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="ids outside"):
        model.encode(torch.full((1, 3), len(VOCAB)))
    with pytest.raises(TypeError, match="must be a tensor"):
        model.encode([[1, 2]])
    with pytest.raises(ValueError, match="longer than max_len"):
        model.encode(torch.ones(1, 65, dtype=torch.long))


# ------------------------------------------------------------------ the recipe
def test_noam_rate():
    assert noam_rate(4000, 512, 4000) == pytest.approx(512**-0.5 * 4000**-0.5)
    assert noam_rate(1, 512, 4000) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert noam_rate(1, 32, 100, use_warmup=False) == noam_rate(100, 32, 100)
    assert noam_rate(400, 32, 100, use_warmup=False) == noam_rate(400, 32, 100)
    for bad in ({"step": 0}, {"d_model": -1}, {"warmup": 0}):
        args = {"step": 1, "d_model": 32, "warmup": 10} | bad
        with pytest.raises(ValueError, match=f"{next(iter(bad))} must be an int >= 1"):
            noam_rate(**args)


def test_training_is_reproducible_and_snapshots_match_a_shorter_run():
    model_a, hist_a, snaps = train_translator(seed=3, steps=6, snapshot_at=(3,))
    model_b, hist_b, _ = train_translator(seed=3, steps=3)
    assert hist_a["loss"][:3] == hist_b["loss"]
    assert all(torch.equal(snaps[3][k], v) for k, v in model_b.state_dict().items())
    assert hist_a["lr"][0] == pytest.approx(noam_rate(1, 32, 100)) and not model_a.training
    with pytest.raises(ValueError, match=r"label_smoothing must be a probability in \[0, 1\), got 1.0"):
        train_translator(steps=1, label_smoothing=1.0)
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        train_translator(steps=0)


def test_score_translator_on_perfect_and_copied_outputs():
    model = _model()
    data = held_out_set(20)
    perfect = score_translator(model, data, decoded=data[2])
    assert perfect["exact"] == 1.0 and perfect["token"] == 1.0
    assert 0.0 <= perfect["ece"] <= 1.0 and 0 < perfect["confidence"] <= 1
    with pytest.raises(ValueError, match="shape of the targets"):
        score_translator(model, data, decoded=data[2][:, :3])


def test_ablation_function_validates_arms_and_claims_read_results():
    with pytest.raises(ValueError, match="unknown arms"):
        recipe_ablation(0, arms=("recipe", "no adam"))
    good = {"exact": 0.8, "token": 0.97, "confidence": 0.9, "teacher_accuracy": 0.98, "nll": 0.1, "ece": 0.07}
    results = {"recipe": good, "no warm-up": good | {"exact": 0.01},
               "no label smoothing": good | {"confidence": 0.96, "nll": 0.08, "ece": 0.01}}
    assert all(ablation_claims(results).values())
    assert set(ABLATIONS) == {"recipe", "no label smoothing", "no warm-up", "no dropout", "untied embeddings"}


# ------------------------------------------------------------------ decoding
def test_beam_width_one_is_greedy_and_beam_finds_at_least_as_likely_outputs_on_average():
    model, _, _ = train_translator(seed=0, steps=40)
    src = held_out_set(64)[0]
    greedy = greedy_decode(model, src, TGT_LEN)
    beam1, logp1 = beam_search(model, src, beam_size=1, alpha=0.0)
    assert torch.equal(beam1, greedy)
    assert torch.allclose(logp1, sequence_log_prob(model, src, greedy), atol=1e-4)
    beam4, logp4 = beam_search(model, src, beam_size=4, alpha=0.0)
    assert torch.allclose(logp4, sequence_log_prob(model, src, beam4), atol=1e-4)
    assert logp4.mean() >= logp1.mean() - 1e-6
    assert ((beam4 == EOS).sum(1) <= 1).all()  # at most one EOS, then padding
    after_eos = (beam4 == EOS).cumsum(1).bool() & (beam4 != EOS)
    assert (beam4[after_eos] == PAD).all()


def test_beam_search_never_proposes_pad_or_bos_and_scores_its_output_as_sequence_log_prob():
    """Library review S2b: on tiny random models (5 ids, a random output layer) the best beam held PAD or
    BOS before EOS on 23 of these 40 models; a live hypothesis may not continue with either."""
    for seed in range(40):
        torch.manual_seed(seed)
        model = Transformer(5, d_model=8, num_heads=2, d_ff=16, num_layers=1, dropout=0.0, max_len=16,
                            tied=False).eval()
        with torch.no_grad():
            model.out_proj.weight.normal_(0.0, 1.0)
        src = torch.randint(3, 5, (2, 4))
        for k, alpha in ((1, 0.0), (4, 0.6)):
            out, log_prob = beam_search(model, src, beam_size=k, alpha=alpha, max_len=3)
            before_eos = (out == EOS).cumsum(1) == 0  # (B, T): the tokens before the first EOS
            assert not ((out == PAD) | (out == BOS))[before_eos].any(), (seed, k, out.tolist())
            assert_close(log_prob, sequence_log_prob(model, src, out), what=f"seed {seed}, beam {k}: score")


@pytest.mark.parametrize("kwargs, match", [
    ({"beam_size": 0}, "beam_size must be an int >= 1"),
    ({"alpha": -0.1}, "alpha must be a number >= 0"),
    ({"max_len": 0}, "max_len must be an int >= 1"),
])
def test_beam_search_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        beam_search(_model(), held_out_set(2)[0], **kwargs)


def test_chapter_6_greedy_decode_works_with_this_model():
    model = _model()
    out = greedy_decode(model, held_out_set(8)[0], 5)
    assert out.shape == (8, 5)


def test_cross_entropy_label_smoothing_convention_is_the_papers():
    """PyTorch's label_smoothing spreads epsilon over all K classes, the correct one included."""
    logits = torch.randn(5, 7, dtype=torch.float64)
    target = torch.tensor([0, 3, 6, 2, 2])
    q = torch.full((5, 7), 0.1 / 7, dtype=torch.float64)
    q[torch.arange(5), target] += 0.9
    manual = -(q * logits.log_softmax(-1)).sum(-1).mean()
    assert torch.allclose(F.cross_entropy(logits, target, label_smoothing=0.1), manual)


def test_shared_batches_give_the_same_run_and_are_validated():
    batches = training_batches(5, 4)
    assert len(batches) == 4 and batches[0][0].shape == (64, SRC_LEN)
    _, hist_shared, _ = train_translator(seed=5, steps=4, batches=batches)
    _, hist_own, _ = train_translator(seed=5, steps=4)
    assert hist_shared["loss"] == hist_own["loss"]  # the same examples, drawn from the same seed
    with pytest.raises(ValueError, match="fewer than steps=5"):
        train_translator(seed=5, steps=5, batches=batches)
    with pytest.raises(ValueError, match="steps must be an int >= 1"):
        training_batches(0, 0)


def test_recipe_ablation_main_run_and_its_validation():
    with pytest.raises(ValueError, match="main_steps must be an int >= 3"):
        recipe_ablation(0, arms=("recipe",), steps=3, main_steps=2)
    results = recipe_ablation(0, arms=("recipe",), steps=2, main_steps=3, test_size=8)
    assert set(results) == {"main", "recipe"}  # too short a run to average its last checkpoints
    model, _, _ = train_translator(seed=0, steps=2)
    assert results["recipe"] == score_translator(model, held_out_set(8)) | {"parameters": count_parameters(model)}


def test_translation_widget_saves_a_note_and_says_when_it_cannot_translate():
    from utils.widgets import PLACEHOLDER
    from utils.widgets.whole_transformer import translation_widget

    widget = translation_widget(_model(), "march 21, 1999")
    assert widget._repr_mimebundle_()["text/plain"] == PLACEHOLDER
    box, readout = widget.children[0].children[0], widget.children[1]
    assert box.style.description_width == "initial" and "march 2 1 , 1 9 9 9" in readout.value
    box.value = "march 21, 1999 gizmo"
    assert "cannot translate" in readout.value and "gizmo" in readout.value


def test_sequence_log_prob_counts_every_token_up_to_eos_and_matches_beam_search():
    model, _, _ = train_translator(seed=1, steps=5)
    src = held_out_set(4)[0]
    ids = torch.tensor([[5, PAD, 7, EOS, PAD, PAD], [5, 6, 7, 8, 9, 10]])
    ids = ids.repeat(2, 1)
    tgt_in = torch.cat([torch.full_like(ids[:, :1], BOS), ids[:, :-1]], 1)
    log_p = model(src, tgt_in).log_softmax(-1).gather(-1, ids[..., None])[..., 0]
    got = sequence_log_prob(model, src, ids)
    assert torch.allclose(got[0], log_p[0, :4].sum(), atol=1e-5)  # the PAD before EOS counts; after EOS nothing
    assert torch.allclose(got[1], log_p[1].sum(), atol=1e-5)  # no EOS: every token
    with pytest.raises(ValueError, match="decoded holds ids outside"):
        sequence_log_prob(model, src, torch.full((4, 3), len(VOCAB)))


def test_corpus_bleu_on_hand_computed_cases():
    assert corpus_bleu([[1, 2, 3, 4, 5]], [[1, 2, 3, 4, 5]]) == 1.0
    # precisions 4/5, 3/4, 2/3, 1/2: their geometric mean is (1/5) ** (1/4); equal lengths, no brevity penalty
    assert corpus_bleu([[1, 2, 3, 4, 5]], [[1, 2, 3, 4, 6]]) == pytest.approx(5 ** -0.25, rel=1e-12)
    assert corpus_bleu([[1, 2, 3, 4]], [[1, 2, 3, 4, 5]]) == pytest.approx(math.exp(1 - 5 / 4), rel=1e-12)
    assert corpus_bleu([[1, 2, 3, 9]], [[1, 2, 3, 4]]) == 0.0  # no matching 4-gram
    assert corpus_bleu([[7, 7, 7, 7]], [[7, 1, 2, 3]], max_n=1) == pytest.approx(0.25)  # clipped counts
    with pytest.raises(ValueError, match="one reference per hypothesis"):
        corpus_bleu([[1]], [])


def test_checkpoint_averaging_and_the_smoothing_optimum():
    a = {"w": torch.tensor([1.0, 3.0]), "n": torch.tensor(2)}
    b = {"w": torch.tensor([3.0, 5.0]), "n": torch.tensor(4)}
    mean = average_checkpoints([a, b])
    assert torch.equal(mean["w"], torch.tensor([2.0, 4.0])) and int(mean["n"]) == 4
    assert averaged_steps(400) == (360, 370, 380, 390, 400)
    with pytest.raises(ValueError, match="snapshots is empty"):
        average_checkpoints([])
    assert smoothing_optimum(0.1, 94) == pytest.approx(0.9 + 0.1 / 94)
    with pytest.raises(ValueError, match="epsilon must be in"):
        smoothing_optimum(1.0, 94)


def test_train_translator_refuses_what_would_train_the_wrong_model():
    """A review of issue 26: train_translator(**architecture) passed pad_id=5 on (the model then masked token 5 while
    the data pads with 0), a typo reached Transformer after the batches were drawn, use_warmup="no" turned
    warm-up on, and snapshot_at beyond the run returned nothing."""
    for bad, error, match in (
        ({"pad_id": 5}, TypeError, r"unexpected keyword arguments \['pad_id'\]"),
        ({"vocab_size": 10}, TypeError, r"unexpected keyword arguments \['vocab_size'\]"),
        ({"sede": 3}, TypeError, r"unexpected keyword arguments \['sede'\]: besides its own it takes only"),
        ({"use_warmup": "no"}, TypeError, "use_warmup must be True or False, got 'no'"),
        ({"snapshot_at": 5}, ValueError, r"snapshot_at must be a tuple of steps in 1\.\.2, got 5"),
        ({"snapshot_at": (3,)}, ValueError, r"snapshot_at must be a tuple of steps in 1\.\.2, got \(3,\)"),
        ({"seed": "a"}, TypeError, "seed must be an int, got str"),
    ):
        with pytest.raises(error, match=match):
            train_translator(steps=2, batch=2, **bad)
    with pytest.raises(TypeError, match="use_warmup must be True or False, got 'no'"):
        noam_rate(1, 32, 100, "no")
