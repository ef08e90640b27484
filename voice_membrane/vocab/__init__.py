"""The vocabulary every layer speaks: parsed events (``events``), what a provider's
stream yields (``provider_output``), requests and messages (``messages``, with
``blob_source`` for media held by id) and audio (``audio``). It imports only
``infra``."""
