"""The endpointer against LISTENING.md's complaints (1, 3, 4, 7, 8 and the
echo rule), scripted: VAD events and transcripts on a sample timeline."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from listening_audio import at_level, load
from listening_script import RATE, Script, at

from voice_membrane.listening.decisions import (
    Decision,
    EndOfTurn,
    FinalizeStt,
    Interrupt,
    LateTranscript,
    NoWords,
    PausePlayout,
    ResumePlayout,
    TentativeCancelled,
    TentativeEnd,
)
from voice_membrane.listening.endpointer import Endpointer
from voice_membrane.listening.settings import BACKCHANNELS, EndpointSettings, VadSettings
from voice_membrane.listening.silero import SileroVad
from voice_membrane.listening.vad import LevelRise, SpeechEnd, SpeechStart, VadEvent, VadWindow
from voice_membrane.listening.words import WordJudge
from voice_membrane.vocab.transcripts import Transcript, Word


def kinds(decisions: list[object], tentative: bool = False) -> list[str]:
    """The decisions' kinds; the preemptive ones (tested apart) only if asked."""
    skip = () if tentative else (TentativeEnd, TentativeCancelled)
    return [type(d).__name__ for d in decisions if not isinstance(d, skip)]


def turns(decisions: list[object]) -> list[EndOfTurn]:
    return [d for d in decisions if isinstance(d, EndOfTurn)]


# 4. Endpointing


def test_a_complete_sentence_ends_the_turn_within_0_8_s_of_the_speech() -> None:
    out = Script().speech(0.5, 2.0).heard(2.3, "What is the weather in Paris?").run(5.0)
    assert kinds(out) == ["FinalizeStt", "EndOfTurn"]
    (turn,) = turns(out)
    assert turn.text == "What is the weather in Paris?"
    assert turn.reason == "silence"
    assert turn.speech_end == at(2.0)
    assert turn.at_sample == at(2.6)  # end_silence_s 0.6 after the speech
    assert turn.at_sample - turn.speech_end <= at(0.8)


def _number(script: Script, t: float = 0.0) -> Script:
    # "my number is 555 … [1.2 s] … 0123"
    return (
        script.speech(t + 0.5, t + 2.0)
        .heard(t + 2.3, "My number is 555")
        .done(t + 2.35)
        .speech(t + 3.2, t + 4.2)
        .heard(t + 4.5, "0123.")
        .done(t + 4.55)
    )


def test_a_pause_while_reading_a_number_keeps_one_turn_by_default() -> None:
    out = _number(Script()).run(8.0)
    (turn,) = turns(out)
    assert turn.text == "My number is 555 0123."
    assert turn.speech_end == at(4.2)
    assert kinds(out).count("FinalizeStt") == 2


def test_a_question_ending_on_a_number_is_finished() -> None:
    # "what is 2 plus 2?": the question mark closes it; "My number is 555." does not
    question = Script().speech(0.5, 2.0).heard(2.3, "What is 2 plus 2?").run(5.0)
    (turn,) = turns(question)
    assert turn.at_sample == at(2.6)  # end_silence_s, not unfinished_silence_s
    statement = Script().speech(0.5, 2.0).heard(2.3, "My number is 555.").run(5.0)
    (turn,) = turns(statement)
    assert turn.at_sample == at(3.5)  # unfinished_silence_s 1.5


def test_a_plain_1_5_s_end_silence_also_keeps_one_turn() -> None:
    plain = EndpointSettings(end_silence_s=1.5, unfinished_silence_s=1.5, continuations=())
    (turn,) = turns(_number(Script()).run(8.0, plain))
    assert turn.text == "My number is 555 0123."


def test_a_1_2_s_pause_after_a_finished_sentence_is_two_turns() -> None:
    script = (
        Script()
        .speech(0.5, 2.0)
        .heard(2.3, "Call my office.")
        .speech(3.2, 4.2)
        .heard(4.5, "Then book a table.")
    )
    assert [t.text for t in turns(script.run(8.0))] == ["Call my office.", "Then book a table."]


def test_a_final_of_punctuation_alone_attaches_to_the_words_before_it() -> None:
    out = Script().speech(0.5, 2.0).heard(2.2, "What is the weather in Paris").heard(2.3, "?")
    (turn,) = turns(out.run(5.0))
    assert turn.text == "What is the weather in Paris?"  # not "Paris ?"


