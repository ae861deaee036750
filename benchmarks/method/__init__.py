"""What the motif method keeps and learns before any score: its splits and its stage 1."""
