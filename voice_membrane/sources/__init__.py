"""Where the user's voice comes from: microphone, a WAV file in real time."""
