"""How well search finds what it should: hand-written models, cross-implementation queries, index encoders."""
