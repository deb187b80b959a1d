"""The Transformer course library."""
