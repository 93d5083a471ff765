"""What Litestar cannot infer for /schema: the audio a route answers with, and a body read by hand.

Routes whose 200 is audio in the format the request asked for use
:class:`AudioOperation`, which lists every audio media type voxlog writes
(a route answers one of them). ``POST /v1/documents`` reads its body itself
(JSON, or a multipart upload), so :class:`DocumentOperation` documents both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final

from litestar.openapi.spec import OpenAPIMediaType, OpenAPIResponse, Operation, RequestBody, Schema
from litestar.openapi.spec.enums import OpenAPIFormat, OpenAPIType
from pydantic import BaseModel

from foundation.audio_formats import media_type, supported_formats

_BINARY: Final = Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY)
_EVENT: Final = Schema(
    type=OpenAPIType.OBJECT,
    required=["data"],
    properties={
        "event": Schema(type=OpenAPIType.STRING),
        "data": Schema(
            type=OpenAPIType.STRING,
            description='JSON, as OpenAI\'s CreateSpeechResponseStreamEvent: {"type": "speech.audio.delta", "audio":'
            ' <base64>} for each piece of the file, then {"type": "speech.audio.done", "usage": {"input_tokens",'
            ' "output_tokens", "total_tokens"}}, or {"type": "error", "error": {...}}.',
        ),
        "id": Schema(type=OpenAPIType.STRING),
        "retry": Schema(type=OpenAPIType.INTEGER),
    },
    description="One server-sent event: before OpenAPI 3.2's itemSchema, an event stream's schema is each event's.",
)


def audio_media_types(formats: tuple[str, ...] | None = None) -> list[str]:
    """Every media type voxlog answers audio with (``formats``: these only), without parameters."""
    return sorted({media_type(fmt).split(";")[0] for fmt in formats or supported_formats()})


@dataclass
class AudioOperation(Operation):
    """An operation whose 200 is audio (any of ``media_types``), and ``text/event-stream`` with ``events``."""

    media_types: ClassVar[tuple[str, ...] | None] = None
    events: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.responses is None or "200" not in self.responses:
            return
        ok = self.responses["200"]
        if not isinstance(ok, OpenAPIResponse):
            return
        content = {kind: OpenAPIMediaType(schema=_BINARY) for kind in audio_media_types(self.media_types)}
        if self.events:
            content["text/event-stream"] = OpenAPIMediaType(schema=_EVENT)
        ok.content = content


@dataclass
class WavOperation(AudioOperation):
    media_types: ClassVar[tuple[str, ...] | None] = ("wav",)


@dataclass
class SpeechOperation(AudioOperation):
    events: ClassVar[bool] = True


@dataclass
class StitchedOperation(AudioOperation):
    """A document's stitched audio: the formats a document can be stitched in."""

    media_types: ClassVar[tuple[str, ...] | None] = ("wav", "mp3", "pcm")


def schema_of(json_schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Schema:
    """A JSON Schema (pydantic's, of a flat model) as Litestar's OpenAPI schema object."""
    defs = defs if defs is not None else json_schema.get("$defs", {})
    if "$ref" in json_schema:
        return schema_of(defs[json_schema["$ref"].rsplit("/", 1)[1]], defs)
    kind = json_schema.get("type")
    return Schema(
        type=OpenAPIType(kind) if kind else None,
        any_of=[schema_of(s, defs) for s in json_schema["anyOf"]] if "anyOf" in json_schema else None,
        properties={k: schema_of(v, defs) for k, v in json_schema.get("properties", {}).items()} or None,
        required=json_schema.get("required"),
        items=schema_of(json_schema["items"], defs) if "items" in json_schema else None,
        enum=json_schema.get("enum"),
        const=json_schema.get("const"),
        default=json_schema.get("default"),
        description=json_schema.get("description"),
        max_length=json_schema.get("maxLength"),
        min_length=json_schema.get("minLength"),
        format=OpenAPIFormat(json_schema["format"]) if "format" in json_schema else None,
        title=json_schema.get("title"),
    )


def upload_schema(options: type[BaseModel]) -> Schema:
    """A multipart upload: the document as ``file``, ``options``' fields as form fields."""
    form = schema_of(options.model_json_schema())
    properties = dict(form.properties or {})
    properties["file"] = Schema(
        type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY, description="The document: .epub, .md or text."
    )
    return Schema(type=OpenAPIType.OBJECT, properties=properties, required=["file", *(form.required or [])])


def document_operation(body: type[BaseModel], options: type[BaseModel]) -> type[Operation]:
    """The operation class of a route that takes ``body`` as JSON, or a file with ``options`` as form fields."""

    @dataclass
    class DocumentOperation(Operation):
        def __post_init__(self) -> None:
            self.request_body = RequestBody(
                required=True,
                content={
                    "application/json": OpenAPIMediaType(schema=schema_of(body.model_json_schema())),
                    "multipart/form-data": OpenAPIMediaType(schema=upload_schema(options)),
                },
            )

    return DocumentOperation


_CAPTION: Final = Schema(
    type=OpenAPIType.OBJECT,
    properties={
        "text": Schema(type=OpenAPIType.STRING),
        "start_ms": Schema(type=OpenAPIType.INTEGER),
        "end_ms": Schema(type=OpenAPIType.INTEGER),
    },
    required=["text", "start_ms", "end_ms"],
)


@dataclass
class CaptionsOperation(Operation):
    """Captions: SRT, WebVTT, or JSON with every word and the cues (``?format=``)."""

    def __post_init__(self) -> None:
        if self.responses is None or not isinstance(ok := self.responses.get("200"), OpenAPIResponse):
            return
        listed = Schema(type=OpenAPIType.ARRAY, items=_CAPTION)
        captions = Schema(
            type=OpenAPIType.OBJECT,
            properties={"duration_ms": Schema(type=OpenAPIType.INTEGER), "words": listed, "cues": listed},
            required=["duration_ms", "words", "cues"],
        )
        ok.content = {
            "application/x-subrip": OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING)),
            "text/vtt": OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING)),
            "application/json": OpenAPIMediaType(schema=captions),
        }
