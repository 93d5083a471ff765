"""How long a listener expects silence to last at a boundary of the text, in milliseconds.

One table for documents (the pause after each part, by its break letter: :mod:`producers.document_audio`)
and for SSML (the pause at the end of an ``<s>`` or a ``<p>``: :mod:`contracts.ssml`), so a sentence or a
paragraph sounds the same length of silence wherever it ends.
"""

from __future__ import annotations

from typing import Final

PAUSE_MS: Final = {"s": 250, "p": 700, "b": 1500, "c": 2000}
"""``s``: a sentence (a long paragraph split), ``p``: a paragraph, ``b``: a scene break, ``c``: a chapter."""
