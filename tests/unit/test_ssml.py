# ruff: noqa: RUF001
"""The SSML subset (contracts.ssml, tts_node.ssml): what each input is said as, phonemes and pauses, through the
real espeak G2P; what is refused, and why; the canonical text every spelling of a document becomes.

``SAID`` (tts_node.ssml_examples) is docs/ssml.md's table: ``voxlog docs`` writes it there as
``python -m tts_node.ssml_examples`` prints it, and a test fails while the page shows anything else.
"""

from __future__ import annotations

import importlib
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contracts import ssml as ssml_module
from contracts import ssml_attributes
from contracts.ssml import MAX_DEPTH, PHONEMES, Pause, SsmlError, Text, check_speed, looks_like_ssml, parse
from tests.support.work import growth, linear
from tts_node.errors import EngineInputError
from tts_node.model_files import load_vocab
from tts_node.ssml import ssml_segments
from tts_node.ssml_examples import RATE, SAID, Front, said, table

pytestmark = pytest.mark.unit

fingerprint_module = importlib.import_module("contracts.fingerprint")  # the package names a function so
PAGE = Path(__file__).resolve().parents[2] / "docs" / "ssml.md"


@pytest.fixture(scope="module")
def front() -> Front:
    return Front()


@pytest.mark.parametrize(("ssml", "expected"), SAID, ids=[s for s, _ in SAID])
def test_what_each_input_is_said_as(front, ssml, expected):
    assert said(front, ssml) == expected


def test_the_ssml_page_shows_the_table():
    assert table() in PAGE.read_text(), "run `voxlog docs`: it writes the table into docs/ssml.md"


SAME_DOCUMENT = [
    "<speak>Hello <break time='0.5s'/> world.</speak>",
    '  <speak version="1.0" xmlns="http://www.w3.org/2001/10/synthesis" xml:lang="en-US">\n  Hello\n<break'
    ' time="500ms"></break>   world.<!-- a comment --></speak>',
    "<speak>Hello<break strength='medium'/>world.</speak>",
    "<speak>Hello<break/>wor<!-- split -->ld.</speak>",
]


@pytest.mark.parametrize("ssml", SAME_DOCUMENT)
def test_every_spelling_of_one_document_is_one_canonical_text(ssml):
    assert parse(ssml).canonical == '<speak>Hello<break time="500ms"/>world.</speak>'


@pytest.mark.parametrize("ssml", [s for s, _ in SAID if looks_like_ssml(s)])
def test_the_canonical_text_reads_as_itself(ssml):
    first = parse(ssml)
    again = parse(first.canonical)
    assert (again.canonical, again.pieces) == (first.canonical, first.pieces)


def test_entities_and_markup_characters_in_text_survive_canonicalization():
    parsed = parse("<speak>a &lt; b &amp;&amp; c &gt; d &#233;t&#xE9; <sub alias='&quot;x&quot;'>y</sub></speak>")
    assert parsed.canonical == '<speak>a &lt; b &amp;&amp; c &gt; d été <sub alias="&quot;x&quot;">y</sub></speak>'
    assert parsed.pieces == (Text("a < b && c > d été "), Text('"x"'))


@pytest.mark.parametrize(
    ("text", "ssml"),
    [
        ("<speak>Hi</speak>", True),
        ("  \n\t<speak>Hi</speak>", True),
        ("<speak/>", True),
        ("a <b> c", False),
        ("x < y > z", False),
        ("<3 you", False),
        ("<speaker> said hi", False),
        ("Say <speak>hi</speak>", False),
        ("<?xml version='1.0'?><speak>Hi</speak>", False),  # with input_format="ssml" it is SSML
    ],
)
def test_only_a_leading_speak_element_makes_a_text_ssml(text, ssml):
    assert looks_like_ssml(text) is ssml


def test_pauses_that_meet_add_their_breaks_and_keep_the_longest_boundary():
    pieces = parse("<speak><p><s>One.</s><break time='100ms'/></p><break time='50ms'/><s>Two.</s></speak>").pieces
    assert pieces == (Text("One."), Pause(100 + 50 + 700), Text("Two."))
    assert parse("<speak><break time='2s'/>Hi<break time='300ms'/></speak>").pieces == (
        Pause(2000),
        Text("Hi"),
        Pause(300),
    ), "a break is kept at either end; a boundary is not"
    assert parse("<speak><p>Hi</p></speak>").pieces == (Text("Hi"),)
    assert parse("<speak>a<break strength='none'/>b</speak>").pieces == (Text("a"), Text("b"))


