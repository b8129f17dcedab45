"""The memory-tool calls pipeline: which tool calls read or write an agent memory system, and what they returned."""
