"""Writing a subclass: the flatten protocol as torch defines it, checked (protocol.py), and a base class that
derives it, an op table and aliasing from declarations (wrapper_tensor.py). Imports nothing else of subclassaot
but errors and the torch facade."""
