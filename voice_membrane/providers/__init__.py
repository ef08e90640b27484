"""LLM sources: adapters over the vendors' SDKs, and replays of recorded streams."""
