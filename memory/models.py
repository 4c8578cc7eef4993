"""Memory: blocks (Loro documents), long-term memory."""