@pytest.mark.parametrize(
    ("ssml", "message"),
    [
        ("<speak><audio src='x.wav'/></speak>", "<audio> is not supported"),
        ("<speak><emphasis>hi</emphasis></speak>", "<emphasis> is not supported"),
        ("<speak><voice name='x'>hi</voice></speak>", "<voice> is not supported"),
        ("<speak><mark name='m'/>hi</speak>", "<mark> is not supported"),
        ("<speak><blink>hi</blink></speak>", "<blink> is not supported"),
        ("<speak><amazon:effect>hi</amazon:effect></speak>", "<amazon:effect> is not supported"),
        ("<p>hi</p>", "one <speak> element"),
        ("<speak><speak>hi</speak></speak>", "one <speak> element"),
        ("<speak><break time='fast'/>hi</speak>", "<break time='fast'> is not a time; write milliseconds or seconds"),
        ("<speak><break time='11s'/>hi</speak>", "longer than 10000 ms"),
        ("<speak><break strength='loud'/>hi</speak>", "<break strength='loud'> is not supported; use one of: none"),
        ("<speak><break>x</break>hi</speak>", "<break> may hold nothing"),
        ("<speak><break foo='1'/>hi</speak>", "<break> has no attribute 'foo'; it takes: strength, time"),
        ("<speak><p class='x'>hi</p></speak>", "<p> has no attribute 'class'; it takes: none"),
        ("<speak><p><p>hi</p></p></speak>", "<p> cannot be inside another <p> or an <s>"),
        ("<speak><say-as>hi</say-as></speak>", "<say-as interpret-as=None> is not supported; use one of: characters"),
        ("<speak><say-as interpret-as='spell-out'>hi</say-as></speak>", "'spell-out'> is not supported"),
        ("<speak><say-as interpret-as='cardinal'>twelve</say-as></speak>", "cannot read 'twelve'; write it as 1,024"),
        ("<speak><say-as interpret-as='ordinal'>1st place</say-as></speak>", "cannot read '1st place'"),
        ("<speak><say-as interpret-as='date'>2027-13-01</say-as></speak>", "write it as 2027-03-04"),
        ("<speak><say-as interpret-as='date' format='mdy'>2027-03-04</say-as></speak>", "write it as 03/04/2027"),
        ("<speak><say-as interpret-as='date' format='ydm'>x</say-as></speak>", "one of: ymd, mdy, dmy"),
        ("<speak><say-as interpret-as='cardinal' format='ymd'>1</say-as></speak>", "for interpret-as='date' only"),
        ("<speak><say-as interpret-as='telephone'>call me</say-as></speak>", "write it as 555-0199"),
        ("<speak><say-as interpret-as='characters'><sub alias='a'>b</sub></say-as></speak>", "<say-as> may hold only"),
        ("<speak><sub>WWW</sub></speak>", "<sub> needs an alias"),
        ("<speak><phoneme ph='hello'/></speak>", "<phoneme> needs the word it says"),
        ("<speak><phoneme ph='h3llo'>x</phoneme></speak>", "has '3', not in the model's phonemes"),
        (
            "<speak><phoneme alphabet='x-sampa' ph='h'>x</phoneme></speak>",
            "alphabet='x-sampa'> is not supported; use ipa",
        ),
        ("<speak><phoneme ph=''>x</phoneme></speak>", "needs 1 to 500 phonemes"),
        ("<speak><prosody pitch='high'>hi</prosody></speak>", "<prosody> has no attribute 'pitch'; it takes: rate"),
        ("<speak><prosody rate='+10%'>hi</prosody></speak>", "use x-slow, slow, medium, fast, x-fast or a percentage"),
        ("<speak><prosody rate='0%'>hi</prosody></speak>", "<prosody rate='0%'> is not supported"),
        (
            "<speak>" + "<prosody rate='100%'>" * MAX_DEPTH + "hi" + "</prosody>" * MAX_DEPTH + "</speak>",
            "nests more than 16",
        ),
    ],
)
def test_what_is_outside_the_subset_is_refused_naming_it(ssml, message):
    with pytest.raises(SsmlError) as refused:
        parse(ssml)
    assert message in str(refused.value)


