"""How fast narbench's steps run: generation, training, embedding, scoring, splitting, extraction, search."""
