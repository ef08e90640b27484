"""Speech-to-text engines behind one interface (``base.SttEngine``)."""
