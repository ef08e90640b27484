"""The ``[llm]`` settings of the embedded model's sampling (``LlamaSampling``): kept
here, beside ``LlmConfig`` which takes them in, so the pipeline file's one section
holds them. Cloud models and recordings ignore them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..providers.llama_sampling import LlamaSampling

_DEFAULT = LlamaSampling()


class EmbeddedSampling(BaseModel):
    """Defaults and why: docs/pipelines.md ("The embedded model's answers")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    top_p: float = Field(_DEFAULT.top_p, gt=0, le=1)
    top_k: int = Field(_DEFAULT.top_k, ge=0)  # 0: no limit
    min_p: float = Field(_DEFAULT.min_p, ge=0, le=1)
    repeat_penalty: float = Field(_DEFAULT.repeat_penalty, ge=1, le=2)
    stop: tuple[str, ...] = Field(_DEFAULT.stop, max_length=16)
    max_sentences: int = Field(_DEFAULT.max_sentences, ge=0)  # 0: no limit

    def sampling(self) -> LlamaSampling:
        """The settings as the embedded model takes them."""
        return LlamaSampling(
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=self.min_p,
            repeat_penalty=self.repeat_penalty,
            stop=tuple(s for s in self.stop if s),
            max_sentences=self.max_sentences,
        )
