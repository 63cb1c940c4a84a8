"""Values: pure data and functions the core builds on (layer 0, private)."""