def test_the_turn_never_ends_while_the_user_speaks() -> None:
    # a final arrives mid-speech (a segment) and the silence timer would have passed
    out = Script().speech(0.5, 6.0).heard(1.5, "So I was thinking").heard(6.3, "about it.").run(9)
    (turn,) = turns(out)
    assert turn.at_sample >= at(6.6)
    assert turn.text == "So I was thinking about it."


# Preemptive replies: a tentative end while the end silence runs


def tentatives(decisions: list[object]) -> list[TentativeEnd]:
    return [d for d in decisions if isinstance(d, TentativeEnd)]


def test_a_final_before_the_end_silence_is_a_tentative_end_then_the_same_turn() -> None:
    out = Script().speech(0.5, 2.0).heard(2.3, "What is the weather in Paris?").run(5.0)
    assert kinds(out, tentative=True) == ["FinalizeStt", "TentativeEnd", "EndOfTurn"]
    (early,), (turn,) = tentatives(out), turns(out)
    assert early.text == turn.text == "What is the weather in Paris?"
    assert (early.at_sample, early.speech_end) == (at(2.3), at(2.0))  # when the final came
    assert turn.at_sample == at(2.6) and turn.tentative  # the held reply stands


def test_speech_that_resumes_cancels_the_tentative_end() -> None:
    out = _number(Script()).run(8.0)
    assert kinds(out, tentative=True) == [
        "FinalizeStt",
        "TentativeEnd",  # "My number is 555": the reply may start, held
        "TentativeCancelled",  # the user went on at 3.2 s (confirmed 3.4 s)
        "FinalizeStt",
        "TentativeEnd",
        "EndOfTurn",
    ]
    first, second = tentatives(out)
    assert first.text == "My number is 555"
    cancel = next(d for d in out if isinstance(d, TentativeCancelled))
    assert cancel.at_sample == at(3.4)
    (turn,) = turns(out)
    assert second.text == turn.text == "My number is 555 0123." and turn.tentative


def test_a_final_that_changes_the_text_after_the_tentative_end_says_so() -> None:
    script = Script().speech(0.5, 2.0).heard(2.3, "What is the weather").heard(2.5, "in Paris?")
    out = script.run(5.0)
    (early,), (turn,) = tentatives(out), turns(out)
    assert early.text == "What is the weather"  # one per stretch of speech
    assert turn.text == "What is the weather in Paris?" and not turn.tentative


def test_preemptive_off_by_key_gives_no_tentative_end() -> None:
    off = EndpointSettings(preemptive=False)
    out = _number(Script()).speech(6.0, 7.0).heard(7.3, "Thanks.").run(10.0, off)
    expected = ["FinalizeStt", "FinalizeStt", "EndOfTurn", "FinalizeStt", "EndOfTurn"]
    assert kinds(out, tentative=True) == expected
    assert not any(t.tentative for t in turns(out))


def test_no_tentative_end_over_the_assistant_nor_for_an_utterance_begun_over_it() -> None:
    # real words over the reply: the barge-in path (interrupt, then the turn), no held reply
    out = _talking(Script(), 20.0).speech(5.0, 6.0).heard(6.3, "What about Rome?").run(10.0, AEC)
    assert "Interrupt" in kinds(out) and turns(out) and not tentatives(out)
    # the reply ended while the user spoke over it: the utterance is still over it
    over = Script().assistant(0.0, True).speech(5.0, 6.0).assistant(5.5, False)
    out = over.heard(6.3, "What about Rome?").run(10.0, AEC)
    assert turns(out) and not tentatives(out)


def test_the_assistant_starting_to_speak_cancels_a_pending_tentative_end() -> None:
    script = Script().speech(0.5, 2.0).heard(2.3, "What is the weather in Paris?")
    out = script.assistant(2.4, True).run(5.0, AEC)
    assert kinds(out, tentative=True)[:3] == ["FinalizeStt", "TentativeEnd", "TentativeCancelled"]
    assert not any(t.tentative for t in turns(out))


# 7. An STT that never finalizes


def test_a_slow_final_closes_after_the_final_wait_and_comes_late_to_the_turn() -> None:
    script = Script().speech(0.5, 2.0).heard(1.5, "What time is it").heard(4.0, "in Tokyo?")
    out = script.run(6.0)
    assert kinds(out) == ["FinalizeStt", "EndOfTurn", "LateTranscript"]
    turn, late = out[1], out[2]
    assert isinstance(turn, EndOfTurn) and isinstance(late, LateTranscript)
    assert (turn.text, turn.reason) == ("What time is it", "final_timeout")
    assert turn.at_sample == at(2.2 + 1.0)  # final_wait_s after asking the STT to settle
    assert (late.text, late.after_turn) == ("in Tokyo?", True)


