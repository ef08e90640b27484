"""The ``[conversation]`` section of a pipeline file: how a conversation opens.

``greeting`` is said as written when a conversation starts (the page's session,
``run --listen``, a phone call); ``greeting_instructions`` has the LLM write the
greeting instead, from these instructions. At most one of the two; neither:
the assistant waits for the user, as before.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

# A greeting is a sentence or two: longer text is a mistake (a pasted prompt).
MAX_GREETING_CHARS = 1000
MAX_INSTRUCTIONS_CHARS = 4000


class ConversationConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    greeting: str | None = Field(None, min_length=1, max_length=MAX_GREETING_CHARS)
    greeting_instructions: str | None = Field(None, min_length=1, max_length=MAX_INSTRUCTIONS_CHARS)

    @model_validator(mode="after")
    def _one_greeting(self) -> ConversationConfig:
        if self.greeting is not None and self.greeting_instructions is not None:
            raise ValueError(
                "give greeting (said as written) or greeting_instructions (the LLM "
                "writes it), not both"
            )
        if self.greeting is not None and not self.greeting.strip():
            raise ValueError("greeting is blank")
        return self
