"""The listening cores, sans-I/O: voice activity detection and endpointing,
fed audio and counting samples, never the wall clock."""