def test_an_earlier_stretchs_final_decoded_late_does_not_end_the_turn_before_the_last() -> None:
    # Two stretches, one utterance (a 0.3 s pause), both settled before the
    # STT decoded the first (a file fed faster than it decodes): the first's
    # final adds its words, the last one's ends the turn.
    script = (
        Script()
        .speech(0.5, 2.0)
        .speech(2.3, 3.5)
        .heard(3.8, "Thou that art now", settles=False)
        .heard(4.5, "the world's fresh ornament.")
    )
    out = script.run(6.0)
    assert kinds(out) == ["FinalizeStt", "FinalizeStt", "EndOfTurn"]
    (turn,) = turns(out)
    assert (turn.text, turn.reason) == ("Thou that art now the world's fresh ornament.", "silence")
    assert turn.at_sample == at(4.5)


def test_a_closed_utterances_final_decoded_late_is_never_the_open_ones_words() -> None:
    # The first question closed with no final in time (final_timeout, no
    # words); its final came while the second was open and settling: it is
    # a late transcript of the first, and the second's turn is its own words.
    script = (
        Script()
        .speech(0.5, 2.0)
        .speech(3.6, 5.0)
        .heard(5.5, "What time is it?", settles=False, start=1)
        .heard(5.6, "Tell me a joke.", start=2)
    )
    out = script.run(8.0)
    assert kinds(out) == ["FinalizeStt", "FinalizeStt", "LateTranscript", "EndOfTurn"]
    late, turn = out[2], out[3]
    assert isinstance(late, LateTranscript) and isinstance(turn, EndOfTurn)
    assert (late.text, late.after_turn) == ("What time is it?", False)
    assert (turn.text, turn.reason) == ("Tell me a joke.", "silence")


def test_partials_only_wait_for_the_hard_cap_and_a_late_final_is_kept() -> None:
    script = Script().speech(0.5, 2.0).heard(1.5, "what is the", final=False)
    out = script.heard(7.0, "What is the time?").run(8.0)
    assert kinds(out) == ["FinalizeStt", "LateTranscript"]  # no turn from a half transcript
    late = out[1]
    assert isinstance(late, LateTranscript)
    assert late.after_turn is False  # the lead may start the turn from it
    assert late.text == "What is the time?"


def test_the_hard_cap_closes_a_turn_whose_final_wait_is_longer() -> None:
    slow = EndpointSettings(final_wait_s=10.0, max_delay_s=3.0)
    out = Script().speech(0.5, 2.0).heard(1.5, "Hello there.").run(8.0, slow)
    (turn,) = turns(out)
    assert (turn.reason, turn.at_sample) == ("max_delay", at(5.0))


def test_silence_only_and_an_empty_utterance_make_no_turn() -> None:
    assert Script().run(5.0) == []
    out = Script().speech(0.5, 0.9).done(1.2).run(5.0)
    assert kinds(out) == ["FinalizeStt"]


def test_a_second_of_speech_settled_with_no_words_is_said_once() -> None:
    # music, or a language the recognizer cannot hear: the stream settles empty
    out = Script().speech(0.5, 3.0).heard(3.3, "").run(6.0)
    assert kinds(out) == ["FinalizeStt", "NoWords"]
    (said,) = [d for d in out if isinstance(d, NoWords)]
    assert (said.start, said.speech_end) == (at(0.5), at(3.0))
    # under a second (a cough, a breath), no final yet (still decoding), or
    # over the assistant (its echo): nothing to tell
    assert kinds(Script().speech(0.5, 1.3).heard(1.5, "").run(5.0)) == ["FinalizeStt"]
    slow = Script().speech(0.5, 3.0).heard(2.0, "la la", final=False)
    assert "NoWords" not in kinds(slow.run(9.0))
    # still decoding when the turn closed: said when its stream ends with no
    # words, never when a late final brings some (that is the turn)
    ended = kinds(slow.done(9.5).run(10.0))
    assert ended == ["FinalizeStt", "NoWords"], ended
    late = Script().speech(0.5, 3.0).heard(8.0, "So what now?").done(8.1).run(10.0)
    assert kinds(late) == ["FinalizeStt", "LateTranscript"], kinds(late)
    over = _talking(Script().speech(1.0, 3.5).heard(3.8, "")).run(8.0)
    assert "NoWords" not in kinds(over)


