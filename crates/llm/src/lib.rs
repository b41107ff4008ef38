//! squidbot-llm
