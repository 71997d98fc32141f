"""Model providers: the async seam between the turn runner and a model."""

from branchwise.core.errors import ProviderError
from branchwise.core.providers.base import Provider, TextChunk, Usage

__all__ = ["Provider", "ProviderError", "TextChunk", "Usage"]