def test_each_utterance_closed_before_its_final_is_told_apart() -> None:
    # German, then a question, both closed before the recognizer (busy) gave
    # their finals: the question's late words are its turn, and the German is
    # still said to have had none (one slot for both lost the German's line)
    s = Script().speech(0.5, 3.0).speech(7.0, 9.0)
    s.heard(14.0, "What time is it?", start=2).heard(14.5, "", start=1).done(14.6)
    out = s.run(16.0)
    assert kinds(out) == ["FinalizeStt", "FinalizeStt", "LateTranscript", "NoWords"], kinds(out)
    (said,) = [d for d in out if isinstance(d, NoWords)]
    assert (said.start, said.speech_end) == (at(0.5), at(3.0))


# 1. Noise is not a turn; 3. backchannels; barge-in


def _talking(script: Script, until: float = 20.0) -> Script:
    """The assistant speaks from 0 s (echo cancelled, so the level rule is off)."""
    return script.assistant(0.0, True).assistant(until, False)


AEC = EndpointSettings(echo="aec")


# Speech over the assistant pauses it within pause_min_speech_s (0.06 s) of
# speech windows: the audio stops before anyone knows what was said, and
# resumes when it was nothing (LISTENING.md 1: "at most a pause that resumes").


def test_a_short_cough_heard_as_speech_pauses_at_most_and_resumes_when_settled() -> None:
    out = _talking(Script()).speech(5.0, 5.3).done(5.6).run(10.0, AEC)
    assert kinds(out) == ["PausePlayout", "FinalizeStt", "ResumePlayout"]
    pause, resume = out[0], out[2]
    # dated where 0.06 s of speech had been heard (windows on a 512-sample grid)
    assert pause.at_sample == at(4.992) + at(0.06)
    assert resume.at_sample == at(5.6)  # the STT settled it: nothing real


def test_a_longer_noise_pauses_then_resumes_within_2_s() -> None:
    out = _talking(Script()).speech(5.0, 5.8).done(6.1).run(10.0, AEC)
    assert kinds(out) == ["PausePlayout", "FinalizeStt", "ResumePlayout"]
    pause, resume = out[0], out[2]
    assert pause.at_sample - at(5.0) <= at(0.1)
    assert resume.at_sample - pause.at_sample <= at(2.0)


def test_noise_that_goes_on_resumes_after_the_false_interruption_time() -> None:
    out = _talking(Script()).speech(5.0, 9.0).run(12.0, AEC)
    assert kinds(out) == ["PausePlayout", "ResumePlayout", "FinalizeStt"]  # once only
    assert out[1].at_sample == out[0].at_sample + at(2.0)


