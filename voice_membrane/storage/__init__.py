"""Where media referenced by id lives: blob stores (``blobs``), reading a request's
blobs just before it is built (``blob_resolve``), large base64 in debug records
moved out to a store and back (``debug_sanitize``); docs/blobs.md."""
