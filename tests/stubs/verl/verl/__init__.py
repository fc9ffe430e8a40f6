"""Stub of verl's package root (the real one imports the GPU stack); see tests/stubs/verl/README.md."""
