"""Model providers: the async seam between the turn runner and a model."""
