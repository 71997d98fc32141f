"""Taking a conversation out: Markdown, versioned JSON and ChatGPT's format, over the projection."""