def test_a_blip_the_detector_never_confirms_resumes_a_quarter_second_after_it() -> None:
    out = _talking(Script()).windows(5.0, 5.15).run(10.0, AEC)
    assert kinds(out) == ["PausePlayout", "ResumePlayout"]
    blip_end = (at(5.15) // 512 + 1) * 512  # the end of its last window
    assert out[1].at_sample == blip_end + at(0.25)


def test_speech_under_pause_min_speech_s_does_not_pause() -> None:
    out = _talking(Script()).windows(5.0, 5.02).run(10.0, AEC)
    assert out == []
    longer = EndpointSettings(echo="aec", pause_min_speech_s=0.5)
    assert kinds(_talking(Script()).speech(5.0, 5.3).done(5.6).run(10.0, longer)) == ["FinalizeStt"]


def test_no_speech_only_pause_in_the_echo_warm_up() -> None:
    out = _talking(Script()).speech(1.0, 1.8).done(2.1).run(5.0, AEC)
    assert "PausePlayout" not in kinds(out)


def test_a_cough_after_the_user_finished_changes_nothing() -> None:
    script = Script().speech(0.5, 2.0).heard(2.3, "Tell me a joke.").speech(2.9, 3.2).done(3.5)
    out = script.run(6.0)
    assert kinds(out) == ["FinalizeStt", "EndOfTurn", "FinalizeStt"]


@pytest.mark.parametrize("said", ["mm-hm", "Mmm-hmm.", "Okay.", "uh-huh", "Yeah.", "right, sure"])
def test_a_backchannel_over_the_assistant_neither_stops_it_nor_is_a_turn(said: str) -> None:
    out = _talking(Script()).speech(5.0, 5.4).heard(5.7, said).run(10.0, AEC)
    assert kinds(out) == ["PausePlayout", "FinalizeStt", "ResumePlayout"]
    assert out[2].at_sample == at(5.7)  # resumed as soon as its final said what it was


def test_three_yeahs_a_second_apart_neither() -> None:
    script = _talking(Script())
    for t in (5.0, 6.0, 7.0):
        script.speech(t, t + 0.35).heard(t + 0.5, "yeah", final=False).heard(t + 0.6, "Yeah.")
    out = script.run(10.0, AEC)
    assert kinds(out) == ["PausePlayout", "FinalizeStt", "ResumePlayout"] * 3


@pytest.mark.parametrize("said", ["Stop.", "Wait, no.", "no", "Okay, but what about Tuesday?"])
def test_real_words_over_the_assistant_interrupt_and_are_the_next_turn(said: str) -> None:
    out = _talking(Script()).speech(5.0, 5.4).heard(5.7, said).run(10.0, AEC)
    assert kinds(out) == ["PausePlayout", "FinalizeStt", "Interrupt", "EndOfTurn"]
    interrupt = out[2]
    assert isinstance(interrupt, Interrupt) and interrupt.text == said
    assert turns(out)[0].text == said


def test_a_real_partial_pauses_at_once_and_the_final_interrupts() -> None:
    # in the echo warm-up speech alone does not pause: the partial's words do
    script = _talking(Script()).speech(1.0, 2.0).heard(1.3, "wait", final=False)
    out = script.heard(2.3, "Wait, stop.").run(10.0, AEC)
    assert kinds(out) == ["PausePlayout", "FinalizeStt", "Interrupt", "EndOfTurn"]
    assert out[0].at_sample == at(1.3)


def test_yes_while_the_assistant_is_silent_is_a_turn() -> None:
    (turn,) = turns(Script().speech(0.5, 0.8).heard(1.0, "Yes.").run(4.0))
    assert turn.text == "Yes."


# Echo: no echo cancellation, the assistant's voice heard back quieter


def test_our_own_voice_heard_back_is_not_the_user() -> None:
    script = _talking(Script()).speech(0.2, 4.0, level=-40.0).heard(4.3, "The weather in Paris")
    out = script.run(8.0)
    assert kinds(out) == ["FinalizeStt"]


def test_the_user_louder_than_the_echo_interrupts() -> None:
    script = _talking(Script()).speech(0.2, 4.0, level=-40.0).heard(4.3, "The weather in Paris")
    script.speech(5.0, 5.8, level=-18.0).heard(6.1, "Stop.")
    out = script.run(10.0)
    assert kinds(out)[1:] == ["PausePlayout", "FinalizeStt", "Interrupt", "EndOfTurn"]
    assert out[1].at_sample <= at(5.0 + 0.6)  # within about 0.6 s of speech


def test_half_duplex_ignores_everything_while_the_assistant_speaks() -> None:
    script = _talking(Script()).speech(5.0, 5.8, level=-5.0).heard(6.1, "Stop.")
    out = script.run(10.0, EndpointSettings(echo="half_duplex"))
    assert kinds(out) == ["FinalizeStt"]


def test_after_a_warm_up_with_no_echo_heard_the_user_is_heard() -> None:
    script = _talking(Script()).speech(5.0, 5.8, level=-30.0).heard(6.1, "Stop.")
    assert "Interrupt" in kinds(script.run(10.0))


# Invariance: how often the clock is advanced changes nothing


@settings(max_examples=40, deadline=None)
@given(tick=st.sampled_from([0.001, 0.01, 0.032, 0.1, 0.5, 5.0]))
def test_decisions_do_not_depend_on_how_often_time_is_advanced(tick: float) -> None:
    def script() -> Script:
        s = _talking(Script(), 9.0).speech(2.0, 2.7).speech(4.0, 4.9).done(5.2)
        s.speech(6.0, 6.4).heard(6.6, "Stop.")
        return _number(s, 10.0)

    reference = script().run(20.0, AEC, tick_s=0.001)
    assert script().run(20.0, AEC, tick_s=tick) == reference
    assert {type(d) for d in reference} >= {
        TentativeEnd,
        TentativeCancelled,
        FinalizeStt,
        PausePlayout,
        ResumePlayout,
        Interrupt,
        EndOfTurn,
    }
    assert RATE == 16_000


@pytest.mark.parametrize("tick", [0.001, 0.05, 5.0])
def test_speech_confirmed_just_past_the_end_silence_is_a_new_turn_however_fed(
    tick: float,
) -> None:
    # The turn's end silence runs out at 2.1 s; the next speech is confirmed
    # at 2.15 s. Fed in one coarse step, the start used to be handled before
    # the deadline and joined the finished utterance: one turn, not two.
    s = Script().speech(0.5, 1.5).heard(1.8, "What time is it?")
    s.speech(1.95, 3.0, windows=False).heard(3.3, "In Paris.")  # (a window would tick)
    out = s.run(6.0, tick_s=tick)
    assert [(t.text, t.at_sample) for t in turns(out)] == [
        ("What time is it?", at(2.1)),
        ("In Paris.", at(3.6)),
    ]


def test_advancing_only_to_the_next_deadline_decides_everything_when_it_is_due() -> None:
    """A listener whose audio stops coming (a stalled client, frames longer
    than the wait) advances to ``next_deadline()`` on a timer: every decision
    the clock alone makes comes at the sample it is dated, none late."""
    s = _talking(Script(), 9.0).speech(2.0, 2.7).speech(4.0, 4.9).done(5.2)
    s.speech(6.0, 6.4).heard(6.6, "Stop.")
    s = _number(s, 10.0)
    s.speech(16.0, 16.5).heard(16.9, "And then")  # unfinished: the longer wait
    s.speech(19.0, 19.5).heard(19.3, "What about")
    s.heard(19.8, "the", final=False)  # no final after the finalize: the final wait
    timed = s.run_on_deadlines(25.0, AEC)
    assert [d for _, d in timed] == s.run(25.0, AEC, tick_s=0.001)
    by_clock = [(made, d) for made, d in timed if isinstance(d, EndOfTurn | ResumePlayout)]
    reasons = {d.reason for _, d in by_clock if isinstance(d, EndOfTurn)}
    assert reasons >= {"silence", "final_timeout"}
    assert any(isinstance(d, ResumePlayout) for _, d in by_clock)
    assert all(made == d.at_sample for made, d in by_clock)


# Echo with real audio: Silero hears the assistant's voice fed back at -20 dB
# (no echo cancellation), then the user at 0 dB speaks over it


def _mix(length_s: float, *parts: tuple[float, str, float]) -> np.ndarray:
    out = np.zeros(round(length_s * RATE), dtype=np.float64)
    for t, name, level in parts:
        piece = at_level(load(name), level).astype(np.float64)
        out[at(t) : at(t) + len(piece)] += piece
    return np.clip(out, -32768, 32767).astype(np.int16)


def _listen(
    audio: np.ndarray, transcripts: dict[int, list[tuple[str, float, float]]]
) -> list[object]:
    """Silero over ``audio`` in 20 ms chunks with the assistant speaking
    throughout; after the n-th speech end the STT's final comes 100 ms later with
    ``transcripts[n]``: words and their times in seconds of the input, given to
    the endpointer in seconds of the STT stream (opened at the start's pre-roll)."""
    # the detector's fixed floor: these test the endpointer's echo judgement
    # (the adaptive gate would keep the far echo from being speech at all:
    # test_vad_gate.py's test_the_assistants_echo_is_background_and_the_user_over_it_is_found)
    vad, ep = SileroVad(VadSettings(gate="fixed")), Endpointer()
    out: list[object] = ep.assistant_speaking(True, 0)
    ends, stream_from = 0, 0
    for i in range(0, len(audio), 320):
        for event in vad.feed(audio[i : i + 320]):
            out += ep.vad(event)
            if isinstance(event, SpeechStart):
                stream_from = event.audio_from
            if isinstance(event, SpeechEnd):
                ends += 1
                if ends in transcripts:
                    shift = stream_from / RATE
                    words = tuple(Word(w, s - shift, e - shift) for w, s, e in transcripts[ends])
                    text = " ".join(w.text for w in words)
                    out += ep.advance(event.confirmed_at + at(0.1))
                    out += ep.transcript(
                        Transcript(text, True, words), event.confirmed_at + at(0.1)
                    )
    return out + ep.advance(len(audio) + at(3.0))


def _words(text: str, start: float, end: float) -> list[tuple[str, float, float]]:
    ws = text.split()
    step = (end - start) / len(ws)
    return [(w, start + i * step, start + (i + 1) * step) for i, w in enumerate(ws)]


ECHO = -38.0  # the user (and the assistant's own level) at -18 dBFS, heard back 20 dB down


def test_real_echo_at_minus_20_db_is_neither_a_pause_nor_a_turn() -> None:
    audio = _mix(8.0, (0.2, "weather", ECHO), (2.6, "weather", ECHO), (5.0, "number_end", ECHO))
    said = {
        1: _words("what is the weather like in Paris today", 0.2, 2.0),
        2: _words("what is the weather like in Paris today", 2.6, 4.4),
        3: _words("zero one two three", 5.0, 6.1),
    }
    assert [d for d in _listen(audio, said) if not isinstance(d, FinalizeStt)] == []


def test_a_real_user_at_0_db_over_the_echo_pauses_within_0_6_s_and_interrupts() -> None:
    audio = _mix(8.0, (0.2, "weather", ECHO), (2.6, "weather", ECHO), (3.0, "number_start", -18.0))
    said = {
        1: _words("what is the weather like in Paris today", 0.2, 2.0),
        # the STT hears the echo's first words, then the user over the rest
        2: _words("what is", 2.6, 2.95) + _words("my number is five five five", 3.0, 4.6),
    }
    out = [d for d in _listen(audio, said) if not isinstance(d, FinalizeStt)]
    assert [type(d).__name__ for d in out] == ["PausePlayout", "Interrupt", "EndOfTurn"]
    assert at(3.0) <= out[0].at_sample <= at(3.0 + 0.6)
    assert turns(out)[0].text == "my number is five five five"  # no echo word in the turn


# Anything the detector, the STT and the playout may say, in any order


_texts = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["mm-hm", "Stop.", "yeah yeah", "and", "555", "", "\ud800 okay", "wait, no"]),
)
_ops = st.lists(
    st.tuples(
        st.integers(0, at(1.5)),
        st.one_of(
            st.just(("speech",)),
            st.tuples(st.just("window"), st.floats(0, 1), st.floats(-120, 0)),
            st.tuples(st.just("heard"), _texts, st.booleans()),
            st.just(("done",)),
            st.tuples(st.just("assistant"), st.booleans()),
            st.tuples(st.just("rise"), st.floats(-120, 0)),
            st.tuples(st.just("judged"), st.one_of(st.none(), st.floats(0, 1))),
        ),
    ),
    max_size=60,
)


