"""The end of a turn with an end-of-turn model (``[endpoint] turn_model``),
scripted: the model's answers placed on the sample timeline as a listener
feeds them (tests/test_listener_turn_model.py runs the real plumbing)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from listening_script import CONFIRM_S, Script, at

from voice_membrane.listening.decisions import EndOfTurn, JudgeTurn
from voice_membrane.listening.settings import EndpointSettings

MODEL = EndpointSettings(turn_model="smart-turn")


def turns(decisions: Sequence[object]) -> list[EndOfTurn]:
    return [d for d in decisions if isinstance(d, EndOfTurn)]


def test_the_model_is_asked_at_the_speech_end_with_where_the_utterance_began() -> None:
    out = Script().speech(0.5, 2.0).heard(2.3, "What time is it?").run(5.0, MODEL)
    assert [d for d in out if isinstance(d, JudgeTurn)] == [
        JudgeTurn(at(2.0 + CONFIRM_S), at(0.5), at(2.0))
    ]


def test_without_a_model_nothing_is_asked() -> None:
    out = Script().speech(0.5, 2.0).heard(2.3, "What time is it?").run(5.0)
    assert not [d for d in out if isinstance(d, JudgeTurn)]


def test_judged_done_the_turn_ends_at_the_short_silence_once_the_final_came() -> None:
    s = Script().speech(0.5, 2.0).judged(2.0, 0.93, after_s=0.03).heard(2.45, "What time is it?")
    (turn,) = turns(s.run(5.0, MODEL))
    assert (turn.reason, turn.at_sample) == ("model", at(2.45))  # the final came last
    s = Script().speech(0.5, 2.0).heard(2.21, "What time is it?").judged(2.0, 0.93, after_s=0.03)
    (turn,) = turns(s.run(5.0, MODEL))
    # the short silence (0.2 s) had passed when the answer came: ended at the answer
    assert (turn.reason, turn.at_sample) == ("model", at(2.23))


def test_the_same_turn_without_a_model_waits_the_end_silence() -> None:
    s = Script().speech(0.5, 2.0).judged(2.0, 0.93).heard(2.21, "What time is it?")
    (turn,) = turns(s.run(5.0))  # (an answer nobody asked for changes nothing)
    assert (turn.reason, turn.at_sample) == ("silence", at(2.6))


def test_judged_not_done_a_thinking_pause_keeps_one_turn() -> None:
    # "so the thing is … [1.4 s] … I was wondering whether we could meet": the
    # words sound finished, so the 0.6 s silence alone cuts the user off
    def script() -> Script:
        s = Script().speech(0.5, 1.6).judged(1.6, 0.08).heard(1.9, "So the thing is.")
        return s.speech(3.0, 5.0).judged(5.0, 0.9).heard(5.3, "I was wondering if we could meet.")

    (turn,) = turns(script().run(9.0, MODEL))
    assert turn.text == "So the thing is. I was wondering if we could meet."
    assert turn.reason == "model"
    cut = turns(script().run(9.0))
    assert [t.text for t in cut] == ["So the thing is.", "I was wondering if we could meet."]


def test_judged_not_done_the_turn_still_ends_after_the_longer_wait() -> None:
    s = Script().speech(0.5, 1.6).judged(1.6, 0.08).heard(1.9, "So here is my question.")
    (turn,) = turns(s.run(6.0, MODEL))
    assert (turn.reason, turn.at_sample) == ("silence", at(1.6 + 2.0))  # turn_wait_s


def test_unfinished_words_keep_their_longer_silence_when_judged_done() -> None:
    s = Script().speech(0.5, 2.0).judged(2.0, 0.9).heard(2.3, "My number is 555")
    (turn,) = turns(s.run(6.0, MODEL))
    assert (turn.reason, turn.at_sample) == ("silence", at(2.0 + 1.5))
    shapeless = MODEL.model_copy(update={"transcript_shape": False})
    (turn,) = turns(s.run(6.0, shapeless))
    assert (turn.reason, turn.at_sample) == ("model", at(2.3))


def test_judged_not_done_after_unfinished_words_the_user_gets_up_to_the_cap() -> None:
    # "my number is 555 … [2.4 s] … 0123": both say the user is not done
    s = Script().speech(0.5, 2.0).judged(2.0, 0.1).heard(2.3, "My number is 555")
    s.speech(4.4, 5.4).judged(5.4, 0.9).heard(5.7, "0123.")
    (turn,) = turns(s.run(9.0, MODEL))
    assert turn.text == "My number is 555 0123."
    lone = Script().speech(0.5, 2.0).judged(2.0, 0.1).heard(2.3, "My number is 555")
    (turn,) = turns(lone.run(9.0, MODEL))
    assert turn.at_sample == at(2.0 + 3.0)  # max_delay_s


@pytest.mark.parametrize("probability", [None, 0.5 - 1e-9])
def test_no_judgement_or_a_not_done_one_is_never_sooner_than_the_silence_rule(
    probability: float | None,
) -> None:
    s = Script().speech(0.5, 2.0).judged(2.0, probability).heard(2.3, "What time is it?")
    (turn,) = turns(s.run(6.0, MODEL))
    assert turn.reason == "silence"
    assert turn.at_sample >= at(2.6)


def test_an_answer_for_a_pause_the_user_spoke_through_is_ignored() -> None:
    # the answer for the first pause comes after the speech resumed
    s = Script().speech(0.5, 1.6).speech(1.9, 3.0).judged(1.6, 0.99, after_s=0.2)
    s.heard(3.3, "What time is it in Tokyo?")
    (turn,) = turns(s.run(6.0, MODEL))
    assert (turn.reason, turn.at_sample) == ("silence", at(3.6))


def test_the_listener_side_deadline_keeps_the_model_rule() -> None:
    s = Script().speech(0.5, 2.0).judged(2.0, 0.93, after_s=0.03).heard(2.21, "What time is it?")
    timed = s.run_on_deadlines(5.0, MODEL)
    assert [d for _, d in timed] == s.run(5.0, MODEL, tick_s=0.001)
    ((made, turn),) = [(m, d) for m, d in timed if isinstance(d, EndOfTurn)]
    assert made == turn.at_sample == at(2.23)


def test_settings_refuse_waits_past_the_hard_cap() -> None:
    with pytest.raises(ValueError, match="turn_wait_s"):
        EndpointSettings(turn_model="smart-turn", turn_wait_s=4.0)
