"""Model providers: the async seam between the turn runner and a model."""

from .base import Provider, ProviderError, TextChunk, Usage

__all__ = ["Provider", "ProviderError", "TextChunk", "Usage"]