Feed = Callable[[Endpointer], list[Decision]]


def _inputs(ops: list[tuple[int, tuple]]) -> Iterator[tuple[int, Feed, bool | None]]:
    """The generated inputs: each one's sample, how it is fed, and what it
    makes of the assistant's playout (None: nothing)."""
    now, speaking, speech_end = 0, False, 0
    empty = np.zeros(0, dtype=np.int16)
    for dt, op in ops:
        now += dt
        t = now
        if op[0] == "speech":
            event: VadEvent = (
                SpeechEnd(max(0, t - at(0.2)), t)
                if speaking
                else SpeechStart(max(0, t - at(0.2)), t, max(0, t - at(0.7)), empty)
            )
            speaking = not speaking
            speech_end = event.at_sample
            yield t, lambda ep, e=event: ep.vad(e), None
        elif op[0] == "window":
            now += 512
            w = VadWindow(t, 512, op[1], op[2], speaking)
            yield now, lambda ep, w=w: ep.vad(w), None
        elif op[0] == "heard":
            tr = Transcript(op[1], op[2])
            yield t, lambda ep, tr=tr, t=t: ep.transcript(tr, t), None
        elif op[0] == "done":
            yield t, lambda ep, t=t: ep.transcripts_done(t), None
        elif op[0] == "rise":
            rise = LevelRise(max(0, t - at(0.012)), t, op[1])
            yield t, lambda ep, r=rise: ep.vad(r), None
        elif op[0] == "judged":  # (for the last speech end: a stale one is ignored)
            judged = partial(Endpointer.turn_judged, probability=op[1], speech_end=speech_end)
            yield t, lambda ep, j=judged, t=t: j(ep, at_sample=t), None
        else:
            yield t, lambda ep, on=op[1], t=t: ep.assistant_speaking(on, t), op[1]


