"""GeminiPrefillFormatter: Gemini continues a transcript whose turns end in ``<|eot|>``.

    Alice: Hello<|eot|>Bob: Hi there<|eot|>Claude:

The token closes every turn and nothing else separates them. Gemini may write
it (or stop on it) when its own turn ends: ``BuiltRequest.end_of_turn`` tells
the Gemini provider to strip it from the output and read it as the end of the
turn. Otherwise as ``completions``: no tools, no images.
"""

from __future__ import annotations

from .completions import CompletionsFormatter
from .participants import NAME_FORMAT, SuppressionPredicate


class GeminiPrefillFormatter(CompletionsFormatter):
    """``completions`` with no separator and the eot token as the end of turn.

    Args:
        eot_token: closes each turn; a stop sequence and ``BuiltRequest.end_of_turn``.
        name_format: the ``Name:`` prefix, with ``{name}``.
        suppression: an extra rule for leaving out ``Name:`` prefixes.
    """

    name = "gemini-prefill"

    def __init__(
        self,
        eot_token: str = "<|eot|>",
        name_format: str = NAME_FORMAT,
        suppression: SuppressionPredicate | None = None,
    ) -> None:
        if not eot_token:
            raise ValueError("eot_token must not be empty")
        super().__init__(eot_token, name_format, "", suppression)
        self.end_of_turn = eot_token
