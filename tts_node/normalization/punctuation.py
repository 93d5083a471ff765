"""What happens to an abbreviation's period, and spaces around spoken symbols."""

from __future__ import annotations

import re
from typing import Final

# The segmenter (tts_node.segmenter, rule 1) ends a sentence at a period before
# the end, a line break or a capital; deciding the same way here keeps the voice's
# sentence-final fall where the segmenter put the sentence end.
_SENTENCE_END: Final = re.compile("[\"'\u201d\u2019)\\]]*(?:\\Z|[ \\t]*[\\n\\r]|\\s+(?=[A-Z]))")
_TEXT_END: Final = re.compile("[\"'\u201d\u2019)\\]]*(?:\\Z|[ \\t]*[\\n\\r])")


def period_after(text: str, end: int, *, introduces: bool = False) -> str:
    """A period if the abbreviation's period just before ``end`` also ends the sentence, else ""."

    An abbreviation that ``introduces`` what follows (a title before a name,
    "vs.", "e.g.") ends a sentence only at the end of the text or a line: a
    capital after it is the name it introduces.
    """
    return "." if (_TEXT_END if introduces else _SENTENCE_END).match(text, end) else ""


def spaced(match: re.Match[str], words: str) -> str:
    """``words`` in place of ``match``, one space on a side that had blanks or touches a letter or digit.

    "R&D" → "R and D", "Tom  &  Jerry" → "Tom and Jerry", "(&)" → "(and)".
    """
    text, start, end = match.string, match.start(), match.end()
    before = " " if text[start:end][:1].isspace() or (start > 0 and text[start - 1].isalnum()) else ""
    after = " " if text[start:end][-1:].isspace() or (end < len(text) and text[end].isalnum()) else ""
    return before + words + after
