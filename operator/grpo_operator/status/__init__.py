"""Pure status derivation: observed children in, the operator-owned status fields out."""
