"""Eager-semantics rules the analysis applies (views, `.data =`, set_(), version counters, autograd history), each
read from the functionalized run's records. What each computes is one of the four kinds of eager state the eager
record observes directly (subclassaot.eager, Note [The Eager Record]); each moves there and is deleted in turn."""
