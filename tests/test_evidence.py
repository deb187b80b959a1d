"""utils.evidence on inputs whose answer is known by hand."""

from __future__ import annotations

import json
import math

import pytest

from utils import evidence


def test_claim_seeds_are_zero_to_nine():
    assert evidence.CLAIM_SEEDS == tuple(range(10))


@pytest.mark.parametrize(
    ("wins", "losses", "expected"),
    [
        (10, 0, 2 / 1024),  # 2 * P(X <= 0), X ~ Bin(10, 1/2)
        (9, 1, 2 * 11 / 1024),  # 2 * (1 + 10) / 2**10 = 0.0215
        (8, 2, 2 * 56 / 1024),  # 2 * (1 + 10 + 45) / 2**10 = 0.109
        (5, 5, 1.0),
        (0, 0, 1.0),
        (1, 9, 2 * 11 / 1024),  # symmetric
        (3, 0, 0.25),
    ],
)
def test_sign_test_matches_the_binomial_tail(wins, losses, expected):
    assert evidence.sign_test_p(wins, losses) == pytest.approx(expected, rel=1e-12)


def test_sign_test_refuses_negative_counts():
    with pytest.raises(ValueError, match="wins and losses"):
        evidence.sign_test_p(-1, 3)


def test_spread_median_and_range():
    s = evidence.spread([3.0, 1.0, 2.0, 10.0])
    assert (s.median, s.low, s.high) == (2.5, 1.0, 10.0)
    assert "4 seeds" in str(s)


def test_spread_refuses_nan_and_empty():
    with pytest.raises(ValueError, match="NaN"):
        evidence.spread([1.0, math.nan])
    with pytest.raises(ValueError, match="empty"):
        evidence.spread([])


def test_paired_counts_wins_losses_and_ties():
    p = evidence.paired([1, 2, 3, 4, 5], [0, 2, 4, 3, 1])
    assert (p.wins, p.losses, p.ties) == (3, 1, 1)
    assert p.differences == (1, 0, -1, 1, 4)
    assert p.mean_difference == pytest.approx(1.0)
    assert p.sign_test_p == pytest.approx(evidence.sign_test_p(3, 1))


def test_paired_mappings_must_cover_the_same_seeds():
    with pytest.raises(ValueError, match="same seeds"):
        evidence.paired({0: 1.0, 1: 2.0}, {0: 1.0, 2: 2.0})
    with pytest.raises(ValueError, match="one value per seed"):
        evidence.paired([1.0, 2.0], [1.0])


def test_bootstrap_interval_of_a_constant_is_that_constant():
    assert evidence.bootstrap_mean_interval([0.3] * 10) == pytest.approx((0.3, 0.3))


def test_bootstrap_interval_covers_the_mean_and_excludes_zero_for_a_clear_effect():
    diffs = [0.9, 1.1, 1.0, 1.2, 0.8, 1.05, 0.95, 1.15, 0.85, 1.0]
    low, high = evidence.bootstrap_mean_interval(diffs)
    assert low < sum(diffs) / len(diffs) < high
    assert 0 < low and high < 1.2


def test_bootstrap_interval_includes_zero_when_the_sign_flips():
    low, high = evidence.bootstrap_mean_interval([0.1, -0.1, 0.08, -0.12, 0.02, -0.05, 0.0, 0.07, -0.09, 0.06])
    assert low < 0 < high


def test_run_seeds_collects_metrics_and_checks_the_return_type():
    out = evidence.run_seeds(lambda s: {"x": s * 2, "y": 1}, seeds=[0, 3])
    assert out == {0: {"x": 0.0, "y": 1.0}, 3: {"x": 6.0, "y": 1.0}}
    with pytest.raises(TypeError, match="mapping"):
        evidence.run_seeds(lambda s: s, seeds=[0])


def test_results_round_trip_through_json(tmp_path):
    res = {1: {"acc": 0.5}, 0: {"acc": 0.25}}
    path = evidence.save_results(tmp_path / "r.json", "demo", res, steps=10)
    assert evidence.load_results(path) == {0: {"acc": 0.25}, 1: {"acc": 0.5}}
    assert json.loads(path.read_text())["context"] == {"steps": 10}


def test_claims_recorder_runs_each_record_on_the_claim_seeds(tmp_path, monkeypatch):
    from coursetools import claims

    (tmp_path / "test_claims_99.py").write_text("RECORD = {'99_demo': lambda seed: {'twice': 2 * seed}}\n")
    monkeypatch.setattr(claims, "CLAIMS_DIR", tmp_path)
    out = tmp_path / "out"
    assert claims.main(["99", "--out", str(out)]) == 0
    assert evidence.load_results(out / "99_demo.json") == {s: {"twice": 2.0 * s} for s in evidence.CLAIM_SEEDS}
    assert claims.main(["98", "--out", str(out)]) == 1  # no such chapter: says so and fails


def test_claims_recorder_lists_as_typed(root):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "coursetools.claims", "--list"], cwd=root, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