def _end(ops: list[tuple[int, tuple]]) -> int:
    return sum(dt + (512 if op[0] == "window" else 0) for dt, op in ops) + at(10)


def test_what_fell_due_before_a_rise_is_decided_before_its_pause() -> None:
    # Found by the property below: an utterance with no words whose final wait
    # ran out at 1 s, and a level rise confirmed one sample later. The empty
    # turn closes (at 1 s) before the rise pauses the playout (at 1 s + 1),
    # not after it.
    ep = Endpointer(EndpointSettings(level_pause="on", echo_warmup_s=0.5))
    no_audio = np.zeros(0, dtype=np.int16)
    ep.vad(SpeechStart(0, 0, 0, no_audio))
    assert ep.vad(SpeechEnd(0, 0)) == [FinalizeStt(0)]
    ep.assistant_speaking(True, 0)
    ep.vad(VadWindow(260, 512, 0.0, 0.0, False))
    rise_at = at(1.0) + 1
    assert ep.vad(LevelRise(rise_at - at(0.012), rise_at, 0.0)) == [PausePlayout(rise_at)]
    assert ep.advance(rise_at + at(0.3)) == [ResumePlayout(rise_at + at(0.3))]


@settings(max_examples=300, deadline=None)
@given(_ops, st.sampled_from(["on", "off"]), st.sampled_from(["none", "smart-turn"]))
def test_any_sequence_of_inputs_keeps_the_decisions_coherent(
    ops: list[tuple[int, tuple]], level_pause: str, turn_model: str
) -> None:
    ep = Endpointer(
        EndpointSettings(level_pause=level_pause, echo_warmup_s=0.5, turn_model=turn_model)  # type: ignore[arg-type]
    )
    assistant, paused = False, False
    held: str | None = None  # the pending tentative end's text
    out: list[object] = []
    last = [0]  # where the playout last paused or resumed

    def take(decisions: list[object]) -> None:
        nonlocal assistant, paused, held
        for d in decisions:
            if isinstance(d, TentativeEnd):
                assert held is None and not assistant and d.text == d.text.strip() and d.text
                held = d.text
            elif isinstance(d, TentativeCancelled):
                assert held is not None
                held = None
            elif isinstance(d, EndOfTurn):
                assert d.tentative == (held is not None and held == d.text)
                held = None
            if isinstance(d, PausePlayout):
                assert assistant and not paused
                assert d.at_sample >= last[0]  # never before the last resume
                paused, last[0] = True, d.at_sample
            elif isinstance(d, ResumePlayout):
                assert paused and d.at_sample >= last[0]  # never before its pause
                paused, last[0] = False, d.at_sample
            elif isinstance(d, Interrupt):
                assert assistant and d.text
                assistant = paused = False  # the reply stops
            elif isinstance(d, EndOfTurn):
                assert d.text and d.text == d.text.strip() and d.at_sample >= d.speech_end
            out.append(d)

    for at_sample, feed, change in _inputs(ops):
        take(ep.advance(at_sample))  # what fell due by then comes before the change
        if change is not None:
            assistant = change
            paused = paused and assistant
        take(feed(ep))
    take(ep.advance(_end(ops)))
    assert held is None  # every held reply is decided, one way or the other


