"""The compile stages, data flowing one way: inputs -> fakify -> desugar -> analyze -> trace (joint / partition) ->
backend, with the guards built along the way. `subclassaot.api` is the only code that knows their order.

rules/ holds the eager-semantics rules the analysis applies, one corner of eager each. They are being folded into
the eager record (subclassaot.eager), its fixups and one refusal catalogue (Note [The Eager Record]); a new corner
case is a fact of the record, not a new module here."""
