"""OpenAI's `instructions`, read for what Kokoro can do of them (producers.speech_instructions)."""

from __future__ import annotations

import pytest

from producers.speech_instructions import WHY_NOT, Steering, header_value, read_instructions

VOICES = ("jf_alpha", "jm_kumo")
OPENAI = ("alloy", "nova", "sage", "echo")


@pytest.mark.parametrize(
    ("instructions", "factor", "voice", "unmapped"),
    [
        ("Speak slowly.", 0.8, None, ()),
        ("Please talk a little slower", 0.8, None, ()),
        ("Speak very slowly and clearly", 0.6, None, ("clearly",)),
        ("Read it quickly", 1.25, None, ()),
        ("Faster, please!", 1.25, None, ()),
        ("Extremely fast", 1.5, None, ()),
        ("Read at 1.5x speed", 1.5, None, ()),
        ("0.7x", 0.7, None, ()),
        ("half speed", 0.5, None, ()),
        ("Twice as fast", 2.0, None, ()),
        ("Use the nova voice", 1.0, "nova", ()),
        ("voice: alloy, quickly", 1.25, "alloy", ()),
        ("Speak as jm_kumo, slowly", 0.8, "jm_kumo", ()),
        ("Speak like a wise sage", 1.0, None, ("wise", "sage")),  # "sage" alone is an ordinary word
        ("Whisper angrily", 1.0, None, ("whisper", "angrily")),
        ("Cheerful tone, speak quickly", 1.25, None, ("cheerful",)),
        ("", 1.0, None, ()),
    ],
)
def test_instructions_map_to_a_speed_and_a_voice_and_the_rest_is_told(instructions, factor, voice, unmapped):
    steering = read_instructions(instructions, VOICES, OPENAI)
    assert steering.speed_factor == pytest.approx(factor)
    assert steering.voice == voice
    assert steering.unmapped == unmapped


@pytest.mark.parametrize(
    ("steering", "speed", "clamped", "header"),
    [
        (Steering(0.8, None, ("speed x0.8",), ()), 0.8, False, "mapped; speed x0.8 = 0.8"),
        (Steering(1.0, "nova", ("voice nova",), ()), None, False, "mapped; voice nova"),
        (
            Steering(1.25, None, ("speed x1.25",), ("cheerful",)),
            4.0,
            True,
            f"partly mapped; speed x1.25 = 4; speed held to the accepted range; not mapped: cheerful ({WHY_NOT})",
        ),
        (Steering(1.0, None, (), ("whisper",)), None, False, f"ignored; not mapped: whisper ({WHY_NOT})"),
    ],
)
def test_the_header_says_what_was_mapped_and_what_was_not(steering, speed, clamped, header):
    assert header_value(steering, speed, clamped) == header
    assert header_value(steering, speed, clamped).isascii()
