"""Symbolic shape policies for tensors and (recursively) tensor subclasses. Imports only torch and sympy."""
