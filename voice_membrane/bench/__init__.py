"""`voice-membrane bench`: first-audio latency per pipeline, per stage, against the
ideal (docs/bench.md). A face of the library, beside ``cli`` and ``server``."""
