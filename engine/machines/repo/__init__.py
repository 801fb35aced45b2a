"""The repo machine: ``machine.py`` holds its dispatch table; the other modules the handlers it names."""
