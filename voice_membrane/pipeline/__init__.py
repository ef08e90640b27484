"""The streaming graph of a turn: stages, turns, sessions, pipeline files and their parts."""
