"""Tool results bounded before the model, the history or any client sees them.

A tool answers with whatever it likes: an MCP server's 3 MB page, a function's
list of ten thousand rows. Every result of a reply's tool loop stays in each
later request of that reply and flows out as a ``tool_result`` block, so one
unbounded result costs every later call and every event that carries it. A
``ResultBudget`` cuts each result to ``per_result`` characters and all of one
reply's results together to ``per_reply``, ending a cut result with a marker
that tells the model how much it does not see.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..vocab.messages import ImageContent, TextContent, ToolResultContent

# ~5,000 tokens: a page of search results or a long document's opening fits; a
# whole web page or file does not, and must not ride along in every later call.
DEFAULT_MAX_RESULT_CHARS = 20_000
# Many medium results (a model calling a tool fifty times) are bounded too.
DEFAULT_MAX_REPLY_RESULT_CHARS = 100_000


def cut_marker(cut: int, total: int) -> str:
    """What the model reads where a result was cut."""
    return f"\n[tool result cut here: {cut:,} of its {total:,} characters are not shown]"


class ResultBudget:
    """The limits of one reply's tool results (see the module's docstring)."""

    def __init__(
        self,
        per_result: int = DEFAULT_MAX_RESULT_CHARS,
        per_reply: int = DEFAULT_MAX_REPLY_RESULT_CHARS,
    ) -> None:
        if per_result < 1 or per_reply < 1:
            raise ValueError("tool result limits must be at least 1 character")
        self.per_result, self.per_reply = per_result, per_reply
        self.used = 0  # characters of results kept so far in this reply

    def cap(self, results: Sequence[ToolResultContent]) -> list[ToolResultContent]:
        """``results`` in order, each within what is left of the budget."""
        return [self._cap(result) for result in results]

    def _cap(self, result: ToolResultContent) -> ToolResultContent:
        limit = max(0, min(self.per_result, self.per_reply - self.used))
        content = result.content
        if isinstance(content, str):
            if len(content) <= limit:
                self.used += len(content)
                return result
            self.used += limit
            marked = content[:limit] + cut_marker(len(content) - limit, len(content))
            return result.model_copy(update={"content": marked})
        total = sum(len(part.text) for part in content if isinstance(part, TextContent))
        if total <= limit:
            self.used += total
            return result
        # Text parts kept in order up to the limit; images are not text and stay.
        left = limit
        parts: list[TextContent | ImageContent] = []
        for part in content:
            if isinstance(part, TextContent):
                if left <= 0:
                    continue
                if len(part.text) > left:
                    part = part.model_copy(update={"text": part.text[:left]})
                left -= len(part.text)
            parts.append(part)
        parts.append(TextContent(text=cut_marker(total - limit, total)))
        self.used += limit
        return result.model_copy(update={"content": parts})
