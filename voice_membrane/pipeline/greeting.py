"""The assistant speaks first: a conversation's greeting (``[conversation]``).

A greeting is the conversation's first turn, run as any turn is (chunked,
voiced, interruptible, reported), with no user words before it. Providers want
a conversation to open with the user, so the turn's user message is a cue: the
instructions the LLM writes the greeting from, or, for a greeting said as
written, ``SAID_CUE``. The cue and what was heard of the greeting stay in the
history, so later replies know the assistant has greeted the user.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..membrane.membrane import Membrane
from ..providers.said_text import SaidText
from .conversation_config import ConversationConfig

# What the history says came before a greeting said as written.
SAID_CUE = "(The user has joined the conversation. Greet them.)"


@dataclass(frozen=True)
class Greeting:
    """``text``: said as written; else ``instructions``: the LLM writes it."""

    text: str | None = None
    instructions: str | None = None
    _said: Membrane | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if (self.text is None) == (self.instructions is None):
            raise ValueError("a greeting is a text or instructions, one of the two")
        if self.text is not None:  # made once: the same text every time
            said = Membrane(SaidText(self.text), first_token_deadline_s=None)
            object.__setattr__(self, "_said", said)

    @property
    def cue(self) -> str:
        """The user message the greeting's turn answers."""
        return self.instructions if self.instructions is not None else SAID_CUE

    @property
    def said(self) -> Membrane | None:
        """The membrane that says the text (None: the LLM writes the greeting)."""
        return self._said


def greeting_for(config: ConversationConfig) -> Greeting | None:
    if config.greeting is not None:
        return Greeting(text=config.greeting)
    if config.greeting_instructions is not None:
        return Greeting(instructions=config.greeting_instructions)
    return None
