"""The learner self-checks: right answers pass, wrong ones get a clear message, nothing raises."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from utils import checks

EXPECTED = torch.tensor([[0.25, 0.75], [0.5, 0.5]])


def test_close_passes_on_equal_tensor():
    assert checks.close(EXPECTED.clone(), EXPECTED).ok


@pytest.mark.parametrize(
    ("got", "fragment"),
    [
        (None, "got None. Did you forget to `return`?"),
        ([[0.25, 0.75], [0.5, 0.5]], "expected a torch.Tensor, got list"),
        (np.array([[0.25, 0.75], [0.5, 0.5]]), "torch.from_numpy"),
        (lambda: 1, "got a function. Did you forget to call it?"),
        (torch.zeros(2), "expected shape (2, 2), got (2,)"),
        (EXPECTED.double(), "expected dtype torch.float32, got torch.float64"),
        (torch.tensor([[0.25, float("nan")], [0.5, 0.5]]), "contains NaN (1 entries), the first at index (0, 1)"),
        (torch.tensor([[0.25, 0.75], [0.5, 0.6]]), "the first at index (1, 1): expected 0.5, got 0.6"),
    ],
)
def test_close_explains_what_is_wrong(got, fragment):
    verdict = checks.close(got, EXPECTED, name="weights")
    assert not verdict.ok
    assert fragment in verdict.message
    assert verdict.message.startswith("weights: ")


def test_close_reports_device_mismatch_without_comparing_across_devices():
    expected = EXPECTED
    got = EXPECTED.to("meta")  # a tensor on another device; values unreadable
    verdict = checks.close(got, expected)
    assert not verdict.ok and "got one on meta" in verdict.message


def test_tensor_subclass_cannot_fake_equality():
    class Liar(torch.Tensor):
        def __eq__(self, other):  # noqa: D105
            return True

    wrong = torch.zeros(2, 2).as_subclass(Liar)
    assert not checks.close(wrong, EXPECTED).ok


def test_number_and_choice():
    assert checks.number(4.0, 4.0).ok
    assert checks.number(torch.tensor(4.0), 4.0).ok
    assert "expected 4, got 5" in checks.number(5, 4.0).message
    assert "expected a number, got None" in checks.number(None, 4.0).message
    assert not checks.number(True, 1.0).ok  # a bool is not an answer
    assert "NaN" in checks.number(float("nan"), 1.0).message
    assert checks.choice(" C ", "c", ["a", "b", "c"]).ok
    assert "expected one of 'a', 'b', 'c'" in checks.choice("z", "c", ["a", "b", "c"]).message
    assert "is not right" in checks.choice("a", "c", ["a", "b", "c"]).message


def test_exercise_reports_each_outcome(capsys):
    def stub():
        raise NotImplementedError("Exercise 9.9: not attempted yet")

    def crashes():
        return [1, 2][5]

    checks.exercise("9.1", lambda: checks.close(EXPECTED, EXPECTED))
    checks.exercise("9.2", lambda: checks.close(stub(), EXPECTED))
    checks.exercise("9.3", lambda: checks.close(crashes(), EXPECTED))
    checks.exercise("9.4", lambda: checks.close(torch.ones(2, 2), EXPECTED))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Exercise 9.1: passed"
    assert lines[1] == "Exercise 9.2: not attempted yet"
    assert lines[2].startswith("Exercise 9.3: not yet. your code raised IndexError: list index out of range")
    assert "return [1, 2][5]" in lines[2]  # points at the learner's line, not at library code
    assert lines[3].startswith("Exercise 9.4: not yet. your result: 4 of 4 entries differ")
    assert checks.RESULTS["9.1"] == "passed" and checks.RESULTS["9.2"] == "not attempted"
    assert checks.RESULTS["9.3"] == "failed"


def test_require_raises_assertion_with_the_message():
    checks.require(lambda: checks.number(2.0, 2.0))
    with pytest.raises(AssertionError, match="expected 2, got 3"):
        checks.require(lambda: checks.number(3.0, 2.0))
    with pytest.raises(AssertionError, match="not attempted yet"):
        checks.require(lambda: checks.number((_ for _ in ()).throw(NotImplementedError()), 2.0))


class Weird:
    """An object that fails at everything a comparison might try."""

    def __repr__(self):
        raise RuntimeError("repr exploded")

    def __eq__(self, other):
        raise RuntimeError("eq exploded")

    def __float__(self):
        raise RuntimeError("float exploded")

    __hash__ = None


anything = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.lists(st.floats(allow_nan=True), max_size=5),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=3),
    st.just(print),
    st.just(np.zeros((2, 2))),
    st.builds(
        lambda shape, dtype, fill: torch.full(shape, fill).to(dtype),
        st.lists(st.integers(0, 3), max_size=3).map(tuple),
        st.sampled_from([torch.float32, torch.float64, torch.int64, torch.bool, torch.complex64]),
        st.floats(allow_nan=True, allow_infinity=True, width=32),
    ),
)


def test_an_object_that_breaks_repr_eq_and_float_gets_a_message():
    weird = Weird()
    for verdict in (checks.close(weird, EXPECTED), checks.number(weird, 1.0), checks.choice(weird, "a", ["a"])):
        assert not verdict.ok and "Weird" in verdict.message


@settings(max_examples=300, deadline=None)
@given(got=anything)
def test_checks_never_raise_and_never_pass_wrong_input(got):
    for verdict in (
        checks.close(got, EXPECTED, name="x"),
        checks.number(got, 0.123456, name="x"),
        checks.choice(got, "b", ["a", "b"], name="x"),
    ):
        assert isinstance(verdict, checks.Verdict)
        assert isinstance(verdict.message, str) and verdict.message
    assert not checks.close(got, EXPECTED).ok  # none of these equals EXPECTED


@settings(max_examples=100, deadline=None)
@given(exc=st.sampled_from([ValueError, TypeError, RuntimeError, ZeroDivisionError, KeyError, AssertionError]),
       text=st.text(max_size=30))
def test_exercise_turns_any_learner_exception_into_one_line(exc, text):
    def learner():
        raise exc(text)

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        checks.exercise("0.1", lambda: checks.close(learner(), EXPECTED))
    out = buffer.getvalue()
    assert out.startswith(f"Exercise 0.1: not yet. your code raised {exc.__name__}")
    assert "Traceback" not in out


# --- multiple-choice predictions (issue 24, 01-T2): the visible check records, the hidden test grades ---


def test_a_prediction_gets_the_same_message_for_every_valid_option(capsys):
    """Trying each option in turn reveals nothing: every valid option (any case, spaces) prints one line."""
    options = ["a", "b", "c", "d"]
    lines = set()
    for got in ["a", "b", "c", "d", "B", " c "]:
        verdict = checks.prediction(got, options)
        assert verdict.ok and checks.RECORDED in verdict.message, verdict
        checks.exercise("9.9", lambda got=got: checks.prediction(got, options))
        lines.add(capsys.readouterr().out)
    assert len(lines) == 1, lines
    (line,) = lines
    assert "not yet" not in line and "passed" not in line and "recorded" in line, line
    assert checks.RESULTS["9.9"] == "recorded"


@pytest.mark.parametrize(("got", "fragment"), [("e", "expected one of"), ("b and c", "expected one of"),
                                                (2, "as a string"), (None, "as a string")])
def test_a_prediction_of_the_wrong_form_is_refused(got, fragment):
    verdict = checks.prediction(got, ["a", "b", "c", "d"])
    assert not verdict.ok and fragment in verdict.message, verdict


def test_a_number_prediction_gets_the_same_message_for_every_number(capsys):
    """Exercise red team F3: a predicted count (2 effective items, 7 uniform rows) confirmed by a digest is found
    by trying 1, 2, 3, ...; check.prediction(got, number=True) records any finite number alike."""
    lines = set()
    for got in [0, 2, 7.0, -3.5, 1e9, torch.tensor(2.0)]:
        verdict = checks.prediction(got, number=True)
        assert verdict.ok and checks.RECORDED in verdict.message, verdict
        checks.exercise("9.8", lambda got=got: checks.prediction(got, number=True))
        lines.add(capsys.readouterr().out)
    assert len(lines) == 1 and "recorded" in next(iter(lines)), lines
    for got, said in [(None, "expected a number, got None"), ("2", "expected a number, got str"),
                      (float("nan"), "got NaN"), (float("inf"), "expected a finite number")]:
        verdict = checks.prediction(got, number=True)
        assert not verdict.ok and said in verdict.message, verdict
    with pytest.raises(AssertionError, match="form check cannot grade"):
        checks.require(lambda: checks.prediction(2, number=True))
    for wrong_call in (lambda: checks.prediction(2), lambda: checks.prediction("a", ["a"], number=True)):
        with pytest.raises(TypeError, match="options .* or number=True"):
            wrong_call()


def test_the_hidden_choice_test_still_grades_a_recorded_prediction():
    """check.require over check.choice (the hidden test) rejects a wrong option the visible check records."""
    assert checks.prediction("a", ["a", "b"]).ok
    with pytest.raises(AssertionError, match="is not right"):
        checks.require(lambda: checks.choice("a", "b", ["a", "b"]))
    with pytest.raises(AssertionError, match="form check cannot grade"):
        checks.require(lambda: checks.prediction("b", ["a", "b"]))  # a form check never counts as a grade
    checks.require(lambda: checks.choice("b", "b", ["a", "b"]))


def test_the_hand_in_check_counts_a_recorded_prediction_as_answered():
    from coursetools import handin

    assert handin.RECORDED == checks.RECORDED
    message = checks.prediction("a", ["a", "b"]).message
    assert handin._ready(message) and handin._ready(checks.choice_form("a", ["a", "b"]).message)
    assert handin._ready("passed") and not handin._ready("not yet. your choice: 'e' is not one of the options")


def test_predicted_gates_the_result_on_the_prediction(capsys):
    """The cell that shows a prediction's result runs only once the prediction is made; a stub or a broken
    answer gets a one-line reminder naming the exercise, never a traceback."""
    def stub():
        raise NotImplementedError("Exercise 1.4: not attempted yet")

    def broken():
        return undefined_name  # noqa: F821 - the learner's NameError

    assert checks.predicted(stub, "1.4") is False
    assert capsys.readouterr().out == "Make your prediction in Exercise 1.4 first; then run this cell.\n"
    assert checks.predicted(broken, "2.3") is False
    assert capsys.readouterr().out == "Exercise 2.3's answer raised NameError: fix it first; then run this cell.\n"
    assert checks.predicted(lambda: "b", "1.4") is True and capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("answer", "form", "said"),
    [
        (lambda: None, {"options": ["a", "b", "c"]}, "expected one of 'a', 'b', 'c' as a string, got None"),
        (lambda: "e", {"options": ["a", "b", "c"]}, "expected one of 'a', 'b', 'c', got 'e'"),
        (lambda: 2, {"options": ["a", "b", "c"]}, "expected one of 'a', 'b', 'c' as a string, got int"),
        (lambda: None, {"number": True}, "expected a number, got None"),
        (lambda: "7", {"number": True}, "expected a number, got str"),
        (lambda: float("inf"), {"number": True}, "expected a finite number, got inf"),
        (lambda: float("nan"), {"number": True}, "got NaN"),
    ],
)
def test_predicted_opens_only_for_an_answer_of_the_right_form(capsys, answer, form, said):
    """Red team 35 F5: the gate opened for any answer that returned (None, "e"), while the visible check still
    failed. It opens only for what the visible check records, and says what was expected and what it got."""
    assert checks.predicted(answer, "1.4", **form) is False
    out = capsys.readouterr().out
    assert said in out and out.startswith("Exercise 1.4's prediction: ") and out.count("\n") == 1, out
    assert checks.predicted(answer, "1.4") is True  # the older call (chapters 01, 03, 06) keeps opening


@pytest.mark.parametrize(("answer", "form"), [(lambda: "B ", {"options": ["a", "b"]}), (lambda: 7, {"number": True}),
                                              (lambda: torch.tensor(2.5), {"number": True})])
def test_predicted_opens_for_every_answer_the_visible_check_records(capsys, answer, form):
    assert checks.predicted(answer, "2.6", **form) is True and capsys.readouterr().out == ""
    if "options" in form:
        assert checks.prediction(answer(), form["options"]).ok
    else:
        assert checks.number_form(answer()).ok


def test_predicted_reminds_a_learner_who_has_not_run_the_answer_cell(capsys):
    """The answer taken lazily (``lambda: answer_10_6()``): a cell never run gives the reminder, not the raw
    NameError traceback the older call raised before ``predicted`` was even called."""
    with pytest.raises(NameError):
        checks.predicted(answer_10_6, "10.6")  # noqa: F821 - the older call: looked up before the call
    assert checks.predicted(lambda: answer_10_6(), "10.6", number=True) is False  # noqa: F821
    assert capsys.readouterr().out == (
        "Run the cell of Exercise 10.6 (it defines answer_10_6) and make your prediction first; then run this cell.\n")


def test_predicted_takes_options_or_a_number_not_both():
    with pytest.raises(TypeError, match="not both"):
        checks.predicted(lambda: "a", "1.4", ["a", "b"], number=True)


def test_a_number_check_reads_only_numbers_it_can_trust():
    """Prediction red team F7: an answer that was a numbers.Real of its own, whose __float__ walked up the stack
    to the check's ``expected``, passed every hidden check.number. Plain numbers, NumPy's and PyTorch's scalars
    and a standard Fraction are read; any other Real is refused, and says so."""
    import fractions
    import inspect
    import numbers

    import numpy as np

    def expected_from_the_stack() -> float:  # what the check compares against, read from its frame
        frame = inspect.currentframe().f_back
        while frame is not None:
            if "expected" in frame.f_locals:
                return float(frame.f_locals["expected"])
            frame = frame.f_back
        return 0.0

    class Sly(numbers.Real):
        def __float__(self):
            return expected_from_the_stack()

        __abs__ = __add__ = __ceil__ = __eq__ = __floor__ = __floordiv__ = __le__ = __lt__ = __mod__ = __mul__ = \
            __neg__ = __pos__ = __pow__ = __radd__ = __rfloordiv__ = __rmod__ = __rmul__ = __round__ = __rpow__ = \
            __rtruediv__ = __truediv__ = __trunc__ = lambda *args: 0
        __hash__ = object.__hash__

    for honest in (4, 4.0, np.int64(4), np.float32(4), torch.tensor(4.0), np.array(4.0), fractions.Fraction(8, 2)):
        assert checks.number(honest, 4.0).ok, type(honest)
        assert checks.number_form(honest).ok and checks.prediction(honest, number=True).ok

    class SlyTensor(torch.Tensor):  # hostile review 37: the same trick through a tensor's item()
        def item(self):
            return expected_from_the_stack()

    sly_tensor = torch.tensor(0.0).as_subclass(SlyTensor)
    assert not checks.number(sly_tensor, 4.0).ok and "plain number or tensor" in checks.number(sly_tensor, 4.0).message
    assert checks.number(torch.nn.Parameter(torch.tensor(4.0)), 4.0).ok
    verdict = checks.number(Sly(), 4.0)
    assert not verdict.ok and "expected a plain number (int or float), got Sly" in verdict.message, verdict
    assert not checks.prediction(Sly(), number=True).ok
    with pytest.raises(AssertionError, match="plain number"):
        checks.require(lambda: checks.number(Sly(), 4.0))


def test_a_decimal_or_a_sympy_number_is_refused_with_a_message_that_says_what_to_return():
    """decimal.Decimal is no numbers.Real, and a SymPy number is read by its own __float__ (which the checks do
    not trust): both are refused, by the visible check and by a prediction alike, with a message that names the
    type and says to return a float; the float of either is accepted."""
    import decimal

    sympy = pytest.importorskip("sympy")
    for value in (decimal.Decimal("0.5"), sympy.Float(0.5), sympy.Rational(1, 2)):
        kind = type(value).__name__
        for verdict in (checks.number(value, 0.5), checks.number_form(value), checks.prediction(value, number=True)):
            assert not verdict.ok, (kind, verdict)
            assert f"expected a plain number (int or float), got {kind}: return float(...) of it" in verdict.message, verdict
        assert checks.number(float(value), 0.5).ok
    with pytest.raises(AssertionError, match="got Decimal: return float"):
        checks.require(lambda: checks.number(decimal.Decimal(2), 2.0))
