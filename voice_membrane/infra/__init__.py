"""Small infrastructure any layer may use, importing nothing of the project:
``redact`` (keys masked in every message), ``surrogates`` (lone surrogates made
encodable), ``heap`` (the start-up heap frozen), ``exception_groups``."""
