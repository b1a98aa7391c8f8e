"""The eager record and what is read from it: eager is the specification (Note [The Eager Record])."""