@pytest.mark.parametrize(
    ("ssml", "message"),
    [
        ("<speak>Hello", "not well-formed XML: no element found: line 1, column 12"),
        ("<speak>a < b</speak>", "not well-formed XML: not well-formed (invalid token): line 1, column 10"),
        ("<speak>Hi</speak>trailing", "junk after document element: line 1, column 17"),
        ("<speak>\n<s>Hi</p></speak>", "mismatched tag: line 2, column 7"),
        ("<speak>&nbsp;</speak>", "undefined entity"),
        ('<!DOCTYPE speak [<!ENTITY x "lol">]><speak>&x;</speak>', "declares XML entities or a DTD of its own"),
        ('<!DOCTYPE speak SYSTEM "file:///etc/passwd"><speak>&x;</speak>', "refers to the entity &x;"),
    ],
)
def test_malformed_xml_and_entities_are_refused_with_the_parsers_position(ssml, message):
    with pytest.raises(SsmlError) as refused:
        parse(ssml)
    assert message in str(refused.value)


@pytest.mark.parametrize(
    "unit",
    ["a<!---->", "word <break time='1ms'/>", "<s>x</s>", "<say-as interpret-as='cardinal'>1</say-as> ", "&amp; "],
)
def test_parsing_is_linear_in_the_ssml(unit: str):
    """Counted (regex steps and lines of Python in the parser's modules), never timed."""

    def run(n: int) -> object:
        return parse("<speak>" + unit * (n // len(unit)) + "</speak>")

    counts = growth(run, (ssml_module, ssml_attributes, fingerprint_module), 2000)
    assert linear(counts, 2000), counts


MARKUP = st.sampled_from(
    [
        "<speak>", "</speak>", "<p>", "</p>", "<s>", "</s>", "<break/>", "<break time='1s'/>", "<break time='x'/>",
        "<say-as interpret-as='cardinal'>", "<say-as interpret-as='date'>", "</say-as>", "<sub alias='a'>", "</sub>",
        "<phoneme ph='hə'>", "</phoneme>", "<prosody rate='50%'>", "</prosody>", "<!-- c -->", "&amp;", "&x;", "<",
        ">", "&", "'", '"', " ", "12", "2027-03-04", "word", "<?pi x?>", "<![CDATA[a<b]]>", "<!DOCTYPE speak>",
    ]
)  # fmt: skip


@settings(deadline=None, max_examples=400)
@given(st.lists(MARKUP, max_size=30))
def test_any_markup_parses_or_is_refused_with_an_ssml_error(pieces: list[str]):
    try:
        parsed = parse("".join(pieces))
    except SsmlError:
        return
    assert parse(parsed.canonical).canonical == parsed.canonical


def test_deep_nesting_is_refused_before_it_costs_anything():
    deep = "<speak>" + "<prosody rate='100%'>" * 100_000 + "hi" + "</prosody>" * 100_000 + "</speak>"
    with pytest.raises(SsmlError, match="nests more than 16"):
        parse(deep)


@pytest.mark.parametrize(
    ("speed", "ssml", "message"),
    [
        (2.0, "<speak><prosody rate='x-fast'>hi</prosody> <prosody rate='200%'>no</prosody></speak>", "speed of 4, "),
        (2.0, "<speak><prosody rate='250%'>hi</prosody></speak>", "a speed of 5, outside the model's 0.25 to 4"),
        (0.5, "<speak><prosody rate='40%'>hi</prosody></speak>", "use a rate between 50% and 800%"),
    ],
)
def test_a_rate_that_takes_the_speed_outside_the_models_range_is_refused(speed, ssml, message):
    parsed = parse(ssml)
    if "speed of 4, " in message:
        check_speed(parsed, speed)  # 4.0 is the edge: still in range
        return
    with pytest.raises(SsmlError) as refused:
        check_speed(parsed, speed)
    assert message in str(refused.value)


def test_the_phoneme_alphabet_is_the_models_own():
    vocab = load_vocab()
    assert {c for c in vocab if unicodedata.category(c)[0] in "LM"} | {" "} == PHONEMES


def test_a_phoneme_segment_carries_ph_ids_and_a_pause_exact_samples(front):
    segments = ssml_segments(
        front, "<speak>Say<break time='333ms'/><phoneme ph='həlˈO'>hello</phoneme></speak>", "en-us"
    )
    say, pause, hello = segments
    assert pause.silence == round(0.333 * RATE) == 7992
    assert pause.token_ids == ()
    assert hello.token_ids == tuple(front.vocab[c] for c in "həlˈO")
    assert (hello.text, hello.start, hello.end, hello.index) == ("hello", 3, 8, 2)
    assert (say.text, say.start, say.end) == ("Say", 0, 3)


def test_ssml_with_nothing_to_say_is_refused_by_the_engine_too(front):
    with pytest.raises(EngineInputError, match="nothing to speak"):
        ssml_segments(front, "<speak><break time='1s'/>...</speak>", "en-us")
