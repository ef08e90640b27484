"""Normalized messages and requests: one vocabulary for every provider and format.

A conversation is a list of ``Message``s, each from a named ``participant`` with
content blocks (text, image, thinking, redacted thinking, tool use, tool result,
generated image). A ``Request`` adds the system prompt, the model settings, tool
definitions, stop sequences and formatting options. Formatters (``formats/``)
turn a request into what one provider's API takes.

These are pydantic models: a request is checked when it is built, and again by
``validate_request`` for the rules that span several fields, so a bad request
fails before any network call with a ``RequestError`` naming the field.
"""

from __future__ import annotations

import base64
import re
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ..infra.redact import quote
from .blob_source import BlobSource
from .names import ASSISTANT_ROLE_NAMES, SYSTEM_ROLE_NAMES, looks_alike, name_keys


class RequestError(ValueError):
    """A request that cannot be sent; the message names the offending field."""


# Every character str.splitlines() breaks on: a name holding one could forge a
# "Name:" line in a transcript.
LINE_BREAK: Final = re.compile(r"[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CacheControl(_Model):
    """Marks a prompt-cache breakpoint (Anthropic); other providers ignore it."""

    type: Literal["ephemeral"] = "ephemeral"
    ttl: Literal["5m", "1h"] | None = None


class TextContent(_Model):
    type: Literal["text"] = "text"
    text: str
    cache_control: CacheControl | None = None


class Base64Source(_Model):
    type: Literal["base64"] = "base64"
    media_type: str = Field(pattern=r"^image/[a-z0-9.+-]+$")
    data: str = Field(min_length=1)


class UrlSource(_Model):
    type: Literal["url"] = "url"
    url: str = Field(pattern=r"^(https?|data):")


class ImageContent(_Model):
    """An image: inline base64, a URL, or a blob in a ``blobs.BlobStore`` (read
    only when a provider request is built: ``blob_resolve.py``)."""

    type: Literal["image"] = "image"
    source: Annotated[Base64Source | UrlSource | BlobSource, Field(discriminator="type")]

    @field_validator("source")
    @classmethod
    def _an_image_blob(cls, source: Base64Source | UrlSource | BlobSource) -> Any:
        if isinstance(source, BlobSource) and not source.media_type.startswith("image/"):
            raise ValueError(
                f"an image blob's media_type must be image/*, not {source.media_type!r}"
            )
        return source


class ThinkingContent(_Model):
    """Extended thinking. Only a signed block can be sent back to Anthropic as
    thinking; see ``RequestOptions.convert_unsigned_thinking_to_text``."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class RedactedThinkingContent(_Model):
    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class ToolUseContent(_Model):
    type: Literal["tool_use"] = "tool_use"
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: dict[str, Any] = Field(default_factory=dict)
    signature: str | None = None  # Gemini: the call's thought signature, sent back as is


class ToolResultContent(_Model):
    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str = Field(min_length=1)
    content: str | list[Annotated[TextContent | ImageContent, Field(discriminator="type")]] = ""
    is_error: bool = False

    def text(self) -> str:
        """The result's text (images left out)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content if isinstance(part, TextContent))


class GenerationInfo(_Model):
    """How a generated image was made, as far as the provider says."""

    prompt: str | None = None  # the prompt the image was generated from
    revised_prompt: str | None = None  # the provider's rewrite of it, when it reports one
    model: str | None = None
    size: str | None = None  # "1024x1024", …
    quality: str | None = None  # "low", "medium", "high", "auto", …


class GeneratedImageContent(_Model):
    """An image the model generated: base64 ``data``, or ``blob_id`` once it was
    stored in a blob store (then the history references it by id), or both (as
    it passes through the callbacks, freshly stored). ``is_preview`` marks a
    partial image streamed before the final one. See docs/images.md."""

    type: Literal["generated_image"] = "generated_image"
    data: str | None = Field(None, min_length=1)
    blob_id: str | None = Field(None, min_length=1)
    mime_type: str = Field("image/png", pattern=r"^image/[a-z0-9.+-]+$")
    is_preview: bool = False
    generation: GenerationInfo | None = None

    @model_validator(mode="after")
    def _data_or_blob(self) -> GeneratedImageContent:
        if self.data is None and self.blob_id is None:
            raise ValueError("a generated image needs data or a blob_id")
        return self

    def base64_data(self, where: str) -> str:
        """The image's base64 data; ``RequestError`` naming ``where`` and the blob
        when the image is held only by reference and was not resolved."""
        if self.data is None:
            raise RequestError(
                f"{where}: generated image blob {self.blob_id!r} was not resolved to its bytes"
            )
        return self.data

    def decoded(self) -> bytes:
        """The image's bytes (``ValueError`` when it holds only a blob id)."""
        if self.data is None:
            raise ValueError(f"generated image blob {self.blob_id!r} holds no data here")
        return base64.b64decode(self.data)


ContentBlock = Annotated[
    TextContent
    | ImageContent
    | ThinkingContent
    | RedactedThinkingContent
    | ToolUseContent
    | ToolResultContent
    | GeneratedImageContent,
    Field(discriminator="type"),
]


class Message(_Model):
    """One turn of the conversation. ``content`` may be given as a plain string."""

    participant: str
    content: list[ContentBlock]
    cache_control: CacheControl | None = None  # a cache breakpoint after this message

    @field_validator("content", mode="before")
    @classmethod
    def _text_shorthand(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [{"type": "text", "text": value}]
        return value

    def text(self) -> str:
        """The message's text blocks joined."""
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


class ToolDefinition(_Model):
    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")
    description: str = ""
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )

    @field_validator("input_schema")
    @classmethod
    def _object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError('a tool\'s input_schema must be a JSON schema with "type": "object"')
        return value


class ModelConfig(_Model):
    model: str = Field(min_length=1)
    max_tokens: int = Field(1024, gt=0)
    temperature: float | None = Field(None, ge=0, le=2)
    thinking_budget: int | None = Field(None, ge=1024)


class ParticipantRules(_Model):
    """When a prefill format leaves out a message's ``Name:`` prefix."""

    suppress_empty_names: bool = True
    suppress_consecutive_same_participant: bool = False
    always_suppress: tuple[str, ...] = ()


class RequestOptions(_Model):
    """How a request is formatted. Formatters read the options they understand."""

    assistant_participant: str = Field("Assistant", min_length=1)
    human_participant: str = "User"  # the other side in "simple" participant mode
    participant_mode: Literal["simple", "multiuser"] = "simple"
    max_participants_for_stop: int = Field(10, ge=0)
    prompt_caching: bool = True
    context_prefix: str | None = None  # text placed before the conversation (seeding)
    convert_unsigned_thinking_to_text: bool = False
    unsupported_media: Literal["error", "strip"] = "error"
    participant_rules: ParticipantRules = ParticipantRules()
    formatter: str | None = None  # per-request override of the membrane's formatter
    provider_params: dict[str, Any] = Field(default_factory=dict)  # passed to the API as is


class Request(_Model):
    messages: list[Message] = Field(min_length=1)
    config: ModelConfig
    system_prompt: str | None = None
    tools: list[ToolDefinition] = Field(default_factory=list)
    stop_sequences: list[str] = Field(default_factory=list)
    options: RequestOptions = RequestOptions()

    @field_validator("stop_sequences")
    @classmethod
    def _non_empty_stops(cls, value: list[str]) -> list[str]:
        for n, stop in enumerate(value):
            if not stop:
                raise ValueError(f"stop sequence {n} is empty")
        return value


def make_request(data: dict[str, Any]) -> Request:
    """A ``Request`` from plain data; ``RequestError`` naming the field otherwise."""
    try:
        request = Request.model_validate(data)
    except ValidationError as exc:
        raise RequestError(describe_validation_error(exc)) from None
    validate_request(request)
    return request


def validate_request(request: Request) -> None:
    """Rules that span fields: participant names are one line each, no user is
    named like the assistant, a role or another user (``_check_names_apart``),
    each tool result answers a tool use before
    it, tool names are unique, the thinking budget fits in ``max_tokens``."""
    options = request.options
    named = [
        ("options.assistant_participant", options.assistant_participant),
        ("options.human_participant", options.human_participant),
        *(
            (f"messages[{m}].participant", msg.participant)
            for m, msg in enumerate(request.messages)
        ),
    ]
    for where, name in named:
        if LINE_BREAK.search(name):
            raise RequestError(f"{where}: {quote(name)} contains a line break; a name is one line")
    if options.human_participant == options.assistant_participant:
        raise RequestError(
            f"options.human_participant: {quote(options.human_participant)} is also the "
            "assistant's name; the user's messages would be sent as the assistant's"
        )
    _check_names_apart(request)
    names = [tool.name for tool in request.tools]
    for n, name in enumerate(names):
        if name in names[:n]:
            raise RequestError(f"tools[{n}].name: duplicate tool name {name!r}")
    budget = request.config.thinking_budget
    if budget is not None and budget >= request.config.max_tokens:
        raise RequestError(
            f"config.thinking_budget: {budget} must be less than config.max_tokens "
            f"({request.config.max_tokens})"
        )
    seen_ids: set[str] = set()
    for m, message in enumerate(request.messages):
        for c, block in enumerate(message.content):
            if isinstance(block, ToolUseContent):
                seen_ids.add(block.id)
            elif isinstance(block, ToolResultContent) and block.tool_use_id not in seen_ids:
                raise RequestError(
                    f"messages[{m}].content[{c}].tool_use_id: {block.tool_use_id!r} "
                    "answers no earlier tool_use"
                )


def participant_problem(options: RequestOptions, name: str) -> str | None:
    """Why ``name`` cannot be a user's: it is, or looks like (``names.py``: case,
    spaces, dots, look-alike letters, full width, invisible characters), the
    assistant's name or a system or assistant role; None when it can."""
    assistant = options.assistant_participant
    if name == assistant:
        return "that is the assistant's name"
    for role in (assistant, *SYSTEM_ROLE_NAMES, *ASSISTANT_ROLE_NAMES):
        if looks_alike(name, role):
            whose = "the assistant's name" if role == assistant else "the role name"
            return f"{quote(name)} looks like {whose} {quote(role)}; choose a name that does not"
    return None


def _check_names_apart(request: Request) -> None:
    """No user speaks as someone they are not: the names written for users (the
    human participant; in multiuser mode each message's) pass
    ``participant_problem``, and in multiuser mode no two look alike."""
    options = request.options
    problem = participant_problem(options, options.human_participant)
    if problem is not None:
        raise RequestError(f"options.human_participant: {problem}")
    if options.participant_mode != "multiuser":
        return  # message names are not written: every user is the human participant
    seen: dict[str, str] = {}  # key → the first name with it
    for m, message in enumerate(request.messages):
        name = message.participant
        if name == options.assistant_participant:
            continue  # the assistant's own message
        problem = participant_problem(options, name)
        if problem is not None:
            raise RequestError(f"messages[{m}].participant: {problem}")
        for key in name_keys(name):
            other = seen.setdefault(key, name)
            if other != name:
                raise RequestError(
                    f"messages[{m}].participant: {quote(name)} looks like another "
                    f"participant's name {quote(other)}; choose a name that does not"
                )


def describe_validation_error(exc: ValidationError) -> str:
    """A pydantic error as one line: ``field.path: what is wrong``."""
    error = exc.errors()[0]
    where = "".join(
        f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
    ).lstrip(".")
    more = f" ({exc.error_count() - 1} more problem(s))" if exc.error_count() > 1 else ""
    return f"{where or 'request'}: {error['msg']}{more}"
