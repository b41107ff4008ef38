//! squidbot-tools
