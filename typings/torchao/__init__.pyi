# Stubs for the parts of torchao (which ships no types) that the tests use.