@settings(max_examples=300, deadline=None)
@given(_ops, st.sampled_from(["on", "off"]), st.sampled_from(["none", "smart-turn"]))
def test_each_input_decides_what_fell_due_by_its_sample_first(
    ops: list[tuple[int, tuple]], level_pause: str, turn_model: str
) -> None:
    """Advancing the clock to an input's sample before feeding it changes
    nothing: a coarse feed decides as a fine one does."""
    settings_ = EndpointSettings(level_pause=level_pause, echo_warmup_s=0.5, turn_model=turn_model)  # type: ignore[arg-type]
    coarse, fine = Endpointer(settings_), Endpointer(settings_)
    heard_coarse: list[Decision] = []
    heard_fine: list[Decision] = []
    for at_sample, feed, _ in _inputs(ops):
        heard_coarse += feed(coarse)
        heard_fine += fine.advance(at_sample) + feed(fine)
    end = _end(ops)
    assert heard_coarse + coarse.advance(end) == heard_fine + fine.advance(end)


# How words are judged


@pytest.mark.parametrize(
    ("said", "real"),
    [
        ("m m h m", False),  # pocketsphinx's "mm-hm"
        ("M. M. H. M.", False),
        ("uh huh", False),
        ("a b c", True),
        ("stop", True),
        ("I", True),
        ("m m h m stop", True),
    ],
)
def test_backchannels_spelled_out_letter_by_letter_are_still_backchannels(
    said: str, real: bool
) -> None:
    judge = WordJudge(BACKCHANNELS, ())
    assert judge.is_real(said) is real
